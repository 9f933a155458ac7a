"""Simulation-based calibration (Talts et al. 2018, arXiv:1804.06788) of NUTS, DAG-SVI and DAG-VI on a tiny DAG-DGP.

Model: ``x → a`` with ``a`` observed at ``n`` cases (x on [-1, 1]), M inducing points,
``DAGDGP(..., priors="weakly_informative")`` (LogNormal priors on the kernel variance and length-scale and the noise
variance). Each replication draws every site from the prior (``Predictive``), fits, and ranks the truth of every
scalar of ``a.u`` and of the three hyperparameters among ``L`` posterior draws (NUTS draws thinned to be roughly
independent). Ranks are uniform for a calibrated posterior; a chi-square test per parameter
(:func:`pyro_dag.diagnostics.sbc_uniformity_test`) reports the p-values. The guides (``AutoStructuredGuide``
chordal = DAG-SVI, mean field = DAG-VI, trained by ``DAGELBO``; the hyperparameters get Pyro's default guide for
PyroSample sites) are reported without a target, as a diagnostic of their dispersion.

Usage: ``python benchmarks/sbc.py --replications 200 [--methods nuts,dag_svi,dag_vi]``.
"""
import argparse
import os
import sys
import time

import networkx as nx
import numpy as np
import pyro
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import one_thread, write_json, write_readme_section  # noqa: E402
from pyro_dag import DAGDGP  # noqa: E402
from pyro_dag.diagnostics import sbc_uniformity_test, simulation_based_calibration  # noqa: E402

HYPER = ["kernels.a.base.variance", "kernels.a.base.lengthscale", "likelihoods.a.variance"]


def make_model(n, M, sample_f, collapse="values"):
    x = torch.linspace(-1, 1, n, dtype=torch.float64).unsqueeze(-1)
    model = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=M, sample_f=sample_f, priors="weakly_informative",
                   learn_inducing=False, collapse=collapse if sample_f else "values").double()
    model.setup({"x": x}, {"a": torch.zeros(n, 1, dtype=torch.float64)})
    return model, {"x": x}


def nuts_posterior(model, warmup, draws, thin):
    from pyro.infer import MCMC, NUTS

    def fn(inputs, data):
        mcmc = MCMC(NUTS(model, max_tree_depth=6), num_samples=draws, warmup_steps=warmup, disable_progbar=True)
        mcmc.run(inputs, data)
        post = {k: v[thin - 1::thin] for k, v in mcmc.get_samples().items()}
        # collapse="inducing": a.u is integrated out of the run and drawn exactly given each (thinned) draw
        post = model.full_model_draws(post, inputs, data)
        return {k: v for k, v in post.items() if k in ["a.u"] + HYPER}

    return fn


def guide_posterior(model, structure, steps, num_draws):
    from pyro import poutine
    from pyro.infer import SVI

    from pyro_dag.infer import DAGELBO
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    def fn(inputs, data):
        pyro.clear_param_store()
        guide = AutoStructuredGuide(model, precision=structure)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.03}), DAGELBO(num_particles=4))
        for _ in range(steps):
            svi.step(inputs, data)
        out = {}
        with torch.no_grad():
            for _ in range(num_draws):
                tr = poutine.trace(guide).get_trace(inputs, data)
                for k in ["a.u"] + HYPER:
                    out.setdefault(k, []).append(tr.nodes[k]["value"])
        return {k: torch.stack(v) for k, v in out.items()}

    return fn


def main():
    one_thread()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--replications", type=int, default=200)
    p.add_argument("--methods", default="nuts,dag_svi,dag_vi")
    p.add_argument("--n", type=int, default=6)
    p.add_argument("--num-inducing", type=int, default=3)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--draws", type=int, default=190, help="NUTS draws, thinned by --thin")
    p.add_argument("--thin", type=int, default=10)
    p.add_argument("--svi-steps", type=int, default=400)
    p.add_argument("--collapse", choices=["values", "inducing"], default="inducing",
                   help="NUTS on DAGDGP(collapse=...): 'inducing' samples the hyperparameters only, a.u exactly after")
    args = p.parse_args()
    results = {}
    for method in args.methods.split(","):
        pyro.clear_param_store()
        model, inputs = make_model(args.n, args.num_inducing, sample_f=(method == "nuts"), collapse=args.collapse)
        if method == "nuts":
            post = nuts_posterior(model, args.warmup, args.draws, args.thin)
        else:
            post = guide_posterior(model, "chordal" if method == "dag_svi" else "mean_field", args.svi_steps,
                                   args.draws // args.thin)
        t = time.perf_counter()
        out = simulation_based_calibration(model, inputs, post, args.replications, sites=["a.u"] + HYPER)
        seconds = time.perf_counter() - t
        ranks = np.concatenate([out["ranks"][k] for k in ["a.u"] + HYPER], axis=1)
        names = [f"a.u[{i}]" for i in range(out["ranks"]["a.u"].shape[1])] + HYPER
        test = sbc_uniformity_test(ranks, out["num_draws"])
        results[method] = {"names": names, "pvalue": test["pvalue"].tolist(), "chi2": test["chi2"].tolist(),
                           "counts": test["counts"].tolist(), "num_bins": test["num_bins"],
                           "num_draws": out["num_draws"], "seconds": seconds}
        print(method, f"{seconds:.0f} s", dict(zip(names, np.round(test["pvalue"], 3))), flush=True)
    res = dict(results=results, replications=args.replications, n=args.n, num_inducing=args.num_inducing,
               warmup=args.warmup, draws=args.draws, thin=args.thin, svi_steps=args.svi_steps)
    write_json("sbc", res)
    lines = ["### Simulation-based calibration (tiny DAG-DGP `x → a` with hyperpriors)", "",
             f"`python benchmarks/sbc.py --replications {args.replications} --methods {args.methods}` "
             f"(n = {args.n} cases, M = {args.num_inducing}; NUTS {args.warmup} warm-up + {args.draws} draws thinned "
             f"by {args.thin}; guides {args.svi_steps} DAGELBO steps). Chi-square p-values of rank uniformity "
             "(Talts et al. 2018); small p = miscalibrated:", "",
             "| method | " + " | ".join(next(iter(results.values()))["names"]) + " |",
             "|---|" + "---|" * len(next(iter(results.values()))["names"])]
    for m, r in results.items():
        lines.append(f"| {m} | " + " | ".join(f"{v:.3f}" for v in r["pvalue"]) + " |")
    write_readme_section("sbc", "\n".join(lines))


if __name__ == "__main__":
    main()
