"""Test predictive log-likelihood of latent SEMs by 5-fold cross-validation (Silva & Gramacy 2010,
arXiv:1002.4802, Sec. 5, Table 1): GPSEM-LV (sparse, M = 50) vs the linear SEM, the quadratic SEM (linear and
squared terms and pairwise interactions of the parents) and a GPLVM.

Problems:

* ``housing``: the paper's Boston Housing model (:func:`pyro_dag.datasets.boston.boston_housing`: 374 rows,
  11 indicators, 4 latents, fully connected latent DAG);
* ``abalone``: a synthetic Abalone-like Size -> Weight problem (:func:`pyro_dag.datasets.latent_sem.abalone_like_sem`,
  3 + 4 indicators, weight ~ size³); the UCI Abalone file is not shipped.

Every SEM has Gaussian exogenous latents here (the paper uses mixtures; ``--exogenous mixture`` switches) and is
fitted by SVI (:func:`pyro_dag.sem.guides.sem_guide`, ``--steps`` full-batch ClippedAdam steps, lr 0.02 -> 0.002),
with 100 guide draws of the globals (30 of them, evenly spaced, score the test cases). Test log-likelihood per case: :func:`pyro_dag.sem.predictive_log_likelihood`
(test latents integrated out: Monte Carlo over 300 ancestral draws for each of 30 posterior draws, sink
latents in closed form), averaged over the test cases of a fold, in the units of the (log-transformed) indicators. GPLVM:
``pyro.contrib.gp.models.GPLVM`` with as many latent dimensions as the SEM has latents, 50 inducing points, ARD RBF,
3000 Adam steps; test latents integrated out by Monte Carlo over 2000 draws from its N(0, I) prior. Folds: a fixed
permutation (seed 0) split in 5; ``--folds`` runs a subset of them, the same for every method.

    python benchmarks/sem_predictive.py --problems housing abalone [--folds 0 1 2 3 4] [--steps 3000] [--keep]

``--keep`` merges with the existing JSON (results of other problems, folds and methods are kept; the table is
rebuilt from all of them and states the steps and folds of each problem), so problems can run one at a time.
"""
import json
import os
import argparse
import time

import numpy as np
import torch

from common import RESULTS, one_thread, write_json, write_readme_section
from sem_common import fit_gplvm, fit_svi, gplvm_log_likelihood

from pyro_dag.datasets.boston import boston_housing
from pyro_dag.datasets.latent_sem import abalone_like_sem
from pyro_dag.sem import LatentSEM, predictive_log_likelihood

import warnings

METHODS = ["gp", "linear", "quadratic", "gplvm"]


def problem(name, n_abalone):
    if name == "housing":
        return boston_housing()
    return abalone_like_sem(n=n_abalone, seed=0)


def run_fold(data, fold, args):
    n = len(data.data)
    perm = np.random.default_rng(0).permutation(n)
    test = np.sort(np.array_split(perm, 5)[fold])
    train = np.setdiff1d(np.arange(n), test)
    tr, te = data.data.iloc[train].reset_index(drop=True), data.data.iloc[test].reset_index(drop=True)
    out = {}
    for method in args.methods:
        t = time.perf_counter()
        if method == "gplvm":
            mean, sd = tr.mean(), tr.std(ddof=0)
            Ytr = torch.as_tensor(((tr - mean) / sd).to_numpy().copy())
            Yte = torch.as_tensor(((te - mean) / sd).to_numpy().copy())
            gplvm = fit_gplvm(Ytr, latent_dim=len(data.indicators), num_inducing=50, seed=fold)
            lp = gplvm_log_likelihood(gplvm, Yte, num_latent_samples=2000, seed=fold) - np.log(sd.to_numpy()).sum()
        else:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model = LatentSEM(data.graph, data.indicators, data.anchors, equations=method,
                                  exogenous=args.exogenous, num_inducing=50)
            samples, _ = fit_svi(model, tr, num_steps=args.steps, num_samples=100, seed=fold)
            lp = predictive_log_likelihood(model, samples, te, num_latent_samples=300, max_draws=30, seed=fold)
        out[method] = {"test_loglik": float(np.mean(lp)), "seconds": time.perf_counter() - t}
        if method != "gplvm":
            out[method]["lr"] = fit_svi.last_lr
        print(fold, method, out[method], flush=True)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--problems", nargs="+", default=["housing", "abalone"])
    p.add_argument("--folds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--n-abalone", type=int, default=500)
    p.add_argument("--exogenous", default="gaussian", choices=["gaussian", "mixture"])
    p.add_argument("--methods", nargs="+", default=METHODS)
    p.add_argument("--keep", action="store_true")
    p.add_argument("--render-only", action="store_true", help="rebuild the README table from the JSON")
    p.add_argument("--note", default="", help="a sentence printed under the table (e.g. the machine load)")
    args = p.parse_args()
    one_thread()
    torch.set_default_dtype(torch.float64)
    path = os.path.join(RESULTS, "sem_predictive.json")
    old = json.load(open(path)) if (args.keep or args.render_only) and os.path.exists(path) else {}
    results = {k: {int(f): v for f, v in r.items()} for k, r in old.get("results", {}).items()}
    protocol = old.get("protocol", {})
    for name in ([] if args.render_only else args.problems):
        data = problem(name, args.n_abalone)
        results.setdefault(name, {})
        protocol[name] = {"steps": args.steps, "exogenous": args.exogenous, "n_abalone": args.n_abalone,
                          "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        for f in args.folds:  # saved after every fold, so that a run cut short keeps the folds it finished
            results[name][f] = dict(results[name].get(f, {}), **run_fold(data, f, args))
            write_json("sem_predictive", {"args": vars(args), "protocol": protocol, "results": results})
    labels = {"gp": "GPSEM-LV", "linear": "linear SEM", "quadratic": "quadratic SEM", "gplvm": "GPLVM"}
    rows = ["| problem | folds | SVI steps | " + " | ".join(labels[m] for m in METHODS) + " |",
            "|---|---|---|" + "---|" * len(METHODS)]
    perfold = []
    for name, folds in results.items():
        cells = []
        for m in METHODS:
            v = [folds[f][m]["test_loglik"] for f in sorted(folds) if m in folds[f]]
            cells.append((f"{np.mean(v):.3f}" + (f" ± {np.std(v) / np.sqrt(len(v)):.3f}" if len(v) > 1 else ""))
                         if v else "–")
        steps = protocol.get(name, {}).get("steps", args.steps)
        rows.append(f"| {name} | {','.join(map(str, sorted(folds)))} | {steps} | " + " | ".join(cells) + " |")
        per = [f"fold {f}: " + ", ".join(f"{labels[m]} {folds[f][m]['test_loglik']:.2f}" for m in METHODS
                                         if m in folds[f]) for f in sorted(folds)]
        perfold.append(f"- {name}: " + "; ".join(per))
    text = f"""### Latent SEMs: test predictive log-likelihood (`benchmarks/sem_predictive.py`)

Silva & Gramacy (2010, arXiv:1002.4802, Sec. 5, Table 1) protocol, at a reduced size: average test
log-likelihood per case (higher is better; mean ± s.e. over the folds run) on the folds listed (of a fixed 5-fold
split, the same folds for every method). SEMs: SVI with `sem_guide` (joint Gaussian per case, point pseudo-inputs),
the listed number of full-batch steps, 100 guide draws,
{args.exogenous} exogenous latents, M = 50; test latents integrated out by Monte Carlo (300 ancestral draws for each
of 30 posterior draws, sink latents in closed form). GPLVM: one latent dimension per SEM latent, 50 inducing points, 3000
Adam steps, test latents by Monte Carlo over 2000 prior draws. housing: the paper's Boston model (374 rows,
11 indicators, 4 latents); abalone: the synthetic Abalone-like problem, n = {args.n_abalone}. An SVI run that
diverged (NaN) was restarted with half the learning rate (the rate used is in the JSON).

""" + "\n".join(rows) + "\n\nPer fold:\n\n" + "\n".join(perfold) + (f"\n\n{args.note}" if args.note else "")
    write_readme_section("sem-predictive", text)


if __name__ == "__main__":
    main()
