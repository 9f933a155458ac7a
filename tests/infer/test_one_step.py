"""pyro_dag.infer.predict_one_step: each node from the measured values of its parents, against a brute-force Monte
Carlo over q(U) and against DAGDGP.predict where the two must agree exactly."""
import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import predict_one_step, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.one_step import one_step_cases

GRAPH = nx.DiGraph([("x", "a"), ("a", "b"), ("x", "c")])


def chain_data(n=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 1, generator=g, dtype=torch.float64)
    a = 0.5 * x + torch.randn(n, 1, generator=g, dtype=torch.float64)
    b = torch.sin(1.5 * a) + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    c = x.pow(2) - 1 + 0.1 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return {"x": x}, {"a": a, "b": b, "c": c}


def fitted(precision, steps=40):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    X, Y = chain_data()
    model = DAGDGP(GRAPH, num_inducing=6).double()
    guide = AutoStructuredGuide(model, precision=precision)
    train(model, guide, X, Y, num_steps=steps, progress=False)
    return model, guide, X, Y


@pytest.fixture(scope="module")
def chordal():
    return fitted("chordal")


@pytest.fixture(scope="module")
def mean_field():
    return fitted("mean_field")


def test_root_parents_equal_predict_mean_field(mean_field):
    """Under DAG-VI every node whose parents are roots has the same Gaussian in every propagated sample, so
    predict's moments are exact and one step must equal them."""
    model, guide, X, Y = mean_field
    prop = model.predict(guide, X, nodes=["a", "c"], num_samples=7)
    one = predict_one_step(model, guide, X, Y, nodes=["a", "c"], num_samples=7)
    for w in ("a", "c"):
        assert bool(one.one_step[w].all())
        for k in ("mean", "variance", "y_mean", "y_variance"):
            torch.testing.assert_close(getattr(one[w], k), getattr(prop[w], k), rtol=0, atol=1e-8)
        assert one[w].samples.shape == prop[w].samples.shape == (7, 50, 1)
        tau2 = model.likelihoods[w].variance.detach()
        torch.testing.assert_close(one[w].y_variance, one[w].variance + tau2, rtol=0, atol=1e-12)


def test_first_node_equals_predict_chordal(chordal):
    model, guide, X, Y = chordal
    first = model.topo_nodes[0]
    assert first in ("a", "c")
    prop = model.predict(guide, X, nodes=[first], num_samples=5)
    one = predict_one_step(model, guide, X, Y, nodes=[first], num_samples=5)
    for k in ("mean", "variance", "y_mean", "y_variance"):
        torch.testing.assert_close(getattr(one[first], k), getattr(prop[first], k), rtol=0, atol=1e-8)


@pytest.mark.parametrize("which", ["chordal", "mean_field"])
def test_matches_monte_carlo_over_q_u(request, which):
    """Brute force: joint draws of all inducing outputs from q(U), the node's conditional at the measured parent
    values, the moments over the draws."""
    model, guide, X, Y = request.getfixturevalue(which)
    one = predict_one_step(model, guide, X, Y, nodes=["b"], num_samples=3)
    posterior = guide.inducing_posterior()
    torch.manual_seed(1)
    N = 100_000
    with torch.no_grad():
        U = posterior.split(posterior.rsample((N,)))["b"][:, 0, :]           # [N, M]
        a, r = model.node_conditional("b", {"a": Y["a"]})                  # [n, M], [n]
    f_mean = a @ U.T                                                       # [n, N]
    mc_mean = f_mean.mean(-1)
    mc_var = f_mean.var(-1) + r
    se = (mc_var / N).sqrt()
    assert float(((one["b"].mean[:, 0] - mc_mean).abs() / se).max()) < 5
    torch.testing.assert_close(one["b"].variance[:, 0], mc_var, rtol=0.03, atol=1e-6)
    # and it differs from propagation, which does not see the measured a
    prop = model.predict(guide, X, nodes=["b"], num_samples=50)
    assert float((prop["b"].mean - one["b"].mean).abs().max()) > 0.1


def test_missing_parent_falls_back_to_propagation(chordal):
    model, guide, X, Y = chordal
    Y = dict(Y)
    a = Y["a"].clone()
    a[::4] = float("nan")
    Y["a"] = a
    prop = model.predict(guide, X, nodes=["a", "b", "c"], num_samples=20)
    one = predict_one_step(model, guide, X, Y, propagated=prop)
    missing = torch.isnan(a[:, 0])
    assert bool((one.one_step["b"] == ~missing).all()) and bool(one.one_step["a"].all())
    for k in ("mean", "variance", "y_mean", "y_variance"):
        torch.testing.assert_close(getattr(one["b"], k)[missing], getattr(prop["b"], k)[missing], rtol=0, atol=0)
    torch.testing.assert_close(one["b"].samples[:, missing], prop["b"].samples[:, missing], rtol=0, atol=0)
    assert one["b"].samples.shape == (20, 50, 1)
    # without propagated=, the fallback is computed (same shapes, every case finite)
    own = predict_one_step(model, guide, X, Y, nodes=["b"], num_samples=8)
    assert own["b"].samples.shape == (8, 50, 1) and bool(torch.isfinite(own["b"].y_variance).all())


def test_latent_or_unobserved_parent_is_never_one_step():
    g = nx.DiGraph([("h", "a"), ("x", "a"), ("x", "m"), ("m", "b")])
    model = DAGDGP(g, latent_inputs={"h": 1}, num_inducing=4).double()
    X = {"x": torch.randn(6, 1, dtype=torch.float64)}
    Xc, n, obs = model.checked_arguments(X, {"a": torch.randn(6, 1, dtype=torch.float64)})
    assert not bool(one_step_cases(model, "a", Xc, obs, n).any())        # latent parent h
    assert not bool(one_step_cases(model, "b", Xc, obs, n).any())        # m has no data
    assert bool(one_step_cases(model, "m", Xc, obs, n).all())            # its parent is a root


def test_bad_node(chordal):
    model, guide, X, Y = chordal
    with pytest.raises(ValueError, match="not a GP node"):
        predict_one_step(model, guide, X, Y, nodes=["x"])
