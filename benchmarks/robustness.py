"""The bad-input battery: does bad input get a clear answer? (issue 35, part C)

    python benchmarks/robustness.py                 # every case, writes benchmarks/results/robustness.json
    python benchmarks/robustness.py --quick         # the quick subset (writes robustness_quick.json)
    python benchmarks/robustness.py --only csv_ ckpt_   # cases whose id starts with one of these
    python benchmarks/robustness.py --list          # the cases, one a line

Tiny cases (a handful of rows, a few training steps), as a new user would try them, over four classes: ``bad
input`` (NaN / inf / overflowing values, wrong shapes and dtypes, strings, empty and constant data, unknown or
duplicated names, cycles, extreme scales), ``fault`` (a full disk, corrupt / truncated / foreign checkpoints,
leftover temporary files), ``interruption`` (``KeyboardInterrupt`` inside a training step) and ``misuse`` (valid
Python, wrong use of the API: ``num_samples=0``, subsample sizes, argument order, half precision, ...), across
``DAGDGP`` + ``train`` + ``predict``, ``AutoStructuredGuide``, ``MultiFidelityEmulator``, ``LatentSEM``, LaMP,
``pyro_dag.structure``, ``to_inference_data`` and the ``pyro-dag`` command line (run in process through
``pyro_dag.cli.main``). The cases are in ``benchmarks/robustness_cases.py``; a few ``control`` cases (valid input
on every entry point) check the harness itself and are not counted.

**What a case declares.** ``names``: substrings (compared case-insensitively) of which an answer must contain one
to name the offending input (the node, column, argument or file); ``forbid``: substrings that make an answer
misleading (e.g. ``"use float64"`` to a float64 model); ``max_work``: the optimisation steps (counted by a global
``torch.optim`` step hook, plus work a case counts itself, e.g. DAG draws) allowed before an error (``None``: any,
for faults that strike while the outputs are written, necessarily after the work);
``wrong(result)``: why a returned result is wrong (non-finite numbers, a 0-byte file, ...), ``None`` when sound;
``good(result)``: whether a returned result is a correct answer (``expect="refuse"``: never, garbage must be refused;
``expect="accept"``: a valid but unusual input, any sound result; ``expect="either"``: an input that may be
refused or handled, so a clear refusal and a sound result are both good); ``after(ctx)``: the state left behind (files on
disk, parameters), checked whether or not the call raised.

**The rules** (applied by :func:`classify`, in this order; the first that applies decides):

1. ``after`` reports a problem (a 0-byte or truncated output, a leftover temporary file, non-finite parameters
   after an interruption): **silently wrong**.
2. The call raised (or the command exited with a non-zero status; its stderr is the message):

   a. **poor** if the error is *raw*: for the command line, any exception out of ``main`` (the user sees a Python
      traceback) or a printed traceback; otherwise its type is neither a class of ``pyro_dag`` nor ``ValueError`` /
      ``TypeError`` / ``OSError`` (and subclasses), or its innermost frame is inside a third-party package (torch,
      pyro, numpy, pandas, ...) or the standard library, or the command printed a Python traceback. An ``OSError``
      carrying the errno that a fault case injected counts as the fault reported, wherever raised;
   b. **poor** if it came late: more than ``max_work`` optimisation steps ran first;
   c. **poor** if the message contains a ``forbid`` substring (misleading);
   d. **poor** if the message contains none of ``names`` (it does not say which input is wrong);
   e. **poor** if the case is ``expect="accept"`` (a valid input refused);
   f. otherwise **clear**.
3. The call returned:

   a. **poor** if a warning contains a ``forbid`` substring (misleading);
   b. **clear** if a warning (not one of :data:`UNRELATED_WARNINGS`, which are about the fit, not the input, nor a
      deprecation) contains one of ``names``;
   c. **silently wrong** if ``wrong(result)`` reports a problem;
   d. **clear** if ``good(result)`` is true;
   e. otherwise **poor**: the input was accepted without a word (silently ignored), or the reason ``good`` gave
      (a string).

A case that runs past :data:`CASE_TIMEOUT_S` seconds is **poor** (no answer). Every outcome is recorded with the
reason (which rule), the exception's type and the first 200 characters of its message, and the seconds.
Issue 42 added four classes (``benchmarks/robustness_cases_files.py``): ``files`` (saved fits and checkpoints that
must prove what they hold: changed bytes, another precision or kernel class, old formats, files of another kind),
``concurrency`` (one writer per checkpoint, two runs on one path, a failed write's temporary file), ``new inputs``
(interventional effects, the GP score's kernel, ``discover`` with the GP score, the emulator's exact fit, zero rows)
and ``scale`` (inputs and data at 1e-8 / 1e8 met by unit-started kernels).

Issue 41's rule (each new feature extends the battery in the same change) added the cases of
``benchmarks/robustness_cases_features.py`` and ``robustness_cases_features_more.py``, in the same classes: bad
values and contradictions of ``train(noise_step=, minibatch=)``, ``DAGDGP(deterministic_amplitude=)``,
``persist.load(dtype=, map_location=)``, ``DeepRegression(method=)``, ``LatentMAP(init=, lengthscale=)`` and the
emulator's kernel choice; saved fits whose ``exact_fit_nodes`` or kernel-choice record was rewritten; resumes with
noise steps and minibatches; interruptions inside a noise step, a refit and the kernels' cross-validation; two
processes saving and loading one fit. ``benchmarks/robustness_cases_candidates.py`` has ``train``'s candidate starts
(``candidate_starts`` / ``candidate_steps``): bad values, the options they cannot run with or that would do nothing,
``KeyboardInterrupt`` inside a candidate and inside the continuation (beside a run without candidates), a callback
that stops a candidate, a non-finite loss in one candidate and in every one, two processes training with candidates
in one directory, and a fit trained with candidates saved and loaded.

Target (issue 42): none silently wrong, at most 3 poor (issue 35's: 0 and 5).
"""
import argparse
import contextlib
import errno as errno_module
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:  # the library of this checkout, whichever way the script was started
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

SCHEMA = 1
CLASSES = ("bad input", "fault", "interruption", "misuse", "files", "concurrency", "new inputs", "scale")
OUTCOMES = ("clear", "poor", "silently wrong")
#: Seconds after which a case is stopped and counted as poor (no answer).
CASE_TIMEOUT_S = 120
#: Targets of issue 42 (issue 35's were 0 and 5).
TARGET_SILENTLY_WRONG, TARGET_POOR = 0, 3
#: Warning categories about the quality of a fit rather than about the input (they name nodes in every fit).
UNRELATED_WARNINGS = ("BaselineWarning", "ParamStoreCollisionWarning")
#: Exception types that may carry a clear answer (with ``pyro_dag``'s own classes).
CLEAR_TYPES = (ValueError, TypeError, OSError)
PACKAGE = os.path.join(ROOT, "pyro_dag")
#: Files of the battery itself: frames there are the injected fault, not the library.
BATTERY_FILES = {os.path.join(HERE, name) for name in ("robustness.py", "robustness_cases.py",
                                                        "robustness_cases_files.py", "robustness_cases_features.py",
                                                        "robustness_cases_features_more.py",
                                                        "robustness_cases_candidates.py")}


def reject(result):
    """``good`` of ``expect="refuse"``: no returned result is a correct answer to garbage."""
    return False


def accept(result):
    """``good`` of ``expect="accept"``: a sound result (``wrong`` found nothing) is a correct answer."""
    return True


@dataclass
class Case:
    """One bad-input case: ``run(ctx)`` makes the call; the rest says what a good answer is (module docstring)."""
    id: str
    cls: str
    entry: str
    run: Callable
    names: tuple
    expect: str = "refuse"
    wrong: Optional[Callable] = None
    good: Optional[Callable] = None
    after: Optional[Callable] = None
    forbid: tuple = ()
    max_work: int = 0
    quick: bool = False
    what: str = ""

    def __post_init__(self):
        assert self.cls in CLASSES + ("control",), self.cls
        assert self.expect in ("refuse", "accept", "either"), self.expect
        if isinstance(self.names, str):
            self.names = (self.names,)
        if isinstance(self.forbid, str):
            self.forbid = (self.forbid,)
        if self.good is None:
            self.good = reject if self.expect == "refuse" else accept


@dataclass
class Ctx:
    """What a case gets: a fresh temporary directory, a work counter and the fault that was injected."""
    tmp: str
    work: int = 0
    injected_errno: Optional[int] = None
    notes: dict = field(default_factory=dict)

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def start(self):
        """The call under test starts here: work done in the set-up is not counted."""
        self.work = 0


@dataclass
class CLIResult:
    """What ``pyro_dag.cli.main`` gave: its exit status, what it printed and its output directory."""
    code: int
    stdout: str
    stderr: str
    out: Optional[str] = None


class InjectedInterrupt(KeyboardInterrupt):
    """The ``KeyboardInterrupt`` an interruption case raises (a real Ctrl-C still stops the battery)."""


class CaseTimeout(BaseException):
    pass


# ----------------------------------------------------------------------------------------------------------------
# Classification
# ----------------------------------------------------------------------------------------------------------------
def _contains(text, subs):
    low = (text or "").lower()
    return [s for s in subs if s.lower() in low]


def _innermost_frame(exc):
    """The file of the innermost traceback frame outside the battery (the injected fault's frames skipped)."""
    tb, last = exc.__traceback__, None
    while tb is not None:
        fn = os.path.abspath(tb.tb_frame.f_code.co_filename)
        if fn not in BATTERY_FILES:
            last = fn
        tb = tb.tb_next
    return last


def _is_library_type(exc):
    return type(exc).__module__.split(".")[0] == "pyro_dag"


def raw_reason(exc, ctx):
    """Why ``exc`` is a raw error (rule 2a), or ``None``."""
    if isinstance(exc, OSError) and ctx.injected_errno is not None and exc.errno == ctx.injected_errno:
        return None
    if not (_is_library_type(exc) or isinstance(exc, CLEAR_TYPES)):
        return f"raw {type(exc).__name__}"
    where = _innermost_frame(exc)
    if where is not None and not where.startswith(PACKAGE + os.sep):
        lib = "site-packages" in where or "dist-packages" in where
        return f"raw {type(exc).__name__} raised in {'a third-party package' if lib else 'the standard library'} " \
               f"({os.path.basename(os.path.dirname(where)) if lib else ''}{'/' if lib else ''}" \
               f"{os.path.basename(where)})"
    return None


def _library_warnings(caught):
    """The warnings a call raised, as ``"Category: message"``, without :data:`UNRELATED_WARNINGS` and the API
    deprecation categories. Any source counts: the names a case looks for are specific enough that only a
    warning about that input contains them (and a library warning's ``stacklevel`` often points at the caller)."""
    out = []
    for w in caught:
        cat = w.category
        if cat.__name__ in UNRELATED_WARNINGS or issubclass(cat, (DeprecationWarning, PendingDeprecationWarning)):
            continue
        out.append(f"{cat.__name__}: {w.message}")
    return out


def classify(case, ctx, exc=None, result=None, caught=()):
    """``(outcome, reason)`` by the rules of the module docstring."""
    if case.after is not None:
        problem = case.after(ctx)
        if problem:
            return "silently wrong", f"left behind: {problem}"
    if isinstance(exc, CaseTimeout):
        return "poor", f"no answer within {CASE_TIMEOUT_S} s"
    if exc is None and isinstance(result, CLIResult) and result.code != 0:
        exc = SystemExit(result.code)
        message = cli_message(result.stderr) or result.stdout.strip()
        if "Traceback (most recent call last)" in result.stderr:
            return "poor", "the command printed a traceback"
        return _classify_error(case, ctx, exc, message, raw=None)
    if exc is not None:
        if isinstance(exc, SystemExit):  # argparse's parser.error / a command's SystemExit(message)
            message = str(exc.code) if not isinstance(exc.code, int) else ""
            if isinstance(result, CLIResult):
                message = (message + "\n" + cli_message(result.stderr)).strip()
            return _classify_error(case, ctx, exc, message, raw=None if message else "exit without a message")
        if case.entry.startswith("pyro-dag") and not isinstance(exc, InjectedInterrupt):
            return "poor", f"the command crashed with a traceback ({type(exc).__name__}: {str(exc)[:80]})"
        return _classify_error(case, ctx, exc, str(exc), raw=raw_reason(exc, ctx))
    messages = _library_warnings(caught)
    misleading = [m for m in messages if _contains(m, case.forbid)]
    if misleading:
        return "poor", f"misleading warning (says {_contains(misleading[0], case.forbid)[0]!r})"
    if any(_contains(m, case.names) for m in messages):
        return "clear", "warned, naming the input"
    problem = case.wrong(result) if case.wrong is not None else default_wrong(result)
    if problem:
        return "silently wrong", problem
    good = case.good(result)
    if isinstance(good, str):  # not a correct answer, and the case says why
        return "poor", good
    if good:
        return "clear", "correct result"
    return "poor", "accepted without a word (silently ignored)"


def cli_message(stderr):
    """What a command said about the error: from the last ``...: error:`` line on (argparse's usage block, which
    names every option, left out), else all of stderr."""
    lines = [ln for ln in (stderr or "").strip().splitlines()]
    for k in range(len(lines) - 1, -1, -1):
        if ": error:" in lines[k]:
            return "\n".join(lines[k:]).strip()
    return "\n".join(ln for ln in lines if not ln.startswith("usage:") and not ln.startswith("   ")).strip()


def _classify_error(case, ctx, exc, message, raw):
    if raw:
        return "poor", raw
    if case.max_work is not None and ctx.work > case.max_work:
        return "poor", f"raised after the work ({ctx.work} optimisation steps or draws)"
    bad = _contains(message, case.forbid)
    if bad:
        return "poor", f"misleading message (says {bad[0]!r})"
    if not _contains(message, case.names):
        return "poor", "the message names none of " + (", ".join(repr(n) for n in case.names[:4]) or "the inputs")
    if case.expect == "accept":
        return "poor", "a valid input refused"
    return "clear", "refused, naming the input"


# ----------------------------------------------------------------------------------------------------------------
# Soundness of results
# ----------------------------------------------------------------------------------------------------------------
def nonfinite(obj, path="result", _depth=0):
    """A description of the first non-finite number in ``obj`` (tensors, arrays, numbers, containers,
    NodePredictions, objects with ``mean``/``std``), or ``None``."""
    import math

    import numpy as np
    import torch

    if _depth > 6 or obj is None or isinstance(obj, (str, bytes, bool)):
        return None
    if torch.is_tensor(obj):
        if obj.is_floating_point() and obj.numel() and not bool(torch.isfinite(obj).all()):
            return f"{path} has non-finite values"
        return None
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind == "f" and obj.size and not np.isfinite(obj).all():
            return f"{path} has non-finite values"
        return None
    if isinstance(obj, float):
        return None if math.isfinite(obj) else f"{path} = {obj}"
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        fields = getattr(obj, "_fields", None)
        items = zip(fields, obj) if fields else enumerate(obj)
    elif hasattr(obj, "mean") and hasattr(obj, "std") and not callable(getattr(obj, "mean")):
        items = [("mean", obj.mean), ("std", obj.std)]
    else:
        return None
    for k, v in items:
        p = nonfinite(v, f"{path}[{k!r}]" if isinstance(obj, dict) else f"{path}.{k}", _depth + 1)
        if p:
            return p
    return None


def default_wrong(result):
    if isinstance(result, CLIResult):
        return None
    return nonfinite(result)


def broken_files(folder):
    """Files under ``folder`` that are empty, truncated or unreadable (JSON, CSV, PNG, .pt), or ``None``."""
    if folder is None or not os.path.isdir(folder):
        return None
    bad = []
    for dirpath, _, files in os.walk(folder):
        for fn in sorted(files):
            p = os.path.join(dirpath, fn)
            why = _broken(p)
            if why:
                bad.append(f"{os.path.relpath(p, folder)} {why}")
    return "; ".join(bad) or None


def _broken(p):
    size = os.path.getsize(p)
    if size == 0:
        return "at 0 bytes"
    try:
        if p.endswith(".json"):
            with open(p, encoding="utf-8") as f:
                json.load(f)
        elif p.endswith(".png"):
            with open(p, "rb") as f:
                data = f.read()
            if not data.startswith(b"\x89PNG") or b"IEND" not in data[-16:]:
                return "truncated (no PNG end chunk)"
        elif p.endswith(".csv"):
            import pandas as pd

            pd.read_csv(p)
        elif p.endswith(".pt"):
            import torch

            torch.load(p, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any failure to read back is a broken output
        return f"unreadable ({type(e).__name__})"
    return None


# ----------------------------------------------------------------------------------------------------------------
# Running
# ----------------------------------------------------------------------------------------------------------------
@contextlib.contextmanager
def _count_optimizer_steps(ctx):
    import torch

    def hook(optimizer, args, kwargs):
        ctx.work += 1

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from pyro_dag.infer.training.foreach_adam import ForeachAdam

    # train's Adam steps run ForeachAdam, which is not a torch.optim.Optimizer: its steps are counted here
    real_step = ForeachAdam.step

    def step(self, *a, **k):
        ctx.work += 1
        return real_step(self, *a, **k)

    handle = register_optimizer_step_pre_hook(hook)
    ForeachAdam.step = step
    try:
        yield
    finally:
        ForeachAdam.step = real_step
        handle.remove()


def _alarm(signum, frame):
    raise CaseTimeout()


def run_case(case):
    """Run one case in a fresh temporary directory and return its JSON row."""
    import numpy as np
    import pyro
    import torch

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    np.random.seed(0)
    torch.set_default_dtype(torch.float32)
    torch.set_num_threads(1)
    tmp = tempfile.mkdtemp(prefix="rb-")  # no case id in the path: messages that quote it must not match names
    ctx = Ctx(tmp=tmp)
    exc, result, caught = None, None, []
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    t0 = time.perf_counter()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(CASE_TIMEOUT_S)
    try:
        os.chdir(tmp)
        with warnings.catch_warnings(record=True) as caught, _count_optimizer_steps(ctx), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("always")
            try:
                result = case.run(ctx)
            except (Exception, SystemExit, InjectedInterrupt, CaseTimeout) as e:  # noqa: BLE001 - what we measure
                exc = e
        caught = list(caught)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
        os.chdir(cwd)
    seconds = time.perf_counter() - t0
    if isinstance(result, CLIResult) and exc is None:
        pass
    elif isinstance(exc, SystemExit):
        result = CLIResult(code=exc.code if isinstance(exc.code, int) else 1, stdout=out.getvalue(),
                           stderr=err.getvalue())
    try:
        outcome, reason = classify(case, ctx, exc=exc, result=result, caught=caught)
    except Exception as e:  # noqa: BLE001 - a check that cannot read the result is the battery's bug: say so
        outcome, reason = "error in the battery", f"{type(e).__name__}: {e}"
    message = ""
    if exc is not None:
        message = str(exc.code) if isinstance(exc, SystemExit) and not isinstance(exc.code, int) else str(exc)
        if isinstance(exc, SystemExit):
            message = (message + " " + cli_message(err.getvalue())).strip()
    elif isinstance(result, CLIResult) and result.code != 0:
        message = cli_message(result.stderr)
    message = message.replace(tmp + os.sep, "").replace(tmp, ".")
    row = {"id": case.id, "class": case.cls, "entry": case.entry, "what": case.what, "outcome": outcome,
           "reason": reason, "exception": None if exc is None else type(exc).__name__,
           "message": " ".join(message.split())[:200], "seconds": round(seconds, 3), "work": ctx.work,
           "warnings": [" ".join(m.split())[:200] for m in _library_warnings(caught)][:3]}
    if exc is not None and outcome == "poor" and reason.startswith("raw"):
        frames = traceback.extract_tb(exc.__traceback__)
        row["raised_at"] = f"{os.path.relpath(frames[-1].filename, ROOT)}:{frames[-1].lineno}" if frames else None
    shutil.rmtree(tmp, ignore_errors=True)
    return row


def summarise(rows):
    """Counts per class and outcome (controls apart), and the list of poor and silently wrong ids."""
    counted = [r for r in rows if r["class"] != "control"]
    by_class = {c: {o: 0 for o in OUTCOMES} for c in CLASSES}
    for r in counted:
        by_class[r["class"]][r["outcome"]] = by_class[r["class"]].get(r["outcome"], 0) + 1
    totals = {o: sum(by_class[c].get(o, 0) for c in CLASSES) for o in OUTCOMES}
    controls = [r for r in rows if r["class"] == "control"]
    return {"cases": len(counted), "by_class": by_class, "totals": totals,
            "controls": {"cases": len(controls), "clear": sum(r["outcome"] == "clear" for r in controls)},
            "poor": [r["id"] for r in counted if r["outcome"] == "poor"],
            "silently_wrong": [r["id"] for r in counted if r["outcome"] == "silently wrong"],
            "battery_errors": [r["id"] for r in rows if r["outcome"] not in OUTCOMES],
            "target": {"silently_wrong": TARGET_SILENTLY_WRONG, "poor": TARGET_POOR,
                       "met": totals["silently wrong"] == TARGET_SILENTLY_WRONG and totals["poor"] <= TARGET_POOR}}


def select(cases, quick=False, only=None):
    out = [c for c in cases if (not quick or c.quick)]
    if only:
        out = [c for c in out if any(c.id.startswith(o) for o in only)]
    return out


def _commit():
    """The checkout's commit, with ``+dirty`` when tracked files under ``pyro_dag/`` differ from it."""
    import subprocess

    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "pyro_dag"], cwd=ROOT,
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("+dirty" if dirty else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="only the quick subset")
    ap.add_argument("--only", nargs="+", default=None, metavar="PREFIX", help="cases whose id starts with one of these")
    ap.add_argument("--list", action="store_true", help="list the cases and exit")
    ap.add_argument("--out", default=None, help="the JSON to write (default benchmarks/results/robustness.json, "
                                                "robustness_quick.json with --quick or --only)")
    ap.add_argument("--no-readme", action="store_true", help="do not regenerate benchmarks/README.md")
    args = ap.parse_args(argv)
    os.environ["OMP_NUM_THREADS"] = "1"
    import torch

    torch.set_num_threads(1)
    import common   # its CODE_AT_START: the library tree this run measures, recorded before the cases run

    from robustness_cases import all_cases

    cases = select(all_cases(), args.quick, args.only)
    if args.list:
        for c in cases:
            print(f"{c.id:40s} {c.cls:12s} {c.entry:22s} {c.what}")
        return 0
    partial = args.quick or bool(args.only)
    out = args.out or os.path.join(HERE, "results", "robustness_quick.json" if partial else "robustness.json")
    rows = []
    t0 = time.perf_counter()
    for i, case in enumerate(cases):
        row = run_case(case)
        rows.append(row)
        print(f"[{i + 1}/{len(cases)}] {row['outcome']:15s} {case.id:40s} {row['seconds']:6.1f} s  {row['reason']}",
              flush=True)
    summary = summarise(rows)
    payload = {"schema": SCHEMA, "quick": args.quick, "only": args.only, "summary": summary, "rows": rows,
               "rules": "benchmarks/robustness.py module docstring", "seconds": round(time.perf_counter() - t0, 1)}
    payload["environment"] = common.environment()
    payload["commit"] = _commit()
    payload["code"] = common.CODE_AT_START   # report.py marks the section stale once the library tree changes
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(payload, f, indent=1)
    t = summary["totals"]
    print(f"{summary['cases']} cases: {t['clear']} clear, {t['poor']} poor, {t['silently wrong']} silently wrong "
          f"(target: 0 silently wrong, at most {TARGET_POOR} poor: {'met' if summary['target']['met'] else 'missed'});"
          f" wrote {out}")
    if not partial and not args.no_readme and args.out is None:
        common.write_readme_section("robustness", None)
    return 0


if __name__ == "__main__":
    sys.modules["robustness"] = sys.modules[__name__]  # the cases import the rules from here, not a second copy
    sys.exit(main())
