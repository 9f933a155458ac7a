"""Structure learning beyond the exact posterior's ``p ≤ 20``: a PC skeleton, candidate parent sets and order MCMC.

The hybrid scheme of Kuipers, Suter & Moffa 2022 (*Efficient sampling and structure learning of Bayesian networks*,
JCGS 31(3)): a constraint-based search (the PC skeleton with Fisher-z tests, :func:`~pyro_dag.structure.pc_skeleton`)
restricts each node's parents to its skeleton neighbours plus one more round of neighbours
(:func:`~pyro_dag.structure.skeleton_candidates`); the Bayesian part then runs on the parent-set tables over those
candidates (:class:`~pyro_dag.structure.CandidateTables`, the model of :func:`~pyro_dag.structure.exact_posterior`
with every edge from a non-candidate forced absent). As in their iterative scheme, the search space is then
widened where the score asks for it: with the MAP DAG of the current space, every node whose local score improves by
one more parent from outside its candidates (their "plus-one" neighbourhood) gets that node as a candidate, and
the tables are rebuilt, until no node gains (``plus_one_rounds``).

On the final tables: the exact order dynamic programme for ``p ≤ exact_max_nodes`` (an
:class:`~pyro_dag.structure.ExactStructurePosterior`), otherwise order MCMC (Friedman & Koller 2003) with
Gibbs relocation moves: a node is taken out of the order and put back at a position drawn from the exact
conditional over all ``p`` positions (each position's score from two prefix sums, ``O(p)`` table look-ups per
move). The MAP (order, DAG) pair comes from greedy relocation on the max-tables
(``max_{G ⊆ S ∩ C_i} g_i(G)``), started from every chain's best order; edge marginals are Rao-Blackwellised over
the sampled orders, ``P(k -> i | σ) = 1 - exp(ζ_i(S ∖ k) - ζ_i(S))``. :class:`OrderMCMCPosterior` answers every
query of :class:`~pyro_dag.structure.posterior.DAGPosterior`; evidence ``given`` reruns the chains on the tables
restricted to it.
"""
import math
import numbers

import numpy as np
import torch

from pyro_dag.threads import DEFAULT_NUM_THREADS, limit_threads

from .config import EXACT_LIKELIHOODS, StructureConfig
from .data import prepare_data, standardize_columns
from .gp_scores import GP_DEFAULT_MAX_PARENTS, GPFamilyScorer
from .graph_priors import fair_prior_log
from .interventions import intervention_mask, interventional_family_scorer
from .parent_set_tables import MAX_CANDIDATES, CandidateTables, _with_prior
from .posterior import DAGPosterior, _check_num_samples
from .scores import FamilyScorer, _edge_prior_logs, collapsed_mechanism
from .skeleton import markov_blanket_graph, pc_skeleton, skeleton_candidates

__all__ = ["OrderMCMCPosterior", "hybrid_posterior", "order_relocation_mcmc"]

EXACT_MAX_NODES = 16
#: Candidates per node of the GP score's tables (every parent set of at most 2 of them is one GP fit: 37 per node).
GP_MAX_CANDIDATES = 8
#: Each node's largest single-parent GP gains added to its skeleton candidates under the GP score.
GP_PAIRWISE_CANDIDATES = 4


# --------------------------------------------------------------------------------------------- order search
class _FastTable:
    """``c_i(S) + arr[i, local_i(S)]`` for 1-D arrays of nodes ``i`` and predecessor masks ``S`` (the tables' ``β``
    when ``arr`` holds the subset sums ``ζ``, the max-product ``β`` when it holds the subset maxima), from one
    ``[n, p]`` bit matrix: ``local_i(S) = Σ_k bit_k(S) W[i, k]`` with ``W[i, k] = 2^{position of k in C_i}`` and
    ``c_i(S) = Σ_k bit_k(S) log(1 - q_ki)``."""

    def __init__(self, arr, cand, log_1mq):
        p = cand.shape[0]
        self.arr = arr
        self.W = np.zeros((p, p), dtype=np.int64)
        for i in range(p):
            for b, k in enumerate(cand[i]):
                if k >= 0:
                    self.W[i, k] = 1 << b
        self.L = np.ascontiguousarray(log_1mq.T)
        self.shifts = np.arange(p, dtype=np.int64)

    def __getitem__(self, key):
        i, S = key
        i = np.asarray(i, dtype=np.int64)
        bits = (np.asarray(S, dtype=np.int64)[:, None] >> self.shifts) & 1
        return (bits * self.L[i]).sum(1) + self.arr[i, (bits * self.W[i]).sum(1)]


def _sum_beta(tables):
    """The order score's per-node table ``β`` (a fast view for :class:`~pyro_dag.structure.CandidateTables`)."""
    if isinstance(tables, CandidateTables):
        return _FastTable(tables._zeta.arr, tables.cand, tables.log_1mq)
    return tables._beta


def _order_score(table, order):
    """``Σ_i table[σ_i, pred_i]`` of one order."""
    pred = np.concatenate([[0], np.cumsum(np.left_shift(1, order.astype(np.int64)))[:-1]])
    return float(table[order, pred].sum())


def _relocation_scores(table, order, v):
    """``[p]`` log score of ``order`` with node ``v`` moved to position ``t = 0..p-1`` (the others keep their relative
    order): ``table[v, prefix_t] + Σ_{r < t} table[u_r, prefix_r] + Σ_{r ≥ t} table[u_r, prefix_r ∪ v]`` with
    ``u_r`` the ``r``-th of the other nodes and ``prefix_r`` the mask of the ``r`` before it."""
    rest = order[order != v].astype(np.int64)
    masks = np.concatenate([[0], np.cumsum(np.left_shift(1, rest))])            # [p]: prefixes of rest
    A = table[rest, masks[:-1]]
    B = table[rest, masks[:-1] | (1 << int(v))]
    fv = table[np.full(len(masks), int(v)), masks]
    before = np.concatenate([[0.0], np.cumsum(A)])
    after = np.concatenate([np.cumsum(B[::-1])[::-1], [0.0]])
    with np.errstate(invalid="ignore"):
        out = fv + before + after
    return np.where(np.isnan(out), -np.inf, out), rest


def _insert(rest, v, t):
    return np.concatenate([rest[:t], [v], rest[t:]]).astype(np.int64)


def _hill_climb(table, order, max_sweeps=100):
    """Greedy relocation on ``table`` from ``order``: sweep the nodes, move each to its best position, until a sweep
    changes nothing. Returns ``(order, score)``."""
    order = np.asarray(order, dtype=np.int64)
    best = _order_score(table, order)
    for _ in range(max_sweeps):
        improved = False
        for v in order.copy():
            F, rest = _relocation_scores(table, order, v)
            t = int(np.argmax(F))
            if F[t] > best + 1e-9:
                order, best, improved = _insert(rest, v, t), float(F[t]), True
        if not improved:
            break
    return order, best


def _anneal(table, order, num_steps, rng, t_start=30.0, t_end=0.3):
    """Simulated annealing with the relocation moves on ``table`` (each move draws the new position from
    ``∝ exp(F(t) / T)``, ``T`` decreasing geometrically from ``t_start`` to ``t_end`` over ``num_steps``), then greedy
    relocation from the best order seen. Returns ``(order, score)``."""
    p = len(order)
    order = np.asarray(order, dtype=np.int64)
    best_order, best = order.copy(), _order_score(table, order)
    for step in range(num_steps):
        T = t_start * (t_end / t_start) ** (step / max(1, num_steps - 1))
        v = int(rng.integers(p))
        F, rest = _relocation_scores(table, order, v)
        m = F.max()
        if not np.isfinite(m):
            continue
        w = np.exp((F - m) / T)
        t = int(rng.choice(p, p=w / w.sum()))
        order = _insert(rest, v, t)
        if F[t] > best:
            best_order, best = order.copy(), float(F[t])
    return _hill_climb(table, best_order)


def _map_search(table, p, rng, restarts, anneal_steps):
    """The best of ``restarts`` annealing runs (:func:`_anneal`, ``anneal_steps`` moves each) from random orders."""
    return max((_anneal(table, rng.permutation(p), anneal_steps, rng) for _ in range(restarts)), key=lambda t: t[1])


def order_relocation_mcmc(tables, num_samples=1000, *, num_steps=None, burn_in=None, init=None, seed=None):
    """Order MCMC with Gibbs relocation moves on the tables of :class:`~pyro_dag.structure.CandidateTables` or
    :class:`~pyro_dag.structure.ExactStructurePosterior`: each step takes a node uniformly at random and puts it
    back at a position drawn from ``p(t) ∝ Π_i β_i(pred_i)`` over all ``p`` positions (the exact conditional given
    the relative order of the others, so every move is accepted and the chain leaves ``p(σ) ∝ Π_i β_i(σ_<i)``
    invariant).

    :param int num_samples: orders kept (evenly thinned from ``num_steps`` after ``burn_in``).
    :param int num_steps: moves after burn-in (default ``p`` per kept order).
    :param int burn_in: moves discarded first (default ``num_steps // 4``).
    :param init: starting order ``[p]`` (default: a random permutation).
    :returns: ``(orders [num_samples, p] int64, best_order [p], best_score)``: the kept orders (upstream first) and
        the highest-scoring order visited (by ``Σ_i β_i``).
    """
    _check_num_samples(num_samples)
    p = tables.num_nodes
    rng = np.random.default_rng(seed)
    num_steps = p * num_samples if num_steps is None else int(num_steps)
    burn_in = num_steps // 4 if burn_in is None else int(burn_in)
    beta = _sum_beta(tables)
    order = rng.permutation(p).astype(np.int64) if init is None else np.asarray(init, dtype=np.int64).copy()
    cur = _order_score(beta, order)
    best_order, best = order.copy(), cur
    keep = np.linspace(burn_in, burn_in + num_steps - 1, num_samples).astype(np.int64)
    out = np.empty((num_samples, p), dtype=np.int64)
    k = 0
    for step in range(burn_in + num_steps):
        v = int(rng.integers(p))
        F, rest = _relocation_scores(beta, order, v)
        m = F.max()
        if np.isfinite(m):
            w = np.exp(F - m)
            t = int(rng.choice(p, p=w / w.sum()))
            order, cur = _insert(rest, v, t), float(F[t])
            if cur > best:
                best_order, best = order.copy(), cur
        while k < num_samples and keep[k] == step:
            out[k] = order
            k += 1
    return out, best_order, best


# ----------------------------------------------------------------------------------------------- posterior
class OrderMCMCPosterior(DAGPosterior):
    """A posterior over DAGs from orders sampled by :func:`order_relocation_mcmc` on
    :class:`~pyro_dag.structure.CandidateTables` (see the module docstring).

    * :meth:`edge_probs`: Rao-Blackwellised over the kept orders (the exact ``P(k -> i | σ)`` averaged); the
      standard error is that of the mean over orders, treating them as independent (:attr:`chain_spread` shows the
      between-chain disagreement);
    * :meth:`sample`: a kept order drawn uniformly, then each node's parent set exactly given it;
    * :meth:`map_dag`: the best (order, DAG) pair found by greedy relocation on the max-tables from every chain's
      best order (a local optimum, not a certified one);
    * evidence ``given={(i, j): present}``: the chains are rerun on the tables restricted to it (cached).

    :ivar CandidateTables tables: the parent-set tables. :ivar numpy.ndarray orders: ``[M, p]`` kept orders.
    :ivar numpy.ndarray chain_spread: ``[p, p]`` max over chains minus min over chains of the edge marginals.
    :ivar float map_score: ``log`` unnormalised posterior of the MAP (order, DAG) pair.
    """

    def __init__(self, tables, num_samples=1000, num_chains=4, num_steps=None, seed=0, node_names=None,
                 num_restarts=16, _evidence=None):
        self.tables = tables
        self.num_nodes = tables.num_nodes
        self.node_names = node_names if node_names is not None else tables.node_names
        self.data = tables.data
        self.interventions = getattr(tables, "interventions", None)
        self.num_chains, self.num_steps, self.seed, self._num = int(num_chains), num_steps, seed, num_samples
        self.num_restarts = int(num_restarts)
        self._evidence = _evidence
        self._cache = {}
        self._run()

    def _run(self):
        p = self.num_nodes
        rng = np.random.default_rng(self.seed)
        bmax = _max_beta(self.tables)
        per_chain = max(1, -(-self._num // self.num_chains))
        # annealed relocation from random orders; every chain starts at the best order found
        climbs = [_anneal(bmax, rng.permutation(p), 50 * p, rng) for _ in range(self.num_restarts)]
        init = max(climbs, key=lambda t: t[1])[0]
        orders, bests = [], [c[0] for c in climbs]
        for c in range(self.num_chains):
            o, best_o, _ = order_relocation_mcmc(self.tables, per_chain, num_steps=self.num_steps, init=init,
                                                 seed=int(rng.integers(2 ** 62)))
            orders.append(o)
            bests.append(best_o)
        self.orders = np.concatenate(orders)
        self._chain_of = np.repeat(np.arange(self.num_chains), per_chain)
        cand = [_hill_climb(bmax, o) for o in bests]
        self.map_order, self.map_score = max(cand, key=lambda t: t[1])
        P = self._edge_probs_per_order(self.orders)
        self._P = P.mean(0)
        self._P_se = P.std(0) / math.sqrt(len(P))
        chains = np.stack([P[self._chain_of == c].mean(0) for c in range(self.num_chains)])
        self.chain_spread = chains.max(0) - chains.min(0)

    def _edge_probs_per_order(self, orders):
        """``[M, p, p]`` exact ``P(k -> i | σ)`` for each order."""
        M, p = orders.shape
        pos = np.argsort(orders, 1)
        bit = np.left_shift(np.int64(1), orders)
        prefix = np.concatenate([np.zeros((M, 1), dtype=np.int64), np.cumsum(bit, 1)[:, :-1]], 1)   # [M, p]
        pred = np.take_along_axis(prefix, pos, 1)                              # [M, node]: predecessor mask
        out = np.zeros((M, p, p))
        cand, zeta = self.tables.cand, self.tables._zeta
        for i in range(p):
            S = pred[:, i]
            z = zeta[np.full(M, i), S]
            for k in cand[i][cand[i] >= 0]:
                inside = ((S >> int(k)) & 1).astype(bool)
                if not inside.any():
                    continue
                zk = zeta[np.full(int(inside.sum()), i), S[inside] ^ (1 << int(k))]
                with np.errstate(invalid="ignore", over="ignore"):
                    pk = -np.expm1(zk - z[inside])
                out[np.nonzero(inside)[0], int(k), i] = np.where(np.isfinite(z[inside]), pk, 0.0)
        return np.clip(out, 0.0, 1.0)

    # ---------------------------------------------------------------------------------------------- evidence
    def _given(self, given):
        ev = self.parse_evidence(given, condition=True)
        if not ev:
            return self
        key = ev.key()
        if key not in self._cache:
            g, _ = self.tables._restricted_tables(ev)
            tabs = CandidateTables(g.arr, self.tables.cand, self.tables.log_1mq, self.node_names)
            tabs.data = self.tables.data
            tabs.interventions = self.tables.interventions
            if not np.isfinite(tabs._zeta.arr.max(1)).all():
                raise ValueError(f"the evidence {ev.edges} leaves a node no admissible parent set (a required "
                                 "parent outside its candidates?): it has probability zero under this posterior")
            self._cache[key] = OrderMCMCPosterior(tabs, self._num, self.num_chains, self.num_steps, self.seed,
                                                  self.node_names, self.num_restarts, _evidence=ev)
        return self._cache[key]

    # ----------------------------------------------------------------------------------------------- queries
    def edge_probs(self, num_samples=1000, seed=None, *, given=None, return_stderr=False):
        """``[p, p]`` ``P(i -> j | D, given)`` Rao-Blackwellised over the sampled orders (``num_samples`` and ``seed``
        are unused: the orders were drawn at construction)."""
        post = self._given(given)
        P = torch.as_tensor(post._P)
        return (P, torch.as_tensor(post._P_se)) if return_stderr else P

    def sample(self, num_samples=1000, seed=None, *, given=None):
        """``[num_samples, p, p]`` DAGs (float64 0/1): a kept order uniformly, then each node's parent set among its
        candidate predecessors with probability ``∝ exp(g_i(G))``."""
        _check_num_samples(num_samples)
        post = self._given(given)
        if seed is None:
            seed = int(torch.randint(0, 2 ** 62, ()).item())
        rng = np.random.default_rng(seed)
        p = self.num_nodes
        out = np.zeros((num_samples, p, p))
        idx = rng.integers(len(post.orders), size=num_samples)
        for s, o in enumerate(post.orders[idx]):
            pred = 0
            for i in o:
                subs = post.tables._parent_sets(int(i), pred)
                logw = post.tables._g[np.full(len(subs), int(i)), subs]
                w = np.exp(logw - logw.max())
                G = int(subs[rng.choice(len(subs), p=w / w.sum())])
                out[s, :, i] = (G >> np.arange(p)) & 1
                pred |= 1 << int(i)
        return torch.as_tensor(out)

    def map_dag(self, given=None, num_samples=1000, seed=None, *, return_order=False):
        """The best (order, DAG) pair found (greedy relocation on the max-tables from every chain's best order),
        given the evidence: ``[p, p]`` 0/1 float64 (and the order, upstream first, with ``return_order``)."""
        post = self._given(given)
        p = self.num_nodes
        A = np.zeros((p, p))
        pred = 0
        for i in post.map_order:
            subs = post.tables._parent_sets(int(i), pred)
            G = int(subs[np.argmax(post.tables._g[np.full(len(subs), int(i)), subs])])
            A[:, i] = (G >> np.arange(p)) & 1
            pred |= 1 << int(i)
        A = torch.as_tensor(A)
        return (A, [int(k) for k in post.map_order]) if return_order else A

    def prob(self, evidence, num_samples=1000, seed=None, *, return_stderr=False):
        """``P(evidence | D)``: the fraction of ``num_samples`` DAG samples satisfying it (sample-based)."""
        return super().prob(evidence, num_samples, seed, return_stderr=return_stderr)


def _max_beta(tables):
    """``c_i(S) + max_{G ⊆ S ∩ C_i} g_i(G)``: the max-product counterpart of the tables' ``β`` (the MAP search's
    score of an order is the sum of it over the nodes)."""
    return _FastTable(tables._max_table(tables._g).arr, tables.cand, tables.log_1mq)


# -------------------------------------------------------------------------------------------- construction
def _padded(scores, K):
    return np.concatenate([scores, np.full((1 << K) - len(scores), -np.inf)])


def hybrid_posterior(data, likelihood=None, edge_beliefs=None, *, alpha=0.2, rounds=1, max_candidates=None,
                     markov_blanket=True, max_parents=None, plus_one_rounds=3, method="auto", exact_max_nodes=EXACT_MAX_NODES,
                     num_samples=1000, num_chains=4, num_steps=None, seed=0, graph_prior="edge", config=None,
                     node_names=None, num_threads=DEFAULT_NUM_THREADS, gp_scorer=None, interventions=None, **settings):
    """Bayesian structure learning for tens of variables by the hybrid scheme of Kuipers, Suter & Moffa 2022 (see
    the module docstring): PC skeleton, candidate parents, plus-one expansion, then the exact order DP or order MCMC
    on the candidate tables. The model is :func:`~pyro_dag.structure.exact_posterior`'s (same likelihoods, priors
    and settings) restricted to the candidate parents.

    :param data: ``[N, p]`` tensor, array or DataFrame.
    :param str likelihood: ``"linear"``, ``"bge"`` or ``"gp"`` (``None``: the config's, default ``"linear"``).
        ``"gp"``: the GP network score (:mod:`~pyro_dag.structure.gp_scores`), parent sets up to
        ``max_parents`` (default 2); the Fisher-z skeleton sees only linear dependence, so each node's candidates
        also take its largest single-parent GP gains (:data:`GP_PAIRWISE_CANDIDATES`), and the plus-one rounds
        score with GP fits.
    :param edge_beliefs: optional ``[p, p]`` prior beliefs ``P(i -> j)`` (0.5: no opinion).
    :param float alpha: level of the Fisher-z tests of the skeleton (:func:`~pyro_dag.structure.pc_skeleton`) and
        of the Markov blanket (:func:`~pyro_dag.structure.markov_blanket_graph`). The tests only bound the search
        space, so the default is permissive: 0.2 (on ALARM with ``n = 500``, ``benchmarks/structure_networks.py``,
        0.05 dropped weak true parents on 2 of 5 seeds and the MAP CPDAG was 13-14 edges off; 0.2: none, at about
        twice the CPU time).
    :param bool markov_blanket: add the Markov-blanket pairs to each node's candidates.
    :param int rounds: neighbour rounds added to the skeleton neighbours (:func:`skeleton_candidates`).
    :param int max_candidates: ``K``, candidates per node (the tables hold ``2^K`` parent sets per node; at most 20;
        default 16, and :data:`GP_MAX_CANDIDATES` for ``"gp"``, whose every parent set within the cap is a GP fit).
    :param int max_parents: optional in-degree bound (larger parent sets get probability 0 and are not scored).
    :param int plus_one_rounds: rounds of the score-driven expansion (0: the skeleton's candidates only).
    :param str method: ``"exact"`` (the order DP on the tables, :class:`~pyro_dag.structure.ExactStructurePosterior`,
        ``p ≤ 20``), ``"mcmc"`` (:class:`OrderMCMCPosterior`) or ``"auto"`` (exact up to ``exact_max_nodes``).
    :param int num_samples: orders kept by the chains (``"mcmc"``). :param int num_chains: chains (``"mcmc"``).
    :param int num_steps: relocation moves per chain after burn-in (default ``p`` per kept order).
    :param int seed: seeds the chains.
    :param str graph_prior: ``"edge"`` or ``"fair"`` (as :func:`~pyro_dag.structure.candidate_tables`).
    :param config, node_names, num_threads, settings: as :func:`~pyro_dag.structure.exact_posterior`.
    :param gp_scorer: a :class:`~pyro_dag.structure.gp_scores.GPFamilyScorer` on the same (standardised) data whose
        cached fits are reused (``"gp"``); the posterior keeps its scorer as ``gp_scorer``.
    :param interventions: known perfect interventions, as :func:`~pyro_dag.structure.exact_posterior`'s (``"linear"``
        and ``"bge"``): the candidate tables score node ``j`` on the rows where it is not intervened (the PC
        skeleton that bounds the candidates is computed on all rows pooled).
    :returns: :class:`OrderMCMCPosterior` or :class:`~pyro_dag.structure.ExactStructurePosterior`, with the
        attributes ``skeleton`` (:class:`~pyro_dag.structure.skeleton.Skeleton`), ``candidates`` (the final
        candidate lists), ``expansion`` (edges the plus-one rounds added, per round) and ``config``.
    """
    if config is None:
        config = StructureConfig()
    elif not isinstance(config, StructureConfig):
        raise TypeError(f"hybrid_posterior: config must be a pyro_dag.structure.StructureConfig; "
                        f"got {type(config).__name__}")
    config = config.structure_config()
    lik = likelihood if likelihood is not None else config.likelihood
    if lik not in EXACT_LIKELIHOODS:
        raise ValueError(f"hybrid_posterior needs a collapsed likelihood, 'linear' or 'bge', or 'gp'; got {lik!r}")
    config = config.replace(likelihood=lik, **settings)
    if max_candidates is None:
        max_candidates = GP_MAX_CANDIDATES if lik == "gp" else 16
    if lik == "gp" and max_parents is None:
        max_parents = GP_DEFAULT_MAX_PARENTS
    if method not in ("auto", "exact", "mcmc"):
        raise ValueError(f"method must be 'auto', 'exact' or 'mcmc'; got {method!r}")
    if not (isinstance(max_candidates, numbers.Integral) and 1 <= max_candidates <= MAX_CANDIDATES):
        raise ValueError(f"max_candidates must be an integer in 1..{MAX_CANDIDATES}; got {max_candidates!r}")
    if not (isinstance(plus_one_rounds, numbers.Integral) and plus_one_rounds >= 0):
        raise ValueError(f"plus_one_rounds must be a non-negative integer; got {plus_one_rounds!r}")
    X, names = prepare_data(data, torch.float64, None, node_names)
    N, p = X.shape
    names = node_names if node_names is not None else names
    mask = intervention_mask(interventions, N, p, names)
    if mask is not None and lik == "gp":
        raise ValueError("hybrid_posterior(likelihood='gp') does not take interventions= yet (it would score the "
                         "interventional rows as observational); use likelihood='bge' or 'linear'")
    if config.standardize:
        X = standardize_columns(X, names)
    with limit_threads(num_threads):
        skeleton = pc_skeleton(X, alpha)
        corr = np.corrcoef(X.numpy(), rowvar=False)
        blanket = markov_blanket_graph(X, alpha) if markov_blanket else None
        expanded = skeleton_candidates(skeleton, rounds, p, corr)
        # each candidate's level: 2 a skeleton or Markov-blanket neighbour, 0 one of the expansion's; 3 (set by the
        # plus-one rounds) a MAP parent or a node added for its gain, never dropped
        cands, level = [], []
        for i in range(p):
            lv = {k: 0 for k in expanded[i]}
            lv.update({k: 2 for k in skeleton.neighbours(i)})
            if blanket is not None:
                lv.update({int(k): 2 for k in np.nonzero(blanket[i])[0]})
            ranked = sorted(lv, key=lambda k: (-lv[k], -abs(corr[i, k]), k))[:max_candidates]
            cands.append(sorted(ranked))
            level.append({k: lv[k] for k in ranked})
        if lik == "gp":
            scorer = gp_scorer if gp_scorer is not None else GPFamilyScorer(X)
            _add_gp_pairwise(scorer, cands, level, max_candidates, corr)
        else:
            scorer = (FamilyScorer(collapsed_mechanism(lik, p, N, config), X) if mask is None
                      else interventional_family_scorer(lik, X, mask, config))
        alpha_q, beta_q = config.edge_prior(p, edge_beliefs, dtype=torch.float64)
        q = (alpha_q / (alpha_q + beta_q)).numpy()
        np.fill_diagonal(q, 0.0)
        _, odds = _edge_prior_logs(q)                                          # [i, k]: log q_ki / (1 - q_ki)
        cache = {}

        def build(cands):
            K = max(1, max(len(c) for c in cands))
            cand = np.full((p, K), -1, dtype=np.int64)
            log_f = np.empty((p, 1 << K))
            for i, c in enumerate(cands):
                cand[i, :len(c)] = c
                key = (i, tuple(c))
                if key not in cache:
                    cache[key] = config.likelihood_scale * scorer.subsets(i, np.array(c, dtype=np.int64),
                                                                          max_parents)
                log_f[i] = _padded(cache[key], K)
            tabs = _with_prior(log_f, cand, graph_prior, config, edge_beliefs, max_parents, names)
            tabs.data = X
            tabs.interventions = mask
            return tabs

        tables = build(cands)
        rng = np.random.default_rng(seed)
        expansion = []
        for _ in range(plus_one_rounds):
            added = _plus_one(tables, scorer, odds, graph_prior, cands, level, max_candidates, max_parents,
                              config, rng)
            if not added:
                break
            expansion.append(added)
            tables = build(cands)
        use_exact = method == "exact" or (method == "auto" and p <= exact_max_nodes)
        if use_exact:
            post = tables.to_exact()
            post.node_names = names
        else:
            post = OrderMCMCPosterior(tables, num_samples, num_chains, num_steps, seed, names)
    post.skeleton, post.candidates, post.expansion, post.config = skeleton, cands, expansion, config
    post.data = X
    post.interventions = mask
    post.gp_scorer = scorer if lik == "gp" else None
    return post


def _add_gp_pairwise(scorer, cands, level, max_candidates, corr):
    """Add to each node's candidates (level 2) its :data:`GP_PAIRWISE_CANDIDATES` largest positive single-parent
    GP gains ``f_i({k}) - f_i(∅)`` (the parents a Fisher-z skeleton misses: dependence without correlation), making
    room by dropping the expansion's level-0 candidates, the least correlated first."""
    p = len(cands)
    scorer.prefetch([(i, [k]) for i in range(p) for k in range(p) if k != i])
    for i in range(p):
        gains = {k: scorer.score(i, [k]) - scorer.score(i, []) for k in range(p) if k != i}
        for k in sorted(gains, key=lambda k: (-gains[k], k))[:GP_PAIRWISE_CANDIDATES]:
            if gains[k] <= 0 or level[i].get(k, 0) >= 2:
                continue
            if k not in level[i] and len(cands[i]) >= max_candidates:
                spare = [u for u in cands[i] if level[i][u] == 0]
                if not spare:
                    continue
                drop = min(spare, key=lambda u: (abs(corr[i, u]), -u))
                cands[i].remove(drop)
                del level[i][drop]
            level[i][k] = 2
            if k not in cands[i]:
                cands[i] = sorted(cands[i] + [k])


def _plus_one(tables, scorer, odds, graph_prior, cands, level, max_candidates, max_parents, config, rng):
    """One round of the score-driven expansion: the MAP DAG of the current tables (greedy relocation from two
    random orders drawn from ``rng``), then for every node ``i`` with MAP parents ``G_i`` and every ``u`` outside its
    candidates, the gain ``f_i(G_i ∪ u) - f_i(G_i)`` plus the prior's log odds of ``u -> i``. Every ``u`` with a
    positive gain becomes a candidate of ``i``, the largest gains first, while ``i`` has room or holds a candidate
    of the neighbour expansion (level 0) that is not a MAP parent to drop (the least correlated first). MAP parents
    and added nodes get level 3. Updates ``cands`` (sorted lists) and ``level`` (dicts) in place; returns the added
    pairs ``(u, i)``."""
    p = tables.num_nodes
    bmax = _max_beta(tables)
    order, _ = _map_search(bmax, p, rng, 4, 50 * p)
    pred, parents = 0, {}
    for i in order:
        subs = tables._parent_sets(int(i), pred)
        G = int(subs[np.argmax(tables._g[np.full(len(subs), int(i)), subs])])
        parents[int(i)] = [k for k in range(p) if (G >> k) & 1]
        pred |= 1 << int(i)
    corr = np.abs(np.corrcoef(np.asarray(tables.data), rowvar=False))
    added = []
    for i in range(p):
        G = parents[i]
        level[i].update({k: 3 for k in G})
        if max_parents is not None and len(G) >= max_parents:
            continue
        outside = [u for u in range(p) if u != i and u not in cands[i]]
        if not outside:
            continue
        sets = np.full((len(outside) + 1, len(G) + 1), -1, dtype=np.int64)
        sets[:, :len(G)] = G
        sets[1:, len(G)] = outside
        f = config.likelihood_scale * scorer(i, sets)
        if graph_prior == "fair":
            prior = float(np.diff(fair_prior_log(p, [len(G), len(G) + 1]))[0])
        else:
            prior = odds[i, outside]
        gain = f[1:] - f[0] + prior
        for a in np.argsort(-gain):
            if not gain[a] > 0:
                break
            if len(cands[i]) >= max_candidates:
                spare = [k for k in cands[i] if level[i][k] == 0]
                if not spare:
                    break
                drop = min(spare, key=lambda k: (level[i][k], corr[i, k], -k))
                cands[i].remove(drop)
                del level[i][drop]
            u = outside[a]
            cands[i] = sorted(cands[i] + [u])
            level[i][u] = 3
            added.append((u, i))
    return added
