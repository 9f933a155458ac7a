"""map_dag returns the most probable DAG of the Markov equivalence class of the best (order, DAG) pair, checked
against the posterior of every DAG by enumeration, and says when several DAGs tie (MAPTieWarning);
equivalent_dags enumerates a Markov equivalence class."""
import itertools
import warnings

import numpy as np
import pytest
import torch

from pyro_dag.graph import dag_to_cpdag, is_acyclic
from pyro_dag.structure import DAGPosterior, MAPTieWarning, equivalent_dags, exact_posterior, order_spn
from pyro_dag.structure.map_dag import full_evidence


def _all_dags(p):
    pairs = [(i, j) for i in range(p) for j in range(p) if i != j]
    for bits in itertools.product([0, 1], repeat=len(pairs)):
        A = np.zeros((p, p), dtype=np.int64)
        for (i, j), b in zip(pairs, bits):
            A[i, j] = b
        if is_acyclic(A):
            yield A


def _chain_data(seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(100, generator=g)
    b = a + 0.5 * torch.randn(100, generator=g)
    c = b + 0.5 * torch.randn(100, generator=g)
    return torch.stack([a, b, c], 1).double()


def _dag_probs(post):
    dags = list(_all_dags(post.num_nodes))
    return dags, np.array([post.prob(full_evidence(A)) for A in dags])


def test_map_dag_is_the_most_probable_dag_not_the_best_pairs():
    """Chain data a -> b -> c: the marginalised linear-Gaussian score ties the chain, its reverse and the fork
    a <- b -> c, and the best (order, DAG) pair is a chain; but the fork is consistent with two orders and has twice
    the chain's probability (and P(b -> a) = 0.68 > P(a -> b)). Earlier, map_dag returned the chain."""
    post = exact_posterior(_chain_data(0), likelihood="linear")
    dags, probs = _dag_probs(post)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the most probable DAG is unique here: no tie warning
        A, order, ties = post.map_dag(return_order=True, return_ties=True)
    assert post.prob(full_evidence(A.numpy())) == pytest.approx(probs.max(), rel=1e-9)
    np.testing.assert_array_equal(A.numpy(), dags[int(np.argmax(probs))])
    np.testing.assert_array_equal(A.numpy(), [[0, 0, 0], [1, 0, 1], [0, 0, 0]])   # the fork
    assert len(ties) == 1 and order[0] == 1
    P = post.edge_probs()
    assert all(P[i, j] > P[j, i] for i, j in zip(*np.nonzero(A.numpy())))  # no edge against its own marginal
    # the order circuit with every order answers the same
    spn = order_spn(post, "random", expansion=(3, 2), seed=0)
    assert spn.coverage == pytest.approx(1.0)
    np.testing.assert_array_equal(spn.map_dag().numpy(), A.numpy())


def test_a_tie_is_reported_and_every_tied_dag_returned():
    """BGe on the same kind of data: the six complete DAGs are equally probable (one order each)."""
    post = exact_posterior(_chain_data(0), likelihood="bge")
    dags, probs = _dag_probs(post)
    best = [A for A, pr in zip(dags, probs) if pr == pytest.approx(probs.max(), rel=1e-9)]
    with pytest.warns(MAPTieWarning, match="6 Markov-equivalent DAGs are equally probable"):
        A, ties = post.map_dag(return_ties=True)
    assert len(best) == 6 and ties.shape == (6, 3, 3)
    assert {t.numpy().astype(int).tobytes() for t in ties} == {b.astype(int).tobytes() for b in best}
    np.testing.assert_array_equal(ties[0].numpy(), A.numpy())
    # evidence orienting one edge leaves the 3 with 0 before 1; orienting two leaves one
    with pytest.warns(MAPTieWarning, match="3 Markov-equivalent"):
        _, ties = post.map_dag(given={(0, 1): True}, return_ties=True)
    assert len(ties) == 3 and all(t[0, 1] == 1 for t in ties)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        A = post.map_dag(given={(0, 1): True, (1, 2): True})
    np.testing.assert_array_equal(A.numpy(), [[0, 1, 1], [0, 0, 1], [0, 0, 0]])


def test_sample_based_map_dag_reports_a_tie():
    class Fixed(DAGPosterior):
        num_nodes = 2

        def sample(self, num_samples=1000, seed=None, *, given=None):
            S = torch.zeros(num_samples, 2, 2, dtype=torch.float64)
            S[: num_samples // 2, 0, 1] = 1
            S[num_samples // 2:, 1, 0] = 1
            return S

        def edge_probs(self, num_samples=1000, seed=None, *, given=None, return_stderr=False):
            return self.sample(num_samples).mean(0)

    with pytest.warns(MAPTieWarning, match="2 DAGs are each the most frequent"):
        A, ties = Fixed().map_dag(num_samples=10, return_ties=True)
    assert ties.shape == (2, 2, 2) and torch.equal(A, ties[0])


@pytest.mark.parametrize("seed", range(6))
def test_equivalent_dags_is_the_class_by_enumeration(seed):
    rng = np.random.default_rng(seed)
    p = 4
    order = rng.permutation(p)
    A = np.zeros((p, p), dtype=np.int64)
    for a in range(p):
        for b in range(a + 1, p):
            if rng.random() < 0.6:
                A[order[a], order[b]] = 1
    members, complete = equivalent_dags(A)
    cpdag = dag_to_cpdag(A)
    brute = {D.tobytes() for D in _all_dags(p) if np.array_equal(dag_to_cpdag(D), cpdag)}
    assert complete and {m.astype(np.int64).tobytes() for m in members} == brute
    assert len(members) == len(brute)
    assert equivalent_dags(np.triu(np.ones((4, 4), dtype=np.int64), 1), limit=5)[1] is False
