"""The exact posterior of :class:`~pyro_dag.structure.StructureModel` for small graphs, by dynamic programming
over node orders (Koivisto & Sood 2004; Koivisto 2006), for the collapsed likelihoods.

Beyond the paper, as a reference: SVI-DAG (Zinage 2026, arXiv:2608.04930, §3.2) puts ``r ~ N(0, σ²I)`` on the node
potentials, so the
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

from pyro_dag.threads import DEFAULT_NUM_THREADS, limit_threads

from .causal import MAX_TABLE_NODES, expected_columns, mean_weight_zeta
from .config import EXACT_LIKELIHOODS, StructureConfig
from .data import prepare_data, standardize_columns
from .gp_scores import GP_DEFAULT_MAX_PARENTS, GPFamilyScorer
from .graph_priors import fair_prior_log
from .interventions import intervention_mask, interventional_gp_local_scores, interventional_local_scores
from .uncertain_targets import uncertain_target_scores
from .map_dag import most_probable_equivalent
from .order_scorer import OrderScorer
from .posterior import DAGPosterior
from .scores import _edge_prior_logs, collapsed_mechanism, local_scores
from .subsets import logsumexp, mask_bits, subset_dp, submasks_up_to, zeta_transform

__all__ = ["ExactStructurePosterior", "OrderScorer", "exact_posterior", "local_scores"]

MAX_NODES = 20
GP_MAX_NODES = 16


def _log_diff(a, b):
    """``log(e^a - e^b)`` elementwise for ``b ≤ a`` (``-inf`` where ``a = -inf`` or ``b = a``)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    out = np.full(np.broadcast(a, b).shape, -np.inf)
    ok = np.isfinite(a)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(ok, np.minimum(b - a, 0.0), -np.inf)
        out = np.where(ok, a + np.log1p(-np.exp(d)), -np.inf)
    return out


class ExactStructurePosterior(DAGPosterior):
    """The exact posterior over DAGs of :class:`~pyro_dag.structure.StructureModel` with a collapsed likelihood
    (see the module docstring). The queries of :class:`~pyro_dag.structure.posterior.DAGPosterior`, shared with
    :class:`~pyro_dag.structure.StructurePosterior`, plus :meth:`order_log_prob`, :meth:`edge_probs_given_order`,
    :meth:`sample_orders` and :meth:`log_prob`.

    Evidence ``given={(i, j): present}`` is answered exactly by the same dynamic programme on the posterior
    restricted to it (each constrained node's admissible parent sets are those with the required parents and none
    of the forbidden ones; the order sums then only count orders where every required parent precedes its child):
    :meth:`prob`, :meth:`edge_probs` ``(given=...)``, :meth:`map_dag` (the most probable (order, DAG) pair),
    :meth:`sample` ``(given=...)`` (exact conditional samples). Each new evidence set costs one dynamic programme,
    ``O(p² 2^p)``; :meth:`causal_effects` is exact given the order and averages exact order samples.

    :ivar float log_evidence: ``log p(X)`` under the model (uniform order prior, edge prior ``q``).
    :ivar list node_names: column names (or ``None``).
    """

    def __init__(self, log_f, q, node_names=None):
        p = log_f.shape[0]
        if p > MAX_NODES:
            raise ValueError(f"ExactStructurePosterior enumerates the 2^p subsets of the {p} variables; use it for "
                             f"p ≤ {MAX_NODES}")
        self.num_nodes = p
        self.node_names = node_names
        self.data = None
        self._q = q
        bits = mask_bits(np.arange(1 << p), p)                            # [2^p, p]
        # g_j(G) = f_j(G) + Σ_{i ∈ G} log(q_ij / (1 - q_ij));  c_j(S) = Σ_{i ∈ S} log(1 - q_ij)
        log_1mq, odds = _edge_prior_logs(q)                               # [i, j], [j, i]
        g = log_f + odds @ bits.T.astype(float)                           # [p, 2^p]
        g[~np.isfinite(log_f)] = -np.inf
        self._c = log_1mq.T @ bits.T.astype(float)                        # [p, 2^p]
        self._setup(g, zeta_transform(g.copy(), p))
        self.log_evidence = self._log_Z - math.lgamma(p + 1)              # uniform over the p! orders
        self._conditioned_cache = {}

    def _setup(self, g, zeta):
        """The order sums of the tables ``g`` (``[p, 2^p]`` parent-set log weights) and ``zeta`` (their subset
        sums): ``β``, the forward and backward sums ``L``, ``R``, ``log Z = log L(V)`` and the edge marginals."""
        p = self.num_nodes
        self._g, self._zeta = g, zeta
        c = self._c
        full = (1 << p) - 1
        beta = self._beta = c + self._zeta                                # β_j(S)
        L = subset_dp(p, lambda k, rest, S: beta[k, rest])                # L(S) = Σ_{k ∈ S} L(S ∖ k) β_k(S ∖ k)
        R = subset_dp(p, lambda k, rest, T: beta[k, full ^ T])            # R(T) = Σ_{k ∈ T} β_k(V ∖ T) R(T ∖ k)
        self._L, self._R = L, R
        self._log_Z = float(L[full])
        P = np.zeros((p, p))
        if not np.isfinite(self._log_Z):
            self._edge_probs = P
            return
        idx = np.arange(1 << p)
        for j in range(p):
            no_j = idx[(idx >> j) & 1 == 0]
            for i in range(p):
                if i == j:
                    continue
                S = no_j[(no_j >> i) & 1 == 1]
                # log(Σ_{G ⊆ S, i ∈ G} e^{g_j(G)}) = Z_j(S) + log(1 - e^{Z_j(S \ i) - Z_j(S)})
                zs, zsi = self._zeta[j, S], self._zeta[j, S ^ (1 << i)]
                part = _log_diff(zs, zsi)
                terms = L[S] + (c[j, S] + part) + R[full ^ S ^ (1 << j)]
                P[i, j] = math.exp(min(0.0, logsumexp(terms) - self._log_Z))
        self._edge_probs = P

    # ----------------------------------------------------------------------------------------------- evidence
    def _conditioned(self, ev):
        """The exact posterior restricted to the DAGs satisfying the evidence ``ev``: each constrained node's
        parent-set weights ``g_j(G)`` are set to ``-inf`` where ``G`` lacks a required parent or has a forbidden
        one, and the order sums recomputed (the order-dependent prior factor ``c_j(pred_j)`` is unchanged, so the
        result is the (order, DAG) posterior given the evidence; a required edge ``i -> j`` forces ``i`` before
        ``j`` because no parent set of ``j`` within predecessors lacking ``i`` survives)."""
        if not ev:
            return self
        key = ev.key()
        hit = self._conditioned_cache.get(key)
        if hit is not None:
            return hit
        g, zeta = self._restricted_tables(ev)
        out = object.__new__(type(self))
        out.__dict__.update({k: v for k, v in self.__dict__.items() if not k.startswith("_conditioned")})
        out._conditioned_cache = {}
        out._evidence = ev
        out._setup(g, zeta)
        if len(self._conditioned_cache) >= 4:          # each holds [p, 2^p] tables
            self._conditioned_cache.clear()
        self._conditioned_cache[key] = out
        return out

    def _restricted_tables(self, ev):
        """``(g, zeta)`` ``[p, 2^p]``: the parent-set log weights with the sets violating the evidence at ``-inf``,
        and their subset sums (recomputed for the constrained nodes only)."""
        if not ev:
            return self._g, self._zeta
        p = self.num_nodes
        idx = np.arange(1 << p, dtype=np.int64)
        g, zeta = self._g.copy(), self._zeta.copy()
        for j in ev.nodes:
            bad = ((idx & ev.required[j]) != ev.required[j]) | ((idx & ev.forbidden[j]) != 0)
            g[j, bad] = -np.inf
            zeta[j] = zeta_transform(g[j].copy(), p)
        return g, zeta

    # the table interface an OrderSPN's leaves use (shared with CandidateTables)
    def _max_table(self, g):
        """``[p, 2^p]`` ``max_{G ⊆ S} g_j(G)``."""
        return zeta_transform(g.copy(), self.num_nodes, op=np.maximum)

    def _parent_sets(self, i, S):
        """Masks of every parent set of ``i`` within the predecessor mask ``S``."""
        return submasks_up_to([k for k in range(self.num_nodes) if (S >> k) & 1], self.num_nodes)

    def _effect_tables(self, X, g, interventions=None):
        """Subset sums of the BGe posterior-mean weights (:func:`~pyro_dag.structure.causal.mean_weight_zeta`)."""
        return mean_weight_zeta(X, g, interventions)

    def _expected_columns(self, tabs, zeta, j, S):
        """``[n, p]`` ``E[b_j | G_j ⊆ S]`` (:func:`~pyro_dag.structure.causal.expected_columns`)."""
        return expected_columns(tabs[0], tabs[1], zeta, j, S)

    def _given(self, given):
        ev = self.parse_evidence(given, condition=True)
        cond = self._conditioned(ev)
        if not np.isfinite(cond._log_Z):
            raise ValueError(f"the evidence {ev.edges} has probability zero under this posterior (for example, its "
                             "required edges form a cycle), so nothing can be conditioned on it")
        return cond

    def prob(self, evidence, num_samples=1000, seed=None, *, return_stderr=False):
        """``P(evidence | X)`` exactly: ``Σ`` over (order, DAG) pairs satisfying the evidence / ``Σ`` over all, both
        by the order dynamic programme (``num_samples``, ``seed`` are ignored; the standard error is 0)."""
        cond = self._conditioned(self.parse_evidence(evidence))
        P = math.exp(min(0.0, cond._log_Z - self._log_Z)) if np.isfinite(cond._log_Z) else 0.0
        return (P, 0.0) if return_stderr else P

    def log_prob(self, evidence):
        """``log P(evidence | X)`` (``-inf`` for impossible evidence), exactly."""
        cond = self._conditioned(self.parse_evidence(evidence))
        return float(cond._log_Z - self._log_Z)

    def map_dag(self, given=None, num_samples=1000, seed=None, *, return_order=False, return_ties=False):
        """The most probable DAG given the evidence, among the Markov equivalence class of the most probable
        (order, DAG) pair.

        A max-product order dynamic programme (``M(S) = max_k M(S ∖ k) + c_k(S ∖ k) + max_{G ⊆ S ∖ k} g_k(G)``,
        back-pointers for the order, then each node's best parent set among its predecessors) finds the most probable
        (order, DAG) pair, as in Wang, Wicker & Kwiatkowska 2022 (§4.4). A DAG's own probability ``P(G | X, given)``
        sums over the orders it is consistent with, so the DAGs of that pair's Markov equivalence class (which a
        score-equivalent likelihood scores alike) are compared by it and the most probable is returned
        (:mod:`~pyro_dag.structure.map_dag`); it is the most probable DAG unless a DAG outside that class, consistent
        with many more orders, beats it (:meth:`log_prob` with every edge given scores any DAG). Several equally
        probable DAGs (Markov-equivalent DAGs consistent with equally many orders) are a tie, reported by a
        :class:`~pyro_dag.structure.map_dag.MAPTieWarning`.

        :param bool return_order: also return an order consistent with the DAG (upstream first; the best pair's
            order when its DAG is returned).
        :param bool return_ties: also return ``[k, p, p]``, the ``k`` equally probable DAGs (the returned one first).
        :returns: ``[p, p]`` 0/1 float64 DAG (then the order and the ties, as asked).
        """
        cond = self._given(given)
        p = self.num_nodes
        gmax = zeta_transform(cond._g.copy(), p, op=np.maximum)           # max_{G ⊆ S} g_j(G)
        bmax = cond._c + gmax
        _, arg = subset_dp(p, lambda k, rest, S: bmax[k, rest], lambda cand: cand.max(1), return_argmax=True)
        order, T = [], (1 << p) - 1
        while T:
            k = int(arg[T])
            order.append(k)
            T ^= 1 << k
        order = order[::-1]
        A = np.zeros((p, p))
        pred = 0
        for k in order:
            subs = submasks_up_to([i for i in range(p) if (pred >> i) & 1], p)
            G = int(subs[np.argmax(cond._g[k, subs])])
            A[:, k] = (G >> np.arange(p)) & 1
            pred |= 1 << k
        best, ties = most_probable_equivalent(A, self._dag_log_prob, cond.parse_evidence(given), "map_dag")
        if not np.array_equal(best.numpy(), A):
            order = self._dag_order(best.numpy())
        out = (best,) + ((order,) if return_order else ()) + ((ties,) if return_ties else ())
        return out[0] if len(out) == 1 else out

    def _dag_order_dp(self, A, maximise=False):
        """The order programme over the orders consistent with the DAG ``A`` only (a node may follow a predecessor
        set that holds its parents), of the weights ``e^{c_k(pred_k)}``: their log sum, or with ``maximise`` their
        maximum and back-pointers. Returns ``(pa, F[, arg])``, ``pa`` the ``[p]`` parent masks."""
        p = self.num_nodes
        pa = (np.asarray(A) > 0.5).astype(np.int64).T @ (np.int64(1) << np.arange(p, dtype=np.int64))

        def weight(k, rest, S):
            return np.where((rest & pa[k]) == pa[k], self._c[k, rest], -np.inf)

        if maximise:
            return (pa,) + subset_dp(p, weight, lambda cand: cand.max(1), return_argmax=True)
        return pa, subset_dp(p, weight)

    def _dag_log_prob(self, A):
        """``log P(G = A | X)``: ``Σ_k g_k(pa_k)`` plus the log of the sum over the orders consistent with ``A`` of
        ``Π_k e^{c_k(pred_k)}``, minus ``log Z``."""
        pa, F = self._dag_order_dp(A)
        return float(F[-1] + self._g[np.arange(self.num_nodes), pa].sum() - self._log_Z)

    def _dag_order(self, A):
        """The most probable order consistent with the DAG ``A`` (upstream first)."""
        _, _, arg = self._dag_order_dp(A, maximise=True)
        order, T = [], (1 << self.num_nodes) - 1
        while T:
            k = int(arg[T])
            order.append(k)
            T ^= 1 << k
        return order[::-1]

    def edge_probs(self, num_samples=1000, seed=None, *, given=None, return_stderr=False):
        """``[p, p]`` tensor (float64), ``P[i, j] = P(i -> j | X, given)`` exactly, by the order dynamic programme of
        the posterior restricted to the evidence (``num_samples`` and ``seed`` are accepted for the shared
        interface and ignored; the standard error is 0). Raises ``ValueError`` for evidence of probability 0."""
        P = torch.as_tensor(self._given(given)._edge_probs)
        return (P, torch.zeros_like(P)) if return_stderr else P

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

    def causal_effects(self, num_samples=1000, seed=None, *, given=None, data=None, return_stderr=False):
        """``[p, p]`` Bayesian-averaged total causal effects ``E[(I - B)^{-1}]`` (diagonal 1; ``B`` the BGe
        posterior-mean weights of each DAG, :mod:`~pyro_dag.structure.causal`) given the evidence.

        Rao-Blackwellised over the DAGs: given an order the parent sets are independent and a directed path uses
        each column once, so ``E[(I - B)^{-1} | ≺] = (I - B̄_≺)^{-1}`` exactly, column ``j`` of ``B̄_≺`` the
        expectation of node ``j``'s weights over its parent sets within its predecessors (subset-sum tables,
        ``p ≤ 16``); only the order is sampled, ``num_samples`` exact order draws, with the standard error of the
        mean under ``return_stderr``. For ``p > 16``: the average over exact DAG samples.
        """
        if self.num_nodes > MAX_TABLE_NODES:
            return super().causal_effects(num_samples, seed, given=given, data=data, return_stderr=return_stderr)
        cond = self._given(given)
        X = self._data_for_effects(data)
        p = self.num_nodes
        zpos, zneg = mean_weight_zeta(X, cond._g, self._effect_interventions(data))
        _, orders = cond._sample(num_samples, seed)
        prefix = np.zeros((num_samples, p), dtype=np.int64)                # predecessor mask of each node
        rows = np.arange(num_samples)
        acc = np.zeros(num_samples, dtype=np.int64)
        for t in range(p):
            prefix[rows, orders[:, t]] = acc
            acc = acc | (np.int64(1) << orders[:, t])
        Bbar = np.zeros((num_samples, p, p))
        for j in range(p):
            Bbar[:, :, j] = expected_columns(zpos, zneg, cond._zeta, np.full(num_samples, j), prefix[:, j])
        E = np.linalg.inv(np.eye(p) - Bbar)
        mean = torch.as_tensor(E.mean(0))
        if return_stderr:
            return mean, torch.as_tensor(E.std(0) / math.sqrt(num_samples))
        return mean

    def sample(self, num_samples=1000, seed=None, *, given=None):
        """Exact DAG samples ``[num_samples, p, p]`` (float64 0/1): the order drawn backwards from the DP, then each
        node's parent set among its predecessors; with ``given``, from the posterior restricted to the evidence
        (exact conditional samples, no rejection). ``seed``: an int seeds a numpy generator; ``None`` draws that
        seed from torch's global generator."""
        return self._given(given)._sample(num_samples, seed)[0]

    def sample_orders(self, num_samples=1000, seed=None, *, given=None):
        """Exact order samples ``[num_samples, p]`` (int64, upstream first) from ``p(≺ | X, given)``, with the DAG
        samples drawn alongside: ``(orders, dags)``."""
        dags, orders = self._given(given)._sample(num_samples, seed)
        return torch.as_tensor(orders), dags

    def _sample(self, num_samples, seed):
        if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")
        if seed is None:
            seed = int(torch.randint(0, 2**62, ()).item())
        rng = np.random.default_rng(seed)
        p = self.num_nodes
        full = (1 << p) - 1
        out = np.zeros((num_samples, p, p))
        orders = np.zeros((num_samples, p), dtype=np.int64)
        for s in range(num_samples):
            T = full
            pos = p
            while T:
                ks = [k for k in range(p) if (T >> k) & 1]
                logw = np.array([self._L[T ^ (1 << k)] + self._beta[k, T ^ (1 << k)] for k in ks])
                k = ks[_draw(rng, logw)]
                S = T ^ (1 << k)
                pos -= 1
                orders[s, pos] = k
                subsets = submasks_up_to([i for i in range(p) if (S >> i) & 1], p)
                G = subsets[_draw(rng, self._g[k, subsets])]
                out[s, :, k] = (G >> np.arange(p)) & 1
                T = S
        return torch.as_tensor(out), orders


def _draw(rng, logw):
    w = np.exp(logw - np.max(logw))
    return int(rng.choice(len(w), p=w / w.sum()))


def exact_posterior(data, likelihood=None, edge_beliefs=None, *, config=None, node_names=None,
                    num_threads=DEFAULT_NUM_THREADS, graph_prior="edge", max_parents=None, gp_kernel="rbf",
                    gp_restarts=2, gp_penalty="bic", gp_scorer=None, interventions=None,
                    target_prior=0.1, **settings):
    """Exact edge posteriors (and exact DAG samples) of the model :func:`~pyro_dag.structure.fit` approximates, for
    ``p ≤ 20`` variables and the collapsed likelihoods; the same prior and settings as :func:`~pyro_dag.structure.fit`.

    The settings are a :class:`~pyro_dag.structure.StructureConfig` (a :class:`~pyro_dag.structure.FitConfig` works
    too: its model part is used): ``config=``, or its fields as keywords (``expected_parents``,
    ``prior_concentration``, ``belief_strength``, ``standardize``, ``likelihood_scale``, and the ``"linear"``
    score's ``noise_prior`` and ``weight_scale``), or both.

    :param data: ``[N, p]`` tensor, array or DataFrame of numbers.
    :param str likelihood: ``"linear"``, ``"bge"`` or ``"gp"`` (``None``: the config's, default ``"linear"``).
        ``"gp"``: the GP network score (Friedman & Nachman 2000, :mod:`~pyro_dag.structure.gp_scores`), one GP fit
        per (node, parent set) up to ``max_parents`` parents, ``p ≤ 16``.
    :param edge_beliefs: optional ``[p, p]`` prior beliefs ``P(i -> j)`` (0.5 = no opinion).
    :param StructureConfig config: the model settings.
    :param list node_names: names of the columns (default: a DataFrame's column names).
    :param int num_threads: intra-op threads while scoring (:func:`pyro_dag.threads.limit_threads`); ``None`` keeps
        the process's settings.
    :param str graph_prior: ``"edge"`` (the library's edge prior, as :func:`~pyro_dag.structure.fit`) or
        ``"fair"``: ``p(G_j) ∝ 1 / C(p - 1, |G_j|)`` (Eggeling et al. 2019), the prior of Wang, Wicker &
        Kwiatkowska 2022 (App. F); ``edge_beliefs`` and the edge-prior settings are then unused.
    :param int max_parents: in-degree bound (larger parent sets get probability 0; ``None``: none, except
        :data:`~pyro_dag.structure.gp_scores.GP_DEFAULT_MAX_PARENTS` for ``"gp"``).
    :param str gp_kernel: ``"rbf"`` or ``"matern52"`` (``"gp"``). :param int gp_restarts: L-BFGS starts per GP fit.
    :param gp_penalty: the GP score's charge per parent, ``"bic"`` (``½ log N``) or a number
        (:class:`~pyro_dag.structure.gp_scores.GPFamilyScorer`'s ``hyper_penalty``).
    :param gp_scorer: a :class:`~pyro_dag.structure.gp_scores.GPFamilyScorer` built on the same (standardised) data
        whose cached fits are reused (``"gp"``); the posterior keeps its scorer as ``gp_scorer``.
    :param interventions: known perfect interventions (Cooper & Yoo 1999; Eaton & Murphy 2007): a boolean
        ``[N, p]`` mask, True where the row's variable was set by the experiment, or GIES's
        ``(environments, targets)`` (:func:`~pyro_dag.structure.interventions.intervention_mask`). Node ``j`` is
        scored on the rows where it is not intervened; every query works on the result (``"linear"`` and
        ``"bge"``; ``"gp"`` too, with one GP per family fitted on its node's rows, but without
        :func:`~pyro_dag.structure.gp_interventional_effect`). The posterior keeps the mask as ``interventions``. In GIES's form an environment's targets may
        be ``"unknown"``: they are then learned with the graph (Eaton & Murphy 2007; ``"bge"`` only,
        :mod:`~pyro_dag.structure.uncertain_targets`), and
        :func:`~pyro_dag.structure.uncertain_targets.target_posterior` reports their posterior.
    :param float target_prior: the prior probability that an environment with unknown targets targets a given node.
    :returns: :class:`ExactStructurePosterior` (its ``config`` is the :class:`~pyro_dag.structure.StructureConfig`).
    """
    if config is None:
        config = StructureConfig()
    elif not isinstance(config, StructureConfig):
        raise TypeError(f"exact_posterior: config must be a pyro_dag.structure.StructureConfig; "
                        f"got {type(config).__name__}")
    config = config.structure_config()
    X, names = prepare_data(data, torch.float64, None, node_names)
    N, p = X.shape
    if p > MAX_NODES:
        raise ValueError(f"exact_posterior enumerates the 2^p subsets of the {p} variables; use it for p ≤ {MAX_NODES} "
                         "(pyro_dag.structure.fit scales further)")
    lik = likelihood if likelihood is not None else config.likelihood
    if lik not in EXACT_LIKELIHOODS:
        raise ValueError(f"exact_posterior needs a collapsed likelihood, 'linear' or 'bge', or 'gp'; got {lik!r}")
    if lik == "gp" and p > GP_MAX_NODES:
        raise ValueError(f"exact_posterior(likelihood='gp') fits one GP per parent set; use it for p ≤ {GP_MAX_NODES} "
                         "(or candidate_tables(likelihood='gp') with a few candidates per node)")
    if max_parents is not None and not (isinstance(max_parents, numbers.Integral) and max_parents >= 0):
        raise ValueError(f"max_parents must be a non-negative integer or None; got {max_parents!r}")
    try:
        config = config.replace(likelihood=lik, **settings)
    except TypeError as e:
        raise TypeError(f"exact_posterior() got an unexpected keyword argument: {e}") from None
    mask, unknown = intervention_mask(interventions, N, p, names, return_unknown=True)
    if unknown and lik != "bge":
        raise ValueError(f"unknown intervention targets are learned for likelihood='bge' only; got {lik!r}")
    if mask is not None and lik == "gp" and gp_scorer is not None:
        raise ValueError("exact_posterior(likelihood='gp', interventions=...) fits one GP scorer per group of nodes "
                         "sharing their non-intervened rows, so a gp_scorer of all rows cannot be reused; drop it")
    if config.standardize:
        X = standardize_columns(X, names)
    if graph_prior not in ("edge", "fair"):
        raise ValueError(f"graph_prior must be 'edge' or 'fair'; got {graph_prior!r}")
    if lik == "gp" and gp_scorer is None:
        from ..baselines.exact_gp import KERNELS

        if gp_kernel not in KERNELS:   # never a silent Matérn-5/2 score for "RBF"
            raise ValueError(f"exact_posterior: gp_kernel must be one of {list(KERNELS)} (lower case), got "
                             f"{gp_kernel!r}")
        if isinstance(gp_restarts, bool) or not isinstance(gp_restarts, numbers.Integral) or gp_restarts < 1:
            raise ValueError(f"exact_posterior: gp_restarts must be a positive integer, got {gp_restarts!r}")
    with limit_threads(num_threads):
        alpha, beta = config.edge_prior(p, edge_beliefs, dtype=torch.float64)
        q = (alpha / (alpha + beta)).numpy()
        np.fill_diagonal(q, 0.0)
        if lik == "gp" and mask is not None:
            cap = GP_DEFAULT_MAX_PARENTS if max_parents is None else max_parents
            log_f = config.likelihood_scale * interventional_gp_local_scores(
                X, mask, cap, kernel=gp_kernel, restarts=gp_restarts, hyper_penalty=gp_penalty)
        elif lik == "gp":
            if gp_scorer is None:
                gp_scorer = GPFamilyScorer(X, kernel=gp_kernel, restarts=gp_restarts, hyper_penalty=gp_penalty)
            cap = GP_DEFAULT_MAX_PARENTS if max_parents is None else max_parents
            log_f = config.likelihood_scale * gp_scorer.local_scores(cap)
        else:
            if unknown:
                log_f, target_model = uncertain_target_scores(X, mask, unknown, target_prior, config)
                log_f = config.likelihood_scale * log_f
                if max_parents is not None:
                    log_f[:, mask_bits(np.arange(1 << p), p).sum(1) > max_parents] = -np.inf
            elif mask is None:
                mech = collapsed_mechanism(lik, p, N, config)
                log_f = config.likelihood_scale * local_scores(mech, X)
            else:
                log_f = config.likelihood_scale * interventional_local_scores(lik, X, mask, config)
            if max_parents is not None:
                log_f[:, mask_bits(np.arange(1 << p), p).sum(1) > max_parents] = -np.inf
        const = 0.0
        if graph_prior == "fair":
            log_f = log_f + fair_prior_log(p, mask_bits(np.arange(1 << p), p).sum(1))[None, :]
            # q = 1/2: every order has p(p-1)/2 pairs, so the edge factors are one constant, removed below
            q = np.full((p, p), 0.5)
            np.fill_diagonal(q, 0.0)
            const = 0.5 * p * (p - 1) * math.log(0.5)
        post = ExactStructurePosterior(log_f, q, names)
        post.log_evidence -= const
    post.config = config
    post.data = X
    post.gp_scorer = gp_scorer
    post.interventions = mask
    post.target_model = target_model if unknown else None
    post._scoring = dict(likelihood=lik, max_parents=max_parents, graph_prior=graph_prior)
    return post
