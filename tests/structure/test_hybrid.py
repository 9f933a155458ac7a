"""The hybrid scheme: PC skeleton and Markov-blanket tests, candidate expansion, relocation order MCMC against the
exact order posterior, and hybrid_posterior's queries against the exact posterior of the same candidate tables."""
import itertools
import math

import numpy as np
import pytest
import torch

from pyro_dag.graph import is_acyclic
from pyro_dag.metrics import expected_shd
from pyro_dag.structure import candidate_tables, exact_posterior
from pyro_dag.structure.hybrid import (OrderMCMCPosterior, _hill_climb, _max_beta, _order_score,
                                       _relocation_scores, hybrid_posterior, order_relocation_mcmc)
from pyro_dag.structure.networks import NETWORKS, linear_gaussian_data, network
from pyro_dag.structure.skeleton import (Skeleton, fisher_z_pvalues, markov_blanket_graph, pc_skeleton,
                                         skeleton_candidates)


def _sem(n=400, seed=0):
    """0 -> 2 <- 1, 2 -> 3, 3 -> 4: a collider and a chain."""
    A = np.zeros((5, 5), dtype=int)
    A[0, 2] = A[1, 2] = A[2, 3] = A[3, 4] = 1
    X, _ = linear_gaussian_data(A, n, seed, weight_range=(0.6, 1.2))
    return A, X


# --------------------------------------------------------------------------------------------------- networks
@pytest.mark.parametrize("name, p, e", [("asia", 8, 8), ("child", 20, 25), ("alarm", 37, 46)])
def test_networks_are_dags_of_the_published_size(name, p, e):
    A, names = network(name)
    assert A.shape == (p, p) and int(A.sum()) == e and len(set(names)) == p
    assert bool(is_acyclic(torch.as_tensor(A)))
    assert name in NETWORKS


def test_network_edges_spot_checks():
    A, nm = network("alarm")
    assert sorted(nm[k] for k in np.nonzero(A[:, nm.index("CCHL")])[0]) == ["ACO2", "ANES", "SAO2", "TPR"]
    A, nm = network("child")
    assert sorted(nm[k] for k in np.nonzero(A[:, nm.index("Age")])[0]) == ["Disease", "Sick"]
    A, nm = network("asia")
    assert A[nm.index("either"), nm.index("dysp")] == 1 and A[nm.index("dysp"), nm.index("either")] == 0
    with pytest.raises(ValueError, match="unknown network"):
        network("insurance")


def test_linear_gaussian_data():
    A, _ = network("asia")
    X, W = linear_gaussian_data(A, 300, seed=3)
    assert X.shape == (300, 8)
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(0), 1, atol=1e-12)
    assert ((W != 0) == (A == 1)).all() and (np.abs(W[A == 1]) >= 0.5).all() and (np.abs(W) <= 2).all()
    _, W2 = linear_gaussian_data(A, 50, seed=3)
    np.testing.assert_array_equal(W, W2)                           # the weights do not depend on N
    raw, _ = linear_gaussian_data(A, 20000, seed=3, standardize=False)
    j = 1                                                          # tub = w * asia + noise
    assert np.var(raw[:, j] - W[0, j] * raw[:, 0]) == pytest.approx(1.0, abs=0.05)


# --------------------------------------------------------------------------------------------------- skeleton
def test_fisher_z_pvalues_match_regression_residuals():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    X[:, 1] += 0.3 * X[:, 0] + 0.5 * X[:, 2]
    corr = np.corrcoef(X, rowvar=False)
    pv = fisher_z_pvalues(corr, 0, 1, np.array([[2], [3]]), 200)
    for a, S in enumerate([[2], [3]]):
        Z = np.c_[np.ones(200), X[:, S]]
        r0 = X[:, 0] - Z @ np.linalg.lstsq(Z, X[:, 0], rcond=None)[0]
        r1 = X[:, 1] - Z @ np.linalg.lstsq(Z, X[:, 1], rcond=None)[0]
        r = np.corrcoef(r0, r1)[0, 1]
        z = abs(np.arctanh(r)) * math.sqrt(200 - 1 - 3)
        assert pv[a] == pytest.approx(math.erfc(z / math.sqrt(2)), rel=1e-8)
    assert fisher_z_pvalues(corr, 0, 1, np.zeros((1, 0), dtype=int), 200)[0] == pytest.approx(
        math.erfc(abs(np.arctanh(corr[0, 1])) * math.sqrt(197) / math.sqrt(2)))


def test_pc_skeleton_and_markov_blanket_recover_a_clear_graph():
    A, X = _sem(n=3000)
    sk = pc_skeleton(X, alpha=0.01)
    assert isinstance(sk, Skeleton) and sk.num_tests > 0
    np.testing.assert_array_equal(sk.adjacency, (A + A.T) > 0)
    assert sk.sepsets[(0, 1)] == ()                                # 0 and 1 are marginally independent
    moral = (A + A.T) > 0
    moral[0, 1] = moral[1, 0] = True                               # the spouses of the collider
    np.testing.assert_array_equal(markov_blanket_graph(X, alpha=0.01), moral)
    assert markov_blanket_graph(X[:5], 0.05) is None               # N <= p + 1


def test_pc_skeleton_equals_causal_learn():
    cl = pytest.importorskip("causallearn.search.ConstraintBased.PC")
    A, _ = network("asia")
    for seed in (0, 1):
        X, _ = linear_gaussian_data(A, 500, seed)
        g = cl.pc(X, 0.05, "fisherz", show_progress=False).G.graph
        np.testing.assert_array_equal(pc_skeleton(X, 0.05).adjacency, g != 0)


def test_skeleton_candidates_expand_by_neighbour_rounds():
    path = np.zeros((5, 5), dtype=bool)
    for i in range(4):
        path[i, i + 1] = path[i + 1, i] = True                     # 0 - 1 - 2 - 3 - 4
    assert skeleton_candidates(path, 0) == [[1], [0, 2], [1, 3], [2, 4], [3]]
    assert skeleton_candidates(path, 1) == [[1, 2], [0, 2, 3], [0, 1, 3, 4], [1, 2, 4], [2, 3]]
    corr = np.eye(5)
    corr[2, 4] = corr[4, 2] = 0.9
    assert skeleton_candidates(path, 1, max_candidates=3, corr=corr)[2] == [1, 3, 4]   # neighbours, then |corr|


# ------------------------------------------------------------------------------------------------ order MCMC
def _tables(p=5, n=200, seed=0, **kw):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:, 2] += 0.8 * X[:, 0] - 0.6 * X[:, 1]
    X[:, 3] += 0.7 * X[:, 2]
    X[:, 4] += 0.5 * X[:, 3] + 0.4 * X[:, 0]
    return X, candidate_tables(X, "linear", candidates=[[k for k in range(p) if k != i] for i in range(p)], **kw)


def test_relocation_scores_match_each_insertion():
    _, tabs = _tables()
    order = np.array([3, 0, 4, 1, 2])
    for v in range(5):
        F, rest = _relocation_scores(tabs._beta, order, v)
        for t in range(5):
            moved = np.insert(rest, t, v)
            assert F[t] == pytest.approx(_order_score(tabs._beta, moved), rel=1e-12, abs=1e-9)


def test_relocation_mcmc_matches_the_exact_order_posterior():
    _, tabs = _tables()
    exact = tabs.to_exact()
    orders, best, score = order_relocation_mcmc(tabs, 3000, num_steps=12000, seed=1)
    # order frequencies against p(σ | X) over all 120 orders
    counts = {}
    for o in orders:
        counts[tuple(o)] = counts.get(tuple(o), 0) + 1
    probs = {o: math.exp(exact.order_log_prob(list(o))) for o in itertools.permutations(range(5))}
    top = sorted(probs, key=probs.get, reverse=True)[:5]
    for o in top:
        assert counts.get(o, 0) / 3000 == pytest.approx(probs[o], abs=0.05)
    assert score == pytest.approx(max(_order_score(tabs._beta, np.array(o)) for o in probs), abs=1e-9)
    assert tuple(best) in probs


def _same_map_score(post, exact, tabs, given=None):
    """The MAP (order, DAG) pairs score the same (single edges between standardised variables tie, so the DAGs
    themselves may differ by such a reversal)."""
    (_, o1), (_, o2) = post.map_dag(given, return_order=True), exact.map_dag(given, return_order=True)
    bmax = _max_beta(tabs)
    assert _order_score(bmax, np.array(o1)) == pytest.approx(_order_score(bmax, np.array(o2)), abs=1e-9)


def test_order_mcmc_posterior_matches_exact_queries():
    X, tabs = _tables()
    exact = tabs.to_exact()
    post = OrderMCMCPosterior(tabs, num_samples=1000, num_chains=4, num_steps=3000, seed=0, num_restarts=2)
    np.testing.assert_allclose(post.edge_probs().numpy(), exact.edge_probs().numpy(), atol=0.05)
    _same_map_score(post, exact, tabs)
    S = post.sample(500, seed=1)
    assert S.shape == (500, 5, 5) and bool(is_acyclic(S).all())
    np.testing.assert_allclose(S.mean(0).numpy(), exact.edge_probs().numpy(), atol=0.08)
    assert post.prob({(0, 2): True}, num_samples=2000, seed=3) == pytest.approx(float(exact.edge_probs()[0, 2]),
                                                                                 abs=0.06)
    assert post.chain_spread.shape == (5, 5) and post.chain_spread.max() < 0.15


def test_order_mcmc_posterior_conditions_on_evidence():
    X, tabs = _tables()
    exact = tabs.to_exact()
    post = OrderMCMCPosterior(tabs, num_samples=1000, num_chains=4, num_steps=3000, seed=0, num_restarts=2)
    ev = {(0, 2): True, (3, 4): False}
    P = post.edge_probs(given=ev).numpy()
    assert P[0, 2] == 1.0 and P[3, 4] == 0.0
    np.testing.assert_allclose(P, exact.edge_probs(given=ev).numpy(), atol=0.05)
    assert bool(post.sample(50, seed=2, given=ev)[:, 0, 2].all())
    _same_map_score(post, exact, post._given(ev).tables, given=ev)


def test_hill_climb_finds_the_exact_map_order_on_small_tables():
    _, tabs = _tables(seed=2)
    bmax = _max_beta(tabs)
    exact = tabs.to_exact()
    M, order = exact.map_dag(return_order=True)
    best = max(_hill_climb(bmax, np.random.default_rng(s).permutation(5))[1] for s in range(8))
    assert best == pytest.approx(_order_score(bmax, np.array(order)), abs=1e-9)


# ------------------------------------------------------------------------------------------ hybrid_posterior
def test_hybrid_exact_method_is_the_exact_posterior_of_its_candidates():
    A, X = _sem(n=500, seed=1)
    post = hybrid_posterior(X, method="exact")
    ref = candidate_tables(X, "linear", candidates=post.candidates).to_exact()
    np.testing.assert_allclose(post.edge_probs().numpy(), ref.edge_probs().numpy(), atol=1e-12)
    assert expected_shd(post.map_dag().numpy()[None], A, level="cpdag") == 0
    full = exact_posterior(X)                                      # the candidates hold every true parent
    assert all(i in post.candidates[j] for i, j in zip(*np.nonzero(A)))
    assert float((post.edge_probs() - full.edge_probs()).abs().max()) < 0.05


def test_hybrid_mcmc_agrees_with_exact_on_the_same_candidates():
    A, X = _sem(n=500, seed=2)
    mc = hybrid_posterior(X, method="mcmc", num_samples=1000, seed=0)
    ex = hybrid_posterior(X, method="exact")
    assert mc.candidates == ex.candidates
    assert isinstance(mc, OrderMCMCPosterior)
    np.testing.assert_allclose(mc.edge_probs().numpy(), ex.edge_probs().numpy(), atol=0.06)
    _same_map_score(mc, ex, mc.tables)


def test_hybrid_asia():
    A, _ = network("asia")
    X, _ = linear_gaussian_data(A, 2000, seed=1)
    post = hybrid_posterior(X)
    assert expected_shd(post.map_dag().numpy()[None], A, level="cpdag") <= 1
    assert expected_shd(post.map_dag().numpy()[None], exact_posterior(X).map_dag().numpy(), level="cpdag") == 0
    with pytest.raises(ValueError, match="method"):
        hybrid_posterior(X, method="gibbs")
    with pytest.raises(ValueError, match="collapsed"):
        hybrid_posterior(X, likelihood="mlp")


@pytest.mark.slow
def test_hybrid_alarm_recovers_the_cpdag():
    A, _ = network("alarm")
    X, _ = linear_gaussian_data(A, 2000, seed=0)
    post = hybrid_posterior(X, seed=0)
    assert expected_shd(post.map_dag().numpy()[None], A, level="cpdag") <= 2
