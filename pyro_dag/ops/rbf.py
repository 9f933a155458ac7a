"""The squared-exponential cross-covariance ``σ² exp(-½ ||x - z||²)`` with a hand-written backward.

In a deep GP the cross-covariance between a node's sampled inputs and its inducing inputs,
``K(X, Z)`` of shape ``[S, B, M]``, is the largest tensor of an ELBO step (Perlino et al. 2026, "Deep Gaussian
Processes on Directed Acyclic Graphs", arXiv:2607.09645, Eq. (80): ``S`` samples, ``B`` cases, ``M`` inducing
points). Written with autograd's elementwise operations it takes about eight passes over that tensor forwards
and as many backwards (the distance expansion, the clamp, the scaling, the exponential and their
derivatives); here the forward is one matrix product and four in-place passes, and the backward uses

    G = g ⊙ K,    ∂/∂σ² = Σ G / σ²,    ∂/∂x_n = Σ_m G_nm z_m - x_n Σ_m G_nm,    ∂/∂z_m = Σ_n G_nm x_n - z_m Σ_n G_nm,

(``g`` the incoming gradient, ``r²_nm = ||x_n||² - 2 x_nᵀ z_m + ||z_m||²``, ``∂K/∂r² = -½ K``): one elementwise
product, two reductions and two matrix products. The values agree with the autograd composition to rounding
(the expansion and its clamp at 0 are the same); the gradient ignores the clamp's zero derivative where
rounding makes ``r²`` negative, i.e. at ``x = z`` to rounding, where the exact derivative of ``exp(-½ r²)``
in ``x`` is 0 anyway.
"""
import torch

from ..utils import is_fx_tracing

__all__ = ["rbf_cross"]


class _RBFCross(torch.autograd.Function):
    @staticmethod
    def forward(ctx, X, Z, variance):
        x2 = X.pow(2).sum(-1, keepdim=True)                                  # [..., N, 1]
        z2 = Z.pow(2).sum(-1, keepdim=True).transpose(-1, -2)                # [..., 1, M]
        K = torch.matmul(X, Z.transpose(-1, -2))
        K = K.mul_(-2).add_(x2).add_(z2).clamp_min_(0).mul_(-0.5).exp_()   # exp(-½ r²)
        # in place when σ² cannot add dimensions (a scalar, the usual case); torch.broadcast_shapes costs more here
        K = K.mul_(variance) if variance.dim() == 0 else K * variance
        ctx.save_for_backward(X, Z, variance, K)
        return K

    @staticmethod
    def backward(ctx, grad):
        X, Z, variance, K = ctx.saved_tensors
        G = grad * K                                                          # g ⊙ K = σ² g ⊙ exp(-½ r²)
        dX = dZ = dvar = None
        if ctx.needs_input_grad[2]:
            dvar = G.sum_to_size(variance.shape) / variance   # reduce first: one pass
        if ctx.needs_input_grad[0]:
            dX = (torch.matmul(G, Z) - X * G.sum(-1, keepdim=True)).sum_to_size(X.shape)
        if ctx.needs_input_grad[1]:
            Gt = G.transpose(-1, -2)
            dZ = (torch.matmul(Gt, X) - Z * Gt.sum(-1, keepdim=True)).sum_to_size(Z.shape)
        return dX, dZ, dvar


def rbf_cross(X, Z, variance):
    """``σ² exp(-½ ||x_n - z_m||²)`` for scaled inputs (divide by the length-scales first), with a fused backward.

    :param torch.Tensor X: ``[..., N, D]``. :param torch.Tensor Z: ``[..., M, D]`` (batch dims broadcast with
        ``X``'s). :param torch.Tensor variance: ``σ²``, a tensor broadcastable to ``[..., N, M]``.
    :returns: ``[..., N, M]``.

    Example::

        K = rbf_cross(X / lengthscale, Z / lengthscale, variance)   # == variance * exp(-0.5 * sqdist)
    """
    if not torch.is_tensor(variance):
        variance = torch.as_tensor(variance, dtype=X.dtype, device=X.device)
    if is_fx_tracing():
        # a make_fx recording (pyro_dag.infer.CompiledNUTS) is differentiated and fused by the compiler, which
        # needs the composition rather than a Python backward
        sq = (X.pow(2).sum(-1, keepdim=True) - 2 * X @ Z.transpose(-1, -2)
              + Z.pow(2).sum(-1, keepdim=True).transpose(-1, -2)).clamp_min(0)
        return variance * torch.exp(-0.5 * sq)
    return _RBFCross.apply(X, Z, variance)
