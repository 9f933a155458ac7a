"""The exact posterior of :class:`~pyro_dag.structure.StructureModel` for small graphs, by dynamic programming
over node orders (Koivisto & Sood 2004; Koivisto 2006), for the collapsed likelihoods.

Beyond the paper, as a reference: SVI-DAG (digest-001 §2) puts ``r ~ N(0, σ²I)`` on the node potentials, so the
order they induce is uniform over the ``p!`` orders, and ``γ_ij ~ LogisticBeta(α_ij, β_ij)`` on the edge logits, so
given the order each allowed edge ``i -> j`` is present independently with probability ``q_ij = α_ij / (α_ij +
β_ij)`` (``sigmoid(γ) ~ Beta(α, β)``). With a likelihood whose parameters are integrated out
(:class:`~pyro_dag.structure.LinearGaussianSEM` with ``marginalize=True``, :class:`~pyro_dag.structure.BGeSEM`),
the evidence factorises over nodes, ``p(X | G) = Π_j f_j(pa_j)``, and the posterior over (order, DAG) is
order-modular::

    p(≺, G | X) ∝ Π_j Π_{i ≺ j} q_ij^{[i ∈ pa_j]} (1 - q_ij)^{[i ∉ pa_j]} f_j(pa_j).

Summing parent sets within the allowed predecessors ``S`` gives one number per (node, predecessor set),
``β_j(S) = Π_{i ∈ S} (1 - q_ij) Σ_{G ⊆ S} f_j(G) Π_{i ∈ G} q_ij / (1 - q_ij)`` (a zeta transform over subsets),
and sums over orders run forward and backward over the ``2^p`` subsets:
``L(S) = Σ_{k ∈ S} L(S ∖ k) β_k(S ∖ k)``, ``R(T) = Σ_{k ∈ T} β_k(V ∖ T) R(T ∖ k)``. Then ``Z = L(V)`` and::

    P(i -> j | X) = Σ_{S ∌ j, S ∋ i} L(S) [β_j(S) - (1 - q_ij) β_j(S ∖ i)] R(V ∖ S ∖ j) / Z,

and exact DAG samples come from drawing the order backwards and then each node's parent set. Cost
``O(p² 2^p)`` time and ``O(p 2^p)`` memory, plus ``p 2^{p-1}`` local scores: seconds for ``p ≤ 15``, minutes
near the limit ``p = 20``. Everything is in log space, float64.
"""
import math
import numbers

import numpy as np
import torch

from .models import BGeSEM, LinearGaussianSEM

__all__ = ["ExactStructurePosterior", "OrderScorer", "exact_posterior", "local_scores"]

MAX_NODES = 20


def _mask_bits(masks, p):
    """``[n, p]`` bool: bit ``i`` of each of the ``n`` subset masks."""
    masks = np.asarray(masks, dtype=np.int64)
    return ((masks[:, None] >> np.arange(p)) & 1).astype(bool)


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
    import copy

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
    bits = _mask_bits(masks, p)                                          # [n, p]
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
            masks = _masks_up_to(p, cap)
            f_all = _scores_for_masks(mechanism, X, masks)                   # [p, n], shared masks
            bits = _mask_bits(masks, p)
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
                masks = _submasks_up_to(cand, cap)
                node_masks.append(masks)
                node_f.append(_scores_for_masks(mechanism, X, masks)[j])
        self._masks = [torch.as_tensor(m) for m in node_masks]
        self._f = [torch.as_tensor(f) for f in node_f]
        self._odds = [torch.as_tensor(_mask_bits(m, p).astype(float) @ odds[j]) for j, m in enumerate(node_masks)]
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


def _submasks_up_to(nodes, k):
    """Masks of the subsets of ``nodes`` with at most ``k`` elements (all ``2^len(nodes)``, in binary counting
    order over ``nodes``, when ``k ≥ len(nodes)``)."""
    import itertools

    nodes = [int(i) for i in nodes]
    if k >= len(nodes):
        subs = np.zeros(1, dtype=np.int64)
        for i in nodes:
            subs = np.concatenate([subs, subs | (1 << i)])
        return subs
    out = [0]
    for size in range(1, min(k, len(nodes)) + 1):
        out.extend(sum(1 << int(i) for i in c) for c in itertools.combinations(nodes, size))
    return np.array(out, dtype=np.int64)


def _masks_up_to(p, k):
    """Subset masks of ``p`` bits with at most ``k`` bits set (all ``2^p`` when ``k ≥ p``)."""
    if k >= p:
        return np.arange(1 << p, dtype=np.int64)
    return _submasks_up_to(range(p), k)


def _zeta(z, p):
    """In-place log-space subset sum: ``z[S] <- logsumexp_{G ⊆ S} z[G]`` along the last axis (``2^p``)."""
    idx = np.arange(1 << p)
    for i in range(p):
        with_i = idx[(idx >> i) & 1 == 1]
        z[..., with_i] = np.logaddexp(z[..., with_i], z[..., with_i ^ (1 << i)])
    return z


class ExactStructurePosterior:
    """The exact posterior over DAGs of :class:`~pyro_dag.structure.StructureModel` with a collapsed likelihood
    (see the module docstring). Same queries as :class:`~pyro_dag.structure.fitting.StructurePosterior`.

    :ivar float log_evidence: ``log p(X)`` under the model (uniform order prior, edge prior ``q``).
    :ivar list node_names: column names (or ``None``).
    """

    def __init__(self, log_f, q, node_names=None):
        p = log_f.shape[0]
        self.num_nodes = p
        self.node_names = node_names
        self._q = q
        full = (1 << p) - 1
        bits = _mask_bits(np.arange(1 << p), p)                           # [2^p, p]
        # g_j(G) = f_j(G) + Σ_{i ∈ G} log(q_ij / (1 - q_ij));  c_j(S) = Σ_{i ∈ S} log(1 - q_ij)
        log_1mq, odds = _edge_prior_logs(q)                               # [i, j], [j, i]
        self._g = log_f + odds @ bits.T.astype(float)                     # [p, 2^p]
        self._g[~np.isfinite(log_f)] = -np.inf
        c = log_1mq.T @ bits.T.astype(float)                             # [p, 2^p]
        self._zeta = _zeta(self._g.copy(), p)                             # Z_j(S)
        self._beta = c + self._zeta                                       # β_j(S)
        pop = bits.sum(1)
        L = np.full(1 << p, -np.inf)
        R = np.full(1 << p, -np.inf)
        L[0] = R[0] = 0.0
        for level in range(1, p + 1):
            S = np.nonzero(pop == level)[0]
            cand_L = np.full((len(S), p), -np.inf)
            cand_R = np.full((len(S), p), -np.inf)
            for k in range(p):
                has = (S >> k) & 1 == 1
                Sk = S[has] ^ (1 << k)
                cand_L[has, k] = L[Sk] + self._beta[k, Sk]
                cand_R[has, k] = R[Sk] + self._beta[k, full ^ S[has]]
            L[S] = _logsumexp(cand_L, axis=1)
            R[S] = _logsumexp(cand_R, axis=1)
        self._L, self._R = L, R
        self.log_evidence = float(L[full]) - math.lgamma(p + 1)           # uniform over the p! orders
        self._log_Z = float(L[full])
        P = np.zeros((p, p))
        idx = np.arange(1 << p)
        for j in range(p):
            no_j = idx[(idx >> j) & 1 == 0]
            for i in range(p):
                if i == j:
                    continue
                S = no_j[(no_j >> i) & 1 == 1]
                # log(Σ_{G ⊆ S, i ∈ G} e^{g_j(G)}) = Z_j(S) + log(1 - e^{Z_j(S \ i) - Z_j(S)})
                zs, zsi = self._zeta[j, S], self._zeta[j, S ^ (1 << i)]
                with np.errstate(divide="ignore", invalid="ignore"):
                    part = zs + np.log1p(-np.exp(np.minimum(zsi - zs, 0.0)))
                terms = L[S] + (c[j, S] + part) + R[full ^ S ^ (1 << j)]
                P[i, j] = math.exp(min(0.0, _logsumexp(terms) - self._log_Z))
        self._edge_probs = P

    def edge_probs(self):
        """``[p, p]`` tensor (float64), ``P[i, j] = P(i -> j | X)`` exactly."""
        return torch.as_tensor(self._edge_probs)

    def _order(self, order):
        order = [int(k) for k in (order.tolist() if torch.is_tensor(order) else order)]
        if sorted(order) != list(range(self.num_nodes)):
            raise ValueError(f"order must be a permutation of 0..{self.num_nodes - 1} (upstream first); got {order}")
        return order

    def order_log_prob(self, order):
        """``log p(≺ | X)`` of one order (a permutation of the nodes, upstream first):
        ``Σ_j log β_j(pred_j) - log Σ_≺' Π_j β_j(pred'_j)``."""
        pred, total = 0, 0.0
        for k in self._order(order):
            total += self._beta[k, pred]
            pred |= 1 << k
        return float(total - self._log_Z)

    def edge_probs_given_order(self, order):
        """``[p, p]`` exact ``P(i -> j | ≺, X)`` for one order (upstream first): given the order the parent sets are
        independent, ``P(i ∈ pa_j | ≺) = 1 - (1 - q_ij) β_j(pred_j ∖ i) / β_j(pred_j)`` for ``i ≺ j``, else 0."""
        P = np.zeros((self.num_nodes, self.num_nodes))
        pred = 0
        for j in self._order(order):
            for i in range(self.num_nodes):
                if (pred >> i) & 1:
                    P[i, j] = -math.expm1(self._zeta[j, pred ^ (1 << i)] - self._zeta[j, pred])
            pred |= 1 << j
        return torch.as_tensor(P)

    def sample(self, num_samples, seed=0):
        """Exact DAG samples ``[num_samples, p, p]`` (float64 0/1): the order drawn backwards from the DP, then each
        node's parent set among its predecessors."""
        if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")
        rng = np.random.default_rng(seed)
        p = self.num_nodes
        full = (1 << p) - 1
        out = np.zeros((num_samples, p, p))
        for s in range(num_samples):
            T = full
            while T:
                ks = [k for k in range(p) if (T >> k) & 1]
                logw = np.array([self._L[T ^ (1 << k)] + self._beta[k, T ^ (1 << k)] for k in ks])
                k = ks[_draw(rng, logw)]
                S = T ^ (1 << k)
                subsets = _submasks_up_to([i for i in range(p) if (S >> i) & 1], p)
                G = subsets[_draw(rng, self._g[k, subsets])]
                out[s, :, k] = (G >> np.arange(p)) & 1
                T = S
        return torch.as_tensor(out)


def _logsumexp(a, axis=None):
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return np.squeeze(out, axis=axis) if axis is not None else float(out.reshape(()))


def _draw(rng, logw):
    w = np.exp(logw - np.max(logw))
    return int(rng.choice(len(w), p=w / w.sum()))


def exact_posterior(data, likelihood="linear", edge_beliefs=None, *, expected_parents=1.5, prior_concentration=20.0,
                    belief_strength=500.0, standardize=True, likelihood_scale=1.0, node_names=None):
    """Exact edge posteriors (and exact DAG samples) of the model :func:`~pyro_dag.structure.fit` approximates, for
    ``p ≤ 20`` variables and the collapsed likelihoods; same arguments and prior as :func:`~pyro_dag.structure.fit`.

    :param data: ``[N, p]`` tensor, array or DataFrame. :param str likelihood: ``"linear"`` or ``"bge"``.
    :param edge_beliefs: optional ``[p, p]`` prior beliefs ``P(i -> j)`` (0.5 = no opinion).
    :param float likelihood_scale: tempering power of the likelihood (1: the posterior).
    :returns: :class:`ExactStructurePosterior`.
    """
    from .fitting import _prior, _to_tensor

    X, names = _to_tensor(data, torch.float64, None)
    N, p = X.shape
    if p > MAX_NODES:
        raise ValueError(f"exact_posterior enumerates the 2^p subsets of the {p} variables; use it for p ≤ {MAX_NODES} "
                         "(pyro_dag.structure.fit scales further)")
    if likelihood not in ("linear", "bge"):
        raise ValueError(f"exact_posterior needs a collapsed likelihood, 'linear' or 'bge'; got {likelihood!r}")
    if not (isinstance(likelihood_scale, numbers.Real) and likelihood_scale > 0):
        raise ValueError(f"likelihood_scale must be a positive number; got {likelihood_scale!r}")
    if standardize:
        sd = X.std(0, keepdim=True)
        if (sd == 0).any():
            raise ValueError(f"columns {(sd[0] == 0).nonzero().flatten().tolist()} are constant; drop them")
        X = (X - X.mean(0, keepdim=True)) / sd
    alpha, beta = _prior(p, edge_beliefs, expected_parents, prior_concentration, belief_strength, torch.float64, None)
    q = (alpha / (alpha + beta)).numpy()
    np.fill_diagonal(q, 0.0)
    mech = LinearGaussianSEM(p, marginalize=True) if likelihood == "linear" else BGeSEM(p)
    log_f = likelihood_scale * local_scores(mech, X)
    return ExactStructurePosterior(log_f, q, node_names if node_names is not None else names)
