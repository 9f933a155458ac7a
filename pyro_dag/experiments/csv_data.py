"""Reading and checking the CSV file and the graph of ``pyro-dag fit --csv`` (:func:`load_csv_problem`): columns matched
to nodes, latent inputs added, rows split (one held-out share, or one fold of ``K``), every column standardised with
the training rows' statistics. Every refusal names the column, node or option and the fix (:class:`CSVInputError`).
"""
import os
import re

import networkx as nx
import numpy as np
import torch

from ..scaling import column_moments

__all__ = ["CSVInputError", "CSVProblem", "load_csv_problem", "parse_latent"]


class CSVInputError(ValueError):
    """A CSV file, graph or option that does not fit together; the message names the column/node and the fix."""


def parse_latent(spec):
    """``"h:2:PKA,Raf"`` -> ``("h", 2, ["PKA", "Raf"])`` (name, dimension, children).

    :raises CSVInputError: for a malformed spec.
    """
    m = re.fullmatch(r"\s*([^:\s]+)\s*:\s*(\d+)\s*:\s*([^:]+?)\s*", spec or "")
    if m is None:
        raise CSVInputError(f"--latent {spec!r}: expected NAME:DIM:CHILD[,CHILD...], e.g. h:2:PKA,Raf")
    name, dim, children = m.group(1), int(m.group(2)), [c.strip() for c in m.group(3).split(",") if c.strip()]
    if dim < 1:
        raise CSVInputError(f"--latent {spec!r}: the dimension must be a positive integer, got {dim}")
    if not children:
        raise CSVInputError(f"--latent {spec!r}: name at least one child node after the second ':'")
    return name, dim, children


class CSVProblem:
    """A CSV file and a DAG, checked and split (see :func:`load_csv_problem`).

    :ivar networkx.DiGraph graph: the DAG, latent inputs included. :ivar dict latent: ``{h: d_h}``.
    :ivar dict latent_children: ``{h: [children]}``. :ivar list inputs: the observed roots.
    :ivar list nodes: the observed non-root nodes (GP nodes with a column).
    :ivar pandas.DataFrame frame: the numeric data. :ivar numpy.ndarray test_rows: boolean ``[n]``.
    :ivar dict mean: / :ivar dict std: training statistics per column.
    """

    def tensors(self, rows, columns):
        """``{column: [n_rows, 1]}`` standardised float64 tensors of ``rows`` (a boolean array)."""
        out = {}
        for c in columns:
            v = (self.frame[c].to_numpy(dtype=np.float64)[rows] - self.mean[c]) / self.std[c]
            out[c] = torch.as_tensor(v, dtype=torch.float64).unsqueeze(-1)
        return out


def _raw_header(path):
    """The column names of the CSV file's first line as written (``csv`` module; pandas renames duplicates)."""
    import csv as csv_module

    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        return next(csv_module.reader(f), [])


def load_csv_problem(csv, graph, inputs=None, latent=(), test_fraction=0.2, seed=0, fold=None):
    """Read and check a CSV file and a graph, add the latent inputs, split the rows.

    :param csv: a path or a pandas DataFrame. :param graph: a path (:func:`~pyro_dag.graph.io.read_graph`) or a
        ``networkx.DiGraph``.
    :param list inputs: the observed roots (default every root of the graph that is a column).
    :param latent: ``["h:2:PKA,Raf", ...]`` or ``[("h", 2, ["PKA", "Raf"]), ...]``.
    :param float test_fraction: share of rows held out, in ``(0, 1)``. :param int seed: the split's seed.
    :param fold: ``(k, K)`` for fold ``k`` of ``K``-fold cross-validation: the rows are permuted with ``seed`` and
        cut into ``K`` nearly equal parts (:func:`numpy.array_split`), part ``k`` held out (``test_fraction`` is
        then ignored); ``None`` (default): the random ``test_fraction`` split.
    :returns: :class:`CSVProblem`.
    :raises CSVInputError: naming the column, node or option and the fix.
    """
    import pandas as pd

    from ..graph import DAGStructureError, validate_dag
    from ..graph.io import read_graph

    source = csv if isinstance(csv, str) else "the data frame"
    if isinstance(csv, (str, os.PathLike)):
        if not os.path.exists(csv):
            raise CSVInputError(f"CSV file {os.fspath(csv)!r} does not exist")
        try:
            frame = pd.read_csv(csv)
        except Exception as e:
            raise CSVInputError(f"{csv}: pandas could not read it as CSV: {e}") from None
        header = _raw_header(csv)   # pandas renames a repeated column 'a' to 'a.1', which would be called unknown
    else:
        frame = pd.DataFrame(csv).copy()
        header = list(frame.columns)
    header = [str(c).strip() for c in header]
    dup = [c for i, c in enumerate(header) if c in header[:i]]
    if dup:
        raise CSVInputError(f"{source}: column {dup[0]!r} appears {header.count(dup[0])} times in the header; give "
                            "each column a unique name (one column per graph node)")
    frame.columns = [str(c).strip() for c in frame.columns]
    if len(frame) == 0:
        raise CSVInputError(f"{source} has a header row ({', '.join(map(str, frame.columns))}) but no data rows; "
                            "add one row of numbers per case")
    if len(frame) < 3:  # before the column checks, which would call every column of one row constant
        raise CSVInputError(f"{source} has {len(frame)} data row(s): too few rows to fit and test on (at least 3: 2 "
                            "training rows and 1 test row); add more cases")
    g = read_graph(graph) if isinstance(graph, (str, os.PathLike)) else nx.DiGraph(graph)
    if not 0 < test_fraction < 1:
        raise CSVInputError(f"--test-fraction must be in (0, 1), got {test_fraction!r}")
    lat, children = {}, {}
    for spec in latent or ():
        name, dim, kids = parse_latent(spec) if isinstance(spec, str) else spec
        if name in frame.columns:
            raise CSVInputError(f"latent input {name!r} is also a column of {source}; a latent input has no data: "
                                "rename it")
        if name in lat:
            raise CSVInputError(f"latent input {name!r} is given twice; merge the specs (NAME:DIM:CHILD,CHILD)")
        if name in g and g.in_degree(name) > 0:
            raise CSVInputError(f"latent input {name!r} has parents in the graph; a latent input must be a root")
        for c in kids:
            if c not in g:
                raise CSVInputError(f"latent input {name!r}: child {c!r} is not a node of the graph (nodes: "
                                    f"{sorted(g.nodes)})")
        lat[name], children[name] = dim, kids
        g.add_edges_from((name, c) for c in kids)
    try:
        validate_dag(g)
    except DAGStructureError as e:
        raise CSVInputError(str(e)) from None
    nodes = [v for v in g.nodes if v not in lat]
    missing = [v for v in nodes if v not in frame.columns]
    if missing:
        raise CSVInputError(f"node(s) {missing} of the graph have no column in {source} (columns: "
                            f"{list(frame.columns)}); add the column, rename it to the node's name, or declare the "
                            "node latent with --latent NAME:DIM:CHILDREN")
    unknown = [c for c in frame.columns if c not in g]
    if unknown:
        raise CSVInputError(f"column(s) {unknown} of {source} are not nodes of the graph; drop them from the file, "
                            "or add them to the graph")
    for c in nodes:
        col = frame[c]
        if not (pd.api.types.is_numeric_dtype(col) or pd.api.types.is_bool_dtype(col)):
            num = pd.to_numeric(col, errors="coerce")
            bad = col[num.isna() & col.notna()]
            row = bad.index[0]
            raise CSVInputError(f"column {c!r} is not numeric: row {row + 2} of {source} (line {row + 2}, the header "
                                f"being line 1) holds {bad.iloc[0]!r}; fix the value or leave the cell empty for a "
                                "missing value")
        frame[c] = col.astype(np.float64)
        vals = frame[c].to_numpy()
        if not np.isfinite(vals[~np.isnan(vals)]).all():
            raise CSVInputError(f"column {c!r} holds an infinite value; fix it or leave the cell empty")
        if np.isnan(vals).all():
            raise CSVInputError(f"column {c!r} is empty; drop the node or give it data")
        # refuses values whose standard deviation overflows (standardised, every value would be 0)
        if column_moments(vals, f"column {c!r} of {source}", error=CSVInputError)[1] == 0:
            raise CSVInputError(f"column {c!r} is constant ({np.nanmax(vals):g} in every row): it carries no "
                                "information and cannot be standardised; drop it from the file and the graph")
    roots = [v for v in nodes if g.in_degree(v) == 0]
    if inputs is None:
        inputs = roots
    inputs = list(inputs)
    for r in inputs:
        if r in lat:
            raise CSVInputError(f"--inputs names {r!r}, which is a latent input (it has no data); drop it from "
                                "--inputs")
        if r not in g:
            raise CSVInputError(f"--inputs names {r!r}, which is not a node of the graph")
        if g.in_degree(r) > 0:
            raise CSVInputError(f"--inputs names {r!r}, which has parents {sorted(g.predecessors(r))}; inputs are "
                                "the roots of the graph (observed design matrices): drop it from --inputs")
    for r in roots:
        if r not in inputs:
            raise CSVInputError(f"root {r!r} of the graph is not in --inputs; every observed root is an input "
                                f"(add it to --inputs, or give it a parent in the graph)")
    for r in inputs:
        bad = np.flatnonzero(np.isnan(frame[r].to_numpy()))
        if len(bad):
            raise CSVInputError(f"input column {r!r} has missing values (row(s) {[int(i) + 2 for i in bad[:5]]} of "
                                f"{source}, counting the header as line 1); inputs must be observed for every case: "
                                "drop those rows or fill them in")
    observed = [v for v in nodes if v not in inputs]
    if not observed:
        raise CSVInputError("the graph has no observed non-root node to fit; add an edge from an input to a column")
    n = len(frame)
    perm = np.random.default_rng(seed).permutation(n)
    test_rows = np.zeros(n, dtype=bool)
    if fold is None:
        n_test = int(round(test_fraction * n))
        if n_test < 1 or n - n_test < 2:
            raise CSVInputError(f"{n} rows with --test-fraction {test_fraction} leave {n - n_test} training and "
                                f"{n_test} test rows; need at least 2 and 1")
        test_rows[perm[:n_test]] = True
    else:
        k, num_folds = (int(v) for v in fold)
        if num_folds < 2 or not 0 <= k < num_folds:
            raise CSVInputError(f"--folds: fold {k} of {num_folds}; need at least 2 folds and 0 <= fold < folds")
        if n // num_folds < 1 or n - (n + num_folds - 1) // num_folds < 2:
            raise CSVInputError(f"--folds {num_folds}: {n} rows cannot be cut into {num_folds} folds with at least 1 "
                                "test and 2 training rows each; use fewer folds")
        test_rows[np.array_split(perm, num_folds)[k]] = True
    for h, kids in children.items():
        for c in kids:
            if np.isnan(frame[c].to_numpy()[test_rows]).all():
                raise CSVInputError(f"latent input {h!r}: its child {c!r} is missing in every test row, so the latent "
                                    "value of the test cases cannot be inferred")
    p = CSVProblem()
    p.graph, p.latent, p.latent_children, p.inputs, p.nodes = g, lat, children, inputs, observed
    p.frame, p.test_rows, p.source, p.seed, p.fold = frame, test_rows, source, seed, fold
    train = frame[~test_rows]
    moments = {c: column_moments(train[c], f"column {c!r} (training rows)", error=CSVInputError, ddof=1)
               for c in nodes}
    p.mean = {c: m for c, (m, _) in moments.items()}
    p.std = {c: s for c, (_, s) in moments.items()}
    for c in nodes:
        if not p.std[c] > 0:
            raise CSVInputError(f"column {c!r} is constant on the training rows; drop it or use more data")
    return p
