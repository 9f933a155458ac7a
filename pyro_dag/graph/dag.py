"""DAG bookkeeping: validation, node roles (root / non-root), parents, orders, ancestral sets, antichains.

All functions take a :class:`networkx.DiGraph` whose nodes are strings. "Declaration order" is the order of
``graph.nodes`` (insertion order); every function is deterministic in it.
"""
import networkx as nx

from .acyclic import find_cycle, format_cycle, is_acyclic

__all__ = ["DAGStructureError", "ancestral_set", "antichain_decomposition", "non_roots", "parents", "roots",
           "topological_order", "validate_dag"]


class DAGStructureError(ValueError):
    """Raised when a graph cannot be used as a DAG-DGP structure; the message names the node and the fix."""


def validate_dag(graph):
    """Check that ``graph`` is a :class:`networkx.DiGraph` with string nodes and no directed cycle.

    :raises DAGStructureError: naming one cycle (``a -> b -> a``) or the offending node.
    :returns: ``graph`` unchanged.
    """
    if not isinstance(graph, nx.DiGraph):
        raise DAGStructureError(f"expected a networkx.DiGraph, got {type(graph).__name__}; build one with "
                                "nx.DiGraph([(parent, child), ...])")
    if graph.number_of_nodes() == 0:
        raise DAGStructureError("the graph has no nodes; add at least one root and one GP node")
    for node in graph.nodes:
        if not isinstance(node, str):
            raise DAGStructureError(f"node {node!r} is not a string; relabel the graph with "
                                    "nx.relabel_nodes(g, str)")
        if "." in node:
            raise DAGStructureError(f"node name {node!r} contains '.', which Pyro site names reserve "
                                    "(sites are '{node}.u', '{node}.y'); rename the node")
    if not is_acyclic(graph):
        path = format_cycle(find_cycle(graph))
        raise DAGStructureError(f"the graph has a directed cycle: {path}; remove one of these edges")
    return graph


def roots(graph):
    """Nodes without parents, in declaration order (in a DAG-DGP they hold the design matrices)."""
    return [v for v in graph.nodes if graph.in_degree(v) == 0]


def non_roots(graph):
    """Nodes with at least one parent, in declaration order (each carries a GP)."""
    return [v for v in graph.nodes if graph.in_degree(v) > 0]


def parents(graph, node):
    """The parents of ``node`` in a deterministic order: declaration order of the graph."""
    pa = set(graph.predecessors(node))
    return [v for v in graph.nodes if v in pa]


def topological_order(graph):
    """A deterministic topological order (Kahn's algorithm, ties broken by declaration order)."""
    rank = {v: i for i, v in enumerate(graph.nodes)}
    return list(nx.lexicographical_topological_sort(graph, key=rank.__getitem__))


def ancestral_set(graph, nodes):
    """``(Anc(S) ∪ S)`` restricted to non-roots, in declaration order."""
    keep = set(nodes)
    for v in nodes:
        keep |= nx.ancestors(graph, v)
    return [v for v in non_roots(graph) if v in keep]


def antichain_decomposition(graph):
    """Progressive antichain decomposition ``V = ⊔ A_ℓ`` (Perlino et al. 2026, arXiv:2607.09645, Prop. 1).

    ``d(v)`` is the length of the longest directed path starting at ``v`` and
    ``A_ℓ = {v : d(v) = h - 1 - ℓ}``; sinks land in the last slice.

    :returns: list of lists of nodes (declaration order inside each slice).
    """
    depth = {}
    for v in reversed(topological_order(graph)):
        depth[v] = 1 + max((depth[c] for c in graph.successors(v)), default=-1)
    h = 1 + max(depth.values())
    return [[v for v in graph.nodes if depth[v] == h - 1 - level] for level in range(h)]
