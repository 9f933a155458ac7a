"""Simulation-based calibration (Talts, Betancourt, Simpson, Vehtari & Gelman 2018, "Validating Bayesian
inference algorithms with simulation-based calibration", arXiv:1804.06788).

Draw ``θ̃ ~ p(θ)``, ``ỹ ~ p(y | θ̃)``, then ``L`` posterior draws ``θ_1..θ_L`` given ``ỹ``; the rank
``#{l : θ_l < θ̃}`` is uniform on ``{0, ..., L}`` for every scalar ``θ`` when the posterior draws are exact and
independent (Talts et al. 2018, Theorem 1). Under-dispersed posteriors (e.g. mean-field variational ones) give
U-shaped rank histograms, biased ones skewed histograms.
"""
import numpy as np
import pyro
import torch
from pyro.infer import Predictive

__all__ = ["sbc_ranks", "sbc_uniformity_test", "simulation_based_calibration"]


def sbc_ranks(prior_values, posterior_draws):
    """Ranks of prior draws among posterior draws.

    :param prior_values: ``[R, P]`` (or ``[R]``): the simulated truth ``θ̃`` of ``R`` replications.
    :param posterior_draws: ``[R, L, P]`` (or ``[R, L]``): ``L`` posterior draws per replication (thinned to be
        roughly independent: autocorrelated MCMC draws make the histogram non-uniform even for exact samplers).
    :returns: ``[R, P]`` integer ranks in ``{0, ..., L}``.
    """
    prior = np.asarray(prior_values, dtype=float)
    post = np.asarray(posterior_draws, dtype=float)
    if prior.ndim == 1:
        prior, post = prior[:, None], post[..., None]
    if post.ndim != 3 or post.shape[0] != prior.shape[0] or post.shape[2] != prior.shape[1]:
        raise ValueError(f"sbc_ranks: posterior_draws must be [R, L, P] for prior_values [R, P]; got "
                         f"{post.shape} and {prior.shape}")
    return (post < prior[:, None, :]).sum(1)


def sbc_uniformity_test(ranks, num_draws, num_bins=None):
    """Chi-square test that SBC ranks are uniform on ``{0, ..., L}`` (Talts et al. 2018, Sec. 4.1).

    :param ranks: ``[R, P]`` ranks from :func:`sbc_ranks`.
    :param int num_draws: ``L``, the posterior draws per replication.
    :param int num_bins: histogram bins (default: the largest divisor of ``L + 1`` that gives ``R / bins >= 5``
        expected counts, at most 20).
    :returns: ``dict(counts [P, B], chi2 [P], pvalue [P], num_bins)``.
    """
    from scipy import stats

    ranks = np.asarray(ranks)
    if ranks.ndim == 1:
        ranks = ranks[:, None]
    R = ranks.shape[0]
    L1 = int(num_draws) + 1
    if ranks.min() < 0 or ranks.max() >= L1:
        raise ValueError(f"ranks must lie in 0..num_draws = {num_draws}; got {ranks.min()}..{ranks.max()}")
    if num_bins is None:
        divisors = [b for b in range(2, min(20, L1) + 1) if L1 % b == 0 and R / b >= 5]
        num_bins = max(divisors) if divisors else 2
    edges = np.linspace(0, L1, num_bins + 1)
    counts = np.stack([np.histogram(ranks[:, p], bins=edges)[0] for p in range(ranks.shape[1])])
    expected = R * np.diff(edges) / L1
    chi2 = ((counts - expected) ** 2 / expected).sum(-1)
    pvalue = stats.chi2.sf(chi2, df=num_bins - 1)
    return {"counts": counts, "chi2": chi2, "pvalue": pvalue, "num_bins": num_bins}


def simulation_based_calibration(model, inputs, posterior_fn, num_replications, sites=None, seed=0):
    """Run SBC for a Pyro model that simulates its observations when called without data.

    For each replication the model is run forward by :class:`pyro.infer.Predictive` (prior draw of every site,
    including ``"{w}.y"``), ``posterior_fn(inputs, data)`` returns ``{site: [L, ...]}`` posterior draws given the
    simulated observations, and the ranks of the truth are collected for every scalar of every site in
    ``sites``.

    :param model: e.g. a set-up :class:`~pyro_dag.DAGDGP` (``model(inputs)`` samples ``"{w}.y"`` for its
        observed nodes).
    :param dict inputs: root design matrices.
    :param callable posterior_fn: ``(inputs, data) -> {site: tensor [L, ...]}``, e.g. NUTS or a fitted guide.
    :param int num_replications: ``R``.
    :param list sites: latent sites to rank (default every site ``posterior_fn`` returns).
    :returns: ``dict(ranks={site: [R, P]}, num_draws=L, truth={site: [R, P]})``.
    """
    ranks, truth, L = {}, {}, None
    for r in range(int(num_replications)):
        pyro.set_rng_seed(seed + r)
        with torch.no_grad():
            prior = Predictive(model, num_samples=1)(inputs)
        data = {name[:-2]: v[0].detach() for name, v in prior.items() if name.endswith(".y")}
        post = posterior_fn(inputs, data)
        names = list(post) if sites is None else list(sites)
        for name in names:
            draws = post[name].detach().reshape(post[name].shape[0], -1).cpu().numpy()
            true = prior[name][0].detach().reshape(-1).cpu().numpy()
            if L is None:
                L = draws.shape[0]
            ranks.setdefault(name, []).append((draws < true[None]).sum(0))
            truth.setdefault(name, []).append(true)
    return {"ranks": {k: np.stack(v) for k, v in ranks.items()}, "num_draws": L,
            "truth": {k: np.stack(v) for k, v in truth.items()}}
