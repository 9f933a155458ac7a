"""Pyro's own autoguide tests run against AutoStructuredGuide, beside AutoMultivariateNormal and AutoGaussian.

Runs the conformance harness (``--harness PATH`` to its ``run.sh``; the default is the development workspace's
copy next to the repository, which is not distributed with the package), which copies Pyro's unmodified
``test_autoguide.py``, ``autoguide/test_gaussian.py`` and ``autoguide/test_inference.py`` (pyro-ppl at commit
ff6ae1c9) to a temporary folder, adds our guide to every guide parametrisation and runs them with Pyro's
pytest configuration (a warning fails a test). It then parses the harness's per-step lines and its final line,
``AutoStructuredGuide: N passed, M failed of the Pyro autoguide tests that AutoMultivariateNormal or
AutoGaussian pass``, writes ``results/pyro_conformance.json`` and the ``pyro-conformance`` section of
``benchmarks/README.md``. When the harness is not there, it says so and exits 0.

    python benchmarks/pyro_conformance.py                      # every step but the diagnosis scripts, ~5 min
    python benchmarks/pyro_conformance.py --steps ours_fast cmp_fast
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

from common import write_json, write_readme_section

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_HARNESS = os.path.join(ROOT, "..", "shared", "conformance", "pyro-autoguide", "run.sh")
# every step of the harness except "checks" (diagnosis scripts that print, not pass/fail)
DEFAULT_STEPS = ["ours_fast", "ours_median", "ours_exact", "ours_gaussian", "ours_inference",
                 "ours_meanfield_nowarn", "cmp_fast", "cmp_exact", "cmp_gaussian", "cmp_inference"]

# The harness's reference result before AutoStructuredGuide was made a Pyro autoguide (its README).
BEFORE = {
    "final": {"passed": 46, "failed": 51},
    "files": {"test_autoguide.py": {"passed": 21, "failed": 58, "xfailed": 2},
              "test_gaussian.py": {"passed": 21},
              "test_inference.py": {"passed": 5, "failed": 2}},
    "vs_cmp": {"test_autoguide.py": {"passed": 21, "failed": 49},
               "test_gaussian.py": {"passed": 21, "failed": 0},
               "test_inference.py": {"passed": 4, "failed": 2}},
}

# AutoStructuredGuide failures that the final line does not count (no comparator passes them), and why.
NOT_APPLICABLE = {
    "test_sphere_raw_ok": "a raw ProjectedNormal site, which Pyro runs for AutoDelta only (a point can sit on "
                          "the sphere; a Gaussian in unconstrained space cannot): like AutoMultivariateNormal, the "
                          "guide raises Pyro's error naming ProjectedNormalReparam, which test_sphere_helpful_error "
                          "requires and which it passes",
    "test_iplate_smoke": "sequential pyro.plate: xfail in Pyro for every autoguide",
}

COUNT = re.compile(r"(\d+) (passed|failed|xfailed|error|errors|skipped|xpassed)")


def _counts(text):
    out = {}
    for n, kind in COUNT.findall(text):
        kind = "error" if kind.startswith("error") else kind
        out[kind] = out.get(kind, 0) + int(n)
    return out


def parse(output):
    """The harness's summary: ``{"steps": {step: counts}, "files": {file: {variant: counts}},
    "vs_cmp": {file: counts}, "final": counts, "final_line": str}``."""
    result = {"steps": {}, "files": {}, "vs_cmp": {}, "final": None, "final_line": None}
    summary = output.split("=== summary", 1)[-1]
    for line in summary.splitlines():
        line = line.strip()
        m = re.match(r"^(ours_\w+|cmp_\w+): (.*?)\s+\(\d+ s\)$", line)
        if m:
            result["steps"][m.group(1)] = _counts(m.group(2))
            continue
        m = re.match(r"^(test_\w+\.py)\s+(.+?):\s+(.*)$", line)
        if m:
            fname, variant, rest = m.groups()
            if variant == "AutoStructuredGuide vs cmp":
                result["vs_cmp"][fname] = _counts(rest.split(" of the ")[0])
            else:
                result["files"].setdefault(fname, {})[variant] = _counts(rest)
            continue
        if line.startswith("AutoStructuredGuide: "):
            result["final_line"] = line
            result["final"] = _counts(line.split(" of the ")[0])
    return result


def _fmt(counts, keys=("passed", "failed")):
    counts = counts or {}
    return ", ".join(f"{counts.get(k, 0)} {k}" for k in keys)


def readme(before, after, steps, seconds, command):
    lines = [
        "## Pyro's autoguide tests against AutoStructuredGuide",
        "",
        f"`{command}`: Pyro's own `test_autoguide.py`, `autoguide/test_gaussian.py` and "
        "`autoguide/test_inference.py` (pyro-ppl commit ff6ae1c9, unmodified, Pyro's pytest configuration: a "
        "warning fails a test) with `AutoStructuredGuide` added to every guide parametrisation, beside "
        "AutoMultivariateNormal and AutoGaussian (one thread, "
        f"{seconds:.0f} s). A case counts when a comparator passes the same test with the same other parameters.",
        "",
        "| | before | after |",
        "|---|---|---|",
        f"| **counted cases (final line)** | {_fmt(before['final'])} | {_fmt(after['final'])} |",
    ]
    for fname in ("test_autoguide.py", "test_gaussian.py", "test_inference.py"):
        lines.append(f"| {fname}, counted | {_fmt(before['vs_cmp'].get(fname))} | "
                     f"{_fmt(after['vs_cmp'].get(fname))} |")
    for fname in ("test_autoguide.py", "test_gaussian.py", "test_inference.py"):
        ours = after["files"].get(fname, {}).get("AutoStructuredGuide")
        lines.append(f"| {fname}, every `AutoStructuredGuide` case | "
                     f"{_fmt(before['files'].get(fname), ('passed', 'failed', 'xfailed'))} | "
                     f"{_fmt(ours, ('passed', 'failed', 'xfailed'))} |")
    lines += ["", "Final line: `" + (after["final_line"] or "missing") + "`.", "",
              "Uncounted `AutoStructuredGuide` failures (no comparator passes them):", ""]
    lines += [f"* `{k}`: {v}." for k, v in NOT_APPLICABLE.items()]
    lines += ["", "The `_extra` comparator cases that fail in `cmp_fast` are tests that Pyro does not list those "
              "guides for (the harness adds them so that every test has a comparator).", "",
              "Steps: " + "; ".join(f"`{s}` {_fmt(c, ('passed', 'failed', 'xfailed'))}"
                                       for s, c in after["steps"].items() if s in steps) + "."]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--harness", default=DEFAULT_HARNESS, help="path of the harness's run.sh")
    parser.add_argument("--steps", nargs="+", default=DEFAULT_STEPS, help="harness steps to run")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds for the whole run")
    parser.add_argument("--no-readme", action="store_true", help="do not rewrite the README section")
    args = parser.parse_args()
    harness = os.path.abspath(args.harness)
    if not os.path.exists(harness):
        print(f"pyro_conformance: skipped: the conformance harness is not at {harness} "
              "(pass --harness PATH/run.sh)")
        return 0
    env = dict(os.environ, PY=sys.executable, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    with tempfile.TemporaryDirectory(prefix="pyro-conformance-") as logs:
        env["LOGS"] = logs
        start = time.time()
        proc = subprocess.run(["bash", harness, *args.steps], cwd=ROOT, env=env, capture_output=True, text=True,
                              timeout=args.timeout)
        seconds = time.time() - start
    output = proc.stdout + proc.stderr
    print(output[-6000:])
    after = parse(output)
    if after["final"] is None:
        print(f"pyro_conformance: the harness printed no final line (exit status {proc.returncode})")
        return 1
    command = "python benchmarks/pyro_conformance.py"
    if args.steps != DEFAULT_STEPS:
        command += " --steps " + " ".join(args.steps)
    path = write_json("pyro_conformance", {"command": command, "steps_run": args.steps,
                                           "harness_exit_status": proc.returncode, "seconds": seconds,
                                           "before": BEFORE, "after": after, "not_applicable": NOT_APPLICABLE})
    print(f"wrote {path}")
    if not args.no_readme:
        write_readme_section("pyro-conformance", readme(BEFORE, after, args.steps, seconds, command))
    return 0 if proc.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
