"""The documentation's MCMC examples as written, timed (issue 43, item 3: "the guide's example under 2 CPU minutes
with its stated R-hat").

Two parts, each a fresh process, one thread:

* ``guide``: the user guide's examples (``examples/guide/*.py``, which continue one another) run in order up to
  ``mcmc_arviz.py``; timed: the NUTS block of ``pyro_interop.py`` (Pyro's ``NUTS``, 20 + 20) and the whole of
  ``mcmc_arviz.py`` (``TracedNUTS``, 2 chains x (200 + 200), ``collapse="inducing"``, hyperpriors, then
  ``to_inference_data``, ``az.summary``, PSIS-LOO and the DAG plot);
* ``tutorial``: ``tutorials/mcmc_arviz.py`` (the MCMC tutorial of the documentation: ``x -> a -> b`` on 30 cases,
  ``TracedNUTS`` 2 chains x (300 + 300), tree depth up to 7), cell by cell; the NUTS cell's R-hat and bulk ESS
  (ArviZ's rank-normalised split R-hat, Vehtari et al. 2021, *Bayesian Analysis* 16(2)) over every sampled
  variable and over the hyperparameters the tutorial prints.

Every potential gradient of NUTS goes through ``pyro.ops.integrator.potential_grad``; it is wrapped here to count
the gradients and their CPU seconds, so that a chain's cost splits into gradients and the sampler's own work.

    flock /tmp/pyro_dag_bench.lock python benchmarks/guide_mcmc.py --parts guide tutorial
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from common import CODE_AT_START, subprocess_result, write_json, write_readme_section  # noqa: E402

GUIDE_ORDER = ["dgp", "inference", "natural_gradients", "training", "latent_inputs", "pyro_interop", "mcmc_arviz"]

WORKER = r"""
import json, os, re, sys, time, warnings
os.environ["OMP_NUM_THREADS"] = "1"
import torch
torch.set_num_threads(1)
import pyro.ops.integrator as integrator
root, part = sys.argv[1], sys.argv[2]
cpu = time.process_time
grads = {"n": 0, "s": 0.0}
_potential_grad = integrator.potential_grad

def counted(fn, z):
    t = cpu()
    try:
        return _potential_grad(fn, z)
    finally:
        grads["n"] += 1
        grads["s"] += cpu() - t
        if grads["n"] % 1000 == 0:   # what a run stopped by the timeout leaves: the cells so far, this one's rate
            with open("partial.json", "w") as fh:
                json.dump(dict(out, running={"gradients": grads["n"], "gradient_cpu_s": grads["s"],
                                             "cell_cpu_s": cpu() - cell_start[0]}), fh)

integrator.potential_grad = counted
import pyro.infer.mcmc.hmc as hmc, pyro.infer.mcmc.nuts as nuts
hmc.potential_grad = nuts.potential_grad = counted

def diagnostics(idata, var_names=None):
    import arviz as az
    s = az.summary(idata, var_names=var_names, kind="diagnostics")
    return {"rhat_max": float(s["r_hat"].max()), "ess_bulk_min": float(s["ess_bulk"].min()),
            "ess_tail_min": float(s["ess_tail"].min()), "variables": int(len(s))}

out = {"cells": []}
g = {"__name__": "__main__"}
cell_start = [0.0]

def run_cell(name, source):
    grads.update(n=0, s=0.0)
    t = cell_start[0] = cpu()
    exec(compile(source, name, "exec"), g)
    out["cells"].append({"cell": name, "cpu_s": cpu() - t, "gradients": grads["n"], "gradient_cpu_s": grads["s"]})

warnings.simplefilter("ignore")
if part == "guide":
    src = {k: open(os.path.join(root, "examples", "guide", k + ".py")).read() for k in {order!r}}
    for k in {order!r}[:-2]:
        run_cell(k, src[k])
    interop = src["pyro_interop"]
    cut = interop.index("pyro.clear_param_store()", interop.index("print(draws"))
    run_cell("pyro_interop: SVI and Predictive", interop[:cut])
    run_cell("pyro_interop: NUTS 20 + 20", interop[cut:])
    run_cell("mcmc_arviz: TracedNUTS, InferenceData, LOO, plot", src["mcmc_arviz"])
    out["diagnostics"] = diagnostics(g["idata"])
    out["divergences"] = int(sum(r["diverging"] for r in g["stats"].records))
    runs = g.get("runs") or [g["mcmc"]]   # the example's chains, one MCMC run each
    out["draws"] = {"chains": len(runs), "warmup": runs[0].warmup_steps, "samples": runs[0].num_samples}
else:
    os.environ["PYRO_DAG_TUTORIAL_OUT"] = os.getcwd()
    text = open(os.path.join(root, "tutorials", "mcmc_arviz.py")).read()
    cells = text.split("\n# %%\n")
    for i, cell in enumerate(cells):
        first = next((l for l in cell.splitlines() if l.startswith("# ")), "# " + cell.strip().splitlines()[0])
        run_cell(f"cell {i}: {first[2:60]}", cell)
        if "runs.append(mcmc)" in cell:
            nuts_cell = out["cells"][-1]
            out["diagnostics"] = diagnostics(g["nuts"])
            out["diagnostics_hyperparameters"] = diagnostics(g["nuts"], g["hyper"])
            out["divergences"] = int(g["nuts"].sample_stats["diverging"].sum())
            if "tree_depth" in g["nuts"].sample_stats:
                out["mean_tree_depth"] = float(g["nuts"].sample_stats["tree_depth"].mean())
            out["draws"] = {"chains": g["CHAINS"], "warmup": g["WARMUP"], "samples": g["DRAWS"],
                            "max_tree_depth": g["DEPTH"]}
out["total_cpu_s"] = sum(c["cpu_s"] for c in out["cells"])
print("RESULT " + json.dumps(out), flush=True)
"""


def run_part(part, timeout, quick=False):
    """One part in a fresh process (in a scratch folder: the examples write files)."""
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg")
    env.pop("PYRO_DAG_QUICK", None)
    if quick:
        env["PYRO_DAG_QUICK"] = "1"
    code = WORKER.replace("{order!r}", repr(GUIDE_ORDER))
    with tempfile.TemporaryDirectory(prefix="guide_mcmc_") as cwd:
        try:
            p = subprocess.run([sys.executable, "-c", code, ROOT, part], env=env, cwd=cwd, capture_output=True,
                               text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            partial = os.path.join(cwd, "partial.json")
            out = {"error": f"timed out after {timeout} s (wall)"}
            if os.path.exists(partial):
                with open(partial) as f:
                    out["partial"] = json.load(f)
            return out
    return subprocess_result(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", nargs="+", default=["guide", "tutorial"], choices=["guide", "tutorial"])
    ap.add_argument("--timeout", type=int, default=1500)
    ap.add_argument("--quick", action="store_true", help="the tutorial's short mode, to check this script (prints, "
                    "writes nothing)")
    args = ap.parse_args()
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "guide_mcmc.json")
    parts = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        parts = old.get("parts", {})
        for kept in parts.values():   # a part not re-run keeps the library tree it was measured on
            kept.setdefault("code", old.get("code"))
    for part in args.parts:
        res = run_part(part, args.timeout, args.quick)
        res["load"] = list(os.getloadavg())
        if args.quick:
            print(part, json.dumps(res, indent=1))
            continue
        res["code"] = CODE_AT_START
        parts[part] = res
        print(part, json.dumps({k: v for k, v in res.items() if k != "cells"}), flush=True)
        for c in res.get("cells", []):
            print(f"  {c['cell']}: {c['cpu_s']:.1f} CPU s, {c['gradients']} gradients ({c['gradient_cpu_s']:.1f} s)",
                  flush=True)
        # each part's tree in "runs", which report.py reads before the file's own "code"
        runs = [{"part": k, "code": v.get("code")} for k, v in parts.items()]
        write_json("guide_mcmc", {"parts": parts, "runs": runs})
    if not args.quick:
        write_readme_section("guide_mcmc", None)


if __name__ == "__main__":
    main()
