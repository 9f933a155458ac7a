"""Moralisation, chordal completion, perfect elimination orders, cliques and elimination trees.

The structure of a DAG-SVI posterior (Perlino, Hamelijnck, Johansen & Damoulas 2026, *Deep Gaussian Processes on
Directed Acyclic Graphs*, arXiv:2607.09645, App. E.4): take the ancestral set of the observed nodes (roots
excluded, since they carry no inducing points), moralise it, complete it to a chordal graph with MCS-M
(Berry, Blair, Heggernes & Peyton 2004), and compute a perfect elimination order (PEO) by maximum cardinality
search (Tarjan & Yannakakis 1984) with ties broken by declaration order, so everything is deterministic.
"""
import networkx as nx

from .dag import DAGStructureError, ancestral_set, non_roots, parents, validate_dag

__all__ = ["ChordalStructure", "chordal_completion", "chordal_structure", "elimination_tree", "is_perfect_elimination_order",
           "maximal_cliques", "maximum_cardinality_search", "moral_graph", "perfect_elimination_order"]


def moral_graph(graph, nodes=None):
    """Moralise the DAG induced on ``nodes`` (default: all nodes).

    Adds an undirected edge for each parent-child pair and between every pair of co-parents of each
    child, where both lie in ``nodes`` (Perlino et al. 2026, App. E.4). Node order = declaration order.
    """
    nodes = list(graph.nodes) if nodes is None else [v for v in graph.nodes if v in set(nodes)]
    keep = set(nodes)
    moral = nx.Graph()
    moral.add_nodes_from(nodes)
    for child in nodes:
        pa = [p for p in parents(graph, child) if p in keep]
        moral.add_edges_from((p, child) for p in pa)
        moral.add_edges_from((p, q) for i, p in enumerate(pa) for q in pa[i + 1:])
    return moral


def maximum_cardinality_search(graph):
    """Maximum cardinality search visit order; ties broken by declaration order (Tarjan & Yannakakis 1984).

    :returns: list of nodes in visit order. The reverse of this order is a PEO when ``graph`` is chordal.
    """
    rank = {v: i for i, v in enumerate(graph.nodes)}
    weight = {v: 0 for v in graph.nodes}
    order = []
    unvisited = set(graph.nodes)
    while unvisited:
        v = min(unvisited, key=lambda u: (-weight[u], rank[u]))
        order.append(v)
        unvisited.remove(v)
        for u in graph.neighbors(v):
            if u in unvisited:
                weight[u] += 1
    return order


def chordal_completion(graph):
    """Complete an undirected graph to a chordal graph with MCS-M (an inclusion-minimal triangulation).

    Returns a new :class:`networkx.Graph` with the same node order; already chordal graphs are returned
    unchanged (no fill). Deterministic: ties are broken by declaration order.
    """
    rank = {v: i for i, v in enumerate(graph.nodes)}
    h = nx.Graph()
    h.add_nodes_from(graph.nodes)
    h.add_edges_from(graph.edges)
    if nx.is_chordal(h):
        return h
    # MCS-M (Berry, Blair, Heggernes & Peyton 2004): v picks up fill edges to every unnumbered u
    # reachable through unnumbered vertices of weight strictly smaller than w(u).
    weight = {v: 0 for v in graph.nodes}
    unnumbered = set(graph.nodes)
    while unnumbered:
        v = min(unnumbered, key=lambda u: (-weight[u], rank[u]))
        unnumbered.remove(v)
        reached = set()
        for u in unnumbered:
            # Is there a path v - ... - u whose interior vertices are unnumbered with weight < w(u)?
            limit = weight[u]
            stack = [v]
            seen = {v}
            found = False
            while stack and not found:
                x = stack.pop()
                for y in graph.neighbors(x):
                    if y in seen:
                        continue
                    if y == u:
                        found = True
                        break
                    if y in unnumbered and weight[y] < limit:
                        seen.add(y)
                        stack.append(y)
            if found:
                reached.add(u)
        for u in reached:
            weight[u] += 1
            h.add_edge(v, u)
    return h


def perfect_elimination_order(chordal):
    """A perfect elimination order of a chordal graph: the reverse of the MCS visit order.

    For each vertex, its later neighbours in the order form a clique.

    :raises DAGStructureError: if the graph is not chordal.
    """
    if not nx.is_chordal(chordal):
        raise DAGStructureError("the graph is not chordal; complete it with chordal_completion() first")
    return list(reversed(maximum_cardinality_search(chordal)))


def is_perfect_elimination_order(graph, order):
    """True iff for every vertex its neighbours later in ``order`` are pairwise adjacent."""
    pos = {v: i for i, v in enumerate(order)}
    for v in order:
        later = [u for u in graph.neighbors(v) if pos[u] > pos[v]]
        for i, a in enumerate(later):
            for b in later[i + 1:]:
                if not graph.has_edge(a, b):
                    return False
    return True


def maximal_cliques(chordal, order=None):
    """Maximal cliques of a chordal graph, each listed in PEO order, in running-intersection order.

    The cliques are read off the elimination fronts ``{v} ∪ later-neighbours(v)``; the list is ordered
    by the reverse PEO position of each clique's first vertex, which satisfies the running-intersection
    property used by the clique factorisation (Perlino et al. 2026, Eq. 6).
    """
    order = perfect_elimination_order(chordal) if order is None else list(order)
    pos = {v: i for i, v in enumerate(order)}
    fronts = []
    for v in order:
        front = [v] + sorted((u for u in chordal.neighbors(v) if pos[u] > pos[v]), key=pos.__getitem__)
        fronts.append(front)
    maximal = [f for f in fronts if not any(set(f) < set(g) for g in fronts)]
    # Deduplicate (identical fronts cannot occur in a PEO, but keep this robust) and order them.
    seen, cliques = set(), []
    for f in sorted(maximal, key=lambda f: -pos[f[0]]):
        key = frozenset(f)
        if key not in seen:
            seen.add(key)
            cliques.append(f)
    return cliques


def elimination_tree(order, later):
    """The elimination tree of a chordal pattern in a perfect elimination order.

    The parent of ``v`` is its first later neighbour in ``order`` (``None`` for a root); with a PEO every later
    neighbour of ``v`` lies on the path from ``v`` to its root, so block-sparse factorisations and solves can walk
    that path only.

    :param list order: the elimination order.
    :param dict later: ``{v: later neighbours of v, sorted by their position in order}``.
    :returns: ``{v: parent or None}``.
    """
    return {v: (later[v][0] if later.get(v) else None) for v in order}


class ChordalStructure:
    """The chordal structure ``H`` of a DAG-SVI posterior (Perlino et al. 2026, arXiv:2607.09645, App. E.4).

    :ivar list nodes: GP (non-root) nodes in declaration order; every one gets a block.
    :ivar list observed: the observed nodes it was built for.
    :ivar list ancestral: ``(Anc(Obs) ∪ Obs) ∩ U`` in declaration order.
    :ivar networkx.Graph moral: moral graph of the ancestral set (plus isolated non-ancestral nodes).
    :ivar networkx.Graph chordal: the chordal completion ``H`` (MCS-M).
    :ivar list fill_edges: edges added by the completion.
    :ivar list order: a perfect elimination order of ``H``.
    :ivar list cliques: maximal cliques, each in PEO order.
    """

    def __init__(self, graph, observed):
        validate_dag(graph)
        self.nodes = non_roots(graph)
        unknown = [v for v in observed if v not in graph]
        if unknown:
            raise DAGStructureError(f"observed node {unknown[0]!r} is not in the graph; check its name")
        self.observed = [v for v in self.nodes if v in set(observed)]
        self.ancestral = ancestral_set(graph, self.observed)
        moral = moral_graph(graph, self.ancestral)
        # Non-roots outside the ancestral set are isolated vertices of H.
        full = nx.Graph()
        full.add_nodes_from(self.nodes)
        full.add_edges_from(moral.edges)
        self.moral = full
        self.chordal = chordal_completion(full)
        self.fill_edges = [e for e in self.chordal.edges if not full.has_edge(*e)]
        self.order = perfect_elimination_order(self.chordal)
        self.cliques = maximal_cliques(self.chordal, self.order)

    @property
    def max_clique_size(self):
        """``c``, the largest clique size (the cost of the structured family grows with it)."""
        return max(len(c) for c in self.cliques)

    def __repr__(self):
        return (f"ChordalStructure(nodes={len(self.nodes)}, edges={self.chordal.number_of_edges()}, "
                f"fill={len(self.fill_edges)}, cliques={len(self.cliques)}, c={self.max_clique_size})")


def chordal_structure(graph, observed):
    """Build the :class:`ChordalStructure` of ``graph`` for the given observed nodes."""
    return ChordalStructure(graph, observed)
