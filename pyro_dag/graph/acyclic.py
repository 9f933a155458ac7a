"""The library's one acyclicity check, :func:`is_acyclic`, and :func:`find_cycle` for error messages.

Every acyclicity question in pyro_dag goes through :func:`is_acyclic`: the ``dag`` constraint of the structure
distributions, the structure metrics (:func:`pyro_dag.metrics.is_dag`), CPDAG conversion and the validation of a
DAG-DGP graph (:func:`~pyro_dag.graph.validate_dag`).
"""
import math

import networkx as nx
import numpy as np
import torch

__all__ = ["find_cycle", "format_cycle", "is_acyclic"]


def _closure_acyclic(adjacency):
    # transitive closure by repeated squaring: ceil(log2 p) + 1 boolean products; acyclic iff no node reaches itself
    p = adjacency.shape[-1]
    R = (adjacency > 0.5).to(torch.float32 if not adjacency.is_floating_point() else adjacency.dtype)
    for _ in range(max(1, math.ceil(math.log2(max(p, 2)))) + 1):
        R = ((R + R @ R) > 0).to(R.dtype)
    return R.diagonal(dim1=-2, dim2=-1).sum(-1) == 0


def is_acyclic(adjacency):
    """Whether a directed graph has no directed cycle (a self-loop counts as a cycle).

    :param adjacency: a :class:`networkx.DiGraph`, or adjacency matrices ``[..., p, p]`` (``A[i, j] = 1``: the edge
        ``i -> j``; entries ``> 0.5`` count as edges) as a torch tensor (any device, batched), a numpy array or a
        nested list.
    :returns: ``bool`` for a graph; for matrices a bool tensor ``[...]`` (torch input) or a numpy bool array /
        ``bool`` for a single matrix (other input).

    Matrices are checked by transitive closure with repeated squaring (``ceil(log2 p) + 1`` matrix products,
    batched); a graph by a topological sort (networkx).

    Example::

        >>> is_acyclic(torch.tensor([[0., 1.], [0., 0.]])), is_acyclic([[0, 1], [1, 0]])
        (tensor(True), False)
    """
    if isinstance(adjacency, nx.DiGraph):
        return nx.is_directed_acyclic_graph(adjacency)
    as_tensor = torch.is_tensor(adjacency)
    A = adjacency if as_tensor else torch.as_tensor(np.asarray(adjacency, dtype=np.float64))
    if A.dim() < 2 or A.shape[-1] != A.shape[-2]:
        raise ValueError(f"is_acyclic expects square matrices [..., p, p]; got {tuple(A.shape)}")
    out = _closure_acyclic(A)
    if as_tensor:
        return out
    out = out.numpy()
    return bool(out) if out.ndim == 0 else out


def find_cycle(adjacency, names=None):
    """One directed cycle ``[v0, v1, ..., v0]`` of a graph, or ``None`` if it is acyclic.

    :param adjacency: a :class:`networkx.DiGraph` or one ``[p, p]`` 0/1 matrix (``A[i, j] = 1``: ``i -> j``).
    :param list names: node names for a matrix (default: the indices ``0..p-1``).
    """
    if isinstance(adjacency, nx.DiGraph):
        g = adjacency
    else:
        a = np.asarray(adjacency.detach().cpu() if torch.is_tensor(adjacency) else adjacency, dtype=np.float64)
        g = nx.DiGraph([(int(i), int(j)) for i, j in zip(*np.nonzero(a > 0.5))])
    try:
        cycle = nx.find_cycle(g)
    except nx.NetworkXNoCycle:
        return None
    nodes = [u for u, _ in cycle] + [cycle[0][0]]
    return [names[v] for v in nodes] if names is not None else nodes


def format_cycle(cycle):
    """``"a -> b -> a"`` for a cycle from :func:`find_cycle`."""
    return " -> ".join(str(v) for v in cycle)
