"""Sachs et al. (2005) with its nine conditions: the exact BGe posterior with the published targets (perfect
interventions; Cooper & Yoo 1999), with the targets learned (Eaton & Murphy 2007's uncertain interventions), and
observational only (all 7466 rows pooled, and the 853 rows of the unperturbed condition), against GIES (Hauser &
Bühlmann 2012, ``gies`` package, BIC score) with the same targets and without them.

Data: ``pyro_dag.datasets.sachs_experiments()`` (log intensities by default; ``--raw`` for the raw ones), every
method standardising the pooled columns. Metrics against the 17-edge acyclic consensus DAG (and the AUROC against
cdt's 18 edges and bnlearn's 17): DAG-level edge AUROC of the posterior edge marginals (GIES: edge frequencies over
200 random members of its estimated equivalence class), E-SHD at the DAG level and at the interventional-CPDAG level
of the published target family (Hauser & Bühlmann 2012), expected edges, CPU seconds (one thread).

    OMP_NUM_THREADS=1 flock /tmp/pyro_dag_bench.lock python benchmarks/structure_sachs_interventions.py
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure_common as sc  # noqa: E402

sc.single_thread()

import numpy as np  # noqa: E402

from pyro_dag.datasets import sachs_experiments, sachs_graph  # noqa: E402
from pyro_dag.graph import cpdag_to_dags  # noqa: E402
from pyro_dag.metrics.structure import auroc, expected_shd  # noqa: E402
from pyro_dag.structure import exact_posterior  # noqa: E402
from pyro_dag.structure.uncertain_targets import target_posterior  # noqa: E402

PATH = os.path.join(sc.RESULTS, "structure_sachs_interventions.json")
METHODS = ["known", "unknown", "observational", "observational_853", "gies_known", "gies_observational"]


def run(method, d, X, seed=0):
    env = np.array(d.environments)
    mask = d.mask
    names = d.nodes
    extra = {}
    t0 = time.process_time()
    if method in ("known", "unknown", "observational", "observational_853"):
        rows = env == "cd3cd28" if method == "observational_853" else np.ones(len(env), dtype=bool)
        iv = {"known": mask, "observational": None, "observational_853": None,
              "unknown": (env, {k: ([] if k == "cd3cd28" else "unknown") for k in d.targets})}[method]
        post = exact_posterior(X[rows], "bge", node_names=names, interventions=iv)
        P = post.edge_probs().numpy()
        S = post.sample(1000, seed=seed).numpy().astype(np.int8)
        cpu = time.process_time() - t0
        if method == "unknown":
            labels, probs, _ = target_posterior(post, 1000, seed)
            extra["targets_learned"] = {lab: [names[k] for k in np.nonzero(row > 0.5)[0]]
                                        for lab, row in zip(labels, probs)}
            extra["target_probs"] = {lab: row.round(4).tolist() for lab, row in zip(labels, probs)}
    else:
        import gies

        Z = (X - X.mean(0)) / X.std(0)
        if method == "gies_known":
            groups = list(d.targets)
            data = [Z[env == g] for g in groups]
            family = [[names.index(t) for t in d.targets[g]] for g in groups]
        else:
            data, family = [Z], [[]]
        est, _ = gies.fit_bic(data, family)
        cpu = time.process_time() - t0
        est = (np.asarray(est) != 0).astype(np.int8)
        S = cpdag_to_dags(est, num_samples=200, seed=seed)
        P = S.mean(0)
    family = sorted({tuple(np.nonzero(r)[0].tolist()) for r in np.unique(mask, axis=0)})
    truth = sachs_graph("consensus").numpy()
    out = {"method": method, "auroc": auroc(P, truth), "e_shd": expected_shd(S, truth),
           "e_shd_icpdag": expected_shd(S, truth, level="cpdag", targets=[list(t) for t in family]),
           "auroc_cdt": auroc(P, sachs_graph("cdt").numpy()), "auroc_bnlearn": auroc(P, sachs_graph("bnlearn").numpy()),
           "mean_edges": float(S.sum((1, 2)).mean()), "cpu_s": cpu, "load": sc.load_avg()}
    out.update(extra)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--methods", nargs="+", default=METHODS)
    ap.add_argument("--raw", action="store_true", help="raw intensities instead of their logarithm")
    ap.add_argument("--out", default=PATH)
    args = ap.parse_args()
    d = sachs_experiments(log=not args.raw)
    X = d.data.double().numpy()
    scale = "raw" if args.raw else "log"
    res = json.load(open(args.out)) if os.path.exists(args.out) else {"runs": []}
    res["runs"] = [r for r in res["runs"] if not (r["scale"] == scale and r["method"] in args.methods)]
    for method in args.methods:
        r = run(method, d, X)
        r["scale"] = scale
        res["runs"].append(r)
        print(f"{scale} {method:18s} AUROC {r['auroc']:.3f} E-SHD {r['e_shd']:.1f} E-SHD(I-CPDAG) "
              f"{r['e_shd_icpdag']:.1f} edges {r['mean_edges']:.1f} CPU {r['cpu_s']:.1f}s", flush=True)
        with open(args.out, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
