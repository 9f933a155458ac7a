"""Local scores of the collapsed likelihoods: ``f_j(G) = log p(x_j | x_G)`` for parent-set bitmasks ``G``.

Parent sets are integer bitmasks (bit ``i`` set: node ``i`` is a parent). :func:`local_scores` scores every parent
set of every node; :class:`~pyro_dag.structure.OrderScorer` and :func:`~pyro_dag.structure.exact_posterior`
build on it.
"""
import copy
import math

import numpy as np
import torch

from .mechanisms import BGeSEM, LinearGaussianSEM
from .subsets import mask_bits

__all__ = ["FamilyScorer", "collapsed_mechanism", "local_scores"]


def collapsed_mechanism(likelihood, num_nodes, num_rows, config=None):
    """The collapsed mechanism of ``likelihood`` (``"linear"`` or ``"bge"``) for ``num_nodes`` variables and
    ``num_rows`` rows, with the ``"linear"`` score's noise and weight priors from ``config``
    (:meth:`~pyro_dag.structure.StructureConfig.linear_prior`; default: :class:`~pyro_dag.structure.StructureConfig`'s).
    """
    if likelihood == "bge":
        return BGeSEM(num_nodes)
    if likelihood != "linear":
        raise ValueError(f"a collapsed likelihood is 'linear' or 'bge'; got {likelihood!r}")
    if config is None:
        from .config import StructureConfig

        config = StructureConfig()
    a0, b0, s = config.linear_prior(num_rows)
    return LinearGaussianSEM(num_nodes, marginalize=True, weight_scale=s, noise_concentration=a0, noise_rate=b0)


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
    X = X.to("cpu", torch.float64)   # scored on the CPU (the scores go to numpy) whatever the data's device
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



class FamilyScorer:
    """Local log evidence ``f_j(G)`` of one node and many parent sets from ``(|G| + 1)``-sized blocks, for the
    collapsed likelihoods (no ``[p, p]`` matrix per set: what the candidate tables and the candidate selection
    need beyond ``p ≈ 15``).

    * BGe (:class:`~pyro_dag.structure.BGeSEM`): the family formula with ``log|R_G|`` and ``log|R_{G ∪ j}|``;
    * ``"linear"`` (:class:`~pyro_dag.structure.LinearGaussianSEM`, ``marginalize=True``): with
      ``M = X^T X + diag(1/s²)`` on the parents, ``log|V_j^{-1}| = log|M_G| + (p - |G|) log(1/s²)`` and
      ``G_jj - c^T V c = exp(log|[[M_G, g], [g^T, G_jj]]| - log|M_G|)``, the same evidence as
      :meth:`~pyro_dag.structure.LinearGaussianSEM.node_evidence`.

    :param mechanism: the collapsed mechanism. :param torch.Tensor X: ``[N, p]`` data as the mechanism sees it.
    Call ``scorer(j, sets)`` with ``sets`` ``[M, L]`` node indices (``-1`` pads; none may be ``j``) -> ``[M]``.
    """

    def __init__(self, mechanism, X):
        X = torch.as_tensor(X, dtype=torch.float64)
        self.N, self.p = X.shape
        self.mechanism = mechanism
        if isinstance(mechanism, BGeSEM):
            R, self.t = mechanism._R(X)
            self.R = R.numpy()
            self.ridge = 0.0
        elif isinstance(mechanism, LinearGaussianSEM) and mechanism.marginalize:
            self.R = (X.T @ X).numpy()
            self.ridge = 1.0 / mechanism.weight_scale ** 2
        else:
            raise TypeError(f"FamilyScorer needs a collapsed likelihood (LinearGaussianSEM(marginalize=True) or "
                            f"BGeSEM); got {type(mechanism).__name__}")

    def _logdet(self, idx, ridge):
        """``[M]`` log-determinants of the blocks ``R[idx, idx] + ridge`` (``ridge`` ``[M, L]``; ``-1`` in ``idx``
        gives a unit row and column)."""
        ok = idx >= 0
        c = np.maximum(idx, 0)
        L = idx.shape[1]
        M = np.where(ok[:, :, None] & ok[:, None, :], self.R[c[:, :, None], c[:, None, :]], np.eye(L))
        M = M + np.eye(L) * np.where(ok, ridge, 0.0)[:, None, :]
        return np.linalg.slogdet(M)[1]

    def __call__(self, j, sets):
        sets = np.asarray(sets, dtype=np.int64)
        sets = sets.reshape(len(sets), sets.shape[1] if sets.ndim == 2 else 0)
        L = sets.shape[1]
        out = np.empty(len(sets))
        step = max(1, 2 ** 22 // (L + 1) ** 2)                            # keeps the [M, L+1, L+1] blocks small
        for s in range(0, len(sets), step):
            a = sets[s:s + step]
            aj = np.concatenate([a, np.full((len(a), 1), j, dtype=np.int64)], 1)
            rid = np.full(a.shape, self.ridge)
            ld_pa = self._logdet(a, rid)
            ld_paj = self._logdet(aj, np.concatenate([rid, np.zeros((len(a), 1))], 1))
            size = (a >= 0).sum(1)
            if isinstance(self.mechanism, BGeSEM):
                out[s:s + step] = self.mechanism._family(self.N, self.t, torch.as_tensor(size, dtype=torch.float64),
                                                         torch.as_tensor(ld_pa), torch.as_tensor(ld_paj)).numpy()
            else:
                m = self.mechanism
                Gjj = self.R[j, j]
                rss = np.maximum(np.exp(ld_paj - ld_pa), 1e-12 * (1.0 + Gjj))
                aN = m.noise_concentration + 0.5 * self.N
                out[s:s + step] = (m._evidence_const(self.N) + (self.p - size) * math.log(m.weight_scale)
                                   - 0.5 * ld_pa - aN * np.log(m.noise_rate + 0.5 * rss))
        return out

    def subsets(self, j, cand, max_size=None):
        """``[2^K]`` ``f_j`` of every subset of the candidates ``cand`` (``[K]``, ``-1`` pads), entry ``m`` the subset
        given by the bits of ``m`` in candidate order; ``-inf`` for subsets using a padding bit or larger than
        ``max_size``."""
        cand = np.asarray(cand, dtype=np.int64)
        K = len(cand)
        loc = np.arange(1 << K, dtype=np.int64)
        bits = ((loc[:, None] >> np.arange(K)) & 1).astype(bool)
        keep = ~bits[:, cand < 0].any(1)
        if max_size is not None:
            keep &= bits.sum(1) <= int(max_size)
        out = np.full(1 << K, -np.inf)
        sets = np.where(bits[keep], cand, -1)
        out[keep] = self(j, sets)
        return out
