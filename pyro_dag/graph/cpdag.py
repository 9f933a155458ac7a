"""Markov equivalence classes: the CPDAG of a DAG (Meek's rules) and random DAGs of a CPDAG (Dor & Tarsi).

Matrices use ``A[i, j] = 1`` for the edge ``i -> j``. CPDAG matrices: ``C[i, j] = 1, C[j, i] = 0`` is a
compelled edge ``i -> j``; ``C[i, j] = C[j, i] = 1`` is a reversible (undirected) edge ``i - j``.
"""
import numbers

import numpy as np
import torch

from ._arrays import as_numpy, check_binary, check_square, check_zero_diag, checked_adjacency_stack
from .acyclic import find_cycle, format_cycle, is_acyclic

__all__ = ["cpdag_to_dags", "dag_to_cpdag"]


def _raise_cycle(a, name):
    cycle = format_cycle(find_cycle(a))
    raise ValueError(f"{name} is not acyclic (cycle {cycle}); CPDAGs exist only for DAGs. "
                     "Remove an edge of the cycle, or score this graph at level='dag' or 'skeleton'.")


def _cpdag_one(a):
    """CPDAG of one DAG given as an int8 [p, p] matrix (v-structures, then Meek R1-R3 to a fixed point)."""
    p = a.shape[0]
    a = a.astype(np.int64)
    skel = ((a + a.T) > 0).astype(np.int64)
    nonadj = 1 - skel - np.eye(p, dtype=np.int64)  # i != j and not adjacent
    # i -> k is compelled by a v-structure when some j -> k has j non-adjacent to i.
    d = a * ((nonadj @ a) > 0)
    u = skel - d - d.T
    while True:
        r1 = (d.T @ nonadj) > 0  # a -> b, b - c, a !~ c  =>  b -> c
        r2 = (d @ d) > 0  # a -> b -> c, a - c  =>  a -> c
        w = u[:, None, :] * d.T[None, :, :]  # w[a, b, c] = [a - c] [c -> b]
        r3 = np.einsum("abc,cd,abd->ab", w, nonadj, w) > 0  # two non-adjacent c, d with a - c -> b, a - d -> b
        new = (u > 0) & (r1 | r2 | r3)
        if not new.any():
            break
        if np.any(new & new.T):  # cannot happen for a DAG (the rules are sound); guard against bugs
            raise RuntimeError("Meek rules produced a conflicting orientation; please report this graph")
        new = new.astype(np.int64)
        d = d + new
        u = u - new - new.T
    return (d + u).astype(np.int8)


def _unique_graphs(s):
    flat = s.reshape(s.shape[0], -1)
    uniq, inverse = np.unique(flat, axis=0, return_inverse=True)
    return uniq.reshape(-1, s.shape[1], s.shape[2]), inverse.reshape(-1)


def _cpdags(s, name):
    """CPDAGs of a [k, p, p] int8 stack of DAGs (each distinct graph converted once)."""
    uniq, inverse = _unique_graphs(s)
    acyclic = np.atleast_1d(is_acyclic(uniq))
    out = np.empty_like(uniq)
    for n, g in enumerate(uniq):
        if not acyclic[n]:
            _raise_cycle(g, f"{name}[{int(np.nonzero(inverse == n)[0][0])}]")
        out[n] = _cpdag_one(g)
    return out[inverse]


def dag_to_cpdag(adj):
    """The CPDAG (essential graph) of a DAG: the graph shared by its Markov equivalence class.

    Edges in a v-structure ``i -> k <- j`` (``i``, ``j`` non-adjacent) are compelled; Meek's rules R1-R3
    (Meek 1995) then orient every other edge whose direction is implied, and the remaining edges are
    reversible. Rules R1-R3 are complete when the only background knowledge is the v-structures.

    :param adj: ``[p, p]`` DAG adjacency (``A[i, j] = 1`` means ``i -> j``) or ``[k, p, p]`` samples; a
        torch tensor, numpy array or nested list.
    :returns: the CPDAG matrix of the same shape, type, dtype and device as the input (a numpy int8 array
        for list input): ``C[i, j] = 1, C[j, i] = 0`` is a compelled ``i -> j``; ``C[i, j] = C[j, i] = 1`` is
        a reversible ``i - j``.
    :raises ValueError: if a graph has a cycle (the cycle is shown) or entries other than 0/1.

    Example::

        >>> dag_to_cpdag([[0, 1, 0], [0, 0, 1], [0, 0, 0]])      # chain 0 -> 1 -> 2: all reversible
        array([[0, 1, 0],
               [1, 0, 1],
               [0, 1, 0]], dtype=int8)
    """
    s, batched = checked_adjacency_stack(adj)
    c = _cpdags(s, "adj")
    c = c if batched else c[0]
    if isinstance(adj, torch.Tensor):
        return torch.as_tensor(c, device=adj.device).to(adj.dtype)
    if isinstance(adj, np.ndarray):
        return c.astype(adj.dtype, copy=False)
    return c


def cpdag_to_dags(cpdag, num_samples=1, seed=None):
    """Random DAGs in the Markov equivalence class of a CPDAG (random consistent extensions).

    Uses the extension algorithm of Dor & Tarsi (1992): repeatedly pick, uniformly at random, a node ``x``
    that has no outgoing directed edge and whose undirected neighbours are adjacent to all of ``x``'s other
    neighbours; orient its undirected edges into ``x`` and remove it. Every DAG of the class can be returned,
    but **not uniformly** (the draw is uniform over elimination sequences, not over DAGs). Use it to score a
    point-estimate method that returns a CPDAG (GES, PC) with sample-based metrics.

    :param cpdag: ``[p, p]`` PDAG (``C[i, j] = C[j, i] = 1`` for an undirected edge).
    :param int num_samples: number of DAGs ``k``.
    :param seed: an int seed or a ``numpy.random.Generator``.
    :returns: ``[k, p, p]`` numpy int8 array of DAGs, each with the same skeleton and v-structures as the input.
    :raises ValueError: if the PDAG has no consistent extension (e.g. a directed cycle, or undirected edges
        that cannot be oriented without creating a new v-structure or cycle).
    """
    c = as_numpy(cpdag, "cpdag")
    check_square(c, "cpdag")
    check_binary(c, "cpdag")
    check_zero_diag(c, "cpdag")
    if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
        raise ValueError(f"num_samples must be a positive int; got {num_samples!r}")
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    c = c.astype(bool)
    p = c.shape[0]
    out = np.zeros((num_samples, p, p), dtype=np.int8)
    for n in range(num_samples):
        und = c & c.T
        dirc = c & ~c.T
        adj = c | c.T
        alive = np.ones(p, dtype=bool)
        dag = dirc.copy()
        while alive.any():
            cands = []
            for x in np.nonzero(alive)[0]:
                if dirc[x, alive].any():  # x has an outgoing directed edge: not a sink
                    continue
                nb_und = np.nonzero(und[x] & alive)[0]
                nb_all = np.nonzero(adj[x] & alive)[0]
                if all(adj[y, [z for z in nb_all if z != y]].all() for y in nb_und):
                    cands.append(x)
            if not cands:
                raise ValueError("cpdag has no consistent DAG extension (a directed cycle, or undirected edges that "
                                 "would create a new v-structure); it is not the CPDAG of a DAG")
            x = cands[rng.integers(len(cands))]
            for y in np.nonzero(und[x] & alive)[0]:
                dag[y, x] = True
            alive[x] = False
            und[x, :] = und[:, x] = False
        out[n] = dag
    return out
