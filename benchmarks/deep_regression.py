"""Deep GP regression against the exact GP on random problems: does a deep model that nests the shallow one do at
least as well as the shallow one?

    python benchmarks/deep_regression.py --kind smooth --seeds 100-109 --methods exact_gp deep
    python benchmarks/deep_regression.py --table          # print the summary of results/deep_regression.json

Problems: :func:`pyro_dag.datasets.random_regression.random_regression` draws (``smooth``: GP draws in 1-6 D;
``nonstationary``: creases, steps, warped inputs, chirps, bumps in 1-3 D). Defaults were tuned on seeds 0-9 of each
kind; the reported table uses seeds 100-109 of each kind (10 smooth, 10 non-stationary), which were not looked at
while tuning.

Methods (every stochastic one on ``--streams`` optimisation streams, the random stream of the fit):

* ``exact_gp``: :class:`pyro_dag.baselines.ExactGP` with its defaults (ARD RBF, type-II ML, 3 L-BFGS starts), the
  tool a user already has; deterministic, one stream;
* ``chain_default``: the issue's chain ``x -> h -> y``, ``DAGDGP(graph).double()``, ``AutoStructuredGuide(model)``,
  ``train(..., num_steps=3000)``, 200 predictive samples (the documented default path before this change);
* ``deep``: :class:`pyro_dag.infer.DeepRegression` with its defaults (``method="linear"``: input-connected
  ``x -> h -> y`` with a linear hidden layer ``h = xA``, fitted exactly from the exact GP, nesting it, the deep fit
  kept only when its log marginal likelihood beats the exact GP's by more than Schwarz's penalty);
* ``deep_svi``: ``DeepRegression(method="svi")`` (the SVI deep fit, kept only when its ELBO is higher);
* ``lamp_default``: ``LatentMAP(DAGDGP(x -> w -> y).double()).fit(...)`` with every default (1-D ``w``; since
  ``init="exact"``, ``lengthscale="ard"`` started at the exact GP's fit);
* ``lamp_deep``: :class:`pyro_dag.infer.DeepRegression` ``(method="lamp")``: LaMP's chain with ``w`` as wide as
  ``x``, nested and chosen against the exact GP the same way (by the held-out validation score LaMP selects on).

Scores on 1000 uniform test points, in the problem's standardised units: RMSE of the predictive mean against the
noise-free function; PICP95 (share of new noisy observations inside the central 95 % interval), CRPS and NLPD of a
new observation under a Gaussian with the predictive mean and variance (latent variance + fitted noise; for the
sampled DAG-DGP predictive, its moments); CPU seconds of fit + predict (``time.process_time``, one thread).
"""
import argparse
import json
import math
import os
import sys
import time
import warnings

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import RESULTS, code_state, environment, library_used, one_thread  # noqa: E402

METHODS = ("exact_gp", "chain_default", "deep", "deep_svi", "lamp_default", "lamp_deep")
STOCHASTIC = {"chain_default", "deep", "deep_svi", "lamp_default", "lamp_deep"}
TUNING_SEEDS = list(range(10))
REPORT_SEEDS = list(range(100, 110))
N_TEST = 1000


def _scores(mean, var, noise, p):
    from pyro_dag.metrics.regression import crps_gaussian, nlpd_gaussian

    mean, var = torch.as_tensor(mean).double().reshape(-1), torch.as_tensor(var).double().reshape(-1)
    sd = (var.clamp_min(0) + float(noise)).clamp_min(1e-12).sqrt()
    y = p.y_test.double()
    z = (y - mean).abs() / sd
    return {"rmse": float((mean - p.f_test).pow(2).mean().sqrt()),
            "picp95": float((z <= 1.959964).double().mean()),
            "crps": float(torch.as_tensor(crps_gaussian(mean, sd, y)).double().mean()),
            "nlpd": float(torch.as_tensor(nlpd_gaussian(mean, sd, y)).double().mean())}


def fit_exact(p, stream):
    from pyro_dag.baselines import ExactGP

    gp = ExactGP(seed=stream).fit(p.X, p.y)
    mean, var = gp.predict(p.X_test)
    return mean, var, gp.noise_variance, {}


def fit_chain_default(p, stream, steps=3000):
    import networkx as nx
    import pyro

    from pyro_dag import DAGDGP
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    pyro.clear_param_store()
    pyro.set_rng_seed(stream)
    model = DAGDGP(nx.DiGraph([("x", "h"), ("h", "y")]), seed=stream).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, {"x": p.X}, {"y": p.y[:, None]}, num_steps=steps, progress=False)
    pred = model.predict(guide, {"x": p.X_test}, nodes=["y"], num_samples=200)["y"]
    return pred.mean[:, 0], pred.variance[:, 0], float(model.likelihoods["y"].variance.detach()), {}


def fit_deep(p, stream, **kw):
    import pyro

    from pyro_dag.infer import DeepRegression

    pyro.clear_param_store()
    reg = DeepRegression(seed=stream, **kw).fit(p.X, p.y)
    mean, var = reg.predict(p.X_test)
    info = {"choice": reg.choice, "elbo": reg.elbo, "elbo_se": reg.elbo_se, "validation": reg.validation,
            "evidence": reg.evidence}
    return mean, var, reg.noise_variance, info


def fit_lamp_default(p, stream):
    import networkx as nx

    from pyro_dag import DAGDGP
    from pyro_dag.infer.lamp import LatentMAP

    model = DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double()
    lamp = LatentMAP(model)
    lamp.fit({"x": p.X}, {"y": p.y[:, None]}, seed=stream)
    pred = lamp.predict({"x": p.X_test})["y"]
    noise = pred.y_variance[:, 0] - pred.variance[:, 0] if pred.y_variance is not None else torch.zeros(1)
    return pred.mean[:, 0], pred.variance[:, 0], float(noise.mean()), {}


def fit_lamp_deep(p, stream):
    return fit_deep(p, stream, method="lamp")


def fit_deep_svi(p, stream):
    return fit_deep(p, stream, method="svi")


FITS = {"exact_gp": fit_exact, "chain_default": fit_chain_default, "deep": fit_deep, "deep_svi": fit_deep_svi,
        "lamp_default": fit_lamp_default, "lamp_deep": fit_lamp_deep}


def run_row(kind, seed, method, stream):
    from pyro_dag.datasets.random_regression import random_regression

    p = random_regression(seed, kind=kind, n_test=N_TEST)
    row = {"kind": kind, "seed": seed, "method": method, "stream": stream, "d": p.d, "n": int(p.X.shape[0]),
           "family": p.family, "noise_sd": p.noise_sd, "description": p.description}
    c0 = time.process_time()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            mean, var, noise, info = FITS[method](p, stream)
        row.update(_scores(mean, var, noise, p), info=info, noise_variance=float(noise))
        row["warnings"] = sorted({f"{type(w.message).__name__}: {str(w.message)[:120]}" for w in caught
                                  if not issubclass(w.category, (FutureWarning, DeprecationWarning))})
    except Exception as e:  # a failed fit is reported, not hidden
        row["error"] = f"{type(e).__name__}: {e}"[:400]
    row["cpu_seconds"] = time.process_time() - c0
    return row


# ------------------------------------------------------------------------------------------------ summary
def ratios(rows, method, kind):
    """``{seed: RMSE ratio to the exact GP}`` (median over the method's streams)."""
    gp = {r["seed"]: r["rmse"] for r in rows if r["method"] == "exact_gp" and r["kind"] == kind and "rmse" in r}
    out = {}
    for s in sorted(gp):
        vals = [r["rmse"] for r in rows if r["method"] == method and r["kind"] == kind and r["seed"] == s
                and "rmse" in r]
        if vals:
            out[s] = float(np.median(vals)) / gp[s]
    return out


TARGETS = {("deep", "smooth"): (1.2, 1.5), ("deep", "nonstationary"): (0.8, None),
           ("lamp_default", "smooth"): (1.5, None), ("lamp_deep", "smooth"): (1.5, None),
           ("chain_default", "smooth"): (1.2, 1.5), ("chain_default", "nonstationary"): (0.8, None)}


def summary(rows, seeds=None):
    """Per kind and method: draws, RMSE ratio to the exact GP (median / worst over draws; per draw the median over
    streams), share of draws meeting the target ratio, mean PICP95, CRPS, NLPD and CPU s, share of 'deep' choices."""
    if seeds is not None:
        rows = [r for r in rows if r["seed"] in seeds]
    out = []
    for kind in ("smooth", "nonstationary"):
        for m in METHODS:
            sel = [r for r in rows if r["kind"] == kind and r["method"] == m]
            if not sel:
                continue
            ok = [r for r in sel if "rmse" in r]
            rat = ratios(rows, m, kind)
            target = TARGETS.get((m, kind))
            entry = {"kind": kind, "method": m, "draws": len({r["seed"] for r in sel}),
                     "runs": len(sel), "errors": len(sel) - len(ok),
                     "streams": len({r["stream"] for r in sel}),
                     "rmse_median": float(np.median([r["rmse"] for r in ok])) if ok else None,
                     "ratio_median": float(np.median(list(rat.values()))) if rat else None,
                     "ratio_worst": float(max(rat.values())) if rat else None,
                     "picp95": float(np.mean([r["picp95"] for r in ok])) if ok else None,
                     "picp95_in_band": float(np.mean([0.88 <= r["picp95"] <= 0.99 for r in ok])) if ok else None,
                     "crps": float(np.mean([r["crps"] for r in ok])) if ok else None,
                     "nlpd": float(np.median([r["nlpd"] for r in ok])) if ok else None,
                     "cpu_seconds": float(np.mean([r["cpu_seconds"] for r in sel]))}
            if target and rat:
                entry["target"] = {"per_draw": target[0], "median": target[0], "worst": target[1]}
                entry["share_meeting"] = float(np.mean([v <= target[0] for v in rat.values()]))
                entry["median_met"] = entry["ratio_median"] <= target[0]
                entry["worst_met"] = None if target[1] is None else entry["ratio_worst"] <= target[1]
            choices = [r.get("info", {}).get("choice") for r in ok if r.get("info", {}).get("choice")]
            if choices:
                entry["deep_chosen"] = float(np.mean([c == "deep" for c in choices]))
            out.append(entry)
    return out


def table(results, seeds=None):
    lines = ["| kind | method | draws x streams | RMSE / exact GP: median | worst | share meeting target | "
             "PICP95 | NLPD (median) | CRPS | CPU s | deep kept |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for e in summary(results["rows"], seeds):
        tgt = e.get("target")
        share = f"{e['share_meeting']:.0%} (<= {tgt['per_draw']})" if tgt else ""
        f = lambda v, d=3: "–" if v is None else f"{v:.{d}g}"  # noqa: E731
        lines.append(f"| {e['kind']} | {e['method']} | {e['draws']} x {e['streams']} | {f(e['ratio_median'])} | "
                     f"{f(e['ratio_worst'])} | {share} | {f(e['picp95'], 2)} | {f(e['nlpd'])} | {f(e['crps'])} | "
                     f"{f(e['cpu_seconds'])} | {'' if 'deep_chosen' not in e else format(e['deep_chosen'], '.0%')} |")
    return "\n".join(lines)


def _seeds(text):
    out = []
    for part in text:
        if "-" in part:
            a, b = part.split("-")
            out += list(range(int(a), int(b) + 1))
        else:
            out.append(int(part))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", nargs="+", default=["smooth", "nonstationary"])
    ap.add_argument("--seeds", nargs="+", default=["100-109"])
    ap.add_argument("--methods", nargs="+", default=list(METHODS))
    ap.add_argument("--streams", type=int, default=5)
    ap.add_argument("--out", default=os.path.join(RESULTS, "deep_regression.json"))
    ap.add_argument("--table", action="store_true", help="print the summary of --out, run nothing")
    ap.add_argument("--merge", nargs="+", default=None,
                    help="merge these results files (chunks run side by side) into --out, run nothing")
    args = ap.parse_args(argv)
    if args.merge:
        parts = [json.load(open(path)) for path in args.merge]
        rows, seen = [], set()
        for r in (r for p in parts for r in p["rows"]):   # a deterministic row run in two chunks is kept once
            key = (r["kind"], r["seed"], r["method"], r["stream"])
            if key not in seen:
                seen.add(key)
                rows.append(r)
        res = {"schema": "deep_regression/1", "rows": rows,
               "runs": [run for p in parts for run in p["runs"]], "tuning_seeds": TUNING_SEEDS,
               "report_seeds": REPORT_SEEDS, "merged_from": [os.path.basename(path) for path in args.merge]}
        res["summary"] = summary(res["rows"], REPORT_SEEDS)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1, default=float)
        print(table(res, REPORT_SEEDS))
        return res
    if args.table:
        res = json.load(open(args.out))
        print(table(res, res.get("report_seeds")))
        return res
    one_thread()
    res = {"schema": "deep_regression/1", "rows": [], "runs": []}
    if os.path.exists(args.out):
        res = json.load(open(args.out))
    seeds = _seeds(args.seeds)
    res["runs"].append({"command": "python benchmarks/deep_regression.py " + " ".join(sys.argv[1:] if argv is None
                                                                                       else argv),
                        "code": code_state(), "environment": environment(), "load": os.getloadavg(),
                        "bench_lock": os.environ.get("PYRO_DAG_BENCH_LOCK", "not recorded (set PYRO_DAG_BENCH_LOCK to say)")})
    done = {(r["kind"], r["seed"], r["method"], r["stream"]) for r in res["rows"] if "error" not in r}
    res["rows"] = [r for r in res["rows"] if "error" not in r]
    # streams outermost: a chunk stopped early has every draw on its first streams
    jobs = [(stream, kind, seed, m) for stream in range(args.streams) for kind in args.kind for seed in seeds
            for m in args.methods if stream == 0 or m in STOCHASTIC]
    for stream, kind, seed, m in jobs:
        if (kind, seed, m, stream) in done:
            continue
        row = run_row(kind, seed, m, stream)
        res["rows"].append(row)
        print(f"{kind} {seed} {m} s{stream}: " + (row.get("error") or
              f"rmse {row['rmse']:.4g} picp {row['picp95']:.2f} nlpd {row['nlpd']:.3g} "
              f"{row.get('info', {}).get('choice', '')} ({row['cpu_seconds']:.1f} s)"), flush=True)
        res["tuning_seeds"], res["report_seeds"] = TUNING_SEEDS, REPORT_SEEDS
        res["summary"] = summary(res["rows"], REPORT_SEEDS)
        res["runs"][-1]["code"]["used"] = library_used()   # this run's rows so far ran only these modules
        tmp = args.out + ".tmp"
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(tmp, "w") as f:
            json.dump(res, f, indent=1, default=float)
        os.replace(tmp, args.out)
    print(table(res, REPORT_SEEDS))
    return res


if __name__ == "__main__":
    main()
