"""Row-wise quadratic forms of the interpolation vectors, with hand-written backward passes.

In a deep-GP ELBO step the whitened interpolation vectors ``A = K(X, Z) R⁻ᵀ`` of a node, ``[S, B, M]`` (``S``
samples, ``B`` cases, ``M`` inducing points), enter the residual variance ``r = k(x, x) - Σ_m a_m²`` and, under a
mean-field posterior ``q(V_w) = N(m, Σ)``, the predictive moments ``μ = A m`` and ``σ² = r + aᵀ Σ a``
(Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, Eqs. (80) and (93)). Written with autograd's operations, ``Σ a² `` takes a product and a sum
forwards and two products and an addition backwards, and ``aᵀ L Lᵀ a`` through ``A L`` a second ``[S B, M] x
[M, M]`` product backwards; every one of those allocates a fresh ``[S, B, M]`` tensor. Here

* :func:`sum_squares`: ``∂/∂a = 2 g a``, one product (the same numbers as autograd's ``g a + g a``);
* :func:`mean_and_quadratic`: ``q = Σ_m a_m (A Σ)_m`` with ``∂/∂A = 2 g_q ⊙ (A Σ) + g_μ mᵀ`` (one product and an
  in-place rank-one update, no matrix product), ``∂/∂Σ = Aᵀ (g_q ⊙ A)`` and ``∂/∂m = Aᵀ g_μ``.
"""
import torch

from ..utils import is_tracing

__all__ = ["sum_squares", "mean_and_quadratic"]


class _SumSquares(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x * x).sum(-1)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return (2 * grad).unsqueeze(-1) * x          # = g x + g x exactly (scaling by 2 is exact)


def sum_squares(x):
    """``Σ_m x_m²`` over the last dimension, with a one-pass backward.

    :param torch.Tensor x: ``[..., M]``. :returns: ``[...]``, the same values as ``(x * x).sum(-1)``.
    """
    if is_tracing():  # a make_fx recording (CompiledNUTS) is differentiated by the compiler: the composition
        return (x * x).sum(-1)
    return _SumSquares.apply(x)


class _MeanAndQuadratic(torch.autograd.Function):
    @staticmethod
    def forward(ctx, A, m, S):
        AS = A @ S                                   # [N, M]
        q = (A * AS).sum(-1)
        loc = A @ m
        ctx.save_for_backward(A, m, S, AS)
        return loc, q

    @staticmethod
    def backward(ctx, g_loc, g_q):
        A, m, S, AS = ctx.saved_tensors
        dA = dm = dS = None
        if ctx.needs_input_grad[0]:
            dA = AS * (2 * g_q).unsqueeze(-1)        # ∂(aᵀ S a)/∂a = (S + Sᵀ) a = 2 S a for symmetric S
            dA.addr_(g_loc, m)
        if ctx.needs_input_grad[1]:
            dm = A.T @ g_loc
        if ctx.needs_input_grad[2]:
            dS = A.T @ (A * g_q.unsqueeze(-1))
        return dA, dm, dS


def mean_and_quadratic(A, m, S):
    """``(A m, Σ_m a_m (A S)_m)``: the mean and the quadratic form ``aᵀ S a`` of every row ``a`` of ``A``.

    :param torch.Tensor A: ``[..., M]``. :param torch.Tensor m: ``[M]``. :param torch.Tensor S: ``[M, M]``
        symmetric (e.g. a posterior covariance ``L Lᵀ``; the gradient with respect to ``S`` is the one of the
        symmetric form, ``Aᵀ diag(g) A``).
    :returns: ``(loc [...], q [...])``.

    Example::

        loc, q = mean_and_quadratic(a, m, L @ L.T)   # == (a @ m, ((a @ L) ** 2).sum(-1)) to rounding
    """
    if is_tracing():  # as in sum_squares
        AS = A @ S
        return A @ m, (A * AS).sum(-1)
    shape = A.shape[:-1]
    loc, q = _MeanAndQuadratic.apply(A.reshape(-1, A.shape[-1]), m, S)
    return loc.reshape(shape), q.reshape(shape)
