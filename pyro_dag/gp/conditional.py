"""The whitened sparse-GP conditional of one DAG node (digest-000 §2.1, Eq. 80).

With whitened inducing outputs ``U_w = L_w V_w``, ``L_w = chol(K_w(Z_w, Z_w) + jitter)``, the pointwise
conditional of case ``b`` is ``F_{w,b} | V_w ~ N(a_bᵀ V_w, r_b)`` with

    a_b = L_w⁻¹ K_w(Z_w, x_b),     r_b = K_w(x_b, x_b) - a_bᵀ a_b.
"""
import torch

__all__ = ["NotPositiveDefiniteError", "cholesky_with_jitter", "whitened_conditional", "default_jitter"]


class NotPositiveDefiniteError(RuntimeError):
    """A Gram matrix stayed non-positive-definite after the whole jitter ladder."""


def default_jitter(dtype):
    """Relative jitter of the first rung of the ladder: 1e-8 in float64, 1e-5 in float32."""
    return 1e-8 if dtype == torch.float64 else 1e-5


def cholesky_with_jitter(K, node="?", jitter=None, max_tries=4):
    """Cholesky factor of ``K + ε I`` with a bounded jitter ladder.

    ``ε`` starts at ``jitter × mean(diag K)`` and grows ×10 per rung for ``max_tries`` rungs.

    :param torch.Tensor K: ``[..., M, M]`` symmetric matrix.
    :param str node: the node it belongs to (for the error message).
    :raises NotPositiveDefiniteError: naming the node and the fix.
    """
    rel = default_jitter(K.dtype) if jitter is None else jitter
    scale = K.diagonal(dim1=-2, dim2=-1).mean().detach().clamp_min(torch.finfo(K.dtype).tiny)
    eye = torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
    eps = rel
    for _ in range(max_tries):
        L, info = torch.linalg.cholesky_ex(K + (eps * scale) * eye)
        if not bool((info > 0).any()):
            return L
        eps *= 10
    raise NotPositiveDefiniteError(
        f"the inducing Gram matrix K(Z, Z) of node {node!r} is not positive definite even with jitter "
        f"{eps / 10:.1e}×mean(diag); its inducing inputs are probably duplicated or the kernel is degenerate "
        "on them (e.g. SumInput on a symmetric grid): spread the inducing inputs, or increase the jitter "
        "(DAGDGP(..., jitter=...)) or add a White kernel")


def whitened_conditional(kernel, Z, L, X):
    """Interpolation vectors and residual variances of the whitened conditional (digest-000 Eq. 80).

    :param kernel: the node's kernel. :param torch.Tensor Z: ``[M, D]`` inducing inputs.
    :param torch.Tensor L: ``[M, M]`` Cholesky factor of ``K(Z, Z)``.
    :param torch.Tensor X: ``[..., B, D]`` node inputs (concatenated parent values).
    :returns: ``(a, r)`` with ``a`` of shape ``[..., B, M]`` and ``r`` of shape ``[..., B]`` (clamped at 0).
    """
    Kxz = kernel(X, Z)  # [..., B, M]
    # aᵀ = K_xz L⁻ᵀ: a right-sided triangular solve keeps the [..., B, M] layout (no transposed copies).
    a = torch.linalg.solve_triangular(L.transpose(-1, -2), Kxz, upper=True, left=False)
    r = (kernel(X, diag=True) - a.pow(2).sum(-1)).clamp_min(0)
    return a, r
