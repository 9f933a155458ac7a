"""NUTS on DAG deep GPs: mixing of the non-centred parameterisation with hyperpriors (R-hat, bulk ESS, divergences,
time), and the collider as a reference posterior for DAG-SVI and DAG-VI.

Models (Perlino et al. 2026, arXiv:2607.09645):

* ``collider``: the latent collider ``x1 → w1 → w3 ← w2 ← x2`` (App. G.3) on a reduced product grid (7 × 6 = 42
  cases), generated like :func:`pyro_dag.datasets.collider` (GP draws with length-scales 0.4 / 0.6), noise sd 0.05;
* ``chain``: a two-layer chain ``x → a → b`` with ``b`` observed at n = 50 cases (``b = sin(2 a)``, ``a = x``
  plus noise), noise sd 0.05.

Both use ``DAGDGP(..., sample_f=True, priors="weakly_informative")`` (non-centred node values
``f = μ(U) + sd(U) · ε``, LogNormal hyperpriors on kernel variances, length-scales and the noise) and
``NUTS(model)`` started at a MAP estimate (every chain); chains run one after the other on one core.

Usage::

    python benchmarks/nuts_mixing.py --model collider --chains 4 --warmup 500 --draws 500
    python benchmarks/nuts_mixing.py --model chain --chains 4 --warmup 500 --draws 500
    python benchmarks/nuts_mixing.py --model collider --compare   # + DAG-SVI / DAG-VI against NUTS
    # collapse="inducing" (observed Gaussian nodes reparameterised), every node observed, target acceptance 0.9:
    python benchmarks/nuts_mixing.py --model chain --collapse inducing --observe-hidden --num-inducing a=10,b=8 \
        --max-tree-depth 8 --target-accept 0.9
    # --jit: pyro_dag.infer.TracedNUTS (the eager draws bit for bit, cheaper); --compile: pyro_dag.infer.CompiledNUTS
    # (the eager potential to about 1e-11, much cheaper; the compilation counted in the CPU time)
"""
import argparse
import os
import sys
import time

import networkx as nx
import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import one_thread, write_json, write_readme_section  # noqa: E402
from pyro_dag import DAGDGP, kernels  # noqa: E402
from pyro_dag.datasets.collider import _gp_draw  # noqa: E402
from pyro_dag.gp.likelihoods import Gaussian  # noqa: E402

NOISE = 0.05


def collider_problem(n1=7, n2=6, seed=0, observe_hidden=False):
    gen = torch.Generator().manual_seed(seed)
    x1 = torch.linspace(-1, 1, n1, dtype=torch.float64)
    x2 = torch.linspace(-1, 1, n2, dtype=torch.float64) + (2.0 / (n2 - 1)) / 3
    w1, w2 = _gp_draw(x1, 0.4, gen), _gp_draw(x2, 0.4, gen)
    X1, X2 = torch.meshgrid(x1, x2, indexing="ij")
    W1, W2 = torch.meshgrid(w1, w2, indexing="ij")
    s = (W1 + W2).reshape(-1)
    uniq, inv = torch.unique(s, return_inverse=True)
    g = _gp_draw(uniq, 0.6, gen)[inv]  # w3's noise-free values
    y = g + NOISE * torch.randn(s.shape, dtype=torch.float64, generator=gen)
    graph = nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])
    inputs = {"x1": X1.reshape(-1, 1), "x2": X2.reshape(-1, 1)}
    truth = {"w1": W1.reshape(-1, 1), "w2": W2.reshape(-1, 1)}
    data = {"w3": y.reshape(-1, 1)}
    if observe_hidden:  # the parents measured too, with the same noise
        data.update({w: v + NOISE * torch.randn(v.shape, dtype=torch.float64, generator=gen) for w, v in truth.items()})
    truth["w3"] = g.reshape(-1, 1)
    return graph, inputs, data, truth


HIDDEN_KERNELS = {"rbf": kernels.RBF, "matern52": kernels.Matern52, "matern32": kernels.Matern32}


def collider_model(graph, num_inducing, priors, sample_f=True, collapse="values", observe_hidden=False,
                   hidden_kernel="rbf"):
    cls = HIDDEN_KERNELS[hidden_kernel]
    kern = {"w1": cls(lengthscale=0.4), "w2": cls(lengthscale=0.4),
            "w3": kernels.SumInput(kernels.RBF(lengthscale=0.6))}
    liks = {w: Gaussian(NOISE ** 2) for w in (("w1", "w2", "w3") if observe_hidden else ("w3",))}
    return DAGDGP(graph, kernels=kern, num_inducing=num_inducing, likelihoods=liks,
                  sample_f=sample_f, priors=priors, collapse=collapse if sample_f else "values").double()


def chain_mean(x):
    """The chain's noise-free leaf, ``b = sin(2 a)`` with ``a = x``."""
    return torch.sin(2 * x)


def chain_problem(n=50, seed=0, observe_hidden=False):
    gen = torch.Generator().manual_seed(seed)
    x = torch.linspace(-1.5, 1.5, n, dtype=torch.float64).unsqueeze(-1)
    y = chain_mean(x) + NOISE * torch.randn(n, 1, dtype=torch.float64, generator=gen)
    data = {"b": y}
    if observe_hidden:  # a = x measured with the same noise
        data["a"] = x + NOISE * torch.randn(n, 1, dtype=torch.float64, generator=gen)
    return nx.DiGraph([("x", "a"), ("a", "b")]), {"x": x}, data


def chain_model(graph, num_inducing, priors, sample_f=True, collapse="values", observe_hidden=False,
                hidden_kernel="rbf"):
    liks = {w: Gaussian(NOISE ** 2) for w in (("a", "b") if observe_hidden else ("b",))}
    # DAGDGP's default kernel, Concat(RBF(ard=True)), on b, and on a unless another base kernel is asked for (same
    # form, so the site names, kernels.a.base.*, do not change)
    kern = {} if hidden_kernel == "rbf" else {"a": kernels.Concat(HIDDEN_KERNELS[hidden_kernel](ard=True))}
    return DAGDGP(graph, kernels=kern, num_inducing=num_inducing, likelihoods=liks, sample_f=sample_f,
                  priors=priors, collapse=collapse).double()


def parse_num_inducing(text):
    """``"6"`` -> 6; ``"w1=7,w2=6"`` -> ``{"w1": 7, "w2": 6}``."""
    if "=" not in text:
        return int(text)
    return {k: int(v) for k, v in (item.split("=") for item in text.split(","))}


def cpu_seconds():
    """CPU seconds of this process and of the child processes it waited for (the C++ compiler that CompiledNUTS
    runs): ``time.process_time()`` alone would leave the compiler out."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_nuts(model, inputs, data, chains, warmup, draws, max_tree_depth, seed=0, jit=False, map_steps=500,
             full_mass=False, target_accept=0.8, compile=False, init="map"):
    from pyro.infer import MCMC, NUTS

    from pyro_dag.diagnostics import MCMCStats
    from pyro_dag.infer import CompiledNUTS, TracedNUTS

    from pyro.infer import SVI, Trace_ELBO
    from pyro.infer.autoguide import AutoDelta, AutoNormal
    from pyro.infer.autoguide.initialization import init_to_value

    # One starting point for every chain, a MAP estimate: the deep-GP posterior is symmetric under sign flips of
    # the latent nodes (f -> -f with the child's GP reflected), so chains started at random land in different
    # mirror modes and R-hat would measure that symmetry, not mixing within a mode.
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    # init="prior-median": the hyperparameters held at their prior medians while the rest is fitted. The joint MAP
    # over the inducing outputs and the hyperparameters of a latent node can overfit (on the latent collider with
    # learned inducing inputs the noise variance goes from 0.04 to 7e-4 in 500 steps and on towards 0, w2's
    # length-scale to 0.13; --fixed-inducing removes most of that): the chains would start in the narrow neck of
    # that funnel.
    held = prior_medians(model, inputs, data) if init == "prior-median" else {}
    target = poutine.condition(model, data=held) if held else model
    # init="vi": a mean-field Gaussian fit instead of a point (its median is the start). On the latent chain the
    # joint MAP is degenerate: its loss keeps falling with the noise variance (0.001 after 500 steps, < 1e-4 after
    # 1000), because the hidden node's per-case values can absorb the residuals; the ELBO's entropy term stops that.
    guide = AutoNormal(target) if init == "vi" else AutoDelta(target)
    svi = SVI(target, guide, pyro.optim.Adam({"lr": 0.02}), Trace_ELBO())
    for _ in range(map_steps):
        svi.step(inputs, data)
    start = {k: v.detach() for k, v in guide.median(inputs, data).items()}
    init = {**start, **held}
    pyro.clear_param_store()
    stats, runs, times, cpu_times, compile_times = MCMCStats(), [], [], [], []
    for c in range(chains):
        pyro.set_rng_seed(seed + 1 + c)
        kernel = (CompiledNUTS if compile else TracedNUTS if jit else NUTS)(model, max_tree_depth=max_tree_depth,
                                                init_strategy=init_to_value(values=init), full_mass=full_mass,
                                                target_accept_prob=target_accept)
        mcmc = MCMC(kernel, num_samples=draws, warmup_steps=warmup, disable_progbar=True, hook_fn=stats)
        t, cpu = time.perf_counter(), cpu_seconds()
        mcmc.run(inputs, data)
        times.append(time.perf_counter() - t)
        cpu_times.append(cpu_seconds() - cpu)
        runs.append(mcmc)
        print(f"  chain {c}: {times[-1]:.0f} s wall, {cpu_times[-1]:.0f} s CPU, step size "
              f"{mcmc.kernel.step_size:.3g}" + (f", compiled in {kernel.compile_seconds:.0f} s wall"
                                                if compile else ""), flush=True)
        if compile and not kernel.compiled:
            raise SystemExit("the compiled potential failed its check (see the warning)")
        compile_times.append(kernel.compile_seconds if compile else None)
    return runs, stats, times, cpu_times, compile_times


def prior_medians(model, inputs, data):
    """``{site: prior median}`` of the model's hyperparameter sites (``kernels.*``, ``likelihoods.*``)."""
    trace = poutine.trace(model).get_trace(inputs, data)
    medians = {}
    for name, site in trace.nodes.items():
        if site["type"] != "sample" or site["is_observed"] or not name.startswith(("kernels.", "likelihoods.")):
            continue
        fn = site["fn"]
        while isinstance(fn, dist.Independent):
            fn = fn.base_dist
        medians[name] = fn.icdf(torch.full_like(site["value"], 0.5)).detach()
    return medians


def stacking_summary(idata, leaf, noise_free):
    """Chain stacking (Yao, Vehtari & Gelman 2022) of the run: each chain's own diagnostics (R-hat and bulk ESS of
    its two halves), PSIS-LOO and stacking weight, and the RMSE of its posterior-mean leaf values against the
    noise-free truth, per chain, pooled (equal weights) and stacked."""
    import arviz as az
    import xarray as xr

    from pyro_dag.diagnostics import chain_stacking

    stack = chain_stacking(idata)
    names = [v for v in idata.posterior.data_vars if not v.endswith((".eps", ".f"))]

    def halves(c):
        # one chain as its two halves: ArviZ's R-hat needs two chains (it gives NaN for one), and the rank-normalised
        # split R-hat of the halves compares the chain's four quarters, a check that the chain itself is stationary
        one = idata.posterior[names].isel(chain=c)
        h = one.sizes["draw"] // 2
        parts = [one.isel(draw=slice(k * h, (k + 1) * h)).assign_coords(draw=np.arange(h)) for k in range(2)]
        return xr.concat(parts, dim="chain").assign_coords(chain=[0, 1])

    per_chain = [az.summary(halves(c), kind="diagnostics", round_to="none")
                 for c in range(idata.posterior.sizes["chain"])]
    means = idata.posterior[leaf].mean("draw").values.reshape(len(per_chain), -1)  # [C, n]

    def rmse(f):
        return float(np.sqrt(np.mean((f - noise_free) ** 2)))

    return {"weights": stack.weights.tolist(), "elpd_loo_per_chain": stack.elpd_loo.tolist(),
            "elpd_stacked": stack.elpd_stacked, "max_pareto_k_per_chain": stack.max_pareto_k.tolist(),
            "max_rhat_per_chain": [float(s["r_hat"].max()) for s in per_chain],
            "min_ess_bulk_per_chain": [float(s["ess_bulk"].min()) for s in per_chain],
            "leaf": leaf, "rmse_leaf_per_chain": [rmse(m) for m in means],
            "rmse_leaf_pooled": rmse(means.mean(0)), "rmse_leaf_stacked": rmse(stack.weights @ means)}


def mixing_summary(idata):
    import arviz as az

    names = [v for v in idata.posterior.data_vars if not v.endswith((".eps", ".f"))]
    # unrounded (ArviZ rounds to 2 decimals by default, and a rounded 1.01 may be 1.014, over the target)
    summ = az.summary(idata, var_names=names, kind="diagnostics", round_to="none")
    ss = idata.sample_stats
    hyper = [i for i in summ.index if not i.split("[")[0].endswith(".u")]
    # Identifiable quantities: the observed nodes' function values at the cases ("{w}.f" of the observed leaves)
    # and the likelihood noise. A hidden node's values, inducing outputs and kernel scale are identified only up
    # to a monotone warping of that node (undone by its child's GP) and, without a fixed scale, up to a ridge
    # between its variance and the child's length-scale; R-hat on those measures that non-identifiability.
    leaves = [v for v in idata.posterior.data_vars
              if v.endswith(".f") and f"{v[:-2]}.y" in idata.observed_data.data_vars]
    noise = [v for v in idata.posterior.data_vars if v.startswith("likelihoods.")]
    ident = (az.summary(idata, var_names=leaves + noise, kind="diagnostics", round_to="none") if leaves + noise
             else None)
    return summ, {
        "identifiable": leaves + noise,
        "max_rhat_identifiable": None if ident is None else float(ident["r_hat"].max()),
        "min_ess_bulk_identifiable": None if ident is None else float(ident["ess_bulk"].min()),
        "max_rhat": float(summ["r_hat"].max()), "min_ess_bulk": float(summ["ess_bulk"].min()),
        "min_ess_tail": float(summ["ess_tail"].min()),
        "min_ess_bulk_hyper": float(summ.loc[hyper, "ess_bulk"].min()) if hyper else None,
        "num_parameters_checked": int(len(summ)), "divergences": int(ss["diverging"].sum()),
        "mean_tree_depth": float(ss["tree_depth"].mean()), "step_size": float(ss["step_size"].mean()),
    }


def main():
    one_thread()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=["collider", "chain"], default="collider")
    p.add_argument("--chains", type=int, default=4)
    p.add_argument("--warmup", type=int, default=500)
    p.add_argument("--draws", type=int, default=500)
    p.add_argument("--num-inducing", type=parse_num_inducing, default=6,
                   help="M per node: an int, or node=M pairs, e.g. w1=7,w2=6,w3=8")
    p.add_argument("--max-tree-depth", type=int, default=7)
    p.add_argument("--no-priors", action="store_true", help="fixed hyperparameters (inducing outputs only)")
    p.add_argument("--full-mass", action="store_true", help="NUTS(full_mass=True): dense mass matrix adaptation")
    p.add_argument("--dense-block", default=None,
                   help="sites with one dense mass-matrix block, the rest diagonal, e.g. w1.u,w2.u "
                        "(NUTS(full_mass=[(...)]))")
    p.add_argument("--fix-latent-variance", action="store_true",
                   help="no prior on the hidden nodes' kernel variances (fixed at 1: identifiability constraint)")
    p.add_argument("--fix-child-lengthscale", default=None,
                   help="kernel length-scale sites held fixed (no prior), at their set-up values or at a given "
                        "one, e.g. kernels.w3.base.lengthscale or kernels.a.base.lengthscale=3")
    p.add_argument("--hidden-kernel", choices=sorted(HIDDEN_KERNELS), default="rbf",
                   help="the kernel of the hidden nodes (collider: w1 and w2; chain: a); the data are drawn with RBF "
                        "kernels (collider) or sin (chain) either way")
    p.add_argument("--target-accept", type=float, default=0.8)
    p.add_argument("--collapse", choices=["values", "inducing"], default="values",
                   help="DAGDGP(collapse=...): 'inducing' integrates the observed leaf's inducing outputs out too")
    p.add_argument("--jit", action="store_true",
                   help="pyro_dag.infer.TracedNUTS: the potential traced once per chain (same samples, cheaper gradients)")
    p.add_argument("--compile", action="store_true",
                   help="pyro_dag.infer.CompiledNUTS: the potential compiled by TorchInductor once per chain "
                        "(compilation in this process, its time included)")
    p.add_argument("--compare", action="store_true", help="also fit DAG-SVI and DAG-VI (collider)")
    p.add_argument("--svi-steps", type=int, default=3000)
    p.add_argument("--observe-hidden", action="store_true",
                   help="observe the intermediate nodes too (noise sd 0.05): every node measured, as on Sachs")
    p.add_argument("--jitter", type=float, default=None,
                   help="DAGDGP(jitter=...): relative jitter of K(Z, Z) (default 1e-8 in float64)")
    p.add_argument("--init", choices=["map", "prior-median", "vi"], default="map",
                   help="the chains' common start: a MAP estimate of every site (map), the hyperparameters at "
                        "their prior medians and a MAP of the rest given them (prior-median), or the median of a "
                        "mean-field VI fit, AutoNormal, as many steps (vi)")
    p.add_argument("--centre-hidden", action="store_true",
                   help="pyro_dag.infer.CentredInducing: the hidden nodes' inducing outputs centred (sites "
                        "'{w}.u_centred'), the observed ones whitened")
    p.add_argument("--fixed-inducing", action="store_true",
                   help="freeze the inducing inputs at their set-up values before the MAP start (otherwise the MAP "
                        "moves them, and NUTS samples the model with the moved ones)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed of the MAP start and of the chains (chain c uses seed + 1 + c); the data do not change")
    p.add_argument("--no-write", action="store_true", help="print only (no JSON, no README section)")
    args = p.parse_args()
    priors = None if args.no_priors else "weakly_informative"
    if args.compare and (args.model != "collider" or priors is not None):
        raise SystemExit("--compare is for the collider with --no-priors (the guides fit the fixed-hyperparameter "
                         "model)")
    from pyro_dag.diagnostics import to_inference_data

    build_priors = None if (args.fix_latent_variance or args.fix_child_lengthscale) else priors
    if args.model == "collider":
        graph, inputs, data, truth = collider_problem(observe_hidden=args.observe_hidden)
        model = collider_model(graph, args.num_inducing, build_priors, collapse=args.collapse,
                               observe_hidden=args.observe_hidden, hidden_kernel=args.hidden_kernel)
    else:
        graph, inputs, data = chain_problem(observe_hidden=args.observe_hidden)
        model = chain_model(graph, args.num_inducing, build_priors, collapse=args.collapse,
                            observe_hidden=args.observe_hidden, hidden_kernel=args.hidden_kernel)
    model.jitter = args.jitter
    model.setup(inputs, data)
    from pyro_dag.utils import freeze

    if args.fixed_inducing or args.compare:
        # the inducing inputs define the sampled model's prior (sample_f=True: a finite-rank GP): without this the
        # MAP start moves them with the sites it fits (on the latent collider, towards a near-interpolating fit
        # whose noise variance goes to 0), and NUTS samples that model
        freeze(model.inducing)
    if args.compare:
        # the reference protocol fixes the kernels and the noise at their generating values for NUTS as for the
        # guides: without this the MAP start below would also move them (they are parameters)
        freeze(model.kernels)
        freeze(model.likelihoods)
    # "site" keeps the set-up value, "site=3" sets it first
    fixed_sites = [item.partition("=")[::2] for item in (args.fix_child_lengthscale or "").split(",") if item]
    if priors is not None:
        for site, value in fixed_sites:
            module = model
            for part in site.split(".")[:-1]:
                module = module[part] if isinstance(module, torch.nn.ModuleDict) else getattr(module, part)
            name = site.split(".")[-1]
            if value:  # PyroModule's setattr on a PyroParam writes the unconstrained value in place
                setattr(module, name, torch.full_like(getattr(module, name).detach(), float(value)))
            getattr(module, name + "_unconstrained").requires_grad_(False)
    if (args.fix_latent_variance or args.fix_child_lengthscale) and priors is not None:
        from pyro_dag.priors import set_hyperpriors
        set_hyperpriors(model, priors, fix_latent_variance=args.fix_latent_variance)
    n = next(iter(inputs.values())).shape[0]
    sampled = model
    if args.centre_hidden:
        from pyro_dag.infer import CentredInducing

        sampled = CentredInducing(model)
    print(f"{args.model}: n = {n}, M = {args.num_inducing}, priors = {priors}, {args.chains} chains x "
          f"{args.draws} draws after {args.warmup} warm-up", flush=True)
    if args.compile:
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1  # compile in this process: its CPU time is counted below
    runs, stats, times, cpu_times, compile_times = run_nuts(sampled, inputs, data, args.chains, args.warmup, args.draws,
                                             args.max_tree_depth, jit=args.jit,
                                             full_mass=[tuple(args.dense_block.split(","))] if args.dense_block
                                             else args.full_mass,
                                             target_accept=args.target_accept, compile=args.compile,
                                             init=args.init, seed=args.seed)
    idata = to_inference_data(mcmc=runs, sample_stats=stats)
    summ, res = mixing_summary(idata)
    # where the chains are, not only whether they agree: the hyperparameters' posterior means and the
    # noise-free fit of the observed leaves (a chain stuck at a degenerate fit, e.g. noise -> 0, mixes too)
    res["posterior_means"] = {v: float(idata.posterior[v].mean()) for v in idata.posterior.data_vars
                              if v.startswith(("kernels.", "likelihoods."))}
    # per chain: do chains that disagree sit in different modes (each chain settled, at different hyperparameters
    # and fits) or wander in one? The mean pointwise log-likelihood of the data, summed over cases, tells the fits
    res["per_chain_means"] = {v: [float(m) for m in idata.posterior[v].mean("draw").values]
                              for v in res["posterior_means"]}
    loglik = sum(idata.log_likelihood[v].sum([d for d in idata.log_likelihood[v].dims if d not in ("chain", "draw")])
                 for v in idata.log_likelihood.data_vars)
    res["per_chain_mean_log_likelihood"] = [float(m) for m in loglik.mean("draw").values]
    if args.model == "chain":
        f = idata.posterior["b.f"].mean(("chain", "draw")).values.reshape(-1)
        res["rmse_b_f_vs_sin2x"] = float(np.sqrt(np.mean((f - chain_mean(inputs["x"]).reshape(-1).numpy()) ** 2)))
    leaf, noise_free = ("b.f", chain_mean(inputs["x"])) if args.model == "chain" else ("w3.f", truth["w3"])
    if args.chains > 1:
        res["stacking"] = stacking_summary(idata, leaf, noise_free.reshape(-1).numpy())
        print("stacking:", res["stacking"], flush=True)
    res.update(model=args.model, n=n, num_inducing=args.num_inducing, priors=priors, chains=args.chains,
               warmup=args.warmup, draws=args.draws, seconds_per_chain=times, seconds_total=float(sum(times)),
               cpu_seconds_per_chain=cpu_times,
               max_tree_depth=args.max_tree_depth, full_mass=args.full_mass, dense_block=args.dense_block,
               fix_latent_variance=args.fix_latent_variance, jitter=args.jitter, target_accept=args.target_accept, collapse=args.collapse,
               observe_hidden=args.observe_hidden, jit=args.jit, compile=args.compile,
               compile_seconds_per_chain=compile_times, init=args.init, centre_hidden=args.centre_hidden,
               fixed_inducing=args.fixed_inducing or args.compare, fix_child_lengthscale=args.fix_child_lengthscale,
               hidden_kernel=args.hidden_kernel, seed=args.seed,
               targets_met=bool(res["max_rhat"] <= 1.01 and res["min_ess_bulk"] >= 400 and res["divergences"] == 0
                                and sum(cpu_times) <= 600))
    print(summ.sort_values("ess_bulk").head(8).to_string())
    print({k: v for k, v in res.items() if k != "seconds_per_chain"})
    if args.compare and args.model == "collider":
        res["comparison"] = compare_with_guides(model, runs, inputs, data, args)
        print(res["comparison"])
    name = f"nuts_mixing_{args.model}" + ("_fixed" if priors is None else "") + (
        "_dense" if args.full_mass else "") + ("_block" if args.dense_block else "") + (
        "_scale" if args.fix_latent_variance else "") + (
        "_collapsed" if args.collapse == "inducing" else "") + ("_observed" if args.observe_hidden else "") + (
        f"_accept{args.target_accept:g}".replace(".", "") if args.target_accept != 0.8 else "") + (
        "_traced" if args.jit else "") + ("_compiled" if args.compile else "") + (
        f"_jitter{args.jitter:g}" if args.jitter is not None else "") + (
        "_priorstart" if args.init == "prior-median" else "_vistart" if args.init == "vi" else "") + (
        "_centred" if args.centre_hidden else "") + (
        "_fixedZ" if args.fixed_inducing and not args.compare else "") + (
        "_childscale" + "".join(f"_{value}" for _, value in fixed_sites if value) if fixed_sites else "") + (
        f"_{args.hidden_kernel}" if args.hidden_kernel != "rbf" else "") + (
        f"_seed{args.seed}" if args.seed else "")
    if not args.no_write:
        write_json(name, res)
        write_readme(name, res)


def posterior_moments(w1, w2):
    """Per-case posterior means and variances of the parents, and the mean over cases of corr(w1, w2)."""
    w1, w2 = np.asarray(w1), np.asarray(w2)  # [S, n]
    c = ((w1 - w1.mean(0)) * (w2 - w2.mean(0))).mean(0) / (w1.std(0) * w2.std(0))
    return {"mean1": w1.mean(0), "mean2": w2.mean(0), "var1": w1.var(0), "var2": w2.var(0), "corr": c}


def compare_with_guides(model, runs, inputs, data, args):
    """DAG-SVI and DAG-VI against NUTS on the collider, all three with the kernels, the noise and the inducing
    inputs fixed at the generating values (run with ``--no-priors``; the paper's protocol, App. G.3): RMSE over
    cases of the parents' per-case posterior means and variances and of corr(w1, w2)."""
    from pyro.infer import SVI

    from pyro_dag.infer import DAGELBO
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    from pyro_dag.diagnostics import to_inference_data

    idata = to_inference_data(mcmc=runs, log_likelihood=False, posterior_predictive=False)
    w1 = idata.posterior["w1.f"].values.reshape(-1, idata.posterior.sizes["case"])
    w2 = idata.posterior["w2.f"].values.reshape(-1, idata.posterior.sizes["case"])
    ref = posterior_moments(w1, w2)
    out = {"nuts": {"mean_corr": float(ref["corr"].mean()), "mean_var1": float(ref["var1"].mean()),
                    "mean_var2": float(ref["var2"].mean())}}
    graph = model.graph
    for structure, label in (("chordal", "DAG-SVI"), ("mean_field", "DAG-VI")):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        m = collider_model(graph, args.num_inducing, None, sample_f=False, observe_hidden=args.observe_hidden)
        m.setup(inputs, data)
        from pyro_dag.utils import freeze
        freeze(m.kernels)
        freeze(m.likelihoods)
        freeze(m.inducing)
        guide = AutoStructuredGuide(m, precision=structure)
        svi = SVI(m, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
        for _ in range(args.svi_steps):
            svi.step(inputs, data)
        pred = m.predict(guide, inputs, nodes=["w1", "w2"], num_samples=2000)
        mom = posterior_moments(pred["w1"].samples.squeeze(-1).numpy(), pred["w2"].samples.squeeze(-1).numpy())
        out[label] = {
            "mean_err_w1": float(np.sqrt(np.mean((mom["mean1"] - ref["mean1"]) ** 2))),
            "mean_err_w2": float(np.sqrt(np.mean((mom["mean2"] - ref["mean2"]) ** 2))),
            "var_err_w1": float(np.sqrt(np.mean((mom["var1"] - ref["var1"]) ** 2))),
            "var_err_w2": float(np.sqrt(np.mean((mom["var2"] - ref["var2"]) ** 2))),
            "corr_err": float(np.sqrt(np.mean((mom["corr"] - ref["corr"]) ** 2))),
            "mean_corr": float(mom["corr"].mean()), "mean_var1": float(mom["var1"].mean()),
        }
    return out


def write_readme(name, res):
    ok = "met" if res["targets_met"] else "**not met**"
    M = res["num_inducing"]
    M = ",".join(f"{k}={v}" for k, v in M.items()) if isinstance(M, dict) else str(M)
    lines = [f"### NUTS mixing: {res['model']} (n = {res['n']}, M = {M} per node, "
             f"priors = {res['priors']})", "",
             f"`python benchmarks/nuts_mixing.py --model {res['model']} --chains {res['chains']} --warmup "
             f"{res['warmup']} --draws {res['draws']} --num-inducing {M} --max-tree-depth "
             f"{res['max_tree_depth']}" + (" --full-mass" if res.get("full_mass") else "")
             + (f" --dense-block {res['dense_block']}" if res.get("dense_block") else "")
             + (" --fix-latent-variance" if res.get("fix_latent_variance") else "")
             + (" --no-priors" if res.get("priors") is None else "")
             + (" --collapse inducing" if res.get("collapse") == "inducing" else "")
             + (" --observe-hidden" if res.get("observe_hidden") else "")
             + (f" --target-accept {res['target_accept']}" if res.get("target_accept", 0.8) != 0.8 else "")
             + (" --jit" if res.get("jit") else "") + (" --compile" if res.get("compile") else "")
             + (f" --jitter {res['jitter']:g}" if res.get("jitter") is not None else "")
             + (" --compare" if res.get("comparison") else "")
             + (f" --init {res['init']}" if res.get("init", "map") != "map" else "")
             + (" --centre-hidden" if res.get("centre_hidden") else "")
             + (f" --hidden-kernel {res['hidden_kernel']}" if res.get("hidden_kernel", "rbf") != "rbf" else "")
             + (" --fixed-inducing" if res.get("fixed_inducing") and not res.get("comparison") else "")
             + (f" --fix-child-lengthscale {res['fix_child_lengthscale']}" if res.get("fix_child_lengthscale")
                else "")
             + (f" --seed {res['seed']}" if res.get("seed", 0) else "")
             + "` (one core, chains one after the other, NUTS from a "
             + ("start with the hyperparameters at their prior medians and a MAP of the rest"
                if res.get("init") == "prior-median" else "start at the median of a mean-field VI fit (AutoNormal, 500 "
                "steps)" if res.get("init") == "vi" else "MAP start")
             + ", non-centred node values; "
             + ("dense" if res.get("full_mass") else f"dense over {res['dense_block']}, otherwise diagonal"
                if res.get("dense_block") else "diagonal") + " mass matrix"
             + ("; hidden-node kernel variances fixed at 1" if res.get("fix_latent_variance") else "")
             + (f"; {res['hidden_kernel']} kernels on the hidden nodes" if res.get("hidden_kernel", "rbf") != "rbf"
                else "")
             + ("; the hidden nodes' inducing outputs centred (`pyro_dag.infer.CentredInducing`)"
                if res.get("centre_hidden") else "")
             + ("; inducing inputs fixed at their set-up values (not moved by the MAP start)"
                if res.get("fixed_inducing") else "")
             + (f"; {res['fix_child_lengthscale']} fixed (no prior; at its set-up value where no '=' gives one)"
                if res.get("fix_child_lengthscale") else "")
             + (f"; relative jitter {res['jitter']:g} on K(Z, Z)" if res.get("jitter") is not None else "")
             + ("; the observed leaf's inducing outputs integrated out, drawn exactly given each draw"
                if res.get("collapse") == "inducing" else "")
             + ("; the observed intermediate nodes sampled in posterior-whitened coordinates"
                if res.get("collapse") == "inducing" and res.get("observe_hidden") else "")
             + (f"; target acceptance {res['target_accept']}" if res.get("target_accept", 0.8) != 0.8 else "")
             + ("; potential traced once per chain, `pyro_dag.infer.TracedNUTS`" if res.get("jit") else "")
             + ("; potential compiled once per chain, `pyro_dag.infer.CompiledNUTS` (compilation included in the "
                "CPU time)" if res.get("compile") else "")
             + "):", "",
             "| max R-hat | min bulk ESS | min bulk ESS (hyper) | min tail ESS | R-hat / bulk ESS, identifiable | "
             "divergences | mean tree depth | step size | CPU s per chain (max) | CPU s, all chains | "
             "wall s per chain (max) | target |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|",
             f"| {res['max_rhat']:.3f} | {res['min_ess_bulk']:.0f} | "
             f"{'-' if res['min_ess_bulk_hyper'] is None else format(res['min_ess_bulk_hyper'], '.0f')} | "
             f"{res['min_ess_tail']:.0f} | "
             + ("-" if res.get("max_rhat_identifiable") is None else
                f"{res['max_rhat_identifiable']:.3f} / {res['min_ess_bulk_identifiable']:.0f}")
             + f" | {res['divergences']} | {res['mean_tree_depth']:.2f} | {res['step_size']:.3g} | "
             f"{max(res['cpu_seconds_per_chain']):.0f} | {sum(res['cpu_seconds_per_chain']):.0f} | "
             f"{max(res['seconds_per_chain']):.0f} | {ok} |", "",
             "Target: R-hat ≤ 1.01 and bulk ESS ≥ 400 for every inducing output and hyperparameter, no "
             "divergences, ≤ 10 min per model on one core (CPU time of the process, all chains; the wall time on "
             "the shared 2-core machine, under load, is longer). Identifiable: the observed nodes' function values "
             f"at the cases and the noise ({', '.join(res.get('identifiable', []))})"
             + ("; every GP node is observed here." if res.get("observe_hidden") else
                "; a hidden node's inducing outputs and values are identified only up to a monotone warping of "
                "that node, which its child's GP undoes.")]
    if res.get("posterior_means"):
        lines += ["", "Posterior means: " + ", ".join(f"`{k}` {v:.3g}" for k, v in res["posterior_means"].items())
                  + (f"; RMSE of the posterior mean of b's values against sin(2x): {res['rmse_b_f_vs_sin2x']:.3g}"
                     if "rmse_b_f_vs_sin2x" in res else "") + "."]
    if res.get("per_chain_means") and res.get("chains", 1) > 1:
        lines += ["", "Per chain (means over its draws): " + "; ".join(
            f"`{k}` " + " / ".join(f"{v:.3g}" for v in vals) for k, vals in res["per_chain_means"].items())
            + "; log-likelihood of the data " + " / ".join(f"{v:.1f}" for v in res["per_chain_mean_log_likelihood"])
            + "."]
    st = res.get("stacking")
    if st:
        def slash(vals, fmt):
            return " / ".join(format(v, fmt) for v in vals)

        lines += ["", "Chain stacking (`pyro_dag.diagnostics.chain_stacking`, Yao, Vehtari & Gelman 2022), per chain: "
                  f"R-hat of its halves {slash(st['max_rhat_per_chain'], '.3f')} (max), bulk ESS "
                  f"{slash(st['min_ess_bulk_per_chain'], '.0f')} (min); PSIS-LOO elpd "
                  f"{slash(st['elpd_loo_per_chain'], '.1f')} (max k̂ {slash(st['max_pareto_k_per_chain'], '.2f')}); "
                  f"stacking weights {slash(st['weights'], '.3f')} (stacked elpd {st['elpd_stacked']:.1f}); RMSE of "
                  f"the posterior-mean {st['leaf']} against the noise-free truth "
                  f"{slash(st['rmse_leaf_per_chain'], '.4f')}, pooled {st['rmse_leaf_pooled']:.4f}, "
                  f"stacked {st['rmse_leaf_stacked']:.4f}."]
    cmp = res.get("comparison")
    if cmp:
        lines += ["", "Collider posterior of the parents against NUTS (RMSE over cases of the per-case posterior "
                  "mean, variance and corr(w1, w2); kernels, noise and inducing inputs fixed for all three):",
                  "", "| | mean err w1 | mean err w2 | var err w1 | var err w2 | corr err | mean corr |",
                  "|---|---|---|---|---|---|---|"]
        for label in ("DAG-SVI", "DAG-VI"):
            c = cmp[label]
            lines.append(f"| {label} | {c['mean_err_w1']:.3f} | {c['mean_err_w2']:.3f} | {c['var_err_w1']:.4f} | "
                         f"{c['var_err_w2']:.4f} | {c['corr_err']:.3f} | {c['mean_corr']:.3f} |")
        lines.append(f"| NUTS | | | | | | {cmp['nuts']['mean_corr']:.3f} |")
    write_readme_section(name, "\n".join(lines))


if __name__ == "__main__":
    main()
