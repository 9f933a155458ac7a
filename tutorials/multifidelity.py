"""
Multi-fidelity emulation on a graph of simulators
=================================================

A simulator hierarchy is a DAG: the design input ``x`` is a root, each fidelity is a node observed at its own
design points, and a fidelity's parents are ``x`` and the fidelities it refines (Perlino, Hamelijnck, Johansen &
Damoulas 2026, *Deep Gaussian Processes on Directed Acyclic Graphs*, arXiv:2607.09645, Sec. 7 and Sec. 8.1; the
chain case is the MF-DGP of Cutajar et al. 2019). :class:`~pyro_dag.emulation.MultiFidelityEmulator` goes from
per-fidelity ``(X, y)`` arrays to predictions at every fidelity, and :func:`pyro_dag.emulation.shapley` says how
much each lower fidelity contributes to the high fidelity's prediction (the paper's Fig. 7).

Run it as a script (``python tutorials/multifidelity.py``, a few minutes on one core) or cell by cell. With
``PYRO_DAG_QUICK=1`` (the short mode of the documentation build and the tests) the fits are much shorter and the
printed numbers are those of unconverged fits.
"""

# %%
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from pyro_dag.datasets.multifidelity import chain_problem, graphical_problem  # noqa: E402
from pyro_dag.emulation import MultiFidelityEmulator  # noqa: E402

torch.set_num_threads(1)
QUICK = os.environ.get("PYRO_DAG_QUICK") == "1"
STEPS, PRETRAIN = (40, 100) if QUICK else (1000, 500)
OUT = os.environ.get("PYRO_DAG_TUTORIAL_OUT", "tutorial_out")
os.makedirs(OUT, exist_ok=True)

# %%
# Two fidelities: the Forrester function
# --------------------------------------
# The standard two-level benchmark (Forrester, Sóbester & Keane 2007): 50 cheap runs and 14 expensive ones, the
# expensive design a subset of the cheap one. Each fidelity is just an ``(X, y)`` pair; ``parents`` says which
# fidelity refines which.

# %%
p = chain_problem("forrester", [50, 14], num_test=100, seed=0)
(X_low, y_low), (X_high, y_high) = p.train["f1"], p.train["f2"]
em = MultiFidelityEmulator({"low": (X_low, y_low), "high": (X_high, y_high)}, parents={"high": ["low"]},
                           precision="mean_field", bounds=p.bounds)
print(em.mf.graph.edges, "cases:", em.mf.num_cases)

# %%
# ``fit`` initialises the kernels from the data (length-scales by the exact-GP marginal likelihood on a grid, the
# coupling by least squares of the high fidelity on the low one at the shared runs), pretrains each fidelity alone
# against its collapsed bound, places the high fidelity's inducing inputs at its runs augmented with the pretrained
# low fidelity's predictive mean (``predmean``), and then trains the whole DAG jointly.

# %%
em.fit(num_steps=STEPS, pretrain_steps=PRETRAIN)
x = np.linspace(0, 1, 200)[:, None]
pred = em.predict(x)
X_test, y_test = p.test
rmse = np.sqrt(np.mean((em.predict(X_test, ["high"])["high"].mean - y_test[:, 0]) ** 2))
print(f"high-fidelity test RMSE {rmse:.4f} (the training-mean predictor: "
      f"{np.sqrt(np.mean((y_test[:, 0] - y_high.mean()) ** 2)):.3f})")

fig, ax = plt.subplots(figsize=(6, 3.5))
for f, colour, (X, y) in (("low", "tab:blue", (X_low, y_low)), ("high", "tab:red", (X_high, y_high))):
    m, s = pred[f].mean, pred[f].std
    ax.plot(x[:, 0], m, color=colour, label=f"{f} fidelity")
    ax.fill_between(x[:, 0], m - 2 * s, m + 2 * s, color=colour, alpha=0.2)
    ax.scatter(X[:, 0], y, color=colour, s=12)
ax.plot(x[:, 0], p.truth["f2"](x)[:, 0], "k--", lw=1, label="true high fidelity")
ax.legend()
fig.tight_layout()
fig.savefig(os.path.join(OUT, "multifidelity_forrester.png"))

# %%
# A graph of simulators
# ---------------------
# Two complementary low fidelities and one high fidelity, ``x → L1, x → L2, {x, L1, L2} → H``: the shape of the
# heavy-ion collision simulators of the paper's Sec. 7. In
# :func:`~pyro_dag.datasets.multifidelity.graphical_problem`, ``L1`` carries the Currin part of ``H`` and ``L2``
# its Forrester part, so neither chain alone explains ``H``. 200 runs of each low fidelity and 25 of the high
# one, as in the paper's published split. DAG-SVI (the chordal guide) keeps the posterior correlations between
# the fidelities' inducing outputs.

# %%
g = graphical_problem(n_low=200, n_high=25, num_test=75, seed=0)
em2 = MultiFidelityEmulator(g.train, g.parents, precision="chordal", bounds=g.bounds)
em2.fit(num_steps=STEPS, pretrain_steps=PRETRAIN)
Xg, yg = g.test
h = em2.predict(Xg, ["H"])["H"]
print(f"graphical problem: H test RMSE {np.sqrt(np.mean((h.mean - yg[:, 0]) ** 2)):.3f} "
      f"(the training-mean predictor: {np.sqrt(np.mean((yg[:, 0] - g.train['H'][1].mean()) ** 2)):.3f})")

# %%
# Which low fidelity matters where
# --------------------------------
# Exact Shapley values over the two parents, per test case: for the predictive **mean** the excluded parent is
# marginalised over the other cases (interventional Shapley), for the predictive **variance** it is held at its
# posterior mean, so the variance shares say whose uncertainty the high fidelity inherits. The shares
# ``|φ_p| / Σ_q |φ_q|`` are the paper's Fig. 7.

# %%
res = em2.shapley(Xg, num_samples=64 if QUICK else 256)
print("mean share of L1 / L2 (average over the test cases):", res.mean_share.mean(0).numpy().round(3))
print("variance share of L1 / L2:", res.variance_share.mean(0).numpy().round(3))
order = np.argsort(res.mean_share[:, 0].numpy())
fig, axes = plt.subplots(2, 1, figsize=(7, 4), sharex=True)
for ax, share, title in ((axes[0], res.mean_share, "predictive mean"), (axes[1], res.variance_share,
                                                                          "predictive variance")):
    s = share.numpy()[order]
    ax.bar(np.arange(len(s)), s[:, 0], color="tab:blue", label="L1")
    ax.bar(np.arange(len(s)), s[:, 1], bottom=s[:, 0], color="tab:orange", label="L2")
    ax.set_ylabel("share")
    ax.set_title(f"Shapley shares of H's {title}", fontsize=9)
axes[0].legend(loc="upper right", fontsize=8)
axes[1].set_xlabel("test case (sorted by L1's mean share)")
fig.tight_layout()
fig.savefig(os.path.join(OUT, "multifidelity_shapley.png"))
