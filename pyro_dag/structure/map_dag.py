"""The most probable DAG of an exact posterior, and ties between Markov-equivalent DAGs.

The max-product order programme of :meth:`ExactStructurePosterior.map_dag
<pyro_dag.structure.ExactStructurePosterior.map_dag>` and :meth:`OrderSPN.map_dag
<pyro_dag.structure.OrderSPN.map_dag>` finds the most probable (order, DAG) pair (Wang, Wicker & Kwiatkowska 2022,
*Tractable Uncertainty for Structure Learning*, ICML, §4.4). Under an order-modular prior the probability of a DAG is
the sum over the orders it is consistent with (Koivisto & Sood 2004), so a DAG consistent with more orders can be more
probable than the DAG of the best pair: with a score-equivalent likelihood (BGe, the marginalised linear-Gaussian
SEM) the Markov-equivalent DAGs of the chain ``a -> b -> c`` score the same, and the fork ``a <- b -> c``, consistent
with two orders, has twice the chain's probability. :func:`most_probable_equivalent` therefore compares the DAGs of
the best pair's Markov equivalence class (Verma & Pearl 1990: the DAGs with its skeleton and v-structures) by their
posterior probabilities, returns the most probable one and reports equally probable ones
(:class:`MAPTieWarning`): the data cannot orient the edges on which they differ.
"""
import warnings

import numpy as np
import torch

from ..graph.acyclic import is_acyclic
from ..graph.cpdag import dag_to_cpdag

__all__ = ["MAPTieWarning", "MAX_CLASS_SIZE", "equivalent_dags", "full_evidence", "most_probable_equivalent"]

#: The most members of a Markov equivalence class that :func:`most_probable_equivalent` compares (fewer for large
#: ``p``: at most ``2^26 / 2^p`` members, each costing an order programme over the ``2^p`` subsets).
MAX_CLASS_SIZE = 1000


class MAPTieWarning(UserWarning):
    """Several DAGs are equally probable maxima of a posterior (typically Markov-equivalent DAGs, whose edge
    directions the data cannot tell apart): the returned DAG is one of them."""


def full_evidence(A):
    """``{(i, j): bool}`` for every off-diagonal pair of the 0/1 DAG ``A`` ``[p, p]`` (the evidence "the DAG is
    ``A``")."""
    p = A.shape[0]
    return {(i, j): bool(A[i, j]) for i in range(p) for j in range(p) if i != j}


def _meek(d, u, nonadj):
    """Close the orientations ``d`` of a PDAG with undirected edges ``u`` under Meek's rules R1-R3 (Meek 1995);
    ``None`` if they conflict."""
    while True:
        r1 = (d.T @ nonadj) > 0
        r2 = (d @ d) > 0
        w = u[:, None, :] * d.T[None, :, :]
        r3 = np.einsum("abc,cd,abd->ab", w, nonadj, w) > 0
        new = (u > 0) & (r1 | r2 | r3)
        if not new.any():
            return d, u
        if np.any(new & new.T):
            return None
        new = new.astype(np.int64)
        d, u = d + new, u - new - new.T


def equivalent_dags(A, limit=MAX_CLASS_SIZE):
    """The DAGs of the Markov equivalence class of the DAG ``A`` (those with its CPDAG), by orienting its reversible
    edges one at a time and propagating each choice with Meek's rules.

    :param A: ``[p, p]`` 0/1 DAG (``A[i, j] = 1``: ``i -> j``).
    :param int limit: stop after this many members.
    :returns: ``(members, complete)``: a list of ``[p, p]`` int64 arrays (``A``'s class, at most ``limit``) and whether
        the list is the whole class.
    """
    a = np.asarray(torch.as_tensor(A).cpu().numpy() if torch.is_tensor(A) else A).astype(np.int64)
    c = np.asarray(dag_to_cpdag(a)).astype(np.int64)
    d = c * (1 - c.T)
    u = c * c.T
    p = a.shape[0]
    nonadj = 1 - ((c + c.T) > 0).astype(np.int64) - np.eye(p, dtype=np.int64)
    members, stack = [], [(d, u)]
    while stack:
        d, u = stack.pop()
        und = np.argwhere(np.triu(u) > 0)
        if len(und) == 0:
            if is_acyclic(d) and np.array_equal(np.asarray(dag_to_cpdag(d)).astype(np.int64), c):
                members.append(d)
                if len(members) >= limit:
                    return members, not stack
            continue
        i, j = und[0]
        for s, t in ((j, i), (i, j)):
            d2, u2 = d.copy(), u.copy()
            d2[s, t], u2[s, t], u2[t, s] = 1, 0, 0
            closed = _meek(d2, u2, nonadj)
            if closed is not None:
                stack.append(closed)
    return members, True


def most_probable_equivalent(A, log_prob, evidence, where):
    """The most probable DAG of the Markov equivalence class of ``A`` that satisfies ``evidence``, by ``log_prob``.

    :param A: ``[p, p]`` 0/1 DAG (the DAG of the most probable (order, DAG) pair).
    :param callable log_prob: ``[p, p] numpy DAG -> log P(G | data)`` (up to a shared constant).
    :param evidence: the parsed :class:`~pyro_dag.structure.evidence.Evidence` (the class members violating it are
        left out). :param str where: the caller, as warnings name it.
    :returns: ``(dag, ties)``: the most probable member (a float64 tensor) and ``[k, p, p]`` float64 tensor of the
        members equally probable with it (``k = 1``: no tie). Warns (:class:`MAPTieWarning`) when ``k > 1``, and
        when the class has more members than it compares (:data:`MAX_CLASS_SIZE`, fewer for large ``p``).
    """
    a = (torch.as_tensor(A).cpu().numpy() > 0.5).astype(np.int64)
    limit = max(8, min(MAX_CLASS_SIZE, (1 << 26) >> a.shape[0]))
    members, complete = equivalent_dags(a, limit)
    ok = evidence.holds(torch.as_tensor(np.stack(members))).numpy() if evidence else np.ones(len(members), bool)
    members = [m for m, keep in zip(members, ok) if keep] or [a]
    scores = np.array([log_prob(m) for m in members], dtype=float)
    if not np.isfinite(scores).any():  # no comparable probability (an unnormalised circuit): keep the best pair's
        return torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(a, dtype=torch.float64)[None]
    best = float(np.nanmax(scores))
    tied = [m for m, s in zip(members, scores) if np.isfinite(s) and best - s <= 1e-9 * max(1.0, abs(best))]
    tied.sort(key=lambda m: not np.array_equal(m, a))  # the best pair's own DAG first when it is one of them
    if not complete:
        warnings.warn(f"{where}: the Markov equivalence class of the most probable (order, DAG) pair has more than "
                      f"{limit} DAGs; the most probable of the first {limit} is returned",
                      MAPTieWarning, stacklevel=3)
    if len(tied) > 1:
        stack = np.stack(tied)
        free = np.argwhere(np.triu((stack.max(0) != stack.min(0)) | (stack.max(0).T != stack.min(0).T), 1))
        names = ", ".join(f"{i}-{j}" for i, j in free[:8]) + (" ..." if len(free) > 8 else "")
        warnings.warn(f"{where}: a tie: {len(tied)} Markov-equivalent DAGs are equally probable (P = "
                      f"{np.exp(best):.3g} each): the data do not orient the edges {names}; the first is returned. "
                      "map_dag(..., "
                      "return_ties=True) returns them all; evidence on these edges (given=...) narrows the choice",
                      MAPTieWarning, stacklevel=3)
    as_tensor = [torch.as_tensor(m, dtype=torch.float64) for m in tied]
    return as_tensor[0], torch.stack(as_tensor)
