"""Edge evidence for posterior queries: ``{(i, j): present}`` with node indices or names.

A query such as "given that ``A -> B`` is present and ``C -> D`` absent, how likely is ``E -> F``?" (the
conditional queries of Wang, Wicker & Kwiatkowska 2022, *Tractable Uncertainty for Structure Learning*, ICML,
§4.4) takes its evidence as a dict ``{(0, 1): True, ("C", "D"): False}``. :func:`parse_evidence` checks it and
turns it into per-node bitmasks of required and forbidden parents (bit ``i`` of ``required[j]``: ``i -> j`` must
be present), the form every posterior's queries use.
"""
import numbers

import numpy as np
import torch

from ..graph.acyclic import find_cycle

__all__ = ["Evidence", "parse_evidence", "parse_evidence_string"]


class Evidence:
    """Parsed edge evidence over ``p`` nodes.

    :ivar dict edges: ``{(i, j): bool}`` with integer node indices.
    :ivar numpy.ndarray required: ``[p]`` int64 bitmasks, bit ``i`` of ``required[j]`` set: ``i -> j`` present.
    :ivar numpy.ndarray forbidden: ``[p]`` int64 bitmasks, bit ``i`` of ``forbidden[j]`` set: ``i -> j`` absent.
    """

    def __init__(self, edges, num_nodes):
        self.edges = dict(edges)
        self.num_nodes = num_nodes
        self.required = np.zeros(num_nodes, dtype=np.int64)
        self.forbidden = np.zeros(num_nodes, dtype=np.int64)
        for (i, j), present in self.edges.items():
            if present:
                self.required[j] |= 1 << i
            else:
                self.forbidden[j] |= 1 << i

    def __bool__(self):
        return bool(self.edges)

    def __len__(self):
        return len(self.edges)

    @property
    def nodes(self):
        """Nodes whose parent set the evidence constrains (sorted)."""
        return sorted({j for (_, j) in self.edges})

    def key(self):
        """A hashable form (for caches)."""
        return tuple(sorted(self.edges.items()))

    def holds(self, samples):
        """``[n]`` bool: which DAGs ``[n, p, p]`` (0/1) satisfy the evidence."""
        S = torch.as_tensor(samples)
        ok = torch.ones(S.shape[0], dtype=torch.bool, device=S.device)
        for (i, j), present in self.edges.items():
            ok &= (S[:, i, j] > 0.5) == bool(present)
        return ok

    def required_cycle(self):
        """A directed cycle ``[v0, v1, ..., v0]`` (node indices) among the edges the evidence requires, or ``None``:
        with one, no DAG satisfies the evidence."""
        if not any(self.edges.values()):
            return None
        A = np.zeros((self.num_nodes, self.num_nodes))
        for (i, j), present in self.edges.items():
            A[i, j] = float(present)
        return find_cycle(A)

    def unspecified(self):
        """``[p, p]`` bool: the off-diagonal pairs the evidence leaves free."""
        free = ~np.eye(self.num_nodes, dtype=bool)
        for (i, j) in self.edges:
            free[i, j] = False
        return free


def _node_index(v, num_nodes, node_names, edge):
    if isinstance(v, (bool, np.bool_)):
        raise ValueError(f"evidence edge {edge!r}: nodes are indices or names, not booleans")
    if isinstance(v, numbers.Integral):
        if not 0 <= int(v) < num_nodes:
            raise ValueError(f"evidence edge {edge!r}: node index {int(v)} is out of range 0..{num_nodes - 1}")
        return int(v)
    if isinstance(v, str):
        names = list(node_names) if node_names is not None else [str(k) for k in range(num_nodes)]
        if v not in names:
            raise ValueError(f"evidence edge {edge!r}: unknown node {v!r}; the nodes are {names}")
        return names.index(v)
    raise ValueError(f"evidence edge {edge!r}: a node must be an index or a name; got {type(v).__name__}")


def parse_evidence(evidence, num_nodes, node_names=None):
    """Check edge evidence and return an :class:`Evidence`.

    :param evidence: ``None`` (no evidence), an :class:`Evidence`, or a dict ``{(i, j): present}``: ``i``, ``j``
        node indices or names (``node_names``), ``present`` a bool (``True``: the edge ``i -> j`` is in the DAG,
        ``False``: it is not). The same edge given twice (by index and by name) must agree.
    :param int num_nodes: ``p``.
    :param list node_names: the node names (``None``: ``"0"``, ``"1"``, ...).
    :raises ValueError: an unknown node, an index out of range, a self-loop, a non-boolean value or an edge given
        both as present and absent.
    """
    if evidence is None:
        return Evidence({}, num_nodes)
    if isinstance(evidence, Evidence):
        if evidence.num_nodes != num_nodes:
            raise ValueError(f"evidence is over {evidence.num_nodes} nodes; this posterior has {num_nodes}")
        return evidence
    if not isinstance(evidence, dict):
        raise TypeError(f"evidence must be a dict {{(i, j): True/False}} of edges to presence; "
                        f"got {type(evidence).__name__}")
    edges = {}
    for edge, present in evidence.items():
        if not isinstance(edge, tuple) or len(edge) != 2:
            raise ValueError(f"evidence key {edge!r} must be an edge (i, j), e.g. (0, 1) or ('A', 'B')")
        i = _node_index(edge[0], num_nodes, node_names, edge)
        j = _node_index(edge[1], num_nodes, node_names, edge)
        if i == j:
            raise ValueError(f"evidence edge {edge!r} is a self-loop; a DAG has none")
        if not isinstance(present, (bool, np.bool_)):
            raise ValueError(f"evidence for edge {edge!r} must be True (present) or False (absent); got {present!r}")
        if (i, j) in edges and edges[(i, j)] != bool(present):
            raise ValueError(f"contradictory evidence: edge {edge!r} is given both as present and as absent")
        edges[(i, j)] = bool(present)
    return Evidence(edges, num_nodes)


def parse_evidence_string(text):
    """``"A->B,!C->D"`` -> ``{("A", "B"): True, ("C", "D"): False}`` (the command line's ``--given``): edges
    separated by commas, ``!`` in front of an edge that must be absent; node names, or indices when a name is a
    plain integer. Check the result against a posterior with :func:`parse_evidence`."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("--given needs edges like 'A->B,!C->D'")
    out = {}
    for token in text.split(","):
        tok = token.strip()
        present = not tok.startswith("!")
        tok = tok.lstrip("!").strip()
        parts = [t.strip() for t in tok.split("->")]
        if len(parts) != 2 or not all(parts):
            raise ValueError(f"--given: {token.strip()!r} is not an edge; write 'A->B' (present) or '!A->B' (absent)")
        a, b = (int(t) if t.isdigit() else t for t in parts)
        if (a, b) in out and out[(a, b)] != present:
            raise ValueError(f"--given: contradictory evidence for {a}->{b}")
        out[(a, b)] = present
    return out
