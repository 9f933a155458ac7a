"""The baselines of every ``pyro-dag fit --csv`` report (:func:`csv_baselines`): an exact GP and linear regression
on the same rows and in the same units as the DAG-DGP, on the inputs that propagation uses and on the measured
parents that one-step prediction uses, and the training mean; and their comparison with the DAG-DGP."""
import networkx as nx
import numpy as np
import torch

from ..baselines import baseline_scores, compare_with_baselines

__all__ = ["BASELINE_TOLERANCE", "csv_baselines"]

#: A node's DAG-DGP RMSE above this factor times the best baseline's warns (:class:`~pyro_dag.baselines.BaselineWarning`).
BASELINE_TOLERANCE = 1.05


def csv_baselines(p, w, seed=0):
    """Baselines of node ``w`` of a :class:`CSVProblem` on its training / test rows, in the standardised units of
    the fit: an exact GP (:class:`~pyro_dag.baselines.ExactGP`, ARD RBF, type-II ML, a subset above 2000 rows) and
    linear regression (:class:`~pyro_dag.baselines.LinearRegression`) on (a) the node's ancestors among the inputs
    (what propagation uses: ``"exact_gp_on_inputs"``, ``"linear_on_inputs"``) and (b) its observed parents (what
    one-step prediction uses: ``"exact_gp_on_parents"``, ``"linear_on_parents"``), and the training mean
    (``"mean"``). Rows with a missing feature are dropped from a baseline's training and test rows.

    :returns: ``(scores, features)``: ``{baseline: {"rmse", "nlpd", "seconds", "n_test"}}`` (a feature set that
        is empty, e.g. only latent ancestors, has no entry) and ``{"inputs": [...], "parents": [...]}``.
    """
    tr, te = ~p.test_rows, p.test_rows
    ancestors = nx.ancestors(p.graph, w)
    features = {"inputs": [r for r in p.inputs if r in ancestors],
                "parents": [q for q in p.graph.predecessors(w) if q not in p.latent]}
    y_tr, y_te = p.tensors(tr, [w])[w], p.tensors(te, [w])[w]
    scores = {}
    done = {}
    for label, cols in features.items():
        if not cols:
            continue
        key = tuple(sorted(cols))
        if key not in done:
            X_tr = torch.cat([v for v in p.tensors(tr, cols).values()], -1)
            X_te = torch.cat([v for v in p.tensors(te, cols).values()], -1)
            res = baseline_scores(X_tr, y_tr, X_te, y_te, methods=("exact_gp", "linear"), seed=seed)
            n_test = int((torch.isfinite(y_te[:, 0]) & torch.isfinite(X_te).all(-1)).sum())
            done[key] = {m: dict(v, n_test=n_test) for m, v in res.items()}
        for m, v in done[key].items():
            scores[f"{m}_on_{label}"] = dict(v)
    zeros = torch.zeros(len(y_tr), 1, dtype=torch.float64)
    mean = baseline_scores(zeros, y_tr, torch.zeros(len(y_te), 1, dtype=torch.float64), y_te, methods=("mean",))
    scores["mean"] = dict(mean["mean"], n_test=int(torch.isfinite(y_te[:, 0]).sum()))
    return scores, features


def _baseline_summary(per_node, nodes, warn):
    """Top-level summary of the baselines, and :func:`~pyro_dag.baselines.compare_with_baselines` per node
    (written into ``per_node[w]["vs_baselines"]``; warns when ``warn``)."""
    summary = {}
    for w in nodes:
        base = {k: v for k, v in per_node[w]["baselines"].items() if np.isfinite(v["rmse"])}
        if not base:
            continue
        cmp = compare_with_baselines(f"node {w!r}", per_node[w]["rmse"], base, tolerance=BASELINE_TOLERANCE,
                                     warn=warn)
        per_node[w]["vs_baselines"] = cmp
        summary[w] = cmp
    names = sorted({k for w in nodes for k in per_node[w]["baselines"]})
    average = {"dag_dgp": float(np.mean([per_node[w]["rmse"] for w in nodes]))}
    for k in names:
        vals = [per_node[w]["baselines"][k]["rmse"] for w in nodes if k in per_node[w]["baselines"]]
        average[k] = float(np.mean(vals)) if len(vals) == len(nodes) else None
    return {"per_node": summary, "average_rmse": average, "tolerance": BASELINE_TOLERANCE,
            "nodes_worse_than_a_baseline": [w for w, c in summary.items() if not c["better_than_baselines"]],
            "units": "held-out RMSE and NLPD in the fit's standardised units, same training and test rows"}
