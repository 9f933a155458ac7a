"""The data-driven starts of :class:`~pyro_dag.emulation.MultiFidelityEmulator`'s SVI fit (Perlino et al. 2026,
arXiv:2607.09645, App. G.5): length-scales from a grid of exact GP marginal likelihoods, node-wise pretraining of the
fidelities whose parents are observed on their collapsed bound (Titsias 2009), and the transfer of fitted values
between models of the same fidelities.
"""
import math

import numpy as np
import torch

from ..infer.training.collapsed import collapsed_bound, lbfgs

__all__ = ["initial_lengthscale", "pretrain_collapsed"]


def _gp_log_marginal(X, y, lengthscale, noise=1e-3):
    """Profile log marginal likelihood of an exact zero-mean RBF GP with isotropic ``lengthscale``, noise-to-signal
    ratio ``noise`` and the signal variance at its maximum ``σ² = yᵀK⁻¹y / n``: ``[n, d]``, ``[n]`` numpy
    arrays."""
    d2 = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.exp(-0.5 * d2 / lengthscale ** 2) + noise * np.eye(len(y))
    try:
        L = np.linalg.cholesky(K)
    except np.linalg.LinAlgError:
        return -np.inf
    alpha = np.linalg.solve(L, y)
    n = len(y)
    return -0.5 * n * np.log(max(alpha @ alpha / n, 1e-300)) - np.log(np.diag(L)).sum()


def initial_lengthscale(X, y, grid=None):
    """Data-driven initial length-scale: the isotropic RBF length-scale with the largest exact-GP marginal likelihood
    on a log grid (``0.03 √d`` to ``3 √d``), for inputs in the unit box and a standardised ``y``.

    :param X: ``[n, d]``. :param y: ``[n]``. :returns: a float.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    y = (y - y.mean()) / (y.std() if y.std() > 0 else 1.0)
    grid = np.geomspace(0.03, 3.0, 16) * math.sqrt(X.shape[1]) if grid is None else grid
    if len(y) > 400:
        idx = np.random.default_rng(0).choice(len(y), 400, replace=False)
        X, y = X[idx], y[idx]
    scores = [_gp_log_marginal(X, y, ls) for ls in grid]
    return float(grid[int(np.argmax(scores))])


#: the collapsed bound of one node (kept under its old name for callers of this module)
_collapsed_bound = collapsed_bound


def pretrain_collapsed(model, guide, inputs, data, nodes, num_steps, lr=0.03, optimizer="adam"):
    """Node-wise pretraining against the collapsed bound (exact in ``q(V_w)``, Titsias 2009): the node's kernel
    hyperparameters and noise are optimised (inducing inputs held), then the optimal
    ``q(V_w) = N(Σ Aᵀ y / τ², Σ)``, ``Σ = (I + AᵀA / τ²)⁻¹``, is written into ``guide``'s block of the node. The
    parents' observed values are the inputs (the cases where the node and all its parents were run).

    :param str optimizer: ``"adam"`` (``num_steps`` steps of size ``lr``) or ``"lbfgs"`` (at most ``num_steps``
        L-BFGS iterations with a strong-Wolfe line search, as GPy and emukit optimise the exact marginal
        likelihood; the bound is deterministic, so a quasi-Newton method converges where Adam is still moving; a
        failed Cholesky in the line search ends the run at the best parameters seen).
    :returns: ``{node: [loss per step]}`` (per objective evaluation for L-BFGS).
    """
    if optimizer not in ("adam", "lbfgs"):
        raise ValueError(f"pretrain_collapsed: optimizer must be 'adam' or 'lbfgs', got {optimizer!r}")
    X, _, obs = model.checked_arguments(inputs, data)
    rows, params = {}, []
    for w in nodes:
        y, m = obs[w]
        keep = m[:, 0].clone()
        for p in model.parents[w]:
            if p not in X:
                keep &= obs[p][1][:, 0]
        rows[w] = ({p: (X[p] if p in X else obs[p][0])[keep] for p in model.parents[w]}, y[keep, 0])
        params += [q for mod in (model.kernels[w], model.likelihoods[w]) for q in mod.parameters() if q.requires_grad]
    losses = {w: [] for w in nodes}
    def objective():
        total = 0.0
        for w in nodes:
            b = -_collapsed_bound(model, w, *rows[w])[0]
            losses[w].append(float(b.detach()))
            total = total + b
        return total

    if num_steps and params and optimizer == "adam":
        optim = torch.optim.Adam(params, lr=lr)
        for _ in range(num_steps):
            optim.zero_grad()
            objective().backward()
            optim.step()
    elif num_steps and params:
        lbfgs(params, objective, num_steps)
    with torch.no_grad():
        family = guide.family
        for w in nodes:
            _, a, tau2 = _collapsed_bound(model, w, *rows[w])
            M = a.shape[1]
            prec = torch.eye(M, dtype=a.dtype) + a.T @ a / tau2
            Lp = torch.linalg.cholesky(prec)
            mean = torch.cholesky_solve((a.T @ rows[w][1] / tau2)[:, None], Lp)[:, 0]
            if guide.precision == "mean_field":
                cov = torch.cholesky_inverse(Lp)
                family.set_node(w, mean, torch.linalg.cholesky(cov))
            else:
                family.set_node(w, mean, Lp)
        if guide.precision != "mean_field":
            family.zero_offdiagonal()
    return losses


@torch.no_grad()
def _transfer(source, target, rel_floor=1e-12):
    """Initialise a structured guide from a mean-field one (as
    :meth:`~pyro_dag.infer.autoguide.AutoStructuredGuide.warm_start`, every node observed), with each covariance
    block's eigenvalues floored at ``rel_floor`` times the largest: the near-noiseless fits of deterministic
    simulators give covariance blocks too ill-conditioned to invert as they are."""
    src = source.inducing_posterior()
    means = src.mean_blocks()
    for b in target.family.blocks:
        cov = src.covariance_block(b.node)
        cov = 0.5 * (cov + cov.T)
        lam, V = torch.linalg.eigh(cov)
        lam = lam.clamp_min(rel_floor * float(lam.max()))
        prec = (V / lam) @ V.T
        target.family.set_node(b.node, means[b.node].reshape(-1), torch.linalg.cholesky(0.5 * (prec + prec.T)))
    target.family.zero_offdiagonal()
