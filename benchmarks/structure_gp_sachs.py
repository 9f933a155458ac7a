"""The GP network score on Sachs' observational data, beside BGe, the linear score, DiBS, GES and PC.

Data: :func:`pyro_dag.datasets.sachs` ``subset="cd3cd28"`` (the 853 rows of the general stimulation, no
intervention), log-transformed and standardised; truth: the consensus graph (17 edges) and cdt's graph (the
SVI-DAG paper's truth, 18 edges, cyclic; DAG level only).

Methods (defaults, one thread): ``gp`` is ``fit(X, likelihood="gp")`` (p = 11: the exact posterior over parent sets
of at most 2; with 853 rows each family is scored by the collapsed bound with 128 inducing rows); ``bge`` and
``linear`` the exact posteriors; ``dibs`` JointDiBS with its nonlinear model (20 particles, 1000 steps); ``ges_bic``
and ``pc`` causal-learn's GES (BIC) and PC (Fisher-z). causal-learn's GES with the generalised marginal score is not
run: its exact kernel computations cost about 45 CPU s per data set at n = 200 and scale as n³ (an hour here).

Metrics: edge AUROC, expected SHD (posterior; a point estimate's CPDAG spread over its DAGs, reversal counted
once) and the SHD of the point estimate (the posterior's MAP DAG), DAG level, against each truth.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/structure_gp_sachs.py

Results: ``benchmarks/results/structure_gp_sachs.json`` (a rerun skips the methods it holds).
"""
import json
import os
import platform
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure_common as sc  # noqa: E402

PATH = os.path.join(sc.RESULTS, "structure_gp_sachs.json")
METHODS = ["gp", "bge", "linear", "ges_bic", "pc", "dibs"]


def main():
    sc.single_thread()
    import numpy as np

    from pyro_dag.datasets import sachs, sachs_graph
    from pyro_dag.metrics import auroc, expected_shd
    from pyro_dag.structure import exact_posterior, fit

    d = sachs(subset="cd3cd28", log=True, standardize=True, dtype=None)
    X = d.data.double().numpy()
    truths = {"consensus": d.adjacency.numpy().astype(int), "cdt": sachs_graph("cdt").numpy().astype(int)}
    res = json.load(open(PATH)) if os.path.exists(PATH) else {"runs": []}
    done = {r["method"] for r in res["runs"]}
    for m in METHODS:
        if m in done or (len(sys.argv) > 1 and m not in sys.argv[1:]):
            continue
        t0 = time.process_time()
        samples, info = None, {}
        if m == "gp":
            post = fit(X, likelihood="gp", num_threads=1)
            info = dict(post.settings, inducing=post.gp_scorer.inducing)
        elif m in ("bge", "linear"):
            post = exact_posterior(X, m, num_threads=1)
        if m in ("gp", "bge", "linear"):
            P, point = post.edge_probs().numpy(), post.map_dag().numpy()
            samples = post.sample(1000, seed=0).numpy()
        elif m == "dibs":
            r = sc.run_dibs(X, "nonlinear", 0)
            w = r["weights"] if r["weights"] is not None else np.full(len(r["samples"]), 1 / len(r["samples"]))
            samples = r["samples"][np.random.default_rng(0).choice(len(w), 1000, p=w)]
            P, point = samples.astype(float).mean(0), r["samples"][int(np.argmax(w))]
            info = r["info"]
        else:
            r = sc.run_ges(X, 1000, 0) if m == "ges_bic" else sc.run_pc(X, 1000, 0)
            samples = r["samples"]
            P, point = samples.astype(float).mean(0), samples[0]
        cpu = time.process_time() - t0
        row = dict(method=m, cpu_s=cpu, info=info, point_edges=int(point.sum()), mean_edges=float(samples.sum((1, 2)).mean()))
        for name, A in truths.items():
            row[name] = dict(auroc=float(auroc(P, A)), e_shd=float(expected_shd(samples, A, level="dag")),
                             shd=float(expected_shd(point[None], A, level="dag")))
        res["runs"].append(row)
        print({k: v for k, v in row.items() if k != "info"}, flush=True)
        res["settings"] = dict(command="OMP_NUM_THREADS=1 nice -n 5 python benchmarks/structure_gp_sachs.py",
                               data="sachs cd3cd28 (853 rows), log, standardised", threads=1,
                               truths={k: int(v.sum()) for k, v in truths.items()})
        res["environment"] = dict(python=platform.python_version(), machine=platform.machine(), load_avg=sc.load_avg())
        with open(PATH + ".tmp", "w") as f:
            json.dump(res, f, indent=1, default=str)
        os.replace(PATH + ".tmp", PATH)


if __name__ == "__main__":
    main()
