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
4. **Fit** ``DAGDGP`` (its defaults: an ARD RBF kernel on each node's concatenated parents, ``num_inducing="auto"``,
   a Gaussian likelihood with the noise rule) with an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`
   (chordal: DAG-SVI, or mean field: DAG-VI) by :func:`pyro_dag.infer.train` (the recommended recipe: a node whose
   parents are measured wherever it is, is fitted exactly; the rest by node-wise pretraining and SVI steps).
5. **Predict** the held-out rows, ``prediction="propagate"`` (default) by propagation from their inputs through
   the DAG (the latent inputs inferred from their children's observed values; the measured values of intermediate
   columns are then *not* used at test time), or ``prediction="one_step"``: each node from the measured values of
   its parents in the same row (:func:`pyro_dag.infer.predict_one_step`; rows with a missing or latent parent keep
   the propagated prediction), and score each observed node: RMSE, CRPS, NLPD and PICP (95 %) in standardised
   units, and RMSE in the data's units.
6. **Baselines** (:func:`csv_baselines`), on the same rows and in the same units: an exact GP and linear regression
   on the node's ancestors among the inputs (what propagation uses) and on its observed parents (what one-step
   prediction uses), and the training mean; a node whose held-out RMSE is more than 5 % above the best baseline's
   warns (:class:`~pyro_dag.baselines.BaselineWarning`), so a report never hides that a simpler model does better.
7. **Cross-validation** (``folds=K``, :func:`cross_validate_csv`): steps 3-6 on each of ``K`` folds of the rows,
   the metrics per fold and their mean and standard deviation per node and per baseline.

:func:`save_csv_outputs` writes ``metrics.json``, ``predictions.csv`` (every row: split, observed value, predictive
mean and standard deviation per node, in the data's units) and ``figure.png`` (the DAG coloured by each node's
held-out RMSE, and observed-vs-predicted panels).
"""
import os
import time

import numpy as np
import pyro
import torch

from ..metrics.regression import node_metrics
from .csv_baselines import _baseline_summary, csv_baselines
from .csv_data import CSVInputError, CSVProblem, load_csv_problem, parse_latent
from ..outputs import OutputSet
from ..plot import save_held_out_figure
from ..progress import quiet_setup, stage_progress
from ..utils import renamed_argument

__all__ = ["CSVInputError", "parse_latent", "load_csv_problem", "fit_csv", "cross_validate_csv", "csv_baselines",
           "save_csv_outputs", "CSVProblem", "PREDICTIONS", "intermediate_columns", "prediction_note"]


#: Prediction modes of :func:`fit_csv`: from the inputs through the DAG, or each node from its measured parents.
PREDICTIONS = ("propagate", "one_step")


_KEYS = ("rmse", "crps", "nlpd", "picp")


def _prediction_mode(prediction):
    mode = str(prediction).replace("-", "_")
    if mode not in PREDICTIONS:
        raise CSVInputError(f"prediction must be 'propagate' or 'one-step' (one_step), got {prediction!r}")
    return mode


def intermediate_columns(p):
    """The observed nodes of a :class:`CSVProblem` that are parents of another observed node: the columns that
    propagation does not use at test time and one-step prediction does."""
    return [v for v in p.nodes if any(c in p.nodes for c in p.graph.successors(v))]


def prediction_note(p, mode):
    """One sentence on what the held-out predictions of ``mode`` use (printed by ``pyro-dag fit --csv``)."""
    inter = intermediate_columns(p)
    if mode == "propagate":
        text = f"propagated from the inputs {p.inputs} through the DAG"
        if p.latent:
            text += " (latent inputs inferred from their children's observed values)"
        if inter:
            text += (f"; the measured intermediate columns {inter} are not used at test time (--predict one-step, "
                     "prediction='one_step', predicts each node from its measured parents)")
        return text
    text = "one step: each node from the measured values of its parents in the same row"
    if inter:
        text += f" (intermediate columns {inter} used as inputs of their children)"
    return text + ("; rows where a parent is missing or latent fall back to the propagated prediction")


def fit_csv(csv, graph, inputs=None, latent=(), test_fraction=0.2, seed=0, num_steps=2000, pretrain_steps=200,
            precision="chordal", num_inducing="auto", lr=0.01, recipe="recommended", num_samples=200, latent_steps=300,
            progress=False, checkpoint=None, checkpoint_every=100, num_threads=1, distributed=False, structure=None,
            prediction="propagate", baselines=True, folds=None, report=None):
    """Fit a DAG-DGP to a CSV file and a graph, and score it on held-out rows (module docstring).

    :param csv: path or DataFrame. :param graph: path or ``networkx.DiGraph``. :param list inputs: observed roots.
    :param latent: latent-input specs ``"h:2:PKA,Raf"``. :param float test_fraction: held-out share.
    :param int seed: split and optimisation seed. :param int num_steps: joint steps.
    :param int pretrain_steps: node-wise pretraining steps. :param str precision: ``"chordal"`` (DAG-SVI),
        ``"full"`` or ``"mean_field"`` (DAG-VI). :param num_inducing: inducing points per node (at most the
        number of training rows), or ``"auto"`` (the default: :class:`~pyro_dag.DAGDGP`'s). :param float lr: Adam's learning rate. :param str recipe: ``"recommended"`` or
        ``"adam"`` (:func:`pyro_dag.infer.train`). :param int num_samples: predictive draws.
    :param bool distributed: shard the training rows over the ``torch.distributed`` processes (launched by
        ``torchrun``) and train data-parallel (``train(..., distributed=True)``); every process then scores
        the same held-out rows.
    :param str prediction: ``"propagate"`` (default: from the inputs through the DAG, :meth:`DAGDGP.predict
        <pyro_dag.DAGDGP.predict>`) or ``"one_step"`` (``"one-step"``): each node from the measured values of
        its parents in the same row (:func:`pyro_dag.infer.predict_one_step`; rows where a parent is missing or
        latent keep the propagated prediction). In ``"one_step"`` mode each node's metrics also give
        ``rmse_propagate`` and ``one_step_fraction`` (the share of its test rows predicted one step).
    :param bool baselines: score the baselines of :func:`csv_baselines` on the same rows, record them under
        ``metrics["per_node"][w]["baselines"]`` with the comparison ``"vs_baselines"`` and a top-level
        ``metrics["baselines"]``, and warn (:class:`~pyro_dag.baselines.BaselineWarning`) for a node whose
        held-out RMSE is more than 5 % above the best baseline's.
    :param int folds: ``K`` for ``K``-fold cross-validation instead of one split (:func:`cross_validate_csv`;
        ``test_fraction`` is then ignored). :param report: with ``folds``, called with one line per fold as it
        ends (:func:`cross_validate_csv`).
    :returns: dict with ``"metrics"`` (per node and averaged), ``"problem"`` (:class:`CSVProblem`), ``"model"``,
        ``"guide"``, ``"prediction"`` (``{node: NodePrediction}`` on all rows) and ``"train"``; with ``folds``,
        :func:`cross_validate_csv`'s result.
    """
    precision = renamed_argument("fit_csv", "structure", "precision", structure, precision, "chordal")
    options = dict(num_steps=num_steps, pretrain_steps=pretrain_steps, precision=precision,
                   num_inducing=num_inducing, lr=lr, recipe=recipe, num_samples=num_samples,
                   latent_steps=latent_steps, progress=progress, checkpoint_every=checkpoint_every,
                   num_threads=num_threads)
    if folds is not None:
        if distributed:
            raise CSVInputError("--folds runs the K fits one after another in one process; drop --distributed")
        return cross_validate_csv(csv, graph, folds=folds, inputs=inputs, latent=latent, seed=seed,
                                  prediction=prediction, baselines=baselines, checkpoint=checkpoint, report=report,
                                  **options)
    mode = _prediction_mode(prediction)
    p = load_csv_problem(csv, graph, inputs, latent, test_fraction, seed)
    return _fit_problem(p, seed=seed, mode=mode, baselines=baselines, warn=True, checkpoint=checkpoint,
                        distributed=distributed, **options)


def _fit_problem(p, *, seed, mode, baselines, warn, num_steps, pretrain_steps, precision, num_inducing, lr, recipe,
                 num_samples, latent_steps, progress, checkpoint, checkpoint_every, num_threads, distributed):
    """Fit, predict and score one split of a :class:`CSVProblem` (:func:`fit_csv`)."""
    from .. import DAGDGP
    from ..infer import train
    from ..infer.autoguide import AutoStructuredGuide
    from ..infer.one_step import predict_one_step
    from ..infer.training import initial_scales

    tr, te = ~p.test_rows, p.test_rows
    X_tr, Y_tr = p.tensors(tr, p.inputs), p.tensors(tr, p.nodes)
    Y_te = p.tensors(te, p.nodes)
    # the library's defaults: ARD RBF kernels started at a pilot GP's fit, the noise rule, and num_inducing="auto"
    # (every training row up to 512 for a node whose inputs are measured, which train fits exactly; 64 otherwise)
    m = num_inducing if num_inducing == "auto" else min(int(num_inducing), int(tr.sum()))
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    model = DAGDGP(p.graph, num_inducing=m, seed=seed, latent_inputs=p.latent or None).double()
    with quiet_setup(not progress):
        model.setup(X_tr, Y_tr)
    m = dict(model.num_inducing)
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
    with quiet_setup(not progress):   # the prediction's bar (minutes on 10⁵ rows)
        propagated = model.predict(guide, X_all, {c: Y_all[c] for c in given} if given else None, nodes=p.nodes,
                                   num_samples=num_samples, latent_steps=latent_steps)
    pred = propagated
    if mode == "one_step":
        pred = predict_one_step(model, guide, X_all, Y_all, nodes=p.nodes, propagated=propagated)
    # one exact GP fit per node and feature set (a minute each above 2000 rows): a bar from the first one on
    with quiet_setup(not progress):
        bar = stage_progress(len(p.nodes), "baselines", delay=0, unit="node") if baselines else None
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
        if mode == "one_step":
            prop_mean = propagated[w].loc[:, idx, 0][:, ok].mean(0)
            met["rmse_propagate"] = float((prop_mean - y[ok]).pow(2).mean().sqrt())
            met["one_step_fraction"] = float(pred.one_step[w][idx][ok].double().mean()) if bool(ok.any()) else 0.0
        if baselines:
            bar.set_description(f"baselines of node {w!r} (exact GP, linear)")
            met["baselines"], met["baseline_features"] = csv_baselines(p, w, seed=seed)
            bar.update(1)
        per_node[w] = met
    if baselines:
        bar.close()
    unseen = [w for w in p.nodes if w not in given] or list(p.nodes)
    metrics = {
        "per_node": per_node,
        "average": {k: float(np.mean([per_node[w][k] for w in p.nodes])) for k in _KEYS},
        "average_unseen": {k: float(np.mean([per_node[w][k] for w in unseen])) for k in _KEYS},
        "unseen_nodes": unseen, "nodes": list(p.nodes), "inputs": list(p.inputs), "latent": p.latent,
        "latent_children": p.latent_children, "n_train": int(tr.sum()), "n_test": int(te.sum()),
        "structure": precision, "num_steps": num_steps, "pretrain_steps": pretrain_steps, "num_inducing": m,
        "seed": seed, "train_seconds": seconds, "final_loss": result.final_loss,
        "units": "standardised with the training rows' mean and sd (rmse_data_units: the CSV's units)",
        "prediction": mode,
        "predictions": prediction_note(p, mode),
        "intermediate_columns": intermediate_columns(p),
    }
    if baselines:
        metrics["baselines"] = _baseline_summary(per_node, p.nodes, warn)
    return {"metrics": metrics, "problem": p, "model": model, "guide": guide, "prediction": pred, "train": result}


def _mean_sd(values):
    vals = [v for v in values if v is not None and np.isfinite(v)]
    if not vals:
        return {"mean": None, "sd": None}
    return {"mean": float(np.mean(vals)), "sd": float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0}


def cross_validate_csv(csv, graph, folds=5, inputs=None, latent=(), seed=0, prediction="propagate", baselines=True,
                       checkpoint=None, report=None, **fit_options):
    """``K``-fold cross-validation of :func:`fit_csv` over the rows: the rows are permuted with ``seed`` and cut
    into ``folds`` parts (:func:`load_csv_problem`'s ``fold``); each part is held out once and the other rows fit
    exactly as :func:`fit_csv` fits one split (standardised with that fold's training rows, the baselines on the
    same rows).

    :param int folds: ``K >= 2``. :param checkpoint: a directory: fold ``k`` checkpoints to ``fold{k}.pt`` in it.
    :param report: called with one line per fold as it ends (its held-out RMSE and CPU seconds), e.g. ``print``;
        ``pyro-dag fit --csv --folds K`` prints them.
    :param fit_options: the other options of :func:`fit_csv` (``num_steps``, ``precision``, ``num_inducing``, ...).
    :returns: ``{"metrics", "fold_results", "problem", "prediction"}``: ``metrics`` has the per-node and average
        metrics as :func:`fit_csv` (each the mean over the folds) and a ``"folds"`` section with, per node and
        for each baseline, the mean and the sample standard deviation (``ddof=1``) over the folds and every
        fold's own metrics; ``fold_results`` the folds' :func:`fit_csv`-like results; ``problem`` the first
        fold's :class:`CSVProblem`; ``prediction`` ``{node: (mean [n], sd [n])}``, each row's held-out
        prediction in the CSV's units (from the fold that held it out).
    """
    import warnings

    from ..baselines import BaselineWarning

    try:
        K = int(folds)
    except (TypeError, ValueError):
        raise CSVInputError(f"--folds must be an integer >= 2, got {folds!r}") from None
    if K < 2 or K != folds:
        raise CSVInputError(f"--folds must be an integer >= 2, got {folds!r}")
    mode = _prediction_mode(prediction)
    fit_options.setdefault("precision", "chordal")
    defaults = dict(num_steps=2000, pretrain_steps=200, num_inducing="auto", lr=0.01, recipe="recommended",
                    num_samples=200, latent_steps=300, progress=False, checkpoint_every=100, num_threads=1)
    unknown = sorted(set(fit_options) - set(defaults) - {"precision"})
    if unknown:
        raise TypeError(f"cross_validate_csv: unknown option(s) {unknown}")
    options = {**defaults, **fit_options}
    results, oof = [], {}
    start = time.process_time()
    for k in range(K):
        p = load_csv_problem(csv, graph, inputs, latent, seed=seed, fold=(k, K))
        ckpt = None if checkpoint is None else os.path.join(os.fspath(checkpoint), f"fold{k}.pt")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", BaselineWarning)   # one comparison over the folds, below
            r = _fit_problem(p, seed=seed, mode=mode, baselines=baselines, warn=False, checkpoint=ckpt,
                             distributed=False, **options)
        r["metrics"]["fold"] = k
        r["metrics"]["fold_cpu_seconds"] = time.process_time() - start
        start = time.process_time()
        results.append(r)
        if report is not None:
            avg = r["metrics"]["average"]
            report(f"fold {k + 1}/{K}: {int(p.test_rows.sum())} held-out rows, RMSE {avg['rmse']:.3f}, CRPS "
                   f"{avg['crps']:.3f} (standardised), {r['metrics']['fold_cpu_seconds']:.1f} CPU s")
        rows = np.flatnonzero(p.test_rows)
        for w in p.nodes:
            pw = r["prediction"][w]
            mean = pw.y_mean if pw.y_mean is not None else pw.mean
            var = pw.y_variance if pw.y_variance is not None else pw.variance
            if w not in oof:
                oof[w] = (np.full(len(p.frame), np.nan), np.full(len(p.frame), np.nan))
            oof[w][0][rows] = mean[rows, 0].numpy() * p.std[w] + p.mean[w]
            oof[w][1][rows] = var[rows, 0].sqrt().numpy() * p.std[w]
    first = results[0]["problem"]
    fm = [r["metrics"] for r in results]
    nodes = list(first.nodes)
    node_keys = list(_KEYS) + ["rmse_data_units"] + (["rmse_propagate", "one_step_fraction"]
                                                     if mode == "one_step" else [])
    per_node, folds_node = {}, {}
    for w in nodes:
        per_node[w] = {k: _mean_sd([m["per_node"][w][k] for m in fm])["mean"] for k in node_keys}
        per_node[w]["n_test"] = int(sum(m["per_node"][w]["n_test"] for m in fm))
        per_node[w]["used_to_infer_latent"] = fm[0]["per_node"][w]["used_to_infer_latent"]
        folds_node[w] = {k: dict(_mean_sd([m["per_node"][w][k] for m in fm]),
                                 per_fold=[m["per_node"][w][k] for m in fm]) for k in node_keys}
        if baselines:
            names = sorted({b for m in fm for b in m["per_node"][w]["baselines"]})
            per_node[w]["baselines"], folds_node[w]["baselines"] = {}, {}
            for b in names:
                runs = [m["per_node"][w]["baselines"].get(b) for m in fm]
                runs = [x for x in runs if x is not None]
                per_node[w]["baselines"][b] = {s: _mean_sd([x[s] for x in runs])["mean"]
                                               for s in ("rmse", "nlpd", "seconds")}
                per_node[w]["baselines"][b]["n_test"] = int(sum(x["n_test"] for x in runs))
                folds_node[w]["baselines"][b] = {s: dict(_mean_sd([x[s] for x in runs]), per_fold=[x[s] for x in runs])
                                                 for s in ("rmse", "nlpd")}
            per_node[w]["baseline_features"] = fm[0]["per_node"][w]["baseline_features"]
    unseen = fm[0]["unseen_nodes"]
    metrics = {
        "per_node": per_node,
        "average": {k: float(np.mean([per_node[w][k] for w in nodes])) for k in _KEYS},
        "average_unseen": {k: float(np.mean([per_node[w][k] for w in unseen])) for k in _KEYS},
        "unseen_nodes": unseen, "nodes": nodes, "inputs": list(first.inputs), "latent": first.latent,
        "latent_children": first.latent_children, "n_rows": int(len(first.frame)),
        "n_train": [m["n_train"] for m in fm], "n_test": [m["n_test"] for m in fm],
        "structure": fit_options["precision"], "num_steps": options["num_steps"],
        "pretrain_steps": options["pretrain_steps"], "num_inducing": fm[0]["num_inducing"], "seed": seed,
        "train_seconds": float(sum(m["train_seconds"] for m in fm)),
        "units": "standardised with each fold's training rows' mean and sd (rmse_data_units: the CSV's units); "
                 "per_node and average: means over the folds",
        "prediction": mode, "predictions": prediction_note(first, mode),
        "intermediate_columns": intermediate_columns(first),
        "folds": {"k": K, "seed": seed,
                  "split": "rows permuted with the seed and cut into k nearly equal parts, each held out once",
                  "sd": "sample standard deviation over the folds (ddof 1)",
                  "per_node": folds_node,
                  "fold_cpu_seconds": [m["fold_cpu_seconds"] for m in fm],
                  "average": {k: _mean_sd([m["average"][k] for m in fm]) for k in _KEYS},
                  "per_fold": fm},
    }
    if baselines:
        metrics["baselines"] = _baseline_summary(per_node, nodes, warn=True)
        metrics["baselines"]["units"] += "; RMSEs are means over the folds"
    return {"metrics": metrics, "fold_results": results, "problem": first, "prediction": oof}


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

    For :func:`cross_validate_csv`'s result, ``predictions.csv`` has a ``fold`` column instead of ``split`` and each
    row's held-out prediction, and the figure shows these out-of-fold predictions (standardised with all rows).

    Each file is written atomically (:mod:`pyro_dag.outputs`): a full disk leaves no partial file.

    :returns: ``(metrics path, predictions path, figure path)``.
    :raises pyro_dag.outputs.OutputError: naming the file that could not be written and the ones that were.
    """
    import pandas as pd

    out = OutputSet(out_dir, ["metrics.json", "predictions.csv", "figure.png"])
    p, pred, metrics = result["problem"], result["prediction"], result["metrics"]
    mpath = out.json("metrics.json", _finite_json(metrics), indent=2)
    if "fold_results" in result:
        return (mpath,) + _save_cv_outputs(result, out)
    cols = {"row": np.arange(len(p.frame)), "split": np.where(p.test_rows, "test", "train")}
    for w in p.nodes:
        mean = pred[w].y_mean[:, 0].numpy() if pred[w].y_mean is not None else pred[w].mean[:, 0].numpy()
        var = pred[w].y_variance if pred[w].y_variance is not None else pred[w].variance
        cols[f"{w}"] = p.frame[w].to_numpy()
        cols[f"{w}_mean"] = mean * p.std[w] + p.mean[w]
        cols[f"{w}_sd"] = var[:, 0].sqrt().numpy() * p.std[w]
    ppath = out.write("predictions.csv", lambda tmp: pd.DataFrame(cols).to_csv(tmp, index=False))
    te = torch.as_tensor(np.flatnonzero(p.test_rows))
    sub = {w: pred[w]._replace(**{k: (None if getattr(pred[w], k) is None else
                                      (getattr(pred[w], k)[:, te] if getattr(pred[w], k).dim() == 3
                                       else getattr(pred[w], k)[te]))
                                  for k in pred[w]._fields}) for w in p.nodes}
    targets = p.tensors(p.test_rows, p.nodes)
    title = f"held-out RMSE per node (standardised units), {metrics['n_test']} test rows"
    fpath = out.call(["figure.png"], lambda: save_held_out_figure(result["model"], sub, targets,
                                                                  out.path("figure.png"), title=title))
    return mpath, ppath, fpath


def _save_cv_outputs(result, out):
    """``predictions.csv`` (out-of-fold) and ``figure.png`` of :func:`cross_validate_csv`'s result."""
    import pandas as pd

    from ..dgp import NodePrediction

    p, oof = result["problem"], result["prediction"]
    fold = np.full(len(p.frame), -1)
    for k, r in enumerate(result["fold_results"]):
        fold[r["problem"].test_rows] = k
    cols = {"row": np.arange(len(p.frame)), "fold": fold}
    for w in p.nodes:
        cols[f"{w}"] = p.frame[w].to_numpy()
        cols[f"{w}_mean"], cols[f"{w}_sd"] = oof[w]
    ppath = out.write("predictions.csv", lambda tmp: pd.DataFrame(cols).to_csv(tmp, index=False))
    sub, targets = {}, {}
    for w in p.nodes:
        y = p.frame[w].to_numpy()
        loc, sd = float(np.nanmean(y)), float(np.nanstd(y)) or 1.0
        mean = torch.as_tensor((oof[w][0] - loc) / sd).unsqueeze(-1)
        var = torch.as_tensor((oof[w][1] / sd) ** 2).unsqueeze(-1)
        sub[w] = NodePrediction(None, mean, var, None, None, mean, var)
        targets[w] = torch.as_tensor((y - loc) / sd).unsqueeze(-1)
    k = result["metrics"]["folds"]["k"]
    fpath = out.call(["figure.png"], lambda: save_held_out_figure(
        result["fold_results"][-1]["model"], sub, targets, out.path("figure.png"),
        title=f"{k}-fold out-of-fold RMSE per node (standardised with all rows)"))
    return ppath, fpath
