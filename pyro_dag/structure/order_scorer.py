"""Exact log scores ``log p(X, order)`` of node orders, with every DAG consistent with the order summed out."""
import math

import numpy as np
import torch

from .scores import _edge_prior_logs, _scores_for_masks
from .subsets import mask_bits, masks_up_to, submasks_up_to

__all__ = ["OrderScorer"]


class OrderScorer:
    """``log p(X, ≺)`` of node orders under :class:`~pyro_dag.structure.StructureModel` with a collapsed
    likelihood, up to a constant, with each node's parent sets restricted to subsets of its candidate parents
    (all other nodes by default) of at most ``max_parents`` elements (order MCMC's score, Friedman & Koller
    2003)::

        log Σ_{G_1..G_p: G_j ⊆ pred_j ∩ C_j, |G_j| ≤ K} Π_j Π_{i ∈ pred_j} q_ij^{[i ∈ G_j]} (1 - q_ij)^{[i ∉ G_j]} f_j(G_j)^s

    (``s`` the likelihood's tempering power). With ``candidates=c`` the candidate parents ``C_j`` of node ``j`` are
    the ``c`` other nodes whose single-parent evidence ``f_j({i}) - f_j(∅)`` is largest (the usual candidate-set
    restriction of order MCMC). The local scores are computed once (``2^c`` or ``Σ_{k ≤ K} C(p-1, k)`` parent sets
    per node); one order costs ``O(Σ_j #sets_j)``. :func:`~pyro_dag.structure.fit` uses it for the particles'
    order moves and weights with the collapsed likelihoods (``order_score="exact"``).

    :param mechanism: :class:`~pyro_dag.structure.LinearGaussianSEM` (``marginalize=True``) or
        :class:`~pyro_dag.structure.BGeSEM`. :param torch.Tensor X: ``[N, p]`` data as the mechanism sees it.
    :param q: ``[p, p]`` prior edge probabilities given the order (``α / (α + β)`` of the edge prior).
    :param int max_parents: cap on the parent-set size (``None``: none).
    :param int candidates: number of candidate parents per node (``None``: all ``p - 1``).
    """

    def __init__(self, mechanism, X, q, max_parents=None, candidates=None):
        p = X.shape[1]
        q = np.asarray(torch.as_tensor(q, dtype=torch.float64).cpu(), dtype=float)
        self.num_nodes, self.max_parents, self.candidates = p, max_parents, candidates
        log_1mq, odds = _edge_prior_logs(q)                                  # [i, j], [j, i]
        cap = p - 1 if max_parents is None else min(int(max_parents), p - 1)
        if candidates is None or candidates >= p - 1:
            masks = masks_up_to(p, cap)
            f_all = _scores_for_masks(mechanism, X, masks)                   # [p, n], shared masks
            bits = mask_bits(masks, p)
            node_masks = [masks[~bits[:, j]] for j in range(p)]
            node_f = [f_all[j][~bits[:, j]] for j in range(p)]
            self.candidate_parents = [[i for i in range(p) if i != j] for j in range(p)]
        else:
            single = _scores_for_masks(mechanism, X, np.array([0] + [1 << i for i in range(p)], dtype=np.int64))
            node_masks, node_f, self.candidate_parents = [], [], []
            for j in range(p):
                gain = single[j, 1:] - single[j, 0]
                gain[j] = -np.inf
                cand = np.argsort(-gain)[:int(candidates)]
                self.candidate_parents.append(sorted(int(i) for i in cand))
                masks = submasks_up_to(cand, cap)
                node_masks.append(masks)
                node_f.append(_scores_for_masks(mechanism, X, masks)[j])
        self._masks = [torch.as_tensor(m) for m in node_masks]
        self._f = [torch.as_tensor(f) for f in node_f]
        self._odds = [torch.as_tensor(mask_bits(m, p).astype(float) @ odds[j]) for j, m in enumerate(node_masks)]
        self._log_1mq = torch.as_tensor(log_1mq.T)                           # [j, i]
        self._cache = {}
        self.cache_size = 1_000_000

    @property
    def num_parent_sets(self):
        """Parent sets scored per node (the largest over nodes)."""
        return max(int(m.shape[0]) for m in self._masks)

    def __call__(self, potentials, scale=1.0):
        """``[K]`` log scores of the orders of ``potentials`` ``[K, p]`` (higher = upstream; ties broken as
        ``r_i > r_j`` strictly, as :class:`~pyro_dag.structure.OrderedDAG`).

        Scores are memoised per (order, ``scale``): :func:`~pyro_dag.structure.fit` scores each particle's current
        order and a proposal at every step, and its posterior re-scores every visited order, so most orders come
        back (``cache_size`` entries at most; the cache is emptied when full).
        """
        r = torch.as_tensor(potentials).detach().cpu().to(torch.float64)
        if r.dim() == 1:
            r = r.unsqueeze(0)
        pred = r.unsqueeze(-1) > r.unsqueeze(-2)                             # [K, i, j]: i upstream of j
        weights = torch.as_tensor(1 << np.arange(self.num_nodes), dtype=torch.int64)
        pred_mask = (pred.to(torch.int64) * weights[:, None]).sum(-2)        # [K, j]: predecessor set of j
        keys = [(float(scale),) + tuple(row) for row in pred_mask.tolist()]  # the order, exactly (ties included)
        out = torch.tensor([self._cache.get(k, math.nan) for k in keys], dtype=torch.float64)
        todo = torch.isnan(out).nonzero().flatten()
        if len(todo):
            fresh = self._score(pred[todo], pred_mask[todo], scale)
            out[todo] = fresh
            if len(self._cache) + len(todo) > self.cache_size:
                self._cache.clear()
            self._cache.update(zip((keys[k] for k in todo.tolist()), fresh.tolist()))
        return out

    def _score(self, pred, pred_mask, scale):
        total = (pred.to(torch.float64) * self._log_1mq.T.unsqueeze(0)).sum((-1, -2))
        neg_inf = torch.tensor(-math.inf, dtype=torch.float64)
        for j in range(self.num_nodes):
            g = scale * self._f[j] + self._odds[j]                            # [n_j]
            inside = (self._masks[j].unsqueeze(0) & ~pred_mask[:, j:j + 1]) == 0   # [K, n_j]: G ⊆ pred_j
            total = total + torch.where(inside, g.unsqueeze(0), neg_inf).logsumexp(-1)
        return total
