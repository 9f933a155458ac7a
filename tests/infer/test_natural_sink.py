"""SinkNaturalGradient: conjugate steps on Gaussian-likelihood sinks, checked against exact optima (float64)."""
import networkx as nx
import pyro
import pytest
import torch
from pyro.infer import SVI

from helpers import chain_problem, collider_problem, fixed, setup_guide
from pyro_dag import DAGDGP
from pyro_dag.gp.likelihoods import Gaussian, Poisson
from pyro_dag.infer import DAGELBO
from pyro_dag.infer import SinkNaturalGradient

GUIDES = [("mean_field", "dense"), ("chordal", "dense"), ("chordal", "sparse")]


def _sink_params(ng):
    store = dict(pyro.get_param_store().named_parameters())
    return {name: store[name] for name in sorted(ng.param_names())}


@pytest.mark.parametrize("structure,backend", GUIDES)
def test_full_step_is_the_optimum_when_parents_are_roots(structure, backend):
    """With root parents the sink's conditional is exactly conjugate: one γ = 1 step zeroes its gradient."""
    pyro.clear_param_store()
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 20, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(2 * x) + 0.1 * torch.randn_like(x)
    y[3] = float("nan")  # a missing entry must be left out of the statistics
    model = DAGDGP(nx.DiGraph([("x", "f")]), num_inducing=6, likelihoods={"f": Gaussian(0.02)}).double()
    inputs, data = {"x": x}, {"f": y}
    guide = setup_guide(model, inputs, data, structure=structure, backend=backend)
    ng = SinkNaturalGradient(model, guide, step_size=1.0, num_samples=1)
    elbo = DAGELBO(num_particles=1)
    before = elbo.loss(model, guide, inputs, data)
    ng.step(inputs, data)
    loss = elbo.differentiable_loss(model, guide, inputs, data)
    params = _sink_params(ng)
    assert len(params) == 3
    grads = torch.autograd.grad(loss, list(params.values()))
    assert max(g.abs().max().item() for g in grads) < 1e-7
    assert loss.item() < before


def _collider(structure, backend, seed=0):
    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    fixed(model)
    guide = setup_guide(model, inputs, data, structure=structure, backend=backend)
    return model, inputs, data, guide


@pytest.mark.parametrize("backend", ["dense", "sparse"])
def test_structured_step_keeps_the_rest_of_the_guide(backend):
    """The step changes only q(V_w | V_rest): the other nodes' marginal and the regression on them stay."""
    model, inputs, data, guide = _collider("chordal", backend)
    before = guide.inducing_posterior()
    dense_before = _dense(guide)
    SinkNaturalGradient(model, guide, step_size=0.7, num_samples=3).step(inputs, data)
    after = guide.inducing_posterior()
    dense_after = _dense(guide)
    fam = guide.family
    w = fam.block_of["w3"].slice
    rest = torch.ones(fam.size, dtype=torch.bool)
    rest[w] = False
    for name in ("w1", "w2"):
        torch.testing.assert_close(after.mean_blocks()[name], before.mean_blocks()[name], rtol=0, atol=1e-12)
    cov0, cov1 = dense_before[1], dense_after[1]
    torch.testing.assert_close(cov1[rest][:, rest], cov0[rest][:, rest], rtol=1e-9, atol=1e-11)
    # regression coefficients of V_w on V_rest: -Λ_ww⁻¹ Λ_w,rest
    reg = [torch.linalg.solve(lam[w][:, w], lam[w][:, rest]) for lam in (dense_before[0], dense_after[0])]
    torch.testing.assert_close(reg[1], reg[0], rtol=1e-8, atol=1e-10)
    assert not torch.allclose(after.mean_blocks()["w3"], before.mean_blocks()["w3"])


def _dense(guide):
    fam = guide.family
    L = fam.dense_tril().detach()
    lam = L @ L.T
    return lam, torch.linalg.inv(lam)


def test_dense_and_sparse_backends_take_the_same_step():
    out = []
    for backend in ("dense", "sparse"):
        model, inputs, data, guide = _collider("chordal", backend)
        torch.manual_seed(5)
        SinkNaturalGradient(model, guide, step_size=0.5, num_samples=4).step(inputs, data)
        out.append({k: v.detach().clone() for k, v in _sink_params_from(guide).items()})
    for name in out[0]:
        torch.testing.assert_close(out[1][name], out[0][name], rtol=1e-8, atol=1e-10)


def _sink_params_from(guide):
    fam = guide.family
    out = {"loc": fam.locs.w3, "scale": fam.scales.w3, "tril": fam.unit_trils.w3}
    for k, (v, w) in enumerate(fam.edges):
        out[f"e{k}"] = getattr(fam.offdiag, f"e{k}")
    return out


@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_damping_interpolates_natural_parameters(structure):
    """γ mixes the old and the target natural parameters: Λ(γ) = (1 - γ) Λ_old + γ Λ̂ (same random numbers)."""
    precisions = {}
    for gamma in (1.0, 0.25):
        model, inputs, data, guide = _collider(structure, "dense")
        if gamma == 1.0:
            precisions["old"], shift_old = _sink_precision(guide)
        torch.manual_seed(11)
        SinkNaturalGradient(model, guide, step_size=gamma, num_samples=3).step(inputs, data)
        precisions[gamma], shift = _sink_precision(guide)
        if gamma == 1.0:
            shift_hat = shift
        else:
            shift_mix = shift
    expected = 0.75 * precisions["old"] + 0.25 * precisions[1.0]
    torch.testing.assert_close(precisions[0.25], expected, rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(shift_mix, 0.75 * shift_old + 0.25 * shift_hat, rtol=1e-9, atol=1e-9)


def _sink_precision(guide):
    """Λ_ww and Λ_ww m_w of the sink w3 (its conditional's natural parameters)."""
    post = guide.inducing_posterior()
    fam = guide.family
    m = post.mean_blocks()["w3"].reshape(-1).detach()
    if guide.structure == "mean_field":
        lam = torch.linalg.inv(post.covariance_block("w3")).detach()
    else:
        L = fam.factor_blocks()[("w3", "w3")].detach()
        lam = L @ L.T
    return lam, lam @ m


@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_expected_gradient_vanishes_after_a_full_step_with_latent_parents(structure):
    """With latent parents the step targets the optimum of a Monte Carlo estimate: with many samples the
    ELBO's gradient in the sink's mean nearly vanishes (it does not before the step)."""
    model, inputs, data, guide = _collider(structure, "dense")
    loc = guide.family.locs.w3

    def grad_norm():
        torch.manual_seed(3)
        loss = DAGELBO(num_particles=4000).differentiable_loss(model, guide, inputs, data)
        return torch.autograd.grad(loss, [loc])[0].norm().item()

    g0 = grad_norm()
    torch.manual_seed(4)
    SinkNaturalGradient(model, guide, step_size=1.0, num_samples=4000).step(inputs, data)
    g1 = grad_norm()
    assert g1 < 0.03 * g0, (g0, g1)


def test_optim_args_freeze_what_the_step_sets():
    model, inputs, data, guide = _collider("chordal", "dense")
    ng = SinkNaturalGradient(model, guide)
    before = {k: v.detach().clone() for k, v in _sink_params(ng).items()}
    other = guide.family.locs.w1.detach().clone()
    svi = SVI(model, guide, pyro.optim.Adam(ng.optim_args({"lr": 0.05})), DAGELBO(num_particles=2))
    for _ in range(3):
        svi.step(inputs, data)
    for name, value in _sink_params(ng).items():
        torch.testing.assert_close(value, before[name], rtol=0, atol=0)
    assert not torch.allclose(guide.family.locs.w1, other)


def test_bad_input_names_the_node():
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data, structure="chordal")
    with pytest.raises(ValueError, match="node 'a' has children"):
        SinkNaturalGradient(model, guide, nodes=["a"])
    with pytest.raises(ValueError, match="step_size"):
        SinkNaturalGradient(model, guide, step_size=0.0)
    with pytest.raises(ValueError, match="'zz' is not a GP node"):
        SinkNaturalGradient(model, guide, nodes=["zz"])
    pyro.clear_param_store()
    x = torch.linspace(-1, 1, 10, dtype=torch.float64).unsqueeze(-1)
    g = nx.DiGraph([("x", "a"), ("x", "b")])
    model = DAGDGP(g, num_inducing=4, likelihoods={"a": Poisson(), "b": Gaussian(0.1)}).double()
    inputs, data = {"x": x}, {"a": torch.ones(10, 1, dtype=torch.float64)}
    guide = setup_guide(model, inputs, data)
    with pytest.raises(ValueError, match="node 'a' has a Poisson likelihood"):
        SinkNaturalGradient(model, guide, nodes=["a"])
    with pytest.raises(ValueError, match="node 'b' is not observed"):
        SinkNaturalGradient(model, guide, nodes=["b"])
    with pytest.raises(ValueError, match="no observed sink with a Gaussian likelihood"):
        SinkNaturalGradient(model, guide)
