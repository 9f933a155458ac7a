"""Local scores of the collapsed likelihoods: ``f_j(G) = log p(x_j | x_G)`` for parent-set bitmasks ``G``.

Parent sets are integer bitmasks (bit ``i`` set: node ``i`` is a parent). :func:`local_scores` scores every parent
set of every node; :class:`~pyro_dag.structure.OrderScorer` and :func:`~pyro_dag.structure.exact_posterior`
build on it.
"""
import copy

import numpy as np
import torch

from .mechanisms import BGeSEM, LinearGaussianSEM
from .subsets import mask_bits

__all__ = ["local_scores"]


def _edge_prior_logs(q):
    """``(log(1 - q) [i, j], log(q / (1 - q)) [j, i])`` of the edge probabilities given the order, both with a zero
    diagonal (the factors of ``β_j``; the clip keeps ``q`` of 0 or 1 finite)."""
    log_q = np.log(np.clip(q, 1e-300, 1.0))
    log_1mq = np.log(np.clip(1.0 - q, 1e-300, 1.0))
    np.fill_diagonal(log_1mq, 0.0)
    odds = (log_q - log_1mq).T
    np.fill_diagonal(odds, 0.0)
    return log_1mq, odds


def _node_score_fn(mechanism, X):
    """``A [c, p, p] -> [c, p]`` per-node log evidence of a collapsed mechanism, scored in float64 on a copy (the
    caller's module keeps its dtype)."""
    N = X.shape[0]
    if isinstance(mechanism, LinearGaussianSEM):
        if not mechanism.marginalize:
            raise ValueError("local_scores needs a collapsed likelihood: LinearGaussianSEM(marginalize=True)")
        mech = copy.deepcopy(mechanism).double()
        gram = X.T @ X
        return lambda A: mech.node_evidence(gram, N, A)
    if isinstance(mechanism, BGeSEM):
        mech = copy.deepcopy(mechanism).double()
        return lambda A: mech.node_scores(X, A)
    raise TypeError(f"exact posteriors need a collapsed likelihood (LinearGaussianSEM(marginalize=True) or "
                    f"BGeSEM); got {type(mechanism).__name__}")


def _scores_for_masks(mechanism, X, masks):
    """``[p, len(masks)]`` log evidence ``f_j(mask)`` of each parent-set mask for every node (``-inf`` where the
    mask contains the node), in chunks that keep the mechanism's ``[chunk, p, p, p]`` temporaries small."""
    X = X.to(torch.float64)
    p = X.shape[1]
    score = _node_score_fn(mechanism, X)
    bits = mask_bits(masks, p)                                          # [n, p]
    eye = torch.eye(p, dtype=torch.float64)
    chunk = int(max(64, min(4096, 2 ** 25 // p ** 3)))
    out = np.empty((p, len(masks)))
    with torch.no_grad():
        for start in range(0, len(masks), chunk):
            b = torch.as_tensor(bits[start:start + chunk], dtype=torch.float64)
            A = b[:, :, None] * (1 - eye)                                 # A[c, i, j] = bit i, no self-loops
            out[:, start:start + chunk] = score(A).T.numpy()
    out[bits.T] = -np.inf                                     # parent sets containing the node itself
    return out


def local_scores(mechanism, X):
    """Per-node log evidence of every parent set, ``f_j(G)`` for all ``G ⊆ V ∖ {j}``.

    :param mechanism: a collapsed mechanism (:class:`~pyro_dag.structure.LinearGaussianSEM` with
        ``marginalize=True`` or :class:`~pyro_dag.structure.BGeSEM`).
    :param torch.Tensor X: ``[N, p]`` data (as the mechanism sees it).
    :returns: ``numpy`` array ``[p, 2^p]`` (float64): entry ``[j, mask]`` is ``log p(x_j | x_G)`` for the parent set
        ``G`` = the bits of ``mask``; ``-inf`` where ``mask`` contains ``j``.
    """
    return _scores_for_masks(mechanism, X, np.arange(1 << X.shape[1]))

