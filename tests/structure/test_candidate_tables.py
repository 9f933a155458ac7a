"""CandidateTables (candidate parent sets, Wang, Wicker & Kwiatkowska 2022 §4.3): with every node a candidate the
circuit equals the one on the exact posterior; with restricted candidates, an in-degree bound or the fair prior,
every query equals enumeration of the (order, DAG) pairs of the restricted model; order MCMC; p > 20."""
import itertools
import math

import numpy as np
import pytest
import torch

from test_order_spn import _circuit_pairs
from test_queries import _assert_consistent, _assert_most_probable_dag, _holds

from pyro_dag.structure import exact_posterior, order_spn
from pyro_dag.structure.causal import bge_mean_weights, total_effects
from pyro_dag.structure.graph_priors import fair_prior_log
from pyro_dag.structure.mechanisms import BGeSEM
from pyro_dag.structure.order_sampler import order_mcmc
from pyro_dag.structure.parent_set_tables import candidate_tables
from pyro_dag.structure.scores import local_scores

CANDS = [[1, 2], [0, 3, 4], [1], [0, 1, 2, 4], [2, 3]]
EVIDENCE = [{}, {(1, 0): True}, {(3, 4): True, (1, 3): False}, {(0, 1): True, (2, 3): True}]


@pytest.fixture(scope="module")
def data5():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 5))
    X[:, 1] += 0.9 * X[:, 0]
    X[:, 4] += 0.7 * X[:, 1] - 0.6 * X[:, 3]
    X[:, 3] += 0.5 * X[:, 2]
    return torch.as_tensor(X)


def _orders(p, m, seed):
    rng = np.random.default_rng(seed)
    return np.array([rng.permutation(p) for _ in range(m)])


def test_all_candidates_give_the_exact_circuit(data5):
    ex = exact_posterior(data5, likelihood="bge")
    ct = candidate_tables(data5, likelihood="bge", num_candidates=4)
    assert ct.candidates == [[k for k in range(5) if k != i] for i in range(5)]
    assert ct._log_Z == pytest.approx(ex._log_Z, rel=1e-10)
    orders = _orders(5, 30, 0)
    a = order_spn(ex, orders, expansion=(3, 2), seed=1)
    b = order_spn(ct, orders, expansion=(3, 2), seed=1)
    assert [tuple(o) for o, _ in a.support()] == [tuple(o) for o, _ in b.support()]
    assert b.coverage == pytest.approx(a.coverage, rel=1e-9)
    for ev in EVIDENCE:
        assert b.prob(ev) == pytest.approx(a.prob(ev), rel=1e-9)
        np.testing.assert_allclose(b.edge_probs(given=ev).numpy(), a.edge_probs(given=ev).numpy(), atol=1e-10)
        assert torch.equal(b.map_dag(given=ev), a.map_dag(given=ev))
        np.testing.assert_allclose(b.causal_effects(given=ev).numpy(), a.causal_effects(given=ev).numpy(),
                                   atol=1e-9)


def _restricted_reference(X, cands, max_parents=None, prior="edge"):
    """Raw local scores with every set outside the candidates (or above the bound) at -inf, and the prior's q."""
    Xs = (X - X.mean(0)) / X.std(0)
    log_f = local_scores(BGeSEM(5), Xs)
    masks = np.arange(32)
    for i, c in enumerate(cands):
        cm = sum(1 << k for k in c)
        size = np.array([bin(m).count("1") for m in masks])
        bad = (masks & ~cm) != 0
        if max_parents is not None:
            bad |= size > max_parents
        log_f[i, bad] = -np.inf
        if prior == "fair":
            log_f[i] = log_f[i] + fair_prior_log(5, size)
    if prior == "fair":
        q = np.full((5, 5), 0.5)                  # every order has the same number of pairs: a constant factor
    else:
        ex = exact_posterior(X, likelihood="bge")
        q = ex._q
    np.fill_diagonal(q, 0.0)
    return log_f, q, Xs


@pytest.mark.parametrize("max_parents,prior", [(None, "edge"), (2, "edge"), (None, "fair")])
def test_restricted_queries_match_enumeration(data5, max_parents, prior):
    ct = candidate_tables(data5, likelihood="bge", candidates=CANDS, max_parents=max_parents, graph_prior=prior)
    log_f, q, Xs = _restricted_reference(data5, CANDS, max_parents, prior)
    spn = order_spn(ct, _orders(5, 40, 2), expansion=(4, 2), seed=0)
    orders, A, lq = _circuit_pairs(spn, log_f, q)
    keep = np.isfinite(lq)
    orders, A, lq = [o for o, k in zip(orders, keep) if k], A[keep], lq[keep]
    w = np.exp(lq)
    assert w.sum() == pytest.approx(1.0, rel=1e-9)
    for i, c in enumerate(CANDS):                      # no edge from a non-candidate
        others = [k for k in range(5) if k not in c]
        assert (A[:, others, i] == 0).all()
    for ev in EVIDENCE:
        ok = _holds(A, ev)
        assert spn.prob(ev) == pytest.approx(w[ok].sum(), rel=1e-9)
        if not ok.any():
            continue
        P_ref = (w[ok, None, None] * A[ok]).sum(0) / w[ok].sum()
        np.testing.assert_allclose(spn.edge_probs(given=ev).numpy(), P_ref, rtol=1e-8, atol=1e-12)
        A_map, order = spn.map_dag(given=ev, return_order=True)
        _assert_most_probable_dag(A_map.numpy(), A[ok], lq[ok])
        _assert_consistent(A_map.numpy(), order)
        E = total_effects(bge_mean_weights(Xs, torch.as_tensor(A[ok]))).numpy()
        ref = (w[ok, None, None] * E).sum(0) / w[ok].sum()
        np.testing.assert_allclose(spn.causal_effects(given=ev).numpy(), ref, rtol=1e-7, atol=1e-10)
    # the exact DP of the restricted model against enumeration over all orders
    ex = ct.to_exact()
    full = order_spn(ct, "random", expansion=(10, 3), seed=0)
    assert full.coverage == pytest.approx(1.0)
    np.testing.assert_allclose(ex.edge_probs().numpy(), full.edge_probs().numpy(), atol=1e-10)
    # sampling respects the candidates and the evidence
    S = spn.sample(2000, seed=0, given={(3, 4): True})
    assert bool((S[:, 3, 4] == 1).all()) and bool((S[:, 3, 0] == 0).all())
    P = spn.edge_probs(given={(3, 4): True})
    assert ((S.mean(0) - P).abs() <= 4.5 * (P * (1 - P) / 2000).sqrt() + 1e-9).all()


def test_required_edge_outside_the_candidates_has_probability_zero(data5):
    ct = candidate_tables(data5, likelihood="bge", candidates=CANDS)
    spn = order_spn(ct, "random", expansion=(4, 2), seed=0)
    assert spn.prob({(4, 0): True}) == 0.0                 # 4 is not a candidate parent of 0
    assert spn.prob({(4, 0): False}) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="probability zero"):
        spn.edge_probs(given={(4, 0): True})
    with pytest.raises(ValueError, match="candidates\\[1\\]"):
        candidate_tables(data5, candidates=[[1], [1], [0], [0], [0]])
    with pytest.raises(ValueError, match="graph_prior"):
        candidate_tables(data5, graph_prior="uniform")
    with pytest.raises(ValueError, match="exact"):
        order_spn(ct, "exact")


def test_pairwise_candidates_and_the_prior_switch(data5):
    ct = candidate_tables(data5, likelihood="bge", num_candidates=2, selection="pairwise")
    Xs = (data5 - data5.mean(0)) / data5.std(0)
    log_f = local_scores(BGeSEM(5), Xs)
    for i in range(5):
        gain = {k: log_f[i, 1 << k] - log_f[i, 0] for k in range(5) if k != i}
        assert ct.candidates[i] == sorted(sorted(gain, key=lambda k: -gain[k])[:2])
    fair = ct.with_prior("fair")
    assert fair.candidates == ct.candidates and fair.graph_prior == "fair"
    direct = candidate_tables(data5, likelihood="bge", num_candidates=2, selection="pairwise", graph_prior="fair")
    np.testing.assert_allclose(fair._g.arr, direct._g.arr)
    # the fair prior: every parent-set size has prior mass 1/p
    sizes = np.array([bin(m).count("1") for m in range(16)])
    mass = [np.exp(fair_prior_log(5, sizes[sizes == k])).sum() for k in range(5)]
    np.testing.assert_allclose(mass, 0.2)


def test_order_mcmc_targets_the_order_posterior(data5):
    ex = exact_posterior(data5, likelihood="bge")
    O = order_mcmc(ex, 3000, num_steps=30000, seed=0)
    assert O.shape == (3000, 5) and (np.sort(O, 1) == np.arange(5)).all()
    lp = {o: ex.order_log_prob(o) for o in itertools.permutations(range(5))}
    for k in range(5):
        ref = sum(math.exp(v) for o, v in lp.items() if o[0] == k)
        assert abs((O[:, 0] == k).mean() - ref) < 0.06


def test_a_circuit_beyond_twenty_nodes():
    rng = np.random.default_rng(0)
    p = 22
    X = rng.normal(size=(60, p))
    for j in range(1, p):
        X[:, j] += 0.8 * X[:, j - 1]
    ct = candidate_tables(X, likelihood="bge", num_candidates=3)
    assert math.isnan(ct._log_Z)
    spn = order_spn(ct, "greedy", num_orders=50, expansion=(4, 2, 2, 1), seed=0)
    assert math.isnan(spn.coverage)
    P = spn.edge_probs()
    assert P.shape == (p, p) and bool(torch.isfinite(P).all())
    assert float(P[0, 1] + P[1, 0]) > 0.9                 # the chain's first link is found in some direction
    given = {(0, 1): True}
    Pg = spn.edge_probs(given=given)
    assert float(Pg[0, 1]) == pytest.approx(1.0) and float(Pg[1, 0]) == 0.0
    S = spn.sample(50, seed=0, given=given)
    assert bool((S[:, 0, 1] == 1).all())
    assert spn.map_dag(given=given)[0, 1] == 1
    assert spn.causal_effects().shape == (p, p)


def test_exact_posterior_with_the_fair_prior(data5):
    X = data5[:, :4]
    ex = exact_posterior(X, likelihood="bge", graph_prior="fair")
    ref = candidate_tables(X, likelihood="bge", num_candidates=3, graph_prior="fair").to_exact()
    np.testing.assert_allclose(ex.edge_probs().numpy(), ref.edge_probs().numpy(), atol=1e-10)
    # against enumeration: p(σ, G) ∝ Π_j p_fair(G_j) f_j(G_j) over all orders and consistent DAGs
    from test_exact import _brute_force

    Xs = (X - X.mean(0)) / X.std(0)
    sizes = np.array([bin(m).count("1") for m in range(16)])
    log_f = local_scores(BGeSEM(4), Xs) + fair_prior_log(4, sizes)[None, :]
    q = np.full((4, 4), 0.5)
    np.fill_diagonal(q, 0.0)
    P, log_Z = _brute_force(log_f, q)
    np.testing.assert_allclose(ex.edge_probs().numpy(), P, atol=1e-10)
    assert ex.log_evidence == pytest.approx(log_Z - math.lgamma(5) - 6 * math.log(0.5), rel=1e-10)
    assert not np.allclose(ex.edge_probs().numpy(), exact_posterior(X, likelihood="bge").edge_probs().numpy(),
                           atol=1e-3)
    with pytest.raises(ValueError, match="graph_prior"):
        exact_posterior(X, graph_prior="uniform")
