"""Base kernels: RBF (ARD), Matérn 1/2, 3/2, 5/2, rational quadratic, linear, white and constant.

All are batched (inputs ``[..., N, D]``, see :mod:`pyro_dag.kernels.base`). The stationary kernels are
the per-parent building blocks of the fusion rules (Perlino et al. 2026, arXiv:2607.09645, Eq. (3)).
"""
import math

import torch
from pyro.nn import PyroParam
from torch.distributions import constraints

from ..ops.rbf import rbf_cross
from .base import Kernel, positive_param

__all__ = ["Stationary", "RBF", "Matern12", "Matern32", "Matern52", "RationalQuadratic", "Linear", "White",
           "Constant"]


def _sqdist(X, Z=None):
    """Squared Euclidean distances ``[..., N, M]`` via the expansion (matmul; clamped at 0); ``Z=None``: of ``X``
    with itself, with an exact zero diagonal."""
    Y = X if Z is None else Z
    x2 = X.pow(2).sum(-1, keepdim=True)
    y2 = x2 if Z is None else Y.pow(2).sum(-1, keepdim=True)
    r2 = x2 - 2 * X @ Y.transpose(-1, -2) + y2.transpose(-1, -2)
    if Z is None:
        # the expansion leaves a rounding residue ~1e-16 |x|² on the diagonal, and kernels with a kink at r = 0
        # (Matérn) take its square root: K(x, x) would be off by ~1e-8 and differ between batched and single calls
        eye = torch.eye(r2.shape[-1], dtype=torch.bool, device=r2.device)
        r2 = r2.masked_fill(eye, 0.0)
    return r2.clamp_min(0)


def _expand_diag(variance, X):
    """``σ²`` expanded to the diagonal ``[*batch, N]`` of ``X`` ``[..., N, D]`` (``σ²``: a scalar or
    ``[*batch, 1]``)."""
    if variance.dim() == 0:
        return variance.expand(X.shape[:-1])
    return variance.expand(torch.broadcast_shapes(variance.shape, X.shape[:-1]))


class Stationary(Kernel):
    """Base of stationary kernels ``k(x, z) = σ² κ(||x - z||_ℓ)`` with (optionally ARD) length-scales.

    :param float variance: ``σ²``. :param lengthscale: float or ``[D]`` tensor (``[D]`` implies ARD).
    :param bool ard: one length-scale per input dimension, created when the kernel is bound.
    """

    def __init__(self, variance=1.0, lengthscale=1.0, ard=False):
        super().__init__()
        self.variance = positive_param(variance, "variance")
        self.lengthscale = positive_param(lengthscale, "lengthscale")
        self.ard = bool(ard) or torch.as_tensor(lengthscale).numel() > 1

    def bind(self, input_dim):
        super().bind(input_dim)
        if "lengthscale" in self.__dict__.get("_pyro_params", {}):  # learnable, not a PyroSample prior
            ls = self._own_value("lengthscale").detach()
            if self.ard and ls.numel() == 1 and input_dim > 1:
                self.lengthscale = PyroParam(ls.reshape(()).expand(input_dim).clone(), constraints.positive)
            elif ls.numel() not in (1, input_dim):
                raise ValueError(f"{type(self).__name__} has {ls.numel()} length-scales but its input has "
                                 f"{input_dim} dimensions; pass a scalar or one length-scale per dimension")
        return self

    def scaled_sqdist(self, X, Z=None):
        """``Σ_d (x_d - z_d)²/ℓ_d²`` ``[*batch, N, M]`` for ``X`` ``[..., N, D]``, ``Z`` ``[..., M, D]`` (``batch``:
        the inputs' batch dims broadcast with the length-scales', see :meth:`Kernel.hyper`); ``Z=None``: ``X``
        with itself (``M = N``, zero diagonal)."""
        ls = self.hyper("lengthscale")
        return _sqdist(X / ls, None if Z is None else Z / ls)

    def forward(self, X, Z=None, diag=False):
        self._check_dim(X)
        if diag:
            return _expand_diag(self.hyper("variance", 1), X)
        return self.hyper("variance") * self.profile(self.scaled_sqdist(X, Z))

    def profile(self, r2):
        """``κ`` as a function of the scaled squared distance."""
        raise NotImplementedError


class RBF(Stationary):
    """Squared-exponential kernel ``σ² exp(-r²/2)``, ``r² = Σ_d (x_d - z_d)²/ℓ_d²``."""

    def forward(self, X, Z=None, diag=False):
        if diag or Z is None:
            return super().forward(X, Z, diag)
        # the cross-covariance K(X, Z) is the largest tensor of a deep-GP step: one fused op with a hand-written
        # backward (pyro_dag.ops.rbf), same values as the composition below
        self._check_dim(X)
        ls = self.hyper("lengthscale")
        return rbf_cross(X / ls, Z / ls, self.hyper("variance"))

    def profile(self, r2):
        return torch.exp(-0.5 * r2)


class Matern12(Stationary):
    """Matérn ν=1/2 (exponential) kernel ``σ² exp(-r)``."""

    def profile(self, r2):
        return torch.exp(-r2.clamp_min(1e-30).sqrt())


class Matern32(Stationary):
    """Matérn ν=3/2 kernel ``σ² (1 + √3 r) exp(-√3 r)``."""

    def profile(self, r2):
        r = math.sqrt(3) * r2.clamp_min(1e-30).sqrt()
        return (1 + r) * torch.exp(-r)


class Matern52(Stationary):
    """Matérn ν=5/2 kernel ``σ² (1 + √5 r + 5r²/3) exp(-√5 r)``."""

    def profile(self, r2):
        r = math.sqrt(5) * r2.clamp_min(1e-30).sqrt()
        return (1 + r + r.pow(2) / 3) * torch.exp(-r)


class RationalQuadratic(Stationary):
    """Rational quadratic kernel ``σ² (1 + r²/(2α))^{-α}`` (a scale mixture of RBFs)."""

    def __init__(self, variance=1.0, lengthscale=1.0, scale_mixture=1.0, ard=False):
        super().__init__(variance, lengthscale, ard)
        self.scale_mixture = positive_param(scale_mixture, "scale_mixture")

    def profile(self, r2):
        alpha = self.hyper("scale_mixture")
        return (1 + 0.5 * r2 / alpha).pow(-alpha)


class _VarianceKernel(Kernel):
    """A kernel whose only hyperparameter is a variance ``σ²``."""

    def __init__(self, variance=1.0):
        super().__init__()
        self.variance = positive_param(variance, "variance")


class Linear(_VarianceKernel):
    """Linear kernel ``σ² xᵀz`` (the ``k_lin`` factor of :class:`~pyro_dag.kernels.MultiFidelity`)."""

    def forward(self, X, Z=None, diag=False):
        self._check_dim(X)
        if diag:
            return self.hyper("variance", 1) * X.pow(2).sum(-1)
        Z = X if Z is None else Z
        return self.hyper("variance") * (X @ Z.transpose(-1, -2))


class White(_VarianceKernel):
    """White-noise kernel ``σ² 1{x and z are the same input}``.

    With ``Z=None`` (the same inputs) it returns ``σ² I``; across two input sets it returns zeros. Adding it
    to a node's kernel absorbs an additive Gaussian innovation into ``K_w`` (Perlino et al. 2026, Sec. 2).
    """

    def forward(self, X, Z=None, diag=False):
        self._check_dim(X)
        if diag:
            return _expand_diag(self.hyper("variance", 1), X)
        variance = self.hyper("variance")
        if Z is None:
            eye = torch.eye(X.shape[-2], dtype=X.dtype, device=X.device)
            return variance * eye.expand(X.shape[:-2] + eye.shape)
        # zeros, with one matrix per hyperparameter draw like the other kernels' cross-covariances
        batch = torch.broadcast_shapes(X.shape[:-2], Z.shape[:-2], variance.shape[:-2])
        return X.new_zeros(batch + (X.shape[-2], Z.shape[-2]))


class Constant(_VarianceKernel):
    """Constant kernel ``σ²`` (a random offset)."""

    def forward(self, X, Z=None, diag=False):
        self._check_dim(X)
        if diag:
            return _expand_diag(self.hyper("variance", 1), X)
        Z = X if Z is None else Z
        variance = self.hyper("variance")
        batch = torch.broadcast_shapes(X.shape[:-2], Z.shape[:-2], variance.shape[:-2])
        return variance.expand(batch + (X.shape[-2], Z.shape[-2]))
