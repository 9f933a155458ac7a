"""pyro_dag.infer.train: recipes, node-wise pretraining, freezing, per-group learning rates, validation early
stopping, callbacks, checkpoints that resume bit for bit (a killed subprocess), and argument checks."""
import json
import math
import os
import subprocess
import sys
import textwrap

import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.datasets import collider
from pyro_dag.experiments.collider import collider_model
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO, NonFiniteLossError, TrainResult, initial_scales, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.param_store import ParamStoreCollisionWarning
from pyro_dag.infer.training import (JointAdam, capture_params, group_tensors, load_checkpoint, lr_multiplier_args,
                                     node_elbo, pretrain_nodes)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def small_problem(n1=5, n2=4, seed=0):
    """x1 -> w1 -> w3 <- w2 <- x2 with w1 (partly) and w3 observed; learnable kernels, noise, inducing inputs."""
    g = torch.Generator().manual_seed(seed)
    x1 = torch.linspace(-1, 1, n1, dtype=torch.float64)
    x2 = torch.linspace(-1, 1, n2, dtype=torch.float64)
    X1, X2 = (t.reshape(-1, 1) for t in torch.meshgrid(x1, x2, indexing="ij"))
    w1 = torch.sin(2 * X1)
    y3 = torch.cos(w1 + X2) + 0.05 * torch.randn(n1 * n2, 1, dtype=torch.float64, generator=g)
    y1 = w1 + 0.05 * torch.randn(n1 * n2, 1, dtype=torch.float64, generator=g)
    y1[::3] = float("nan")
    graph = nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])
    model = DAGDGP(graph, kernels={"w3": kernels.SumInput(kernels.RBF(lengthscale=0.8))}, num_inducing=4,
                   likelihoods={"w1": Gaussian(0.01), "w3": Gaussian(0.01)}).double()
    return model, {"x1": X1, "x2": X2}, {"w1": y1, "w3": y3}


def params_of(module):
    return {n: p.detach().clone() for n, p in module.named_parameters()}


# ---------------------------------------------------------------------------------------------- the recipes
def _collider_run(recipe, steps, **kw):
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    ds = collider(seed=0)
    model = collider_model(ds)
    guide = AutoStructuredGuide(model, init_scale=initial_scales(model, ds.inputs, ds.data))
    return train(model, guide, ds.inputs, ds.data, num_steps=steps, recipe=recipe, progress=False, **kw)


@pytest.mark.slow  # over 10 s on 2 cores: run by `pytest -m slow`
def test_recommended_recipe_beats_plain_adam_on_the_collider():
    # The paper's latent collider (Perlino et al. 2026, App. G.3), fixed seed: Adam finds the basin of the parents'
    # means within ~600 steps; the natural-gradient steps then resolve the explaining-away direction.
    adam = _collider_run("adam", 800)
    rec = _collider_run("recommended", 800, natural_gradient_after=600)
    assert rec.settings["antithetic"] and rec.settings["natural_gradient"] == 0.01
    assert not adam.settings["antithetic"] and adam.settings["natural_gradient"] == 0.0
    final = {name: sum(r.losses[-50:]) / 50 for name, r in (("adam", adam), ("recommended", rec))}
    assert final["recommended"] < final["adam"] - 1000, final


@pytest.mark.slow
def test_recommended_recipe_beats_plain_adam_in_3000_steps():
    adam = _collider_run("adam", 3000)
    rec = _collider_run("recommended", 3000)
    assert sum(rec.losses[-50:]) < sum(adam.losses[-50:]) - 50 * 50   # ELBO 192 vs 90 (seed 0)


def test_recipe_defaults_follow_the_guide():
    model, inputs, data = small_problem()
    mf = train(model, AutoStructuredGuide(model, precision="mean_field"), inputs, data, num_steps=2,
               progress=False)
    assert mf.settings["natural_gradient"] == 0.0 and mf.settings["antithetic"]   # mean field: Adam only
    pyro.clear_param_store()
    model, inputs, data = small_problem()
    ch = train(model, AutoStructuredGuide(model), inputs, data, num_steps=2, progress=False)
    assert ch.settings["natural_gradient"] == 0.01 and ch.settings["natural_gradient_after"] == 1000
    assert isinstance(ch, TrainResult) and len(ch.losses) == 2 and all(math.isfinite(v) for v in ch.losses)


def test_natural_gradient_phase_trains_the_rest_with_adam():
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model)
    seen = {}

    def record(step, loss):
        seen[step] = (params_of(model.kernels), params_of(guide.family))

    train(model, guide, inputs, data, num_steps=6, natural_gradient_after=3, natural_gradient=0.1,
          callbacks=[record], progress=False)
    for a, b in ((seen[4], seen[5]), (seen[5], seen[6])):             # natural-gradient steps
        assert any(not torch.equal(a[0][k], b[0][k]) for k in a[0])   # the kernels still move (Adam)
        assert any(not torch.equal(a[1][k], b[1][k]) for k in a[1])   # and so does q(U) (natural gradient)


# ---------------------------------------------------------------------------------------------- freezing
def test_freezing_holds_inducing_inputs_and_noise_bitwise_then_releases_them():
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model, precision="mean_field")
    snaps = {}

    def record(step, loss):
        snaps[step] = {"inducing": params_of(model.inducing), "likelihood": params_of(model.likelihoods),
                       "kernel": params_of(model.kernels)}

    model.setup(inputs, data)
    snaps[0] = {"inducing": params_of(model.inducing), "likelihood": params_of(model.likelihoods),
                "kernel": params_of(model.kernels)}
    result = train(model, guide, inputs, data, num_steps=10, recipe="adam", freeze_fraction=0.4,
                   callbacks=[record], progress=False)
    assert result.settings["freeze_steps"] == 4
    for step in range(1, 5):
        for group in ("inducing", "likelihood"):
            assert all(torch.equal(snaps[0][group][k], snaps[step][group][k]) for k in snaps[0][group]), (group, step)
        assert any(not torch.equal(snaps[step - 1]["kernel"][k], snaps[step]["kernel"][k])
                   for k in snaps[0]["kernel"])                         # not frozen: moves
    for group in ("inducing", "likelihood"):
        moved = [k for k in snaps[0][group] if not torch.equal(snaps[4][group][k], snaps[5][group][k])]
        # every one moves once released, but the noise of the latent w2, which has no observation (no gradient)
        assert sorted(moved) == sorted(k for k in snaps[0][group] if not k.startswith("w2.variance")), group


def test_freeze_groups_are_chosen():
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model, precision="mean_field")
    model.setup(inputs, data)
    before = params_of(model.kernels), params_of(model.inducing)
    train(model, guide, inputs, data, num_steps=3, recipe="adam", freeze_fraction=1.0, freeze="kernel",
          progress=False)
    assert all(torch.equal(before[0][k], v) for k, v in params_of(model.kernels).items())
    assert any(not torch.equal(before[1][k], v) for k, v in params_of(model.inducing).items())


# ---------------------------------------------------------------------------------------------- learning rates
def test_likelihood_lr_multiplier_reaches_the_likelihood_group_only():
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model, precision="mean_field")
    model.setup(inputs, data)
    lik = group_tensors(model, "likelihood")
    observed = [model.likelihoods["w1"].variance_unconstrained, model.likelihoods["w3"].variance_unconstrained]
    # (at the guide's initial zero means only the kernel variances of the observed nodes have a gradient)
    signal = [model.kernels["w1"].base.variance_unconstrained, model.kernels["w3"].base.variance_unconstrained]
    before = {id(p): p.detach().clone() for p in observed + signal}
    train(model, guide, inputs, data, num_steps=1, recipe="adam", lr=0.01, likelihood_lr_multiplier=0.1,
          progress=False)
    # Adam's first step moves every coordinate by lr (times sign(grad), up to eps)
    for p in observed + signal:
        step = (p.detach() - before[id(p)]).abs()
        expected = 0.001 if id(p) in lik else 0.01
        assert torch.allclose(step, torch.full_like(step, expected), rtol=1e-4), (expected, step)


def test_lr_multiplier_args_work_with_pyro_optimisers():
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model, precision="mean_field")
    model.setup(inputs, data)
    observed = [model.likelihoods["w1"].variance_unconstrained, model.likelihoods["w3"].variance_unconstrained]
    before = {id(p): p.detach().clone() for p in observed}
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam(lr_multiplier_args(model, {"lr": 0.01}, likelihood=0.1)),
                         DAGELBO(num_particles=2))
    svi.step(inputs, data)
    for p in observed:
        assert torch.allclose((p.detach() - before[id(p)]).abs(), torch.tensor(0.001, dtype=p.dtype), rtol=1e-4)


def test_joint_adam_groups_by_arguments():
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model, precision="mean_field")
    adam = JointAdam(model, guide, DAGELBO(num_particles=2), lambda name: {"lr": 0.02 if "kernels" in name else 0.01})
    adam.step(inputs, data)
    lrs = sorted(g["lr"] for g in adam.optim.param_groups)
    assert lrs == [0.01, 0.02]
    kernel_ids = {id(p) for p in model.kernels.parameters()}
    for group in adam.optim.param_groups:
        assert all((id(p) in kernel_ids) == (group["lr"] == 0.02) for p in group["params"])


# ---------------------------------------------------------------------------------------------- validation, callbacks
def test_validation_does_not_change_the_training_trajectory():
    model, inputs, data = small_problem()
    a = train(model, AutoStructuredGuide(model), inputs, data, num_steps=8, progress=False)
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    model, inputs, data = small_problem()
    b = train(model, AutoStructuredGuide(model), inputs, data, num_steps=8, validation=(inputs, data),
              validate_every=2, restore_best=False, progress=False)
    assert a.losses == b.losses
    assert [s for s, _ in b.validation] == [2, 4, 6, 8] and all(math.isfinite(v) for _, v in b.validation)


def test_early_stopping_restores_the_best_parameters():
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model)
    scripted = iter([5.0, 3.0, 4.0, 6.0, 7.0, 8.0])
    snaps = {}

    def record(step, loss):
        snaps[step] = capture_params()

    result = train(model, guide, inputs, data, num_steps=10, validation=lambda: next(scripted), validate_every=1,
                   patience=2, callbacks=[record], progress=False)
    assert result.stopped == "early_stopping" and len(result.losses) == 4
    assert result.best_step == 2 and result.best_validation_loss == 3.0
    now = capture_params()
    assert all(torch.equal(now[k], snaps[2][k]) for k in snaps[2])
    assert any(not torch.equal(snaps[2][k], snaps[4][k]) for k in snaps[2])


def test_a_callback_stops_the_run():
    model, inputs, data = small_problem()
    calls = []
    result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=10, progress=False,
                   callbacks=[lambda step, loss: calls.append((step, loss)) or step == 3])
    assert result.stopped == "callback" and len(result.losses) == 3
    assert calls == list(enumerate(result.losses, start=1))


def test_progress_bar_runs(capsys):
    model, inputs, data = small_problem()
    train(model, AutoStructuredGuide(model), inputs, data, num_steps=30, progress=True, name="small")
    assert "small" in capsys.readouterr().err


def test_a_non_finite_loss_names_the_step():
    model, inputs, data = small_problem()
    data = {k: v * 3e153 for k, v in data.items()}    # finite squares, infinite loss
    with pytest.raises(NonFiniteLossError, match=r"^train, step 1: ") as exc:
        train(model, AutoStructuredGuide(model), inputs, data, num_steps=3, progress=False)
    assert exc.value.step == 1


def test_num_threads_is_limited_and_restored(monkeypatch):
    seen = []
    model, inputs, data = small_problem()
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        train(model, AutoStructuredGuide(model), inputs, data, num_steps=1, progress=False, num_threads=1,
              callbacks=[lambda s, l: seen.append(torch.get_num_threads())])
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen == [1]


# ---------------------------------------------------------------------------------------------- pretraining
def test_node_elbo_is_the_collapsed_bound_at_the_optimal_q():
    """At Titsias' optimal q(V) = N(S Aᵀ y / τ², S), S = (I + AᵀA / τ²)⁻¹, the sparse-GP ELBO equals the
    collapsed bound log N(y | 0, A Aᵀ + τ² I) - Σ r / (2 τ²) (Titsias 2009, Eq. 9; whitened)."""
    model, inputs, data = small_problem()
    model.setup(inputs, data)
    x, y = inputs["x1"], data["w1"]
    keep = ~torch.isnan(y[:, 0])
    x, y = x[keep], y[keep]
    with torch.no_grad():
        a, r = model.node_conditional("w1", {"x1": x})
        tau2 = model.likelihoods["w1"].variance
        M = a.shape[-1]
        S = torch.linalg.inv(torch.eye(M, dtype=a.dtype) + a.T @ a / tau2)
        m = (S @ a.T @ y[:, 0] / tau2).reshape(1, M)
        value = node_elbo(model, "w1", {"x1": x}, y, torch.ones_like(y, dtype=torch.bool), m,
                          torch.linalg.cholesky(S))
        cov = a @ a.T + tau2 * torch.eye(len(y), dtype=a.dtype)
        bound = torch.distributions.MultivariateNormal(torch.zeros(len(y), dtype=a.dtype), cov).log_prob(y[:, 0])
        bound = bound - r.sum() / (2 * tau2)
    assert torch.allclose(value, bound, rtol=1e-10, atol=1e-8)


@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_pretraining_fits_observed_nodes_alone_and_writes_the_guide(structure):
    model, inputs, data = small_problem()
    guide = AutoStructuredGuide(model, precision=structure)
    nodes, losses = pretrain_nodes(model, guide, inputs, data, num_steps=300, lr=0.05)
    assert nodes == ["w1"]                              # w3 has a latent parent (w2): left to the joint steps
    assert losses[-1] < losses[0] - 1.0
    post = guide.inducing_posterior()
    assert post.mean_blocks()["w1"].abs().sum() > 0      # written
    assert torch.count_nonzero(post.mean_blocks()["w3"]) == 0
    # the guide's block is the fitted q: it reproduces the node-wise loss
    X, _, obs = model.checked_arguments(inputs, data)
    y, m = obs["w1"]
    rows = m.any(-1)
    with torch.no_grad():
        cov = post.covariance_block("w1")
        value = node_elbo(model, "w1", {"x1": X["x1"][rows]}, y[rows], m[rows], post.mean_blocks()["w1"],
                          torch.linalg.cholesky(cov))
    assert abs(-float(value) - losses[-1]) < 0.05 and losses[-1] < losses[0] - 1.0


def test_pretraining_in_train_then_joint_steps():
    model, inputs, data = small_problem()
    result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=3, pretrain_steps=5, progress=False,
                   collapse=False)
    assert result.pretrained_nodes == ["w1"] and len(result.pretrain_losses) == 5 and len(result.losses) == 3
    # with the exact fit (the default), w1 (inputs observed, Gaussian) is fitted exactly, not pretrained
    pyro.clear_param_store()
    model, inputs, data = small_problem()
    result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=3, pretrain_steps=5, progress=False)
    assert result.collapsed_nodes == ["w1"] and result.pretrained_nodes == [] and len(result.losses) == 3


def test_pretraining_refuses_a_node_with_a_latent_parent():
    model, inputs, data = small_problem()
    with pytest.raises(ValueError, match=r"node 'w3' cannot be fitted alone: its parents \['w2'\] are latent"):
        pretrain_nodes(model, AutoStructuredGuide(model), inputs, data, num_steps=2, nodes=["w3"])


# ---------------------------------------------------------------------------------------------- initial scales
def test_initial_scales_of_the_collider():
    ds = collider(seed=0)
    model = collider_model(ds)
    scales = initial_scales(model, ds.inputs, ds.data)
    assert set(scales) == {"w3"}                                      # the parents are latent
    expected = (1 + 119 * 1.0 / (49 * 0.015**2)) ** -0.5
    assert math.isclose(scales["w3"], expected, rel_tol=1e-5) and 0.009 < scales["w3"] < 0.01


# ---------------------------------------------------------------------------------------------- checkpoints
def checkpoint_variant(variant, ckpt=None, callbacks=()):
    """One of the runs of the kill-and-resume test (also run by the subprocesses, which import this module)."""
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    model, inputs, data = small_problem()
    if variant == "natural":
        guide = AutoStructuredGuide(model)
        kw = dict(num_steps=12, natural_gradient_after=4, natural_gradient=0.1, freeze_fraction=0.25,
                  pretrain_steps=3, validation=(inputs, data), validate_every=2, checkpoint_every=3)
    else:
        guide = AutoStructuredGuide(model, precision="chordal")
        kw = dict(num_steps=10, recipe="adam", warm_start=4, sink_step_size=0.5, checkpoint_every=2,
                  likelihood_lr_multiplier=0.1)
    result = train(model, guide, inputs, data, progress=False, callbacks=callbacks, checkpoint=ckpt,
                   resume=ckpt is not None, **kw)
    params = {n: p.detach().tolist() for n, p in pyro.get_param_store().named_parameters()}
    return {"losses": result.losses, "pretrain": result.pretrain_losses,
            "validation": [list(v) for v in result.validation], "resumed_from": result.resumed_from,
            "params": params}


SCRIPT = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, {root!r})
    sys.path.insert(0, {tests!r})
    from test_train import checkpoint_variant

    variant, out, ckpt = sys.argv[1], sys.argv[2], sys.argv[3]
    kill = int(os.environ.get("KILL_AFTER", "0"))

    def killer(step, loss):
        if step == kill:
            os._exit(17)                      # dies at once: no cleanup, no final checkpoint

    result = checkpoint_variant(variant, ckpt, callbacks=[killer])
    with open(out, "w") as f:
        json.dump(result, f)
""")


def _run_script(tmp_path, variant, out, ckpt, kill=None):
    script = tmp_path / "run_train.py"
    script.write_text(SCRIPT.format(root=ROOT, tests=os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, OMP_NUM_THREADS="1", KILL_AFTER=str(kill or 0))
    return subprocess.run([sys.executable, str(script), variant, str(out), str(ckpt)], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("variant,kill,saved", [("natural", 7, 6), ("warm", 5, 4)])
def test_a_killed_run_resumes_bit_for_bit(tmp_path, variant, kill, saved):
    """A subprocess trains with checkpoints and kills itself (os._exit) after step ``kill``; a second one resumes
    from the last checkpoint (step ``saved``); both together reproduce the uninterrupted run exactly."""
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    killed = _run_script(tmp_path, variant, tmp_path / "killed.json", ckpt, kill=kill)
    assert killed.returncode == 17, killed.stderr
    assert not (tmp_path / "killed.json").exists()
    state = load_checkpoint(str(ckpt / "train_checkpoint.pt"))
    assert state["step"] == saved and len(state["losses"]) == saved
    assert not [f for f in os.listdir(ckpt) if f.startswith(".tmp")]           # no partial file left behind
    resumed = _run_script(tmp_path, variant, tmp_path / "resumed.json", ckpt)
    assert resumed.returncode == 0, resumed.stderr
    b = json.loads((tmp_path / "resumed.json").read_text())
    a = json.loads(json.dumps(checkpoint_variant(variant)))                    # uninterrupted, no checkpoint
    assert b["resumed_from"] == saved and a["resumed_from"] == 0
    assert len(a["losses"]) == len(b["losses"]) and a["losses"] == b["losses"]
    assert a["pretrain"] == b["pretrain"] and a["validation"] == b["validation"]
    assert a["params"] == b["params"]


def test_resume_checks_the_settings_and_a_finished_run_returns(tmp_path):
    path = tmp_path / "run.pt"
    model, inputs, data = small_problem()
    first = train(model, AutoStructuredGuide(model), inputs, data, num_steps=4, checkpoint=path, checkpoint_every=2,
                  progress=False)
    again = train(model, AutoStructuredGuide(model), inputs, data, num_steps=4, checkpoint=path, resume=True,
                  progress=False)
    assert again.losses == first.losses and again.resumed_from == 4
    with pytest.raises(ValueError, match=r"was written with lr=0.01, this call has lr=0.02"):
        train(model, AutoStructuredGuide(model), inputs, data, num_steps=4, lr=0.02, checkpoint=path, resume=True,
              progress=False)


# ---------------------------------------------------------------------------------------------- bad arguments
BAD = [
    (dict(num_steps=0), "num_steps must be a positive integer"),
    (dict(num_steps=-3), "num_steps must be a positive integer"),
    (dict(num_steps=2.5), "num_steps must be a positive integer"),
    (dict(recipe="sgd"), r"recipe must be one of \('recommended', 'adam'\)"),
    (dict(freeze_fraction=1.5), r"freeze_fraction must be a fraction of the steps in \[0, 1\]"),
    (dict(freeze_fraction=-0.1), r"freeze_fraction must be a fraction of the steps in \[0, 1\]"),
    (dict(freeze_fraction=0.5, freeze=("noise",)), "unknown parameter group 'noise'"),
    (dict(lr=0.0), "lr must be a positive finite number"),
    (dict(lr=float("nan")), "lr must be a positive finite number"),
    (dict(likelihood_lr_multiplier=0), "likelihood_lr_multiplier must be a positive finite number"),
    (dict(natural_gradient=1.5), "natural_gradient must be a step size"),
    (dict(natural_gradient=0.1, sink_step_size=0.5), "use either natural_gradient"),
    (dict(warm_start=5), r"warm_start \(5\) must be smaller than num_steps \(5\)"),
    (dict(num_particles=3, antithetic=True), "num_particles must be even"),
    (dict(elbo=DAGELBO(), num_particles=2), "set them on it"),
    (dict(patience=3), "patience needs validation="),
    (dict(validate_every=0, validation=lambda: 0.0), "validate_every must be a positive integer"),
    (dict(callbacks=[3]), "callbacks must be callables"),
    (dict(resume=True), "resume=True needs checkpoint="),
    (dict(checkpoint_every=0, checkpoint="x.pt"), "checkpoint_every must be a positive integer"),
]


@pytest.mark.parametrize("kwargs,message", BAD)
def test_bad_arguments_raise_before_training(kwargs, message):
    model, inputs, data = small_problem()
    kwargs = dict({"num_steps": 5}, **kwargs)
    with pytest.raises(ValueError, match=message):
        train(model, AutoStructuredGuide(model), inputs, data, progress=False, **kwargs)
    assert not model.is_setup                                                    # nothing ran


def test_an_unwritable_checkpoint_directory_is_refused_before_training(tmp_path):
    model, inputs, data = small_problem()
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(ValueError, match=r"cannot write the checkpoint .* is not a writable directory"):
        train(model, AutoStructuredGuide(model), inputs, data, num_steps=3, checkpoint=blocker / "ckpt.pt",
              progress=False)
    assert not model.is_setup


def test_features_that_need_a_dagdgp_say_so():
    def plain_model(x):
        loc = pyro.sample("loc", pyro.distributions.Normal(0.0, 1.0))
        pyro.sample("y", pyro.distributions.Normal(loc, 1.0), obs=x)

    guide = pyro.infer.autoguide.AutoNormal(plain_model)
    with pytest.raises(ValueError, match="freeze_fraction needs a DAGDGP model"):
        train(plain_model, guide, torch.tensor(0.5), num_steps=2, freeze_fraction=0.5, progress=False)
    result = train(plain_model, guide, torch.tensor(0.5), num_steps=3, progress=False)   # Trace_ELBO + Adam
    assert result.settings["elbo"] == "Trace_ELBO" and len(result.losses) == 3


def test_minibatches_through_model_kwargs():
    model, inputs, data = small_problem()
    result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=4, model_kwargs={"subsample_size": 7},
                   validation=(inputs, data), validate_every=2, sink_step_size=0.5, recipe="adam", progress=False)
    assert len(result.losses) == 4 and all(math.isfinite(v) for v in result.losses)


def test_freezing_holds_the_tensors_pyro_trains_when_the_store_had_them():
    # a second model with the same parameter names: Pyro trains the store's tensors, and so must the schedule
    model, inputs, data = small_problem()
    train(model, AutoStructuredGuide(model, precision="mean_field"), inputs, data, num_steps=1, progress=False)
    store = {n: p.detach().clone() for n, p in pyro.get_param_store().named_parameters() if n.startswith("inducing")}
    model2, _, _ = small_problem()
    with pytest.warns(ParamStoreCollisionWarning, match=r"another (DAGDGP|AutoStructuredGuide)"):
        train(model2, AutoStructuredGuide(model2, precision="mean_field"), inputs, data, num_steps=3,
              freeze_fraction=1.0, progress=False)
    after = {n: p.detach() for n, p in pyro.get_param_store().named_parameters() if n.startswith("inducing")}
    assert store and all(torch.equal(store[n], after[n]) for n in store)


@pytest.mark.slow
def test_initial_scales_unstall_adam_on_the_collider():
    ds = collider(seed=0)
    final = {}
    for which in ("prior", "data"):
        pyro.set_rng_seed(0)
        pyro.clear_param_store()
        model = collider_model(ds)
        scale = 1.0 if which == "prior" else initial_scales(model, ds.inputs, ds.data)  # 1.0: the prior's
        r = train(model, AutoStructuredGuide(model, init_scale=scale), ds.inputs, ds.data, num_steps=1000,
                  recipe="adam", progress=False)
        final[which] = sum(r.losses[-50:]) / 50
    assert final["data"] < final["prior"] / 10, final     # 544 vs 36971 (seed 0)


def _confounded(n=30):
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    x = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    a = h + 0.05 * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    b = h + torch.sin(2 * x) + 0.05 * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    model = DAGDGP(nx.DiGraph([("h", "a"), ("h", "b"), ("x", "b")]), latent_inputs={"h": 1}, num_inducing=5).double()
    return model, {"x": x}, {"a": a, "b": b}


def test_latent_inputs_train_with_natural_gradients_and_adam_on_their_guide():
    model, inputs, data = _confounded()
    guide = AutoStructuredGuide(model)
    seen = {}
    result = train(model, guide, inputs, data, num_steps=5, natural_gradient_after=2, natural_gradient=0.05,
                   callbacks=[lambda s, l: seen.__setitem__(s, params_of(guide.other_guide))], progress=False)
    assert all(math.isfinite(v) for v in result.losses)
    assert any(not torch.equal(seen[3][k], seen[4][k]) for k in seen[3])   # q(h) trained by Adam beside the NG


def test_an_encoded_guide_list_gets_dagelbo():
    from pyro_dag.infer.autoguide import AutoEncodedStructuredGuide

    model, inputs, data = _confounded()
    guide = AutoEncodedStructuredGuide(model, hidden=(8,))
    result = train(model, guide, inputs, data, num_steps=3, progress=False, model_kwargs={"subsample_size": 10})
    assert result.settings["elbo"] == "DAGELBO" and result.settings["natural_gradient"] == 0.0
    assert all(math.isfinite(v) for v in result.losses)
    with pytest.raises(ValueError, match="natural_gradient steps need the guide to be an AutoStructuredGuide"):
        train(model, guide, inputs, data, num_steps=3, natural_gradient=0.1, progress=False)


def test_an_interrupted_exact_fit_leaves_a_guide_that_predict_refuses(monkeypatch):
    """Issue 42: Ctrl-C during train's exact L-BFGS (collapse) phase left a half-fitted guide that predict answered
    from; LaMP and the emulator raise NotFittedError there."""
    import networkx as nx

    from pyro_dag import DAGDGP
    from pyro_dag.errors import NotFittedError
    from pyro_dag.infer.training import collapsed

    g = torch.Generator().manual_seed(0)
    x = torch.rand(20, 1, generator=g, dtype=torch.float64)
    a = torch.sin(3 * x) + 0.05 * torch.randn(20, 1, generator=g, dtype=torch.float64)
    b = a ** 2 + 0.05 * torch.randn(20, 1, generator=g, dtype=torch.float64)
    model = DAGDGP(nx.DiGraph([("x", "a"), ("a", "b")]), num_inducing=5).double()
    guide = AutoStructuredGuide(model)
    real, calls = collapsed.lbfgs, []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:                       # the second node's L-BFGS
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(collapsed, "lbfgs", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train(model, guide, {"x": x}, {"a": a, "b": b}, num_steps=2, recipe="recommended", progress=False)
    with pytest.raises(NotFittedError, match="exact fit .* was interrupted .* run train"):
        model.predict(guide, {"x": x}, num_samples=2)
    monkeypatch.setattr(collapsed, "lbfgs", real)
    train(model, guide, {"x": x}, {"a": a, "b": b}, num_steps=2, recipe="recommended", progress=False)
    assert model.predict(guide, {"x": x}, num_samples=2)["b"].mean.shape == (20, 1)
