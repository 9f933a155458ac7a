"""From per-fidelity ``(X, y)`` arrays to a DAG and NaN-padded data (Perlino et al. 2026, arXiv:2607.09645, Sec. 7
and Sec. 8.1: a simulator hierarchy as a DAG-DGP).

The shared design input is one root (``"x"`` by default); each fidelity is a node observed at its own design points;
the cases are the distinct design points of all fidelities together (a point evaluated by several fidelities is one
case observed at each of them, as nested designs are), and a fidelity's entries are NaN at the other cases.
"""
from dataclasses import dataclass

import networkx as nx
import numpy as np

from ..dgp import DAGInputError
from ..scaling import column_moments

__all__ = ["MultiFidelityData", "multifidelity_data"]


@dataclass
class MultiFidelityData:
    """A multi-fidelity data set on a DAG.

    :ivar networkx.DiGraph graph: ``input → fidelity`` for every fidelity connected to the input, and
        ``lower → fidelity`` for each refined fidelity.
    :ivar str input: the root's name. :ivar list fidelities: in topological order (lowest first).
    :ivar dict parents: ``{fidelity: [lower fidelities]}``.
    :ivar numpy.ndarray X: ``[n, d]`` the distinct design points (the cases).
    :ivar dict y: ``{fidelity: [n, 1]}`` observations, NaN where the fidelity was not run.
    :ivar dict index: ``{fidelity: [n_f] int}`` the case of each of the fidelity's design points (in the order given).
    """

    graph: nx.DiGraph
    input: str
    fidelities: list
    parents: dict
    X: np.ndarray
    y: dict
    index: dict

    @property
    def num_cases(self):
        return self.X.shape[0]

    @property
    def dim(self):
        return self.X.shape[1]

    def observed(self, fidelity):
        """``[n]`` bool: the cases where ``fidelity`` was run."""
        return np.isfinite(self.y[fidelity][:, 0])

    def nested(self, fidelity):
        """Whether every design point of ``fidelity`` is also a design point of each fidelity it refines."""
        m = self.observed(fidelity)
        return all(bool(self.observed(p)[m].all()) for p in self.parents[fidelity])


def _as_2d(a, label, dim=None):
    a = _as_float(a, label)
    if a.ndim == 1:
        a = a[:, None] if dim in (None, 1) else a[None, :]
    if a.ndim != 2:
        raise DAGInputError(f"{label} must be a [n, d] array, got shape {a.shape}")
    return a


def _as_float(a, label):
    """``a`` as a float64 array; a :class:`DAGInputError` naming ``label`` for values that are not numbers."""
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DAGInputError(f"{label} holds values that are not numbers ({e}); pass numeric arrays (encode or drop "
                            "text columns)") from None


def multifidelity_data(fidelities, parents=None, input_name="x", connect_input=None):
    """Build the graph and the NaN-padded data of a simulator hierarchy from per-fidelity arrays.

    :param dict fidelities: ``{name: (X [n_f, d], y [n_f] or [n_f, 1])}``, in any order; sizes may differ and the
        designs may be nested or not. A list of ``(X, y)`` pairs is a chain, lowest fidelity first, named
        ``"f1"``, ``"f2"``, ...
    :param dict parents: ``{name: [lower fidelities it refines]}`` (one name, a string, is that fidelity); default
        (and for a list): a chain in the given order (each fidelity refines the previous one). A fidelity not named
        has no lower-fidelity parents.
    :param str input_name: the root's name (default ``"x"``).
    :param connect_input: fidelities with the edge ``input → fidelity`` (default: all, the input-connected fusion of
        Perlino et al. 2026, Sec. 8.1); every fidelity needs a path from the input.
    :returns: :class:`MultiFidelityData`.
    :raises DAGInputError: naming the fidelity, for designs of different input dimensions, values that are not
        numbers, an infinite ``y`` (NaN marks a failed run, dropped), a fidelity with no finite observation, mismatched ``X`` / ``y`` lengths, unknown parents, a cycle, or a fidelity with no path
        from the input.

    Example::

        mf = multifidelity_data({"low": (X_low, y_low), "high": (X_high, y_high)}, parents={"high": ["low"]})
        mf.graph.edges  # x -> low, x -> high, low -> high
    """
    if isinstance(fidelities, (list, tuple)):
        fidelities = {f"f{k + 1}": pair for k, pair in enumerate(fidelities)}
        if parents is None:
            names = list(fidelities)
            parents = {names[k]: [names[k - 1]] for k in range(1, len(names))}
    if not isinstance(fidelities, dict) or not fidelities:
        raise DAGInputError("fidelities must be a non-empty dict {name: (X, y)} or a list of (X, y) pairs")
    names = list(fidelities)
    if parents is None:
        parents = {names[k]: [names[k - 1]] for k in range(1, len(names))}
    if not isinstance(parents, dict):
        raise DAGInputError(f"parents must be a dict {{fidelity: [lower fidelities it refines]}}, got "
                            f"{type(parents).__name__}")
    # one name is one parent (list("lofi") would be its letters)
    parents = {f: [ps] if isinstance(ps, str) else list(ps) for f, ps in parents.items()}
    if isinstance(connect_input, str):
        connect_input = [connect_input]
    for f in names:
        if not isinstance(f, str) or "." in f or f == input_name:
            raise DAGInputError(f"fidelity name {f!r} must be a string without '.' and differ from the input's name "
                                f"{input_name!r}")
    arrays, dims = {}, {}
    for f in names:
        pair = fidelities[f]
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise DAGInputError(f"fidelity {f!r}: give a pair (X [n, d], y [n])")
        X = _as_2d(pair[0], f"fidelity {f!r}: X")
        y = _as_float(pair[1], f"fidelity {f!r}: y").reshape(-1, 1) if np.ndim(pair[1]) <= 2 else None
        if y is None or (np.ndim(pair[1]) == 2 and np.shape(pair[1])[1] != 1):
            raise DAGInputError(f"fidelity {f!r}: y must be [n] or [n, 1] (one output per fidelity), got shape "
                                f"{np.shape(pair[1])}")
        if y.shape[0] != X.shape[0]:
            raise DAGInputError(f"fidelity {f!r}: X has {X.shape[0]} rows but y has {y.shape[0]}; give one output per "
                                "design point")
        if not np.isfinite(X).all():
            raise DAGInputError(f"fidelity {f!r}: X has NaN or inf; drop those design points")
        for j in range(X.shape[1]):  # the designs are standardised too (the unit box, initial length-scales)
            column_moments(X[:, j], f"fidelity {f!r}: X column {j}", error=DAGInputError)
        if np.isinf(y).any():
            i = int(np.flatnonzero(np.isinf(y[:, 0]))[0])
            raise DAGInputError(f"fidelity {f!r}: y is infinite at design point {i} (of {len(y)}); fix the run, or "
                                "give NaN for a run that failed (its design point is then dropped)")
        keep = ~np.isnan(y[:, 0])
        if not keep.any():
            raise DAGInputError(f"fidelity {f!r} is observed nowhere (no design point with a finite y); drop it or "
                                "give its runs")
        arrays[f] = (X[keep], y[keep])
        dims[f] = X.shape[1]
    if len(set(dims.values())) > 1:
        raise DAGInputError(f"the fidelities' designs have different input dimensions {dims}; every fidelity must be "
                            "run on the same input space (same columns, same order)")
    for f, ps in parents.items():
        if f not in fidelities:
            raise DAGInputError(f"parents names fidelity {f!r}, which is not among the fidelities {names}")
        for p in ps:
            if p not in fidelities:
                raise DAGInputError(f"fidelity {f!r} refines {p!r}, which is not among the fidelities {names}")
    connect = set(names) if connect_input is None else set(connect_input)
    for f in connect:
        if f not in fidelities:
            raise DAGInputError(f"connect_input names {f!r}, which is not among the fidelities {names}")
    g = nx.DiGraph()
    g.add_node(input_name)
    g.add_nodes_from(names)
    g.add_edges_from((input_name, f) for f in names if f in connect)
    g.add_edges_from((p, f) for f, ps in parents.items() for p in ps)
    if not nx.is_directed_acyclic_graph(g):
        cycle = nx.find_cycle(g)
        raise DAGInputError(f"the fidelity graph has a cycle {' -> '.join(u for u, _ in cycle)} -> {cycle[0][0]}: a "
                            "fidelity cannot refine itself through others")
    reach = nx.descendants(g, input_name)
    cut = [f for f in names if f not in reach]
    if cut:
        raise DAGInputError(f"fidelities {cut} have no path from the input {input_name!r}: connect them to the input "
                            "(connect_input) or to a fidelity that has one")
    order = [v for v in nx.topological_sort(g) if v != input_name]
    # distinct design points, in order of first appearance (lowest fidelity first)
    rows, index, keys = [], {}, {}
    for f in order:
        X = arrays[f][0]
        idx = np.empty(X.shape[0], dtype=np.int64)
        for i, x in enumerate(X):
            k = x.tobytes()
            if k not in keys:
                keys[k] = len(rows)
                rows.append(x)
            idx[i] = keys[k]
        if len(np.unique(idx)) != len(idx):
            raise DAGInputError(f"fidelity {f!r} has repeated design points; average the repeated runs (a fidelity "
                                "is one deterministic output per point, plus noise)")
        index[f] = idx
    Xall = np.stack(rows)
    y = {}
    for f in order:
        col = np.full((Xall.shape[0], 1), np.nan)
        col[index[f]] = arrays[f][1]
        y[f] = col
    par = {f: [p for p in g.predecessors(f) if p != input_name] for f in order}
    return MultiFidelityData(g, input_name, order, par, Xall, y, index)
