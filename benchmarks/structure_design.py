"""Sequential experimental design for structure learning: how many experiments until the exact posterior puts 0.9
on the true DAG, choosing each next experiment by expected information gain (``structure.next_experiment``;
Murphy 2001, Tong & Koller 2001, Agrawal et al. 2019), at random, or round robin.

Data: Erdős-Rényi DAGs with p nodes and p edges, weights ±U(0.5, 1.5), unit noise; 500 observational rows (``--obs-rows``), then
experiments of 50 rows each, each setting one node to N(0, 1) (its raw scale is then that of the observational
noise). After each experiment the exact interventional BGe posterior is recomputed from all the rows
(``exact_posterior(..., interventions=mask)``) and ``P(true DAG | data)`` read exactly, with the probability that
no true edge is reversed (``post.prob`` of that evidence, exact): the orientation, the part of the graph only
experiments can settle (the posterior mass on DAGs with extra weak edges shrinks only like ``N^-1/2`` with the
number of rows, whichever node is set). The three strategies see
the same data-generating DAG and weights per seed; a run stops when both reach 0.9 or after ``--max-experiments``
(a run that does not reach 0.9 is counted as that maximum: a lower bound). EIG: ``next_experiment(post, num_rows=50, num_samples=16)`` over
the p single-node candidates. Random: a uniformly drawn node. Round robin: the nodes in a fixed random order.

    OMP_NUM_THREADS=1 flock /tmp/pyro_dag_bench.lock python benchmarks/structure_design.py --p 8 --seeds 20
"""
import argparse
import json
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import structure_common as sc  # noqa: E402

sc.single_thread()

import numpy as np  # noqa: E402

from pyro_dag.structure import exact_posterior, next_experiment  # noqa: E402

PATH = os.path.join(sc.RESULTS, "structure_design.json")
OBS_ROWS = 500
EXP_ROWS = 50
EIG_SAMPLES = 16
THRESHOLD = 0.9


def network(p, seed):
    rng = np.random.default_rng(seed)
    order = rng.permutation(p)
    pairs = [(order[a], order[b]) for a in range(p) for b in range(a + 1, p)]
    A = np.zeros((p, p), dtype=np.int64)
    for k in rng.choice(len(pairs), size=p, replace=False):
        A[pairs[k]] = 1
    W = A * rng.uniform(0.5, 1.5, size=(p, p)) * rng.choice([-1, 1], size=(p, p))
    return A, W, order


def draw(W, order, targets, n, rng):
    p = W.shape[0]
    X = np.zeros((n, p))
    for j in order:
        X[:, j] = rng.normal(size=n) if j in targets else X @ W[:, j] + rng.normal(size=n)
    m = np.zeros((n, p), dtype=bool)
    m[:, list(targets)] = True
    return X, m


def run(strategy, p, seed, max_experiments, obs_rows=OBS_ROWS, exp_rows=EXP_ROWS):
    A, W, order = network(p, seed)
    rng = np.random.default_rng(1000 + seed)           # the data stream (same start for every strategy)
    choice_rng = np.random.default_rng(2000 + seed)
    X, mask = draw(W, order, (), obs_rows, rng)
    robin = list(np.random.default_rng(3000 + seed).permutation(p))
    no_reversal = {(int(j), int(i)): False for i, j in zip(*np.nonzero(A))}
    trace, orient, chosen = [], [], []
    first = {"dag": None, "orientation": None}
    t0 = time.process_time()
    for k in range(max_experiments + 1):
        post = exact_posterior(X, "bge", interventions=mask if mask.any() else None)
        trace.append(math.exp(post._dag_log_prob(A)))
        orient.append(post.prob(no_reversal))
        for key, val in (("dag", trace[-1]), ("orientation", orient[-1])):
            if first[key] is None and val >= THRESHOLD:
                first[key] = k
        if (first["dag"] is not None and first["orientation"] is not None) or k == max_experiments:
            break
        if strategy == "eig":
            best = next_experiment(post, num_rows=exp_rows, num_samples=EIG_SAMPLES, seed=seed * 100 + k)[0]
            node = int(best.targets[0])
        elif strategy == "random":
            node = int(choice_rng.integers(p))
        else:
            node = int(robin[k % p])
        chosen.append(node)
        Xn, mn = draw(W, order, (node,), exp_rows, rng)
        X, mask = np.concatenate([X, Xn]), np.concatenate([mask, mn])
    return {"strategy": strategy, "p": p, "seed": seed, "experiments": first["dag"],
            "experiments_orientation": first["orientation"], "max_experiments": max_experiments, "trace": trace,
            "trace_orientation": orient, "chosen": chosen, "cpu_s": time.process_time() - t0, "load": sc.load_avg(),
            "edges": int(A.sum()), "obs_rows": obs_rows, "exp_rows": exp_rows}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--p", type=int, default=8)
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(20)))
    ap.add_argument("--strategies", nargs="+", default=["eig", "random", "round_robin"])
    ap.add_argument("--max-experiments", type=int, default=30)
    ap.add_argument("--obs-rows", type=int, default=OBS_ROWS)
    ap.add_argument("--exp-rows", type=int, default=EXP_ROWS)
    ap.add_argument("--out", default=PATH)
    args = ap.parse_args()
    res = json.load(open(args.out)) if os.path.exists(args.out) else {"runs": []}
    res["settings"] = dict(eig_samples=EIG_SAMPLES, threshold=THRESHOLD,
                           max_experiments=args.max_experiments)
    done = {(r["p"], r["seed"], r["strategy"], r["obs_rows"], r["exp_rows"]) for r in res["runs"]}
    for seed in args.seeds:
        for s in args.strategies:
            if (args.p, seed, s, args.obs_rows, args.exp_rows) in done:
                continue
            r = run(s, args.p, seed, args.max_experiments, args.obs_rows, args.exp_rows)
            res["runs"].append(r)
            print(f"p={args.p} seed={seed} {s:12s} experiments to 0.9 on the DAG {r['experiments']} on the "
                  f"orientation {r['experiments_orientation']} (P {r['trace'][-1]:.3f} / "
                  f"{r['trace_orientation'][-1]:.3f}) CPU {r['cpu_s']:.1f}s", flush=True)
            with open(args.out, "w") as f:
                json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
