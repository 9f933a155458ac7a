"""Structural equation models ("mechanisms") for structure learning, as Pyro model pieces (digest-001 §2.1, §4.4).

A mechanism is the likelihood ``p(X | A, theta) p(theta)`` of data ``X`` ``[N, p]`` given an adjacency ``A``
(``A[i, j] = 1``: ``i -> j``) and its parameters ``theta``, together with a guide ``q(theta | A)``. It is the one
interface the structure-learning code talks to, so another mechanism (for example a GP per node) plugs in by
subclassing :class:`Mechanism`:

* :meth:`Mechanism.model` ``(X, A)`` -- declares the parameter sites (their priors) and the observation
  (an ``obs=`` site inside a ``"{name}.data"`` plate at ``dim=-1``, or a ``pyro.factor``);
* :meth:`Mechanism.guide` ``(A)`` -- declares the guide sites of the parameters, conditioned on ``A``;
* :meth:`Mechanism.log_likelihood` ``(X, A, params)`` -- the log-likelihood without Pyro side effects.

Shapes: ``A`` is ``batch + [p, p]`` and the parameters carry the same batch dims. ``X`` rows broadcast against
the **last** batch dim, which is the data plate's dim (``-1``), so under a particle plate at ``dim=-2`` a
``[K, 1, p, p]`` adjacency and ``[B, p]`` rows give ``[K, B]`` per-row log-likelihoods.

Implemented:

* :class:`LinearGaussianSEM` -- ``x_j = sum_i A_ij W_ij x_i + eps_j``. Either with the weights and noise scales as
  sample sites and a parent-conditioned guide, or (``marginalize=True``) with the conjugate Normal-Inverse-Gamma
  prior integrated out exactly from the sufficient statistics ``X^T X`` (no parameter sites, no subsampling noise).
* :class:`MLPSEM` -- one tanh MLP per node on its masked parents (SVI-DAG's node model, digest-001 §2.1, Table E.1)
  with Gaussian noise; the weights are a sample site with a ``N(0, 1)`` prior, and the guide is a per-node
  hypernetwork of the node's parent vector (row-wise conditioning, digest-001 §4.4, §11.7).
* :class:`NodeHyperNet` -- the batched per-node hypernetwork ``a_j -> (loc_j, scale_j)``.
"""
import math
import numbers

import pyro
import pyro.distributions as dist
from pyro import poutine
import torch
import torch.nn as nn
import torch.nn.functional as F
from pyro.nn import PyroModule

__all__ = ["BGeSEM", "LinearGaussianSEM", "MLPSEM", "Mechanism", "NodeHyperNet"]


def _check_int(v, name, minimum=1):
    if not isinstance(v, numbers.Integral) or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}; got {v!r}")


def _check_pos(v, name):
    if not isinstance(v, numbers.Real) or not v > 0:
        raise ValueError(f"{name} must be a positive number; got {v!r}")


class NodeHyperNet(nn.Module):
    r"""Per-node hypernetwork ``(loc_j, scale_j) = H_j(a_j)`` for a Gaussian guide over node parameters.

    SVI-DAG's ``q_phi(theta | A)`` with row-wise conditioning (digest-001 §4.4, U-14, §11.7): node ``j``'s network
    sees only its parent vector ``a_j = A[:, j]``. All ``p`` networks are evaluated in one batched pass
    (``hidden`` ReLU layers). The scale head starts at ``softplus(-2) ~ 0.13`` (zero weights, bias -2) and the
    location head at ``loc_init`` with small weights.

    :param int num_nodes: ``p``.
    :param int in_dim: length of the conditioning vector (``p``).
    :param int out_dim: number of parameters per node.
    :param tuple hidden: hidden widths.
    :param torch.Tensor loc_init: optional ``[p, out_dim]`` initial location (bias of the location head).

    Input ``[..., p, in_dim]``; output ``(loc, scale)``, each ``[..., p, out_dim]``.
    """

    def __init__(self, num_nodes, in_dim, out_dim, hidden=(32, 32), loc_init=None):
        super().__init__()
        _check_int(num_nodes, "num_nodes")
        _check_int(in_dim, "in_dim")
        _check_int(out_dim, "out_dim")
        self.num_nodes, self.in_dim, self.out_dim = num_nodes, in_dim, out_dim
        dims = [in_dim] + list(hidden)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            w = torch.empty(num_nodes, d_out, d_in)
            for j in range(num_nodes):
                nn.init.kaiming_uniform_(w[j], a=math.sqrt(5))
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.zeros(num_nodes, d_out)))
        h = dims[-1]
        self.loc_weight = nn.Parameter(0.01 * torch.randn(num_nodes, out_dim, h))
        if loc_init is None:
            loc_init = torch.zeros(num_nodes, out_dim)
        if tuple(loc_init.shape) != (num_nodes, out_dim):
            raise ValueError(f"loc_init must be [{num_nodes}, {out_dim}]; got {tuple(loc_init.shape)}")
        self.loc_bias = nn.Parameter(loc_init.clone().to(torch.get_default_dtype()))
        self.scale_weight = nn.Parameter(torch.zeros(num_nodes, out_dim, h))
        self.scale_bias = nn.Parameter(torch.full((num_nodes, out_dim), -2.0))

    def forward(self, a):
        h = a
        for w, b in zip(self.weights, self.biases):
            h = F.relu(torch.einsum("...ji,jhi->...jh", h, w) + b)
        loc = torch.einsum("...ji,jhi->...jh", h, self.loc_weight) + self.loc_bias
        scale = F.softplus(torch.einsum("...ji,jhi->...jh", h, self.scale_weight) + self.scale_bias) + 1e-6
        return loc, scale


class Mechanism(PyroModule):
    """Base class of structural-equation mechanisms ``p(X | A, theta) p(theta)`` and ``q(theta | A)`` (digest-001 §2.1).

    Subclasses implement :meth:`log_likelihood` and, when they have parameters, :meth:`sample_params` (model
    side) and :meth:`guide` (guide side). :meth:`model` (also ``__call__``) samples the parameters and scores the
    data: by default with an ``obs`` site ``"{name}.x"`` built from :meth:`observation_dist` when the subclass
    provides one, else with ``pyro.factor("{name}.loglik", ...)``.

    :param int num_nodes: ``p``.
    :param str name: prefix of every site name.
    :param int subsample_size: rows per step for the data plate (``None``: all rows); the log-likelihood is
        scaled by ``N / B`` by Pyro.
    """

    def __init__(self, num_nodes, name="sem", subsample_size=None):
        super().__init__(name=name)
        _check_int(num_nodes, "num_nodes", 2)
        if subsample_size is not None:
            _check_int(subsample_size, "subsample_size")
        self.num_nodes = num_nodes
        self.site_prefix = name
        self.subsample_size = subsample_size

    # -- interface ---------------------------------------------------------------------------------------
    @property
    def supports_subsampling(self):
        """Whether rows are conditionally independent given ``(A, theta)`` (then the data plate may subsample)."""
        return True

    @property
    def latent_sites(self):
        """Names of the latent (parameter) sample sites this mechanism declares in the model."""
        return []

    def sample_params(self, X):
        """Model side: sample the parameters from their prior (dtype/device of ``X``); returns a dict."""
        return {}

    def guide(self, A):
        """Guide side: sample the parameters from ``q(theta | A)``; returns a dict (possibly empty)."""
        return {}

    def log_likelihood(self, X, A, params):
        """``log p(X | A, theta)``: ``[batch..., N]`` per row, or ``[batch...]`` if rows are not separable."""
        raise NotImplementedError

    def observation_dist(self, X, A, params):
        """Optional: the distribution of the rows, ``batch + [N]`` with event ``[p]``; ``None`` to use a factor."""
        return None

    # -- model -------------------------------------------------------------------------------------------
    def check_data(self, X, A=None):
        """Validate ``X`` ``[N, p]`` (finite floats) and ``A`` ``[..., p, p]``; raise a clear error otherwise."""
        if not torch.is_tensor(X) or X.dim() != 2 or not X.is_floating_point():
            raise ValueError(
                f"{type(self).__name__}: X must be a float tensor [N, p]; got "
                f"{tuple(X.shape) if torch.is_tensor(X) else type(X).__name__}"
            )
        if X.shape[-1] != self.num_nodes:
            raise ValueError(f"{type(self).__name__} was built for {self.num_nodes} nodes but X has {X.shape[-1]} columns")
        if not torch.isfinite(X).all():
            raise ValueError(f"{type(self).__name__}: X contains NaN or inf; impute or drop those rows first")
        if A is not None and A.shape[-2:] != (self.num_nodes, self.num_nodes):
            raise ValueError(f"A must be [..., {self.num_nodes}, {self.num_nodes}]; got {tuple(A.shape)}")

    def model(self, X, A):
        """Sample the parameters, then score ``X`` given ``A`` (inside a ``"{name}.data"`` plate at ``dim=-1``)."""
        self.check_data(X, A)
        params = self.sample_params(X)
        N = X.shape[0]
        if not self.supports_subsampling:
            pyro.factor(f"{self.site_prefix}.loglik", self.log_likelihood(X, A, params))
            return params
        with pyro.plate(f"{self.site_prefix}.data", N, subsample_size=self.subsample_size, dim=-1,
                        device=X.device) as idx:
            Xb = X if self.subsample_size is None or self.subsample_size >= N else X.index_select(0, idx)
            d = self.observation_dist(Xb, A, params)
            if d is None:
                pyro.factor(f"{self.site_prefix}.loglik", self.log_likelihood(Xb, A, params))
            else:
                pyro.sample(f"{self.site_prefix}.x", d, obs=Xb)
        return params

    def forward(self, X, A):
        return self.model(X, A)


def _rows_last(out):
    """``[*batch, N, p]`` -> ``[*batch[:-1], N, p]``: put the rows on the data plate's batch dim (``-1``)."""
    if out.dim() > 2:
        if out.shape[-3] != 1:
            raise ValueError(
                "the last batch dim of A / the parameters is the data plate's dim and must have size 1; got shape "
                f"{tuple(out.shape[:-2])}"
            )
        out = out.squeeze(-3)
    return out


def _noise_args(noise, noise_prior):
    if noise is not None:
        _check_pos(noise, "noise")
    if not (isinstance(noise_prior, (tuple, list)) and len(noise_prior) == 2 and noise_prior[1] > 0):
        raise ValueError(f"noise_prior must be (loc, scale) of log sigma with scale > 0; got {noise_prior!r}")


class LinearGaussianSEM(Mechanism):
    r"""Linear-Gaussian SEM ``x_j = sum_i A_ij W_ij x_i + eps_j``, ``eps_j ~ N(0, sigma_j^2)`` (digest-001 §2.1).

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
    :param float noise_concentration: ``a_0`` (``marginalize=True``).
    :param float noise_rate: ``b_0`` (``marginalize=True``).
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

    def _evidence_terms(self, G, num_rows, logdet_prec, quad):
        p = self.num_nodes
        a0, b0 = self.noise_concentration, self.noise_rate
        aN = a0 + 0.5 * num_rows
        bN = b0 + 0.5 * (G.diagonal() - quad).clamp_min(1e-12 * (1.0 + G.diagonal()))
        const = (
            -0.5 * num_rows * math.log(2 * math.pi)
            - p * math.log(self.weight_scale)
            + a0 * math.log(b0)
            + math.lgamma(aN)
            - math.lgamma(a0)
        )
        return const - 0.5 * logdet_prec - aN * bN.log()

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
        const = (
            -0.5 * num_rows * math.log(2 * math.pi)
            - p * math.log(self.weight_scale)
            + a0 * math.log(b0)
            + math.lgamma(aN)
            - math.lgamma(a0)
        )
        flipped = const - 0.5 * logdet_v - aN * bN.log()
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
    likelihood (the score used by DiBS and order MCMC, digest-004 §1). Node ``j`` with ``l`` parents ``pa``:

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


class MLPSEM(Mechanism):
    r"""Nonlinear SEM: one MLP per node on its masked parents plus Gaussian noise (digest-001 §2.1, U-2, U-3).

    .. math:: x_j = f_j(A_{:, j} \odot x; \theta_j) + \epsilon_j, \quad \epsilon_j \sim N(0, \sigma_j^2),

    ``f_j``: ``p -> hidden[0] -> ... -> 1`` with ``tanh`` (paper: two layers of 32). Non-parent inputs are zeroed
    exactly by the (straight-through) adjacency. Sites: ``"{name}.weights"`` ``[p, D]`` (all MLP weights and biases of
    node ``j`` flattened in row ``j``; prior ``N(0, prior_scale^2)``), ``"{name}.log_noise"`` ``[p]`` unless
    ``noise`` is fixed (prior ``N(noise_prior)`` on ``log sigma``; paper: centred at ``log 0.1`` with scale 2),
    and the observation ``"{name}.x"``. Guide: a :class:`NodeHyperNet` of the parent vector ``A[:, j]``
    (row-wise conditioning, digest-001 §4.4).

    :param int num_nodes: ``p``.
    :param tuple hidden: hidden widths of each node MLP.
    :param float prior_scale: prior scale of the MLP weights.
    :param float noise: fixed noise scale (paper ER runs: 0.5); ``None`` learns it.
    :param tuple noise_prior: ``(loc, scale)`` of ``log sigma``.
    :param tuple hyper_hidden: hypernetwork widths.
    :param str name: site prefix.
    :param int subsample_size: rows per step (paper: 64).
    :param float kl_weight: scale of the parameter sites in model and guide alike, i.e. the weight of
        ``KL(q(theta | A) || p(theta))`` in the ELBO (1: exact; SVI-DAG's ER runs: 0.01, digest-001 §4.4).
    """

    def __init__(
        self,
        num_nodes,
        hidden=(32, 32),
        prior_scale=1.0,
        noise=None,
        noise_prior=(math.log(0.1), 2.0),
        hyper_hidden=(32, 32),
        name="sem",
        subsample_size=None,
        kl_weight=1.0,
    ):
        super().__init__(num_nodes, name=name, subsample_size=subsample_size)
        _check_pos(kl_weight, "kl_weight")
        self.kl_weight = float(kl_weight)
        if not hidden or any(not isinstance(h, numbers.Integral) or h < 1 for h in hidden):
            raise ValueError(f"hidden must be a non-empty tuple of positive widths; got {hidden!r}")
        _check_pos(prior_scale, "prior_scale")
        _noise_args(noise, noise_prior)
        self.hidden = tuple(int(h) for h in hidden)
        self.prior_scale = float(prior_scale)
        self.noise = None if noise is None else float(noise)
        self.noise_prior = (float(noise_prior[0]), float(noise_prior[1]))
        dims = [num_nodes] + list(self.hidden) + [1]
        self._layer_dims = list(zip(dims[:-1], dims[1:]))
        self.num_weights = sum(o * i + o for i, o in self._layer_dims)
        # initial means: the usual fan-in initialisation of an MLP, one draw per node
        init = []
        for _ in range(num_nodes):
            parts = []
            for i, o in self._layer_dims:
                bound = 1.0 / math.sqrt(i)
                parts += [torch.empty(o * i).uniform_(-bound, bound), torch.empty(o).uniform_(-bound, bound)]
            init.append(torch.cat(parts))
        loc_init = torch.stack(init)
        if self.noise is None:
            loc_init = torch.cat([loc_init, torch.full((num_nodes, 1), self.noise_prior[0])], -1)
        self.hypernet = NodeHyperNet(num_nodes, num_nodes, loc_init.shape[-1], tuple(hyper_hidden), loc_init=loc_init)

    @property
    def latent_sites(self):
        return [f"{self.site_prefix}.weights"] + ([f"{self.site_prefix}.log_noise"] if self.noise is None else [])

    def sample_params(self, X):
        with poutine.scale(scale=self.kl_weight):
            return self._sample_params(X)

    def _sample_params(self, X):
        p, D = self.num_nodes, self.num_weights
        z = X.new_zeros(())
        params = {
            "weights": pyro.sample(f"{self.site_prefix}.weights", dist.Normal(z, self.prior_scale).expand([p, D]).to_event(2))
        }
        if self.noise is None:
            params["log_noise"] = pyro.sample(
                f"{self.site_prefix}.log_noise",
                dist.Normal(z + self.noise_prior[0], self.noise_prior[1]).expand([p]).to_event(1),
            )
        return params

    def guide(self, A):
        # the same scale as the model's parameter sites: KL(q(theta | A) || p(theta)) is weighted by kl_weight
        with poutine.scale(scale=self.kl_weight):
            return self._guide(A)

    def _guide(self, A):
        D = self.num_weights
        loc, scale = self.hypernet(A.transpose(-1, -2))
        params = {"weights": pyro.sample(f"{self.site_prefix}.weights", dist.Normal(loc[..., :D], scale[..., :D]).to_event(2))}
        if self.noise is None:
            params["log_noise"] = pyro.sample(
                f"{self.site_prefix}.log_noise", dist.Normal(loc[..., D], scale[..., D]).to_event(1)
            )
        return params

    def predict(self, X, A, weights):
        """Node means ``f_j(A[:, j] * x)``: ``X`` ``[N, p]``, ``A`` ``batch + [p, p]``, weights ``batch + [p, D]``.

        :returns: ``[batch..., N, p]`` with ``N`` broadcast against the last batch dim (which must be 1 if present).
        """
        h = X.unsqueeze(-3) * A.transpose(-1, -2).unsqueeze(-2)  # [..., j, N, i]: inputs of node j
        offset = 0
        for k, (i, o) in enumerate(self._layer_dims):
            W = weights[..., offset: offset + o * i].reshape(weights.shape[:-1] + (o, i))
            offset += o * i
            b = weights[..., offset: offset + o]
            offset += o
            h = h @ W.transpose(-1, -2) + b.unsqueeze(-2)  # [..., j, N, o]
            if k < len(self._layer_dims) - 1:
                h = torch.tanh(h)
        return _rows_last(h.squeeze(-1).transpose(-1, -2))  # [..., N, j]

    def observation_dist(self, X, A, params):
        mean = self.predict(X, A, params["weights"])
        if self.noise is None:
            sigma = params["log_noise"].exp().expand_as(mean)
        else:
            sigma = torch.full_like(mean, self.noise)
        return dist.Normal(mean, sigma).to_event(1)

    def log_likelihood(self, X, A, params):
        """``[batch..., N]`` per-row log-likelihood."""
        return self.observation_dist(X, A, params).log_prob(X)
