"""Linear-Gaussian SEM, with parameter sites or with the conjugate prior integrated out exactly."""
import math

import pyro
import pyro.distributions as dist
import torch

from .base import Mechanism, _check_pos, _noise_args, _rows_last
from .hypernet import NodeHyperNet

__all__ = ["LinearGaussianSEM"]


class LinearGaussianSEM(Mechanism):
    r"""Linear-Gaussian SEM ``x_j = sum_i A_ij W_ij x_i + eps_j``, ``eps_j ~ N(0, sigma_j^2)``.

    Data are assumed centred (standardise first; :func:`pyro_dag.structure.fit` does).

    ``marginalize=False``: sample sites ``"{name}.weights"`` ``[p, p]`` (``W_ij ~ N(0, weight_scale^2)``) and,
    unless ``noise`` is fixed, ``"{name}.log_noise"`` ``[p]`` (``log sigma_j ~ N(noise_prior)``); observation site
    ``"{name}.x"``. The guide is Gaussian with a :class:`NodeHyperNet` of node ``j``'s parent vector ``A[:, j]``.

    ``marginalize=True``: the conjugate prior ``W_.j | sigma_j^2 ~ N(0, sigma_j^2 s^2 I)``,
    ``sigma_j^2 ~ InvGamma(a_0, b_0)`` is integrated out per node (exact Bayesian linear regression evidence):

    .. math::
        \log p(x_j | X_{pa}) = -\tfrac N2 \log 2\pi - \tfrac12 \log|V_j^{-1}| - p \log s + a_0 \log b_0
        - a_N \log b_N + \log\Gamma(a_N) - \log\Gamma(a_0),

    with ``V_j^{-1} = I / s^2 + D_j G D_j``, ``D_j = diag(A[:, j])``, ``G = X^T X``, ``c_j = D_j G[:, j]``,
    ``a_N = a_0 + N / 2`` and ``b_N = b_0 + (G_jj - c_j^T V_j c_j) / 2``. It depends on ``X`` only through ``G``
    (all rows are used at every step) and is differentiable in soft or straight-through ``A``. No latent sites; the
    model scores it with ``pyro.factor("{name}.loglik")``.

    :param int num_nodes: ``p``.
    :param bool marginalize: integrate the parameters out (see above).
    :param float weight_scale: prior scale ``s`` of the weights.
    :param float noise: fixed noise scale (``marginalize=False`` only); ``None`` learns it.
    :param tuple noise_prior: ``(loc, scale)`` of ``log sigma`` (``marginalize=False``).
    :param float noise_concentration: ``a_0`` (``marginalize=True``); ``a_0 = b_0 = 0`` is Jeffreys' prior
        ``p(sigma_j^2) ∝ 1 / sigma_j^2``, improper, whose constant ``a_0 log b_0 - log Γ(a_0)`` is then dropped (it
        is the same for every parent set of a node, so posteriors over graphs stay proper; the evidence is defined
        up to that constant).
    :param float noise_rate: ``b_0`` (``marginalize=True``; 0 only together with ``a_0 = 0``).
    :param tuple hidden: hypernetwork widths (``marginalize=False``).
    :param str name: site prefix.
    :param int subsample_size: rows per step (``marginalize=False`` only).
    """

    def __init__(
        self,
        num_nodes,
        marginalize=False,
        weight_scale=1.0,
        noise=None,
        noise_prior=(math.log(0.5), 1.0),
        noise_concentration=1.0,
        noise_rate=1.0,
        hidden=(32, 32),
        name="sem",
        subsample_size=None,
    ):
        if marginalize and subsample_size is not None:
            raise ValueError("LinearGaussianSEM(marginalize=True) uses the sufficient statistics of all rows; "
                             "drop subsample_size")
        super().__init__(num_nodes, name=name, subsample_size=subsample_size)
        self.marginalize = bool(marginalize)
        _check_pos(weight_scale, "weight_scale")
        if not (noise_concentration == 0 and noise_rate == 0):      # 0, 0: Jeffreys' prior
            _check_pos(noise_concentration, "noise_concentration")
            _check_pos(noise_rate, "noise_rate")
        _noise_args(noise, noise_prior)
        self.weight_scale = float(weight_scale)
        self.noise = None if noise is None else float(noise)
        self.noise_prior = (float(noise_prior[0]), float(noise_prior[1]))
        self.noise_concentration = float(noise_concentration)
        self.noise_rate = float(noise_rate)
        if not self.marginalize:
            out = num_nodes + (1 if self.noise is None else 0)
            loc_init = torch.zeros(num_nodes, out)
            if self.noise is None:
                loc_init[:, -1] = self.noise_prior[0]
            self.hypernet = NodeHyperNet(num_nodes, num_nodes, out, hidden, loc_init=loc_init)

    @property
    def supports_subsampling(self):
        return not self.marginalize

    @property
    def latent_sites(self):
        if self.marginalize:
            return []
        return [f"{self.site_prefix}.weights"] + ([f"{self.site_prefix}.log_noise"] if self.noise is None else [])

    def sample_params(self, X):
        if self.marginalize:
            return {}
        p = self.num_nodes
        z = X.new_zeros(())
        params = {
            "weights": pyro.sample(
                f"{self.site_prefix}.weights", dist.Normal(z, self.weight_scale).expand([p, p]).to_event(2)
            )
        }
        if self.noise is None:
            params["log_noise"] = pyro.sample(
                f"{self.site_prefix}.log_noise",
                dist.Normal(z + self.noise_prior[0], self.noise_prior[1]).expand([p]).to_event(1),
            )
        return params

    def guide(self, A):
        if self.marginalize:
            return {}
        p = self.num_nodes
        loc, scale = self.hypernet(A.transpose(-1, -2))  # node j conditioned on its parents A[:, j]
        # column j of W (weights into node j) is the first p outputs of node j's network
        w_loc, w_scale = loc[..., :p].transpose(-1, -2), scale[..., :p].transpose(-1, -2)
        params = {"weights": pyro.sample(f"{self.site_prefix}.weights", dist.Normal(w_loc, w_scale).to_event(2))}
        if self.noise is None:
            params["log_noise"] = pyro.sample(
                f"{self.site_prefix}.log_noise", dist.Normal(loc[..., p], scale[..., p]).to_event(1)
            )
        return params

    def observation_dist(self, X, A, params):
        if self.marginalize:
            return None
        W = params["weights"]
        # x [.., N, p] @ (A * W) [.., p, p]: rows broadcast against the last batch dim.
        mean = _rows_last(X @ (A * W))
        if self.noise is None:
            sigma = params["log_noise"].exp().expand_as(mean)
        else:
            sigma = torch.full_like(mean, self.noise)
        return dist.Normal(mean, sigma).to_event(1)

    def log_likelihood(self, X, A, params=None):
        """``[batch..., N]`` per-row log-likelihood, or ``[batch...]`` (the collapsed evidence) if ``marginalize``."""
        if not self.marginalize:
            return self.observation_dist(X, A, params).log_prob(X)
        return self.collapsed_log_likelihood(X.transpose(-1, -2) @ X, X.shape[0], A)

    def _evidence_const(self, num_rows):
        """The parent-set-free part of the evidence, ``-N/2 log 2π - p log s + a_0 log b_0 + log Γ(a_N) -
        log Γ(a_0)`` (without ``a_0 log b_0 - log Γ(a_0)`` for Jeffreys' prior, ``a_0 = b_0 = 0``)."""
        a0, b0 = self.noise_concentration, self.noise_rate
        aN = a0 + 0.5 * num_rows
        const = -0.5 * num_rows * math.log(2 * math.pi) - self.num_nodes * math.log(self.weight_scale) + math.lgamma(aN)
        if a0 > 0:
            const += a0 * math.log(b0) - math.lgamma(a0)
        return const

    def _evidence_terms(self, G, num_rows, logdet_prec, quad):
        a0, b0 = self.noise_concentration, self.noise_rate
        aN = a0 + 0.5 * num_rows
        bN = b0 + 0.5 * (G.diagonal() - quad).clamp_min(1e-12 * (1.0 + G.diagonal()))
        return self._evidence_const(num_rows) - 0.5 * logdet_prec - aN * bN.log()

    def node_evidence(self, gram, num_rows, A, flips=False):
        r"""Per-node evidence ``log p(x_j | x_pa(j))`` ``[..., p]`` for binary ``A`` ``[..., p, p]``.

        With ``flips=True`` also returns ``[..., p(j), p(v)]``: the evidence of node ``j`` with parent ``v`` toggled
        (added if absent, removed if present; ``v = j`` unchanged), from one Cholesky factor per node and rank-one
        Schur-complement updates: adding ``v`` multiplies the determinant by ``s^2 delta``,
        ``delta = 1/s^2 + G_vv - u^T Lambda^{-1} u`` and adds ``(G_vj - u^T Lambda^{-1} c)^2 / delta`` to the
        quadratic form; removing ``v`` divides by ``s^2 / (Lambda^{-1})_vv`` and subtracts
        ``(Lambda^{-1} c)_v^2 / (Lambda^{-1})_vv``.
        """
        p = self.num_nodes
        G = gram.to(A.dtype)
        s2 = self.weight_scale**2
        eye = torch.eye(p, dtype=A.dtype, device=A.device)
        a = A.transpose(-1, -2)  # [..., j, i] = A[i, j]: node j's parent vector
        prec = eye / s2 + a.unsqueeze(-1) * a.unsqueeze(-2) * G  # [..., j, p, p]
        c = a * G.transpose(-1, -2)  # c[..., j, i] = a_ji G[i, j]
        L = torch.linalg.cholesky(prec)
        w = torch.cholesky_solve(c.unsqueeze(-1), L).squeeze(-1)  # Lambda^{-1} c
        quad = (c * w).sum(-1)
        logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        base = self._evidence_terms(G, num_rows, logdet, quad)
        if not flips:
            return base
        inv = torch.cholesky_inverse(L)  # [..., j, p, p]
        # adding v (a_jv = 0): u = a_j * G[:, v]
        U = a.unsqueeze(-2) * G.unsqueeze(-3)  # [..., j, v, i] = a_ji G[v, i]
        Z = U @ inv  # [..., j, v, i] = (Lambda^{-1} u_v)_i
        delta_add = 1.0 / s2 + G.diagonal() - (Z * U).sum(-1)  # [..., j, v]
        e_add = G.transpose(-1, -2) - (U * w.unsqueeze(-2)).sum(-1)  # [j, v] = G[v, j] - u_v^T w
        delta_add = delta_add.clamp_min(1e-12 / s2)
        quad_add = quad.unsqueeze(-1) + e_add.pow(2) / delta_add
        logdet_add = logdet.unsqueeze(-1) + torch.log(s2 * delta_add)
        # removing v (a_jv = 1)
        dinv = inv.diagonal(dim1=-2, dim2=-1)  # [..., j, v]
        quad_rem = quad.unsqueeze(-1) - w.pow(2) / dinv
        logdet_rem = logdet.unsqueeze(-1) - torch.log(s2 / dinv)
        has = a > 0.5
        quad_v = torch.where(has, quad_rem, quad_add)
        logdet_v = torch.where(has, logdet_rem, logdet_add)
        Gd = G.diagonal().unsqueeze(-1)
        a0, b0 = self.noise_concentration, self.noise_rate
        aN = a0 + 0.5 * num_rows
        bN = b0 + 0.5 * (Gd - quad_v).clamp_min(1e-12 * (1.0 + Gd))
        flipped = self._evidence_const(num_rows) - 0.5 * logdet_v - aN * bN.log()
        flipped = torch.where(eye.bool(), base.unsqueeze(-1).expand_as(flipped), flipped)
        return base, flipped

    def collapsed_log_likelihood(self, gram, num_rows, A):
        r"""Exact evidence ``sum_j log p(x_j | parents)`` from ``gram = X^T X`` ``[p, p]``; returns ``[batch...]``.

        The value is computed at the (hard) forward value of ``A``. When ``A`` carries gradients (a
        straight-through adjacency), its gradient is the exact *edge-flip difference*
        ``dL / dA_ij = L(A with i -> j) - L(A without i -> j)`` instead of the derivative of a soft mask: the evidence
        of a masked regression is flat in the mask value at 0 and 1 (the weights rescale), so the plain
        straight-through derivative carries almost no signal. With straight-through edges this gives, in
        expectation, ``d/d gamma_ij E_B[L] = sigmoid'(gamma_ij) (L(B + e_ij) - L(B - e_ij))``, the local-expectation
        gradient (Titsias & Lazaro-Gredilla 2015).
        """
        hard = A.detach()
        if not A.requires_grad:
            return self.node_evidence(gram, num_rows, hard).sum(-1)
        with torch.no_grad():
            base, flipped = self.node_evidence(gram, num_rows, hard, flips=True)
            has = hard.transpose(-1, -2) > 0.5  # [..., j, v]
            delta = torch.where(has, base.unsqueeze(-1) - flipped, flipped - base.unsqueeze(-1))
        return base.sum(-1) + ((A - hard) * delta.transpose(-1, -2)).sum((-1, -2))
