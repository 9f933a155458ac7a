"""Parent-set tables over candidate parents, for order circuits beyond the exact posterior's ``p ≤ 20``.

Wang, Wicker & Kwiatkowska 2022 (*Tractable Uncertainty for Structure Learning*, ICML, §4.3 and App. B), after
Kuipers, Suter & Moffa 2018 and Viinikka et al. 2020: every node ``i`` gets a fixed candidate set ``C_i`` of at
most ``K`` possible parents, and its parent-set distribution given the predecessors ``S`` is restricted to
``G_i ⊆ S ∩ C_i``. The local scores are then needed for the ``2^K`` subsets of ``C_i`` only (``p 2^K`` instead of
``p 2^{p-1}``), so a circuit over ``p = 32`` nodes is a matter of seconds to build. The model is the library's
(:func:`~pyro_dag.structure.exact_posterior`'s) with every edge from a non-candidate forced absent: with the edge
prior ``q`` the order-dependent factor ``c_i(S) = Σ_{k ∈ S} log(1 - q_ki)`` still runs over all of ``S``, so with
``C_i`` = every other node the tables *are* the exact posterior's. Results are exact for this restricted posterior.

:func:`candidate_tables` builds :class:`CandidateTables` from data, with candidates given explicitly, the ``K``
highest of a ``[p, p]`` score, or chosen from the data (:mod:`~pyro_dag.structure.candidate_selection`, by
default the greedy selection of Viinikka et al. 2020, *Towards Scalable Bayesian Learning of Causal DAGs*,
NeurIPS, §4.1); edges a user already believes in can be forced into the sets (``include``). Optional in-degree
bound; the library's edge prior or the "fair" prior of Eggeling et al. 2019 (``p(G_i) ∝ 1 / C(p - 1, |G_i|)``,
:mod:`~pyro_dag.structure.graph_priors`; the prior of Wang, Wicker & Kwiatkowska 2022, App. F). Orders from the
tables come from order MCMC (:func:`~pyro_dag.structure.order_mcmc`).
"""
import numbers

import numpy as np
import torch

from pyro_dag.threads import DEFAULT_NUM_THREADS, limit_threads

from .candidate_selection import (GREEDY_MAX_SIZE, REVERSE_TOP, candidate_sets, forced_candidates,
                                  top_candidates)
from .causal import node_scatters
from .config import EXACT_LIKELIHOODS, StructureConfig
from .data import prepare_data, standardize_columns
from .exact import MAX_NODES, ExactStructurePosterior
from .gp_scores import GP_DEFAULT_MAX_PARENTS, GPFamilyScorer
from .graph_priors import GRAPH_PRIORS, fair_prior_log
from .interventions import intervention_mask, interventional_family_scorer
from .order_sampler import order_mcmc
from .scores import FamilyScorer, _edge_prior_logs, collapsed_mechanism
from .subsets import zeta_transform

__all__ = ["CandidateTables", "candidate_tables"]

MAX_CANDIDATES = 20
MAX_EFFECT_CANDIDATES = 14


class _LocalTable:
    """A ``[p, 2^K]`` table over each node's candidate subsets, indexed by global predecessor masks:
    ``table[i, S] = arr[i, local_i(S)]``, ``local_i(S)`` the bits of ``S ∩ C_i`` in candidate order (``i``, ``S``
    int arrays or scalars, broadcast)."""

    def __init__(self, arr, cand):
        self.arr, self.cand = arr, cand
        self.shape = arr.shape

    def local(self, i, S):
        c = self.cand[i]                                                     # [..., K]
        bits = (np.asarray(S, dtype=np.int64)[..., None] >> np.maximum(c, 0)) & 1
        bits = np.where(c >= 0, bits, 0)
        return (bits << np.arange(c.shape[-1], dtype=np.int64)).sum(-1)

    def __getitem__(self, key):
        i, S = key
        i, S = np.broadcast_arrays(np.asarray(i, dtype=np.int64), np.asarray(S, dtype=np.int64))
        return self.arr[i, self.local(i, S)]


class _BetaTable(_LocalTable):
    """``β_i(S) = c_i(S) + zeta_i(local_i(S))`` with ``c_i(S) = Σ_{k ∈ S} log(1 - q_ki)`` over all of ``S``."""

    def __init__(self, zeta, cand, log_1mq):
        super().__init__(zeta.arr, cand)
        self.log_1mq = log_1mq                                               # [k, i]

    def __getitem__(self, key):
        i, S = key
        i, S = np.broadcast_arrays(np.asarray(i, dtype=np.int64), np.asarray(S, dtype=np.int64))
        p = self.log_1mq.shape[0]
        bits = (S[..., None] >> np.arange(p, dtype=np.int64)) & 1            # [..., p]
        c = (bits * self.log_1mq.T[i]).sum(-1)
        return c + self.arr[i, self.local(i, S)]


class CandidateTables:
    """Per-node parent-set tables over candidate parents (see the module docstring): the leaf tables an
    :class:`~pyro_dag.structure.OrderSPN` uses in place of an :class:`~pyro_dag.structure.ExactStructurePosterior`.

    :param log_g: ``[p, 2^K]`` log weights of node ``i``'s parent sets, entry ``m`` the subset of ``C_i`` given by
        the bits of ``m`` in candidate order (score plus the graph prior's odds; ``-inf``: excluded).
    :param cand: ``[p, K]`` int64 candidate parents (``-1`` pads a shorter set).
    :param log_1mq: ``[p, p]`` ``log(1 - q_ki)`` ``[k, i]`` (zero for the fair prior).
    :ivar int num_nodes: ``p``. :ivar list candidates: ``C_i`` as lists.
    """

    def __init__(self, log_g, cand, log_1mq, node_names=None):
        p = cand.shape[0]
        self.num_nodes = p
        self.node_names = node_names
        self.data = None
        self.interventions = None
        self.cand = np.asarray(cand, dtype=np.int64)
        self.K = self.cand.shape[1]
        self.candidates = [[int(k) for k in row if k >= 0] for row in self.cand]
        self.log_1mq = log_1mq
        self._g = _LocalTable(log_g, self.cand)
        self._zeta = _LocalTable(zeta_transform(log_g.copy(), self.K), self.cand)
        self._beta = _BetaTable(self._zeta, self.cand, log_1mq)
        self._log_Z_cache = None

    @property
    def _log_Z(self):
        """``log Σ_σ Π_i β_i(σ_<i)`` of the restricted model by the exact order DP (``p ≤ 20``; ``nan`` beyond)."""
        if self._log_Z_cache is None:
            self._log_Z_cache = self.to_exact()._log_Z if self.num_nodes <= MAX_NODES else float("nan")
        return self._log_Z_cache

    def to_exact(self):
        """The same restricted model as an :class:`~pyro_dag.structure.ExactStructurePosterior` (``p ≤ 20``): its
        ``[p, 2^p]`` scores with every set outside ``C_i`` at ``-inf`` (the exact reference for the circuit)."""
        p = self.num_nodes
        if p > MAX_NODES:
            raise ValueError(f"to_exact needs p ≤ {MAX_NODES}; got p = {p}")
        masks = np.arange(1 << p, dtype=np.int64)
        log_f = np.full((p, 1 << p), -np.inf)
        for i in range(p):
            inside = (masks & ~self.candidate_mask(i)) == 0
            log_f[i, inside] = self._g[np.full(inside.sum(), i), masks[inside]]
        q = -np.expm1(self.log_1mq)
        np.fill_diagonal(q, 0.0)
        # ExactStructurePosterior adds log(q / (1 - q)) per parent; the tables already hold it
        _, odds = _edge_prior_logs(q)
        bits = ((masks[:, None] >> np.arange(p)) & 1).astype(float)
        out = ExactStructurePosterior(log_f - odds @ bits.T, q, self.node_names)
        out.data = self.data
        out.interventions = self.interventions
        return out

    def with_prior(self, graph_prior):
        """The same candidates and scores under another graph prior (``"edge"`` or ``"fair"``), without
        re-scoring."""
        out = _with_prior(self._log_f, self.cand, graph_prior, self.config, self._edge_beliefs, self.max_parents,
                          self.node_names)
        out.data = self.data
        out.interventions = self.interventions
        return out

    def candidate_mask(self, i):
        """Bitmask of ``C_i``."""
        return int(sum(1 << k for k in self.candidates[i]))

    def _restricted_tables(self, ev):
        """``(g, zeta)`` with the parent sets violating the evidence ``ev`` at ``-inf`` (a required parent outside
        ``C_j`` leaves node ``j`` no admissible set)."""
        if not ev:
            return self._g, self._zeta
        g, zeta = self._g.arr.copy(), self._zeta.arr.copy()
        loc = np.arange(1 << self.K, dtype=np.int64)
        for j in ev.nodes:
            req, forb = int(ev.required[j]), int(ev.forbidden[j])
            if req & ~self.candidate_mask(j):
                g[j] = -np.inf
                zeta[j] = -np.inf
                continue
            r = int(self._g.local(j, req))
            f = int(self._g.local(j, forb))
            bad = ((loc & r) != r) | ((loc & f) != 0)
            g[j, bad] = -np.inf
            zeta[j] = zeta_transform(g[j].copy(), self.K)
        return _LocalTable(g, self.cand), _LocalTable(zeta, self.cand)

    def _max_table(self, g):
        """``max_{G ⊆ S ∩ C_i} g_i(G)`` as a table indexed like ``g``."""
        return _LocalTable(zeta_transform(g.arr.copy(), self.K, op=np.maximum), self.cand)

    def _parent_sets(self, i, S):
        """Global masks of every admissible parent set of ``i`` within ``S`` (the subsets of ``S ∩ C_i``)."""
        subs = np.zeros(1, dtype=np.int64)
        for k in self.candidates[i]:
            if (S >> k) & 1:
                subs = np.concatenate([subs, subs | (1 << k)])
        return subs

    def _effect_tables(self, X, g, interventions=None):
        """Subset sums of the BGe posterior-mean weights over the candidate subsets, ``(zpos, zneg)`` each
        ``[p, K, 2^K]`` (``[j, k, m]``: weight of candidate ``k`` of node ``j``; positive and negative parts apart)."""
        if self.K > MAX_EFFECT_CANDIDATES:
            raise ValueError(f"exact causal effects keep p K 2^K numbers; use at most {MAX_EFFECT_CANDIDATES} "
                             f"candidates per node, got K = {self.K}")
        Rn = node_scatters(X, interventions).numpy()                          # [j, p, p]
        K = self.K
        loc = np.arange(1 << K, dtype=np.int64)
        bits = ((loc[:, None] >> np.arange(K)) & 1).astype(float)             # [2^K, K]
        m = np.zeros((self.num_nodes, K, 1 << K))
        for j in range(self.num_nodes):
            R = Rn[j]
            c = self.cand[j]
            a = bits * (c >= 0)
            cc = np.maximum(c, 0)
            Rcc = R[np.ix_(cc, cc)]
            M = a[:, :, None] * a[:, None, :] * Rcc + np.eye(K) * (1 - a)[:, None, :]
            rhs = a * R[cc, j]
            m[j] = (np.linalg.solve(M, rhs[..., None])[..., 0] * a).T
        with np.errstate(divide="ignore"):
            pos = g.arr[:, None, :] + np.log(np.maximum(m, 0.0))
            neg = g.arr[:, None, :] + np.log(np.maximum(-m, 0.0))
        return zeta_transform(pos, K), zeta_transform(neg, K)

    def _expected_columns(self, tabs, zeta, j, S):
        """``[n, p]`` ``E[b_j | G_j ⊆ S ∩ C_j]`` for nodes ``j`` ``[n]`` and predecessor masks ``S`` ``[n]``."""
        zpos, zneg = tabs
        loc = zeta.local(j, S)
        z = zeta.arr[j, loc][:, None]
        with np.errstate(invalid="ignore"):
            colc = np.exp(zpos[j, :, loc] - z) - np.exp(zneg[j, :, loc] - z)            # [n, K]
        colc = np.where(np.isfinite(z), colc, 0.0)
        out = np.zeros((len(j), self.num_nodes))
        c = self.cand[j]
        rows = np.repeat(np.arange(len(j)), self.K).reshape(len(j), self.K)
        ok = c >= 0
        np.add.at(out, (rows[ok], c[ok]), colc[ok])
        return out

    def sample_orders(self, num_samples=1000, seed=None):
        """Orders from :func:`order_mcmc` (``(orders [n, p], None)``: no DAGs drawn alongside)."""
        return torch.as_tensor(order_mcmc(self, num_samples, seed=seed)), None


def _bge_candidate_scores(X, j, cand, mech, max_size=None):
    """``[2^K]`` log evidence of node ``j`` for every subset of its candidates ``cand`` (``[K]``, ``-1`` pads), by the
    block determinants of :class:`~pyro_dag.structure.scores.FamilyScorer` (any collapsed mechanism, despite the
    name); subsets larger than ``max_size`` get ``-inf``."""
    return FamilyScorer(mech, X).subsets(j, cand, max_size)


def candidate_tables(data, likelihood="bge", num_candidates=12, *, candidates=None, candidate_scores=None,
                     selection="greedy", include=None, max_parents=None, graph_prior="edge", edge_beliefs=None,
                     config=None, node_names=None, num_threads=DEFAULT_NUM_THREADS, gp_scorer=None, interventions=None,
                     **settings):
    """Build :class:`CandidateTables` from data (the model of :func:`~pyro_dag.structure.exact_posterior`, with
    parents restricted to candidate sets; Wang, Wicker & Kwiatkowska 2022, §4.3).

    :param data: ``[N, p]`` tensor, array or DataFrame.
    :param str likelihood: ``"bge"`` or ``"linear"`` (collapsed), or ``"gp"`` (the GP network score,
        :mod:`~pyro_dag.structure.gp_scores`: parent sets up to ``max_parents``, default 2; without explicit
        candidates the ``K`` largest single-parent GP gains).
    :param int num_candidates: ``K``, candidates per node (at most ``p - 1`` and 20).
    :param candidates: explicit candidate sets, a list of ``p`` lists of node indices (overrides the rest).
    :param candidate_scores: ``[p, p]`` score of ``k -> i`` at ``[k, i]`` (e.g. a fit's edge marginals); the
        ``K`` highest per node are kept (overrides ``selection``).
    :param str selection: how the ``K`` candidates are chosen from the data (:func:`select_candidates`):
        ``"greedy"`` (default; Viinikka et al. 2020, the choice of Wang, Wicker & Kwiatkowska 2022) or
        ``"pairwise"`` (the single-parent score gain ``f_i({k}) - f_i(∅)``); for other search settings pass
        ``candidates=select_candidates(...)``.
    :param include: edges forced into the candidate sets (pairs ``(k, i)`` or an evidence dict; see
        :func:`select_candidates`): evidence one means to condition on needs its present edges among the
        candidates, or it has probability 0.
    :param int max_parents: optional in-degree bound (parent sets larger than this get probability 0; the greedy
        search then scores sets up to this size only).
    :param str graph_prior: ``"edge"`` (the library's edge prior, as :func:`~pyro_dag.structure.exact_posterior`)
        or ``"fair"`` (Eggeling et al. 2019; the prior of Wang, Wicker & Kwiatkowska 2022).
    :param edge_beliefs, config, node_names, num_threads, settings: as :func:`~pyro_dag.structure.exact_posterior`.
    :param gp_scorer: a :class:`~pyro_dag.structure.gp_scores.GPFamilyScorer` on the same (standardised) data, whose
        cached fits are reused (``"gp"``).
    :param interventions: known perfect interventions, as :func:`~pyro_dag.structure.exact_posterior`'s (``"linear"``
        and ``"bge"``): node ``j`` is scored, and its candidates chosen, on the rows where it is not intervened.
    :returns: :class:`CandidateTables` (with ``data``, the data as scored, ``config`` and ``interventions``).
    """
    if config is None:
        config = StructureConfig()
    config = config.structure_config()
    if graph_prior not in GRAPH_PRIORS:
        raise ValueError(f"graph_prior must be one of {GRAPH_PRIORS}; got {graph_prior!r}")
    if likelihood not in EXACT_LIKELIHOODS:
        raise ValueError(f"candidate_tables needs a collapsed likelihood, 'linear' or 'bge', or 'gp'; "
                         f"got {likelihood!r}")
    config = config.replace(likelihood=likelihood, **settings)
    X, names = prepare_data(data, torch.float64, None, node_names)
    N, p = X.shape
    mask = intervention_mask(interventions, N, p, node_names if node_names is not None else names)
    if mask is not None and likelihood == "gp":
        raise ValueError("candidate_tables(likelihood='gp') does not take interventions= yet (it would score the "
                         "interventional rows as observational); use likelihood='bge' or 'linear'")
    if config.standardize:
        X = standardize_columns(X, names)
    if likelihood == "gp":
        gp_scorer = gp_scorer if gp_scorer is not None else GPFamilyScorer(X)
        if max_parents is None:
            max_parents = GP_DEFAULT_MAX_PARENTS
        if candidates is None and candidate_scores is None:
            # the single-parent GP gains f_i({k}) - f_i(∅) (pairwise selection; the greedy search would fit a GP
            # for every set it scores)
            gp_scorer.prefetch([(i, [k]) for i in range(p) for k in range(p) if k != i])
            single = np.array([[gp_scorer.score(i, [k]) - gp_scorer.score(i, []) if k != i else -np.inf
                                for i in range(p)] for k in range(p)])
            candidate_scores = single
    mech = gp_scorer if likelihood == "gp" else collapsed_mechanism(likelihood, p, N, config)
    iv_scorer = None if mask is None else interventional_family_scorer(likelihood, X, mask, config)
    names = node_names if node_names is not None else names
    forced = forced_candidates(include, p, names)
    with limit_threads(num_threads):
        if candidates is not None:
            if len(candidates) != p:
                raise ValueError(f"candidates must hold one list per node ({p}); got {len(candidates)}")
            sets = []
            for i, c in enumerate(candidates):
                c = sorted({int(k) for k in c})
                if i in c or any(not 0 <= k < p for k in c):
                    raise ValueError(f"candidates[{i}] = {c}: candidates are other nodes' indices in 0..{p - 1}")
                sets.append(sorted(set(c) | set(forced[i])))
        elif candidate_scores is not None:
            if not isinstance(num_candidates, numbers.Integral) or num_candidates < 0:
                raise ValueError(f"num_candidates must be a non-negative integer; got {num_candidates!r}")
            K = min(int(num_candidates), p - 1)
            S = np.asarray(torch.as_tensor(candidate_scores, dtype=torch.float64))
            if S.shape != (p, p):
                raise ValueError(f"candidate_scores must be [{p}, {p}]; got {S.shape}")
            sets = top_candidates(S, forced, K)
        else:
            size = GREEDY_MAX_SIZE if max_parents is None else min(GREEDY_MAX_SIZE, int(max_parents))
            sets = candidate_sets(X, mech, num_candidates, selection, None, size, forced, REVERSE_TOP, iv_scorer)
        K = max(len(c) for c in sets)
        if K > MAX_CANDIDATES:
            raise ValueError(f"at most {MAX_CANDIDATES} candidates per node (2^K tables); got {K}")
        cand = np.full((p, K), -1, dtype=np.int64)
        for i, c in enumerate(sets):
            cand[i, :len(c)] = c
        scorer = mech if likelihood == "gp" else (iv_scorer or FamilyScorer(mech, X))
        log_f = np.stack([scorer.subsets(i, cand[i], max_parents) for i in range(p)])                # [p, 2^K]
        log_f = config.likelihood_scale * log_f
    out = _with_prior(log_f, cand, graph_prior, config, edge_beliefs, max_parents, names)
    out.data = X
    out.interventions = mask
    out.gp_scorer = mech if likelihood == "gp" else None
    out.selection = ("explicit" if candidates is not None else
                     "scores" if candidate_scores is not None else selection)
    return out


def _with_prior(log_f, cand, graph_prior, config, edge_beliefs, max_parents, node_names):
    """:class:`CandidateTables` from raw local scores ``log_f`` ``[p, 2^K]`` and a graph prior."""
    if graph_prior not in GRAPH_PRIORS:
        raise ValueError(f"graph_prior must be one of {GRAPH_PRIORS}; got {graph_prior!r}")
    p, K = cand.shape
    loc = np.arange(1 << K, dtype=np.int64)
    bits = ((loc[:, None] >> np.arange(K)) & 1).astype(float)
    size = bits.sum(1).astype(np.int64)
    if graph_prior == "fair":
        log_g = log_f + fair_prior_log(p, size)[None, :]
        log_1mq = np.zeros((p, p))
    else:
        alpha, beta = config.edge_prior(p, edge_beliefs, dtype=torch.float64)
        q = (alpha / (alpha + beta)).numpy()
        np.fill_diagonal(q, 0.0)
        log_1mq, odds = _edge_prior_logs(q)                                   # [k, i], [i, k]
        add = np.where(cand >= 0, odds[np.arange(p)[:, None], np.maximum(cand, 0)], 0.0)   # [i, K]
        log_g = log_f + add @ bits.T
    if max_parents is not None:
        log_g[:, size > int(max_parents)] = -np.inf
    log_g[~np.isfinite(log_f)] = -np.inf
    out = CandidateTables(log_g, cand, log_1mq, node_names)
    out.config, out.graph_prior, out.max_parents = config, graph_prior, max_parents
    out._log_f, out._edge_beliefs = log_f, edge_beliefs
    return out
