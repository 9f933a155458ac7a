"""A Gaussian-likelihood leaf with its whitened inducing outputs integrated out (for MCMC).

For a leaf ``w`` of a :class:`~pyro_dag.DAGDGP` with whitened inducing outputs ``V_w ~ N(0, I)`` (``[d, M]``),
the pointwise conditional ``F_{w,b} | V_w ~ N(a_bᵀ V_w, r_b)`` (Perlino et al. 2026, arXiv:2607.09645, Eq. (80))
and a Gaussian likelihood ``Y_{w,b} = F_{w,b} + ξ``, ``ξ ~ N(0, τ²)``, output ``j`` of the leaf's observations is
jointly Gaussian given the parents' values:

    y_j ~ N(0, A Aᵀ + D_j),     A = [a_1, ..., a_B]ᵀ  [B, M],   D_j = diag(r + τ_j²)  (observed cases only).

This is the exact marginal of the model, not a bound: it is the collapsed form of Titsias (2009, "Variational
learning of inducing variables in sparse Gaussian processes", AISTATS) without the variational trace term, i.e. the
FITC marginal of Snelson & Ghahramani (2006), which is what a DAG-DGP leaf with per-case conditionals *is*. Given
``y``, ``V_j`` is Gaussian with precision ``C_j = I + Aᵀ D_j⁻¹ A`` and mean ``C_j⁻¹ Aᵀ D_j⁻¹ y_j``, so MCMC can
sample the rest of the model from the marginal and draw ``V_w`` exactly afterwards (Rao-Blackwellisation).

Everything is evaluated in ``O(B M²)`` through the Woodbury identity and the ``M × M`` Cholesky factor of ``C_j``.
"""
import math

import torch
from pyro.distributions import TorchDistribution
from torch.distributions import constraints

__all__ = ["CollapsedGaussianLeaf", "value_posterior"]


class CollapsedGaussianLeaf(TorchDistribution):
    """The observations ``[B, d]`` of a Gaussian-likelihood leaf with its inducing outputs integrated out.

    :param torch.Tensor a: ``[..., B, M]`` whitened interpolation vectors ``a_b = R⁻¹ K(Z, x_b)``.
    :param torch.Tensor r: ``[..., B]`` residual variances ``K(x_b, x_b) - a_bᵀ a_b``.
    :param torch.Tensor noise_var: ``τ²``, a scalar, ``[d]``, or any shape broadcastable to ``[..., B, d]`` (e.g.
        ``[*batch, 1, d]``, one value per draw of a batch of hyperparameters, see
        :meth:`pyro_dag.gp.Likelihood.hyper`).
    :param int output_dim: ``d``, the leaf's number of outputs (they share ``a``, with their own ``V_j``).
    :param torch.Tensor mask: optional bool ``[B, d]``, True where ``y`` is observed; missing entries contribute
        nothing (their values in ``y`` may be NaN).

    ``event_shape = (B, d)``, ``batch_shape`` the broadcast of ``a.shape[:-2]``, ``r.shape[:-1]`` and
    ``noise_var.shape[:-2]``. :meth:`log_prob` is the exact joint marginal over
    the ``B`` cases (they are not independent: put the site outside the ``"data"`` plate); :meth:`sample` draws
    ``V ~ N(0, I)`` then ``y``; :meth:`sample_inducing` draws ``V | y`` exactly.
    """

    arg_constraints = {}
    support = constraints.real
    has_rsample = False

    def __init__(self, a, r, noise_var, output_dim=1, mask=None, validate_args=None):
        self.a, self.r = a, r
        self.output_dim = int(output_dim)
        self.noise_var = torch.as_tensor(noise_var, dtype=a.dtype, device=a.device)
        B = a.shape[-2]
        self.mask = (torch.ones(B, self.output_dim, dtype=torch.bool, device=a.device) if mask is None
                     else mask.to(device=a.device))
        # D = r + τ² per case and output, [..., B, d]
        nv = self.noise_var.expand(self.output_dim) if self.noise_var.dim() <= 1 else self.noise_var
        diag = r.unsqueeze(-1) + nv
        batch_shape = torch.broadcast_shapes(a.shape[:-2], diag.shape[:-2])
        self.diag = diag.expand(batch_shape + (B, self.output_dim))
        if self.a.shape[:-2] != batch_shape:  # e.g. a batch of noise variances for one a
            self.a = self.a.expand(batch_shape + self.a.shape[-2:])
        super().__init__(batch_shape=batch_shape, event_shape=torch.Size([B, self.output_dim]),
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = torch.Size(batch_shape)
        B, M = self.a.shape[-2:]
        nv = self.noise_var
        if nv.dim() > 1:
            nv = nv.expand(batch_shape + nv.shape[-2:])
        return type(self)(self.a.expand(batch_shape + (B, M)), self.r.expand(batch_shape + (B,)), nv,
                          self.output_dim, self.mask)

    def align_to_plates(self):
        """This distribution with a size-1 batch dim added on the right, ``batch_shape + (1,)``: the site sits
        outside the model's ``"data"`` plate (dim -1), so under a vectorised particle plate (dim -2) a batch of
        draws ``[P]`` must be ``[P, 1]``, as for the model's other sites outside the data plate. Unbatched
        distributions are returned as they are.

        :returns: a :class:`CollapsedGaussianLeaf` with ``batch_shape + (1,)`` (or ``self``).
        """
        if not self.batch_shape:
            return self
        nv = self.noise_var
        if nv.dim() > 2:
            nv = nv.unsqueeze(-3)
        return type(self)(self.a.unsqueeze(-3), self.r.unsqueeze(-2), nv, self.output_dim, self.mask)

    def _precision_factor(self):
        """``w = mask / D`` ``[..., B, d]`` and the lower Cholesky factor of ``C_j = I + Aᵀ diag(w_j) A``
        ``[..., d, M, M]`` (computed once per instance: log_prob and the inducing posterior share it)."""
        cached = self.__dict__.get("_factor")
        if cached is not None:
            return cached
        w = torch.where(self.mask, self.diag.reciprocal(), torch.zeros_like(self.diag))
        M = self.a.shape[-1]
        # batched matmuls rather than einsum: NUTS evaluates this at every leapfrog step, and einsum's path search
        # costs more than the product at these sizes
        aw = self.a.unsqueeze(-3) * w.transpose(-1, -2).unsqueeze(-1)  # [..., d, B, M]
        C = aw.transpose(-1, -2) @ self.a.unsqueeze(-3) + torch.eye(M, dtype=self.a.dtype, device=self.a.device)
        self._factor = (w, torch.linalg.cholesky(C))
        return self._factor

    def _projected(self, w, y):
        """``Aᵀ D_j⁻¹ y_j`` ``[..., d, M]``."""
        return (w * y).transpose(-1, -2) @ self.a

    def _masked(self, y):
        return torch.where(self.mask, y, torch.zeros_like(y))

    def log_prob(self, value):
        """``Σ_j log N(y_j[obs]; 0, A Aᵀ + D_j)`` ``[...]``, by the Woodbury identity and the matrix
        determinant lemma."""
        y = self._masked(value)
        w, L = self._precision_factor()
        b = self._projected(w, y)
        c = torch.linalg.solve_triangular(L, b.unsqueeze(-1), upper=False).squeeze(-1)
        quad = (w * y * y).sum((-1, -2)) - (c * c).sum((-1, -2))
        log_d = torch.where(self.mask, self.diag.log(), torch.zeros_like(self.diag)).sum((-1, -2))
        logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum((-1, -2)) + log_d
        n_obs = self.mask.sum()
        return -0.5 * (quad + logdet + n_obs * math.log(2 * math.pi))

    def sample(self, sample_shape=torch.Size()):
        """``V ~ N(0, I)``, ``y = A V_jᵀ + √D ε`` ``[*sample_shape, ..., B, d]`` (every case, observed or not)."""
        shape = torch.Size(sample_shape) + self.batch_shape
        M = self.a.shape[-1]
        with torch.no_grad():
            v = torch.randn(shape + (self.output_dim, M), dtype=self.a.dtype, device=self.a.device)
            loc = torch.einsum("...bm,...jm->...bj", self.a.expand(shape + self.a.shape[-2:]), v)
            return loc + self.diag.sqrt() * torch.randn_like(loc)

    def inducing_posterior(self, value):
        """Mean ``[..., d, M]`` and lower Cholesky factor ``L`` ``[..., d, M, M]`` of the precision of
        ``V | y`` (``cov = L⁻ᵀ L⁻¹``)."""
        y = self._masked(value)
        w, L = self._precision_factor()
        b = self._projected(w, y)
        mean = torch.cholesky_solve(b.unsqueeze(-1), L, upper=False).squeeze(-1)
        return mean, L

    def sample_inducing(self, value):
        """One exact draw of the whitened inducing outputs ``V | y`` ``[..., d, M]``."""
        mean, L = self.inducing_posterior(value)
        z = torch.randn_like(mean)
        return mean + torch.linalg.solve_triangular(L.transpose(-1, -2), z.unsqueeze(-1), upper=True).squeeze(-1)


def value_posterior(loc, var, y, mask, noise_var):
    """Per-case conditional of a Gaussian-likelihood node's values given its inducing outputs and its own
    observations: ``F_b | U, y_b ~ N(loc_b + g_b (y_b - loc_b), (1 - g_b) var_b)`` with the gain
    ``g_b = var_b / (var_b + τ²)`` where ``y_b`` is observed and 0 elsewhere (the prior conditional of
    Perlino et al. 2026, arXiv:2607.09645, Eq. (80), updated by the node's likelihood).

    :param torch.Tensor loc: ``[..., B, d]`` ``μ(U)``. :param torch.Tensor var: ``[..., B, d]`` ``r``.
    :param torch.Tensor y: ``[B, d]`` observations (any value where missing). :param mask: bool ``[B, d]``.
    :param noise_var: ``τ²``, a scalar or ``[d]``.
    :returns: ``(mean, var, gain)``, each ``[..., B, d]``.
    """
    gain = torch.where(mask, var / (var + noise_var), torch.zeros_like(var))
    mean = loc + gain * torch.where(mask, y - loc, torch.zeros_like(loc))
    return mean, var * (1 - gain), gain
