"""Order MCMC on parent-set tables: :func:`order_mcmc`.

Orders from ``p(σ) ∝ Π_i β_i(σ_<i)`` by Metropolis-Hastings with random transpositions (order MCMC, Friedman &
Koller 2003) on the tables of an :class:`~pyro_dag.structure.ExactStructurePosterior` or
:class:`~pyro_dag.structure.CandidateTables`: the oracle an order circuit (Wang, Wicker & Kwiatkowska 2022,
*Tractable Uncertainty for Structure Learning*, ICML, §5.1) uses where the exact order sampler is out of reach.
"""
import math
import numbers

import numpy as np

__all__ = ["order_mcmc"]


def order_mcmc(tables, num_samples=1000, *, num_steps=None, burn_in=None, seed=None):
    """Orders from ``p(σ) ∝ Π_i β_i(σ_<i)`` by Metropolis-Hastings with random transpositions (order MCMC, Friedman
    & Koller 2003) on the tables of an :class:`~pyro_dag.structure.ExactStructurePosterior` or
    :class:`~pyro_dag.structure.CandidateTables`.

    :param int num_samples: orders returned (thinned evenly from ``num_steps`` after ``burn_in``).
    :param int num_steps: chain length after burn-in (default ``20 num_samples``); ``burn_in`` default
        ``num_steps // 4``.
    :returns: ``[num_samples, p]`` int64 orders (upstream first).
    """
    if not isinstance(num_samples, numbers.Integral) or num_samples < 1:
        raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")
    p = tables.num_nodes
    rng = np.random.default_rng(seed)
    num_steps = 20 * num_samples if num_steps is None else int(num_steps)
    burn_in = num_steps // 4 if burn_in is None else int(burn_in)
    beta = tables._beta
    nodes = np.arange(p)

    def scores(order):
        pred = np.concatenate([[0], np.cumsum(1 << order.astype(np.int64))[:-1]])
        return beta[order, pred]

    # start from the best of a few random orders
    order = max((rng.permutation(p) for _ in range(20)), key=lambda o: scores(o).sum())
    cur = scores(order)
    total = burn_in + num_steps
    keep = set(np.linspace(burn_in, total - 1, num_samples).astype(int).tolist())
    out = []
    for step in range(total):
        a, b = sorted(rng.choice(p, size=2, replace=False))
        new = order.copy()
        new[a], new[b] = new[b], new[a]
        seg = slice(a, b + 1)
        pred = np.concatenate([[0], np.cumsum(1 << new.astype(np.int64))[:-1]])
        s_new = beta[new[seg], pred[seg]]
        delta = s_new.sum() - cur[seg].sum()
        if np.isfinite(delta) and math.log(rng.random() + 1e-300) < delta or not np.isfinite(cur[seg].sum()):
            order = new
            cur = cur.copy()
            cur[seg] = s_new
        if step in keep:
            out.append(order.copy())
    del nodes
    return np.array(out, dtype=np.int64)
