"""exact_posterior: the order-sum dynamic programme against brute-force enumeration of (order, DAG) pairs."""
import itertools
import math

import numpy as np
import pytest
import torch

from pyro_dag.structure import BGeSEM, LinearGaussianSEM, is_acyclic
from pyro_dag.structure.exact import ExactStructurePosterior, exact_posterior, local_scores


def _dags_of_order(order, q, log_f, scale=1.0, max_parents=None):
    """Every DAG consistent with ``order`` (upstream first) with its unnormalised log posterior weight
    ``Σ_{i ≺ j} log q^{[i ∈ pa_j]} (1 - q)^{[i ∉ pa_j]} + scale Σ_j f_j(pa_j)`` (in-degree at most ``max_parents``)."""
    p = len(order)
    pairs = [(order[a], order[b]) for a in range(p) for b in range(a + 1, p)]
    for present in itertools.product([0, 1], repeat=len(pairs)):
        A = np.zeros((p, p), dtype=int)
        for (i, j), e in zip(pairs, present):
            A[i, j] = e
        if max_parents is not None and A.sum(0).max() > max_parents:
            continue
        logw = sum(math.log(q[i, j]) if A[i, j] else math.log(1 - q[i, j]) for i, j in pairs)
        logw += scale * sum(log_f[j, sum(1 << i for i in range(p) if A[i, j])] for j in range(p))
        yield A, logw


def _brute_force(log_f, q):
    """Edge posteriors and log Σ over all p! orders and all DAGs consistent with each, of
    Π_j Π_{i ≺ j} q^{[i ∈ pa_j]} (1 - q)^{[i ∉ pa_j]} f_j(pa_j)."""
    p = log_f.shape[0]
    P = np.zeros((p, p))
    total = -np.inf
    for order in itertools.permutations(range(p)):
        for A, logw in _dags_of_order(order, q, log_f):
            total = np.logaddexp(total, logw)
            P += A * math.exp(logw)
    return P / math.exp(total), total


@pytest.mark.parametrize("p,mechanism", [(3, "linear"), (4, "linear"), (4, "bge")])
def test_edge_posteriors_match_brute_force(p, mechanism):
    rng = np.random.default_rng(p)
    X = torch.as_tensor(rng.normal(size=(30, p)))
    X[:, -1] += 0.8 * X[:, 0]
    X = (X - X.mean(0)) / X.std(0)
    mech = LinearGaussianSEM(p, marginalize=True) if mechanism == "linear" else BGeSEM(p)
    log_f = local_scores(mech, X)
    q = rng.uniform(0.1, 0.9, size=(p, p))
    np.fill_diagonal(q, 0.0)
    post = ExactStructurePosterior(log_f, q)
    P_ref, log_total = _brute_force(log_f, q)
    np.testing.assert_allclose(post.edge_probs().numpy(), P_ref, rtol=1e-9, atol=1e-12)
    assert post.log_evidence == pytest.approx(log_total - math.lgamma(p + 1), rel=1e-12)


def test_order_queries_match_brute_force():
    """p(≺ | X) and P(i -> j | ≺, X) against enumeration of the DAGs consistent with each order; the order
    probabilities sum to one and mix the conditional edge probabilities into the marginal ones."""
    p = 4
    rng = np.random.default_rng(5)
    X = torch.as_tensor(rng.normal(size=(30, p)))
    X[:, 2] += X[:, 0]
    log_f = local_scores(LinearGaussianSEM(p, marginalize=True), X)
    q = rng.uniform(0.2, 0.8, size=(p, p))
    np.fill_diagonal(q, 0.0)
    post = ExactStructurePosterior(log_f, q)
    mix, total = np.zeros((p, p)), 0.0
    for order in itertools.permutations(range(p)):
        weights, edges = [], np.zeros((p, p))
        for A, logw in _dags_of_order(order, q, log_f):
            weights.append(logw)
            edges += A * math.exp(logw)
        log_order = np.logaddexp.reduce(weights)
        np.testing.assert_allclose(post.edge_probs_given_order(list(order)).numpy(), edges / math.exp(log_order),
                                   rtol=1e-9, atol=1e-12)
        lp = post.order_log_prob(list(order))
        total += math.exp(lp)
        mix += math.exp(lp) * post.edge_probs_given_order(list(order)).numpy()
        assert lp == pytest.approx(log_order - post._log_Z, abs=1e-9)
    assert total == pytest.approx(1.0, rel=1e-10)
    np.testing.assert_allclose(mix, post.edge_probs().numpy(), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="permutation"):
        post.order_log_prob([0, 1, 1, 2])


def test_local_scores_are_the_mechanisms_node_scores():
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(25, 4)))
    mech = LinearGaussianSEM(4, marginalize=True)
    log_f = local_scores(mech, X)
    A = torch.tensor([[0, 1, 0, 1], [0, 0, 1, 1], [0, 0, 0, 1], [0, 0, 0, 0]], dtype=torch.float64)
    ref = mech.node_evidence(X.T @ X, 25, A)
    for j in range(4):
        mask = sum(1 << i for i in range(4) if A[i, j])
        assert log_f[j, mask] == pytest.approx(ref[j].item(), rel=1e-12)
        assert log_f[j, mask | (1 << j)] == -np.inf


def test_samples_are_dags_with_the_exact_edge_frequencies():
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(40, 4)))
    X[:, 1] += X[:, 0]
    X[:, 3] += 0.5 * X[:, 1] - 0.5 * X[:, 2]
    post = exact_posterior(X, likelihood="linear", expected_parents=1.0)
    S = post.sample(4000, seed=0)
    assert S.shape == (4000, 4, 4) and all(is_acyclic(a) for a in S[:200])
    P = post.edge_probs()
    se = (P * (1 - P) / 4000).sqrt()
    assert ((S.mean(0) - P).abs() <= 4.5 * se + 1e-3).all()


def test_exact_posterior_recovers_a_strong_chain_and_checks_input():
    rng = np.random.default_rng(2)
    x0 = rng.normal(size=500)
    x1 = 2 * x0 + 0.3 * rng.normal(size=500)
    x2 = rng.normal(size=500)
    post = exact_posterior(np.stack([x0, x1, x2], 1), likelihood="bge")
    P = post.edge_probs()
    assert P[0, 1] + P[1, 0] > 0.99 and P[0, 2] + P[2, 0] < 0.2
    with pytest.raises(ValueError, match="collapsed likelihood"):
        exact_posterior(np.stack([x0, x1, x2], 1), likelihood="mlp")
    with pytest.raises(ValueError, match="p ≤ 20"):
        exact_posterior(rng.normal(size=(30, 21)))
    with pytest.raises(TypeError, match="collapsed likelihood"):
        local_scores(object(), torch.zeros(3, 2))


def test_order_scorer_matches_the_exact_order_posterior_and_the_capped_brute_force():
    """Without a cap, OrderScorer differences between orders are the exact log p(≺ | X) differences; with
    max_parents = 1 it equals enumeration of the DAGs with at most one parent per node."""
    from pyro_dag.structure.exact import OrderScorer

    p = 4
    rng = np.random.default_rng(7)
    X = torch.as_tensor(rng.normal(size=(40, p)))
    X[:, 1] += X[:, 0]
    X[:, 3] += X[:, 1] - X[:, 2]
    mech = LinearGaussianSEM(p, marginalize=True)
    q = rng.uniform(0.2, 0.8, size=(p, p))
    np.fill_diagonal(q, 0.0)
    post = ExactStructurePosterior(local_scores(mech, X), q)
    full = OrderScorer(mech, X, q)
    capped = OrderScorer(mech, X, q, max_parents=1)
    assert full.num_parent_sets == 8 and capped.num_parent_sets == 4
    log_f = local_scores(mech, X)
    orders = [list(o) for o in itertools.permutations(range(p))]
    pots = torch.stack([torch.as_tensor([float(p - o.index(k)) for k in range(p)]) for o in orders])  # upstream high
    got, got_capped = full(pots), capped(pots, scale=0.5)
    ref = torch.as_tensor([post.order_log_prob(o) for o in orders], dtype=torch.float64)
    torch.testing.assert_close(got - got[0], ref - ref[0], rtol=1e-9, atol=1e-9)
    for k, order in enumerate(orders):
        total = np.logaddexp.reduce([w for _, w in _dags_of_order(order, q, log_f, scale=0.5, max_parents=1)])
        assert got_capped[k].item() == pytest.approx(total, rel=1e-10)
    # memoised scores: the same orders (other potentials, shuffled rows) and scales give the same values; a new
    # scale is not served from the cache; an emptied cache recomputes the same numbers
    perm = torch.randperm(len(orders), generator=torch.Generator().manual_seed(0))
    again = full(pots[perm] * 3.0 - 1.0)
    torch.testing.assert_close(again, got[perm], rtol=0, atol=0)
    tempered = full(pots, scale=0.5)
    assert not torch.allclose(tempered, got)
    full._cache.clear()
    torch.testing.assert_close(full(pots, scale=0.5), tempered, rtol=1e-12, atol=1e-12)


def test_order_scorer_with_candidate_parents_matches_restricted_enumeration():
    """candidates=c keeps, per node, the c parents with the largest single-parent evidence, and the score sums
    exactly over the parent sets inside them."""
    from pyro_dag.structure.exact import OrderScorer

    p = 4
    rng = np.random.default_rng(9)
    X = torch.as_tensor(rng.normal(size=(50, p)))
    X[:, 3] += X[:, 0] - X[:, 1]
    X[:, 2] += 0.7 * X[:, 3]
    mech = LinearGaussianSEM(p, marginalize=True)
    q = np.full((p, p), 0.3)
    np.fill_diagonal(q, 0.0)
    scorer = OrderScorer(mech, X, q, candidates=2)
    assert all(len(c) == 2 and j not in c for j, c in enumerate(scorer.candidate_parents))
    assert set(scorer.candidate_parents[3]) == {0, 1} or 2 in scorer.candidate_parents[3]
    log_f = local_scores(mech, X)
    for order in itertools.permutations(range(p)):
        pot = torch.as_tensor([[float(p - order.index(k)) for k in range(p)]])
        total = -math.inf
        for A, logw in _dags_of_order(order, q, log_f):
            if all(A[i, j] == 0 or i in scorer.candidate_parents[j] for i in range(p) for j in range(p)):
                total = np.logaddexp(total, logw)
        assert scorer(pot).item() == pytest.approx(total, rel=1e-10)


@pytest.mark.parametrize("scale", [1e300, 1e160])
def test_exact_posterior_refuses_a_column_whose_standard_deviation_overflows(scale):
    """Standardised by an infinite s.d., the column became all zeros and the posterior was silently the prior."""
    import pandas as pd

    rng = np.random.default_rng(0)
    x0 = rng.normal(size=60)
    frame = pd.DataFrame({"a": x0, "b": (2 * x0 + 0.1 * rng.normal(size=60)) * scale, "c": rng.normal(size=60)})
    with pytest.raises(ValueError, match="column 'b' reaches .* overflows float64.*rescale the column"):
        exact_posterior(frame, likelihood="bge")
    with pytest.raises(ValueError, match="column 1 reaches"):
        exact_posterior(frame.to_numpy(), likelihood="bge")
