"""Reading a DAG from a file or a string: an edge list, a bnlearn model string, GML or GraphML.

* **Edge list** (``.txt``, ``.edges`` or anything else): one edge ``parent -> child`` per line; a chain
  ``a -> b -> c`` is the edges ``a -> b`` and ``b -> c``; a line with a single name declares a node without
  edges; ``#`` starts a comment; blank lines are skipped.
* **bnlearn model string** (text starting with ``[``): ``[PKC][PKA|PKC][Raf|PKC:PKA]`` -- each bracket is a
  node and, after ``|``, its parents separated by ``:`` (Scutari 2010, "Learning Bayesian networks with the bnlearn
  R package", *J. Stat. Softw.* 35(3), ``modelstring``); it may span lines.
* **GML** (``.gml``) and **GraphML** (``.graphml``, ``.xml``): networkx's readers (directed graphs).

Node declaration order (which fixes the order of a node's parents, :func:`pyro_dag.graph.parents`) is the order of
first appearance. Every reader ends with :func:`pyro_dag.graph.validate_dag`, so a cycle is reported with its
path.
"""
import os
import re

import networkx as nx

from .dag import DAGStructureError, validate_dag

__all__ = ["GraphParseError", "read_graph", "parse_graph", "parse_edge_list", "parse_bnlearn", "write_edge_list"]

_NAME = re.compile(r"^[^\s\[\]|:#>-][^\s\[\]|:#]*$")


class GraphParseError(DAGStructureError):
    """A graph file or string that does not parse; the message names the file, the line and the fix.

    :ivar int lineno: 1-based line number of the problem (``None`` when it is not about one line).
    """

    def __init__(self, message, lineno=None, source=None):
        where = source or "<string>"
        prefix = f"{where}, line {lineno}: " if lineno is not None else f"{where}: "
        super().__init__(prefix + message)
        self.lineno, self.source = lineno, source


def _check_name(name, lineno, source, line):
    if not name:
        raise GraphParseError(f"empty node name in {line.strip()!r}; write one edge as 'parent -> child'", lineno,
                              source)
    if not _NAME.match(name):
        raise GraphParseError(f"node name {name!r} in {line.strip()!r} contains whitespace or one of '[]|:#'; "
                              "use names without them (e.g. 'p44_42')", lineno, source)
    if "." in name:
        raise GraphParseError(f"node name {name!r} contains '.', which Pyro site names reserve; rename it "
                              f"(e.g. {name.replace('.', '_')!r})", lineno, source)
    return name


def parse_edge_list(text, source=None):
    """A DAG from an edge list (``parent -> child`` per line; see the module docstring).

    :param str text: the file's contents. :param str source: the file name for messages.
    :returns: a validated :class:`networkx.DiGraph`.
    :raises GraphParseError: naming the line that does not parse.
    """
    g = nx.DiGraph()
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if "->" not in line:
            if re.search(r"\s|<-|--|,|;|=", line):
                raise GraphParseError(f"cannot read {raw.strip()!r}: expected 'parent -> child' (or a single node "
                                      "name)", lineno, source)
            g.add_node(_check_name(line, lineno, source, raw))
            continue
        names = [s.strip() for s in line.split("->")]
        names = [_check_name(s, lineno, source, raw) for s in names]
        for a, b in zip(names[:-1], names[1:]):
            if a == b:
                raise GraphParseError(f"self-loop {a} -> {a}: a DAG has no edge from a node to itself; remove it",
                                      lineno, source)
            g.add_edge(a, b)
    if g.number_of_nodes() == 0:
        raise GraphParseError("no edges or nodes found; write one edge 'parent -> child' per line", None, source)
    return _validated(g, source)


def parse_bnlearn(text, source=None):
    """A DAG from a bnlearn model string ``[A][B|A][C|A:B]`` (may span lines).

    :raises GraphParseError: naming the line of the bracket that does not parse, a node declared twice, or a
        parent that has no bracket of its own.
    """
    g = nx.DiGraph()
    declared = {}
    pos, lineno = 0, 1
    pattern = re.compile(r"\[([^\[\]]*)\]")
    parents_of = []
    while pos < len(text):
        ch = text[pos]
        if ch == "\n":
            lineno += 1
            pos += 1
            continue
        if ch.isspace():
            pos += 1
            continue
        m = pattern.match(text, pos)
        if m is None:
            snippet = text[pos:pos + 20].split("\n")[0]
            raise GraphParseError(f"expected '[node]' or '[node|parent:parent]' at {snippet!r} (an unbalanced or "
                                  "stray character)", lineno, source)
        body = m.group(1)
        node, _, pa = body.partition("|")
        node = _check_name(node.strip(), lineno, source, m.group(0))
        if node in declared:
            raise GraphParseError(f"node {node!r} is declared twice (also on line {declared[node]}); give each node "
                                  "one bracket", lineno, source)
        declared[node] = lineno
        g.add_node(node)
        ps = [] if not pa.strip() else [_check_name(p.strip(), lineno, source, m.group(0)) for p in pa.split(":")]
        parents_of.append((node, ps, lineno))
        pos = m.end()
    if not declared:
        raise GraphParseError("empty model string; write e.g. '[A][B|A]'", None, source)
    for node, ps, ln in parents_of:
        for p in ps:
            if p not in declared:
                raise GraphParseError(f"parent {p!r} of {node!r} has no bracket of its own; add '[{p}]'", ln, source)
            g.add_edge(p, node)
    return _validated(g, source)


def _validated(g, source):
    try:
        return validate_dag(g)
    except GraphParseError:
        raise
    except DAGStructureError as e:
        raise DAGStructureError(f"{source or '<string>'}: {e}") from None


def parse_graph(text, source=None):
    """A DAG from text: a bnlearn model string if it starts with ``[``, else an edge list."""
    if text.lstrip().startswith("["):
        return parse_bnlearn(text, source)
    return parse_edge_list(text, source)


def read_graph(path):
    """Read a DAG from ``path`` (format from the extension, then the contents; see the module docstring).

    :param str path: a ``.gml``, ``.graphml`` / ``.xml`` file (networkx readers), or a text file holding an edge
        list or a bnlearn model string.
    :returns: a validated :class:`networkx.DiGraph` with string nodes.
    :raises FileNotFoundError: if there is no such file.
    :raises GraphParseError: naming the line (for text formats) that does not parse.
    :raises DAGStructureError: for a cycle (with its path) or an undirected GML/GraphML graph.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"graph file {path!r} does not exist")
    ext = os.path.splitext(path)[1].lower()
    if ext in (".gml", ".graphml", ".xml"):
        try:
            g = nx.read_gml(path) if ext == ".gml" else nx.read_graphml(path)
        except Exception as e:  # networkx raises NetworkXError, ParseError, ...
            lineno = _line_of(e)
            raise GraphParseError(f"networkx could not read it as {ext[1:].upper()}: {e}", lineno, path) from None
        if not g.is_directed():
            raise DAGStructureError(f"{path}: the graph is undirected; declare it directed ('directed 1' in GML, "
                                    "edgedefault=\"directed\" in GraphML)")
        g = nx.relabel_nodes(nx.DiGraph(g), str)
        return _validated(g, path)
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return parse_graph(text, path)


def _line_of(error):
    m = re.search(r"line (\d+)", str(error))
    if m:
        return int(m.group(1))
    pos = getattr(error, "position", None)
    return pos[0] if pos else None


def write_edge_list(graph, path):
    """Write ``graph`` as an edge list (``parent -> child`` per line; isolated nodes on their own line)."""
    with open(path, "w", encoding="utf-8") as f:
        for v in graph.nodes:
            if graph.degree(v) == 0:
                f.write(f"{v}\n")
        for a, b in graph.edges:
            f.write(f"{a} -> {b}\n")
