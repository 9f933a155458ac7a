"""Does the CSV workflow match the tools a user already has on a real data set? `pyro-dag fit --csv` on the Boston
housing data (MASS, 506 rows, log crim) with a DAG written down before fitting, 5-fold cross-validation, one-step
prediction (each node from the measured values of its parents), against an exact GP and linear regression on the
same columns and rows (issue 33: "the CSV path with one-step prediction at or below the best of exact GP / linear
regression on the same columns in 5-fold CV, or a printed warning that says it is not").

Run: ``python benchmarks/csv_boston.py`` (one thread); writes ``results/csv_boston.json``.
"""
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import one_thread, write_json, write_readme_section  # noqa: E402

#: The DAG (roots dis, rm, ptratio; target medv), as in benchmarks/zoo.py's Boston problem.
EDGES = [("dis", "nox"), ("dis", "lstat"), ("rm", "lstat"), ("dis", "crim"), ("lstat", "crim"),
         ("rm", "medv"), ("lstat", "medv"), ("crim", "medv"), ("nox", "medv"), ("ptratio", "medv")]


def main():
    one_thread()
    from pyro_dag.cli import main as cli
    from pyro_dag.datasets.boston import boston_raw

    df = boston_raw().copy()
    df["crim"] = np.log(df["crim"])
    cols = ["dis", "rm", "ptratio", "nox", "lstat", "crim", "medv"]
    with tempfile.TemporaryDirectory() as tmp:
        csv, dag, out = (os.path.join(tmp, n) for n in ("boston.csv", "boston.dag", "out"))
        df[cols].to_csv(csv, index=False)
        with open(dag, "w") as f:
            f.write("".join(f"{a} -> {b}\n" for a, b in EDGES))
        argv = ["fit", "--csv", csv, "--graph", dag, "--folds", "5", "--predict", "one-step", "--no-progress",
                "--out", out]
        c0, w0 = time.process_time(), time.perf_counter()
        rc = cli(argv)
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        import json

        with open(os.path.join(out, "metrics.json")) as f:
            metrics = json.load(f)
    folds = metrics["folds"]
    per = {}
    for w, m in metrics["per_node"].items():
        per[w] = {"rmse": m["rmse"], "rmse_propagate": m.get("rmse_propagate"),
                  "baselines": {k: v["rmse"] for k, v in m["baselines"].items()},
                  "vs_baselines": m["vs_baselines"]}
    write_json("csv_boston", {
        "command": "pyro-dag " + " ".join(a if not a.startswith(tempfile.gettempdir()) else os.path.basename(a)
                                          for a in argv),
        "exit_code": rc, "edges": EDGES, "columns": cols, "k": folds["k"], "n_rows": metrics["n_rows"],
        "prediction": metrics["prediction"], "per_node": per, "fold_sd": folds.get("sd"),
        "num_inducing": metrics["num_inducing"], "cpu_seconds": cpu, "wall_seconds": wall})
    write_readme_section("csv_boston", None)


if __name__ == "__main__":
    main()
