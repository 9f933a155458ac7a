"""The inverse of a lower-triangular matrix with a backward of two matrix products.

The dense structured posterior ``q(V) = N(m, Λ⁻¹)``, ``Λ = L Lᵀ`` (Perlino, Hamelijnck, Johansen & Damoulas 2026,
"Deep Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645, Eqs. (6), (92)) forms ``L⁻¹`` at every
step, for the covariance ``Σ = L⁻ᵀ L⁻¹`` and the KL. Through ``torch.linalg.solve_triangular(L, I)`` autograd's
backward is a second triangular solve on transposed copies, a product and a mask; since ``d(L⁻¹) = -L⁻¹ dL L⁻¹``,

    ∂/∂L = -tril(L⁻ᵀ G L⁻ᵀ)

is two products with the saved ``L⁻¹`` (``G`` the incoming gradient; the upper triangle of ``L`` is structurally
zero and gets no gradient, as in torch's backward). The same values forwards; the gradient agrees with torch's to
rounding.
"""
import torch

from ..utils import is_tracing

__all__ = ["tril_inverse"]


class _TrilInverse(torch.autograd.Function):
    @staticmethod
    def forward(ctx, L):
        eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        inv = torch.linalg.solve_triangular(L, eye, upper=False)
        ctx.save_for_backward(inv)
        return inv

    @staticmethod
    def backward(ctx, grad):
        (inv,) = ctx.saved_tensors
        inv_t = inv.transpose(-1, -2)
        return -(inv_t @ grad @ inv_t).tril()


def tril_inverse(L):
    """``L⁻¹`` of a lower-triangular ``L`` ``[P, P]`` (non-zero diagonal), with a two-product backward.

    :param torch.Tensor L: ``[..., P, P]`` lower-triangular. :returns: ``[..., P, P]``, lower-triangular.
    """
    # a make_fx recording is differentiated by the compiler, and a torch.jit.trace cannot be saved with a Python
    # autograd.Function in it (Pyro's test_serialization): the plain solve
    if is_tracing():
        eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
        return torch.linalg.solve_triangular(L, eye, upper=False)
    return _TrilInverse.apply(L)
