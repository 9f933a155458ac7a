"""The GP network score (``exact_posterior(likelihood="gp")``) against BGe and the linear score on nonlinear data.

Data: :func:`pyro_dag.datasets.sample_sem` with ``graph="er"``, ``p = 10`` nodes, ``num_edges = 10``,
``mechanism="gp"`` (each child a draw from a zero-mean GP with an RBF kernel, unit variance and length-scale 1, of
its parents, plus ``N(0, noise²)`` noise), standardised columns; ``n = 200`` rows; seeds ``0..S-1``.

Methods (all the exact order DP with the library's edge prior, 1.5 expected parents, one thread):

* ``gp``: the GP network score (Friedman & Nachman 2000; :mod:`pyro_dag.structure.gp_scores`): ARD RBF kernel,
  type-II ML, ``½ log N`` per parent, parent sets up to 2;
* ``gp_ml2``: the same fits without the per-parent charge (plain type-II ML evidence; no refits: the scorer's
  cache is reused);
* ``bge``: BGe, no in-degree bound; ``bge_k2``: BGe with parent sets up to 2 (the GP score's bound);
* ``linear``: the default linear score, no in-degree bound.

Metrics: CPDAG SHD of the exact MAP (order, DAG) pair, edge AUROC of the exact edge marginals (DAG level and on the
skeleton), CPU seconds (the GP score's includes its fits).

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/structure_gp.py                 # 5 seeds
    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/structure_gp.py --seeds 1 --quick

Results: ``benchmarks/results/structure_gp.json``.
"""
import argparse
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure_common as sc  # noqa: E402

METHODS = ["gp", "gp_ml2", "bge", "bge_k2", "linear"]


def parse():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--p", type=int, default=10)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--edges", type=int, default=10)
    ap.add_argument("--noise", type=float, default=0.5, help="noise standard deviation of the SEM")
    ap.add_argument("--max-parents", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="write structure_gp_quick.json")
    return ap.parse_args()


def main():
    args = parse()
    sc.single_thread()
    import numpy as np

    from pyro_dag.datasets import sample_sem
    from pyro_dag.metrics import auroc, expected_shd
    from pyro_dag.structure import exact_posterior

    rows = []
    t_start = time.perf_counter()
    for seed in range(args.seeds):
        d = sample_sem(args.p, args.n, graph="er", mechanism="gp", num_edges=args.edges, seed=seed,
                       noise_scale=args.noise, standardize=True, dtype=None)
        X = d.data.double().numpy()
        A = d.adjacency.numpy().astype(int)
        scorer = None
        for m in METHODS:
            t0 = time.process_time()
            if m in ("gp", "gp_ml2"):
                if scorer is not None:
                    scorer.penalty = 0.0 if m == "gp_ml2" else 0.5 * np.log(args.n)
                post = exact_posterior(X, "gp", max_parents=args.max_parents, gp_scorer=scorer, num_threads=1,
                                       gp_penalty=0.0 if m == "gp_ml2" else "bic")
                scorer = post.gp_scorer
            else:
                lik = "bge" if m.startswith("bge") else "linear"
                post = exact_posterior(X, lik, max_parents=args.max_parents if m == "bge_k2" else None,
                                       num_threads=1)
            P = post.edge_probs().numpy()
            M = post.map_dag().numpy()
            cpu = time.process_time() - t0
            rows.append(dict(seed=seed, method=m, cpu_s=cpu, shd=float(expected_shd(M[None], A, level="cpdag")),
                             auroc=float(auroc(P, A)), skeleton_auroc=float(auroc(P, A, level="skeleton")),
                             map_edges=int(M.sum()), true_edges=int(A.sum()), true_max_indegree=int(A.sum(0).max()),
                             gp_fits=scorer.num_fits if m.startswith("gp") else None))
            print(seed, m, {k: (round(v, 3) if isinstance(v, float) else v) for k, v in rows[-1].items()}, flush=True)
    summary = []
    for m in METHODS:
        sel = [r for r in rows if r["method"] == m]
        summary.append(dict(method=m, seeds=len(sel), mean_shd=float(np.mean([r["shd"] for r in sel])),
                            max_shd=max(r["shd"] for r in sel), mean_auroc=float(np.mean([r["auroc"] for r in sel])),
                            mean_skeleton_auroc=float(np.mean([r["skeleton_auroc"] for r in sel])),
                            mean_cpu_s=float(np.mean([r["cpu_s"] for r in sel]))))
    out = dict(
        settings=dict(command="OMP_NUM_THREADS=1 nice -n 5 python " + " ".join(sys.argv), seeds=list(range(args.seeds)),
                      p=args.p, n=args.n, num_edges=args.edges, noise_scale=args.noise, mechanism="gp (RBF, ls 1)",
                      standardize=True, max_parents=args.max_parents, gp="ARD RBF, type-II ML, 2 restarts",
                      threads=1),
        summary=summary, runs=rows,
        environment=dict(python=platform.python_version(), machine=platform.machine(), load_avg=sc.load_avg(),
                         wall_s=time.perf_counter() - t_start),
    )
    name = "structure_gp_quick.json" if args.quick else "structure_gp.json"
    path = os.path.join(sc.RESULTS, name)
    with open(path, "w") as f:
        json.dump(out, f, indent=1, default=str)
    for s in summary:
        print({k: (round(v, 3) if isinstance(v, float) else v) for k, v in s.items()})
    print("wrote", path)


if __name__ == "__main__":
    main()
