"""Building an order circuit from leaf tables: :func:`order_spn` -> :class:`~pyro_dag.structure.OrderSPN`
(Wang, Wicker & Kwiatkowska 2022, *Tractable Uncertainty for Structure Learning*, ICML, §5, Algorithm "TRUST").

The leaf tables are an :class:`~pyro_dag.structure.ExactStructurePosterior` or
:class:`~pyro_dag.structure.CandidateTables`. The splits come from an oracle's orders (§5.1): orders from
:meth:`~pyro_dag.structure.ExactStructurePosterior.sample_orders` or order MCMC
(:func:`~pyro_dag.structure.order_mcmc`), the orders a :class:`~pyro_dag.structure.StructurePosterior` mixes over
(:meth:`~pyro_dag.structure.StructurePosterior.support`), any array of orders, or random splits; at a sum node the
orders that agree with the node's path (``S1`` first, then ``S2``) are cut at ``⌊|S2|/2⌋`` and the ``K`` heaviest
distinct splits kept (sub-problems of at most ``enum_threshold`` variables take all their balanced splits, as the
paper does). The coverage-greedy oracle, beyond the paper's samplers, keeps at every sum node the ``K`` balanced
splits of largest exact mass, by the sub-problem's order dynamic programme
(:func:`~pyro_dag.structure.subsets.subset_dp`). The sum weights are then the closed form of the exact ELBO (§5.2,
Prop. 5) or uniform.
"""
import itertools
import math
import numbers

import numpy as np
import torch

from .order_circuit import TABLE_TYPES, OrderSPN
from .order_sampler import order_mcmc
from .parent_set_tables import CandidateTables
from .subsets import bits_of, mask_bits, popcount, subset_dp
from .variational import StructurePosterior

__all__ = ["order_spn"]

DEFAULT_EXPANSION = (64, 16, 6, 2)
GREEDY_MAX_NODES = 20


def _split_log_masses(beta, S1, S2):
    """Exact log mass of every balanced split of the sub-problem ``(S1, S2)``: ``{S21 mask: log Σ`` over the
    orders of ``S2`` (after ``S1``) that put ``S21`` first of ``Π_i β_i(pred_i)}``, by a forward and a backward
    sum over the ``2^|S2|`` subsets of ``S2`` (the order dynamic programme of the sub-problem)."""
    p = beta.shape[0]
    nodes = np.array(bits_of(S2, p), dtype=np.int64)
    n = len(nodes)
    loc = np.arange(1 << n, dtype=np.int64)
    glob = (mask_bits(loc, n) * (1 << nodes)).sum(1) | S1                  # S1 ∪ the subset
    full = (1 << n) - 1
    # F(T): the orders of T placed first; B(U): the orders of U placed last, after the other nodes of S2
    F = subset_dp(n, lambda a, rest, T: beta[nodes[a], glob[rest]], _logaddexp_rows)
    B = subset_dp(n, lambda a, rest, U: beta[nodes[a], glob[full ^ U]], _logaddexp_rows)
    T = np.nonzero(mask_bits(loc, n).sum(1) == n // 2)[0]
    return dict(zip((glob[T] ^ S1).tolist(), (F[T] + B[full ^ T]).tolist()))


def _logaddexp_rows(cand):
    return np.logaddexp.reduce(cand, axis=1)


def _oracle_orders(tables, oracle, num_orders, seed):
    """``(orders [M, p] int64, weights [M])`` from the oracle, or ``None`` for random splits."""
    if oracle is None or (isinstance(oracle, str) and oracle == "random"):
        return None
    if isinstance(oracle, str):
        if oracle not in ("exact", "greedy", "mcmc"):
            raise ValueError(f"oracle must be 'exact', 'greedy', 'mcmc', 'random', a StructurePosterior or an array "
                             f"of orders; got {oracle!r}")
        if oracle == "greedy":
            if tables.num_nodes <= GREEDY_MAX_NODES:
                return None
            oracle = "mcmc"                            # for the sub-problems too large to enumerate
        if oracle == "exact" and isinstance(tables, CandidateTables):
            raise ValueError("oracle='exact' needs an ExactStructurePosterior; with CandidateTables use 'mcmc' "
                             "or 'greedy'")
        if oracle == "mcmc":
            return order_mcmc(tables, num_orders, seed=seed), np.ones(num_orders)
        orders, _ = tables.sample_orders(num_orders, seed=seed)
        return orders.numpy(), np.ones(len(orders))
    if isinstance(oracle, StructurePosterior):
        r, w = oracle.support()
        return torch.argsort(-r.detach().cpu(), -1).numpy(), w.detach().cpu().double().numpy()
    if isinstance(oracle, tuple) and len(oracle) == 2:
        orders, weights = oracle
    else:
        orders, weights = oracle, None
    orders = np.asarray(torch.as_tensor(orders).cpu(), dtype=np.int64)
    p = tables.num_nodes
    if orders.ndim != 2 or orders.shape[1] != p or not (np.sort(orders, 1) == np.arange(p)).all():
        raise ValueError(f"oracle orders must be an [M, {p}] array of permutations of 0..{p - 1} (upstream first)")
    weights = np.ones(len(orders)) if weights is None else np.asarray(torch.as_tensor(weights), dtype=float)
    if weights.shape != (len(orders),) or (weights < 0).any() or not weights.sum() > 0:
        raise ValueError("oracle weights must be [M], non-negative and not all zero")
    return orders, weights


def order_spn(tables, oracle="exact", *, num_orders=1000, expansion=DEFAULT_EXPANSION, enum_threshold=4,
              parameters="closed_form", fill=True, seed=0):
    """Build an :class:`OrderSPN` on the leaf tables of an exact posterior, its splits from an oracle (Wang, Wicker &
    Kwiatkowska 2022, §5, Algorithm "TRUST").

    :param ExactStructurePosterior tables: the model (local scores and edge prior) the leaves use
        (:func:`~pyro_dag.structure.exact_posterior`).
    :param oracle: where the splits come from: ``"exact"`` (``num_orders`` orders drawn from ``tables``),
        ``"greedy"`` (at every sum node the ``K`` balanced splits of largest exact mass in its sub-problem, by the
        sub-problem's order dynamic programme over the ``2^|S2|`` subsets of its variables: the coverage-greedy
        oracle, beyond the paper's samplers),
        a :class:`~pyro_dag.structure.StructurePosterior` (the orders of its support, with their weights),
        an ``[M, p]`` array of orders (upstream first) or ``(orders, weights)``, or ``"random"``/``None``
        (random balanced splits; the paper's ablation).
    :param expansion: ``K`` per sum layer (the last repeats); the paper's d = 16 setting is ``(64, 16, 6, 2)``.
    :param int enum_threshold: sub-problems of at most this many variables take all their balanced splits.
    :param str parameters: ``"closed_form"`` (the exact-ELBO optimum) or ``"uniform"`` (equal weights).
    :param bool fill: when the oracle proposes fewer than ``K`` distinct splits, add random distinct ones.
    :param int seed: seeds the oracle draws and the random splits.
    :returns: :class:`OrderSPN`.
    """
    if not isinstance(tables, TABLE_TYPES):
        raise TypeError(f"order_spn: tables must be an ExactStructurePosterior (exact_posterior(...)) or "
                        f"CandidateTables (candidate_tables(...)); got {type(tables).__name__}")
    expansion = tuple(int(k) for k in (expansion if not isinstance(expansion, numbers.Integral) else (expansion,)))
    if not expansion or min(expansion) < 1:
        raise ValueError(f"expansion must be positive integers; got {expansion}")
    if parameters not in ("closed_form", "uniform"):
        raise ValueError(f"parameters must be 'closed_form' or 'uniform'; got {parameters!r}")
    p = tables.num_nodes
    rng = np.random.default_rng(seed)
    got = _oracle_orders(tables, oracle, num_orders, seed)
    greedy = isinstance(oracle, str) and oracle == "greedy"
    if got is not None:
        orders, weights = got
        pos = np.argsort(orders, 1)                                          # [M, p] position of each node
        prefix = np.zeros((len(orders), p + 1), dtype=np.int64)
        prefix[:, 1:] = np.cumsum(1 << orders, 1)

    def balanced(nodes):
        h = len(nodes) // 2
        return [sum(1 << nodes[k] for k in c) for c in itertools.combinations(range(len(nodes)), h)]

    def splits(S1, S2, K):
        nodes = bits_of(S2, p)
        n, h = len(nodes), len(nodes) // 2
        if n <= enum_threshold:
            return balanced(nodes)
        chosen = []
        if greedy and n <= GREEDY_MAX_NODES:
            masses = _split_log_masses(tables._beta, S1, S2)
            chosen = [m for m, v in sorted(masses.items(), key=lambda t: -t[1])[:K] if np.isfinite(v)]
        elif got is not None:
            n1 = popcount(S1)
            ok = (prefix[:, n1] == S1) & (prefix[:, n1 + n] == (S1 | S2)) & (weights > 0)
            if not ok.any():
                ok = weights > 0
            sub = pos[ok][:, nodes]                                          # positions of S2's nodes
            first = np.argsort(sub, 1)[:, :h]
            masks = (1 << np.asarray(nodes, dtype=np.int64))[first].sum(1)
            tot = {}
            for m, w in zip(masks.tolist(), weights[ok].tolist()):
                tot[m] = tot.get(m, 0.0) + w
            chosen = [m for m, _ in sorted(tot.items(), key=lambda t: -t[1])[:K]]
        if ((got is None and not greedy) or fill) and len(chosen) < K:
            total = math.comb(n, h)
            if total <= 4 * K:
                rest = [m for m in balanced(nodes) if m not in set(chosen)]
                rng.shuffle(rest)
                chosen += rest[:K - len(chosen)]
            else:
                seen = set(chosen)
                while len(chosen) < K:
                    m = sum(1 << nodes[k] for k in rng.choice(n, size=h, replace=False))
                    if m not in seen:
                        seen.add(m)
                        chosen.append(m)
        return chosen

    regions, products = [], []
    cur_S1, cur_S2 = [0], [(1 << p) - 1]
    depth = 0
    while cur_S1:
        K = expansion[min(depth, len(expansion) - 1)]
        leaf = np.full(len(cur_S1), -1, dtype=np.int64)
        start = np.full(len(cur_S1), -1, dtype=np.int64)
        par, left, right, nS1, nS2 = [], [], [], [], []
        for r, (S1, S2) in enumerate(zip(cur_S1, cur_S2)):
            if popcount(S2) == 1:
                leaf[r] = S2.bit_length() - 1
                continue
            start[r] = len(par)
            for S21 in splits(S1, S2, K):
                par.append(r)
                left.append(len(nS1))
                nS1.append(S1)
                nS2.append(S21)
                right.append(len(nS1))
                nS1.append(S1 | S21)
                nS2.append(S2 ^ S21)
        regions.append({"S1": np.array(cur_S1, dtype=np.int64), "S2": np.array(cur_S2, dtype=np.int64),
                        "leaf": leaf, "start": start})
        if par:
            products.append({"parent": np.array(par, dtype=np.int64), "left": np.array(left, dtype=np.int64),
                             "right": np.array(right, dtype=np.int64), "logphi": np.zeros(len(par))})
        cur_S1, cur_S2 = nS1, nS2
        depth += 1
    spn = OrderSPN(tables, regions, products)
    spn.oracle = oracle if isinstance(oracle, str) else ("random" if oracle is None else type(oracle).__name__)
    if parameters == "closed_form":
        spn._fit_closed_form()
    else:
        spn._set_uniform()
    return spn
