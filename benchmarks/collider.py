"""Latent collider (Perlino et al. 2026, arXiv:2607.09645, App. G.3, Table 1, Fig. 14): DAG-VI vs DAG-SVI,
dense and sparse backends.

Protocol: the paper's. True kernels, noise 0.015² and inducing inputs fixed (15 / 15 / 49 inducing points;
the child's spread over the parents' prior range), 3000 full-batch Adam steps with lr 0.01, 4 ancestral
samples, float64, one thread, seeds 0-2 (the data set is the same, seed 0). Configurations:

* ``mean_field``: DAG-VI, 3000 steps;
* ``chordal-{dense,sparse}-cold``: DAG-SVI from the initial guide, 3000 steps;
* ``chordal-{dense,sparse}-warm``: the paper's recipe, 1000 mean-field steps, then the structured guide
  initialised from them (means copied, latent parents reset to the prior scale) for 2000 steps.

Metrics (pyro_dag.experiments.collider): child RMSE and sample CRPS of ``F_w3`` against the noise-free
surface on the 119 observed cases ("train") and the 46 held-out cases ("test"), mean |corr(w1, w2)| and
the parents' posterior variance, from 500 posterior samples.

    python benchmarks/collider.py [--seeds 0 1 2] [--configs ...]
"""
import argparse
import json
import os
import statistics

from common import RESULTS, one_thread, write_json, write_readme_section

from pyro_dag.experiments.collider import fit_collider

CONFIGS = {
    "mean_field": dict(structure="mean_field", backend="dense", warm_start=0),
    "chordal-dense-cold": dict(structure="chordal", backend="dense", warm_start=0),
    "chordal-dense-warm": dict(structure="chordal", backend="dense", warm_start=1000),
    "chordal-sparse-warm": dict(structure="chordal", backend="sparse", warm_start=1000),
    "chordal-sparse-cold": dict(structure="chordal", backend="sparse", warm_start=0),
    # beyond the paper's protocol (same steps, lr and 4 samples): antithetic sample pairs in DAGELBO ...
    "mean_field-antithetic": dict(structure="mean_field", backend="dense", warm_start=0, antithetic=True),
    "chordal-dense-cold-antithetic": dict(structure="chordal", backend="dense", warm_start=0, antithetic=True),
    # ... or a natural-gradient step (γ = 0.1) on the child's block after every Adam step
    "mean_field-sinkng": dict(structure="mean_field", backend="dense", warm_start=0, sink_step_size=0.1),
    "chordal-dense-cold-sinkng": dict(structure="chordal", backend="dense", warm_start=0, sink_step_size=0.1),
    # ... or natural-gradient steps (γ = 0.01) on the whole posterior after 1000 Adam steps (antithetic pairs)
    "mean_field-ng": dict(structure="mean_field", backend="dense", warm_start=0, antithetic=True,
                          natural_gradient=0.01, natural_gradient_after=1000),
    "chordal-dense-cold-ng": dict(structure="chordal", backend="dense", warm_start=0, antithetic=True,
                                  natural_gradient=0.01, natural_gradient_after=1000),
    "chordal-sparse-cold-ng": dict(structure="chordal", backend="sparse", warm_start=0, antithetic=True,
                                   natural_gradient=0.01, natural_gradient_after=1000),
}
KEYS = ["rmse_train", "rmse_test", "crps_train", "crps_test", "mean_abs_corr", "parent_var", "nlpd_test",
        "seconds_per_step_main", "final_elbo"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS))
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--summarize-only", action="store_true",
                        help="rebuild the JSON summary and README table from the stored runs")
    parser.add_argument("--sparse-seeds", type=int, nargs="+", default=None,
                        help="seeds for the (slow) sparse cold-start configuration (default: the first seed)")
    parser.add_argument("--name", default="collider",
                        help="results file name (run two processes with different names, then --merge)")
    parser.add_argument("--merge", nargs="+", default=[],
                        help="result files (names in benchmarks/results) whose runs replace or extend this one's")
    args = parser.parse_args()
    one_thread()
    # Merge with earlier runs of other configurations / seeds (re-running a (config, seed) replaces it).
    path = os.path.join(RESULTS, f"{args.name}.json")
    if args.summarize_only:
        args.configs = []
    todo = {(name, seed) for name in args.configs for seed in
            ((args.sparse_seeds or args.seeds[:1]) if name == "chordal-sparse-cold" else args.seeds)}
    runs = []
    if os.path.exists(path):
        runs = [r for r in json.load(open(path)).get("runs", []) if (r["config"], r["seed"]) not in todo]
    for other in args.merge:
        extra = json.load(open(os.path.join(RESULTS, f"{other}.json")))["runs"]
        keys = {(r["config"], r["seed"]) for r in extra}
        runs = [r for r in runs if (r["config"], r["seed"]) not in keys] + extra
    for name in args.configs:
        seeds = args.seeds
        if name == "chordal-sparse-cold":
            seeds = args.sparse_seeds or args.seeds[:1]
        for seed in seeds:
            cfg = CONFIGS[name]
            res = fit_collider(steps=args.steps, seed=seed, progress=False, **cfg)
            row = {"config": name, "seed": seed, **{k: res["metrics"][k] for k in KEYS}}
            runs.append(row)
            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
            write_json(args.name, {"settings": vars(args), "runs": runs})
    summary = {}
    configs = [c for c in CONFIGS if any(r["config"] == c for r in runs)]
    for name in configs:
        rows = sorted((r for r in runs if r["config"] == name), key=lambda r: r["seed"])
        summary[name] = {k: (statistics.mean(r[k] for r in rows),
                             statistics.stdev(r[k] for r in rows) if len(rows) > 1 else 0.0) for k in KEYS}
        summary[name]["n"] = len(rows)
    write_json(args.name, {"settings": vars(args), "runs": runs, "summary": summary})
    if args.name != "collider":
        return
    lines = ["## Latent collider: DAG-VI vs DAG-SVI (paper Table 1, Fig. 14)", "",
             "`python benchmarks/collider.py` (3000 Adam steps, lr 0.01, 4 samples, float64, one thread; mean ± sd "
             "over optimisation seeds; RMSE/CRPS of the child's latent values against the noise-free surface on "
             "the 119 observed and the 46 held-out cases; CRPS from 500 posterior samples; |corr| and variance "
             "of the parents averaged over the 165 cases). \"warm\" = 1000 mean-field steps, then 2000 "
             "structured steps from the warm start; \"cold\" = 3000 structured steps.", "",
             "| configuration | seeds | RMSE train | RMSE test | CRPS train | CRPS test | mean abs corr(w1,w2) | "
             "parent var | final ELBO | ms / step |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name in configs:
        s = summary[name]
        f = lambda k, p=4: f"{s[k][0]:.{p}f} ± {s[k][1]:.{p}f}"  # noqa: E731
        lines.append(f"| {name} | {s['n']} | {f('rmse_train')} | {f('rmse_test')} | {f('crps_train')} | "
                     f"{f('crps_test')} | {f('mean_abs_corr', 3)} | {f('parent_var')} | {f('final_elbo', 1)} | "
                     f"{s['seconds_per_step_main'][0] * 1e3:.1f} |")
    pairs = [("mean_field", "chordal-dense-cold"), ("mean_field-antithetic", "chordal-dense-cold-antithetic"),
             ("mean_field", "chordal-dense-cold-antithetic"), ("mean_field-sinkng", "chordal-dense-cold-sinkng"),
             ("mean_field-ng", "chordal-dense-cold-ng"), ("mean_field-ng", "chordal-sparse-cold-ng"),
             ("mean_field", "chordal-dense-cold-ng")]
    paired = []
    for vi, svi in pairs:
        by_seed = {c: {r["seed"]: r for r in runs if r["config"] == c} for c in (vi, svi)}
        seeds = sorted(set(by_seed[vi]) & set(by_seed[svi]))
        if len(seeds) < 2:
            continue
        cells = []
        for k in ("rmse_train", "rmse_test"):
            d = [by_seed[svi][sd][k] - by_seed[vi][sd][k] for sd in seeds]
            wins = sum(x <= 0 for x in d)
            cells.append(f"{statistics.mean(d):+.4f} ± {statistics.stdev(d) / len(d) ** 0.5:.4f} ({wins}/{len(d)})")
        paired.append(f"| {svi} − {vi} | {len(seeds)} | {cells[0]} | {cells[1]} |")
    if paired:
        lines += ["", "Paired by optimisation seed, DAG-SVI minus DAG-VI child RMSE (mean ± standard error; in "
                      "brackets the seeds where DAG-SVI is at least as good):", "",
                  "| comparison | seeds | Δ RMSE train | Δ RMSE test |", "|---|---|---|---|"] + paired
    lines += ["", "Paper (Table 1 / Fig. 14): RMSE 0.114 (DAG-VI) vs 0.055 (DAG-SVI), CRPS 0.075 vs 0.060, "
                  "mean |corr| 0.02 vs 0.93, parent variance ~1e-4 vs ~0.16 (its grid range, split and CRPS "
                  "estimator are not stated).",
              "",
              "Rows beyond the paper's protocol (same 3000 Adam steps, lr 0.01, 4 samples): `-antithetic` = "
              "`DAGELBO(antithetic=True)`, the 4 samples as 2 antithetic pairs; `-sinkng` = a natural-gradient step "
              "(`SinkNaturalGradient`, γ = 0.1) on the child's block after every Adam step, the child's mean and "
              "diagonal block then left out of Adam. Like for like (same estimator for both families), DAG-SVI's "
              "child RMSE is lower on the held-out cases (9 of 10 seeds with antithetic pairs) and slightly higher "
              "on the observed cases, where DAG-VI reaches a higher ELBO in 3000 steps: the structured guide's "
              "gradients are noisier (the parents' posterior is broad along the explaining-away direction, so "
              "their draws move the child), and it is still climbing when the run stops. The sink steps did not "
              "pay here: one DAG-SVI seed (5) stalled on the initial plateau (final ELBO -22414), and DAG-VI's "
              "held-out RMSE got worse.",
              "",
              "`-ng` rows: 1000 Adam steps, then 2000 natural-gradient steps on the whole Gaussian posterior "
              "(`GaussianNaturalGradient`, γ = 0.01, the same DAGELBO with 4 samples as 2 antithetic pairs; "
              "`pyro-dag fit collider`'s default recipe). In the Fisher geometry the explaining-away direction, which "
              "Adam shrinks along with the tightly constrained sum of the parents, is as easy as the others: "
              "DAG-SVI reaches a far higher ELBO (192 vs 94 with Adam) and a parent variance of 0.154, "
              "next to the value the model implies: the likelihood is invariant to shifting w1 up and w2 down "
              "by a constant c, so the posterior variance of c is the prior's along that direction, "
              "1 / (1ᵀK₁⁻¹1 + 1ᵀK₂⁻¹1) = 0.147 on the two parents' case inputs (the paper reports about 0.16). "
              "Mean field gains a higher ELBO too (121), but with its parents collapsed its held-out RMSE gets "
              "worse. Switching after 500 Adam steps instead of 1000 worked on seeds 0-2 in one script and "
              "diverged once (seed 2, in the benchmark's random stream): from a poor guide the curvature "
              "estimate is too noisy.",
              "",
              "Timing: seeds 3-9 of the first two rows and all rows below the warm ones (the `-ng` rows included) "
              "ran two at a time on two pinned cores, one thread each (load about 2); the other runs shared the cores with more jobs "
              "(load 3-5), which inflates their ms / step. The sparse backend is slower "
              "on this problem by design: `H` is a single clique (a triangle), where the dense backend is the "
              "right choice and `backend=\"auto\"` picks it. Dense and sparse followed the same optimisation "
              "trajectory: seed 0 gives identical metrics with both."]
    write_readme_section("collider", "\n".join(lines))


if __name__ == "__main__":
    main()
