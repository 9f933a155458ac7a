"""
NUTS and ArviZ for a deep GP on a DAG
=====================================

The same small DAG deep GP (Perlino, Hamelijnck, Johansen & Damoulas 2026, *Deep Gaussian Processes on Directed
Acyclic Graphs*, arXiv:2607.09645) fitted two ways with standard Pyro objects: by ``MCMC(TracedNUTS(model))``
(Pyro's NUTS with a traced potential), which also samples the kernel hyperparameters and the noise under weakly
informative priors, and by DAG-SVI
(:class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` with :class:`~pyro_dag.infer.DAGELBO`). Both go to ArviZ
through :func:`pyro_dag.to_inference_data`: convergence diagnostics, posterior predictive checks, PSIS-LOO
(Vehtari, Gelman & Gabry 2017) and a model comparison, then a picture of the DAG with each node's posterior
uncertainty (:func:`pyro_dag.plot.dag`).

For NUTS the model is built with ``sample_f=True`` (node values are sample sites, non-centred:
``f = μ(U) + sd(U) · ε`` with ``ε ~ N(0, I)`` the site, so that NUTS does not meet the funnel of the centred
parameterisation), ``collapse="inducing"`` (the observed leaf's inducing outputs are integrated out, and
:func:`pyro_dag.to_inference_data` draws them exactly given each NUTS draw) and ``priors="weakly_informative"``.

Run it as a script (``python tutorials/mcmc_arviz.py``: about 7 CPU minutes on one core, most of it the two NUTS
chains' 140 000 gradients, whose trajectories reach the depth limit of 7 on most iterations; R-hat at most 1.02 over
its 107 variables; ``benchmarks/guide_mcmc.py --parts tutorial``). With ``PYRO_DAG_QUICK=1``
(the short mode of the documentation build and the tests) the chains are short, so the diagnostics printed are
those of unconverged chains.
"""

# %%
import os

import matplotlib

matplotlib.use("Agg")
import arviz as az  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import pyro  # noqa: E402
import torch  # noqa: E402
from pyro.infer import MCMC, SVI, Trace_ELBO  # noqa: E402
from pyro.infer.autoguide import AutoDelta, init_to_value  # noqa: E402

import pyro_dag  # noqa: E402
from pyro_dag import DAGDGP  # noqa: E402
from pyro_dag.diagnostics import MCMCStats, chain_stacking, check_prior_collapse, stacked_posterior  # noqa: E402
from pyro_dag.gp import Gaussian  # noqa: E402
from pyro_dag.infer import DAGELBO, TracedNUTS  # noqa: E402
from pyro_dag.infer.autoguide import AutoStructuredGuide  # noqa: E402

torch.set_num_threads(1)
QUICK = os.environ.get("PYRO_DAG_QUICK") == "1"
WARMUP, DRAWS, CHAINS, DEPTH = (10, 10, 2, 4) if QUICK else (300, 300, 2, 7)
SVI_STEPS = 100 if QUICK else 2000
MAP_STEPS = 20 if QUICK else 500
OUT = os.environ.get("PYRO_DAG_TUTORIAL_OUT", "tutorial_out")
os.makedirs(OUT, exist_ok=True)

# %%
# Data: a two-layer chain ``x → a → b`` with ``b`` observed (30 cases, two of them missing).
gen = torch.Generator().manual_seed(0)
x = torch.linspace(-1.5, 1.5, 30, dtype=torch.float64).unsqueeze(-1)
y = torch.sin(2 * x) + 0.05 * torch.randn(30, 1, dtype=torch.float64, generator=gen)
y[[7, 21]] = float("nan")
graph = nx.DiGraph([("x", "a"), ("a", "b")])
inputs, data = {"x": x}, {"b": y}

# %%
# A deep GP's posterior has mirror modes: flip the sign of the latent node ``a`` and reflect ``b``'s GP, and the
# fit is the same. Chains started at random points settle in different ones, and R-hat then measures that rather
# than the mixing, so every chain starts from one point: a MAP estimate (Pyro's ``AutoDelta``).
pyro.clear_param_store()
model = DAGDGP(graph, num_inducing=6, likelihoods={"b": Gaussian(0.05**2)}, sample_f=True,
               collapse="inducing", priors="weakly_informative").double()
model.setup(inputs, data)
pyro.set_rng_seed(0)
map_guide = AutoDelta(model)
map_svi = SVI(model, map_guide, pyro.optim.Adam({"lr": 0.02}), Trace_ELBO())
for step in range(MAP_STEPS):
    map_svi.step(inputs, data)
start = {name: value.detach() for name, value in map_guide.median(inputs, data).items()}

# %%
# NUTS: one chain at a time (one core), from the MAP point, the per-draw statistics recorded by ``MCMCStats``.
# ``TracedNUTS`` is Pyro's NUTS with the potential traced once per chain: the same posterior at a lower cost per
# gradient.
stats, runs = MCMCStats(), []
for chain in range(CHAINS):
    pyro.set_rng_seed(chain)
    kernel = TracedNUTS(model, max_tree_depth=DEPTH, init_strategy=init_to_value(values=start))
    mcmc = MCMC(kernel, num_samples=DRAWS, warmup_steps=WARMUP, hook_fn=stats,
                disable_progbar=True)
    mcmc.run(inputs, data)
    runs.append(mcmc)
nuts = pyro_dag.to_inference_data(mcmc=runs, sample_stats=stats)
print(nuts.posterior["b.u"].dims)  # ('chain', 'draw', 'b_output', 'b_inducing')
hyper = [v for v in nuts.posterior.data_vars if v.startswith(("kernels.", "likelihoods."))]
print(az.summary(nuts, var_names=hyper, kind="diagnostics"))
print("divergences:", int(nuts.sample_stats["diverging"].sum()))

# %%
# DAG-SVI on the same model structure (hyperparameters learned by the ELBO), then the same conversion: posterior
# draws of the inducing outputs and node values, pointwise log-likelihood, posterior predictive.
pyro.clear_param_store()
svi_model = DAGDGP(graph, num_inducing=6, likelihoods={"b": Gaussian(0.05**2)}).double()
guide = AutoStructuredGuide(svi_model)
svi = SVI(svi_model, guide, pyro.optim.Adam({"lr": 0.02}), DAGELBO(num_particles=4))
for step in range(SVI_STEPS):
    svi.step(inputs, data)
dag_svi = pyro_dag.to_inference_data(svi_model, guide, inputs, data=data, num_samples=2 * DRAWS)

# %%
# PSIS-LOO for both and their comparison (one log-likelihood variable per observed node).
print(az.compare({"NUTS": nuts, "DAG-SVI": dag_svi}, var_name="b.y")[["elpd_loo", "p_loo", "elpd_diff"]])

# %%
# Chains that disagree (R-hat > 1.01, e.g. each settled in another mode of a deep GP's posterior): weight them by
# their PSIS-LOO predictive performance (chain stacking, Yao, Vehtari & Gelman 2022, JMLR 23(79)) and resample
# the draws by those weights. When the chains agree, the weights among them are noise: keep the pooled draws.
stacking = chain_stacking(nuts)
print(stacking)  # weights, per-chain elpd_loo; check stacking.max_pareto_k (< 0.7) before trusting the weights
stacked = stacked_posterior(nuts, stacking.weights)
print(stacked.posterior.sizes["chain"], stacked.posterior.sizes["draw"])  # 1 chain of all the draws

# %%
# Trace plot of the hyperparameters and a posterior predictive check of ``b``.
az.plot_trace(nuts, var_names=hyper)
plt.tight_layout()
plt.savefig(os.path.join(OUT, "mcmc_trace.png"))
az.plot_ppc(nuts, var_names=["b.y"], num_pp_samples=min(50, CHAINS * DRAWS))
plt.savefig(os.path.join(OUT, "mcmc_ppc.png"))

# %%
# The DAG with each node's posterior sd (NUTS), and the prior-collapse check of the graph (Perlino et al. 2026,
# Sec. 4): a two-layer chain is shallow, so no warning.
fig, ax = plt.subplots(figsize=(6, 3))
pyro_dag.plot.dag(model, nuts, ax=ax, title="posterior sd of each node (NUTS)")
fig.savefig(os.path.join(OUT, "mcmc_dag.png"))
print("longest run of slices without a root-retaining node:", check_prior_collapse(model)[2])
