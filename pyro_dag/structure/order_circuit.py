"""An order-based probabilistic circuit over (order, DAG) pairs with exact queries: :class:`OrderSPN`.

The Order SPN of Wang, Wicker & Kwiatkowska 2022 (*Tractable Uncertainty for Structure Learning*, ICML, §4,
Definition 1). Every node of the circuit is a sub-problem ``(S1, S2)``: order the variables ``S2``, which come
right after the already placed ``S1``, and choose their parent sets, each within its predecessors. A **sum node**
``(S1, S2)`` (``|S2| > 1``) mixes ``K`` distinct balanced splits ``S2 = S21 ∪ S22`` (``|S21| = ⌊|S2|/2⌋``), each a
**product node** whose children ``(S1, S21)`` and ``(S1 ∪ S21, S22)`` are independent given the split (Prop. 1);
a **leaf** ``(S1, {i})`` is node ``i``'s parent-set distribution within ``S1``,
``p(G_i) ∝ p̃_i(G_i) 1[G_i ⊆ S1]``, the exact restricted posterior column (Prop. 7). Distinct splits make the
circuit deterministic, so edge marginals, the probability of any conjunction of edge presences and absences, the
conditionals, the most probable (order, DAG) pair, (conditional) sampling and the expected causal effects are exact
in the circuit, each one pass over it (§4.4, Table 1).

Here the leaves use the tables of :class:`~pyro_dag.structure.ExactStructurePosterior` (its model: BGe or the
collapsed linear-Gaussian score with the library's edge prior, every other node a candidate parent, so
``p ≤ 20``) or of :class:`~pyro_dag.structure.CandidateTables` (parents restricted to candidate sets); with the
order-dependent prior factor ``c_i(S1) = Σ_{k ∈ S1} log(1 - q_ki)`` the unnormalised leaf value is
``β_i(S1) = c_i(S1) + log Σ_{G ⊆ S1} p̃_i(G)``, so a circuit whose support holds every order *is* the exact
posterior. The sum weights have the closed form of the exact ELBO (§5.2, Prop. 5): ``φ_k = softmax_k(log Z_k)``,
``Z_k`` the unnormalised mass of child ``k``; then ``q(σ, G) = p̃(σ, G) 1[σ ∈ support] / Z_support``, the ELBO is
``log Z_support`` and ``KL(q ‖ p) = -log coverage``, ``coverage = Z_support / Z`` (:attr:`OrderSPN.coverage`).
:func:`~pyro_dag.structure.order_spn` (:mod:`~pyro_dag.structure.order_circuit_builder`) builds the circuit.
"""
import math

import networkx as nx
import numpy as np
import torch

from .exact import ExactStructurePosterior
from .map_dag import full_evidence, most_probable_equivalent
from .parent_set_tables import CandidateTables
from .posterior import DAGPosterior, _check_num_samples
from .subsets import popcount

__all__ = ["OrderSPN", "TABLE_TYPES"]

TABLE_TYPES = (ExactStructurePosterior, CandidateTables)     # the leaf tables a circuit can use


def _group_lse(x, starts):
    """logsumexp of ``x`` over the contiguous groups starting at ``starts``."""
    m = np.maximum.reduceat(x, starts)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    counts = np.diff(np.append(starts, len(x)))
    with np.errstate(divide="ignore"):
        return np.log(np.add.reduceat(np.exp(x - np.repeat(m_safe, counts)), starts)) + m_safe


class OrderSPN(DAGPosterior):
    """A regular Order SPN over (order, DAG) pairs (Wang, Wicker & Kwiatkowska 2022, Definition 1; see the module
    docstring), with the :class:`~pyro_dag.structure.posterior.DAGPosterior` queries answered exactly in the
    circuit. Build it with :func:`~pyro_dag.structure.order_spn`.

    Layout (one entry per depth): region levels (``S1``, ``S2`` bitmasks; leaves have ``|S2| = 1``) alternate with
    product levels (parent sum, left and right child regions, ``log φ``); the products of a sum are contiguous.

    :ivar float log_Z_support: ``log Σ_{σ ∈ support} Π_i β_i(σ_<i)``, the closed-form ELBO (in the units of the
        tables' unnormalised posterior).
    :ivar float coverage: posterior mass of the supported orders under the exact posterior of the same model.
    :ivar int num_orders: number of orders in the support (Prop. 6).
    """

    def __init__(self, tables, regions, products, node_names=None):
        if not isinstance(tables, TABLE_TYPES):
            raise TypeError(f"OrderSPN: tables must be an ExactStructurePosterior or CandidateTables; "
                            f"got {type(tables).__name__}")
        self.tables = tables
        self.num_nodes = tables.num_nodes
        self.node_names = node_names if node_names is not None else tables.node_names
        self.data = tables.data
        self.interventions = getattr(tables, "interventions", None)
        self.regions = regions      # list of dicts: S1, S2, leaf (node or -1), start (first product or -1)
        self.products = products    # list of dicts: parent, left, right, logphi
        self._cache = {}

    # ------------------------------------------------------------------------------------------ construction
    @property
    def num_edges(self):
        """Edges of the circuit (it is a tree: one per non-root node)."""
        return sum(len(r["S1"]) for r in self.regions[1:]) + sum(len(pr["parent"]) for pr in self.products)

    @property
    def num_orders(self):
        """Number of orders in the support (the complete sub-circuits; distinct by determinism)."""
        counts = [np.ones(len(r["S1"]), dtype=object) for r in self.regions]
        for lvl in range(len(self.products) - 1, -1, -1):
            pr, reg = self.products[lvl], self.regions[lvl]
            child = counts[lvl + 1][pr["left"]] * counts[lvl + 1][pr["right"]]
            out = np.ones(len(reg["S1"]), dtype=object)
            is_sum = reg["leaf"] < 0
            out[is_sum] = 0
            for k, parent in enumerate(pr["parent"]):
                out[parent] += child[k]
            counts[lvl] = out
        return int(counts[0][0])

    def _leaf_values(self, lvl, zeta_e):
        """Normalised log leaf values of region level ``lvl``: ``log Z^E_i(S1) - log Z_i(S1)`` (leaves only)."""
        reg = self.regions[lvl]
        leaf = reg["leaf"] >= 0
        v = np.zeros(len(reg["S1"]))
        i, S1 = reg["leaf"][leaf], reg["S1"][leaf]
        v[leaf] = zeta_e[i, S1] - self.tables._zeta[i, S1]
        return v

    def _upward(self, leaf_fn, op="lse"):
        """Region and product values bottom-up: ``(V_regions, V_products)`` lists of arrays; sums reduce
        ``log φ + V_child`` by logsumexp (``op="lse"``) or max (``op="max"``, with argmax products)."""
        L = len(self.regions)
        V = [None] * L
        VP = [None] * len(self.products)
        arg = [None] * len(self.products)
        for lvl in range(L - 1, -1, -1):
            v = leaf_fn(lvl)
            if lvl < len(self.products) and len(self.products[lvl]["parent"]):
                pr = self.products[lvl]
                vp = V[lvl + 1][pr["left"]] + V[lvl + 1][pr["right"]]
                VP[lvl] = vp
                x = pr["logphi"] + vp
                sums = self.regions[lvl]["leaf"] < 0
                starts = self.regions[lvl]["start"][sums]
                if op == "lse":
                    v[sums] = _group_lse(x, starts)
                else:
                    m = np.maximum.reduceat(x, starts)
                    v[sums] = m
                    counts = np.diff(np.append(starts, len(x)))
                    grp = np.repeat(np.arange(len(starts)), counts)
                    best = np.full(len(starts), -1, dtype=np.int64)
                    hit = np.nonzero(x == m[grp])[0]
                    best[grp[hit[::-1]]] = hit[::-1]               # first maximiser of each group
                    a = np.full(len(v), -1, dtype=np.int64)
                    a[sums] = best
                    arg[lvl] = a
            V[lvl] = v
        return V, VP, arg

    def _leaf_log_masses(self, lvl):
        """``β_i(S1)`` at the leaf regions of level ``lvl`` (0 at the other regions)."""
        reg = self.regions[lvl]
        leaf = reg["leaf"] >= 0
        v = np.zeros(len(reg["S1"]))
        v[leaf] = self.tables._beta[reg["leaf"][leaf], reg["S1"][leaf]]
        return v

    def _fit_closed_form(self, set_weights=True):
        """The exact-ELBO optimum (Prop. 5): ``φ_k = softmax_k`` of the children's unnormalised log masses (with
        ``set_weights=False`` only :attr:`log_Z_support` and :attr:`coverage` are computed)."""
        t = self.tables
        saved = [pr["logphi"] for pr in self.products]

        for pr in self.products:
            pr["logphi"] = np.zeros(len(pr["parent"]))
        V, VP, _ = self._upward(self._leaf_log_masses)
        for lvl, pr in enumerate(self.products):
            pr["logphi"] = VP[lvl] - V[lvl][pr["parent"]] if set_weights else saved[lvl]
        self.log_Z_support = float(V[0][0])
        log_Z = t._log_Z
        self.coverage = math.exp(min(0.0, self.log_Z_support - log_Z)) if np.isfinite(log_Z) else float("nan")
        self._cache = {}

    def _set_uniform(self):
        for lvl, pr in enumerate(self.products):
            counts = np.bincount(pr["parent"], minlength=len(self.regions[lvl]["S1"]))
            pr["logphi"] = -np.log(counts[pr["parent"]])
        self._fit_closed_form(set_weights=False)

    def elbo(self):
        """The exact ELBO ``E_q[log p̃(σ, G)] + H(q)`` of the circuit's current weights (§5.2; determinism makes the
        entropy decompose): sums ``Σ_k φ_k (ELBO_k - log φ_k)``, products add, leaves ``β_i(S1)``. Equal to
        :attr:`log_Z_support` for the closed-form weights and at most the tables' ``log Z``."""
        E = [None] * len(self.regions)
        for lvl in range(len(self.regions) - 1, -1, -1):
            e = self._leaf_log_masses(lvl)
            if lvl < len(self.products) and len(self.products[lvl]["parent"]):
                pr = self.products[lvl]
                ep = E[lvl + 1][pr["left"]] + E[lvl + 1][pr["right"]]
                phi = np.exp(pr["logphi"])
                contrib = phi * (ep - pr["logphi"])
                sums = self.regions[lvl]["leaf"] < 0
                e[sums] = np.add.reduceat(contrib, self.regions[lvl]["start"][sums])
            E[lvl] = e
        return float(E[0][0])

    # ---------------------------------------------------------------------------------------------- evidence
    def _evidence_pass(self, ev):
        key = ev.key()
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        g_e, zeta_e = self.tables._restricted_tables(ev)
        V, VP, _ = self._upward(lambda lvl: self._leaf_values(lvl, zeta_e))
        out = (g_e, zeta_e, V, VP)
        if len(self._cache) >= 8:
            self._cache.clear()
        self._cache[key] = out
        return out

    def _given(self, given):
        ev = self.parse_evidence(given, condition=True)
        g_e, zeta_e, V, VP = self._evidence_pass(ev)
        if not np.isfinite(V[0][0]):
            raise ValueError(f"the evidence {ev.edges} has probability zero under the circuit (outside its support "
                             "of orders, or its required edges form a cycle), so nothing can be conditioned on it")
        return ev, g_e, zeta_e, V, VP

    def _child_log_weights(self, lvl, V, VP):
        """``log`` posterior weight of each product of level ``lvl`` within its sum, given the evidence."""
        pr = self.products[lvl]
        parent_v = V[lvl][pr["parent"]]
        with np.errstate(invalid="ignore"):
            w = pr["logphi"] + VP[lvl] - parent_v
        return np.where(np.isfinite(parent_v), w, -np.inf)

    def prob(self, evidence, num_samples=1000, seed=None, *, return_stderr=False):
        """``q(evidence)`` exactly: one bottom-up pass with the leaves' evidence masses (``num_samples``, ``seed``
        ignored; standard error 0). A complete assignment of all ``p (p - 1)`` edges gives ``q(G)``."""
        ev = self.parse_evidence(evidence)
        V = self._evidence_pass(ev)[2]
        P = math.exp(min(0.0, V[0][0])) if np.isfinite(V[0][0]) else 0.0
        return (P, 0.0) if return_stderr else P

    def log_prob(self, evidence):
        """``log q(evidence)`` (``-inf`` when impossible in the circuit)."""
        return float(self._evidence_pass(self.parse_evidence(evidence))[2][0][0])

    def edge_probs(self, num_samples=1000, seed=None, *, given=None, return_stderr=False):
        """``[p, p]`` ``q(i -> j | given)`` for all pairs at once, exactly: top-down reach probabilities of the
        leaves given the evidence times each leaf's conditional edge probability
        ``1 - Z^E_j(S1 ∖ i) / Z^E_j(S1)`` (``num_samples``, ``seed`` ignored; standard error 0)."""
        ev, g_e, zeta_e, V, VP = self._given(given)
        p = self.num_nodes
        P = np.zeros((p, p))
        reach = [np.zeros(1)]
        for lvl in range(len(self.regions)):
            reg = self.regions[lvl]
            r = reach[lvl]
            leaf = reg["leaf"] >= 0
            if leaf.any():
                j, S1, w = reg["leaf"][leaf], reg["S1"][leaf], np.exp(r[leaf])
                base = zeta_e[j, S1]
                for i in range(p):
                    has = ((S1 >> i) & 1 == 1) & (w > 0)
                    if not has.any():
                        continue
                    jj, SS = j[has], S1[has]
                    cond = -np.expm1(np.minimum(zeta_e[jj, SS ^ (1 << i)] - base[has], 0.0))
                    np.add.at(P, (i, jj), w[has] * cond)
            if lvl < len(self.products) and len(self.products[lvl]["parent"]):
                pr = self.products[lvl]
                rp = r[pr["parent"]] + self._child_log_weights(lvl, V, VP)
                nxt = np.full(len(self.regions[lvl + 1]["S1"]), -np.inf)
                nxt[pr["left"]] = rp
                nxt[pr["right"]] = rp
                reach.append(nxt)
        P = torch.as_tensor(np.clip(P, 0.0, 1.0))
        return (P, torch.zeros_like(P)) if return_stderr else P

    def map_dag(self, given=None, num_samples=1000, seed=None, *, return_order=False, return_ties=False):
        """The most probable DAG of the circuit given the evidence, among the Markov equivalence class of its most
        probable (order, DAG) pair: a max-product pass with back-pointers finds that pair exactly (determinism makes
        it the joint maximum over (σ, G), Wang, Wicker & Kwiatkowska 2022, §4.4), then the DAGs of its class are
        compared by their probability ``q(G | given)`` (:meth:`log_prob` with every edge given), as
        :meth:`ExactStructurePosterior.map_dag <pyro_dag.structure.ExactStructurePosterior.map_dag>` does; equally
        probable DAGs are reported by a :class:`~pyro_dag.structure.map_dag.MAPTieWarning`.

        :param bool return_order: also return an order consistent with the DAG (upstream first).
        :param bool return_ties: also return ``[k, p, p]``, the ``k`` equally probable DAGs (the returned one first).
        :returns: ``[p, p]`` 0/1 float64 DAG (then the order and the ties, as asked).
        """
        ev, g_e, _, _, _ = self._given(given)
        p = self.num_nodes
        gmax = self.tables._max_table(g_e)

        def leaf_fn(lvl):
            reg = self.regions[lvl]
            leaf = reg["leaf"] >= 0
            v = np.zeros(len(reg["S1"]))
            v[leaf] = gmax[reg["leaf"][leaf], reg["S1"][leaf]] - self.tables._zeta[reg["leaf"][leaf],
                                                                                    reg["S1"][leaf]]
            return v

        V, _, arg = self._upward(leaf_fn, op="max")
        leaves = []
        stack = [(0, 0)]
        while stack:
            lvl, r = stack.pop()
            reg = self.regions[lvl]
            if reg["leaf"][r] >= 0:
                leaves.append((int(reg["leaf"][r]), int(reg["S1"][r])))
                continue
            k = arg[lvl][r]
            pr = self.products[lvl]
            stack.append((lvl + 1, int(pr["right"][k])))
            stack.append((lvl + 1, int(pr["left"][k])))
        A = np.zeros((p, p))
        for i, S1 in leaves:
            subs = self.tables._parent_sets(i, S1)
            G = int(subs[np.argmax(g_e[i, subs])])
            A[:, i] = (G >> np.arange(p)) & 1
        order = [i for i, S1 in sorted(leaves, key=lambda t: popcount(t[1]))]
        best, ties = most_probable_equivalent(A, lambda D: self.log_prob(full_evidence(D)), ev, "map_dag")
        if not np.array_equal(best.numpy(), A):
            order = [int(k) for k in nx.lexicographical_topological_sort(nx.DiGraph(best.numpy()))]
        out = (best,) + ((order,) if return_order else ()) + ((ties,) if return_ties else ())
        return out[0] if len(out) == 1 else out

    def sample(self, num_samples=1000, seed=None, *, given=None, return_orders=False):
        """Exact samples of the circuit ``[num_samples, p, p]`` (float64 0/1) given the evidence: top-down, each sum
        picks a product with its posterior weight ``φ_k V_k(E) / V(E)``, each reached leaf ``(S1, {i})`` draws
        ``G_i ⊆ S1`` with the evidence's admissible parent sets. ``seed``: an int seeds a numpy generator, ``None``
        draws one from torch's global generator. With ``return_orders`` also the ``[num_samples, p]`` orders."""
        _check_num_samples(num_samples)
        ev, g_e, _, V, VP = self._given(given)
        if seed is None:
            seed = int(torch.randint(0, 2**62, ()).item())
        rng = np.random.default_rng(seed)
        p = self.num_nodes
        sid = np.arange(num_samples)
        rid = np.zeros(num_samples, dtype=np.int64)
        leaf_s, leaf_i, leaf_S1 = [], [], []
        for lvl in range(len(self.regions)):
            reg = self.regions[lvl]
            is_leaf = reg["leaf"][rid] >= 0
            leaf_s.append(sid[is_leaf])
            leaf_i.append(reg["leaf"][rid[is_leaf]])
            leaf_S1.append(reg["S1"][rid[is_leaf]])
            sid, rid = sid[~is_leaf], rid[~is_leaf]
            if not len(sid):
                break
            pr = self.products[lvl]
            lw = self._child_log_weights(lvl, V, VP)
            sums = reg["leaf"] < 0
            starts = reg["start"][sums]
            counts = np.diff(np.append(starts, len(lw)))
            grp = np.repeat(np.arange(len(starts)), counts)
            w = np.exp(lw)
            tot = np.add.reduceat(w, starts)
            with np.errstate(invalid="ignore", divide="ignore"):
                cum = (np.cumsum(w) - np.repeat(np.cumsum(tot) - tot, counts)) / np.repeat(tot, counts)
            cum = np.where(np.isfinite(cum), np.clip(cum, 0.0, 1.0), 1.0) + grp
            sum_index = np.cumsum(sums) - 1                                    # region -> index among sums
            u = rng.random(len(sid)) * (1 - 1e-12) + sum_index[rid]
            k = np.searchsorted(cum, u, side="right")
            k = np.minimum(k, reg["start"][rid] + counts[sum_index[rid]] - 1)
            sid = np.concatenate([sid, sid])
            rid = np.concatenate([pr["left"][k], pr["right"][k]])
        leaf_s, leaf_i, leaf_S1 = map(np.concatenate, (leaf_s, leaf_i, leaf_S1))
        out = np.zeros((num_samples, p, p))
        orders = np.zeros((num_samples, p), dtype=np.int64)
        pos = np.array([popcount(m) for m in leaf_S1], dtype=np.int64)
        orders[leaf_s, pos] = leaf_i
        pairs = {}
        for n, key in enumerate(zip(leaf_i.tolist(), leaf_S1.tolist())):
            pairs.setdefault(key, []).append(n)
        for (i, S1), rows in pairs.items():
            subs = self.tables._parent_sets(i, S1)
            lw = g_e[i, subs]
            w = np.exp(lw - lw.max())
            G = subs[rng.choice(len(subs), size=len(rows), p=w / w.sum())]
            out[leaf_s[rows], :, i] = (G[:, None] >> np.arange(p)) & 1
        out = torch.as_tensor(out)
        return (out, torch.as_tensor(orders)) if return_orders else out

    def causal_effects(self, num_samples=1000, seed=None, *, given=None, data=None, return_stderr=False):
        """``[p, p]`` Bayesian-averaged total causal effects ``E_q[(I - B)^{-1}]`` (diagonal 1), exactly in the
        circuit (Wang, Wicker & Kwiatkowska 2022, §4.4, Prop. 4), ``B`` the BGe posterior-mean weights given each
        DAG (:mod:`~pyro_dag.structure.causal`).

        Every circuit node ``(S1, S2)`` holds ``T = I + BCE`` restricted to paths inside its columns ``S2``; a
        leaf ``(S1, {j})`` has column ``j`` = ``E_{G_j}[E[b_j | G_j]]`` over its parent-set distribution given the
        evidence; a product is ``T_left @ T_right`` (the exit-point sum over the last node of ``S1 ∪ S21`` on a
        path, including direct entries from ``S1``); a sum averages its products with their posterior weights.
        The leaf expectations use ``[p, p, 2^p]`` subset-sum tables (memory ``16 p² 2^p`` bytes, ``p ≤ 16``).
        ``num_samples``, ``seed`` are ignored; the standard error is 0.
        """
        ev, g_e, zeta_e, V, VP = self._given(given)
        X = self._data_for_effects(data)
        p = self.num_nodes
        key = ("bce_tables", ev.key())
        tabs = self._cache.get(key)
        if tabs is None:
            tabs = self._cache[key] = self.tables._effect_tables(X, g_e, self._effect_interventions(data))
        eye = np.eye(p)
        T = [None] * len(self.regions)
        for lvl in range(len(self.regions) - 1, -1, -1):
            reg = self.regions[lvl]
            n = len(reg["S1"])
            t = np.broadcast_to(eye, (n, p, p)).copy()
            leaf = np.nonzero(reg["leaf"] >= 0)[0]
            if len(leaf):
                j, S1 = reg["leaf"][leaf], reg["S1"][leaf]
                col = self.tables._expected_columns(tabs, zeta_e, j, S1)           # [n_leaf, i]
                col[np.arange(len(leaf)), j] = 1.0
                t[leaf, :, j] = col
            if lvl < len(self.products) and len(self.products[lvl]["parent"]):
                pr = self.products[lvl]
                tp = T[lvl + 1][pr["left"]] @ T[lvl + 1][pr["right"]]
                w = np.exp(self._child_log_weights(lvl, V, VP))
                sums = np.nonzero(reg["leaf"] < 0)[0]
                t[sums] = np.add.reduceat(w[:, None, None] * tp, reg["start"][sums])
            T[lvl] = t
            if lvl + 1 < len(T):
                T[lvl + 1] = None
        out = torch.as_tensor(T[0][0])
        return (out, torch.zeros_like(out)) if return_stderr else out

    # ----------------------------------------------------------------------------------------- enumeration
    def support(self):
        """Every order in the support with its circuit weight: a list of ``(order, log Π φ)`` (small ``p`` only:
        the list has :attr:`num_orders` entries)."""
        if self.num_orders > 200_000:
            raise ValueError(f"the support has {self.num_orders} orders; support() is for small circuits")

        def walk(lvl, r):
            reg = self.regions[lvl]
            if reg["leaf"][r] >= 0:
                return [([int(reg["leaf"][r])], 0.0)]
            pr = self.products[lvl]
            out = []
            start = reg["start"][r]
            k = start
            while k < len(pr["parent"]) and pr["parent"][k] == r:
                for o1, w1 in walk(lvl + 1, pr["left"][k]):
                    for o2, w2 in walk(lvl + 1, pr["right"][k]):
                        out.append((o1 + o2, pr["logphi"][k] + w1 + w2))
                k += 1
            return out

        return walk(0, 0)
