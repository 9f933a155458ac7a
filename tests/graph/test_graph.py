import itertools

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pyro_dag import graph as G

SACHS = nx.DiGraph([
    ("PKC", "PKA"), ("PKC", "Raf"), ("PKA", "Raf"), ("PKC", "Mek"), ("PKA", "Mek"), ("Raf", "Mek"),
    ("Mek", "Erk"), ("PKA", "Erk"), ("Erk", "Akt"), ("PKA", "Akt"), ("PKC", "P38"), ("PKA", "P38"),
    ("PKC", "Jnk"), ("PKA", "Jnk"), ("Plcg", "PIP3"), ("Plcg", "PIP2"), ("PIP3", "PIP2"),
])


def chain():
    return nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c")])


def collider():
    return nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])


def diamond():
    return nx.DiGraph([("x", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])


def binary_tree(depth):
    g = nx.DiGraph()
    g.add_node("r")
    frontier = ["r"]
    for level in range(depth):
        nxt = []
        for p in frontier:
            for k in range(2):
                c = f"{p}{k}" if p != "r" else f"n{k}"
                g.add_edge(p, c)
                nxt.append(c)
        frontier = nxt
    return g


def structure_ok(s):
    assert nx.is_chordal(s.chordal)
    assert all(s.chordal.has_edge(*e) for e in s.moral.edges)
    assert G.is_perfect_elimination_order(s.chordal, s.order)
    covered = set()
    for c in s.cliques:
        for a, b in itertools.combinations(c, 2):
            assert s.chordal.has_edge(a, b)
            covered.add(frozenset((a, b)))
    assert covered == {frozenset(e) for e in s.chordal.edges}


def test_cycle_error_shows_cycle():
    g = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a")])
    with pytest.raises(G.DAGStructureError, match=r"cycle: .*a.*->.*b.*->.*c|cycle"):
        G.validate_dag(g)
    with pytest.raises(G.DAGStructureError) as info:
        G.validate_dag(g)
    msg = str(info.value)
    assert "->" in msg and all(v in msg for v in "abc")


def test_bad_names():
    with pytest.raises(G.DAGStructureError, match="not a string"):
        G.validate_dag(nx.DiGraph([(1, 2)]))
    with pytest.raises(G.DAGStructureError, match="'.'"):
        G.validate_dag(nx.DiGraph([("x", "a.b")]))


def test_roles_and_orders():
    g = collider()
    assert G.roots(g) == ["x1", "x2"]
    assert G.non_roots(g) == ["w1", "w2", "w3"]
    assert G.parents(g, "w3") == ["w1", "w2"]
    topo = G.topological_order(g)
    assert topo.index("w1") < topo.index("w3") and topo.index("w2") < topo.index("w3")
    assert topo == G.topological_order(g)  # deterministic


def test_chain_is_path():
    s = G.chordal_structure(chain(), ["c"])
    structure_ok(s)
    assert s.ancestral == ["a", "b", "c"]
    assert sorted(map(sorted, s.chordal.edges)) == [["a", "b"], ["b", "c"]]
    assert s.fill_edges == [] and s.max_clique_size == 2


def test_chain_partial_observation_isolates_descendants():
    s = G.chordal_structure(chain(), ["b"])
    assert s.ancestral == ["a", "b"]
    assert s.chordal.degree("c") == 0
    assert ["c"] in s.cliques


def test_collider_marries_parents():
    s = G.chordal_structure(collider(), ["w3"])
    structure_ok(s)
    assert s.moral.has_edge("w1", "w2")
    assert len(s.cliques) == 1 and set(s.cliques[0]) == {"w1", "w2", "w3"}


def test_diamond():
    s = G.chordal_structure(diamond(), ["d"])
    structure_ok(s)
    assert s.moral.has_edge("b", "c")
    assert s.fill_edges == []
    assert sorted(map(set, s.cliques), key=sorted) == sorted([{"a", "b", "c"}, {"b", "c", "d"}], key=sorted)


def test_non_chordal_moral_graph_gets_minimal_fill():
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c"), ("c", "d"), ("a", "e"), ("e", "d")])
    s = G.chordal_structure(g, ["d"])
    structure_ok(s)
    assert not nx.is_chordal(s.moral)
    assert len(s.fill_edges) == 1
    for e in s.fill_edges:  # inclusion-minimal: removing any fill edge breaks chordality
        h = s.chordal.copy()
        h.remove_edge(*e)
        assert not nx.is_chordal(h)


def test_binary_tree_is_a_forest():
    g = binary_tree(4)
    leaves = [v for v in g if g.out_degree(v) == 0]
    s = G.chordal_structure(g, leaves)
    structure_ok(s)
    assert len(s.nodes) == 2 ** 5 - 2
    assert s.fill_edges == [] and s.max_clique_size == 2
    assert nx.number_connected_components(s.chordal) == 2


def test_sachs_cliques_by_hand():
    gp_nodes = G.non_roots(SACHS)
    s = G.chordal_structure(SACHS, gp_nodes)
    structure_ok(s)
    assert set(G.roots(SACHS)) == {"PKC", "Plcg"}
    assert s.fill_edges == []
    expected = {frozenset(c) for c in [("PKA", "Raf", "Mek"), ("PKA", "Mek", "Erk"), ("PKA", "Erk", "Akt"),
                                       ("PKA", "Jnk"), ("PKA", "P38"), ("PIP3", "PIP2")]}
    assert {frozenset(c) for c in s.cliques} == expected
    assert s.max_clique_size == 3


def test_structure_is_deterministic():
    a = G.chordal_structure(SACHS, G.non_roots(SACHS))
    b = G.chordal_structure(SACHS.copy(), G.non_roots(SACHS))
    assert a.order == b.order and a.cliques == b.cliques


def test_antichain_decomposition():
    g = collider()
    slices = G.antichain_decomposition(g)
    assert slices == [["x1", "x2"], ["w1", "w2"], ["w3"]]
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("x", "b")])
    assert G.antichain_decomposition(g) == [["x"], ["a"], ["b"]]


def test_unknown_observed_node():
    with pytest.raises(G.DAGStructureError, match="'zz'"):
        G.chordal_structure(collider(), ["zz"])


@st.composite
def random_dags(draw):
    p = draw(st.integers(3, 12))
    edges = []
    for j in range(1, p):
        for i in range(j):
            if draw(st.booleans()) and draw(st.booleans()):
                edges.append((f"v{i}", f"v{j}"))
    g = nx.DiGraph()
    g.add_nodes_from(f"v{i}" for i in range(p))
    g.add_edges_from(edges)
    gp = G.non_roots(g)
    obs = [v for v in gp if draw(st.booleans())] or gp[-1:]
    return g, obs


@settings(max_examples=60, deadline=None)
@given(random_dags())
def test_random_dags_give_valid_minimal_structures(case):
    g, obs = case
    if not G.non_roots(g):
        return
    s = G.chordal_structure(g, obs)
    structure_ok(s)
    for e in s.fill_edges:
        h = s.chordal.copy()
        h.remove_edge(*e)
        assert not nx.is_chordal(h)


# ----------------------------------------------------------------------------------------------------------
# the one acyclicity check, used everywhere
# ----------------------------------------------------------------------------------------------------------
def _random_digraphs(num, p, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    return (rng.random((num, p, p)) < 0.25).astype(float)


def test_is_acyclic_matches_networkx_on_every_input_type():
    import numpy as np
    import torch

    A = _random_digraphs(300, 5, seed=0)
    A[:5, 0, 0] = 1.0  # self-loops are cycles
    ref = np.array([nx.is_directed_acyclic_graph(nx.DiGraph([(int(i), int(j)) for i, j in zip(*np.nonzero(a))]))
                    if a.any() else True for a in A])
    assert 0 < ref.sum() < len(ref)
    np.testing.assert_array_equal(G.is_acyclic(A), ref)
    np.testing.assert_array_equal(G.is_acyclic(torch.as_tensor(A)).numpy(), ref)
    np.testing.assert_array_equal(G.is_acyclic(torch.as_tensor(A, dtype=torch.int64)).numpy(), ref)
    assert [G.is_acyclic(a.tolist()) for a in A[:20]] == ref[:20].tolist()
    assert G.is_acyclic(nx.DiGraph([("a", "b")])) and not G.is_acyclic(nx.DiGraph([("a", "b"), ("b", "a")]))
    with pytest.raises(ValueError, match="square"):
        G.is_acyclic(np.zeros((2, 3)))


def test_find_cycle_returns_a_real_cycle():
    import numpy as np

    for a in _random_digraphs(100, 6, seed=1):
        cycle = G.find_cycle(a)
        if G.is_acyclic(a):
            assert cycle is None
            continue
        assert cycle[0] == cycle[-1] and all(a[u, v] == 1 for u, v in zip(cycle[:-1], cycle[1:]))
    names = ["x", "y"]
    assert G.format_cycle(G.find_cycle(np.array([[0, 1], [1, 0]]), names)) in ("x -> y -> x", "y -> x -> y")


def test_every_acyclicity_question_goes_through_is_acyclic(monkeypatch):
    """The dag constraint, metrics.is_dag, CPDAG conversion and validate_dag all call graph.is_acyclic."""
    import torch

    import pyro_dag.graph.acyclic as acyclic
    from pyro_dag.metrics import dag_to_cpdag, is_dag
    from pyro_dag.structure import dag

    calls = []
    original = acyclic._closure_acyclic

    def counting(a):
        calls.append(tuple(a.shape))
        return original(a)

    monkeypatch.setattr(acyclic, "_closure_acyclic", counting)
    chain = [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    assert bool(dag.check(torch.tensor(chain, dtype=torch.float32)))
    assert is_dag(chain) and not is_dag([[0, 1], [1, 0]])
    dag_to_cpdag(chain)
    assert len(calls) == 4
    calls.clear()
    with pytest.raises(G.DAGStructureError, match="cycle: a -> b -> a"):
        G.validate_dag(nx.DiGraph([("a", "b"), ("b", "a")]))


def test_elimination_tree_is_the_first_later_neighbour():
    s = G.chordal_structure(SACHS, [v for v in SACHS.nodes if SACHS.in_degree(v) > 0])
    pos = {v: i for i, v in enumerate(s.order)}
    later = {v: sorted((u for u in s.chordal.neighbors(v) if pos[u] > pos[v]), key=pos.__getitem__) for v in s.order}
    parent = G.elimination_tree(s.order, later)
    for v in s.order:
        assert parent[v] == (later[v][0] if later[v] else None)
        # every later neighbour lies on the path to the root (no fill-in in a PEO)
        path, u = [], parent[v]
        while u is not None:
            path.append(u)
            u = parent[u]
        assert set(later[v]) <= set(path)
