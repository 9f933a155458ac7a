"""Regression metrics for probabilistic predictions (as reported by Perlino et al. 2026, *Deep Gaussian Processes on
Directed Acyclic Graphs*, arXiv:2607.09645, Sec. 7 and App. G).

Every function works on torch tensors and reduces over all entries that are finite in ``y`` (NaN marks
a missing target, as in :class:`pyro_dag.DAGDGP`). Sample-based scores take predictive samples with the
sample dimension first: ``samples`` has shape ``[S, *y.shape]``.
"""
import math

import torch

__all__ = [
    "rmse",
    "nrmse",
    "crps_gaussian",
    "crps_samples",
    "nlpd_gaussian",
    "nlpd_mixture",
    "picp",
    "energy_score",
    "node_metrics",
]


def _valid(y, *others):
    mask = torch.isfinite(y)
    return [y[mask]] + [o.expand_as(y)[mask] for o in others]


def rmse(pred, y):
    """Root mean squared error over the observed entries of ``y``.

    :param torch.Tensor pred: point prediction, same shape as ``y``.
    :param torch.Tensor y: targets (NaN = missing).
    :returns: a scalar tensor.
    """
    y, pred = _valid(y, pred)
    return (pred - y).pow(2).mean().sqrt()


def nrmse(pred, y, y_train):
    """Normalised RMSE ``1 - RMSE / RMSE_base`` (Ji et al. 2024; arXiv:2607.09645, App. G.5); higher is better.

    ``RMSE_base`` is the RMSE of the constant predictor equal to the mean of the training targets.
    """
    base = torch.full_like(y, float(torch.nanmean(y_train)))
    return 1.0 - rmse(pred, y) / rmse(base, y)


def crps_gaussian(loc, scale, y):
    """Closed-form CRPS of a Gaussian predictive ``N(loc, scale²)``, averaged over observed entries.

    ``CRPS = σ [z (2Φ(z) - 1) + 2φ(z) - 1/√π]`` with ``z = (y - μ)/σ`` (Gneiting & Raftery 2007).
    """
    y, loc, scale = _valid(y, loc, scale)
    z = (y - loc) / scale
    normal = torch.distributions.Normal(torch.zeros_like(z), torch.ones_like(z))
    cdf = normal.cdf(z)
    pdf = normal.log_prob(z).exp()
    return (scale * (z * (2 * cdf - 1) + 2 * pdf - 1 / math.sqrt(math.pi))).mean()


def crps_samples(samples, y):
    """Sample-based CRPS ``E|X - y| - ½ E|X - X'|`` with ``X, X'`` from the predictive samples.

    Uses the sorted-sample identity for ``E|X - X'|`` (O(S log S) per entry, no S² memory).

    :param torch.Tensor samples: ``[S, *y.shape]`` predictive samples (observation noise included).
    :param torch.Tensor y: targets (NaN = missing).
    """
    mask = torch.isfinite(y)
    x = samples[:, mask]  # [S, K]
    t = y[mask]
    s = x.shape[0]
    term1 = (x - t).abs().mean(0)
    xs = x.sort(0).values
    i = torch.arange(1, s + 1, dtype=x.dtype, device=x.device).unsqueeze(-1)
    # E|X - X'| = 2/S² Σ_i (2i - S - 1) x_(i)
    term2 = (2.0 / s**2) * ((2 * i - s - 1) * xs).sum(0)
    return (term1 - 0.5 * term2).mean()


def nlpd_gaussian(loc, scale, y):
    """Mean negative log predictive density of ``N(loc, scale²)`` over the observed entries of ``y``."""
    y, loc, scale = _valid(y, loc, scale)
    return -torch.distributions.Normal(loc, scale).log_prob(y).mean()


def nlpd_mixture(locs, scales, y):
    """Mean NLPD of an equally weighted Gaussian mixture (one component per posterior sample).

    :param locs: ``[S, *y.shape]`` component means. :param scales: component standard deviations.
    """
    mask = torch.isfinite(y)
    lp = torch.distributions.Normal(locs[:, mask], scales.expand_as(locs)[:, mask]).log_prob(y[mask])
    return -(torch.logsumexp(lp, 0) - math.log(locs.shape[0])).mean()


def picp(lower, upper, y):
    """Prediction-interval coverage probability: fraction of observed targets inside ``[lower, upper]``."""
    y, lower, upper = _valid(y, lower, upper)
    return ((y >= lower) & (y <= upper)).to(y.dtype).mean()


def energy_score(samples, y, weights=None):
    """Energy score ``E||X - y||_W - ½ E||X - X'||_W`` of a joint predictive (the weighted
    energy score of Perlino et al. 2026, arXiv:2607.09645, App. G.5, Tables 5-6).

    :param torch.Tensor samples: ``[S, K]`` joint samples of the concatenated target vector.
    :param torch.Tensor y: ``[K]`` target vector.
    :param torch.Tensor weights: optional ``[K]`` weights so that ``||z||_W² = Σ_k w_k z_k²``.
    """
    w = torch.ones_like(y) if weights is None else weights
    d1 = ((samples - y).pow(2) * w).sum(-1).sqrt().mean()
    diff = samples.unsqueeze(0) - samples.unsqueeze(1)
    d2 = (diff.pow(2) * w).sum(-1).sqrt().mean()
    return d1 - 0.5 * d2


def node_metrics(loc, var, noise_var, y, num_noise_draws=1, seed=0):
    """Held-out metrics of one node from a predictive mixture.

    :param torch.Tensor loc: ``[S, n]`` component means. :param torch.Tensor var: ``[S, n]`` their variances
        (latent ``F`` only). :param noise_var: the likelihood's noise variance ``τ²`` (float or tensor).
    :param torch.Tensor y: ``[n]`` observed test values.
    :returns: ``{"rmse", "crps", "nlpd", "picp"}`` (floats): RMSE of the mixture mean; CRPS and the 95 % interval
        (PICP) from ``S`` noisy draws ``loc_s + sqrt(var_s + τ²) ε``; NLPD of the mixture.
    """
    gen = torch.Generator().manual_seed(seed)
    scale = (var + noise_var).clamp_min(1e-300).sqrt()
    draws = torch.cat([loc + scale * torch.randn(loc.shape, generator=gen, dtype=loc.dtype)
                       for _ in range(num_noise_draws)])
    mean = loc.mean(0)
    lo, hi = torch.quantile(draws, torch.tensor([0.025, 0.975], dtype=loc.dtype), dim=0)
    return {"rmse": float(rmse(mean, y)), "crps": float(crps_samples(draws, y)),
            "nlpd": float(nlpd_mixture(loc, scale, y)), "picp": float(picp(lo, hi, y))}
