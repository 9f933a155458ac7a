"""A/B of DAGDGP's defaults on smooth deterministic simulators: the previous defaults (``num_inducing=16``,
``noise="learned"``, ``kernel_init="default"``) against the current ones (``num_inducing="auto"``, ``noise="auto"``,
``kernel_init="pilot"``), side by side with a plain exact GP (ARD RBF, type-II ML) on the same cases.

    python benchmarks/defaults_ab.py                 # -> benchmarks/results/defaults_ab.json
    python benchmarks/defaults_ab.py --quick         # smoke run -> results/defaults_ab_quick.json

Problems: OTL circuit, piston, wing weight and borehole (``pyro_dag.datasets.test_functions``), inputs scaled to
[0, 1]^d, a Latin hypercube of n training runs and 1000 test runs, outputs standardised on the training runs,
noise-free. Each DAGDGP is ``x -> y`` trained by ``train(model, AutoStructuredGuide(model), ..., num_steps)`` (the
recommended recipe) and scored by the RMSE of ``predict``'s mean against the noise-free test outputs. One thread,
float64; CPU seconds by ``time.process_time`` (fit and predict).
"""
import argparse
import time

import networkx as nx
import pyro
import torch

from common import one_thread, write_json
from pyro_dag import DAGDGP
from pyro_dag.baselines import ExactGP
from pyro_dag.datasets.test_functions import get_test_function, latin_hypercube
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide

CONFIGS = {
    "previous_defaults": dict(num_inducing=16, noise="learned", kernel_init="default"),
    "defaults": dict(),
}


def problem(name, n, seed, n_test=1000):
    f = get_test_function(name)
    d = len(f.bounds)
    gen = torch.Generator().manual_seed(seed)
    lo = torch.tensor([b[0] for b in f.bounds], dtype=torch.float64)
    hi = torch.tensor([b[1] for b in f.bounds], dtype=torch.float64)
    U = torch.as_tensor(latin_hypercube(n, [(0, 1)] * d, generator=gen), dtype=torch.float64)
    Ut = torch.as_tensor(latin_hypercube(n_test, [(0, 1)] * d, generator=gen), dtype=torch.float64)
    y = torch.as_tensor(f.fn(lo + U * (hi - lo)), dtype=torch.float64).reshape(-1)
    yt = torch.as_tensor(f.fn(lo + Ut * (hi - lo)), dtype=torch.float64).reshape(-1)
    mu, sd = y.mean(), y.std()
    return U, (y - mu) / sd, Ut, (yt - mu) / sd


def run_dagdgp(U, y, Ut, yt, config, steps, seed):
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    t = time.process_time()
    model = DAGDGP(nx.DiGraph([("x", "y")]), seed=seed, **config).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, {"x": U}, {"y": y[:, None]}, num_steps=steps, progress=False)
    pred = model.predict(guide, {"x": Ut}, num_samples=100)
    seconds = time.process_time() - t
    rmse = float((pred["y"].mean[:, 0] - yt).pow(2).mean().sqrt())
    return {"rmse": rmse, "cpu_seconds": seconds, "noise_variance": float(model.likelihoods["y"].variance.detach()),
            "noise_fixed": "variance" not in model.likelihoods["y"].__dict__.get("_pyro_params", {}),
            "num_inducing": model.num_inducing["y"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    one_thread()
    names = ["otl_circuit", "piston", "wing_weight", "borehole"]
    n, steps, seeds = (40, 50, [0]) if args.quick else (200, args.steps, args.seeds)
    rows = []
    for name in names[:1] if args.quick else names:
        for seed in seeds:
            U, y, Ut, yt = problem(name, n, seed)
            t = time.process_time()
            mean, _ = ExactGP(seed=seed).fit(U, y).predict(Ut)
            exact = {"rmse": float((mean - yt).pow(2).mean().sqrt()), "cpu_seconds": time.process_time() - t}
            row = {"problem": name, "n": n, "seed": seed, "steps": steps, "exact_gp": exact}
            for key, config in CONFIGS.items():
                row[key] = run_dagdgp(U, y, Ut, yt, config, steps, seed)
                row[key]["ratio_to_exact_gp"] = row[key]["rmse"] / exact["rmse"]
            rows.append(row)
            print(name, seed, {k: round(row[k]["rmse"], 5) for k in ("exact_gp", *CONFIGS)}, flush=True)
    write_json("defaults_ab_quick" if args.quick else "defaults_ab",
               {"command": "python benchmarks/defaults_ab.py" + (" --quick" if args.quick else ""),
                "configs": CONFIGS, "rows": rows})


if __name__ == "__main__":
    main()
