"""
Latent-variable structural equation models with GP equations (GPSEM-LV)
=======================================================================

Structural equation models with latent variables describe a few unobserved quantities (here ``X1`` and ``X2``)
through observed *indicators*, each a noisy linear measurement of one latent, and a DAG of *structural equations*
among the latents. Silva & Gramacy (2010), *Gaussian Process Structural Equation Models with Latent Variables*
(UAI, arXiv:1002.4802) make the structural equations nonparametric: ``X_i = f_i(X_{pa(i)}) + ζ_i`` with a sparse
GP ``f_i`` whose pseudo-inputs are random. :class:`~pyro_dag.sem.LatentSEM` is that model as a Pyro model, for
SVI and NUTS. This tutorial reproduces the paper's synthetic quadratic problem (Sec. 5, Fig. 3), shows the
build-time identifiability check, and compares with a GPLVM.

Run it as a script (``python tutorials/latent_sem.py``, several minutes on one core). With ``PYRO_DAG_QUICK=1``
(the short mode the documentation build and the tests use) the SVI fit takes 300 steps with 20 pseudo-inputs,
NUTS runs 20 + 20 iterations and the GPLVM 200 steps: the printed numbers are then those of unconverged fits.
"""

# %%
import os
import warnings

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import networkx as nx  # noqa: E402
import numpy as np  # noqa: E402
import pyro  # noqa: E402
import pyro.contrib.gp as gp  # noqa: E402
import torch  # noqa: E402
from pyro.infer import MCMC, NUTS, SVI, Trace_ELBO  # noqa: E402

from pyro_dag.datasets.latent_sem import quadratic_sem  # noqa: E402
from pyro_dag.sem import (IdentifiabilityWarning, LatentSEM, SEMSpecError, guide_samples, latent_means,  # noqa: E402
                          sem_guide)

torch.set_num_threads(1)
torch.set_default_dtype(torch.float64)
QUICK = os.environ.get("PYRO_DAG_QUICK") == "1"
STEPS, M = (300, 20) if QUICK else (5000, 50)
WARMUP, DRAWS = (20, 20) if QUICK else (300, 300)
GPLVM_STEPS = 200 if QUICK else 3000
OUT = os.environ.get("PYRO_DAG_TUTORIAL_OUT", "tutorial_out")
os.makedirs(OUT, exist_ok=True)

# %%
# The data
# --------
# ``X1 ~ N(0, 1)``, ``X2 = 4 X1² + ζ``, and three indicators per latent, ``Y = X + ε`` (all noises standard
# normal), N = 150. Only the six indicators are observed; the latents are what we want back.

# %%
data = quadratic_sem(n=150, seed=0)
print(data.data.head(3))
print(data.indicators, data.anchors)

# %%
# Declaring the model, and the identifiability check
# --------------------------------------------------
# A measurement model is identified (up to the scale and sign of each latent) when every latent has at least
# three indicators with no other latent parent (Silva & Gramacy 2010, Sec. 2.1, after Bollen 1989). One
# *anchor* indicator per latent, ``Y = X + ε`` (loading 1, intercept 0), fixes the scale and sign. The check
# runs when the model is built; declarations that fail it raise an error naming the latent:

# %%
try:
    LatentSEM(data.graph, indicators={"X1": ["Y1"], "X2": ["Y4", "Y5", "Y6"]})
except SEMSpecError as e:
    print("error:", e)
try:
    LatentSEM(data.graph, indicators={"X1": ["Y1", "Y2", "Y3", "Y4"], "X2": ["Y4", "Y5", "Y6"]})
except SEMSpecError as e:
    print("error:", e)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    LatentSEM(data.graph, indicators={"X1": ["Y1", "Y2"], "X2": ["Y4", "Y5", "Y6"]})
print("warning:", [str(w.message) for w in caught if issubclass(w.category, IdentifiabilityWarning)][0])

# %%
# The GPSEM-LV model: ``X2 = f(X1) + ζ`` with a sparse GP ``f`` on ``M`` random pseudo-inputs, a Gaussian
# exogenous ``X1`` (``exogenous="mixture"`` gives a Dirichlet-weighted mixture of Gaussians) and linear-Gaussian
# indicators.

# %%
model = LatentSEM(data.graph, indicators=data.indicators, anchors=data.anchors, num_inducing=M)

# %%
# SVI
# ---
# :func:`~pyro_dag.sem.sem_guide` puts an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` over the global
# sites (loadings, noise variances, GP hyperparameters, pseudo-inputs and pseudo-functions) and per-case Gaussians
# over the latent values.

# %%
pyro.set_rng_seed(0)
guide = sem_guide(model)
svi = SVI(model, guide, pyro.optim.ClippedAdam({"lr": 0.02, "lrd": 0.1 ** (1 / STEPS)}), Trace_ELBO())
for step in range(STEPS):
    loss = svi.step(data.data)
print("final loss", round(loss, 1))
svi_means = latent_means(model, guide_samples(model, guide, data.data, num_samples=200))
print("SVI  corr(E[X2], E[X1]^2) =", round(np.corrcoef(svi_means["X2"], svi_means["X1"] ** 2)[0, 1], 3))

# %%
# NUTS
# ----
# The same model under ``MCMC(NUTS(model))``, started from :meth:`~pyro_dag.sem.LatentSEM.init_loc_fn`
# (latents at their indicators' averages, pseudo-inputs spread over their prior).

# %%
pyro.set_rng_seed(0)
nuts_model = LatentSEM(data.graph, indicators=data.indicators, anchors=data.anchors, num_inducing=M)
nuts_model(data.data)  # fixes the standardisation before NUTS initialises
mcmc = MCMC(NUTS(nuts_model, init_strategy=nuts_model.init_loc_fn, max_tree_depth=7, jit_compile=True,
                 ignore_jit_warnings=True), warmup_steps=WARMUP, num_samples=DRAWS, disable_progbar=True)
mcmc.run(data.data)
nuts_means = latent_means(nuts_model, mcmc.get_samples())
print("NUTS corr(E[X2], E[X1]^2) =", round(np.corrcoef(nuts_means["X2"], nuts_means["X1"] ** 2)[0, 1], 3))

# %%
# A GPLVM for comparison
# ----------------------
# The GPLVM (Lawrence 2005; ``pyro.contrib.gp.models.GPLVM``) maps two independent standard-normal latents
# nonparametrically to the six indicators. It has no measurement model and no structural equation, so its
# latents need not show the quadratic.

# %%
Y = torch.as_tensor(data.data.to_numpy().copy())
Y = (Y - Y.mean(0)) / Y.std(0)
X0 = torch.linalg.svd(Y, full_matrices=False)[0][:, :2] * np.sqrt(len(Y))
pyro.clear_param_store()
sgpr = gp.models.SparseGPRegression(X0.clone(), Y.T, gp.kernels.RBF(2, lengthscale=torch.ones(2)), X0[:20].clone(),
                                    noise=torch.tensor(0.1), jitter=1e-5)
gplvm = gp.models.GPLVM(sgpr)
gp.util.train(gplvm, torch.optim.Adam(gplvm.parameters(), lr=0.01), num_steps=GPLVM_STEPS)
Z = gplvm.X_loc.detach().numpy()

# %%
fig, ax = plt.subplots(1, 4, figsize=(14, 3.2))
ax[0].scatter(data.data["Y1"], data.data["Y4"], s=8)
ax[0].set(title="indicators Y1 vs Y4", xlabel="Y1", ylabel="Y4")
ax[1].scatter(data.latents["X1"], data.latents["X2"], s=8, color="k")
ax[1].set(title="true latents", xlabel="X1", ylabel="X2")
ax[2].scatter(svi_means["X1"], svi_means["X2"], s=8, label="SVI")
ax[2].scatter(nuts_means["X1"], nuts_means["X2"], s=8, label="NUTS")
ax[2].set(title="GPSEM-LV posterior means", xlabel="X1", ylabel="X2")
ax[2].legend()
ax[3].scatter(Z[:, 0], Z[:, 1], s=8, color="C3")
ax[3].set(title="GPLVM latent means", xlabel="z1", ylabel="z2")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "latent_sem_quadratic.png"), dpi=100)

# %%
# The posterior means of ``(X1, X2)`` recover the quadratic (the paper's Fig. 3(c)); the GPLVM's embedding does
# not identify it. Measured numbers for the full-length fits are in ``benchmarks/README.md``
# (``benchmarks/sem_quadratic.py``).
