"""Posterior latent values and test predictive log-likelihoods of a :class:`~pyro_dag.sem.LatentSEM`.

Posterior draws are a dict ``{site: [S, ...]}``: ``MCMC.get_samples()``, or :func:`guide_samples` for an SVI
guide (``Predictive`` over the guide). :func:`latent_samples` / :func:`latent_means` read the per-case latents in
their anchors' units.

:func:`predictive_log_likelihood` scores held-out cases, as in the 5-fold cross-validation of Silva & Gramacy
(2010, arXiv:1002.4802, Sec. 5, Table 1), whose text does not say how the test latents are integrated out. Here,
for each posterior draw ``θ_s`` of the globals, the test case's latents are integrated out by Monte Carlo over
``K`` ancestral draws from the model (exogenous marginals, then the structural conditionals given the pseudo-inputs
and pseudo-functions), except that the *sink* latents (no latent children; Gaussian given their parents) are
integrated out exactly: given the other latents, the indicators are jointly Gaussian. Then

    log p(y*) ≈ log (1/(S K)) Σ_s Σ_k p(y* | x*_{sk}, θ_s),

in the original units of the indicators (the standardisation's log-Jacobian is added back). Indicators with
Student-t errors turn the exact sink step off (plain Monte Carlo over all latents).
"""
import math

import numpy as np
import pandas as pd
import torch
from pyro import poutine
from pyro.infer import Predictive

from .identifiability import SEMSpecError

__all__ = ["global_sites", "guide_samples", "latent_samples", "latent_means", "predictive_log_likelihood"]


def global_sites(model, data):
    """Names of the global latent sites of ``model`` (a trace on ``data``), in the model's order."""
    with poutine.block():
        tr = poutine.trace(model).get_trace(data)
    local = {f"{x}.x" for x in model.latents}
    return [n for n, s in tr.nodes.items() if s["type"] == "sample" and not s["is_observed"] and n not in local]


def _training_cases(guide):
    """The size of the ``"data"`` plate the guide (or a part of an ``AutoGuideList``) was set up with, or ``None``."""
    for part in [guide] + list(getattr(guide, "parts", ())):
        frame = (getattr(part, "_prototype_frames", None) or {}).get("data")
        if frame is not None:
            return int(frame.full_size if getattr(frame, "full_size", None) is not None else frame.size)
    return None


def guide_samples(model, guide, data, num_samples=200):
    """``{site: [S, ...]}`` posterior draws of every latent site (globals and per-case latents) from an SVI guide.

    :param data: the training data (the guide's per-case latents are one per training row).
    :param int num_samples: ``S >= 1``.
    """
    if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1:
        raise SEMSpecError(f"guide_samples: num_samples must be a positive integer (the number of posterior draws), "
                           f"got {num_samples!r}")
    n_train = _training_cases(guide)
    if n_train is not None and data is not None and len(data) != n_train:
        raise SEMSpecError(f"guide_samples: data has {len(data)} rows but the guide was trained on {n_train}: its "
                           "per-case latents belong to the training rows, so pass the training data (and index the "
                           "draws of '{X}.x' for a subset of rows); for new cases use predictive_log_likelihood, "
                           "which integrates their latents out")
    with torch.no_grad(), poutine.block():
        tr = poutine.trace(model).get_trace(data)
        names = global_sites(model, data) + [f"{x}.x" for x in model.latents]
        out = Predictive(model, guide=guide, num_samples=num_samples, return_sites=names)(data)
    # Predictive pads global sites with a size-1 dim for the "data" plate: give every site its own shape
    return {k: v.detach().reshape((v.shape[0],) + tr.nodes[k]["value"].shape) for k, v in out.items()}


def latent_samples(model, samples):
    """``{latent: [S, n] array}`` of per-case latent draws in the units of each latent's anchor."""
    return {x: model.to_anchor_units(x, samples[f"{x}.x"].detach().cpu().numpy().reshape(
        samples[f"{x}.x"].shape[0], -1)) for x in model.latents}


def latent_means(model, samples):
    """``pandas.DataFrame [n, V]``: posterior means of the per-case latents (anchor units)."""
    return pd.DataFrame({x: v.mean(0) for x, v in latent_samples(model, samples).items()})


def _mvn_missing_logpdf(resid, cov, mask):
    """``log N(resid; 0, cov)`` over the observed entries only: ``resid [..., J]``, ``cov [..., J, J]``, ``mask [n, J]``
    broadcast against the batch; missing rows / columns are decoupled to unit variance with zero residual and
    their ``log N(0; 0, 1)`` removed (exact marginalisation)."""
    m = mask.to(resid.dtype)
    mm = m.unsqueeze(-1) * m.unsqueeze(-2)
    eye = torch.eye(resid.shape[-1], dtype=resid.dtype)
    cov = cov * mm + eye * (1 - m).unsqueeze(-1)
    resid = resid * m
    L = torch.linalg.cholesky(cov)
    z = torch.linalg.solve_triangular(L, resid.unsqueeze(-1), upper=False).squeeze(-1)
    J_obs = m.sum(-1)
    return -0.5 * z.pow(2).sum(-1) - L.diagonal(dim1=-2, dim2=-1).log().sum(-1) - 0.5 * J_obs * math.log(2 * math.pi)


@torch.no_grad()
def predictive_log_likelihood(model, samples, data, num_latent_samples=500, exact_sinks=True, seed=0,
                              max_draws=None):
    """Per-case test predictive log-density ``log p(y*_d | training data)`` (module docstring), ``[n]`` array.

    :param LatentSEM model: a fitted model (its standardisation comes from the training data).
    :param dict samples: posterior draws ``{site: [S, ...]}`` (at least the global sites).
    :param data: DataFrame of held-out cases (NaN = missing indicator, left out of the density).
    :param int num_latent_samples: ``K`` latent draws per posterior draw and case.
    :param bool exact_sinks: integrate the sink latents out in closed form.
    :param int max_draws: use at most this many posterior draws (evenly thinned).
    :returns: ``numpy.ndarray [n]`` in the original units of the indicators.
    """
    y, mask = model.prepare(data)
    n = y.shape[0]
    names = [k for k in samples if not k.endswith(".x") or k[:-2] not in model.latents]
    S = next(iter(samples.values())).shape[0]
    draws = np.arange(S)
    if max_draws is not None and max_draws < S:
        draws = np.linspace(0, S - 1, max_draws).round().astype(int)
    gen = torch.Generator().manual_seed(seed)
    has_children = {p for x in model.latents for p in model.parents[x]}
    sinks = [x for x in model.latents if x not in has_children and x not in model.exogenous_kind]
    if not exact_sinks or model._t_cols:
        sinks = []
    K = int(num_latent_samples)
    col = {x: i for i, x in enumerate(model.latents)}
    out = []
    for s in draws:
        cond = {k: samples[k][s] for k in names}
        with poutine.block(), poutine.condition(data=cond):
            torch.manual_seed(int(torch.randint(0, 2 ** 31 - 1, (1,), generator=gen)))
            g = model.sample_globals()
            values, sink_dists = {}, {}
            for x in model.latents:
                d = model.latent_distribution(x, g, values)
                if x in model.exogenous_kind:
                    values[x] = d.expand(torch.Size([K, n])).sample()
                elif x in sinks:
                    sink_dists[x] = d
                    values[x] = d.loc.expand(K, n)
                else:
                    values[x] = d.sample()
            xs = torch.stack([values[x] for x in model.latents], -1)  # [K, n, V]
            if sinks:
                intercepts, loadings, noise = model.measurement_params(g)
                mu = intercepts + xs @ loadings.transpose(-1, -2)  # sinks at their conditional means
                Ls = loadings[:, [col[x] for x in sinks]]  # [J, s]
                v = torch.stack([sink_dists[x].variance.expand(K, n) for x in sinks], -1)  # [K, n, s]
                cov = (Ls * v.unsqueeze(-2)) @ Ls.transpose(-1, -2) + torch.diag_embed(noise)
                lp = _mvn_missing_logpdf(y - mu, cov, mask)
            else:
                lp = model.measurement_log_prob(g, xs, y, mask)
            out.append(lp)
    lp = torch.stack(out)  # [S, K, n]
    lp = torch.logsumexp(lp.reshape(-1, n), 0) - math.log(lp.shape[0] * lp.shape[1])
    jac = (mask.to(lp.dtype) * torch.as_tensor(-np.log(model.scaler.scale), dtype=lp.dtype)).sum(-1)
    return (lp + jac).cpu().numpy()
