"""Row-major off-diagonal vectorisation of ``[..., p, p]`` adjacency / logit matrices.

The edge-logit site of a structure model is a flat vector ``[..., p (p - 1)]``: entry ``k`` is the ordered pair
``(i, j)``, ``i != j``, in row-major order (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to
Bayesian Causal Discovery*, arXiv:2608.04930, §3.2.1). :func:`offdiag` and :func:`fill_offdiag` convert
between that vector and a ``[..., p, p]`` matrix with a given diagonal. Convention: ``A[i, j]`` is the edge
``i -> j``.
"""
import math

import torch

__all__ = ["fill_offdiag", "offdiag"]


def _offdiag_index(p, device):
    eye = torch.eye(p, dtype=torch.bool, device=device)
    return (~eye).reshape(-1).nonzero().squeeze(-1)


def offdiag(matrix):
    """Flatten the off-diagonal entries of ``[..., p, p]`` matrices row-major into ``[..., p (p - 1)]``.

    This is the layout of the edge-logit site: entry ``k`` is the ordered pair ``(i, j)``,
    ``i != j``, in row-major order. Inverse of :func:`fill_offdiag`.

    :param torch.Tensor matrix: ``[..., p, p]``.
    :returns: ``[..., p (p - 1)]``.
    """
    if not torch.is_tensor(matrix) or matrix.dim() < 2 or matrix.shape[-1] != matrix.shape[-2]:
        raise ValueError(
            f"offdiag expects a tensor of square matrices [..., p, p]; got shape "
            f"{tuple(matrix.shape) if torch.is_tensor(matrix) else type(matrix).__name__}"
        )
    p = matrix.shape[-1]
    flat = matrix.reshape(matrix.shape[:-2] + (p * p,))
    return flat.index_select(-1, _offdiag_index(p, matrix.device))


def fill_offdiag(vector, num_nodes=None, diagonal=0.0):
    """Scatter a row-major off-diagonal vector ``[..., p (p - 1)]`` into ``[..., p, p]`` matrices.

    Inverse of :func:`offdiag`; the diagonal is set to ``diagonal``.

    :param torch.Tensor vector: ``[..., p (p - 1)]``.
    :param int num_nodes: ``p``; inferred from the length when omitted.
    :param float diagonal: value written on the diagonal.
    :returns: ``[..., p, p]``.
    """
    d = vector.shape[-1]
    if num_nodes is None:
        num_nodes = int(round((1 + math.sqrt(1 + 4 * d)) / 2))
    p = num_nodes
    if p * (p - 1) != d:
        raise ValueError(
            f"an off-diagonal vector of {p} nodes has length p (p - 1) = {p * (p - 1)}; got length {d}. "
            "Pass the flat edge-logit vector of the right graph size."
        )
    out = vector.new_full(vector.shape[:-1] + (p * p,), diagonal)
    out = out.index_copy(-1, _offdiag_index(p, vector.device), vector)
    return out.reshape(vector.shape[:-1] + (p, p))
