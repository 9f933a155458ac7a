"""Intra-op threads for the library's own training loops: torch's default vs 1 vs 2 threads, idle and loaded.

Workloads (each run in a fresh Python process, so that torch starts with its own default thread count and no
``OMP_NUM_THREADS`` from the calling shell):

* ``structure``: ``pyro_dag.structure.fit`` on a linear-Gaussian SEM with p = 8 variables, n = 800 samples
  (``sample_sem(8, 800, seed=0)``), ``--structure-steps`` steps (default 150), no progress bar;
* ``collider``: ``pyro_dag.experiments.collider.fit_collider`` with the recommended recipe (antithetic pairs,
  natural-gradient steps after the first two thirds of the steps), ``--collider-steps`` steps (default 300),
  100 evaluation samples.

Thread settings: ``default`` (``num_threads=None``: the fit keeps the process's settings, i.e. torch's default,
one thread per core), ``1`` and ``2`` (``num_threads=1`` / ``2``: the fit runs inside
``pyro_dag.threads.limit_threads``). Conditions: ``idle`` and ``loaded``, the latter with a background process
busy-looping 200 x 200 numpy matrix products on one core (single-threaded BLAS), started before and stopped after
the loaded runs by this script.

Writes ``benchmarks/results/threads.json`` and the ``threads`` section of ``benchmarks/README.md``. ``--quick``
runs a smoke test (a few steps, one repeat) and writes nothing unless ``--json`` is given.

Usage::

    python benchmarks/threads.py                 # the full comparison (minutes; run on a quiet machine)
    python benchmarks/threads.py --quick         # smoke test
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SETTINGS = ("default", "1", "2")
LOAD_CODE = ("import numpy as np\n"
             "a = np.random.default_rng(0).random((200, 200))\n"
             "while True:\n"
             "    a = a @ a\n"
             "    a /= np.abs(a).max()\n")
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS")


# ---------------------------------------------------------------------------------------------- worker side
def _worker(workload, setting, steps):
    import torch

    default_threads = torch.get_num_threads()
    num_threads = None if setting == "default" else int(setting)
    seen = {}
    if workload == "structure":
        from pyro_dag.datasets import sample_sem
        from pyro_dag.structure import fit

        d = sample_sem(8, 800, seed=0)

        def callback(step, svgd, loss):
            seen.setdefault("threads_in_fit", torch.get_num_threads())

        start = time.perf_counter()
        fit(d.data, likelihood="linear", num_steps=steps, progress=False, num_threads=num_threads,
            callback=callback)
        seconds = time.perf_counter() - start
    elif workload == "collider":
        from pyro_dag.experiments.collider import fit_collider

        start = time.perf_counter()
        res = fit_collider(steps=steps, antithetic=True, natural_gradient=0.01,
                           natural_gradient_after=max(1, (2 * steps) // 3), progress=False, num_eval_samples=100,
                           num_threads=num_threads)
        seconds = time.perf_counter() - start
        seen["train_seconds"] = res["metrics"]["train_seconds"]
        seen["final_elbo"] = res["metrics"]["final_elbo"]
    else:
        raise SystemExit(f"unknown workload {workload!r}")
    print(json.dumps(dict(seen, seconds=seconds, torch_default_threads=default_threads,
                          threads_after=torch.get_num_threads())))


# ---------------------------------------------------------------------------------------------- driver side
def _clean_env():
    env = {k: v for k, v in os.environ.items() if k not in THREAD_VARS}
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _run_one(workload, setting, steps, timeout):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", workload, "--setting", setting, "--steps", str(steps)]
    start = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=_clean_env(), capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"seconds": None, "timeout": timeout, "wall": time.perf_counter() - start}
    if proc.returncode != 0:
        raise RuntimeError(f"{workload} / {setting} failed:\n{proc.stderr[-3000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    out["wall"] = time.perf_counter() - start
    return out


class BackgroundLoad:
    """A child process busy-looping single-threaded numpy matmuls on one core; stopped on exit."""

    def __enter__(self):
        env = dict(_clean_env(), **{k: "1" for k in THREAD_VARS})
        self.proc = subprocess.Popen([sys.executable, "-c", LOAD_CODE], env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # let it start spinning
        if self.proc.poll() is not None:
            raise RuntimeError("the background load process exited at once")
        return self

    def __exit__(self, *exc):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return False


def _median(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[len(xs) // 2] if xs else None


def _table(results, steps):
    def fmt(x):
        return "timeout" if x is None else f"{x:.1f}"

    lines = ["| workload | condition | torch default threads (s) | 1 thread (s) | 2 threads (s) | default / 1 |",
             "|---|---|---|---|---|---|"]
    for r in results:
        s = r["seconds"]
        ratio = (f"{s['default'] / s['1']:.1f}x" if s.get("default") and s.get("1") else "-")
        label = {"structure": f"structure.fit, p = 8, n = 800, {steps['structure']} steps",
                 "collider": f"fit_collider (recommended recipe), {steps['collider']} steps"}[r["workload"]]
        lines.append(f"| {label} | {r['condition']} | {fmt(s.get('default'))} | {fmt(s.get('1'))} | "
                     f"{fmt(s.get('2'))} | {ratio} |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: few steps, one repeat, writes nothing")
    parser.add_argument("--structure-steps", type=int, default=None, help="structure.fit steps (default 150)")
    parser.add_argument("--collider-steps", type=int, default=None, help="fit_collider steps (default 300)")
    parser.add_argument("--repeats", type=int, default=None, help="runs per cell, median reported (default 2)")
    parser.add_argument("--workloads", default="structure,collider", help="comma-separated (default both)")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per run before giving up")
    parser.add_argument("--json", default=None, help="where to write the JSON (default results/threads.json)")
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--setting", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.worker, args.setting, args.steps)

    steps = {"structure": args.structure_steps or (5 if args.quick else 150),
             "collider": args.collider_steps or (6 if args.quick else 300)}
    repeats = args.repeats or (1 if args.quick else 2)
    workloads = [w for w in args.workloads.split(",") if w]
    results = []
    for condition in ("idle", "loaded"):
        load = BackgroundLoad() if condition == "loaded" else None
        if load is not None:
            load.__enter__()
        try:
            for workload in workloads:
                runs = {s: [] for s in SETTINGS}
                for _ in range(repeats):
                    for setting in SETTINGS:  # interleaved, so that drifts in the machine's load hit every setting
                        runs[setting].append(_run_one(workload, setting, steps[workload], args.timeout))
                        print(f"{condition:6s} {workload:9s} threads={setting:7s} "
                              f"{runs[setting][-1]['seconds']} s", flush=True)
                results.append({"workload": workload, "condition": condition, "steps": steps[workload],
                                "seconds": {s: _median([r["seconds"] for r in runs[s]]) for s in SETTINGS},
                                "runs": runs})
        finally:
            if load is not None:
                load.__exit__(None, None, None)
    table = _table(results, steps)
    print(table)
    if args.quick and args.json is None:
        return 0
    sys.path.insert(0, HERE)
    from common import RESULTS, environment, write_readme_section

    path = args.json or os.path.join(RESULTS, "threads.json")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"steps": steps, "repeats": repeats, "cpu_count": os.cpu_count(), "results": results,
                   "environment": environment()}, f, indent=2)
    if not args.quick:
        default_threads = results[0]["runs"]["default"][0].get("torch_default_threads")
        text = (
            "## Threads: torch's default vs 1 vs 2 intra-op threads\n\n"
            f"`python benchmarks/threads.py` ({os.cpu_count()} cores; torch's default here: {default_threads} "
            f"threads). Seconds per run (median of {repeats}), each run a fresh process without "
            "`OMP_NUM_THREADS`; `default` keeps torch's setting (`num_threads=None`), `1` and `2` pass "
            "`num_threads` to the fit, which runs inside `pyro_dag.threads.limit_threads`. `loaded`: a background "
            "process busy-loops single-threaded numpy matrix products on one core. The library's loops "
            "(`structure.fit`, `fit_collider`, `pyro-dag fit`) default to one thread.\n\n" + table)
        write_readme_section("threads", text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
