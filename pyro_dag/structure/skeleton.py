"""A fast constraint-based skeleton and the candidate parent sets built on it (the hybrid scheme).

:func:`pc_skeleton` is the adjacency search of the PC algorithm (Spirtes, Glymour & Scheines 2000; Kalisch &
Bühlmann 2007, *Estimating high-dimensional directed acyclic graphs with the PC-algorithm*, JMLR 8), in its
order-independent "stable" form (Colombo & Maathuis 2014, *Order-independent constraint-based causal structure
learning*, JMLR 15): starting from the complete graph, the edge ``i - j`` is removed as soon as a set ``S`` of
size ``l = 0, 1, 2, ...`` among the neighbours of ``i`` (or of ``j``), frozen at the start of level ``l``, makes
``x_i`` and ``x_j`` independent by Fisher's z-test of the partial correlation,
``z = atanh(r_ij.S) sqrt(N - |S| - 3)``, two-sided level ``alpha``.

:func:`skeleton_candidates` turns the skeleton into candidate parent sets as in the hybrid scheme of Kuipers, Suter
& Moffa 2022 (*Efficient sampling and structure learning of Bayesian networks*, JCGS 31(3)): the skeleton has
no orientation, so every neighbour is a candidate parent, and since the tests miss edges the search space is
expanded by one more round of neighbours (the neighbours of the neighbours). The candidate tables
(:func:`~pyro_dag.structure.candidate_tables`) and order MCMC or the exact order DP on them
(:func:`~pyro_dag.structure.hybrid_posterior`) then do the Bayesian part.
"""
import itertools
import math
import numbers

import numpy as np
import torch
from scipy.special import ndtr

from ..scaling import column_moments
from .data import prepare_data

__all__ = ["Skeleton", "fisher_z_pvalues", "markov_blanket_graph", "pc_skeleton", "skeleton_candidates"]


def fisher_z_pvalues(corr, i, j, sets, num_rows):
    """Two-sided p-values of Fisher's z-test of ``x_i ⊥ x_j | x_S`` for conditioning sets of one size.

    :param corr: ``[p, p]`` correlation matrix.
    :param int i: the first variable. :param int j: the second.
    :param sets: ``[m, l]`` int array of conditioning sets (``l`` may be 0).
    :param int num_rows: ``N``.
    :returns: ``[m]`` p-values (1 where ``N - l - 3 <= 0``: no evidence against independence).
    """
    sets = np.asarray(sets, dtype=np.int64)
    sets = sets.reshape(len(sets), sets.shape[1] if sets.ndim == 2 else 0)
    m, l = sets.shape
    if num_rows - l - 3 <= 0:
        return np.ones(m)
    idx = np.concatenate([np.tile([i, j], (m, 1)), sets], 1)                       # [m, l + 2]
    sub = corr[idx[:, :, None], idx[:, None, :]]                                  # [m, l+2, l+2]
    if l == 0:
        r = sub[:, 0, 1]
    else:
        prec = np.linalg.pinv(sub, hermitian=True)
        r = -prec[:, 0, 1] / np.sqrt(np.maximum(prec[:, 0, 0] * prec[:, 1, 1], 1e-300))
    r = np.clip(r, -1 + 1e-12, 1 - 1e-12)
    z = np.abs(np.arctanh(r)) * math.sqrt(num_rows - l - 3)
    return 2.0 * ndtr(-z)


class Skeleton:
    """The result of :func:`pc_skeleton`.

    :ivar numpy.ndarray adjacency: ``[p, p]`` bool, symmetric: the undirected edges kept.
    :ivar dict sepsets: ``{(i, j): S}`` (``i < j``) the separating set that removed each edge.
    :ivar int num_tests: conditional-independence tests done.
    :ivar int max_level: the largest conditioning-set size tested.
    """

    def __init__(self, adjacency, sepsets, num_tests, max_level):
        self.adjacency, self.sepsets, self.num_tests, self.max_level = adjacency, sepsets, num_tests, max_level

    @property
    def num_nodes(self):
        return self.adjacency.shape[0]

    def neighbours(self, i):
        """Sorted neighbours of node ``i``."""
        return np.nonzero(self.adjacency[i])[0].tolist()

    def __repr__(self):
        return (f"Skeleton(p={self.num_nodes}, edges={int(np.triu(self.adjacency).sum())}, "
                f"tests={self.num_tests}, max_level={self.max_level})")


def pc_skeleton(data, alpha=0.05, max_level=None):
    """The PC-stable adjacency search with Fisher-z tests (see the module docstring).

    :param data: ``[N, p]`` tensor, array or DataFrame.
    :param float alpha: significance level of each test (an edge is removed when some test's p-value exceeds it).
    :param int max_level: largest conditioning set (``None``: until no node has enough neighbours).
    :returns: :class:`Skeleton`.
    """
    if not (isinstance(alpha, numbers.Real) and 0 < alpha < 1):
        raise ValueError(f"alpha must be in (0, 1); got {alpha!r}")
    if max_level is not None and not (isinstance(max_level, numbers.Integral) and max_level >= 0):
        raise ValueError(f"max_level must be a non-negative integer or None; got {max_level!r}")
    X, names = prepare_data(data, torch.float64, None)
    X = X.numpy()
    N, p = X.shape
    # refuses columns whose standard deviation overflows (the correlations would be NaN)
    sd = np.array([column_moments(X[:, j], f"column {(names or range(p))[j]!r}")[1] for j in range(p)])
    if (sd == 0).any():
        raise ValueError(f"columns {np.nonzero(sd == 0)[0].tolist()} are constant; drop them first")
    corr = np.corrcoef(X, rowvar=False)
    adj = ~np.eye(p, dtype=bool)
    sepsets, num_tests, level = {}, 0, 0
    while max_level is None or level <= max_level:
        frozen = [np.nonzero(adj[k])[0] for k in range(p)]                # neighbours at the start of the level
        if all(len(nb) - 1 < level for nb in frozen):
            break
        for i, j in zip(*np.nonzero(np.triu(adj, 1))):
            for a, b in ((i, j), (j, i)):
                nb = [int(k) for k in frozen[a] if k != b]
                if len(nb) < level:
                    continue
                combos = list(itertools.combinations(nb, level))
                sets = np.array(combos, dtype=np.int64).reshape(len(combos), level)
                pv = fisher_z_pvalues(corr, i, j, sets, N)
                num_tests += len(sets)
                if (pv > alpha).any():
                    adj[i, j] = adj[j, i] = False
                    sepsets[(int(i), int(j))] = tuple(int(k) for k in sets[int(np.argmax(pv))])
                    break
        level += 1
    return Skeleton(adj, sepsets, num_tests, level - 1)


def markov_blanket_graph(data, alpha=0.05):
    """The moral graph by total conditioning (Pellet & Elisseeff 2008, *Using Markov blankets for causal structure
    discovery*, JMLR 9): ``i - j`` whenever Fisher's z-test rejects a zero partial correlation of ``x_i`` and
    ``x_j`` given all the other variables (from the inverse correlation matrix, ``z = atanh(r) sqrt(N - p - 1)``).
    In a faithful linear-Gaussian model these are the Markov-blanket pairs (parents, children, spouses). Unlike the
    PC skeleton it never tests small conditioning sets, so a parent whose marginal correlation with its child is
    swamped by a stronger parent's variance, or a dependence hidden by a nearly deterministic neighbour at a
    small set, is kept.

    :param data: ``[N, p]`` tensor, array or DataFrame (needs ``N > p + 1``).
    :param float alpha: level of each test.
    :returns: ``[p, p]`` symmetric bool adjacency (``None`` when ``N <= p + 1``: the partial correlations given
        everything else are not estimable).
    """
    X, _ = prepare_data(data, torch.float64, None)
    X = X.numpy()
    N, p = X.shape
    if N <= p + 1:
        return None
    prec = np.linalg.pinv(np.corrcoef(X, rowvar=False), hermitian=True)
    d = np.sqrt(np.maximum(np.diag(prec), 1e-300))
    r = np.clip(-prec / np.outer(d, d), -1 + 1e-12, 1 - 1e-12)
    z = np.abs(np.arctanh(r)) * math.sqrt(N - (p - 2) - 3)
    adj = 2.0 * ndtr(-z) < alpha
    np.fill_diagonal(adj, False)
    return adj


def skeleton_candidates(skeleton, rounds=1, max_candidates=16, corr=None):
    """Candidate parents from a skeleton: each node's neighbours plus ``rounds`` further rounds of neighbours (the
    expansion of Kuipers, Suter & Moffa 2022; ``rounds=1``: the neighbours of the neighbours).

    :param skeleton: a :class:`Skeleton` or a ``[p, p]`` symmetric 0/1 adjacency.
    :param int rounds: expansion rounds (0: the neighbours only).
    :param int max_candidates: cap ``K`` per node (the tables hold ``2^K`` parent sets): the neighbours come first,
        then the expansion's nodes by decreasing ``|corr[i, k]|`` (or by index without ``corr``); if the
        neighbours alone exceed ``K``, the ``K`` most correlated are kept.
    :param corr: optional ``[p, p]`` correlation matrix for the ranking.
    :returns: list of ``p`` sorted lists of node indices.
    """
    adj = skeleton.adjacency if isinstance(skeleton, Skeleton) else np.asarray(skeleton, dtype=bool)
    p = adj.shape[0]
    if not (isinstance(rounds, numbers.Integral) and rounds >= 0):
        raise ValueError(f"rounds must be a non-negative integer; got {rounds!r}")
    if not (isinstance(max_candidates, numbers.Integral) and max_candidates >= 0):
        raise ValueError(f"max_candidates must be a non-negative integer; got {max_candidates!r}")
    strength = np.abs(np.asarray(corr)) if corr is not None else np.zeros((p, p))
    out = []
    for i in range(p):
        first = set(np.nonzero(adj[i])[0].tolist())
        reach, frontier = set(first), set(first)
        for _ in range(rounds):
            frontier = {int(k) for f in frontier for k in np.nonzero(adj[f])[0]} - reach - {i}
            reach |= frontier
        rank = lambda ks: sorted(ks, key=lambda k: (-strength[i, k], k))            # noqa: E731
        ordered = rank(first) + rank(reach - first - {i})
        out.append(sorted(ordered[:max_candidates]))
    return out
