"""Cross-validation cost of ``pyro-dag fit --csv`` (issue 43, item 2): ``--folds 5`` against one fit, on data of the
diabetes data's shape (442 rows, 10 inputs and a target; Efron, Hastie, Johnstone & Tibshirani 2004), generated
here so that nothing is downloaded: correlated inputs (three latent factors plus noise), a target that is a smooth
non-linear function of four of them plus noise, the graph every input -> target.

Each command runs in a fresh process with one thread (``--threads 1``), one after the other; the CPU seconds are
the child's user + system time (``resource.getrusage(RUSAGE_CHILDREN)``), so imports and the CSV's reading count
as a user sees them. The folds' own CPU seconds come from ``metrics.json`` (``folds.fold_cpu_seconds``).

    flock /tmp/pyro_dag_bench.lock python benchmarks/csv_folds.py
"""
import json
import os
import resource
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from common import code_state, write_json, write_readme_section  # noqa: E402

COLUMNS = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
#: issue 43's target: 5 folds in under this many times one fit's CPU.
TARGET_RATIO = 5.0


def write_data(folder, n=442, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(n, 3))
    X = Z @ rng.normal(size=(3, len(COLUMNS))) * 0.6 + rng.normal(size=(n, len(COLUMNS))) * 0.8
    f = 1.5 * X[:, 2] + np.sin(2 * X[:, 8]) + 0.5 * X[:, 3] * X[:, 4] - 0.8 * np.abs(X[:, 0])
    y = 150 + 60 * (f + 0.6 * rng.normal(size=n))
    csv = os.path.join(folder, "diabetes_like.csv")
    with open(csv, "w") as fh:
        fh.write(",".join(COLUMNS + ["target"]) + "\n")
        for i in range(n):
            fh.write(",".join(f"{v:.6f}" for v in X[i]) + f",{y[i]:.3f}\n")
    graph = os.path.join(folder, "graph.txt")
    with open(graph, "w") as fh:
        fh.write("\n".join(f"{c} -> target" for c in COLUMNS) + "\n")
    return csv, graph


def run(args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "pyro_dag.cli", *args], env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return cpu, out.stdout


def main():
    folder = tempfile.mkdtemp(prefix="pyro_dag_csv_folds_")
    csv, graph = write_data(folder)
    common = ["fit", "--csv", csv, "--graph", graph, "--threads", "1", "--no-progress"]
    one_cpu, _ = run(common + ["--out", os.path.join(folder, "one")])
    with open(os.path.join(folder, "one", "metrics.json")) as fh:
        one = json.load(fh)
    cv_cpu, stdout = run(common + ["--folds", "5", "--out", os.path.join(folder, "cv")])
    with open(os.path.join(folder, "cv", "metrics.json")) as fh:
        cv = json.load(fh)
    folds = cv.get("folds", {})
    fold_cpu = folds.get("fold_cpu_seconds") or []
    payload = {
        "rows": 442, "columns": 11, "one_fit_cpu_s": one_cpu, "folds5_cpu_s": cv_cpu, "ratio": cv_cpu / one_cpu,
        "fold_cpu_s": fold_cpu, "target_ratio": TARGET_RATIO,
        "one_fit_rmse": one["per_node"]["target"]["rmse"], "cv_rmse": cv["per_node"]["target"]["rmse"],
        "cv_rmse_sd": folds.get("per_node", {}).get("target", {}).get("rmse", {}).get("sd"),
        "fold_lines": [line for line in stdout.splitlines() if line.startswith("fold ")],
        "load": list(os.getloadavg()), "code": code_state(),
    }
    print(json.dumps(payload, indent=1))
    write_json("csv_folds", payload)
    write_readme_section("csv_folds", None)


if __name__ == "__main__":
    main()
