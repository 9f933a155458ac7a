"""Linear-Gaussian SEM scored with the BGe marginal likelihood (Geiger & Heckerman 2002; Kuipers et al. 2014)."""
import math

import torch

from .base import Mechanism, _check_pos

__all__ = ["BGeSEM"]


def _masked_logdet_and_flips(R, a):
    """``log det R[S, S]`` for masks ``a`` ``[..., j, p]`` and the same with each element ``v`` toggled.

    ``R`` ``[p, p]`` is positive definite. Returns ``(logdet [..., j], logdet_flipped [..., j, v])``, using one
    Cholesky factor per mask and Schur complements: adding ``v`` adds ``log(R_vv - R_vS R_SS^{-1} R_Sv)``, removing
    ``v`` adds ``log((R_SS^{-1})_vv)``.
    """
    p = R.shape[-1]
    eye = torch.eye(p, dtype=a.dtype, device=a.device)
    M = a.unsqueeze(-1) * a.unsqueeze(-2) * R + torch.diag_embed(1 - a)
    L = torch.linalg.cholesky(M)
    logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
    inv = torch.cholesky_inverse(L)  # (R_SS)^{-1} on S, identity elsewhere
    U = a.unsqueeze(-2) * R.unsqueeze(-3)  # [..., j, v, i] = a_i R[v, i]
    schur_add = R.diagonal() - ((U @ inv) * U).sum(-1)  # R_vv - R_vS R_SS^-1 R_Sv
    d_add = torch.log(schur_add.clamp_min(1e-12 * R.diagonal()))
    d_rem = torch.log(inv.diagonal(dim1=-2, dim2=-1))
    flipped = logdet.unsqueeze(-1) + torch.where(a > 0.5, d_rem, d_add)
    return logdet, flipped


class BGeSEM(Mechanism):
    r"""Linear-Gaussian SEM with the BGe marginal likelihood (Geiger & Heckerman 2002; Kuipers et al. 2014).

    The weights, noise variances and means of a linear-Gaussian DAG model are integrated out under the
    Normal-Wishart prior, which makes the score *equivalent*: Markov-equivalent DAGs have the same marginal
    likelihood (the score used by DiBS and order MCMC). Node ``j`` with ``l`` parents ``pa``:

    .. math::
        \log p(x_j | x_{pa}) = \frac12 \log\frac{\alpha_\mu}{N + \alpha_\mu}
        + \log\Gamma\Big(\frac{N + \alpha_w - p + l + 1}{2}\Big) - \log\Gamma\Big(\frac{\alpha_w - p + l + 1}{2}\Big)
        - \frac N2 \log\pi + \frac{\alpha_w - p + 2l + 1}{2} \log t
        + \frac{N + \alpha_w - p + l}{2} \log|R_{pa}| - \frac{N + \alpha_w - p + l + 1}{2} \log|R_{pa \cup j}|

    with ``t = alpha_mu (alpha_w - p - 1) / (alpha_mu + 1)``,
    ``R = t I + S_N + N alpha_mu / (N + alpha_mu) xbar xbar^T`` (``S_N`` the centred scatter matrix, prior mean 0).
    Defaults as DiBS: ``alpha_mu = 1``, ``alpha_w = p + 2``. No latent sites (``pyro.factor("{name}.loglik")``);
    like :class:`LinearGaussianSEM` with ``marginalize=True``, the straight-through gradient with respect to
    ``A`` is the exact edge-flip difference of the score.

    :param int num_nodes: ``p``.
    :param float alpha_mu: precision scale of the prior mean.
    :param float alpha_w: Wishart degrees of freedom (``> p + 1``; default ``p + 2``).
    :param str name: site prefix.
    """

    def __init__(self, num_nodes, alpha_mu=1.0, alpha_w=None, name="sem"):
        super().__init__(num_nodes, name=name, subsample_size=None)
        _check_pos(alpha_mu, "alpha_mu")
        alpha_w = num_nodes + 2.0 if alpha_w is None else float(alpha_w)
        if not alpha_w > num_nodes + 1:
            raise ValueError(f"alpha_w must exceed p + 1 = {num_nodes + 1}; got {alpha_w}")
        self.alpha_mu, self.alpha_w = float(alpha_mu), alpha_w

    @property
    def supports_subsampling(self):
        return False

    def _R(self, X):
        N, p = X.shape
        t = self.alpha_mu * (self.alpha_w - p - 1) / (self.alpha_mu + 1)
        xbar = X.mean(0, keepdim=True)
        Xc = X - xbar
        eye = torch.eye(p, dtype=X.dtype, device=X.device)
        R = t * eye + Xc.T @ Xc + (N * self.alpha_mu / (N + self.alpha_mu)) * (xbar.T @ xbar)
        return R, t

    def _family(self, N, t, l, logdet_pa, logdet_paj):
        p, aw, am = self.num_nodes, self.alpha_w, self.alpha_mu
        return (
            0.5 * (math.log(am) - math.log(N + am))
            + torch.lgamma(0.5 * (N + aw - p + l + 1))
            - torch.lgamma(0.5 * (aw - p + l + 1))
            - 0.5 * N * math.log(math.pi)
            + 0.5 * (aw - p + 2 * l + 1) * math.log(t)
            + 0.5 * (N + aw - p + l) * logdet_pa
            - 0.5 * (N + aw - p + l + 1) * logdet_paj
        )

    def node_scores(self, X, A, flips=False):
        """Per-node BGe scores ``[..., p]`` for binary ``A``; with ``flips`` also ``[..., j, v]`` with parent ``v``
        of node ``j`` toggled (``v = j``: unchanged)."""
        R, t = self._R(X)
        R = R.to(A.dtype)
        N = X.shape[0]
        p = self.num_nodes
        eye = torch.eye(p, dtype=A.dtype, device=A.device)
        a = A.transpose(-1, -2)  # [..., j, i]: parents of j
        aj = (a + eye).clamp(max=1.0)  # parents and j
        ld_pa, ld_pa_f = _masked_logdet_and_flips(R, a)
        ld_paj, ld_paj_f = _masked_logdet_and_flips(R, aj)
        l = a.sum(-1)
        base = self._family(N, t, l, ld_pa, ld_paj)
        if not flips:
            return base
        lf = l.unsqueeze(-1) + torch.where(a > 0.5, -1.0, 1.0)
        flipped = self._family(N, t, lf, ld_pa_f, ld_paj_f)
        flipped = torch.where(eye.bool(), base.unsqueeze(-1).expand_as(flipped), flipped)
        return base, flipped

    def log_likelihood(self, X, A, params=None):
        """``[batch...]`` BGe score of ``A``; a straight-through ``A`` gets edge-flip gradients."""
        hard = A.detach()
        if not A.requires_grad:
            return self.node_scores(X, hard).sum(-1)
        with torch.no_grad():
            base, flipped = self.node_scores(X, hard, flips=True)
            has = hard.transpose(-1, -2) > 0.5
            delta = torch.where(has, base.unsqueeze(-1) - flipped, flipped - base.unsqueeze(-1))
        return base.sum(-1) + ((A - hard) * delta.transpose(-1, -2)).sum((-1, -2))
