"""Experiments with unknown targets: the targets learned with the graph (Eaton & Murphy 2007, *Exact Bayesian
Structure Learning from Uncertain Interventions*, AISTATS).

An environment whose targets are unknown (an inhibitor with off-target effects) may change the mechanism of any
node. As Eaton & Murphy's intervention nodes, each such environment ``e`` is a potential extra parent of every node
``j``: if ``e`` targets ``j``, ``x_j``'s mechanism given its parents has its own parameters in ``e``'s rows (a
mechanism change, which includes a perfect intervention as the case where the parents' weights are zero); if not,
``e``'s rows follow the shared mechanism. With ``T_j`` the set of unknown environments that target ``j``, each
independently with prior probability ``π`` (``target_prior``), the BGe local score sums them out exactly::

    f_j(G) = log Σ_{T ⊆ E} π^|T| (1 - π)^(|E| - |T|) exp( F_j(G; B_j ∪ ⋃_{e ∉ T} U_e) + Σ_{e ∈ T} F_j(G; U_e) ),

``F_j(G; rows)`` the BGe family score on those rows, ``U_e`` environment ``e``'s rows and ``B_j`` the rows of the
environments with known targets where ``j`` is not intervened. The sum over ``2^|E|`` target sets needs one table of
``log|R_G|`` over the ``2^p`` parent sets per row union (assembled from per-environment sufficient statistics),
so ``|E| ≤ 10`` and ``p ≤ 16``. Every query of the exact posterior then works on the graph; the posterior over
targets, ``P(e ∈ T_j | D)``, averages the exact conditional ``P(e ∈ T_j | pa_j, D)`` over exact DAG samples
(:func:`target_posterior`).
"""
import math

import numpy as np
import torch

from .mechanisms import BGeSEM

__all__ = ["MAX_UNKNOWN_ENVIRONMENTS", "TargetModel", "target_posterior", "uncertain_target_scores"]

MAX_UNKNOWN_ENVIRONMENTS = 10
MAX_NODES = 16


def _logdet_table(R):
    """``[2^p]`` ``log|R_G|`` of every principal submatrix (``log|R_∅| = 0``)."""
    from .interventions import _masked_logdets

    return _masked_logdets(R)


def _stats(X):
    X = torch.as_tensor(X, dtype=torch.float64)
    return X.shape[0], X.sum(0), X.T @ X


def _R_from_stats(mech, n, s, S):
    """BGe's posterior scatter ``R`` from ``(n, Σx, Σxxᵀ)`` (as :meth:`BGeSEM._R` computes from the rows)."""
    p = s.shape[0]
    t = mech.alpha_mu * (mech.alpha_w - p - 1) / (mech.alpha_mu + 1)
    xbar = s / n
    scatter = S - n * torch.outer(xbar, xbar)
    R = t * torch.eye(p, dtype=torch.float64) + scatter + (n * mech.alpha_mu / (n + mech.alpha_mu)) * torch.outer(
        xbar, xbar)
    return R, t


class TargetModel:
    """The per-node, per-target-set family scores of :func:`uncertain_target_scores`, kept for
    :func:`target_posterior`: ``terms(j, G)`` -> ``[2^|E|]`` log weights of the target sets of node ``j`` given its
    parent set ``G`` (bitmask). :ivar list environments: the unknown environments' labels (bit ``k`` of a target
    set is ``environments[k]``)."""

    def __init__(self, environments, mech, p, log_prior, tables):
        self.environments = environments
        self.mech, self.p, self.log_prior = mech, p, log_prior
        self._tables = tables                      # node -> (N_T [2^E], LD_T [2^E, 2^p], N_e [E], LD_e [E, 2^p])

    def terms(self, j, G):
        N_T, LD_T, N_e, LD_e = self._tables[j]
        size = bin(int(G)).count("1")
        Gj = int(G) | (1 << j)
        base = _family(self.mech, N_T, self._t, size, LD_T[:, G], LD_T[:, Gj])        # [2^E]
        per_env = _family(self.mech, N_e, self._t, size, LD_e[:, G], LD_e[:, Gj])     # [E]
        E = len(self.environments)
        T = np.arange(1 << E)
        bits = ((T[:, None] >> np.arange(E)) & 1).astype(float)
        return self.log_prior + base + bits @ per_env


def _family(mech, N, t, l, ld_pa, ld_paj):
    """:meth:`BGeSEM._family` for arrays of row counts ``N`` (numpy)."""
    from scipy.special import gammaln

    p, aw, am = mech.num_nodes, mech.alpha_w, mech.alpha_mu
    N = np.asarray(N, dtype=float)
    return (0.5 * (math.log(am) - np.log(N + am)) + gammaln(0.5 * (N + aw - p + l + 1)) - gammaln(0.5 * (aw - p + l + 1))
            - 0.5 * N * math.log(math.pi) + 0.5 * (aw - p + 2 * l + 1) * math.log(t)
            + 0.5 * (N + aw - p + l) * ld_pa - 0.5 * (N + aw - p + l + 1) * ld_paj)


def uncertain_target_scores(X, known_mask, unknown_rows, target_prior=0.1, config=None):
    """``(log_f [p, 2^p], TargetModel)``: BGe local scores with the targets of the unknown environments summed out
    (module docstring).

    :param X: ``[N, p]`` float64 data as scored. :param known_mask: ``[N, p]`` boolean known perfect interventions
        (``None``: none). :param dict unknown_rows: label -> ``[N]`` boolean rows of each environment whose targets
        are unknown. :param float target_prior: ``π``, the prior probability that an unknown environment targets a
        given node.
    """
    X = torch.as_tensor(X, dtype=torch.float64)
    N, p = X.shape
    labels = list(unknown_rows)
    E = len(labels)
    if E > MAX_UNKNOWN_ENVIRONMENTS:
        raise ValueError(f"{E} environments with unknown targets: the exact sum over their target sets has 2^{E} "
                         f"terms per node; at most {MAX_UNKNOWN_ENVIRONMENTS}")
    if p > MAX_NODES:
        raise ValueError(f"uncertain targets keep a table over the 2^p parent sets per target set; p ≤ {MAX_NODES}")
    if not (0.0 < float(target_prior) < 1.0):
        raise ValueError(f"target_prior must be a probability in (0, 1); got {target_prior!r}")
    mech = BGeSEM(p)
    known = np.zeros((N, p), dtype=bool) if known_mask is None else np.asarray(known_mask, dtype=bool)
    U = np.stack([np.asarray(unknown_rows[e], dtype=bool) for e in labels])      # [E, N]
    in_unknown = U.any(0)
    env_stats = [_stats(X[torch.as_tensor(U[k])]) for k in range(E)]
    env_R = [_R_from_stats(mech, *st) for st in env_stats]
    t = env_R[0][1]
    LD_e = np.stack([_logdet_table(R) for R, _ in env_R])                        # [E, 2^p]
    N_e = np.array([st[0] for st in env_stats], dtype=float)
    T = np.arange(1 << E)
    bits = ((T[:, None] >> np.arange(E)) & 1).astype(bool)                       # [2^E, E]
    log_prior = bits.sum(1) * math.log(target_prior) + (E - bits.sum(1)) * math.log1p(-target_prior)
    masks = np.arange(1 << p)
    size = torch.as_tensor(((masks[:, None] >> np.arange(p)) & 1).sum(1), dtype=torch.float64)
    log_f = np.full((p, 1 << p), -np.inf)
    tables, cache = {}, {}
    for j in range(p):
        base_rows = ~in_unknown & ~known[:, j]
        key = base_rows.tobytes()
        if key not in cache:
            n0, s0, S0 = _stats(X[torch.as_tensor(base_rows)])
            N_T = np.empty(1 << E)
            LD_T = np.empty((1 << E, 1 << p))
            for tset in T:
                n, s, S = n0, s0.clone(), S0.clone()
                for k in range(E):
                    if not bits[tset, k]:
                        n, s, S = n + env_stats[k][0], s + env_stats[k][1], S + env_stats[k][2]
                if n < 2:
                    raise ValueError(f"node {j}: fewer than 2 rows would follow its shared mechanism if every "
                                     "unknown environment targeted it; add observational rows")
                N_T[tset] = n
                LD_T[tset] = _logdet_table(_R_from_stats(mech, n, s, S)[0])
            cache[key] = (N_T, LD_T)
        N_T, LD_T = cache[key]
        tables[j] = (N_T, LD_T, N_e, LD_e)
        free = masks[((masks >> j) & 1) == 0]
        G, Gj = free, free | (1 << j)
        acc = np.full(len(free), -np.inf)
        per_env = np.stack([mech._family(float(N_e[k]), t, size[G], torch.as_tensor(LD_e[k, G]),
                                         torch.as_tensor(LD_e[k, Gj])).numpy() for k in range(E)])   # [E, n]
        for tset in T:
            term = (log_prior[tset]
                    + mech._family(float(N_T[tset]), t, size[G], torch.as_tensor(LD_T[tset, G]),
                                   torch.as_tensor(LD_T[tset, Gj])).numpy()
                    + per_env[bits[tset]].sum(0))
            acc = np.logaddexp(acc, term)
        log_f[j, free] = acc
    model = TargetModel(labels, mech, p, log_prior, tables)
    model._t = t
    return log_f, model


def target_posterior(posterior, num_samples=2000, seed=0):
    """``P(e ∈ T_j | D)``: the posterior probability that each environment with unknown targets targets each node,
    ``E_{G ~ p(G | D)}[P(e ∈ T_j | pa_j, D)]`` over ``num_samples`` exact DAG samples (the inner probability exact).

    :param posterior: an :class:`~pyro_dag.structure.ExactStructurePosterior` fitted with unknown targets
        (``exact_posterior(..., interventions=(environments, {label: "unknown", ...}))``).
    :returns: ``(labels, probs, stderr)``: the environments' labels and two ``[E, p]`` numpy arrays.
    """
    model = getattr(posterior, "target_model", None)
    if model is None:
        raise ValueError("target_posterior needs a posterior fitted with unknown targets: "
                         "exact_posterior(X, 'bge', interventions=(environments, {label: 'unknown', ...}))")
    dags = posterior.sample(num_samples, seed).numpy().astype(np.int64)
    p = model.p
    pa = dags.transpose(0, 2, 1) @ (np.int64(1) << np.arange(p, dtype=np.int64))    # [M, p]
    E = len(model.environments)
    bits = ((np.arange(1 << E)[:, None] >> np.arange(E)) & 1).astype(float)
    draws = np.zeros((num_samples, E, p))
    memo = {}
    for m in range(num_samples):
        for j in range(p):
            key = (j, int(pa[m, j]))
            if key not in memo:
                w = model.terms(j, int(pa[m, j]))
                w = np.exp(w - w.max())
                memo[key] = (w / w.sum()) @ bits                                          # [E]
            draws[m, :, j] = memo[key]
    return list(model.environments), draws.mean(0), draws.std(0, ddof=1) / math.sqrt(num_samples)
