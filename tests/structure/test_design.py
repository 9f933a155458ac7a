"""next_experiment: the expected information gain from the exact posterior, on cases with a known answer."""
import math

import numpy as np
import pytest

from pyro_dag.structure import exact_posterior, next_experiment
from pyro_dag.structure.exact import ExactStructurePosterior


def _two_nodes(n=200, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X[:, 1] += 1.5 * X[:, 0]
    return X


def test_an_experiment_resolves_the_direction_worth_log_2_nats():
    post = exact_posterior(_two_nodes(), "bge")
    P = post.edge_probs()
    assert abs(float(P[0, 1]) - 0.5) < 0.05 and float(P[0, 1] + P[1, 0]) > 0.99   # H(G) ~ log 2
    res = next_experiment(post, [0, 1, ()], num_rows=100, num_samples=64, seed=1)
    by = {v.targets: v for v in res}
    for t in ((0,), (1,)):
        assert by[t].eig == pytest.approx(math.log(2), abs=max(0.05, 3 * by[t].stderr))
    assert abs(by[()].eig) < 0.02                    # more observational rows cannot orient a score-equivalent edge
    assert res[-1].targets == ()
    # about the edge 0 -> 1 the information is the same here (the edge decides the graph)
    e = {v.targets: v for v in next_experiment(post, [0], query=(0, 1), num_rows=100, num_samples=64, seed=1)}
    assert e[(0,)].eig == pytest.approx(by[(0,)].eig, abs=0.05)


def test_a_known_graph_has_nothing_left_to_learn_and_names_are_used():
    X = _two_nodes(300)
    mask = np.zeros(X.shape, dtype=bool)
    mask[150:, 0] = True
    X[150:, 0] = np.random.default_rng(3).normal(size=150)
    X[150:, 1] = 1.5 * X[150:, 0] + np.random.default_rng(4).normal(size=150)
    post = exact_posterior(X, "bge", node_names=["a", "b"], interventions=mask)
    assert float(post.edge_probs()[0, 1]) > 0.99
    res = next_experiment(post, ["a", "b"], num_samples=16)
    assert {v.targets for v in res} == {("a",), ("b",)}
    assert all(abs(v.eig) < 0.02 for v in res)


def test_next_experiment_refuses_what_it_cannot_score():
    X = _two_nodes()
    with pytest.raises(TypeError, match="exact posterior"):
        next_experiment(ExactStructurePosterior(np.zeros((2, 4)), np.full((2, 2), 0.3)))
    post = exact_posterior(X, "bge")
    with pytest.raises(ValueError, match="'zz' is not a node"):
        next_experiment(post, ["zz"])
    with pytest.raises(ValueError, match="num_samples must be"):
        next_experiment(post, num_samples=1)
    with pytest.raises(ValueError, match="graph_prior='fair'"):
        next_experiment(exact_posterior(X, "bge", graph_prior="fair"))
    env = np.repeat(["obs", "e"], 100)
    with pytest.raises(ValueError, match="unknown targets"):
        next_experiment(exact_posterior(X, "bge", interventions=(env, {"obs": [], "e": "unknown"})))
