"""Set-up cost of the defaults by graph size (issue 43, item 1): ``DAGDGP(graph)`` + ``AutoStructuredGuide`` +
``train(..., num_steps=3)``, the current tree against an earlier release side by side.

Problems: Erdős–Rényi DAGs (``p`` nodes, ``p`` edges; isolated nodes dropped) and chains, data from a GP SEM
(:func:`pyro_dag.datasets.synthetic.synthetic_sem`, ``mechanism="gp"``, noise scale 0.3), ``n = 100`` cases; the
roots are the inputs, every other node observed (``hidden=0``), a random 20 % of them hidden, or (chains) only the
leaf observed (``hidden=1``). Each run is a fresh process (``PYTHONPATH`` = the tree, so each side imports its own
``pyro_dag``), one thread, one at a time; it reports the CPU seconds from ``DAGDGP(graph)`` to the end of the third
step, the peak resident memory of the process, and (current tree) the CPU seconds of the set-up stages: the noise
rule's pilot GPs, the exact fits of the nodes with observed inputs (collapsed bound) and the hidden-node start.

The earlier release is ``git archive``-d into a temporary folder (default: 9790281, the last commit before the noise
rule and the other data-driven defaults, issue 43's "previous release").

    flock /tmp/pyro_dag_bench.lock python benchmarks/setup_scaling.py [--quick]
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from common import PREVIOUS_RELEASE as PREVIOUS, code_state, previous_tree, write_json  # noqa: E402
from common import write_readme_section  # noqa: E402

WORKER = r"""
import json, os, random, resource, sys, time, functools, collections
os.environ["OMP_NUM_THREADS"] = "1"
import torch
torch.set_num_threads(1)
import networkx as nx
import pyro
import pyro_dag
print("TREE " + os.path.dirname(os.path.dirname(pyro_dag.__file__)), flush=True)
from pyro_dag import DAGDGP
from pyro_dag.datasets.synthetic import erdos_renyi_dag, synthetic_sem
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide

kind, p, hidden, precision, n = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], int(sys.argv[5])
stages = collections.defaultdict(float)


def timed(owner, name, label):
    f = getattr(owner, name, None)
    if f is None:
        return
    @functools.wraps(f)
    def g(*a, **k):
        t = time.process_time()
        try:
            return f(*a, **k)
        finally:
            stages[label] += time.process_time() - t
    setattr(owner, name, g)


from pyro_dag.dgp import model as model_module
from pyro_dag.infer.training import run as run_module
timed(model_module.DAGDGP, "_set_noise", "noise_rule")
timed(run_module, "fit_collapsed", "exact_fits")
timed(run_module, "start_hidden_nodes", "hidden_start")

if kind == "chain":
    A = torch.zeros(p, p, dtype=torch.long)
    A[torch.arange(p - 1), torch.arange(1, p)] = 1
else:
    A = erdos_renyi_dag(p, seed=0)
X = synthetic_sem(A, n, mechanism="gp", noise_scale=0.3, seed=0).data.double()
names = [f"v{i}" for i in range(p)]
g = nx.DiGraph()
g.add_nodes_from(names)
g.add_edges_from((names[i], names[j]) for i, j in A.nonzero().tolist())
g.remove_nodes_from([v for v in names if g.degree(v) == 0])
nonroots = [v for v in g if g.in_degree(v) > 0]
if hidden >= 1.0:
    hid = {v for v in nonroots if g.out_degree(v) > 0}
else:
    hid = set(random.Random(0).sample(nonroots, int(hidden * len(nonroots))))
col = {v: i for i, v in enumerate(names)}
inputs = {v: X[:, [col[v]]] for v in g if g.in_degree(v) == 0}
data = {v: X[:, [col[v]]] for v in nonroots if v not in hid}
pyro.set_rng_seed(0)
import warnings
warnings.simplefilter("ignore")
cpu = time.process_time()
model = DAGDGP(g).double()
guide = AutoStructuredGuide(model, precision=precision)
result = train(model, guide, inputs, data, num_steps=3, progress=False)
cpu = time.process_time() - cpu
print("RESULT " + json.dumps({"cpu_s": cpu, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                              "nodes": g.number_of_nodes(), "edges": g.number_of_edges(), "observed": len(data),
                              "hidden_nodes": len(hid), "stages": dict(stages),
                              "final_loss": float(result.losses[-1]) if len(result.losses) else None}))
"""

#: (graph kind, nodes, hidden fraction, guide precision, run the previous release too)
FULL = [
    ("er", 50, 0.0, "mean_field", True), ("er", 200, 0.0, "mean_field", True), ("er", 200, 0.0, "chordal", True),
    ("er", 200, 0.2, "mean_field", True), ("er", 500, 0.0, "mean_field", False),
    ("chain", 200, 1.0, "mean_field", True), ("chain", 200, 1.0, "chordal", True),
]
QUICK = [("er", 50, 0.0, "mean_field", True), ("er", 200, 0.0, "mean_field", True)]


def run_one(tree, case, n, timeout):
    kind, p, hidden, precision, _ = case
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1")
    try:
        # cwd = the tree: `python -c` puts the working directory first on sys.path, ahead of PYTHONPATH
        out = subprocess.run([sys.executable, "-c", WORKER, kind, str(p), str(hidden), precision, str(n)], env=env,
                             capture_output=True, text=True, timeout=timeout, cwd=tree)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    lines = [line for line in out.stdout.splitlines() if line.startswith("RESULT ")]
    tree_seen = [line[5:] for line in out.stdout.splitlines() if line.startswith("TREE ")]
    if not lines:
        return {"error": f"exit code {out.returncode}: " + (out.stderr or out.stdout)[-600:]}
    return dict(json.loads(lines[-1][7:]), tree=tree_seen[-1] if tree_seen else None)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two cases only")
    ap.add_argument("--previous", default=PREVIOUS, help="the earlier release's commit")
    ap.add_argument("--n", type=int, default=100, help="cases")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per run")
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args()
    prev = previous_tree(args.previous)
    rows = []
    for case in QUICK if args.quick else FULL:
        row = dict(zip(("graph", "nodes", "hidden", "precision"), case[:4]), n=args.n)
        row["current"] = run_one(ROOT, case, args.n, args.timeout)
        if case[4]:
            row["previous"] = run_one(prev, case, args.n, args.timeout)
        print(json.dumps(row), flush=True)
        rows.append(row)
    load = os.getloadavg()
    write_json("setup_scaling", {"rows": rows, "previous_commit": args.previous, "code": code_state(),
                                 "load": list(load), "n": args.n})
    if not args.no_readme:
        write_readme_section("setup_scaling", None)


if __name__ == "__main__":
    main()
