"""Exact fits of the nodes whose inputs are all observed (pyro_dag.infer.training.collapsed): the collapsed bound
against the exact GP's marginal likelihood, the fit against an exact GP, and the recommended recipe that uses it."""
import math

import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.baselines import ExactGP
from pyro_dag.dgp.observed_inputs import AUTO_INDUCING_EXACT, collapsible_nodes
from pyro_dag.gp.likelihoods import Bernoulli, Gaussian
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import collapsed_bound, fit_collapsed, group_tensors


def _regression(n=40, seed=0, noise=0.05):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, dtype=torch.float64, generator=g)
    f = torch.sin(3 * x[:, :1]) + x[:, 1:] ** 2
    y = f + noise * torch.randn(n, 1, dtype=torch.float64, generator=g)
    return nx.DiGraph([("x", "y")]), {"x": x}, {"y": y}, f



def _assert_optimal_posterior(model, guide, inputs, y, M):
    """The guide's block of ``y`` is the collapsed bound's optimal ``q(V)``: precision ``I + AᵀA / τ²``."""
    with torch.no_grad():
        _, a, tau2 = collapsed_bound(model, "y", inputs, y)
        S = torch.linalg.inv(torch.eye(M, dtype=torch.float64) + a.T @ a / tau2)
        m = S @ a.T @ y / tau2
    post = guide.inducing_posterior()
    assert torch.allclose(post.mean_blocks()["y"].reshape(-1), m, atol=1e-8)
    assert torch.allclose(post.covariance_block("y"), S, atol=1e-8)

def _chain(n=40, seed=0):
    """x -> h -> y with h hidden: y is not collapsible; x -> z observed is."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, dtype=torch.float64, generator=g)
    h = torch.sin(3 * x)
    y = h ** 2 + 0.05 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    z = torch.cos(2 * x) + 0.05 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    graph = nx.DiGraph([("x", "h"), ("h", "y"), ("x", "z")])
    return graph, {"x": x}, {"y": y, "z": z}


def test_the_bound_is_the_exact_gp_marginal_likelihood_with_every_case_inducing():
    graph, inputs, data, _ = _regression(n=30)
    model = DAGDGP(graph, kernels={"y": kernels.RBF(lengthscale=0.4)}, num_inducing=30,
                   likelihoods={"y": Gaussian(0.01)}).double()
    model.setup(inputs, data)
    x, y = inputs["x"], data["y"][:, 0]
    with torch.no_grad():
        bound, _, tau2 = collapsed_bound(model, "y", {"x": x}, y)
        K = model.kernels["y"](x, x)
    exact = torch.distributions.MultivariateNormal(torch.zeros(30, dtype=torch.float64),
                                                   K + tau2 * torch.eye(30, dtype=torch.float64)).log_prob(y)
    assert float(bound) == pytest.approx(float(exact), rel=1e-6, abs=1e-6)


def test_the_exact_fit_matches_an_exact_gp():
    """L-BFGS on the bound (every case an inducing input) and type-II maximum likelihood of an exact GP find the
    same optimum: the predictive means agree to a small fraction of the function's scale."""
    pyro.clear_param_store()
    graph, inputs, data, f = _regression(n=40)
    model = DAGDGP(graph).double()
    guide = AutoStructuredGuide(model)
    fit = fit_collapsed(model, guide, inputs, data)
    assert fit.nodes == ["y"] and model.num_inducing["y"] == 40
    assert fit.losses["y"][-1] <= fit.losses["y"][0]
    xt = torch.rand(200, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    ours = model.predict(guide, {"x": xt}, nodes=["y"], num_samples=64)["y"].mean[:, 0]
    ref = ExactGP(restarts=3).fit(inputs["x"], data["y"][:, 0]).predict(xt)[0]
    truth = torch.sin(3 * xt[:, :1]) + xt[:, 1:] ** 2
    assert float((ours - ref).abs().max()) < 0.02
    rmse_ours = float((ours - truth[:, 0]).pow(2).mean().sqrt())
    rmse_ref = float((ref - truth[:, 0]).pow(2).mean().sqrt())
    assert rmse_ours < 1.1 * rmse_ref


@pytest.mark.parametrize("precision", ["mean_field", "chordal"])
def test_the_written_posterior_is_the_optimal_q(precision):
    """q(V) written into the guide is N(Σ Aᵀ y / τ², Σ), Σ = (I + AᵀA / τ²)⁻¹, in either family."""
    pyro.clear_param_store()
    graph, inputs, data, _ = _regression(n=25)
    model = DAGDGP(graph, num_inducing=10).double()
    guide = AutoStructuredGuide(model, precision=precision)
    fit_collapsed(model, guide, inputs, data, max_iter=20)
    _assert_optimal_posterior(model, guide, inputs, data["y"][:, 0], 10)


def test_train_skips_the_steps_when_every_node_is_fitted_exactly():
    pyro.clear_param_store()
    graph, inputs, data, _ = _regression()
    model = DAGDGP(graph).double()
    guide = AutoStructuredGuide(model)
    result = train(model, guide, inputs, data, num_steps=500, progress=False)
    assert result.stopped == "collapsed" and result.collapsed_nodes == ["y"] and result.losses == []
    assert math.isfinite(result.final_loss) and result.final_loss == result.collapsed_losses["y"][-1]
    assert result.settings["collapse"] is True


def test_collapse_false_keeps_the_stochastic_steps():
    pyro.clear_param_store()
    graph, inputs, data, _ = _regression()
    model = DAGDGP(graph, num_inducing=8).double()
    result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=5, progress=False, collapse=False)
    assert result.stopped is None and len(result.losses) == 5 and result.collapsed_nodes == []
    pyro.clear_param_store()
    model = DAGDGP(graph, num_inducing=8).double()
    result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=5, progress=False, recipe="adam")
    assert result.collapsed_nodes == [] and len(result.losses) == 5


def test_exactly_fitted_nodes_are_held_while_the_rest_trains():
    pyro.clear_param_store()
    graph, inputs, data = _chain()
    model = DAGDGP(graph).double()
    guide = AutoStructuredGuide(model)
    model.setup(inputs, data)
    assert model.num_inducing == {"h": 40, "y": 40, "z": 40}
    seen = {}

    def record(step, loss):
        seen[step] = {w: [p.detach().clone() for p in (*model.kernels[w].parameters(),
                                                       *model.likelihoods[w].parameters())] for w in ("y", "z")}
        return False

    result = train(model, guide, inputs, data, num_steps=10, progress=False, callbacks=[record])
    assert result.collapsed_nodes == ["z"] and result.stopped is None and len(result.losses) == 10
    assert all(torch.equal(a, b) for a, b in zip(seen[1]["z"], seen[10]["z"]))        # held, bit for bit
    assert not all(torch.equal(a, b) for a, b in zip(seen[1]["y"], seen[10]["y"]))    # trained


def test_which_nodes_are_collapsible():
    g = torch.Generator().manual_seed(0)
    x = torch.rand(20, 1, dtype=torch.float64, generator=g)
    a = torch.sin(3 * x)
    b = (a > 0.5).double()
    c = a + x
    partial = c.clone()
    partial[3] = float("nan")
    graph = nx.DiGraph([("x", "a"), ("a", "b"), ("a", "c"), ("c", "d"), ("x", "e")])
    model = DAGDGP(graph, likelihoods={"b": Bernoulli()}).double()
    data = {"a": a, "b": b, "c": partial, "d": c, "e": x}
    X, _, obs = model.checked_arguments({"x": x}, data)
    # a: parent x observed; b: Bernoulli; c: parent a fully observed; d: parent c missing where d is observed; e: fine
    assert collapsible_nodes(model, X, obs) == ["a", "c", "e"]
    nested = dict(data, d=torch.where(torch.isnan(partial), partial, c))    # d run only where c was: nested
    X, _, obs = model.checked_arguments({"x": x}, nested)
    assert collapsible_nodes(model, X, obs) == ["a", "c", "d", "e"]
    model.setup({"x": x}, data)
    assert model.num_inducing["a"] == 20 and model.num_inducing["c"] == 19   # the cases where c is observed


def test_auto_inducing_caps():
    g = torch.Generator().manual_seed(0)
    n = AUTO_INDUCING_EXACT + 20
    x = torch.rand(n, 1, dtype=torch.float64, generator=g)
    graph = nx.DiGraph([("x", "h"), ("h", "y"), ("x", "z")])
    model = DAGDGP(graph, noise="learned", kernel_init="default").double()
    model.setup({"x": x}, {"y": torch.sin(x), "z": torch.cos(x)})
    assert model.num_inducing == {"h": 64, "y": 64, "z": AUTO_INDUCING_EXACT}


def test_a_learned_noise_is_floored():
    """Noise-free data drive the learned noise towards the jitter: it ends at the floor (a fraction of Var(y))."""
    pyro.clear_param_store()
    x = torch.linspace(0, 1, 30, dtype=torch.float64).reshape(-1, 1)
    y = torch.sin(4 * x)
    model = DAGDGP(nx.DiGraph([("x", "y")]), noise="learned").double()
    fit = fit_collapsed(model, AutoStructuredGuide(model), {"x": x}, {"y": y}, noise_floor=1e-3)
    floor = 1e-3 * float(y.var())
    assert float(model.likelihoods["y"].variance.detach()) >= floor * (1 - 1e-9)
    assert fit.floored == {"y": pytest.approx(floor)}


def test_held_tensors_are_the_ones_training_updates():
    """The held tensors are found in Pyro's parameter store (the model's first run registers them there)."""
    pyro.clear_param_store()
    graph, inputs, data = _chain()
    model = DAGDGP(graph).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, inputs, data, num_steps=3, progress=False)
    ids = set(group_tensors(model, "kernel"))
    store = {id(p) for _, p in pyro.get_param_store().named_parameters()}
    assert ids <= store


def test_above_max_cases_the_hyperparameters_come_from_a_subset_and_q_from_every_case():
    """fit_collapsed(max_cases=m) with n > m: the kernel and noise are those of a fit on fitting_rows' subset alone,
    q(V) is the optimal one for every case, and one ScaledDefaultWarning says so."""
    from pyro_dag.infer.training.collapsed import fitting_rows
    from pyro_dag.progress import ScaledDefaultWarning

    graph, inputs, data, _ = _regression(n=60)
    Z = torch.linspace(0, 1, 16, dtype=torch.float64).reshape(8, 2)

    def fitted(inputs, data, **kw):
        pyro.clear_param_store()
        model = DAGDGP(graph, num_inducing=8, inducing_inputs={"y": Z}).double()
        guide = AutoStructuredGuide(model)
        return model, guide, fit_collapsed(model, guide, inputs, data, max_iter=50, **kw)

    with pytest.warns(ScaledDefaultWarning, match=r"fitted on a random 20 of them, q\(V\) on all"):
        model, guide, fit = fitted(inputs, data, max_cases=20)
    assert fit.subset == {"y": 60}
    sub_x, sub_y = fitting_rows({"x": inputs["x"]}, data["y"][:, 0], 20, model.seed)
    assert sub_y.shape == (20,)
    ref, _, ref_fit = fitted(sub_x, {"y": sub_y[:, None]}, max_cases=None)
    assert ref_fit.subset == {}
    for a, b in zip(group_tensors(model, "kernel").values(), group_tensors(ref, "kernel").values()):
        assert torch.allclose(a.detach(), b.detach(), rtol=1e-6, atol=1e-9)
    assert torch.allclose(model.likelihoods["y"].variance.detach(), ref.likelihoods["y"].variance.detach(),
                          rtol=1e-6, atol=1e-12)
    _assert_optimal_posterior(model, guide, inputs, data["y"][:, 0], 8)


def test_the_posterior_written_in_chunks_is_the_one_pass_posterior():
    from pyro_dag.infer.training.collapsed import write_posterior

    pyro.clear_param_store()
    graph, inputs, data, _ = _regression(n=45)
    model = DAGDGP(graph, num_inducing=10).double()
    guide = AutoStructuredGuide(model)
    fit_collapsed(model, guide, inputs, data, max_iter=10)
    posts = []
    for chunk in (1000, 7):
        write_posterior(guide, model, "y", inputs, data["y"][:, 0], chunk=chunk)
        post = guide.inducing_posterior()
        posts.append((post.mean_blocks()["y"].reshape(-1).clone(), post.covariance_block("y").clone()))
    assert torch.allclose(posts[0][0], posts[1][0], atol=1e-10)
    assert torch.allclose(posts[0][1], posts[1][1], atol=1e-10)


def test_the_guides_first_call_on_many_cases_traces_a_minibatch(monkeypatch):
    """Above FIT_MAX_CASES the guide is set up from a minibatch trace (its q(U) shapes do not depend on the cases);
    q(V) is still the optimum over every case."""
    from pyro_dag.infer.training import collapsed as collapsed_module

    monkeypatch.setattr(collapsed_module, "FIT_MAX_CASES", 20)
    pyro.clear_param_store()
    graph, inputs, data, _ = _regression(n=60)
    model = DAGDGP(graph, num_inducing=8).double()
    guide = AutoStructuredGuide(model)
    sizes = []
    forward = model.forward
    monkeypatch.setattr(model, "forward", lambda *a, **k: sizes.append(k.get("subsample_size")) or forward(*a, **k))
    fit_collapsed(model, guide, inputs, data, max_iter=10, max_cases=None)
    assert sizes == [20]
    with torch.no_grad():
        _, a, tau2 = collapsed_bound(model, "y", inputs, data["y"][:, 0])
        S = torch.linalg.inv(torch.eye(8, dtype=torch.float64) + a.T @ a / tau2)
        m = S @ a.T @ data["y"][:, 0] / tau2
    post = guide.inducing_posterior()
    assert torch.allclose(post.mean_blocks()["y"].reshape(-1), m, atol=1e-8)
