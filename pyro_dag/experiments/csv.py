"""Fit a DAG-DGP to a CSV file a user brings: ``pyro-dag fit --csv data.csv --graph graph.txt``.

The workflow (:func:`fit_csv`):

1. **Read** the CSV (pandas) and the graph (:func:`pyro_dag.graph.io.read_graph`: an edge list ``a -> b`` per line,
   a bnlearn model string, GML or GraphML). Columns are matched to the graph's nodes by name. Every node must be a
   column, except latent inputs; a column that is not a node, a node without a column, a non-numeric or constant
   column, and a missing value in an input column are refused with the fix (:class:`CSVInputError`).
2. **Latent inputs** (hidden confounders; Perlino et al. 2026, arXiv:2607.09645, Sec. 6, after Salimbeni et al.
   2019): ``latent=["h:2:PKA,Raf"]`` adds a root ``h`` with per-case values ``h_i ~ N(0, I_2)`` and the edges
   ``h -> PKA``, ``h -> Raf``. The children of a latent input are used, at test time, to infer its value for each
   test case (they must therefore be observed for the test cases), exactly as in the paper's Sachs study.
3. **Split** the rows at random (``test_fraction``, ``seed``) and standardise every column with the training
   rows' mean and standard deviation; the observed roots (``inputs``, default: every root that is a column) are
   the design matrices, every other column an observed node (NaN = missing).
4. **Fit** ``DAGDGP`` (an ARD RBF kernel on each node's concatenated parents, ``num_inducing`` inducing points, a
   Gaussian likelihood) with an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (chordal: DAG-SVI, or
   mean field: DAG-VI) by :func:`pyro_dag.infer.train` (the recommended recipe, node-wise pretraining).
5. **Predict** the held-out rows by propagation from their inputs through the DAG (the latent inputs inferred from
   their children's observed values) and score each observed node: RMSE, CRPS, NLPD and PICP (95 %) in
   standardised units, and RMSE in the data's units.

:func:`save_csv_outputs` writes ``metrics.json``, ``predictions.csv`` (every row: split, observed value, predictive
mean and standard deviation per node, in the data's units) and ``figure.png`` (the DAG coloured by each node's
held-out RMSE, and observed-vs-predicted panels).
"""
import json
import os
import re
import time

import networkx as nx
import numpy as np
import pyro
import torch

from ..metrics.regression import node_metrics
from ..plot import save_held_out_figure
from ..utils import renamed_argument

__all__ = ["CSVInputError", "parse_latent", "load_csv_problem", "fit_csv", "save_csv_outputs", "CSVProblem"]


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


def load_csv_problem(csv, graph, inputs=None, latent=(), test_fraction=0.2, seed=0):
    """Read and check a CSV file and a graph, add the latent inputs, split the rows.

    :param csv: a path or a pandas DataFrame. :param graph: a path (:func:`~pyro_dag.graph.io.read_graph`) or a
        ``networkx.DiGraph``.
    :param list inputs: the observed roots (default every root of the graph that is a column).
    :param latent: ``["h:2:PKA,Raf", ...]`` or ``[("h", 2, ["PKA", "Raf"]), ...]``.
    :param float test_fraction: share of rows held out, in ``(0, 1)``. :param int seed: the split's seed.
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
    else:
        frame = pd.DataFrame(csv).copy()
    frame.columns = [str(c).strip() for c in frame.columns]
    dup = frame.columns[frame.columns.duplicated()].tolist()
    if dup:
        raise CSVInputError(f"{source}: column {dup[0]!r} appears twice; give each column a unique name")
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
        if np.nanstd(vals) == 0:
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
    n_test = int(round(test_fraction * n))
    if n_test < 1 or n - n_test < 2:
        raise CSVInputError(f"{n} rows with --test-fraction {test_fraction} leave {n - n_test} training and {n_test} "
                            "test rows; need at least 2 and 1")
    perm = np.random.default_rng(seed).permutation(n)
    test_rows = np.zeros(n, dtype=bool)
    test_rows[perm[:n_test]] = True
    for h, kids in children.items():
        for c in kids:
            if np.isnan(frame[c].to_numpy()[test_rows]).all():
                raise CSVInputError(f"latent input {h!r}: its child {c!r} is missing in every test row, so the latent "
                                    "value of the test cases cannot be inferred")
    p = CSVProblem()
    p.graph, p.latent, p.latent_children, p.inputs, p.nodes = g, lat, children, inputs, observed
    p.frame, p.test_rows, p.source, p.seed = frame, test_rows, source, seed
    train = frame[~test_rows]
    p.mean = {c: float(train[c].mean()) for c in nodes}
    p.std = {c: float(train[c].std()) for c in nodes}
    for c in nodes:
        if not p.std[c] > 0:
            raise CSVInputError(f"column {c!r} is constant on the training rows; drop it or use more data")
    return p


def fit_csv(csv, graph, inputs=None, latent=(), test_fraction=0.2, seed=0, num_steps=2000, pretrain_steps=200,
            precision="chordal", num_inducing=32, lr=0.01, recipe="recommended", num_samples=200, latent_steps=300,
            progress=False, checkpoint=None, checkpoint_every=100, num_threads=1, distributed=False, structure=None):
    """Fit a DAG-DGP to a CSV file and a graph, and score it on held-out rows (module docstring).

    :param csv: path or DataFrame. :param graph: path or ``networkx.DiGraph``. :param list inputs: observed roots.
    :param latent: latent-input specs ``"h:2:PKA,Raf"``. :param float test_fraction: held-out share.
    :param int seed: split and optimisation seed. :param int num_steps: joint steps.
    :param int pretrain_steps: node-wise pretraining steps. :param str precision: ``"chordal"`` (DAG-SVI),
        ``"full"`` or ``"mean_field"`` (DAG-VI). :param int num_inducing: inducing points per node (at most the
        number of training rows). :param float lr: Adam's learning rate. :param str recipe: ``"recommended"`` or
        ``"adam"`` (:func:`pyro_dag.infer.train`). :param int num_samples: predictive draws.
    :param bool distributed: shard the training rows over the ``torch.distributed`` processes (launched by
        ``torchrun``) and train data-parallel (``train(..., distributed=True)``); every process then scores
        the same held-out rows.
    :returns: dict with ``"metrics"`` (per node and averaged), ``"problem"`` (:class:`CSVProblem`), ``"model"``,
        ``"guide"``, ``"prediction"`` (``{node: NodePrediction}`` on all rows) and ``"train"``.
    """
    precision = renamed_argument("fit_csv", "structure", "precision", structure, precision, "chordal")
    from .. import DAGDGP
    from ..infer import train
    from ..infer.autoguide import AutoStructuredGuide
    from ..infer.training import initial_scales
    from ..kernels import RBF

    p = load_csv_problem(csv, graph, inputs, latent, test_fraction, seed)
    tr, te = ~p.test_rows, p.test_rows
    X_tr, Y_tr = p.tensors(tr, p.inputs), p.tensors(tr, p.nodes)
    X_te, Y_te = p.tensors(te, p.inputs), p.tensors(te, p.nodes)
    gp_nodes = [v for v in p.graph if p.graph.in_degree(v) > 0]
    kernels = {w: RBF(lengthscale=torch.ones(p.graph.in_degree(w)), ard=True) for w in gp_nodes}
    m = min(int(num_inducing), int(tr.sum()))
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    model = DAGDGP(p.graph, kernels=kernels, num_inducing=m, seed=seed, latent_inputs=p.latent or None).double()
    model.setup(X_tr, Y_tr)
    guide = AutoStructuredGuide(model, precision=precision, init_scale=initial_scales(model, X_tr, Y_tr))
    t0 = time.perf_counter()
    if distributed:
        from ..infer.distributed import shard

        X_fit, Y_fit = shard(X_tr, Y_tr)
    else:
        X_fit, Y_fit = X_tr, Y_tr
    result = train(model, guide, X_fit, Y_fit, num_steps=num_steps, recipe=recipe, lr=lr,
                   pretrain_steps=pretrain_steps, progress=progress, checkpoint=checkpoint,
                   checkpoint_every=checkpoint_every, resume=checkpoint is not None, num_threads=num_threads,
                   name="pyro-dag fit --csv", distributed=distributed)
    seconds = time.perf_counter() - t0
    given = sorted({c for kids in p.latent_children.values() for c in kids})
    X_all, Y_all = p.tensors(np.ones(len(te), bool), p.inputs), p.tensors(np.ones(len(te), bool), p.nodes)
    pred = model.predict(guide, X_all, {c: Y_all[c] for c in given} if given else None, nodes=p.nodes,
                         num_samples=num_samples, latent_steps=latent_steps)
    idx = torch.as_tensor(np.flatnonzero(te))
    per_node = {}
    for w in p.nodes:
        y = Y_te[w][:, 0]
        ok = torch.isfinite(y)
        tau2 = model.likelihoods[w].variance.detach()
        met = node_metrics(pred[w].loc[:, idx, 0][:, ok], pred[w].var[:, idx, 0][:, ok], tau2, y[ok], seed=seed)
        met["rmse_data_units"] = met["rmse"] * p.std[w]
        met["n_test"] = int(ok.sum())
        met["used_to_infer_latent"] = w in given
        per_node[w] = met
    keys = ("rmse", "crps", "nlpd", "picp")
    unseen = [w for w in p.nodes if w not in given] or list(p.nodes)
    metrics = {
        "per_node": per_node,
        "average": {k: float(np.mean([per_node[w][k] for w in p.nodes])) for k in keys},
        "average_unseen": {k: float(np.mean([per_node[w][k] for w in unseen])) for k in keys},
        "unseen_nodes": unseen, "nodes": list(p.nodes), "inputs": list(p.inputs), "latent": p.latent,
        "latent_children": p.latent_children, "n_train": int(tr.sum()), "n_test": int(te.sum()),
        "structure": precision, "num_steps": num_steps, "pretrain_steps": pretrain_steps, "num_inducing": m,
        "seed": seed, "train_seconds": seconds, "final_loss": result.losses[-1],
        "units": "standardised with the training rows' mean and sd (rmse_data_units: the CSV's units)",
        "predictions": "propagated from the inputs through the DAG; latent inputs inferred from their children's "
                       "observed values",
    }
    return {"metrics": metrics, "problem": p, "model": model, "guide": guide, "prediction": pred, "train": result}


def _finite_json(x):
    if isinstance(x, dict):
        return {k: _finite_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite_json(v) for v in x]
    if isinstance(x, float) and not np.isfinite(x):
        return None
    return x


def save_csv_outputs(result, out_dir):
    """Write ``metrics.json``, ``predictions.csv`` and ``figure.png`` of :func:`fit_csv`'s result to ``out_dir``.

    :returns: ``(metrics path, predictions path, figure path)``.
    """
    import pandas as pd

    os.makedirs(out_dir, exist_ok=True)
    p, pred, metrics = result["problem"], result["prediction"], result["metrics"]
    mpath = os.path.join(out_dir, "metrics.json")
    with open(mpath, "w") as f:
        json.dump(_finite_json(metrics), f, indent=2)
    cols = {"row": np.arange(len(p.frame)), "split": np.where(p.test_rows, "test", "train")}
    for w in p.nodes:
        mean = pred[w].y_mean[:, 0].numpy() if pred[w].y_mean is not None else pred[w].mean[:, 0].numpy()
        var = pred[w].y_variance if pred[w].y_variance is not None else pred[w].variance
        cols[f"{w}"] = p.frame[w].to_numpy()
        cols[f"{w}_mean"] = mean * p.std[w] + p.mean[w]
        cols[f"{w}_sd"] = var[:, 0].sqrt().numpy() * p.std[w]
    ppath = os.path.join(out_dir, "predictions.csv")
    pd.DataFrame(cols).to_csv(ppath, index=False)
    te = torch.as_tensor(np.flatnonzero(p.test_rows))
    sub = {w: pred[w]._replace(**{k: (None if getattr(pred[w], k) is None else
                                      (getattr(pred[w], k)[:, te] if getattr(pred[w], k).dim() == 3
                                       else getattr(pred[w], k)[te]))
                                  for k in pred[w]._fields}) for w in p.nodes}
    targets = p.tensors(p.test_rows, p.nodes)
    fpath = save_held_out_figure(result["model"], sub, targets, os.path.join(out_dir, "figure.png"),
                        title=f"held-out RMSE per node (standardised units), {metrics['n_test']} test rows")
    return mpath, ppath, fpath
