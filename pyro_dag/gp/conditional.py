"""The whitened sparse-GP conditional of one DAG node (Perlino et al. 2026, arXiv:2607.09645, Eq. (80), App. E.3).

With whitened inducing outputs ``U_w = R_w V_w``, ``K_w(Z_w, Z_w) + jitter = R_w R_wᵀ``, the pointwise
conditional of case ``b`` is ``F_{w,b} | V_w ~ N(a_bᵀ V_w, r_b)`` with

    a_b = R_w⁻¹ K_w(Z_w, x_b),     r_b = K_w(x_b, x_b) - a_bᵀ a_b.

:class:`~pyro_dag.DAGDGP` whitens with the *upper-triangular* ("reverse") Cholesky factor ``R_w``
(:func:`cholesky_with_jitter` with ``upper=True``). Any square root gives the same model; the choice
matters for the structured guide. Cholesky whitening puts the smooth, large-scale part of a GP (e.g. a
constant shift of the whole function) on the first whitened coordinate when the factor is lower-triangular
and on the last one when it is upper-triangular. The structured guide's precision factor is
lower-triangular, i.e. a Gaussian Bayes net in which each coordinate regresses on the *later* ones, so a
posterior with large variance along the smooth direction needs only O(1) regression coefficients when that
direction sits on the last coordinate, and coefficients of the size of the whitening ratios (10³ and more)
when it sits on the first.
"""
import torch
from pyro.ops.integrator import register_exception_handler

from ..ops.predictive import whitened_moments
from ..ops.quadratic import sum_squares
from ..utils import is_fx_tracing, is_tracing

__all__ = ["NotPositiveDefiniteError", "NonFiniteGramError", "cholesky_with_jitter", "whitened_conditional",
           "whitened_predictive", "default_jitter"]


class NotPositiveDefiniteError(RuntimeError):
    """A Gram matrix stayed non-positive-definite after the whole jitter ladder."""


class NonFiniteGramError(NotPositiveDefiniteError):
    """A Gram matrix holds NaN or inf (so no jitter can make it positive definite); the message names the node."""


def _is_gram_failure(exception):
    return isinstance(exception, NotPositiveDefiniteError)


# Under HMC/NUTS a leapfrog step can reach hyperparameters (e.g. exp of a large unconstrained length-scale) whose
# Gram matrix cannot be factorised. Pyro counts a potential that fails with a registered numerical error as a
# divergent step (NaN energy) and goes on, as it does for torch's own singular-matrix errors; without this the
# error would stop the chain.
register_exception_handler("pyro_dag_gram", _is_gram_failure, warn_on_overwrite=False)


def _any_failed(info):
    """Whether any factorisation failed (``info > 0``), read outside a ``make_fx`` recording, which cannot record
    the ``bool()`` (the rung found is then frozen in the recorded graph, as under :func:`torch.jit.trace`)."""
    if not is_fx_tracing():  # eager, or torch.jit.trace (which reads the value and freezes the branch)
        return bool((info > 0).any())
    from torch.fx.experimental.proxy_tensor import disable_proxy_modes_tracing

    with disable_proxy_modes_tracing():
        return bool((info > 0).any())


def default_jitter(dtype):
    """Relative jitter of the first rung of the ladder: 1e-8 in float64, 1e-5 in float32."""
    return 1e-8 if dtype == torch.float64 else 1e-5


def cholesky_with_jitter(K, node="?", jitter=None, max_tries=4, upper=False, per_matrix=False):
    """Cholesky factor of ``K + ε I`` with a bounded jitter ladder.

    ``ε`` starts at ``jitter × mean(diag K)`` and grows ×10 per rung for ``max_tries`` rungs.

    :param torch.Tensor K: ``[..., M, M]`` symmetric matrix.
    :param str node: the node it belongs to (for the error message).
    :param bool upper: return the upper-triangular ``R`` with ``K + εI = R Rᵀ`` (the "reverse" Cholesky
        factor, ``R = J chol(J K J) J`` with ``J`` the reversal permutation) instead of the lower one.
    :param bool per_matrix: for a batch of matrices ``[*batch, M, M]``, give each matrix its own ``mean(diag)``
        and its own rung, so that each factor is the one :func:`cholesky_with_jitter` returns for that matrix
        alone (:class:`~pyro_dag.DAGDGP` does, for a batch of hyperparameter draws); by default one ``ε`` for the
        whole batch.
    :raises NotPositiveDefiniteError: naming the node and the fix.
    """
    if upper:
        return cholesky_with_jitter(K.flip(-1, -2), node, jitter, max_tries, per_matrix=per_matrix).flip(-1, -2)
    if per_matrix and K.dim() > 2:
        return _cholesky_per_matrix(K, node, jitter, max_tries)
    rel = default_jitter(K.dtype) if jitter is None else jitter
    scale = K.diagonal(dim1=-2, dim2=-1).mean().detach().clamp_min(torch.finfo(K.dtype).tiny)
    eye = torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
    eps = rel
    for _ in range(max_tries):
        L, info = torch.linalg.cholesky_ex(K + (eps * scale) * eye)
        if not _any_failed(info):
            if is_tracing():
                # A trace (pyro_dag.infer.TracedNUTS) replays this rung with new values and drops the check
                # on info, so the replayed factor must raise where this one would have moved up the ladder: a
                # failure then makes the NUTS step divergent (Pyro's singular-matrix handler) instead of
                # returning the partial factor of a matrix that is not positive definite.
                return torch.linalg.cholesky(K + (eps * scale) * eye)
            return L
        eps *= 10
    _raise_gram_failure(K, node, eps / 10)


def _cholesky_per_matrix(K, node, jitter, max_tries):
    """:func:`cholesky_with_jitter` of every matrix of ``K`` ``[*batch, M, M]`` on its own: ``ε`` per matrix, the
    matrices that fail move up the ladder alone. ``[*batch, M, M]`` lower factors."""
    rel = default_jitter(K.dtype) if jitter is None else jitter
    scale = K.diagonal(dim1=-2, dim2=-1).mean(-1).detach().clamp_min(torch.finfo(K.dtype).tiny)  # [*batch]
    eye = torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
    rung = torch.zeros(K.shape[:-2], dtype=K.dtype, device=K.device)  # log10 of ε / rel, per matrix
    for _ in range(max_tries):
        eps = rel * torch.pow(10.0, rung) * scale
        L, info = torch.linalg.cholesky_ex(K + eps[..., None, None] * eye)
        failed = info > 0
        if not _any_failed(info):
            if is_tracing():  # as in cholesky_with_jitter: a replayed factor must raise where this one moved up
                return torch.linalg.cholesky(K + eps[..., None, None] * eye)
            return L
        rung = rung + failed.to(K.dtype)
    _raise_gram_failure(K, node, rel * 10.0 ** (max_tries - 1))


def _raise_gram_failure(K, node, eps):
    """Raise the error of a Gram matrix that stayed non-positive-definite at the relative jitter ``eps``."""
    if not bool(torch.isfinite(K).all()):
        raise NonFiniteGramError(
            f"the inducing Gram matrix K(Z, Z) of node {node!r} contains NaN or inf: its inducing inputs or kernel "
            "hyperparameters are not finite (NaN in the inputs or parents of the node, or a diverged training "
            "step: lower the learning rate)")
    raise NotPositiveDefiniteError(
        f"the inducing Gram matrix K(Z, Z) of node {node!r} is not positive definite even with jitter "
        f"{eps:.1e}×mean(diag); its inducing inputs are probably duplicated or the kernel is degenerate "
        "on them (e.g. SumInput on a symmetric grid): spread the inducing inputs, or increase the jitter "
        "(DAGDGP(..., jitter=...)) or add a White kernel")


def whitened_conditional(kernel, Z, L, X, upper=False, inverse=None):
    """Interpolation vectors and residual variances of the whitened conditional (Perlino et al. 2026, Eq. (80)).

    :param kernel: the node's kernel. :param torch.Tensor Z: ``[M, D]`` inducing inputs.
    :param torch.Tensor L: ``[M, M]`` triangular factor with ``K(Z, Z) = L Lᵀ``, or ``[*batch, M, M]``, one per
        draw of the kernel's hyperparameters (:meth:`pyro_dag.kernels.Kernel.hyper`); ``a`` and ``r`` then have
        the batch dims of ``X`` broadcast with ``batch``.
    :param bool upper: whether ``L`` is upper-triangular.
    :param torch.Tensor X: ``[..., B, D]`` node inputs (concatenated parent values).
    :param torch.Tensor inverse: optional ``[M, M]`` ``L⁻ᵀ``, precomputed when ``L`` is reused for many
        evaluations (:meth:`pyro_dag.DAGDGP.fixed_kernels`): ``a`` is then one matrix product, cheaper than a
        triangular solve forward and backward, and comes out contiguous (it agrees with the solve to about
        1e-10 relative in float64 on an ill-conditioned ``K(Z, Z)``, which is why it is not the default).
    :returns: ``(a, r)`` with ``a`` of shape ``[..., B, M]`` and ``r`` of shape ``[..., B]`` (floored at the
        smallest positive float).
    """
    Kxz = kernel(X, Z)  # [..., B, M]
    if inverse is not None:
        a = Kxz @ inverse
    elif L.dim() == 2:
        # One factor for all (sample, case) rows: solve them as the columns of one [M, S B] matrix,
        # aᵀ = L⁻¹ K_zx, one BLAS call forwards and one backwards, instead of a batched right-sided solve that
        # broadcasts L to every sample and copies its operands (same numbers to rounding; a is a transposed view).
        flat = Kxz.reshape(-1, Kxz.shape[-1])
        a = torch.linalg.solve_triangular(L, flat.transpose(-1, -2), upper=upper).transpose(-1, -2).reshape(Kxz.shape)
    else:
        # A batch of factors (one per hyperparameter draw): the same left-sided solve as above, per factor, so that
        # each draw's a is the one it gets alone to rounding, bit for bit where BLAS allows (r = K(x, x) - aᵀa
        # is a difference of two O(1) numbers down to the jitter, and amplifies any other rounding of a).
        a = torch.linalg.solve_triangular(L, Kxz.transpose(-1, -2), upper=upper).transpose(-1, -2)
    # Floor at the smallest positive number: sqrt(r) then has a finite gradient even where r underflows.
    # sum_squares: (a * a).sum(-1) with a one-pass backward (autograd's takes three [..., B, M] passes).
    r = (kernel(X, diag=True) - sum_squares(a)).clamp_min(torch.finfo(a.dtype).tiny)
    return a, r


def whitened_predictive(kernel, Z, L, X, m, S, upper=False):
    """Predictive mean and variance of a one-output node under ``q(V) = N(m, S)`` over its whitened inducing outputs
    (Perlino et al. 2026, Eqs. (80) and (93)): ``μ = aᵀ m``, ``σ² = r + aᵀ S a`` with ``(a, r)`` of
    :func:`whitened_conditional`, in one op whose backward skips an ``[M, S B] x [S B, M]`` product
    (:func:`pyro_dag.ops.predictive.whitened_moments`).

    :param kernel: the node's kernel. :param torch.Tensor Z: ``[M, D]`` inducing inputs.
    :param torch.Tensor L: ``[M, M]`` triangular factor with ``K(Z, Z) = L Lᵀ`` (one factor: for a batch of factors
        use :func:`whitened_conditional`). :param bool upper: whether ``L`` is upper-triangular.
    :param torch.Tensor X: ``[..., B, D]`` node inputs. :param torch.Tensor m: ``[M]``. :param torch.Tensor S:
        ``[M, M]`` symmetric.
    :returns: ``(loc [..., B], var [..., B])``.
    """
    Kxz = kernel(X, Z)  # [..., B, M]
    batch = Kxz.shape[:-1]
    kdiag = kernel(X, diag=True).expand(batch).reshape(-1)
    loc, var = whitened_moments(Kxz.reshape(-1, Kxz.shape[-1]), L, kdiag, m, S, upper)
    return loc.reshape(batch), var.reshape(batch)
