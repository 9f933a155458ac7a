"""ER benchmark: pyro_dag vs DiBS, GES and PC on the same data, after SVI-DAG's synthetic benchmarks
(Zinage 2026, *SVI-DAG*, arXiv:2608.04930, §4.2-4.3, App. C metrics, App. E baseline settings).

Erdős–Rényi DAGs with p in {10, 20} nodes and s = 2p edges, n = 1000 samples, linear-Gaussian (|W| ~ U[0.3, 0.7],
random sign) or nonlinear (random 10-unit ReLU MLP) mechanisms with N(0, 1) noise, standardised columns
(SVI-DAG's generator, `pyro_dag.datasets.sample_sem`), 5 seeds. Every method runs on one pinned core with one
thread and is scored from DAG samples (1000 for pyro_dag; DiBS's 20 mixture-weighted particles; 100 random DAGs
of the GES/PC equivalence class) at the DAG and CPDAG levels.

    python benchmarks/structure_er.py --quick                    # smoke run (p=5, 1 seed, few steps)
    python benchmarks/structure_er.py --methods pc,ges,dibs      # the peers
    python benchmarks/structure_er.py --methods pyro_dag         # adds pyro_dag to the same JSON

Results: benchmarks/results/structure_er.json and the README table.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure_common as sc  # noqa: E402


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke run: p=5, one seed, n=200, few steps")
    ap.add_argument("--p", type=int, nargs="+", default=[10, 20])
    ap.add_argument("--mechanisms", nargs="+", default=["linear", "nonlinear"])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--edges-per-node", type=float, default=2.0, help="s = edges_per_node * p")
    ap.add_argument("--methods", default="pc,ges,dibs,pyro_dag")
    ap.add_argument("--dibs-steps", type=int, default=1000)
    ap.add_argument("--dibs-particles", type=int, default=20)
    ap.add_argument("--dibs-steps-nonlinear", type=int, default=500,
                    help="JointDiBS steps (its reference 1000 steps x 128 MC samples cost ~3 h per p=10 fit on one core)")
    ap.add_argument("--dibs-mc-nonlinear", type=int, default=16, help="JointDiBS n_grad_mc_samples (reference 128)")
    ap.add_argument("--pd-steps", type=int, default=None, help="num_steps for pyro_dag.structure.fit (default: fit's)")
    ap.add_argument("--pd-particles", type=int, default=None, help="num_particles for fit (default: fit's)")
    ap.add_argument("--k", type=int, default=1000, help="posterior samples for pyro_dag")
    ap.add_argument("--pd-likelihood", default=None,
                    help="override fit's likelihood (default: linear / mlp); results go under 'pyro_dag_<name>'")
    ap.add_argument("--pd-order-score", default=None, help="fit(order_score=...): exact or elbo (default: fit's)")
    ap.add_argument("--pd-candidates", type=int, default=None, help="fit(candidate_parents=...) (default: fit's)")
    ap.add_argument("--pd-weighting", default=None, help="fit(weighting=...) (default: fit's)")
    ap.add_argument("--cpu", type=int, default=0, help="core to pin to (-1: no pinning)")
    ap.add_argument("--force", action="store_true", help="recompute entries already in the JSON")
    ap.add_argument("--out", default=None)
    return ap.parse_args()


def data_for(p, mech, r, n, epn):
    from pyro_dag.datasets import sample_sem

    seed = 100 * p + r  # the graph stream does not depend on the mechanism: same graphs for linear and nonlinear
    d = sample_sem(p, n, graph="er", mechanism="linear" if mech == "linear" else "mlp",
                   num_edges=int(round(epn * p)), seed=seed, standardize=True)
    return d.data.numpy().astype("float64"), d.adjacency.numpy(), seed


def run_method(method, x, mech, seed, args):
    if method == "pc":
        return sc.run_pc(x, 100, seed)
    if method == "ges":
        return sc.run_ges(x, 100, seed)
    if method == "dibs":
        if mech == "linear":
            return sc.run_dibs(x, mech, seed, n_particles=args.dibs_particles, steps=args.dibs_steps,
                               edges_per_node=args.edges_per_node)
        return sc.run_dibs(x, mech, seed, n_particles=args.dibs_particles, steps=args.dibs_steps_nonlinear,
                           edges_per_node=args.edges_per_node, n_grad_mc_samples=args.dibs_mc_nonlinear)
    if method.startswith("exact_"):  # exact_linear / exact_bge: the exact posterior of fit's model (p <= 20)
        return sc.run_exact(x, method.split("_", 1)[1], seed, k=args.k)
    if method.startswith("pyro_dag"):
        lik = args.pd_likelihood or ("linear" if mech == "linear" else "mlp")
        kw = {k: v for k, v in (("order_score", args.pd_order_score), ("candidate_parents", args.pd_candidates),
                                ("weighting", args.pd_weighting)) if v is not None}
        return sc.run_pyro_dag(x, lik, seed, k=args.k, num_steps=args.pd_steps, num_particles=args.pd_particles, **kw)
    raise ValueError(f"unknown method {method!r}")


METRICS = [("brier", "Brier ↓", 1, 4), ("e_shd", "E-SHD ↓", 1, 2), ("e_f1", "E-F1 % ↑", 100, 1),
           ("auroc", "AUROC % ↑", 100, 1), ("auprc", "AUPRC % ↑", 100, 1)]
ORDER = ["pyro_dag", "pyro_dag_linear", "pyro_dag_bge", "exact_linear", "exact_bge", "dibs", "ges", "pc"]


def table(res, ps, mechs, level):
    lines = [f"| p | data | method | {' | '.join(m[1] for m in METRICS)} | time s | n |",
             "|---|---|---|" + "---|" * (len(METRICS) + 2)]
    for p in ps:
        for mech in mechs:
            keys = [k for k in res["runs"] if k.startswith(f"p{p}-{mech}-")]
            for method in ORDER:
                entries = [res["runs"][k][method] for k in keys if method in res["runs"][k]]
                entries = [e for e in entries if level in e["metrics"]]
                if not entries:
                    continue
                cells = []
                for key, _, scale, dig in METRICS:
                    m, se, _ = sc.mean_se([e["metrics"][level][key] for e in entries])
                    cells.append(sc.fmt(m, se, scale, dig))
                tm, tse, _ = sc.mean_se([e["time_s"] for e in entries])
                lines.append(f"| {p} | {mech} | {method} | {' | '.join(cells)} | {sc.fmt(tm, tse, 1, 1)} | {len(entries)} |")
    return "\n".join(lines)


def targets(res, ps, mechs):
    """AUROC and time of ``fit``'s default likelihood (``"linear"``) against DiBS per cell. On linear data the
    ``pyro_dag`` entries are that default; on nonlinear data the ``pyro_dag_linear`` entries are (``pyro_dag`` there
    is the MLP likelihood, shown for reference)."""
    lines = ["| p | data | pyro_dag likelihood | AUROC pyro_dag | AUROC DiBS | AUROC ≥ DiBS | time pyro_dag / DiBS | "
             "≤ 1.0 | AUROC pyro_dag mlp |",
             "|---|---|---|---|---|---|---|---|---|"]
    for p in ps:
        for mech in mechs:
            keys = [k for k in res["runs"] if k.startswith(f"p{p}-{mech}-")]
            method = "pyro_dag" if mech == "linear" else "pyro_dag_linear"
            both = [res["runs"][k] for k in keys if method in res["runs"][k] and "dibs" in res["runs"][k]]
            if not both:
                continue
            a_pd, _, _ = sc.mean_se([e[method]["metrics"]["dag"]["auroc"] for e in both])
            a_db, _, _ = sc.mean_se([e["dibs"]["metrics"]["dag"]["auroc"] for e in both])
            t_pd, _, _ = sc.mean_se([e[method]["time_s"] for e in both])
            t_db, _, _ = sc.mean_se([e["dibs"]["time_s"] for e in both])
            mlp = [e["pyro_dag"]["metrics"]["dag"]["auroc"] for e in both if mech != "linear" and "pyro_dag" in e]
            mlp_cell = f"{100 * sc.mean_se(mlp)[0]:.1f}" if mlp else "—"
            lines.append(f"| {p} | {mech} | linear | {100 * a_pd:.1f} | {100 * a_db:.1f} | "
                         f"{'yes' if a_pd >= a_db else '**no**'} | {t_pd / t_db:.2f} | "
                         f"{'yes' if t_pd <= t_db else '**no**'} | {mlp_cell} |")
    return "\n".join(lines)


def main():
    args = parse()
    sc.single_thread(None if args.cpu < 0 else args.cpu)
    if args.quick:
        args.p, args.seeds, args.n, args.edges_per_node = [5], 1, 200, 1.0
        args.dibs_steps, args.pd_steps, args.k = 50, args.pd_steps or 50, 100
        args.dibs_steps_nonlinear, args.dibs_mc_nonlinear = 20, 8
    out = args.out or ("structure_er_quick.json" if args.quick else "structure_er.json")
    res = sc.load_results(out)
    res["env"] = sc.environment()
    res["settings"] = {"n": args.n, "edges_per_node": args.edges_per_node, "dibs_steps": args.dibs_steps,
                       "dibs_steps_nonlinear": args.dibs_steps_nonlinear, "dibs_mc_nonlinear": args.dibs_mc_nonlinear,
                       "dibs_particles": args.dibs_particles, "pd_steps": args.pd_steps,
                       "pd_particles": args.pd_particles, "k": args.k, "standardize": True,
                       "generator": "pyro_dag.datasets.sample_sem(graph='er', mechanism=linear|mlp, seed=100*p+r)"}
    methods = [m.strip() for m in args.methods.split(",") if m.strip() and m.strip() != "none"]  # none: tables only
    if args.pd_likelihood:
        methods = [f"pyro_dag_{args.pd_likelihood}" if m == "pyro_dag" else m for m in methods]
    for p in args.p:
        for mech in args.mechanisms:
            for r in range(args.seeds):
                x, truth, seed = data_for(p, mech, r, args.n, args.edges_per_node)
                key = f"p{p}-{mech}-s{r}"
                entry = res["runs"].setdefault(key, {})
                for method in methods:
                    if method in entry and not args.force:
                        continue
                    load0 = sc.load_avg()
                    out_m = run_method(method, x, mech, seed, args)
                    if out_m is None:
                        print(f"[{key}] {method}: not available (pyro_dag.structure.fit missing)", flush=True)
                        continue
                    metrics = sc.score(out_m["samples"], truth, out_m["weights"])
                    entry[method] = {"metrics": metrics, "time_s": out_m["time_s"], "load_before": load0,
                                     "load_after": sc.load_avg(), "info": out_m["info"], "seed": seed,
                                     "true_edges": int(truth.sum())}
                    sc.save_results(out, res)
                    d = metrics["dag"]
                    print(f"[{key}] {method:8s} AUROC {d['auroc']:.3f} E-SHD {d['e_shd']:.2f} E-F1 {d['e_f1']:.3f} "
                          f"Brier {d['brier']:.4f} time {out_m['time_s']:.1f}s load {load0:.2f}", flush=True)
    sc.save_results(out, res)
    mechs = args.mechanisms
    text = ("### ER graphs (p = 10, 20; s = 2p; n = 1000; 5 seeds): pyro_dag vs DiBS, GES, PC\n\n"
            "Reproduce: `python benchmarks/structure_er.py` (one pinned core, one thread per method; "
            "`--methods` selects methods, results merge into `benchmarks/results/structure_er.json`).\n"
            "Data: `sample_sem(p, 1000, graph='er', num_edges=2p, mechanism='linear'|'mlp', seed=100p+r, standardize=True)`. "
            "DiBS: MarginalDiBS+BGe (linear; 128 MC samples, "
            f"{args.dibs_steps} steps) / JointDiBS+DenseNonlinearGaussian(10,), obs_noise 0.1 (nonlinear; "
            f"{args.dibs_mc_nonlinear} MC samples, {args.dibs_steps_nonlinear} steps: the reference 128 x 1000 costs about "
            "3 h per p=10 fit on one core), ER prior with 2 edges per node, "
            f"{args.dibs_particles} particles, mixture weights. GES: BIC. PC: Fisher-z, "
            "alpha 0.05. GES/PC are scored on 100 random DAGs of their equivalence class. Mean ± SE over seeds; time = "
            "fit + sampling wall-clock on one core.\n\n"
            "DAG level (E-SHD with reversal cost 1):\n\n" + table(res, args.p, mechs, "dag") +
            "\n\nCPDAG level (CPDAG-mark metrics, `level='cpdag'`):\n\n" + table(res, args.p, mechs, "cpdag") +
            "\n\nOn nonlinear data `pyro_dag` is `fit(likelihood='mlp')` and `pyro_dag_linear` is `fit`'s default "
            "(the collapsed linear-Gaussian likelihood, misspecified there); AUROC and wall-clock are over the seeds "
            "where DiBS ran. pyro_dag rows use `fit`'s defaults of their time: every pyro_dag row with a collapsed "
            "likelihood (`linear`, `bge`) was re-run with the mixed order moves (`swap_moves='mixed'`) except the "
            "single p = 20 `pyro_dag_bge` seed (adjacent swaps); the p = 10 `pyro_dag` (linear data), `pyro_dag_bge` "
            "and `pyro_dag_linear` rows were re-run with the exact order score (`order_score='exact'`, fit's default "
            "for p ≤ 14) and the orders visited over the last half of the run weighted by it (`order_history=0.5`; "
            "DAG-level AUROC with the ELBO-judged moves: 93.5 ± 3.1 in 115 s, 95.0 ± 3.3 in 277 s and 83.1 ± 7.1 in "
            "122 s; with the exact score and the particles' final orders only: 99.4 in 73 s, 99.4 in 130 s and 83.4 "
            "in 69 s); the p = 10 `pyro_dag` (linear data) and `pyro_dag_linear` rows were re-run again with the "
            "Fisher-scaled gradients of the guide's edge offsets (`AutoEdgeFlowGuide(offset_gradient_cap=1000)`, "
            "fit's default since 2026-11-30; with plain offset gradients and the history: 99.3 in 61 s and 82.5 in "
            "73 s; the `pyro_dag_bge` row predates it); the others use the ELBO-judged "
            "moves (still the default above 14 nodes). At p = 20 the restricted exact score is opt-in: seed 0, linear: "
            "AUROC 80.4 with `max_parents=4`, 83.0 with `candidate_parents=12` and order weights "
            "(results/er20_cand12.json), vs 91.3; with `candidate_parents=12` and uniform weights, 5 seeds "
            "(`--pd-order-score exact --pd-candidates 12 --pd-weighting uniform`, results/er20_cand12u.json): linear "
            "AUROC 98.4, E-SHD 14.2, E-F1 80.3, 216 s; nonlinear 93.4, 17.3, 72.7, 214 s (vs the rows above: better "
            "ranking and time, worse E-SHD and E-F1). `exact_linear` / `exact_bge`: "
            "`pyro_dag.structure.exact_posterior`, the exact posterior of the model `fit` approximates (same prior, "
            "collapsed likelihood), by dynamic programming over node orders, 1000 exact DAG samples; the gap between "
            "a `pyro_dag` row and the `exact` row with the same likelihood is the variational approximation's.\n\n"
            "Targets (structure learning): AUROC ≥ DiBS on every cell, wall-clock ≤ 1.0× DiBS, for `fit`'s default likelihood:"
            "\n\n" + targets(res, args.p, mechs))
    print(text)
    if not args.quick and args.out is None:  # only the default results file feeds the README
        sc.write_readme_block("er", text)


if __name__ == "__main__":
    main()
