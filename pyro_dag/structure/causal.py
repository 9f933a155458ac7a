"""Linear causal effects of DAGs: ``E(B) = (I - B)^{-1}`` and the BGe posterior-mean weights of a DAG.

For a linear SEM ``x = x B + ε`` (row convention, ``B[i, j] ≠ 0`` only for ``i -> j``) the total causal effect of
``x_i`` on ``x_j`` is the sum over directed paths of the products of their weights,
``E_ij(B) = Σ_paths Π B = [(I - B)^{-1}]_ij`` (diagonal 1). The Bayesian-averaged causal effect of a posterior
``q`` over DAGs is ``BCE(i, j) = E_{G~q} E_{B~p(B | G, D)} [E_ij(B)]`` (Wang, Wicker & Kwiatkowska 2022, *Tractable
Uncertainty for Structure Learning*, ICML, §4.4, Prop. 4). Given ``G`` the columns of ``B`` are independent under
the BGe model (parameter modularity) and each path uses each column once, so the inner expectation is
``E_ij(E[B | G, D])``, with the BGe posterior mean of node ``j``'s weights
``E[b_j | pa_j, D] = R_{pa,pa}^{-1} R_{pa,j}`` (Kuipers, Moffa & Heckerman 2014; ``R`` the posterior scatter matrix
of :class:`~pyro_dag.structure.BGeSEM`).
"""
import numpy as np
import torch

from .mechanisms import BGeSEM
from .subsets import zeta_transform

__all__ = ["bge_mean_weights", "total_effects"]

MAX_TABLE_NODES = 16


def posterior_scatter(X):
    """``[p, p]`` float64 posterior scatter matrix ``R`` of :class:`~pyro_dag.structure.BGeSEM` for data ``X``."""
    X = torch.as_tensor(np.asarray(X, dtype=float) if not torch.is_tensor(X) else X, dtype=torch.float64)
    R, _ = BGeSEM(X.shape[1])._R(X)
    return R


def node_scatters(X, interventions=None):
    """``[p, p, p]`` float64: entry ``[j]`` the posterior scatter matrix of node ``j``'s rows, those where it is not
    intervened (``interventions``: ``[N, p]`` boolean mask or ``None``: every node sees all rows). Under perfect
    interventions node ``j``'s weights are learned from those rows only (Cooper & Yoo 1999)."""
    X = torch.as_tensor(np.asarray(X, dtype=float) if not torch.is_tensor(X) else X, dtype=torch.float64)
    p = X.shape[1]
    if interventions is None or not np.asarray(interventions).any():
        return posterior_scatter(X).expand(p, p, p)
    free = ~np.asarray(interventions, dtype=bool)
    out = torch.empty(p, p, p, dtype=torch.float64)
    cache = {}
    for j in range(p):
        key = free[:, j].tobytes()
        if key not in cache:
            cache[key] = posterior_scatter(X[torch.as_tensor(free[:, j])])
        out[j] = cache[key]
    return out


def bge_mean_weights(X, A, interventions=None):
    """BGe posterior-mean weights of DAGs.

    :param X: ``[N, p]`` data (as the posterior saw it).
    :param A: ``[..., p, p]`` 0/1 DAGs (``A[i, j] = 1``: ``i -> j``).
    :param interventions: ``[N, p]`` boolean mask of perfect interventions (node ``j``'s weights from the rows where
        it is not intervened), or ``None``.
    :returns: ``[..., p, p]`` float64 ``B`` with ``B[:, j] = R_{pa,pa}^{-1} R_{pa,j}`` on ``pa_j`` and 0 elsewhere
        (``R`` node ``j``'s posterior scatter matrix).
    """
    Rn = node_scatters(X, interventions)                               # [j, :, :]
    A = torch.as_tensor(A, dtype=torch.float64)
    a = A.transpose(-1, -2)                                            # [..., j, i]: parents of j
    M = a.unsqueeze(-1) * a.unsqueeze(-2) * Rn + torch.diag_embed(1 - a)
    idx = torch.arange(Rn.shape[0])
    rhs = a * Rn[idx, :, idx]                                          # [..., j, i] = a_ji R^(j)_ij
    b = torch.linalg.solve(M, rhs.unsqueeze(-1)).squeeze(-1) * a       # [..., j, i]
    return b.transpose(-1, -2)


def mean_weight_table(X, masks, interventions=None):
    """``[p, len(masks), p]``: entry ``[j, m, i]`` = the BGe posterior-mean weight of ``i -> j`` when node ``j``'s
    parent set is the bitmask ``masks[m]`` (0 outside the set; masks containing ``j`` give the weights of the set
    without ``j``, callers give them zero probability); ``interventions`` as :func:`node_scatters`."""
    Rn = node_scatters(X, interventions)
    p = Rn.shape[0]
    masks = np.asarray(masks, dtype=np.int64)
    bits = torch.as_tensor(((masks[:, None] >> np.arange(p)) & 1).astype(float))   # [n, p]
    out = torch.zeros(p, len(masks), p, dtype=torch.float64)
    for j in range(p):
        R = Rn[j]
        a = bits.clone()
        a[:, j] = 0.0
        M = a.unsqueeze(-1) * a.unsqueeze(-2) * R + torch.diag_embed(1 - a)
        out[j] = torch.linalg.solve(M, (a * R[:, j]).unsqueeze(-1)).squeeze(-1) * a
    return out.numpy()


def total_effects(B):
    """``[..., p, p]`` total causal effects ``(I - B)^{-1}`` of weight matrices ``B`` (row convention, diagonal 1)."""
    B = torch.as_tensor(B, dtype=torch.float64)
    eye = torch.eye(B.shape[-1], dtype=B.dtype)
    return torch.linalg.inv(eye - B)


def mean_weight_zeta(X, g, interventions=None):
    """Subset sums of the posterior-mean weights, for the exact column expectations
    ``E[b_j | G_j ⊆ S] = Σ_{G ⊆ S} e^{g_j(G)} E[b_j | G] / Σ_{G ⊆ S} e^{g_j(G)}``.

    :param X: ``[N, p]`` data. :param g: ``[p, 2^p]`` parent-set log weights (``-inf``: excluded).
    :param interventions: ``[N, p]`` boolean mask of perfect interventions, or ``None`` (:func:`node_scatters`).
    :returns: ``(zpos, zneg)``, each ``[p, p, 2^p]`` (``[j, i, S]``): ``log Σ_{G ⊆ S} e^{g_j(G)} max(±E[b_ij | G], 0)``
        (positive and negative parts kept apart so that log-space sums stay exact); memory ``16 p² 2^p`` bytes,
        hence ``p ≤ 16``.
    """
    p = g.shape[0]
    if p > MAX_TABLE_NODES:
        raise ValueError(f"exact causal-effect tables hold p² 2^p numbers; use them for p ≤ {MAX_TABLE_NODES}, "
                         f"got p = {p}")
    m = np.transpose(mean_weight_table(X, np.arange(1 << p), interventions), (0, 2, 1))   # [j, i, 2^p]
    with np.errstate(divide="ignore"):
        pos = g[:, None, :] + np.log(np.maximum(m, 0.0))
        neg = g[:, None, :] + np.log(np.maximum(-m, 0.0))
    return zeta_transform(pos, p), zeta_transform(neg, p)


def expected_columns(zpos, zneg, zeta, j, S):
    """``[n, p]`` ``E[b_j | G_j ⊆ S]`` for node indices ``j`` ``[n]`` and predecessor masks ``S`` ``[n]`` (rows
    with no admissible parent set, ``zeta = -inf``, are 0)."""
    z = zeta[j, S][:, None]
    with np.errstate(invalid="ignore"):
        col = np.exp(zpos[j, :, S] - z) - np.exp(zneg[j, :, S] - z)
    return np.where(np.isfinite(z), col, 0.0)
