"""Batched exact fits (pyro_dag.infer.training.collapsed_batch) against the one-by-one L-BFGS fits of
fit_collapsed(batch=False): the same optimum on small random graphs, and the nodes the batch must leave alone."""
import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.datasets.synthetic import erdos_renyi_dag, synthetic_sem
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import collapsed_bound, fit_collapsed
from pyro_dag.infer.training.collapsed_batch import exact_gp_problem


def _random_problem(p, n, seed):
    A = erdos_renyi_dag(p, seed=seed)
    X = synthetic_sem(A, n, mechanism="gp", noise_scale=0.3, seed=seed).data.double()
    names = [f"v{i}" for i in range(p)]
    g = nx.DiGraph()
    g.add_nodes_from(names)
    g.add_edges_from((names[i], names[j]) for i, j in A.nonzero().tolist())
    g.remove_nodes_from([v for v in names if g.degree(v) == 0])
    inputs = {v: X[:, [names.index(v)]] for v in g if g.in_degree(v) == 0}
    data = {v: X[:, [names.index(v)]] for v in g if g.in_degree(v) > 0}
    return g, inputs, data


def _fit(graph, inputs, data, batch, **model_kw):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = DAGDGP(graph, **model_kw).double()
    guide = AutoStructuredGuide(model)
    fit = fit_collapsed(model, guide, inputs, data, batch=batch)
    return model, guide, fit


@pytest.mark.parametrize("seed", [0, 1])
def test_batched_and_one_by_one_fits_agree_on_random_graphs(seed):
    """Every node's final bound within 0.02 nats (+ 1e-4 relative) of the L-BFGS fit's, its noise and signal
    variance within 5 %, and its predictive mean at the cases within 2 % of the data's scale."""
    graph, inputs, data = _random_problem(15, 40, seed)
    mb, gb, fb = _fit(graph, inputs, data, batch=True)
    ml, gl, fl = _fit(graph, inputs, data, batch=False)
    assert fb.nodes == fl.nodes and len(fb.nodes) >= 5
    assert all(len(fb.losses[w]) == 1 for w in fb.nodes)  # every node here went through the batch
    for w in fb.nodes:
        lb, ll = fb.losses[w][-1], fl.losses[w][-1]
        assert lb <= ll + 0.02 + 1e-4 * abs(ll), w
        for name, (a, b) in {"noise": (mb.likelihoods[w].variance, ml.likelihoods[w].variance),
                             "signal": (mb.kernels[w].base.variance, ml.kernels[w].base.variance)}.items():
            assert float(a.detach()) == pytest.approx(float(b.detach()), rel=0.05, abs=1e-3 * float(data[w].var())), (w, name)
    xs = {**inputs, **data}
    for w in fb.nodes:
        pa = {p: xs[p] for p in graph.predecessors(w)}
        mean_b, mean_l = _posterior_mean(mb, w, pa, data[w][:, 0]), _posterior_mean(ml, w, pa, data[w][:, 0])
        assert float((mean_b - mean_l).abs().max()) < 0.02 * float(data[w].std()) + 1e-3, w


def _posterior_mean(model, w, parent_values, y):
    """The optimal q(V_w)'s mean of f at the cases: A (I + AᵀA/τ²)⁻¹ Aᵀ y / τ²."""
    with torch.no_grad():
        _, a, tau2 = collapsed_bound(model, w, parent_values, y)
        prec = torch.eye(a.shape[1], dtype=a.dtype) + a.T @ a / tau2
        return a @ torch.linalg.solve(prec, a.T @ y / tau2)


def test_the_batch_leaves_other_kernels_and_fixed_noise_to_lbfgs():
    """A node with a non-default kernel, and a node whose noise the rule fixed, are not batched problems; the fit
    still covers them (by L-BFGS)."""
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(30, 1, dtype=torch.float64, generator=g)
    data = {"a": torch.sin(3 * x) + 0.1 * torch.randn(30, 1, dtype=torch.float64, generator=g),
            "b": torch.cos(2 * x) + 0.1 * torch.randn(30, 1, dtype=torch.float64, generator=g),
            "c": torch.sin(5 * x)}  # noise-free: the noise rule fixes a nugget
    graph = nx.DiGraph([("x", "a"), ("x", "b"), ("x", "c")])
    model = DAGDGP(graph, kernels={"b": kernels.Matern52()}).double()
    guide = AutoStructuredGuide(model)
    model.setup({"x": x}, data)
    rows = {w: ({"x": x}, data[w][:, 0]) for w in "abc"}
    assert exact_gp_problem(model, "a", *rows["a"]) is not None
    assert exact_gp_problem(model, "b", *rows["b"]) is None
    assert exact_gp_problem(model, "c", *rows["c"]) is None
    fit = fit_collapsed(model, guide, {"x": x}, data)
    assert fit.nodes == ["a", "b", "c"]
    assert len(fit.losses["a"]) == 1 and len(fit.losses["b"]) > 1


def test_fewer_inducing_inputs_than_cases_is_not_a_batched_problem():
    pyro.clear_param_store()
    graph, inputs, data = _random_problem(8, 30, 0)
    model = DAGDGP(graph, num_inducing=10).double()
    model.setup(inputs, data)
    w = next(v for v in graph if v in data and all(p in inputs or p in data for p in graph.predecessors(v)))
    pa = {p: {**inputs, **data}[p] for p in graph.predecessors(w)}
    assert exact_gp_problem(model, w, pa, data[w][:, 0]) is None
