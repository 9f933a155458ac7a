"""Structure learning from known experiments on random linear-Gaussian networks: the exact interventional BGe
posterior (``exact_posterior(..., interventions=mask)``; Cooper & Yoo 1999, Eaton & Murphy 2007) against GIES
(Hauser & Bühlmann 2012, the ``gies`` package, BIC score, the same targets) and against the observational posterior
of the same pooled rows.

Data: Erdős-Rényi DAGs with p nodes and p edges, weights ±U(0.5, 1.5), unit noise; 200 observational rows and one
experiment of 200 rows on each of ``p // 2`` distinct random single nodes (set to N(0, 1)); a harder cell with 100
observational rows and 50 per experiment (``--obs-rows 100 --exp-rows 50``). Metrics: DAG-level edge
AUROC (posterior edge marginals; for GIES the edge frequencies over 200 random members of its I-essential graph),
E-SHD at the interventional-CPDAG level of the experiments' target family (Hauser & Bühlmann 2012), and the number of
true edges oriented correctly in the I-essential graph of the estimate (ours: the expectation over posterior samples
and the MAP DAG's; GIES: its estimate). CPU seconds per data set, one thread.

    OMP_NUM_THREADS=1 flock /tmp/pyro_dag_bench.lock python benchmarks/structure_interventions.py --p 8 12 --seeds 5
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

from pyro_dag.graph import cpdag_to_dags, dag_to_icpdag  # noqa: E402
from pyro_dag.metrics.structure import auroc, expected_shd  # noqa: E402
from pyro_dag.structure import exact_posterior  # noqa: E402

PATH = os.path.join(sc.RESULTS, "structure_interventions.json")
OBS_ROWS = 200
EXP_ROWS = 200


def simulate(p, seed, obs_rows=OBS_ROWS, exp_rows=EXP_ROWS):
    """``(X [N, p], mask [N, p], A [p, p], family)``: an ER DAG with p edges, observational rows and one experiment
    per target node."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(p)
    pairs = [(order[a], order[b]) for a in range(p) for b in range(a + 1, p)]
    A = np.zeros((p, p), dtype=np.int64)
    for k in rng.choice(len(pairs), size=p, replace=False):
        A[pairs[k]] = 1
    W = A * rng.uniform(0.5, 1.5, size=(p, p)) * rng.choice([-1, 1], size=(p, p))
    targets = [()] + [(int(t),) for t in rng.choice(p, size=p // 2, replace=False)]
    blocks, masks = [], []
    for T in targets:
        n = obs_rows if not T else exp_rows
        X = np.zeros((n, p))
        for j in order:
            X[:, j] = rng.normal(size=n) if j in T else X @ W[:, j] + rng.normal(size=n)
        m = np.zeros((n, p), dtype=bool)
        m[:, list(T)] = True
        blocks.append(X)
        masks.append(m)
    return np.concatenate(blocks), np.concatenate(masks), A, targets


def oriented(ic, A):
    """True edges ``i -> j`` directed as ``i -> j`` in the I-essential graph ``ic`` (``[k, p, p]`` or ``[p, p]``)."""
    ic = np.asarray(ic)
    return ((ic == 1) & (np.swapaxes(ic, -1, -2) == 0) & (A == 1)).sum((-1, -2))


def run(method, X, mask, A, targets, seed):
    family = [list(t) for t in targets]
    t0 = time.process_time()
    if method in ("ours", "observational"):
        post = exact_posterior(X, "bge", interventions=mask if method == "ours" else None)
        P = post.edge_probs().numpy()
        S = post.sample(1000, seed=seed).numpy().astype(np.int8)
        A_map = post.map_dag().numpy().astype(np.int8)
        cpu = time.process_time() - t0
        ic_s = dag_to_icpdag(S, family)
        out = {"oriented": float(oriented(ic_s, A).mean()),
               "oriented_map": int(oriented(dag_to_icpdag(A_map, family), A))}
    elif method == "gies":
        import gies

        data = [X[(mask == np.isin(np.arange(X.shape[1]), t)[None, :]).all(1)] for t in targets]
        est, _ = gies.fit_bic(data, family)
        cpu = time.process_time() - t0
        est = (np.asarray(est) != 0).astype(np.int8)
        S = cpdag_to_dags(est, num_samples=200, seed=seed)
        P = S.mean(0)
        out = {"oriented": float(oriented(est, A)), "oriented_map": int(oriented(est, A))}
    else:
        raise ValueError(method)
    out.update(auroc=auroc(P, A), e_shd_icpdag=expected_shd(S, A, level="cpdag", targets=family),
               e_shd_dag=expected_shd(S, A), cpu_s=cpu, true_edges=int(A.sum()),
               identifiable=int(oriented(dag_to_icpdag(A, family), A)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=int, nargs="+", default=[8, 12])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--methods", nargs="+", default=["ours", "observational", "gies"])
    ap.add_argument("--obs-rows", type=int, default=OBS_ROWS)
    ap.add_argument("--exp-rows", type=int, default=EXP_ROWS)
    ap.add_argument("--out", default=PATH)
    args = ap.parse_args()
    res = json.load(open(args.out)) if os.path.exists(args.out) else {"runs": []}
    done = {(r["p"], r["seed"], r["method"], r.get("obs_rows", OBS_ROWS), r.get("exp_rows", EXP_ROWS))
            for r in res["runs"]}
    for p in args.p:
        for seed in range(args.seeds):
            X, mask, A, targets = simulate(p, seed, args.obs_rows, args.exp_rows)
            for method in args.methods:
                if (p, seed, method, args.obs_rows, args.exp_rows) in done:
                    continue
                r = run(method, X, mask, A, targets, seed)
                r.update(p=p, seed=seed, method=method, rows=len(X), experiments=len(targets) - 1,
                         obs_rows=args.obs_rows, exp_rows=args.exp_rows,
                         load=sc.load_avg())
                res["runs"].append(r)
                print(f"p={p} seed={seed} {method:13s} AUROC {r['auroc']:.3f} E-SHD(I-CPDAG) {r['e_shd_icpdag']:.2f} "
                      f"oriented {r['oriented']:.2f}/{r['identifiable']} ({r['true_edges']} edges) "
                      f"CPU {r['cpu_s']:.1f}s", flush=True)
                with open(args.out, "w") as f:
                    json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
