"""
Explaining away in a deep GP on a DAG: the latent collider
==========================================================

A DAG deep GP puts one sparse GP on every non-root node of a DAG, over its parents' values (Perlino,
Hamelijnck, Johansen & Damoulas 2026, *Deep Gaussian Processes on Directed Acyclic Graphs*,
arXiv:2607.09645, Sec. 1). Here the DAG is the paper's latent collider ``x1 → w1 → w3 ← w2 ← x2`` (Sec. 4.1):
only the child ``w3`` is observed, and its kernel depends on the *sum* of its parents, so many ``(w1, w2)``
pairs explain the same child value. A posterior that factorises over nodes (DAG-VI, mean field) cannot
represent that; the chordal structured guide (DAG-SVI) can. This tutorial fits both with standard Pyro
objects.

Run it as a script (``python tutorials/collider.py``, about a minute on one core) or cell by cell. With
``PYRO_DAG_QUICK=1`` (the short mode the documentation build and the tests use) each fit takes 150 steps
instead of 3000 and the natural-gradient fit is skipped: the printed numbers are then those of unconverged
fits.
"""

# %%
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pyro  # noqa: E402
import torch  # noqa: E402
from pyro.infer import SVI  # noqa: E402

from pyro_dag import DAGDGP, kernels  # noqa: E402
from pyro_dag.datasets import collider  # noqa: E402
from pyro_dag.gp import Gaussian  # noqa: E402
from pyro_dag.infer import DAGELBO, GaussianNaturalGradient  # noqa: E402
from pyro_dag.infer.autoguide import AutoStructuredGuide  # noqa: E402
from pyro_dag.utils import freeze  # noqa: E402

torch.set_num_threads(1)
QUICK = os.environ.get("PYRO_DAG_QUICK") == "1"
STEPS = 150 if QUICK else 3000
OUT = os.environ.get("PYRO_DAG_TUTORIAL_OUT", "tutorial_out")
os.makedirs(OUT, exist_ok=True)

# %%
# The data
# --------
# :func:`~pyro_dag.datasets.collider` draws the two parent functions, the child surface on their sum, and
# noisy observations of the child on 119 of the 165 grid cases (the other 46 are held out and marked NaN).

# %%
ds = collider(seed=0)
print(ds.graph.edges, {k: tuple(v.shape) for k, v in ds.inputs.items()}, tuple(ds.data["w3"].shape))
print("observed child entries:", int((~torch.isnan(ds.data["w3"])).sum()))

# %%
# The model
# ---------
# One GP per non-root node. The parents get RBF kernels on their roots; the child gets ``SumInput``, an RBF
# on ``w1 + w2``. As in the paper we hold the kernels, the noise (0.015²) and the inducing inputs fixed and
# learn only the posterior. The child's inducing inputs are spread over the range of the parents' values
# (the model's default initialisation does this; a symmetric grid would be degenerate for ``SumInput``).


# %%
def make_model():
    model = DAGDGP(
        ds.graph,
        kernels={"w1": kernels.RBF(lengthscale=0.4), "w2": kernels.RBF(lengthscale=0.4),
                 "w3": kernels.SumInput(kernels.RBF(lengthscale=0.6))},
        num_inducing={"w1": 15, "w2": 15, "w3": 49},
        likelihoods={"w3": Gaussian(variance=0.015**2)},
        learn_inducing=False,
    ).double()
    freeze(model.kernels)      # fixed hyperparameters ...
    freeze(model.likelihoods)  # ... and fixed noise
    return model


# %%
# Fit DAG-VI and DAG-SVI with ``SVI`` and ``DAGELBO``
# ---------------------------------------------------
# :class:`~pyro_dag.infer.DAGELBO` is the paper's estimator: analytic KL, marginal ancestral sampling through
# the DAG, and the closed-form expected Gaussian log-likelihood. The guide starts at the prior for the latent
# parents and with a small scale (0.01) for the observed child.
#
# The third fit is the recommended recipe for structured guides (beyond the paper): a third of the steps
# with Adam, then natural-gradient steps on the whole Gaussian posterior
# (:class:`~pyro_dag.infer.GaussianNaturalGradient`), with the samples drawn in antithetic pairs. Adam shrinks
# the parents' variance in every direction, including the explaining-away one it should keep; the natural
# gradient recovers it (a variance of about 0.15, what the model implies; the repository's
# ``benchmarks/README.md`` has the numbers over 10 seeds). The natural-gradient steps need a reasonable guide
# to start from (about 1000 Adam steps), so the short mode skips that fit.

# %%
fits = {}
runs = [("mean_field", "mean_field", False), ("chordal", "chordal", False)]
if not QUICK:
    runs.append(("chordal + natural gradient", "chordal", True))
for label, structure, natural in runs:
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = make_model()
    guide = AutoStructuredGuide(model, precision=structure, init_scale={"w3": 0.01})
    elbo = DAGELBO(num_particles=4, antithetic=natural)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), elbo)
    adam_steps = STEPS // 3 if natural else STEPS
    for step in range(adam_steps):
        loss = svi.step(ds.inputs, ds.data)
    if natural:
        ng = GaussianNaturalGradient(model, guide, elbo, step_size=0.01)
        for step in range(STEPS - adam_steps):
            loss = ng.step(ds.inputs, ds.data)
    pred = model.predict(guide, ds.inputs, num_samples=500)
    fits[label] = pred
    rmse = (pred["w3"].mean - ds.truth["w3"]).pow(2).mean().sqrt().item()
    print(f"{label:27s} final -ELBO {loss:9.1f}  child RMSE {rmse:.4f}  "
          f"parent variance {pred['w1'].variance.mean().item():.2e}")

# %%
# Explaining away
# ---------------
# For a few cases, plot the posterior samples of ``(w1, w2)`` (centred). DAG-VI gives a small round cloud
# (the parents are independent a posteriori and their variance collapses). DAG-SVI gives an elongated
# cloud along the child's level set ``w1 + w2 = const``: shifting ``w1`` up and ``w2`` down explains the data
# equally well.

# %%
fig, axes = plt.subplots(1, len(fits), figsize=(4.4 * len(fits), 4.5), sharex=True, sharey=True)
for ax, (structure, pred) in zip(axes, fits.items()):
    w1, w2 = pred["w1"].samples[..., 0], pred["w2"].samples[..., 0]
    c1, c2 = w1 - w1.mean(0), w2 - w2.mean(0)
    corr = ((c1 * c2).mean(0) / (c1.std(0, unbiased=False) * c2.std(0, unbiased=False))).abs().mean()
    for k, case in enumerate([0, 40, 82, 120, 164]):
        ax.scatter(c1[:, case], c2[:, case], s=3, alpha=0.4, color=f"C{k}")
    ax.set_title(f"{structure}: mean |corr(w1, w2)| = {corr:.2f}", fontsize=9)
    ax.set_xlabel("w1 - mean")
axes[0].set_ylabel("w2 - mean")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "collider_explaining_away.png"), dpi=100)
print("saved", os.path.join(OUT, "collider_explaining_away.png"))

# %%
# Predicting nodes that are never observed
# ----------------------------------------
# ``model.predict`` returns samples, means and variances for every node, at any root inputs; here the
# parents at new ``x1`` values with ``x2`` fixed.

# %%
new = {"x1": torch.linspace(-1, 1, 7, dtype=torch.float64).unsqueeze(-1),
       "x2": torch.zeros(7, 1, dtype=torch.float64)}
pred = model.predict(guide, new, num_samples=200)
print("w1 at new inputs:", pred["w1"].mean[:, 0].round(decimals=3).tolist())
print("samples shape:", tuple(pred["w3"].samples.shape))
