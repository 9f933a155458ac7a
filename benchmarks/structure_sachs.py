"""Sachs benchmark: 10 folds as in SVI-DAG (Zinage 2026, *SVI-DAG*, arXiv:2608.04930, §4.4, Tables 1 and 2).

Protocol (the fold protocol of the SVI-DAG authors' code, github.com/shrenikvz/SVI-DAG): the pooled 7466 x 11
data (`pyro_dag.datasets.sachs()`), shuffled once
(numpy default_rng(0)), split into 10 folds; split i trains on the other 9 folds (6719-6720 rows), standardised
with the training rows' mean and std; the held-out fold is unused (all metrics are structural). 1000 posterior
samples per fit for pyro_dag; DiBS's 20 mixture-weighted particles; 100 random DAGs of the GES/PC class.

Ground truths: cdt's 18-edge graph (cyclic; what SVI-DAG scores against, so DAG-level numbers are comparable to
the paper's Table 1) and the 17-edge acyclic consensus DAG (CPDAG-level metrics need a DAG). SVI-DAG's code
counts a reversal as 2 at DAG level (E-SHD rc2) and uses skeleton Brier/F1/AUROC with max(P_ij, P_ji) for its
"CPDAG" table (Table 2); both conventions are reported beside ours.

    python benchmarks/structure_sachs.py --quick                  # one fold, few steps
    python benchmarks/structure_sachs.py --methods pc,ges,dibs    # peers
    python benchmarks/structure_sachs.py --methods pyro_dag       # pyro_dag (merges into the same JSON)
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure_common as sc  # noqa: E402

# SVI-DAG paper (arXiv:2608.04930), Tables 1 and 2: mean ± SE over 10 folds; F1 and AUROC in %.
PAPER_DAG = {
    "SVI-DAG": (0.185, 0.007, 25.70, 0.92, 28.95, 1.73, 58.16, 2.27),
    "ProDAG": (0.159, 0.003, 19.68, 0.35, 14.32, 1.54, 52.95, 1.81),
    "BayesDAG": (0.174, 0.008, 28.66, 0.78, 26.75, 2.08, 62.23, 1.93),
    "DDS": (0.168, 0.004, 24.62, 0.56, 23.21, 1.52, 51.35, 2.18),
    "BCD Nets": (0.153, 0.004, 20.94, 0.50, 10.79, 2.16, 55.91, 2.07),
    "DiBS": (0.180, 0.004, 40.74, 0.50, 27.78, 0.74, 65.63, 2.07),
}
PAPER_CPDAG = {
    "SVI-DAG": (0.237, 0.016, 23.08, 0.87, 54.05, 2.07, 70.17, 2.28),
    "ProDAG": (0.267, 0.001, 17.36, 0.07, 31.55, 0.64, 62.70, 0.90),
    "BayesDAG": (0.247, 0.010, 26.38, 0.42, 50.10, 1.36, 62.88, 1.42),
    "DDS": (0.240, 0.005, 23.02, 0.29, 43.46, 0.91, 68.91, 1.30),
    "BCD Nets": (0.259, 0.002, 18.68, 0.16, 26.30, 1.61, 56.65, 1.62),
    "DiBS": (0.215, 0.003, 35.49, 0.22, 54.46, 0.29, 66.80, 1.10),
}


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="one fold, few steps")
    ap.add_argument("--folds", type=int, nargs="+", default=list(range(10)))
    ap.add_argument("--methods", default="pc,ges,dibs,pyro_dag")
    ap.add_argument("--dibs-steps", type=int, default=1000)
    ap.add_argument("--dibs-particles", type=int, default=20)
    ap.add_argument("--likelihood", default="mlp",
                    help="pyro_dag likelihood: mlp (as SVI-DAG; stored as 'pyro_dag') or linear / bge (stored as "
                         "'pyro_dag_<likelihood>')")
    ap.add_argument("--pd-weighting", default=None, help="fit(weighting=...): uniform or elbo (default: fit's)")
    ap.add_argument("--pd-steps", type=int, default=None)
    ap.add_argument("--pd-particles", type=int, default=None)
    ap.add_argument("--pd-prior", type=float, default=None,
                    help="uniform edge belief p0 passed as edge_beliefs (SVI-DAG's code used 0.15); default: none")
    ap.add_argument("--pd-likelihood-scale", type=float, default=None,
                    help="fit(likelihood_scale=s): a tempered posterior p(D | A)^s (stored as "
                         "'pyro_dag_<likelihood>_tempered'); default: the posterior (s = 1)")
    ap.add_argument("--k", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=1, help="torch threads for pyro_dag (the target allows 2 cores)")
    ap.add_argument("--cpu", type=int, default=0, help="core to pin to (-1: no pinning)")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--out", default=None)
    return ap.parse_args()


def splits(n=7466, folds=10, seed=0):
    import numpy as np

    perm = np.random.default_rng(seed).permutation(n)
    parts = np.array_split(perm, folds)
    return [np.sort(np.concatenate([parts[j] for j in range(folds) if j != i])) for i in range(folds)]


def run_method(method, x, seed, args):
    import numpy as np

    if method == "pc":
        return sc.run_pc(x, 100, seed)
    if method == "ges":
        return sc.run_ges(x, 100, seed)
    if method == "dibs":
        return sc.run_dibs(x, "linear", seed, n_particles=args.dibs_particles, steps=args.dibs_steps)
    if method.startswith("exact_"):  # exact_linear, exact_bge, exact_linear_tempered
        kw = {} if args.pd_likelihood_scale is None else {"likelihood_scale": args.pd_likelihood_scale}
        return sc.run_exact(np.asarray(x), method.split("_")[1], seed, k=args.k, **kw)
    if method.startswith("pyro_dag"):
        beliefs = None
        if args.pd_prior is not None:
            import torch

            beliefs = torch.full((x.shape[1], x.shape[1]), args.pd_prior)
            beliefs.fill_diagonal_(0.0)
        kw = {"num_steps": args.pd_steps, "num_particles": args.pd_particles}
        if args.pd_weighting is not None:
            kw["weighting"] = args.pd_weighting
        if beliefs is not None:
            kw["edge_beliefs"] = beliefs
        if args.pd_likelihood_scale is not None:
            kw["likelihood_scale"] = args.pd_likelihood_scale
        return sc.run_pyro_dag(np.asarray(x), args.likelihood, seed, k=args.k, **kw)
    raise ValueError(method)


PD_METHODS = ["pyro_dag", "pyro_dag_linear", "pyro_dag_bge", "pyro_dag_linear_tempered", "exact_linear", "exact_bge",
              "exact_linear_tempered"]
PD_LABELS = {"pyro_dag": "pyro_dag mlp", "pyro_dag_linear": "pyro_dag linear", "pyro_dag_bge": "pyro_dag bge",
             "pyro_dag_linear_tempered": "pyro_dag linear, tempered", "exact_linear": "exact posterior, linear",
             "exact_bge": "exact posterior, bge", "exact_linear_tempered": "exact posterior, linear, tempered"}
ROWS = [("brier", 1, 3), ("e_shd", 1, 2), ("e_f1", 100, 2), ("auroc", 100, 2)]


def ours_rows(res, group, level, shd_key="e_shd"):
    lines = []
    for method in PD_METHODS + ["dibs", "ges", "pc"]:
        entries = [f[method] for f in res["runs"].values() if method in f and level in f[method][group]]
        if not entries:
            continue
        cells = []
        for key, scale, dig in ROWS:
            k = shd_key if key == "e_shd" else key
            m, se, _ = sc.mean_se([e[group][level][k] for e in entries])
            cells.append(sc.fmt(m, se, scale, dig))
        tm, tse, _ = sc.mean_se([e["time_s"] for e in entries])
        lines.append(f"| **{PD_LABELS.get(method, method)}** (ours, {len(entries)} folds) | {' | '.join(cells)} | {sc.fmt(tm, tse, 1, 1)} |")
    return lines


def paper_rows(table):
    return [f"| {k} (paper) | {v[0]:.3f} ± {v[1]:.3f} | {v[2]:.2f} ± {v[3]:.2f} | {v[4]:.2f} ± {v[5]:.2f} | "
            f"{v[6]:.2f} ± {v[7]:.2f} | |" for k, v in table.items()]


HEAD = "| method | Brier ↓ | E-SHD ↓ | E-F1 % ↑ | AUROC % ↑ | time s |\n|---|---|---|---|---|---|"


def report(res, args):
    t1 = "\n".join([HEAD] + ours_rows(res, "cdt18", "dag", "e_shd_rc2") + paper_rows(PAPER_DAG))
    t2 = "\n".join([HEAD] + ours_rows(res, "consensus17", "svidag_cpdag") + paper_rows(PAPER_CPDAG))
    t3 = "\n".join([HEAD] + ours_rows(res, "consensus17", "dag"))
    t4 = "\n".join([HEAD] + ours_rows(res, "consensus17", "cpdag"))
    tgt = ""
    for method in PD_METHODS:
        entries = [f[method] for f in res["runs"].values() if method in f]
        if not entries:
            continue
        a, _, _ = sc.mean_se([e["cdt18"]["dag"]["auroc"] for e in entries])
        f1, _, _ = sc.mean_se([e["cdt18"]["dag"]["e_f1"] for e in entries])
        shd, _, _ = sc.mean_se([e["cdt18"]["dag"]["e_shd_rc2"] for e in entries])
        tmax = max(e["time_s"] for e in entries)
        tgt += (f"\n\nTargets for {PD_LABELS[method]} (structure-learning targets; cdt-18 truth, DAG level, SVI-DAG conventions): "
                f"AUROC {100 * a:.1f} > 65.6: "
                f"{'yes' if 100 * a > 65.6 else '**no**'}; E-F1 {100 * f1:.2f} > 28.95: {'yes' if 100 * f1 > 28.95 else '**no**'}; "
                f"E-SHD {shd:.2f} ≤ 25.7: {'yes' if shd <= 25.7 else '**no**'}; slowest fold {tmax:.0f} s ≤ 600 s: "
                f"{'yes' if tmax <= 600 else '**no**'} ({len(entries)} folds, {args.threads} thread(s)).")
    return ("### Sachs, 10 folds (SVI-DAG, arXiv:2608.04930, §4.4): our runs beside the paper's Tables 1 and 2\n\n"
            "Reproduce: `python benchmarks/structure_sachs.py` (one pinned core; `--methods` to select). "
            "Pooled 7466 × 11 data, 10 folds (rng 0), train on 9 folds standardised with training statistics. "
            "Paper rows: SVI-DAG paper, GPU, other implementations (arXiv:2608.04930, Tables 1-2). pyro_dag rows use "
            "`fit`'s defaults (`--likelihood linear` / `bge`: 40 particles, order moves every step, half of them "
            "between random positions, judged by the exact order score `log p(D, order)` (`order_score=\"exact\"`, "
            "all parent sets) and the distinct orders the particles visited over the last half of the run weighted by "
            "it (`order_history=0.5`), the guide's edge offsets trained with Fisher-scaled gradients "
            "(`offset_gradient_cap=1000`); mlp: 20 particles, uniform, adjacent swaps every 5 steps). With plain "
            "offset gradients (the default until 2026-11-30), at DAG level against cdt-18: linear AUROC 60.6 ± 0.6, "
            "E-F1 22.8 ± 0.6, E-SHD 39.6 ± 0.3, 79 s/fold; bge AUROC 67.1 ± 0.8, E-F1 33.1 ± 0.8, E-SHD 34.4 ± 0.4, "
            "153 s/fold. With those and the particles' "
            "final orders only (`order_history=0`, the default until 2026-11-30), at DAG level against cdt-18: "
            "linear AUROC 58.6 ± 1.3, E-F1 23.5 ± 0.5, E-SHD 39.4 ± 0.3, Brier 0.314, 80 s/fold; bge AUROC "
            "64.1 ± 1.2, E-F1 33.3 ± 1.4, E-SHD 34.2 ± 0.7, Brier 0.269, 172 s/fold. "
            "Before the exact order score (moves judged and orders weighted by the flow's ELBO), at DAG level against "
            "cdt-18: linear AUROC 55.6 ± 0.6, E-F1 22.4 ± 1.1, E-SHD 39.6 ± 0.5, Brier 0.326, 140 s/fold; bge AUROC "
            "55.5 ± 1.2, E-F1 21.5 ± 0.8, E-SHD 39.5 ± 0.3, Brier 0.303, 281 s/fold (the `linear, tempered` row and "
            "the runs below were made with those moves). Earlier linear "
            "runs, at DAG level against cdt-18: 20 uniformly weighted particles, adjacent swaps every 5 steps: AUROC "
            "60.7 ± 1.6, E-F1 27.0 ± 0.7, E-SHD 41.4 ± 0.4, Brier 0.200; 40 ELBO-weighted particles, adjacent swaps "
            "every 5 steps: AUROC 56.9 ± 1.2, E-F1 27.9 ± 1.6, E-SHD 38.3 ± 1.0, Brier 0.289; adjacent swaps every "
            "step: AUROC 54.8 ± 1.7, E-F1 22.1, E-SHD 40.5, Brier 0.315. (On ER data, where the linear score is "
            "right, each change raised AUROC.) `pyro_dag bge`: `fit(likelihood=\"bge\")`, the BGe marginal "
            "likelihood DiBS uses here. `pyro_dag linear, tempered`: the linear likelihood raised to the power "
            "0.01 (`--pd-likelihood-scale 0.01`, `fit(likelihood_scale=0.01)`), a tempered posterior for a "
            "misspecified model (one value tried, not tuned): sparser and better calibrated samples (Brier, "
            "E-SHD), no better edge ranking (AUROC). Two more linear runs, 10 folds each, DAG level vs cdt-18 (JSON "
            "in `results/sachs_explore_*.json`, `--out`): 80 uniformly weighted particles "
            "(`--pd-particles 80 --pd-weighting uniform`): AUROC 58.4 ± 0.8, E-F1 25.3 ± 0.4, E-SHD 38.6 ± 0.2, "
            "Brier 0.220, 196 s/fold; likelihood^0.1 (`--pd-likelihood-scale 0.1`): AUROC 50.6 ± 1.3, E-F1 18.8, "
            "E-SHD 39.9, Brier 0.24. `exact posterior` rows (`--methods exact_linear,exact_bge`): "
            "`pyro_dag.structure.exact_posterior`, the exact posterior of the same model (uniform order prior, the "
            "same edge prior and collapsed likelihood as `fit`) by dynamic programming over the 2^11 node subsets, "
            "1000 exact DAG samples per fold, fit's defaults (`expected_parents=1.5`), nothing tuned. They "
            "separate the model from the inference: with the BGe score the exact posterior reaches AUROC 68.4, the "
            "variational fit of the same posterior 68.0 (67.1 with plain offset gradients, 64.1 from the particles' "
            "final orders alone, 55.5 with the "
            "ELBO-judged order moves, whose particles held 2e-5 of the exact order mass on fold 0 while the flow's "
            "edge probabilities given their orders were within 0.01 of the exact conditionals; on fold 0 the 40 "
            "final orders held 1e-3 of the exact order mass, the 7547 orders visited over the last half 0.07, and "
            "the edge probabilities came from 0.065 to 0.033 of the exact ones, mean abs); the E-SHD stays near 33 "
            "even for the exact posterior because the posterior itself puts its mass on dense graphs (about 32 "
            "edges; N = 6700 non-Gaussian rows). The sweep below (`structure_sachs_sweep.py`) shows that no edge "
            "prior or likelihood tempering of this model meets the three targets together: every posterior sparse "
            "enough for E-SHD ≤ 25.7 ranks edges worse (AUROC ≤ 60). Normal scores or logs of the data lowered "
            "AUROC (folds 0-2).\n\n"
            "**DAG level against cdt's 18-edge graph** (the paper's truth; E-SHD counts a reversal as 2, as SVI-DAG's "
            "code):\n\n" + t1 +
            "\n\n**SVI-DAG's \"CPDAG\" convention against the 17-edge consensus DAG** (E-SHD on CPDAG marks; Brier, F1, "
            "AUROC on the skeleton with max(P_ij, P_ji); the paper applied it to the cyclic 18-edge graph, so the "
            "rows are comparable only roughly):\n\n" + t2 +
            "\n\nDAG level against the 17-edge consensus DAG (E-SHD reversal cost 1):\n\n" + t3 +
            "\n\nCPDAG level against the 17-edge consensus DAG (our CPDAG-mark metrics):\n\n" + t4 + tgt)


def main():
    args = parse()
    sc.single_thread(None if args.cpu < 0 else args.cpu)
    import torch

    torch.set_num_threads(args.threads)
    import numpy as np

    from pyro_dag.datasets import sachs, sachs_graph

    if args.quick:
        args.folds, args.dibs_steps, args.pd_steps, args.k = [0], 50, args.pd_steps or 50, 100
    out = args.out or ("structure_sachs_quick.json" if args.quick else "structure_sachs.json")
    res = sc.load_results(out)
    res["env"] = sc.environment()
    res["settings"] = {k: v for k, v in vars(args).items() if k not in ("force", "out")}
    x_all = sachs(dtype=torch.float64).data.numpy()
    truths = {"cdt18": sachs_graph("cdt").numpy(), "consensus17": sachs_graph("consensus").numpy()}
    tr = splits()
    methods = [m.strip() for m in args.methods.split(",") if m.strip() and m.strip() != "none"]  # none: tables only
    if args.likelihood != "mlp":
        methods = [f"pyro_dag_{args.likelihood}" if m == "pyro_dag" else m for m in methods]
    if args.pd_likelihood_scale is not None:
        methods = [f"{m}_tempered" if m.startswith(("pyro_dag", "exact_")) else m for m in methods]
    for i in args.folds:
        x = x_all[tr[i]]
        x = (x - x.mean(0)) / x.std(0)
        entry = res["runs"].setdefault(f"fold{i}", {})
        for method in methods:
            if method in entry and not args.force:
                continue
            load0 = sc.load_avg()
            o = run_method(method, x, i, args)
            if o is None:
                print(f"[fold{i}] {method}: not available (pyro_dag.structure.fit missing)", flush=True)
                continue
            rec = {"time_s": o["time_s"], "load_before": load0, "load_after": sc.load_avg(), "info": o["info"],
                   "n_train": int(x.shape[0])}
            rec["cdt18"] = sc.score(o["samples"], truths["cdt18"], o["weights"], levels=("dag",))
            rec["consensus17"] = sc.score(o["samples"], truths["consensus17"], o["weights"], levels=("dag", "cpdag"))
            entry[method] = rec
            sc.save_results(out, res)
            d = rec["cdt18"]["dag"]
            print(f"[fold{i}] {method:8s} cdt18: AUROC {d['auroc']:.3f} E-F1 {d['e_f1']:.3f} E-SHD(rc2) "
                  f"{d['e_shd_rc2']:.2f} Brier {d['brier']:.3f} time {o['time_s']:.1f}s load {load0:.2f}", flush=True)
    sc.save_results(out, res)
    text = report(res, args)
    print(text)
    if not args.quick and args.out is None:  # only the default results file feeds the README
        sc.write_readme_block("sachs", text)


if __name__ == "__main__":
    main()
