"""A non-finite loss or gradient raises a clear error naming the term and the step, instead of passing silently."""
import pyro
import pytest
import torch
from pyro.infer import SVI, Trace_ELBO

from helpers import collider_problem, setup_guide
from pyro_dag.infer import DAGELBO, GaussianNaturalGradient, NonFiniteLossError, SinkNaturalGradient
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.checks import check_finite_gradients, check_finite_loss, data_scale_note, training_step

# data scales whose squares overflow the dtype (1e400 > 1.8e308; 1e40 > 3.4e38): the model refuses them
OVERFLOW = [(torch.float64, 1e200), (torch.float32, 1e20)]
# data scales whose squares are finite but whose loss (a sum of squares over 12 cases divided by 2 tau^2 = 0.02)
# overflows: the model accepts them, the loss is inf, and the guards must name it
LOSS_OVERFLOW = [(torch.float64, 3e153), (torch.float32, 5e18)]


def scaled_collider(dtype, scale):
    model, inputs, data = collider_problem()
    model = model.to(dtype)
    inputs = {k: v.to(dtype) for k, v in inputs.items()}
    data = {k: v.to(dtype) * scale for k, v in data.items()}
    return model, inputs, data


def guide_params(guide):
    return {name: p.detach().clone() for name, p in guide.named_parameters()}


@pytest.mark.parametrize("dtype,scale", OVERFLOW)
@pytest.mark.parametrize("elbo", ["dagelbo", "trace_elbo"])
def test_data_whose_squares_overflow_is_refused_by_the_model(dtype, scale, elbo):
    """The user's own SVI loop, under any ELBO: the model names the data and the fix before any loss is formed."""
    from pyro.infer.autoguide import AutoNormal
    from pyro_dag import DAGInputError

    model, inputs, data = scaled_collider(dtype, scale)
    if elbo == "dagelbo":
        guide, loss = AutoStructuredGuide(model, precision="chordal"), DAGELBO(num_particles=2)
    else:
        guide, loss = AutoNormal(model), Trace_ELBO()
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), loss)
    with pytest.raises(DAGInputError, match=r"data\['w3'\] reaches .* whose square overflows .*Standardise"):
        svi.step(inputs, data)
    huge_input = {k: v * scale for k, v in inputs.items()}
    model, _, data = scaled_collider(dtype, 1.0)
    with pytest.raises(DAGInputError, match=r"inputs\['x1'\] reaches"):
        model(huge_input, data)


@pytest.mark.parametrize("dtype,scale", LOSS_OVERFLOW)
@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_svi_with_dagelbo_raises_at_the_first_step(dtype, scale, structure):
    model, inputs, data = scaled_collider(dtype, scale)
    guide = AutoStructuredGuide(model, precision=structure)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=2))
    with pytest.raises(NonFiniteLossError) as exc:
        svi.step(inputs, data)
    msg = str(exc.value)
    assert "DAGELBO evaluation" in msg
    assert "expected log-likelihood of node 'w3'" in msg
    assert "large scale" in msg and "learning rate" in msg
    assert "The largest |value| in the model's arguments is" in msg  # the data's magnitude against the limit
    # nothing was written: the parameters are still finite and a correctly scaled problem trains on
    assert all(torch.isfinite(p).all() for p in guide.parameters())


@pytest.mark.parametrize("dtype,scale", LOSS_OVERFLOW)
def test_dagelbo_loss_raises(dtype, scale):
    model, inputs, data = scaled_collider(dtype, scale)
    guide = AutoStructuredGuide(model, precision="chordal")
    guide(inputs, data)
    with pytest.raises(NonFiniteLossError, match="node 'w3'"):
        DAGELBO(num_particles=2).loss(model, guide, inputs, data)


def test_a_finite_problem_is_unaffected():
    model, inputs, data = collider_problem()
    guide = AutoStructuredGuide(model, precision="chordal")
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=2))
    losses = [svi.step(inputs, data) for _ in range(3)]
    assert all(torch.isfinite(torch.tensor(losses)))


def test_dagelbo_names_a_non_finite_kl():
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data, structure="mean_field", randomize=False)
    with torch.no_grad():
        guide.family.locs.w1_unconstrained.fill_(float("inf"))  # a diverged guide parameter
    with pytest.raises(NonFiniteLossError, match=r"KL\(q\(U\) \|\| p\(U\)\)"):
        DAGELBO(num_particles=2).differentiable_loss(model, guide, inputs, data)


def test_dagelbo_names_a_non_finite_gradient():
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data, structure="mean_field", randomize=False)
    p = guide.family.locs.w2_unconstrained
    hook = p.register_hook(lambda g: g * float("nan"))  # finite loss, NaN gradient
    try:
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=2))
        before = guide_params(guide)
        with pytest.raises(NonFiniteLossError, match=r"the loss is finite .* gradient of parameter '.*locs\.w2'"):
            svi.step(inputs, data)
    finally:
        hook.remove()
    after = guide_params(guide)
    assert all(torch.equal(before[k], after[k]) for k in before)  # the optimiser did not step


@pytest.mark.parametrize("dtype,scale", LOSS_OVERFLOW)
def test_gaussian_natural_gradient_names_its_step(dtype, scale):
    model, inputs, data = scaled_collider(dtype, scale)
    guide = AutoStructuredGuide(model, precision="chordal")
    guide(inputs, data)
    ng = GaussianNaturalGradient(model, guide, DAGELBO(num_particles=2), step_size=0.1)
    with pytest.raises(NonFiniteLossError, match="GaussianNaturalGradient, step 1: DAGELBO evaluation.*'w3'"):
        ng.step(inputs, data)


def test_gaussian_natural_gradient_with_trace_elbo_raises():
    """Trace_ELBO does not check its loss; the natural-gradient step does."""
    model, inputs, data = scaled_collider(*LOSS_OVERFLOW[0])
    guide = AutoStructuredGuide(model, precision="chordal")
    guide(inputs, data)
    ng = GaussianNaturalGradient(model, guide, Trace_ELBO(), step_size=0.1)
    before = guide_params(guide)
    with pytest.raises(NonFiniteLossError, match="GaussianNaturalGradient, step 1: the loss of Trace_ELBO is"):
        ng.step(inputs, data)
    after = guide_params(guide)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_sink_natural_gradient_names_node_and_step():
    # data whose squares overflow no longer reach the update (the model refuses them); a diverged parent does
    model, inputs, data = collider_problem()
    guide = AutoStructuredGuide(model, precision="mean_field")
    guide(inputs, data)
    with torch.no_grad():
        guide.family.locs.w1_unconstrained.fill_(float("nan"))  # a parent diverged in an earlier step
    ng = SinkNaturalGradient(model, guide, step_size=1.0)
    before = guide_params(guide)
    with pytest.raises(NonFiniteLossError, match="SinkNaturalGradient step 1: the update of node 'w3'"):
        ng.step(inputs, data)
    after = guide_params(guide)
    sink = [k for k in before if "w3" in k]
    assert sink and all(torch.equal(before[k], after[k]) for k in sink)  # the sink was not overwritten with NaN


def test_fit_collider_names_the_step(monkeypatch):
    import pyro_dag.experiments.collider as experiment
    from pyro_dag.datasets import collider

    def scaled(seed=0):
        ds = collider(seed=seed)
        ds.data = {k: v * 3e153 for k, v in ds.data.items()}  # finite squares, infinite loss
        return ds

    monkeypatch.setattr(experiment, "collider", scaled)
    with pytest.raises(NonFiniteLossError, match=r"fit_collider, step 1: DAGELBO evaluation.*'w3'") as exc:
        experiment.fit_collider(steps=5, progress=False, num_eval_samples=10)
    assert exc.value.step == 1


def test_training_step_prefixes_once():
    with pytest.raises(NonFiniteLossError) as exc:
        with training_step("outer", 7):
            with training_step("inner", 3, record=False):
                check_finite_loss(float("nan"), "the loss")
    assert str(exc.value).startswith("outer, step 7: inner, step 3: the loss is nan")
    assert exc.value.step == 7
    with pytest.raises(NonFiniteLossError) as exc:
        with training_step("outer", 7):
            with training_step("inner", 3):
                check_finite_loss(float("inf"), "the loss")
    assert str(exc.value).startswith("inner, step 3: the loss is inf") and exc.value.step == 3


def test_check_helpers():
    check_finite_loss(1.0, "the loss")
    t = torch.ones(3, requires_grad=True)
    (t * 2).sum().backward()
    check_finite_gradients([("t", t)], "here")  # finite: silent
    t.grad[1] = float("inf")
    with pytest.raises(NonFiniteLossError, match="gradient of parameter 't' has 1 infinite"):
        check_finite_gradients([("t", t)], "here")
    note = data_scale_note({"y": torch.tensor([1.0, -1e200, float("nan")], dtype=torch.float64)})
    assert "1e+200" in note and "exceeds 1.34e+154" in note
    assert "is 2 (torch.float32" in data_scale_note({"y": torch.tensor([1.0, -2.0])})
    assert data_scale_note({"y": torch.tensor([1, 2])}) == ""  # integer tensors are skipped
