"""The predictive mean and variance of a one-output sparse-GP node under a Gaussian over its whitened inducing
outputs, in one op with a hand-written backward.

With ``K(Z, Z) + jitter = L Lᵀ`` (``L`` triangular), ``a_n = L⁻¹ K(Z, x_n)`` and ``q(V) = N(m, S)``
(Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, Eqs. (80) and (93); Hensman, Matthews & Ghahramani 2015, "Scalable Variational Gaussian Process
Classification", Eq. (7), whitened):

    μ_n = a_nᵀ m,     σ²_n = r_n + a_nᵀ S a_n,     r_n = max(k(x_n, x_n) - a_nᵀ a_n, tiny).

The forward computes exactly what :func:`~pyro_dag.gp.conditional.whitened_conditional` followed by
:func:`~pyro_dag.ops.quadratic.mean_and_quadratic` computes. The backward needs, besides the solve's
``∂/∂K_zx = L⁻ᵀ g_Aᵀ`` (``g_A`` the gradient of the rows ``a``), the factor's ``∂/∂L = -tri(L⁻ᵀ g_Aᵀ A)``; composed
op by op that is an ``[M, N] x [N, M]`` product over all ``N`` (sample, case) rows. Here
``g_A = 2 diag(g_σ) A S - 2 diag(g_r) A + g_μ mᵀ``, so

    g_Aᵀ A = 2 Sᵀ W - 2 W_r + m (Aᵀ g_μ)ᵀ,    W = Aᵀ diag(g_σ) A  (= ∂/∂S),

and ``W`` is needed for ``∂/∂S`` anyway: the ``[M, N] x [N, M]`` product becomes ``[M, M]`` work (``W_r = W``
except on the rows where the floor of ``r`` is active). The two association orders agree to rounding; where
``K(Z, Z)`` is ill-conditioned (many inducing points in few dimensions) rounding in ``∂/∂L`` is amplified by its
condition number in the gradients of the inducing inputs and kernel hyperparameters, as it is between any two
evaluation orders of the same formula (e.g. ~1e-6 relative at M = 64 on a 1-D input, against 1e-12 at M = 12).
"""
import torch

from ..utils import is_tracing

__all__ = ["whitened_moments"]


class _WhitenedMoments(torch.autograd.Function):
    @staticmethod
    def forward(ctx, Kxz, L, kdiag, m, S, upper):
        # aᵀ = L⁻¹ K_zx with the N rows as the columns of one [M, N] right-hand side (one BLAS call)
        A = torch.linalg.solve_triangular(L, Kxz.transpose(-1, -2), upper=upper).transpose(-1, -2)
        tiny = torch.finfo(A.dtype).tiny
        r = kdiag - (A * A).sum(-1)
        kept = r >= tiny                                   # where the floor is not active (clamp_min's mask)
        AS = A @ S
        var = (A * AS).sum(-1) + r.clamp_min(tiny)
        loc = A @ m
        ctx.upper = upper
        ctx.save_for_backward(A, L, kept, m, S, AS)
        return loc, var

    @staticmethod
    def backward(ctx, g_loc, g_var):
        A, L, kept, m, S, AS = ctx.saved_tensors
        g_r = torch.where(kept, g_var, 0.0)
        # g_A = 2 diag(g_σ) A S + g_μ mᵀ - 2 diag(g_r) A, in this order (as autograd sums the composition's terms)
        gA = AS * (2 * g_var).unsqueeze(-1)
        gA.addr_(g_loc, m)
        gA.addcmul_(A, g_r.unsqueeze(-1), value=-2)
        W = A.T @ (A * g_var.unsqueeze(-1))                 # Aᵀ diag(g_σ) A
        dm = A.T @ g_loc
        dK = dL = None
        Lt = L.transpose(-1, -2)
        if ctx.needs_input_grad[0]:
            dK = torch.linalg.solve_triangular(Lt, gA.transpose(-1, -2), upper=not ctx.upper).transpose(-1, -2)
        if ctx.needs_input_grad[1]:
            W_r = W
            if not bool(kept.all()):                        # rows at the floor carry no -2 g_r a term
                Af = A[~kept]
                W_r = W - Af.T @ (Af * g_var[~kept].unsqueeze(-1))
            G = 2 * (S.T @ W) - 2 * W_r + torch.outer(m, dm)   # g_Aᵀ A
            dL = -torch.linalg.solve_triangular(Lt, G, upper=not ctx.upper)
            dL = dL.triu() if ctx.upper else dL.tril()
        return dK, dL, g_r, dm, W, None


def whitened_moments(Kxz, L, kdiag, m, S, upper=False):
    """``(μ, σ²)`` of a one-output node: ``μ = A m``, ``σ² = max(k_xx - Σ a², tiny) + Σ_m a_m (A S)_m`` with
    ``A = K_xz L⁻ᵀ``.

    :param torch.Tensor Kxz: ``[N, M]`` cross-covariances (all (sample, case) rows flattened).
    :param torch.Tensor L: ``[M, M]`` triangular factor of ``K(Z, Z)``; ``upper``: whether it is upper-triangular.
    :param torch.Tensor kdiag: ``[N]`` prior variances ``k(x, x)``.
    :param torch.Tensor m: ``[M]`` mean and :param torch.Tensor S: ``[M, M]`` symmetric covariance of the
        whitened inducing outputs.
    :returns: ``(loc [N], var [N])``.
    """
    if is_tracing():  # a make_fx recording (CompiledNUTS) is differentiated by the compiler: the composition
        A = torch.linalg.solve_triangular(L, Kxz.transpose(-1, -2), upper=upper).transpose(-1, -2)
        r = (kdiag - (A * A).sum(-1)).clamp_min(torch.finfo(A.dtype).tiny)
        return A @ m, (A * (A @ S)).sum(-1) + r
    return _WhitenedMoments.apply(Kxz, L, kdiag, m, S, upper)
