"""DAG bookkeeping for DAG-DGPs: validation, node roles, orders, moralisation and chordal completion.

The chordal machinery follows digest-000 §2.4: take the ancestral set of the observed nodes (roots
excluded, since they carry no inducing points), moralise it, complete it to a chordal graph with MCS-M
(Berry et al. 2004), and compute a perfect elimination order (PEO) by maximum cardinality search with
ties broken by declaration order, so everything is deterministic.

All functions take a :class:`networkx.DiGraph` whose nodes are strings. "Declaration order" is the
order of ``graph.nodes`` (insertion order).
"""
import networkx as nx

__all__ = [
    "DAGStructureError",
    "validate_dag",
    "roots",
    "non_roots",
    "parents",
    "topological_order",
    "ancestral_set",
    "moral_graph",
    "chordal_completion",
    "maximum_cardinality_search",
    "perfect_elimination_order",
    "is_perfect_elimination_order",
    "maximal_cliques",
    "antichain_decomposition",
    "ChordalStructure",
    "chordal_structure",
]


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
    if not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
        raise DAGStructureError(f"the graph has a directed cycle: {path}; remove one of these edges")
    return graph


def roots(graph):
    """Nodes without parents, in declaration order (they hold design matrices, digest-000 §1.1)."""
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
    """``(Anc(S) ∪ S)`` restricted to non-roots, in declaration order (digest-000 §2.4 step 2)."""
    keep = set(nodes)
    for v in nodes:
        keep |= nx.ancestors(graph, v)
    return [v for v in non_roots(graph) if v in keep]


def moral_graph(graph, nodes=None):
    """Moralise the DAG induced on ``nodes`` (default: all nodes).

    Adds an undirected edge for each parent-child pair and between every pair of co-parents of each
    child, where both lie in ``nodes`` (digest-000 §2.4 step 3). Node order = declaration order.
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

    For each vertex, its later neighbours in the order form a clique (digest-000 §2.4 step 6).

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
    property used by the clique factorisation (digest-000 §2.2, Eq. 6).
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


def antichain_decomposition(graph):
    """Progressive antichain decomposition ``V = ⊔ A_ℓ`` (digest-000 §3.1, Prop. 1).

    ``d(v)`` is the length of the longest directed path starting at ``v`` and
    ``A_ℓ = {v : d(v) = h - 1 - ℓ}``; sinks land in the last slice.

    :returns: list of lists of nodes (declaration order inside each slice).
    """
    depth = {}
    for v in reversed(topological_order(graph)):
        depth[v] = 1 + max((depth[c] for c in graph.successors(v)), default=-1)
    h = 1 + max(depth.values())
    return [[v for v in graph.nodes if depth[v] == h - 1 - level] for level in range(h)]


class ChordalStructure:
    """The chordal structure ``H`` of a DAG-SVI posterior (digest-000 §2.4).

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
        # Non-roots outside the ancestral set are isolated vertices of H (digest-000 §2.4 step 4).
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
        """``c`` in the cost analysis of digest-000 §2.11."""
        return max(len(c) for c in self.cliques)

    def __repr__(self):
        return (f"ChordalStructure(nodes={len(self.nodes)}, edges={self.chordal.number_of_edges()}, "
                f"fill={len(self.fill_edges)}, cliques={len(self.cliques)}, c={self.max_clique_size})")


def chordal_structure(graph, observed):
    """Build the :class:`ChordalStructure` of ``graph`` for the given observed nodes."""
    return ChordalStructure(graph, observed)
