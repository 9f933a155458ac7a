"""Candidate parent selection (Viinikka et al. 2020, §4.1, the greedy heuristic; Wang, Wicker & Kwiatkowska 2022,
App. F): the local-score helper against the dense scores, the greedy ranking against a direct transcription of its
rule, a parent the pairwise gain misses, the reverse-direction tier, forced edges, and the tables built on the
selected sets exact on their support (against enumeration of all (order, DAG) pairs)."""
import itertools

import numpy as np
import pytest
import torch

from test_exact import _brute_force

from pyro_dag.structure import exact_posterior
from pyro_dag.structure.candidate_selection import _greedy_node, _parent_set_scorer, select_candidates
from pyro_dag.structure.parent_set_tables import candidate_tables
from pyro_dag.structure.mechanisms import BGeSEM, LinearGaussianSEM
from pyro_dag.structure.scores import local_scores


def _std(X):
    return (X - X.mean(0)) / X.std(0)


@pytest.fixture(scope="module")
def cancel6():
    """x2 = 2 (x0 - x1) + noise with x1 ≈ x0: x0 is a parent of x2 that is uncorrelated with it; x3, x4, x5 are
    noisy children of x2 (correlated with it more than x0 is)."""
    rng = np.random.default_rng(0)
    n = 500
    X = np.zeros((n, 6))
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = X[:, 0] + 0.4 * rng.normal(size=n)
    X[:, 2] = 2.0 * (X[:, 0] - X[:, 1]) + 0.3 * rng.normal(size=n)
    for j in (3, 4, 5):
        X[:, j] = X[:, 2] + 3.0 * rng.normal(size=n)
    return torch.as_tensor(X)


@pytest.mark.parametrize("mech_cls", [BGeSEM, LinearGaussianSEM])
def test_parent_set_scorer_matches_the_dense_local_scores(cancel6, mech_cls):
    X = _std(cancel6)
    mech = mech_cls(6) if mech_cls is BGeSEM else mech_cls(6, marginalize=True)
    dense = local_scores(mech, X)
    score = _parent_set_scorer(X, mech)
    sets = np.array([[-1, -1, -1], [0, -1, -1], [1, 3, -1], [3, 1, -1], [0, 1, 4], [5, -1, 0]])
    masks = [sum(1 << int(k) for k in s if k >= 0) for s in sets]
    np.testing.assert_allclose(score(2, sets), dense[2, masks], rtol=1e-10, atol=1e-9)


def _greedy_reference(f, p, i, K, num_last, max_size):
    """A direct transcription of the rule: at each step maximise over every subset of the current set."""
    C, U = [], [u for u in range(p) if u != i]

    def good(u):
        return max(f(set(S) | {u}) for r in range(min(len(C), max_size - 1) + 1)
                   for S in itertools.combinations(C, r))
    while len(C) < K - num_last:
        u = max(U, key=lambda v: (good(v), -v))
        C.append(u)
        U.remove(u)
    return C + sorted(U, key=lambda v: (-good(v), U.index(v)))


@pytest.mark.parametrize("K,num_last,max_size", [(4, 1, 6), (3, 0, 2), (5, 2, 3)])
def test_greedy_ranking_matches_its_rule(cancel6, K, num_last, max_size):
    X = _std(cancel6)
    dense = local_scores(BGeSEM(6), X)
    score = _parent_set_scorer(X, BGeSEM(6))
    for i in range(6):
        ref = _greedy_reference(lambda S: dense[i, sum(1 << k for k in S)], 6, i, K, num_last, max_size)
        assert _greedy_node(score, 6, i, K, num_last, max_size) == ref


def test_greedy_finds_the_parent_the_pairwise_gain_misses(cancel6):
    pair = select_candidates(cancel6, 3, selection="pairwise")
    greedy = select_candidates(cancel6, 3, selection="greedy", num_last=0, reverse_top=None)
    assert 0 not in pair[2]                        # x0 explains x2 only together with x1
    assert {0, 1} <= set(greedy[2])
    # K ≥ p - 1: every other node, whatever the selection
    assert select_candidates(cancel6, 9) == [[k for k in range(6) if k != i] for i in range(6)]


def test_reverse_tier_and_forced_edges(cancel6):
    X = _std(cancel6)
    score = _parent_set_scorer(X, BGeSEM(6))
    rank = [_greedy_node(score, 6, i, 2, 0, 4) for i in range(6)]
    got = select_candidates(cancel6, 2, num_last=0, reverse_top=1)
    for i in range(6):
        back = [k for k in rank[i][1:] if rank[k][0] == i]
        rest = [k for k in rank[i][1:] if k not in back]
        assert got[i] == sorted(([rank[i][0]] + back + rest)[:2])
    # forced edges are candidates, also when given by name or as evidence; too many is an error naming the node
    forced = select_candidates(cancel6, 2, include=[(5, 0), (4, 0)])
    assert forced[0] == [4, 5]
    ct = candidate_tables(cancel6.numpy(), num_candidates=2, include={("x5", "x0"): True, ("x1", "x0"): False},
                          node_names=[f"x{k}" for k in range(6)])
    assert 5 in ct.candidates[0] and ct.selection == "greedy"
    with pytest.raises(ValueError, match="node 0.*num_candidates"):
        select_candidates(cancel6, 1, include=[(5, 0), (4, 0)])
    with pytest.raises(ValueError, match="selection"):
        select_candidates(cancel6, 2, selection="best")
    with pytest.raises(ValueError, match="reverse_top"):
        select_candidates(cancel6, 2, reverse_top=-1)


def test_tables_on_greedy_candidates_are_exact_on_their_support(cancel6):
    """The restricted posterior (every parent outside C_i forbidden) against enumeration of all (order, DAG)
    pairs of the same restricted scores."""
    X = cancel6[:, :5]
    ct = candidate_tables(X, likelihood="bge", num_candidates=2)
    assert ct.selection == "greedy" and all(len(c) == 2 for c in ct.candidates)
    log_f = local_scores(BGeSEM(5), _std(X))
    masks = np.arange(32)
    for i, c in enumerate(ct.candidates):
        log_f[i, (masks & ~sum(1 << k for k in c)) != 0] = -np.inf
    q = exact_posterior(X, likelihood="bge")._q.copy()
    np.fill_diagonal(q, 0.0)
    P, _ = _brute_force(log_f - log_f.max(1, keepdims=True), q)     # a per-node shift leaves the posterior
    ex = ct.to_exact()
    np.testing.assert_allclose(ex.edge_probs().numpy(), P, atol=1e-10)
    for i, c in enumerate(ct.candidates):
        others = [k for k in range(5) if k not in c and k != i]
        assert np.all(P[others, i] == 0)
