"""NUTS per iteration on the same model, this tree against the release before the data-driven defaults (issue 43,
item 3: "NUTS per iteration at most the previous release's on the same model").

Three models (``MODELS``), each sampler a fresh process, one chain, seed 0 (``--seeds K``: 0 to K - 1), one thread:

* ``guide``: the user guide's NUTS example (``examples/guide/pyro_interop.py``): ``DAGDGP(x -> y, num_inducing=5,
  sample_f=True)`` on the guide's first 30 cases, 20 warm-up + 20 draws;
* ``guide_collapsed``: the guide's ArviZ example (``examples/guide/mcmc_arviz.py``): the same model with
  ``collapse="inducing"`` and ``priors="weakly_informative"``, 30 + 30;
* ``chain``: the model issue 43 timed, ``x -> h -> y`` on 24 cases with ``h`` and ``y`` observed (data drawn here
  from a fixed seed: ``h = sin 3x + noise``, ``y = h² + noise``, noise sd 0.05), 20 + 20.

Variants (``VARIANTS``):

* ``release NUTS``: Pyro's ``NUTS`` on the release (default 9790281, ``git archive``-d into a temporary folder);
* ``NUTS``, ``TracedNUTS``, ``CompiledNUTS``: this tree's defaults with each sampler
  (:mod:`pyro_dag.infer.mcmc`); CompiledNUTS's CPU is this process's (compilation included, its worker processes
  not), and the wall seconds of recording and compiling are reported apart;
* ``NUTS, release noise and kernel start``: this tree with ``noise="learned", kernel_init="default"``, the release's
  start for the noise and the kernels, which isolates what the data-driven defaults change;
* ``NUTS, collapse="inducing"``: this tree with ``DAGDGP(..., collapse="inducing")`` (the chain only: ``h`` sampled
  in posterior-whitened coordinates, ``y``'s inducing outputs integrated out).

Every potential gradient goes through ``pyro.ops.integrator.potential_grad``, wrapped to count them, so the cost
per iteration splits into gradients per iteration (the posterior's geometry: NUTS doubles its trajectory until it
turns) and CPU per gradient (the code).

    flock /tmp/pyro_dag_bench.lock python benchmarks/nuts_release.py

With ``--warmup 200 --draws 300 --variants "release NUTS" NUTS --out nuts_release_ess`` it measures the cost per
effective draw instead (the smallest bulk ESS over every scalar the chain samples, Pyro's
``effective_sample_size``): a chain with fewer divergent transitions runs longer trajectories and costs more per
iteration, so the cost per iteration alone does not say what a user pays.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from common import PREVIOUS_RELEASE, code_state, previous_tree, subprocess_result, write_json  # noqa: E402

WORKER = r"""
import json, os, sys, time, warnings
os.environ["OMP_NUM_THREADS"] = "1"
import torch
torch.set_num_threads(1)
import networkx as nx
import pyro
import pyro.ops.integrator as integrator
import pyro.infer.mcmc.hmc as hmc, pyro.infer.mcmc.nuts as nuts
from pyro.infer import MCMC, NUTS
sampler, options, warmup, draws, which, seed = (sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]),
                                                int(sys.argv[4]), sys.argv[5], int(sys.argv[6]))
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

integrator.potential_grad = hmc.potential_grad = nuts.potential_grad = counted
import pyro_dag
from pyro_dag import DAGDGP
if which == "chain":   # the issue's model: 24 cases of x -> h -> y, h and y observed
    gen = torch.Generator().manual_seed(0)
    x = torch.linspace(-1, 1, 24).unsqueeze(-1)
    h = torch.sin(3 * x) + 0.05 * torch.randn(24, 1, generator=gen)
    y = h ** 2 + 0.05 * torch.randn(24, 1, generator=gen)
    graph, inputs, data = nx.DiGraph([("x", "h"), ("h", "y")]), {"x": x}, {"h": h, "y": y}
else:                 # the user guide's x -> y on its first 30 cases (examples/guide/dgp.py's data)
    torch.manual_seed(0)
    x = torch.linspace(-2, 2, 400).unsqueeze(-1)
    y = torch.sin(2 * x) + 0.5 * x + 0.1 * torch.randn(400, 1)
    y[::5] = float("nan")
    graph, inputs, data = nx.DiGraph([("x", "y")]), {"x": x[:30]}, {"y": y[1:31]}
    if which == "guide_collapsed":   # examples/guide/mcmc_arviz.py's model
        options = dict(options, collapse="inducing", priors="weakly_informative")
pyro.clear_param_store()
pyro.set_rng_seed(seed)
model = DAGDGP(graph, num_inducing=5, sample_f=True, **options)
if sampler == "NUTS":
    kernel = NUTS(model)
else:
    from pyro_dag.infer import mcmc as dag_mcmc
    kernel = getattr(dag_mcmc, sampler)(model)
t0 = cpu()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    mcmc = MCMC(kernel, num_samples=draws, warmup_steps=warmup, disable_progbar=True)
    mcmc.run(inputs, data)
total = cpu() - t0
# CompiledNUTS records and compiles at the chain's set-up (wall seconds: the compiler runs worker processes)
compile_s = getattr(kernel, "compile_seconds", None)
try:
    div = sum(int(len(v)) for v in mcmc.diagnostics().get("divergences", {}).values())
except AssertionError:   # Pyro's diagnostics need at least 4 draws
    div = None
iters = warmup + draws
# effective draws (Pyro's bulk ESS of one chain) of every scalar the chain samples: the cost per effective draw is
# what a user pays, and a healthier chain can cost more per iteration yet less per effective draw
from pyro.ops.stats import effective_sample_size
ess = []
if draws >= 4:
    for v in mcmc.get_samples(group_by_chain=True).values():
        v = v.reshape(v.shape[0], v.shape[1], -1).double()
        ess += [float(e) for e in effective_sample_size(v, chain_dim=0, sample_dim=1).reshape(-1)]
ess = sorted(e for e in ess if e == e)
print("RESULT " + json.dumps({
    "ess_min": ess[0] if ess else None, "ess_median": ess[len(ess) // 2] if ess else None, "scalars": len(ess),
    "cpu_s": total, "iterations": iters, "cpu_per_iteration": total / iters,
    "compile_wall_s": compile_s, "gradients": grads["n"], "gradients_per_iteration": grads["n"] / iters,
    "ms_per_gradient": 1000 * grads["s"] / max(grads["n"], 1), "divergences": div,
    "pyro_dag": os.path.dirname(pyro_dag.__file__)}))
"""

#: The models: ``(key, description, warm-up, draws)``.
MODELS = [
    ("guide", "user guide, `pyro_interop.py`: x -> y, 30 cases, `num_inducing=5, sample_f=True`", 20, 20),
    ("guide_collapsed", "user guide, `mcmc_arviz.py`: the same with `collapse=\"inducing\"`, "
                        "`priors=\"weakly_informative\"`", 30, 30),
    ("chain", "issue 43's: x -> h -> y, 24 cases, h and y observed, `num_inducing=5, sample_f=True`", 20, 20),
]
#: (label, tree: "current" | "release", sampler, DAGDGP options)
VARIANTS = [
    ("release NUTS", "release", "NUTS", {}),
    ("NUTS", "current", "NUTS", {}),
    ("NUTS, release noise and kernel start", "current", "NUTS", {"noise": "learned", "kernel_init": "default"}),
    ("TracedNUTS", "current", "TracedNUTS", {}),
    ("CompiledNUTS", "current", "CompiledNUTS", {}),
    # the observed node with children in posterior-whitened coordinates and the leaf's inducing outputs integrated
    # out (DAGDGP's collapse="inducing"; on the chain only: the guide's x -> y would have nothing left to sample)
    ("NUTS, collapse=\"inducing\"", "current", "NUTS", {"collapse": "inducing"}),
]


def run_variant(path, sampler, options, warmup, draws, which, timeout, seed=0):
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS="1")
    try:
        proc = subprocess.run([sys.executable, "-c", WORKER, sampler, json.dumps(options), str(warmup), str(draws),
                               which, str(seed)],
                              env=env, capture_output=True, text=True, timeout=timeout, cwd=tempfile.gettempdir())
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout} s"}
    return subprocess_result(proc)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--previous", default=PREVIOUS_RELEASE, help="the release's commit")
    ap.add_argument("--models", nargs="*", help="of guide, guide_collapsed, chain (default: all)")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--warmup", type=int, help="warm-up iterations of every model (default: each model's own)")
    ap.add_argument("--draws", type=int, help="draws of every model (default: each model's own)")
    ap.add_argument("--variants", nargs="*", help="labels of VARIANTS to run (default: all)")
    ap.add_argument("--out", default="nuts_release", help="results/<out>.json")
    ap.add_argument("--seeds", type=int, default=1, help="chains per variant, seeds 0, 1, ... (one process each)")
    args = ap.parse_args()
    release = previous_tree(args.previous)
    rows = []
    for which, description, warmup, draws in MODELS:
        if args.models and which not in args.models:
            continue
        warmup, draws = args.warmup or warmup, args.draws or draws
        for label, tree, sampler, options in VARIANTS:
            if args.variants and label not in args.variants:
                continue
            path = release if tree == "release" else ROOT
            for seed in range(args.seeds):
                r = run_variant(path, sampler, options, warmup, draws, which, args.timeout, seed)
                r.update(model=which, model_description=description, label=label, warmup=warmup, draws=draws,
                         tree=args.previous if tree == "release" else "current", sampler=sampler, options=options,
                         seed=seed)
                print(r, flush=True)
                rows.append(r)
    result = {"rows": rows, "previous_commit": args.previous,
              "code": code_state(), "load": os.getloadavg()}
    result["command"] = "python " + shlex.join(sys.argv)
    write_json(args.out, result)   # the tables: benchmarks/report.py (sec_nuts_release, sec_nuts_release_ess)


if __name__ == "__main__":
    main()
