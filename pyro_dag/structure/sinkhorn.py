"""Order masks of node potentials: the hard mask ``M(r)`` and its log-space Sinkhorn relaxation ``M_tau(r)``.

Potentials ``r`` ``[..., p]``: a higher potential is further upstream, and the edge ``i -> j`` is allowed iff
``r_i > r_j``, so every graph built from a potential vector is acyclic (Zinage 2026, *SVI-DAG: A Structured
Variational Inference Approach to Bayesian Causal Discovery*, arXiv:2608.04930, §3.2.1, Thm. B.3).

* :func:`hard_order_mask` -- ``M[i, j] = 1{r_i > r_j}``;
* :func:`log_sinkhorn` -- log-space Sinkhorn normalisation (with optional epsilon-scaling);
* :func:`soft_order_mask` -- ``M_tau(r)``, the relaxed "``i`` before ``j``" matrix from a Sinkhorn soft
  permutation of RMS-normalised potentials (§3.3);
* :func:`soft_order_mask_jacobian` -- ``M_tau`` and its exact Jacobian ``dM / dr`` by hand-written forward
  mode through the Sinkhorn iterates; :func:`soft_order_mask` uses it for its backward pass and
  :class:`~pyro_dag.structure.OrderMaskKernel` for the SVGD repulsion (§3.6).
"""
import numbers

import torch

__all__ = ["hard_order_mask", "log_sinkhorn", "soft_order_mask", "soft_order_mask_jacobian"]


def _check_potentials(r):
    if not torch.is_tensor(r) or r.dim() < 1 or not r.is_floating_point():
        raise ValueError("potentials must be a floating-point tensor [..., p]")
    if r.shape[-1] < 1:
        raise ValueError("potentials must have at least one node")


def hard_order_mask(potentials):
    r"""Hard order mask ``M[..., i, j] = 1{r_i > r_j}``: the edge ``i -> j`` is allowed (SVI-DAG §3.2.1).

    Equal to ``P(r) U P(r)^T`` with ``P(r)`` the permutation that sorts by descending potential and ``U`` the
    strictly upper-triangular matrix of ones (our orientation of the paper's ``P L P^T``). Ties allow neither
    direction, so the mask is the strict order of a preorder and any ``B * M`` is acyclic.

    :param torch.Tensor potentials: ``[..., p]``.
    :returns: ``[..., p, p]`` of zeros and ones, dtype of ``potentials``.
    """
    _check_potentials(potentials)
    return (potentials.unsqueeze(-1) > potentials.unsqueeze(-2)).to(potentials.dtype)


def log_sinkhorn(log_alpha, num_iters=100, eps_scaling=1.0, anneal_frac=0.6):
    r"""Log-space Sinkhorn normalisation of ``[..., n, n]`` log-potentials (SVI-DAG §3.3, Lemma B.4).

    Alternates ``num_iters`` row and column normalisations in log space (probability-space Sinkhorn underflows),
    written with dual vectors: ``log P = log_alpha + f 1^T + 1 g^T`` with
    ``f = -logsumexp(log_alpha + g, -1)``, ``g = -logsumexp(log_alpha + f, -2)``. The last step normalises columns,
    so columns of ``exp(result)`` sum to one exactly and rows approximately.

    ``eps_scaling > 1`` runs the same iterations with the entropic temperature annealed geometrically from
    ``eps_scaling`` to 1 over the first ``anneal_frac`` of the sweeps (epsilon-scaling, Schmitzer 2019). The fixed
    point is unchanged (the entropic assignment of Lemma B.4) but peaked problems (small ``tau``) converge in far
    fewer sweeps. ``eps_scaling=1`` is the plain algorithm of the paper.

    :param torch.Tensor log_alpha: ``[..., n, n]``.
    :param int num_iters: number of (row, column) sweeps ``K_S``.
    :param float eps_scaling: initial temperature multiplier (``>= 1``).
    :param float anneal_frac: fraction of the sweeps spent annealing.
    :returns: ``[..., n, n]`` log of an (approximately) doubly-stochastic matrix.
    """
    if log_alpha.dim() < 2 or log_alpha.shape[-1] != log_alpha.shape[-2]:
        raise ValueError(f"log_sinkhorn expects square matrices [..., n, n]; got {tuple(log_alpha.shape)}")
    if not isinstance(num_iters, numbers.Integral) or num_iters < 1:
        raise ValueError(f"num_iters must be a positive integer; got {num_iters!r}")
    if not eps_scaling >= 1:
        raise ValueError(f"eps_scaling must be >= 1; got {eps_scaling!r}")
    n_anneal = max(1, int(anneal_frac * num_iters)) if eps_scaling > 1 else 0
    g = torch.zeros_like(log_alpha[..., :1, :])
    f = None
    for k in range(num_iters):
        t = eps_scaling ** (1.0 - k / (n_anneal - 1)) if k < n_anneal and n_anneal > 1 else 1.0
        if t == 1.0:
            f = -torch.logsumexp(log_alpha + g, -1, keepdim=True)
            g = -torch.logsumexp(log_alpha + f, -2, keepdim=True)
        else:
            f = -t * torch.logsumexp((log_alpha + g) / t, -1, keepdim=True)
            g = -t * torch.logsumexp((log_alpha + f) / t, -2, keepdim=True)
    return log_alpha + f + g


def _rms_normalises(scale_normalize, p):
    # With p = 2 the centred, RMS-normalised potentials are +-1 whatever r is: the relaxation would be constant in r
    # and carry no gradient to the order (|dM/dr| ~ 1e-5), so two-node problems skip the normalisation.
    return scale_normalize and p > 2


def _normalise_potentials(potentials, scale_normalize, eps=1e-6):
    rc = potentials - potentials.mean(-1, keepdim=True)
    if _rms_normalises(scale_normalize, potentials.shape[-1]):
        rc = rc * torch.rsqrt(rc.pow(2).mean(-1, keepdim=True) + eps)
    return rc


def soft_order_mask(potentials, temperature=0.1, num_iters=100, scale_normalize=True, return_perm=False,
                    eps_scaling=True, backward="jacobian"):
    r"""Sinkhorn relaxation ``M_tau(r)`` of the order mask (SVI-DAG §3.3).

    ``S_0 = r o^T`` with ``o = (p, p - 1, ..., 1)``, ``P_tau = Sinkhorn(exp(S_0 / tau))`` (log space, ``num_iters``
    sweeps), and ``M_tau[i, j] = sum_{k < l} P_tau[i, k] P_tau[j, l]``, the relaxed probability that ``i`` comes
    before ``j``. The potentials are centred and, by default, scaled to unit RMS so that the effective
    temperature does not drift with the spread of ``r``. ``M_tau -> hard_order_mask(r)`` as
    ``tau -> 0`` for distinct potentials. The result has a non-zero diagonal and is generally "cyclic"; multiply
    by ``1 - I`` before using it as an adjacency relaxation. After the Sinkhorn sweeps the rows of ``P_tau`` are
    normalised once more, so that every node has a distribution over positions and ``M_tau`` lies in ``[0, 1]``
    even before convergence.

    :param torch.Tensor potentials: ``[..., p]``.
    :param float temperature: ``tau > 0``.
    :param int num_iters: Sinkhorn sweeps ``K_S``.
    :param bool scale_normalize: RMS-normalise the centred potentials (not for ``p = 2``, where it would leave
        ``M_tau`` constant in ``r``).
    :param bool return_perm: also return the soft permutation ``P_tau`` ``[..., p, p]`` (rows = nodes,
        columns = positions, position 0 first).
    :param bool eps_scaling: anneal the Sinkhorn temperature from ``p / tau`` (see :func:`log_sinkhorn`); same limit,
        much faster convergence at small ``tau``.
    :param str backward: how gradients reach the potentials: ``"jacobian"`` (default; the exact Jacobian of the
        iterates from :func:`soft_order_mask_jacobian`, computed in the forward pass and shared with the SVGD kernel
        evaluated at the same potentials) or ``"autograd"`` (reverse mode through every Sinkhorn sweep). Both give
        the same gradient.
    :returns: ``[..., p, p]`` (and ``P_tau``).
    """
    _check_potentials(potentials)
    if not isinstance(temperature, numbers.Real) or temperature <= 0:
        raise ValueError(f"temperature must be a positive number; got {temperature!r}")
    if backward not in ("jacobian", "autograd"):
        raise ValueError(f"backward must be 'jacobian' or 'autograd'; got {backward!r}")
    if backward == "jacobian" and not return_perm and potentials.requires_grad and torch.is_grad_enabled():
        return _SoftOrderMaskFn.apply(potentials, float(temperature), int(num_iters), bool(scale_normalize),
                                      bool(eps_scaling))
    p = potentials.shape[-1]
    rc = _normalise_potentials(potentials, scale_normalize)
    o = torch.arange(p, 0, -1, dtype=potentials.dtype, device=potentials.device)
    eps = max(1.0, p / temperature) if eps_scaling else 1.0
    logP = log_sinkhorn(rc.unsqueeze(-1) * o / temperature, num_iters, eps_scaling=eps)
    # a final row normalisation: every node gets a distribution over positions, so M lies in [0, 1]
    logP = logP - torch.logsumexp(logP, -1, keepdim=True)
    P = logP.exp()
    # (P U)[i, l] = sum_{k < l} P[i, k]: an exclusive cumulative sum over positions.
    before = torch.cumsum(P, -1) - P
    M = before @ P.transpose(-1, -2)
    # M[i, j] = sum_l (sum_{k<l} P[i,k]) P[j,l] = P(pos(i) < pos(j)).
    return (M, P) if return_perm else M


def soft_order_mask_jacobian(potentials, temperature=0.1, num_iters=100, scale_normalize=True, eps_scaling=True):
    r""":func:`soft_order_mask` and its Jacobian with respect to the potentials, by hand-written forward mode.

    The Sinkhorn iterations are differentiated exactly (the iterates, not their limit): with row / column soft-max
    matrices ``S``, ``T`` of each sweep, ``df = -sum_k S_ik (dC_ik + dg_k)`` and ``dg = -sum_i T_ik (dC_ik + df_i)``,
    for all ``p`` tangent directions at once. This is the ``J_psi`` of the SVGD repulsion (SVI-DAG §3.6), several
    times cheaper than ``torch.func.jacfwd`` through ``logsumexp``.

    :param torch.Tensor potentials: ``[..., p]``.
    :returns: ``(M, J)`` with ``M`` ``[..., p, p]`` and ``J[..., i, j, d] = dM[i, j] / dr_d`` ``[..., p, p, p]``.
    """
    _check_potentials(potentials)
    r = potentials.detach()
    p = r.shape[-1]
    eye = torch.eye(p, dtype=r.dtype, device=r.device)
    centre = eye - 1.0 / p
    rc = r - r.mean(-1, keepdim=True)
    if _rms_normalises(scale_normalize, p):
        s = (rc.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()  # same eps as _normalise_potentials
        rn = rc / s
        # d rn / d r = (I / s - rc rc^T / (p s^3)) (I - 11^T / p)
        jn = (eye / s.unsqueeze(-1) - rc.unsqueeze(-1) * rc.unsqueeze(-2) / (p * s.unsqueeze(-1) ** 3)) @ centre
    else:
        rn = rc
        jn = centre.expand(r.shape[:-1] + (p, p))
    o = torch.arange(p, 0, -1, dtype=r.dtype, device=r.device)
    C = rn.unsqueeze(-1) * o / temperature  # [..., n, n]
    # tangents: dC[..., d, i, k] = jn[..., i, d] o_k / tau
    dC = jn.transpose(-1, -2).unsqueeze(-1) * o / temperature  # [..., d, n, n]
    eps = max(1.0, p / temperature) if eps_scaling else 1.0
    n_anneal = max(1, int(0.6 * num_iters)) if eps > 1 else 0
    g = torch.zeros_like(C[..., :1, :])
    dg = torch.zeros_like(dC[..., :1, :])
    for k in range(num_iters):
        t = eps ** (1.0 - k / (n_anneal - 1)) if k < n_anneal and n_anneal > 1 else 1.0
        A = (C + g) / t
        lse = torch.logsumexp(A, -1, keepdim=True)
        f = -t * lse
        S = torch.exp(A - lse).unsqueeze(-3)
        df = -(S * (dC + dg)).sum(-1, keepdim=True)
        B = (C + f) / t
        lse2 = torch.logsumexp(B, -2, keepdim=True)
        g = -t * lse2
        T = torch.exp(B - lse2).unsqueeze(-3)
        dg = -(T * (dC + df)).sum(-2, keepdim=True)
    logP = C + f + g
    lse = torch.logsumexp(logP, -1, keepdim=True)  # final row normalisation (as in soft_order_mask)
    P = torch.exp(logP - lse)
    dlogP = dC + df + dg
    dlogP = dlogP - (P.unsqueeze(-3) * dlogP).sum(-1, keepdim=True)
    dP = P.unsqueeze(-3) * dlogP  # [..., d, n, n]
    before = torch.cumsum(P, -1) - P
    dbefore = torch.cumsum(dP, -1) - dP
    M = before @ P.transpose(-1, -2)
    dM = dbefore @ P.transpose(-1, -2).unsqueeze(-3) + before.unsqueeze(-3) @ dP.transpose(-1, -2)
    return M, dM.movedim(-3, -1)


_JACOBIAN_MEMO = {}


def _cached_mask_and_jacobian(potentials, temperature, num_iters, scale_normalize, eps_scaling):
    """``soft_order_mask_jacobian`` with a one-entry memo keyed on the exact potential values and settings.

    One OrderSVGD step needs ``(M, J)`` at the same particles twice (the guide's straight-through relaxation and the
    kernel); the memo computes them once.
    """
    p = potentials.shape[-1]
    flat = potentials.detach().reshape(-1, p)
    flat = flat - flat.mean(-1, keepdim=True)  # M and dM/dr are shift invariant: key on centred potentials
    key = (float(temperature), int(num_iters), bool(scale_normalize), bool(eps_scaling), flat.dtype, flat.device,
           tuple(flat.shape))
    hit = _JACOBIAN_MEMO.get("key") == key and torch.equal(_JACOBIAN_MEMO["r"], flat)
    if not hit:
        M, J = soft_order_mask_jacobian(flat, temperature, num_iters, scale_normalize, eps_scaling)
        _JACOBIAN_MEMO.clear()
        _JACOBIAN_MEMO.update(key=key, r=flat.clone(), M=M, J=J)
    M, J = _JACOBIAN_MEMO["M"], _JACOBIAN_MEMO["J"]
    batch = potentials.shape[:-1]
    return M.reshape(batch + (p, p)), J.reshape(batch + (p, p, p))


class _SoftOrderMaskFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, potentials, temperature, num_iters, scale_normalize, eps_scaling):
        M, J = _cached_mask_and_jacobian(potentials, temperature, num_iters, scale_normalize, eps_scaling)
        ctx.save_for_backward(J)
        return M.clone()

    @staticmethod
    def backward(ctx, grad_M):
        (J,) = ctx.saved_tensors
        return (grad_M.unsqueeze(-1) * J).sum((-2, -3)), None, None, None, None
