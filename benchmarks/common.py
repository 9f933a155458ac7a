"""Shared helpers for the DAG-DGP benchmarks: one-thread set-up, JSON output, README table sections."""
import json
import os
import platform
import re
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


def write_json(name, payload):
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    payload = dict(payload, environment=environment())
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
    return path


def write_readme_section(key, markdown):
    """Replace (or append) the README section delimited by ``<!-- key:start -->`` / ``<!-- key:end -->``."""
    start, end = f"<!-- {key}:start -->", f"<!-- {key}:end -->"
    text = open(README).read() if os.path.exists(README) else "# Benchmarks\n"
    block = f"{start}\n{markdown.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.S)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n"
    with open(README, "w") as f:
        f.write(text)


def timed(fn, repeats):
    """Seconds per call of ``fn`` (median over ``repeats`` calls)."""
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]
