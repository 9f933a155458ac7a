"""pyro_dag.graph.io: edge lists, bnlearn model strings, GML/GraphML, and line-numbered parse errors."""
import networkx as nx
import pytest

from pyro_dag.datasets.sachs import SACHS_NODES, sachs_graph
from pyro_dag.graph import DAGStructureError
from pyro_dag.graph.io import GraphParseError, parse_bnlearn, parse_edge_list, parse_graph, read_graph, write_edge_list

SACHS_BNLEARN = ("[PKC][PKA|PKC][Raf|PKC:PKA][Mek|PKC:PKA:Raf][Erk|Mek:PKA][Akt|Erk:PKA]\n"
                 "[P38|PKC:PKA][Jnk|PKC:PKA][Plcg][PIP3|Plcg][PIP2|Plcg:PIP3]")


def _edges_of_adjacency(a):
    return {(SACHS_NODES[i], SACHS_NODES[j]) for i, j in a.nonzero().tolist()}


def test_bnlearn_model_string_is_the_shipped_sachs_network():
    g = parse_bnlearn(SACHS_BNLEARN)
    assert set(g.edges) == _edges_of_adjacency(sachs_graph("bnlearn"))
    assert g.number_of_edges() == 17 and g.number_of_nodes() == 11
    # parents in the model string's order: declaration order = first bracket
    assert list(g.nodes)[:3] == ["PKC", "PKA", "Raf"]


def test_edge_list_comments_chains_and_isolated_nodes():
    g = parse_edge_list("# a comment\n\nx1 -> w1   # trailing\nx2 -> w2 -> w3\nw1 -> w3\nlonely\n")
    assert set(g.edges) == {("x1", "w1"), ("x2", "w2"), ("w2", "w3"), ("w1", "w3")}
    assert "lonely" in g and g.degree("lonely") == 0
    assert list(g.nodes)[:2] == ["x1", "w1"]


def test_parse_graph_dispatches_on_the_text():
    assert set(parse_graph("  [a][b|a]").edges) == {("a", "b")}
    assert set(parse_graph("a -> b").edges) == {("a", "b")}


@pytest.mark.parametrize("text, line, fragment", [
    ("a -> b\nb => c\n", 2, "parent -> child"),
    ("a -> b\n\n# c\na -> \n", 4, "empty node name"),
    ("a -> b\nc d\n", 2, "parent -> child"),
    ("a -> a\n", 1, "self-loop"),
    ("a -> b\nx.y -> b\n", 2, "'.'"),
])
def test_edge_list_errors_name_the_line(text, line, fragment):
    with pytest.raises(GraphParseError, match=fragment) as info:
        parse_edge_list(text, source="g.txt")
    assert info.value.lineno == line
    assert f"g.txt, line {line}:" in str(info.value)


@pytest.mark.parametrize("text, line, fragment", [
    ("[a][b|a]\n[c|a:b\n[d]", 2, "unbalanced"),
    ("[a][b|a]\n[a]", 2, "declared twice"),
    ("[a]\n[b|z]", 2, "no bracket of its own"),
    ("[a] x [b]", 1, "stray"),
])
def test_bnlearn_errors_name_the_line(text, line, fragment):
    with pytest.raises(GraphParseError, match=fragment) as info:
        parse_bnlearn(text)
    assert info.value.lineno == line


def test_cycles_are_reported_with_their_path():
    with pytest.raises(DAGStructureError, match="cycle: a -> b -> c -> a|cycle: b -> c -> a -> b|cycle: c -> a"):
        parse_edge_list("a -> b\nb -> c\nc -> a\n")
    with pytest.raises(DAGStructureError, match="cycle"):
        parse_bnlearn("[a|c][b|a][c|b]")


def test_read_graph_files(tmp_path):
    g = parse_bnlearn(SACHS_BNLEARN)
    p_txt = tmp_path / "g.txt"
    write_edge_list(g, p_txt)
    assert set(read_graph(p_txt).edges) == set(g.edges)
    p_bn = tmp_path / "g.bn"
    p_bn.write_text(SACHS_BNLEARN)
    assert set(read_graph(p_bn).edges) == set(g.edges)
    p_gml = tmp_path / "g.gml"
    nx.write_gml(g, p_gml)
    assert set(read_graph(p_gml).edges) == set(g.edges)
    p_xml = tmp_path / "g.graphml"
    nx.write_graphml(g, p_xml)
    assert set(read_graph(p_xml).edges) == set(g.edges)


def test_read_graph_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_graph(tmp_path / "missing.txt")
    bad = tmp_path / "bad.gml"
    bad.write_text("graph [\n  directed 1\n  node [ id 0 label \"a\" ]\n  edge [ source 0 \n")
    with pytest.raises(GraphParseError, match="bad.gml"):
        read_graph(bad)
    und = tmp_path / "und.gml"
    nx.write_gml(nx.Graph([("a", "b")]), und)
    with pytest.raises(DAGStructureError, match="undirected"):
        read_graph(und)
    cyc = tmp_path / "cyc.graphml"
    nx.write_graphml(nx.DiGraph([("a", "b"), ("b", "a")]), cyc)
    with pytest.raises(DAGStructureError, match="cyc.graphml.*cycle"):
        read_graph(cyc)
