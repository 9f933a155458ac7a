"""Interventional Markov equivalence: the I-essential graph (interventional CPDAG) of a DAG.

Hauser & Bühlmann 2012 (*Characterization and Greedy Learning of Interventional Markov Equivalence Classes of
Directed Acyclic Graphs*, JMLR 13): for a conservative family ``𝓘`` of intervention targets (every node is left
alone by at least one of them; observational data is the target ``∅``), two DAGs are ``𝓘``-Markov equivalent iff
they have the same skeleton, the same v-structures, and, for every target ``I ∈ 𝓘``, the same skeleton once the
edges into ``I`` are cut (Theorem 10). An edge with exactly one end in some target is therefore oriented in the
whole class, and the ``𝓘``-essential graph is the DAG's skeleton with its v-structures and these edges oriented,
closed under Meek's rules R1-R4 (Meek 1995; Hauser & Bühlmann 2012, §4). With ``𝓘 = {∅}`` it is the CPDAG.

Matrices as :mod:`~pyro_dag.graph.cpdag`: ``C[i, j] = 1, C[j, i] = 0`` is an oriented ``i -> j``,
``C[i, j] = C[j, i] = 1`` an undirected ``i - j``.
"""
import numpy as np
import torch

from ._arrays import checked_adjacency_stack
from .acyclic import find_cycle, format_cycle, is_acyclic

__all__ = ["dag_to_icpdag", "target_sets"]


def target_sets(targets, num_nodes):
    """The target family as a list of frozensets of node indices (``None``: ``[∅]``), checked.

    :param targets: an iterable of target sets (each an iterable of indices), or a ``[N, p]`` boolean mask of
        interventions (its distinct rows).
    """
    if targets is None:
        return [frozenset()]
    if isinstance(targets, (np.ndarray, torch.Tensor)) and np.ndim(targets) == 2 and \
            np.asarray(targets).dtype == bool:
        mask = np.asarray(targets)
        if mask.shape[1] != num_nodes:
            raise ValueError(f"targets as a mask must have {num_nodes} columns; got shape {mask.shape}")
        fam = {frozenset(np.nonzero(r)[0].tolist()) for r in np.unique(mask, axis=0)}
    else:
        fam = set()
        for t in targets:
            s = frozenset(int(k) for k in t)
            bad = [k for k in s if not 0 <= k < num_nodes]
            if bad:
                raise ValueError(f"target {sorted(s)} holds {bad[0]}, not a node index in 0..{num_nodes - 1}")
            fam.add(s)
    if not fam:
        raise ValueError("targets is empty; give at least one target set (the empty set for observational data)")
    always = frozenset.intersection(*fam)
    if always:
        raise ValueError(f"node {min(always)} is a target of every experiment (the family is not conservative, "
                         "Hauser & Bühlmann 2012): its mechanism is never observed; add observational data or an "
                         "experiment that leaves it alone")
    return sorted(fam, key=lambda s: (len(s), sorted(s)))


def _icpdag_one(a, family):
    """I-essential graph of one DAG (int [p, p]) for a family of frozensets."""
    p = a.shape[0]
    a = a.astype(np.int64)
    skel = ((a + a.T) > 0).astype(np.int64)
    nonadj = 1 - skel - np.eye(p, dtype=np.int64)
    d = a * ((nonadj @ a) > 0)                                 # v-structures
    for t in family:                                            # edges with exactly one end in a target
        ind = np.zeros(p, dtype=np.int64)
        ind[list(t)] = 1
        cut = (ind[:, None] + ind[None, :]) == 1
        d = np.maximum(d, a * cut)
    u = skel - d - d.T
    while True:
        r1 = (d.T @ nonadj) > 0                                  # c -> a, a - b, c !~ b  =>  a -> b
        r2 = (d @ d) > 0                                         # a -> c -> b, a - b  =>  a -> b
        w = u[:, None, :] * d.T[None, :, :]                      # w[a, b, c] = [a - c] [c -> b]
        r3 = np.einsum("abc,cd,abd->ab", w, nonadj, w) > 0       # a - c -> b, a - d -> b, c !~ d  =>  a -> b
        # R4: a - c, a ~ e, c -> e -> b, c !~ b  =>  a -> b
        r4 = np.einsum("ac,ae,ce,eb,cb->ab", u, skel, d, d, nonadj) > 0
        new = (u > 0) & (r1 | r2 | r3 | r4)
        if not new.any():
            break
        if np.any(new & new.T):
            raise RuntimeError("Meek rules produced a conflicting orientation; please report this graph")
        new = new.astype(np.int64)
        d = d + new
        u = u - new - new.T
    return (d + u).astype(np.int8)


def dag_to_icpdag(adj, targets=None):
    """The ``𝓘``-essential graph (interventional CPDAG) of a DAG: the graph shared by its interventional Markov
    equivalence class (Hauser & Bühlmann 2012; see the module docstring).

    :param adj: ``[p, p]`` DAG adjacency (``A[i, j] = 1``: ``i -> j``) or ``[k, p, p]`` samples (tensor, array or
        nested list).
    :param targets: the family of intervention targets: an iterable of target sets (node indices; include ``[]``
        for observational data), or a ``[N, p]`` boolean intervention mask (its distinct rows). ``None``: purely
        observational, the CPDAG (:func:`~pyro_dag.graph.dag_to_cpdag`).
    :returns: the ``𝓘``-essential graph matrix of the same shape and type as the input (numpy int8 for a list).
    :raises ValueError: for a cyclic graph (the cycle is named), non-0/1 entries, a node index outside the graph,
        or a family in which some node is a target of every experiment (not conservative).

    Example::

        >>> dag_to_icpdag([[0, 1], [0, 0]], targets=[[], [1]])          # 0 -> 1, experiment on 1: oriented
        array([[0, 1],
               [0, 0]], dtype=int8)
    """
    s, batched = checked_adjacency_stack(adj)
    family = target_sets(targets, s.shape[-1])
    flat = s.reshape(s.shape[0], -1)
    uniq, inverse = np.unique(flat, axis=0, return_inverse=True)
    uniq = uniq.reshape(-1, s.shape[1], s.shape[2])
    acyclic = np.atleast_1d(is_acyclic(uniq))
    out = np.empty_like(uniq)
    for n, g in enumerate(uniq):
        if not acyclic[n]:
            raise ValueError(f"adj[{int(np.nonzero(inverse.reshape(-1) == n)[0][0])}] is not acyclic (cycle "
                             f"{format_cycle(find_cycle(g))}); I-essential graphs exist only for DAGs")
        out[n] = _icpdag_one(g, family)
    c = out[inverse.reshape(-1)]
    c = c if batched else c[0]
    if isinstance(adj, torch.Tensor):
        return torch.as_tensor(c, device=adj.device).to(adj.dtype)
    if isinstance(adj, np.ndarray):
        return c.astype(adj.dtype, copy=False)
    return c
