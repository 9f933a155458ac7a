"""Sachs protein-signalling regression (Perlino et al. 2026, arXiv:2607.09645, Sec. 6, App. G.4, Tables 1 and 3):
DAG-SVI, DAG-VI, an independent sparse GP per node (GP-SEM) and a linear-Gaussian SEM on the same splits.

Each (task, seed, method, recipe) run is written to ``results/sachs_regression/<task>_s<seed>_<method>_<recipe>
.json`` as it finishes (runs are independent processes, one thread each); ``--table`` gathers every run found
there into ``results/sachs_regression.json`` and the README section ``sachs-regression``.

    python benchmarks/sachs_regression.py --tasks extrapolation --seeds 0 --methods dag_svi dag_vi --recipe paper
    python benchmarks/sachs_regression.py --methods gp_sem linear_sem --seeds 0 1 2 3 4
    python benchmarks/sachs_regression.py --table
    python benchmarks/sachs_regression.py --diagnose     # the cheap extrapolation diagnosis alone (no fits)
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks.common import RESULTS, environment, one_thread, write_json, write_readme_section  # noqa: E402

RUNS = os.path.join(RESULTS, "sachs_regression")
LABELS = {"dag_svi": "DAG-SVI", "dag_vi": "DAG-VI", "gp_sem": "GP-SEM (one sparse GP per node)",
          "linear_sem": "linear-Gaussian SEM"}


def run_one(task, seed, method, recipe, num_steps=None, pretrain_steps=None, latent_steps=300):
    from pyro_dag.experiments.sachs import fit_sachs

    out = fit_sachs(task, seed, method, recipe=recipe, num_steps=num_steps, pretrain_steps=pretrain_steps,
                    latent_steps=latent_steps, progress=False)
    for k in ("model", "guide", "prediction", "split"):
        out.pop(k, None)
    out["environment"] = environment()
    out["guarded"] = True          # train's natural-gradient trust region (2 nats) and divergence guard were on
    os.makedirs(RUNS, exist_ok=True)
    tag = recipe if method in ("dag_svi", "dag_vi") else "baseline"
    path = os.path.join(RUNS, f"{task}_s{seed}_{method}_{tag}.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=2, default=str)
    print(path, json.dumps(out["all"] if "all" in out else out["propagated"]["all"]), f"{out['seconds']:.0f} s",
          flush=True)
    return out


def _same_protocol(path, args):
    """Whether the run saved at ``path`` used this sweep's steps and the guarded natural-gradient phase of
    ``train`` (runs before it lack ``"guarded"``)."""
    r = json.load(open(path))
    if r["method"] == "linear_sem":
        return True
    if not r.get("guarded"):
        return False
    return r["method"] == "gp_sem" or ((args.steps is None or r["num_steps"] == args.steps)
                                       and (args.pretrain_steps is None or r["pretrain_steps"] == args.pretrain_steps))


def _stopped(steps):
    """The steps at which train's guard stopped the natural-gradient phase, per seed ("no": it ran to the end, "–":
    the recipe has none)."""
    if all(s is None for s in steps):
        return "–"
    return ", ".join(str(s) for s in steps)


#: The paper's spread (standard deviation over its 5 projection splits, Perlino et al. 2026, Table 3); Table 1
#: (interpolation) gives means only.
PAPER_SD = {"extrapolation": {"dag_vi": {"rmse": 0.0655, "crps": 0.0232, "nlpd": 0.0985, "picp": 0.0139},
                              "dag_svi": {"rmse": 0.0307, "crps": 0.0065, "nlpd": 0.0496, "picp": 0.0115}}}


def _fmt(values, digits=3):
    """Mean ± standard error over seeds (the sample sd divided by sqrt(seeds)); one value as it is."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{np.mean(values):.{digits}f} ± {np.std(values, ddof=1) / np.sqrt(len(values)):.{digits}f}"


def _paper_cell(task, method, metric):
    """The paper's mean, with its sd over splits where it gives one (marked 'sd' to tell it from our s.e.)."""
    from pyro_dag.experiments.sachs import PAPER

    p = PAPER[task][method]
    if metric not in p:
        return "–"
    sd = PAPER_SD.get(task, {}).get(method, {}).get(metric)
    return f"{p[metric]:.3f}" + (f" (sd {sd:.3f})" if sd is not None else "")


def table():
    from pyro_dag.experiments.sachs import GP_NODES, PAPER, average_metrics, sachs_split, to_log_units

    runs = [json.load(open(p)) for p in sorted(glob.glob(os.path.join(RUNS, "*.json")))]  # one file per run
    rows = {}
    for r in runs:
        if r["method"] in ("dag_svi", "dag_vi"):
            variants = [(f"{LABELS[r['method']]}, {r['recipe']} recipe ({r['pretrain_steps']} + {r['num_steps']} "
                         "steps)", r)]
        else:
            steps = f", {r['num_steps']} steps per node" if r["method"] == "gp_sem" else ""
            variants = [(f"{LABELS[r['method']]}{steps}, propagated", r["propagated"]),
                        (f"{LABELS[r['method']]}{steps}, observed parents", r["observed_parents"])]
        std = sachs_split(r["task"], r["seed"]).std
        for label, res in variants:
            key = (r["task"], label)
            rows.setdefault(key, {"seeds": [], "all": [], "unseen": [], "log": [], "seconds": [], "ng_stopped": []})
            phase = bool((r.get("settings") or {}).get("natural_gradient"))
            rows[key]["ng_stopped"].append((r.get("natural_gradient_stopped") or "no") if phase else None)
            rows[key]["log"].append(average_metrics(to_log_units(res["per_node"], std), GP_NODES))
            rows[key]["seeds"].append(r["seed"])
            rows[key]["all"].append(res["all"])
            rows[key]["unseen"].append(res["unseen"])
            rows[key]["seconds"].append(r.get("cpu_seconds_train", r.get("cpu_seconds", r["seconds"])))
    lines = ["## Sachs protein-signalling regression (Perlino et al. 2026, Sec. 6, Tables 1 and 3)", "",
             "cd3cd28icam2 (902 cases), log-transformed, standardised with the training cases' statistics; bnlearn "
             "17-arc DAG, roots PKC and Plcg observed, latent `h1 -> PKA`, `h2 -> Raf` (DAG-SVI/VI only); 32 inducing "
             "points, ARD RBF (length-scales 0.1), noise variance 0.01. Test predictions propagate from the roots; "
             "the test cases' observed PKA and Raf only infer `h`. **all**: mean over the 9 GP nodes; **unseen**: "
             "over the 7 nodes other than PKA and Raf. Standardised log units, and log units (each node's RMSE and "
             "CRPS times its training sd, NLPD plus log sd; the paper does not say which it reports). Baselines have "
             "no latent; *propagated* pushes samples from the roots, *observed parents* predicts each node from its "
             "parents' observed test values (more information than the DAG-DGP uses). s/split: CPU seconds of the "
             "training (process time, one thread; wall-clock on the shared 2-core machine was several times longer). "
             "Our rows: mean ± standard error over the seeds (splits) listed, each seed one split shared by every "
             "method; the paper's rows: its mean over 5 splits, with its standard deviation (sd) where it gives one "
             "(Table 3; sd = s.e. × √5). *NG stopped at*: the joint step at which `train`'s divergence guard ended the natural-gradient phase "
             "and handed the rest to Adam (per seed; `no`: the phase ran to the end; `–`: no such phase). "
             "`pyro_dag.experiments.sachs` holds the protocol; `benchmarks/sachs_regression.py` the runs.", ""]
    payload = {"rows": []}
    for task in ("interpolation", "extrapolation"):
        keys = [k for k in rows if k[0] == task]
        if not keys:
            continue
        lines += [f"**{task}**", "",
                  "| method | seeds | RMSE all | CRPS all | NLPD all | PICP all | RMSE unseen | CRPS unseen | "
                  "RMSE all, log units | CRPS all, log units | NLPD all, log units | s/split | NG stopped at |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for key in sorted(keys, key=lambda k: k[1]):
            row = rows[key]
            a = {m: [x[m] for x in row["all"]] for m in ("rmse", "crps", "nlpd", "picp")}
            u = {m: [x[m] for x in row["unseen"]] for m in ("rmse", "crps")}
            lg = {m: [x[m] for x in row["log"]] for m in ("rmse", "crps", "nlpd")}
            lines.append(f"| {key[1]} | {','.join(map(str, row['seeds']))} | {_fmt(a['rmse'])} | {_fmt(a['crps'])} | "
                         f"{_fmt(a['nlpd'])} | {_fmt(a['picp'])} | {_fmt(u['rmse'])} | {_fmt(u['crps'])} | "
                         f"{_fmt(lg['rmse'])} | {_fmt(lg['crps'])} | {_fmt(lg['nlpd'])} | "
                         f"{np.mean(row['seconds']):.0f} | {_stopped(row['ng_stopped'])} |")
            payload["rows"].append({"task": task, "method": key[1], **row})
        for m in ("dag_vi", "dag_svi"):
            cells = [_paper_cell(task, m, k) for k in ("rmse", "crps", "nlpd", "picp")]
            lines.append(f"| paper: {LABELS[m]} | 5 | {' | '.join(cells)} | – | – | – | – | – | – | – |")
        lines.append("")
        for key in sorted(keys, key=lambda k: k[1]):
            if not key[1].startswith("DAG-SVI"):
                continue
            a = {m: float(np.mean([x[m] for x in rows[key]["all"]])) for m in ("rmse", "crps")}
            p = PAPER[task]["dag_svi"]
            lg = {m: float(np.mean([x[m] for x in rows[key]["log"]])) for m in ("rmse", "crps")}
            verdict = [f"{m.upper()} {a[m]:.3f} standardised / {lg[m]:.3f} log units vs the paper's {p[m]:.3f}: "
                       f"{'met' if a[m] <= p[m] else 'not met'} / {'met' if lg[m] <= p[m] else 'not met'}"
                       for m in ("rmse", "crps")]
            vi = [k for k in keys if k[1].startswith("DAG-VI") and k[1][6:] == key[1][7:]]
            if task == "extrapolation" and vi:
                v = float(np.mean([x["rmse"] for x in rows[vi[0]]["all"]]))
                verdict.append(f"DAG-SVI ≤ DAG-VI (RMSE {a['rmse']:.3f} vs {v:.3f}): "
                               f"{'met' if a['rmse'] <= v else 'not met'}")
            lines.append(f"Targets, {key[1]}: " + "; ".join(verdict) + ".")
            lines.append("")
            svi = dict(zip(rows[key]["seeds"], (x["rmse"] for x in rows[key]["all"])))
            per_seed = "RMSE all per seed: DAG-SVI " + ", ".join(f"{svi[s]:.3f} (s{s})" for s in sorted(svi))
            if vi:
                dvi = dict(zip(rows[vi[0]]["seeds"], (x["rmse"] for x in rows[vi[0]]["all"])))
                per_seed += "; DAG-VI " + ", ".join(f"{dvi[s]:.3f} (s{s})" for s in sorted(dvi))
                both = sorted(set(svi) & set(dvi))
                if len(both) > 1:      # paired over the shared splits: the split-to-split spread cancels
                    per_seed += f"; DAG-SVI − DAG-VI, paired over seeds {','.join(map(str, both))}: " + \
                        _fmt([svi[s] - dvi[s] for s in both])
            lines += [per_seed + ".", ""]
    lines += diagnose()
    note = os.path.join(RUNS, "NOTE.md")
    if os.path.exists(note):
        lines += ["**What ran.** " + open(note).read().strip(), ""]
    write_json("sachs_regression", payload)
    write_readme_section("sachs-regression", "\n".join(lines))
    print("\n".join(lines))


def _split_along(direction, seed=0):
    """The extrapolation split of ``pyro_dag.experiments.sachs.sachs_split`` for a given unit ``direction`` [2] of
    the standardised (PKC, Plcg) instead of a random one: train on the central 80 % of the projection, test on both
    10 % tails."""
    import torch

    from pyro_dag.datasets.sachs import SACHS_NODES, sachs
    from pyro_dag.experiments.sachs import ROOTS, SachsSplit

    values = sachs(subset="cd3cd28icam2", log=True, dtype=torch.float64).data
    n = values.shape[0]
    n_test = int(round(0.2 * n))
    x = values[:, [SACHS_NODES.index(r) for r in ROOTS]]
    x = (x - x.mean(0)) / x.std(0)
    order = torch.argsort(x @ direction)
    lower, upper = n_test // 2, n_test - n_test // 2
    test = torch.cat([order[:lower], order[n - upper:]]).sort().values
    train = order[lower:n - upper].sort().values
    return SachsSplit("extrapolation", seed, values, train, test, direction)


def _floor(split, k=15):
    """Per GP node: the test cases' sd and the RMSE of a k-nearest-neighbour regression on the node's *observed*
    parents, leave-one-out over all 902 cases (training and test: no extrapolation, more information than any
    method in the table gets). A model-free estimate of how predictable each node is on those test cases given its
    parents (the DAG-DGP's latent adds information for PKA and Raf only). Standardised log units."""
    import torch

    from pyro_dag.experiments.sachs import GP_NODES, _parent_lists

    parents = _parent_lists()[1]
    n_train = split.train_index.numel()
    both = {w: torch.cat([a[w], b[w]]).squeeze(-1).numpy()
            for a, b in ((split.train_inputs, split.test_inputs), (split.train_data, split.test_data)) for w in a}
    te = np.arange(n_train, n_train + split.test_index.numel())
    out = {}
    for w in GP_NODES:
        y, x = both[w], np.stack([both[p] for p in parents[w]], 1)
        d = ((x[te, None] - x[None]) ** 2).sum(-1)
        d[np.arange(len(te)), te] = np.inf                 # leave the case itself out
        nn = np.argsort(d, 1)[:, :k]
        out[w] = {"test_sd": float(y[te].std()), "knn_rmse": float(np.sqrt(np.mean((y[te] - y[nn].mean(1)) ** 2)))}
    return out


def diagnose():
    """Why extrapolation is harder than interpolation here: for each seed's split (both tasks) and for projection
    directions every 15 degrees, the test cases' spread and the observed-parents kNN floor (:func:`_floor`),
    averaged over the 9 GP nodes; beside them each method's per-node RMSE on the seeds that ran. Writes
    ``results/sachs_regression_diagnosis.json`` and returns the markdown lines."""
    import math

    import torch

    from pyro_dag.experiments.sachs import GP_NODES, sachs_split

    def avg(f, key):
        return float(np.mean([f[w][key] for w in GP_NODES]))

    payload = {"k": 15, "splits": {}, "angles": []}
    for task in ("interpolation", "extrapolation"):
        for seed in range(5):
            sp = sachs_split(task, seed)
            f = _floor(sp)
            payload["splits"][f"{task}_s{seed}"] = {
                "direction": None if sp.direction is None else sp.direction.tolist(), "per_node": f,
                "test_sd": avg(f, "test_sd"), "knn_rmse": avg(f, "knn_rmse")}
    for deg in range(0, 180, 15):
        th = math.radians(deg)
        f = _floor(_split_along(torch.tensor([math.cos(th), math.sin(th)], dtype=torch.float64)))
        payload["angles"].append({"degrees_from_PKC_axis": deg, "test_sd": avg(f, "test_sd"),
                                  "knn_rmse": avg(f, "knn_rmse"), "P38_test_sd": f["P38"]["test_sd"],
                                  "Jnk_test_sd": f["Jnk"]["test_sd"]})
    runs = {}
    for path in sorted(glob.glob(os.path.join(RUNS, "extrapolation_s*.json"))):
        r = json.load(open(path))
        res = r["observed_parents"] if r["method"] in ("gp_sem", "linear_sem") else r
        runs.setdefault(r["method"], {})[r["seed"]] = {w: res["per_node"][w]["rmse"] for w in GP_NODES}
    payload["extrapolation_rmse_per_node"] = runs
    write_json("sachs_regression_diagnosis", payload)

    lines = ["**Why extrapolation is hard here** (`python benchmarks/sachs_regression.py --diagnose`, "
             "`results/sachs_regression_diagnosis.json`; cheap, no fits). *kNN floor*: per node, a 15-nearest-"
             "neighbour regression on the node's observed parents, leave-one-out over all 902 cases (training and "
             "test, so it does not extrapolate), RMSE on the split's test cases, averaged over the 9 GP nodes; "
             "*test sd*: the test cases' sd in the training standardisation (1 for cases like the training ones).",
             "", "| split | direction (PKC, Plcg) | test sd | P38 test sd | Jnk test sd | kNN floor |", "|---|---|---|---|---|---|"]
    for key, v in payload["splits"].items():
        d = "–" if v["direction"] is None else f"({v['direction'][0]:.2f}, {v['direction'][1]:.2f})"
        lines.append(f"| {key} | {d} | {v['test_sd']:.2f} | {v['per_node']['P38']['test_sd']:.2f} | "
                     f"{v['per_node']['Jnk']['test_sd']:.2f} | {v['knn_rmse']:.3f} |")
    lines += ["", "| direction, degrees from the PKC axis | " + " | ".join(str(a["degrees_from_PKC_axis"])
                                                               for a in payload["angles"]) + " |",
              "|---" * (len(payload["angles"]) + 1) + "|",
              "| test sd | " + " | ".join(f"{a['test_sd']:.2f}" for a in payload["angles"]) + " |",
              "| P38 test sd | " + " | ".join(f"{a['P38_test_sd']:.2f}" for a in payload["angles"]) + " |",
              "| kNN floor | " + " | ".join(f"{a['knn_rmse']:.3f}" for a in payload["angles"]) + " |", ""]
    if runs:
        seeds = sorted(set.intersection(*(set(v) for v in runs.values())))
        lines += [f"Extrapolation RMSE per node, mean over seeds {','.join(map(str, seeds))} (baselines: observed "
                  "parents), beside the kNN floor of the same splits:", "",
                  "| | " + " | ".join(GP_NODES) + " |", "|---" * (len(GP_NODES) + 1) + "|"]
        for m in ("dag_svi", "dag_vi", "gp_sem", "linear_sem"):
            if m in runs:
                lines.append(f"| {LABELS[m]} | " + " | ".join(
                    f"{np.mean([runs[m][s][w] for s in seeds]):.2f}" for w in GP_NODES) + " |")
        lines.append("| kNN floor | " + " | ".join(
            f"{np.mean([payload['splits'][f'extrapolation_s{s}']['per_node'][w]['knn_rmse'] for s in seeds]):.2f}"
            for w in GP_NODES) + " |")
        lines.append("")
    return lines


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tasks", nargs="+", default=["interpolation", "extrapolation"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0])
    p.add_argument("--methods", nargs="+", default=["dag_svi", "dag_vi", "gp_sem", "linear_sem"])
    p.add_argument("--recipe", default="paper", choices=["paper", "recommended"])
    p.add_argument("--steps", type=int, default=None, help="joint steps (default: the recipe's)")
    p.add_argument("--pretrain-steps", type=int, default=None)
    p.add_argument("--latent-steps", type=int, default=300)
    p.add_argument("--table", action="store_true", help="only gather the runs into the JSON and README table")
    p.add_argument("--diagnose", action="store_true",
                   help="only the cheap extrapolation diagnosis (test-tail spread, kNN floor; no fits)")
    p.add_argument("--resume", action="store_true",
                   help="skip each (task, seed, method) whose result file exists with the same steps and library "
                        "version of the recipe (resumable sweeps)")
    args = p.parse_args()
    one_thread()
    if args.diagnose:
        print("\n".join(diagnose()))
        return
    if not args.table:
        for seed in args.seeds:                  # seed-major: an interrupted sweep leaves whole seeds done
            for task in args.tasks:
                for method in args.methods:
                    tag = args.recipe if method in ("dag_svi", "dag_vi") else "baseline"
                    done = os.path.join(RUNS, f"{task}_s{seed}_{method}_{tag}.json")
                    if args.resume and os.path.exists(done) and _same_protocol(done, args):
                        print("done already:", done, flush=True)
                        continue
                    run_one(task, seed, method, args.recipe, args.steps, args.pretrain_steps, args.latent_steps)
    table()


if __name__ == "__main__":
    main()
