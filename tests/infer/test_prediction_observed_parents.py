"""Prediction of a node fitted exactly on its parents' observed values (pyro_dag.infer.marginal, ``input_noise``):
the child takes each observed Gaussian parent's draw plus its observation noise, as in its fit."""
import networkx as nx
import pyro
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import predict_one_step, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.marginal import observed_input_parents


def _fitted_chain(n=80):
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 1, dtype=torch.float64, generator=g)
    a = torch.sin(3 * x) + 0.3 * torch.randn(n, 1, dtype=torch.float64, generator=g)   # a noisy measured node
    y = a ** 2 + 0.02 * torch.randn(n, 1, dtype=torch.float64, generator=g)          # a function of measured a
    model = DAGDGP(nx.DiGraph([("x", "a"), ("a", "y")])).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, {"x": x}, {"a": a, "y": y}, num_steps=10, progress=False)
    return model, guide


def test_the_child_of_a_noisy_measured_parent_takes_measured_like_inputs():
    model, guide = _fitted_chain()
    assert model.exact_fit_nodes == {"a", "y"} and observed_input_parents(model) == ["a"]
    xt = torch.tensor([[0.1], [0.5], [0.9]], dtype=torch.float64)
    S = 4000
    pyro.set_rng_seed(1)
    pred = model.predict(guide, {"x": xt}, num_samples=S)
    # reference: the child's one-step prediction at the parent's draws plus its observation noise
    tau = float(model.likelihoods["a"].variance.detach()) ** 0.5
    a_meas = pred["a"].samples + tau * torch.randn(pred["a"].samples.shape, dtype=torch.float64,
                                                   generator=torch.Generator().manual_seed(2))
    ref = predict_one_step(model, guide, {"x": xt.repeat(S, 1)}, {"a": a_meas.reshape(-1, 1)}, nodes=["y"])["y"]
    loc, var = ref.mean.reshape(S, 3), ref.variance.reshape(S, 3)
    ref_mean, ref_var = loc.mean(0), var.mean(0) + loc.var(0)
    sd = ref_var.sqrt()
    assert torch.allclose(pred["y"].mean[:, 0], ref_mean, atol=float(4 * sd.max() / S ** 0.5))
    assert torch.allclose(pred["y"].variance[:, 0], ref_var, rtol=0.1)
    # without it (the latent draw of a fed to y) the variance is markedly smaller: the parent's noise is missing
    model.exact_fit_nodes.clear()
    pyro.set_rng_seed(1)
    latent_only = model.predict(guide, {"x": xt}, num_samples=S)
    assert bool((latent_only["y"].variance[:, 0] < 0.8 * ref_var).all())


def test_prediction_with_measured_parents_does_not_depend_on_the_batch_size():
    model, guide = _fitted_chain()
    xt = torch.linspace(0, 1, 7, dtype=torch.float64)[:, None]
    pyro.set_rng_seed(3)
    one = model.predict(guide, {"x": xt}, num_samples=16)
    pyro.set_rng_seed(3)
    chunked = model.predict(guide, {"x": xt}, num_samples=16, batch_size=2)
    assert torch.allclose(one["y"].samples, chunked["y"].samples)


def test_a_saved_and_loaded_model_predicts_the_same(tmp_path):
    from pyro_dag import persist

    model, guide = _fitted_chain()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(80, 1, dtype=torch.float64, generator=g)
    a = torch.sin(3 * x) + 0.3 * torch.randn(80, 1, dtype=torch.float64, generator=g)
    y = a ** 2 + 0.02 * torch.randn(80, 1, dtype=torch.float64, generator=g)
    persist.save(tmp_path / "fit.pt", model, guide, {"x": x}, {"a": a, "y": y})
    xt = torch.linspace(0, 1, 5, dtype=torch.float64)[:, None]
    pyro.set_rng_seed(4)
    before = model.predict(guide, {"x": xt}, num_samples=32)["y"]
    pyro.clear_param_store()
    fresh = DAGDGP(nx.DiGraph([("x", "a"), ("a", "y")])).double()
    fresh_guide = AutoStructuredGuide(fresh)
    persist.load(tmp_path / "fit.pt", fresh, fresh_guide)
    assert fresh.exact_fit_nodes == {"a", "y"}
    pyro.set_rng_seed(4)
    after = fresh.predict(fresh_guide, {"x": xt}, num_samples=32)["y"]
    assert torch.allclose(before.samples, after.samples)
