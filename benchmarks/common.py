"""Shared helpers for the DAG-DGP benchmarks: one-thread set-up, JSON output, README regeneration."""
import json
import os
import platform
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
README = os.path.join(HERE, "README.md")


def one_thread():
    """Benchmarks run with one thread: on 2-core machines, two threads under load are 10-70x slower."""
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


def environment():
    return {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
            "threads": torch.get_num_threads(), "cuda": torch.cuda.is_available(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def code_state():
    """The commit the library was measured at and the library files that differed from it (a shared working tree can
    hold other people's uncommitted edits while a benchmark runs)."""
    import subprocess

    def git(*args):
        try:
            return subprocess.run(["git", *args], cwd=HERE, capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return ""
    modified = [line[3:] for line in git("status", "--porcelain", "--", "../pyro_dag").splitlines() if line.strip()]
    return {"commit": git("rev-parse", "HEAD").strip(), "modified": modified}


def write_json(name, payload):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    payload = dict(payload, environment=environment())
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
    return path


def write_readme_section(key, markdown):
    """Regenerate the whole ``benchmarks/README.md`` from ``benchmarks/results/*.json`` (``benchmarks/report.py``).

    Scripts call this after writing their JSON. ``key`` and ``markdown`` (the section the script used to splice in)
    are ignored: the README is generated as a whole, and each section's table and text live in ``report.py``."""
    return load_report().regenerate()


def load_report():
    """``benchmarks/report.py`` as a module, whichever way the calling script was started."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("pyro_dag_benchmarks_report", os.path.join(HERE, "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def timed(fn, repeats):
    """Seconds per call of ``fn`` (median over ``repeats`` calls)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]
