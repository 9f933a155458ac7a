"""Shared helpers for the DAG-DGP benchmarks: one-thread set-up, JSON output, README regeneration."""
import json
import os
import platform
import sys
import time

import torch


def _load_tree_state():
    """``benchmarks/tree_state.py``, however this module was imported (script, ``benchmarks.common``, tests)."""
    import importlib.util

    name = "pyro_dag_benchmarks_tree_state"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, os.path.join(os.path.dirname(os.path.abspath(__file__)), "tree_state.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[name] = module
    return sys.modules[name]


tree_state = _load_tree_state()
tree_state.watch_processes()   # so that library_used knows when a run's numbers may come from another process

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


def code_state(library_path=None):
    """The library code a benchmark measures (``tree_state.code_state``): ``tree``, the git tree hash of the
    ``pyro_dag/`` folder as it is on disk (``git rev-parse HEAD:pyro_dag`` when it has no uncommitted changes), the
    commit, the commit's library tree and the library files that differed from it (a shared working tree can hold
    other people's uncommitted edits while a benchmark runs). ``benchmarks/report.py`` marks a section measured on
    another tree than the current one as stale."""
    return tree_state.code_state()


def code_state_after():
    """:func:`code_state` with ``used`` (``tree_state.library_used``): the library modules this process has loaded
    and whether it started other processes. Call it only after the numbers it labels were computed (a row's record,
    taken when the row is done): a module loaded later cannot have produced them, one loaded earlier is listed."""
    return dict(code_state(), used=tree_state.library_used())


def library_used():
    """``tree_state.library_used()`` (see :func:`code_state_after` for when to take it)."""
    return tree_state.library_used()


#: The library's state when this benchmark process started (it imports the library about then): what
#: ``write_json`` records, so that edits made to the tree while a long run goes on are not attributed to it.
CODE_AT_START = code_state()


def write_json(name, payload):
    """Write ``results/NAME.json`` with ``environment`` and ``code`` (``CODE_AT_START``, unless the payload records
    its own ``code``) added; ``code`` gets ``used``, the library modules this process loaded and whether it started
    other processes (``tree_state.library_used``), so that a later change to modules it did not run leaves its
    numbers current."""
    os.makedirs(RESULTS, exist_ok=True)
    path = os.path.join(RESULTS, f"{name}.json")
    payload = dict(payload, environment=environment())
    payload.setdefault("code", CODE_AT_START)
    if isinstance(payload["code"], dict) and "used" not in payload["code"]:
        payload["code"] = dict(payload["code"], used=tree_state.library_used())
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


def subprocess_result(proc):
    """The JSON payload a benchmark's child process printed on a line starting ``RESULT ``, or ``{"error": ...}`` with
    the last line of its stderr when it printed none (``proc``: a finished ``subprocess.run`` with text output)."""
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {"error": (proc.stderr.strip().splitlines() or ["died without a result"])[-1][:300]}


#: The release before the data-driven defaults (noise rule, pilot kernels, exact fits, hidden-node start): issue 43's
#: "previous release", which the set-up and NUTS benchmarks run side by side with the current tree.
PREVIOUS_RELEASE = "9790281"


def previous_tree(commit):
    """A temporary folder holding ``pyro_dag/`` as it was at ``commit`` (``git archive`` of this repository), to run
    an earlier release side by side with the current tree (``PYTHONPATH`` set to the folder)."""
    import subprocess
    import tempfile
    folder = tempfile.mkdtemp(prefix="pyro_dag_previous_")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    archive = subprocess.run(["git", "archive", commit, "pyro_dag"], cwd=root, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", folder], input=archive.stdout, check=True)
    return folder
