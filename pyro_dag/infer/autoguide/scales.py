"""Data-driven initial scales of the inducing posterior of observed nodes."""
import torch

from ...dgp import DAGDGP
from ...gp.likelihoods import Gaussian

__all__ = ["initial_scales"]


@torch.no_grad()
def initial_scales(model, inputs, data, mask=None, max_scale=1.0):
    r"""Initial posterior standard deviations of the whitened inducing outputs ``V_w`` of observed Gaussian nodes,
    for ``AutoStructuredGuide(model, init_scale=initial_scales(model, inputs, data))``.

    The prior is ``V_w ~ N(0, I)`` (Perlino et al. 2026, arXiv:2607.09645, Eq. 5, whitened). ``n_w`` observations
    with noise variance ``τ_w²`` of a GP with signal variance ``σ_w²`` spread over ``M_w`` inducing points add,
    on average, a precision of about ``n_w σ_w² / (M_w τ_w²)`` to each coordinate of ``V_w``, so the posterior
    scale is about

    .. math:: s_w = \left(1 + \frac{n_w \sigma_w^2}{M_w \tau_w^2}\right)^{-1/2},

    far below the prior's 1 when the noise is small (the latent collider: ``n = 119``, ``M = 49``,
    ``τ = 0.015``, ``σ² = 1`` gives ``s ≈ 0.0096``). Started at the prior's scale instead, the Monte Carlo noise
    of the ELBO's data term is that many times larger than the posterior's width and Adam stalls.

    ``σ_w²`` is the mean of the kernel's diagonal at the inducing inputs, ``τ_w²`` the mean initial noise
    variance, ``n_w`` the number of cases with at least one observed entry. Latent nodes and nodes with a
    non-Gaussian likelihood are left out (the guide's default, the prior's scale, applies to them).

    :param model: a :class:`~pyro_dag.DAGDGP` (set up here from ``inputs`` and ``data`` if it is not yet).
    :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d_w]}``, NaN = missing.
    :param dict mask: optional observation masks, as for the model.
    :param float max_scale: upper bound of the scales (default 1, the prior's).
    :returns: ``{node: float}``.
    """
    if not isinstance(model, DAGDGP):
        raise ValueError(f"initial_scales needs a DAGDGP model, got {type(model).__name__}")
    if not model.is_setup:
        model.setup(inputs, data, mask)
    _, _, obs = model.checked_arguments(inputs, data, mask)
    out = {}
    for w, (_, m) in obs.items():
        lik = model.likelihoods[w]
        if not isinstance(lik, Gaussian):
            continue
        tau2 = float(lik.variance.detach().mean())
        sigma2 = float(model.kernels[w](model.inducing_inputs(w).detach(), diag=True).mean())
        n_w = int(m.any(-1).sum())
        precision = 1.0 + n_w * sigma2 / (model.num_inducing[w] * tau2)
        out[w] = min(float(max_scale), precision ** -0.5)
    return out
