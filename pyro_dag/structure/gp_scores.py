"""Gaussian-process local scores: the GP network score of Friedman & Nachman 2000 (*Gaussian process networks*, UAI).

A node's family is scored by the marginal likelihood of a GP regression of ``x_j`` on its parents,
``x_j = f(x_G) + ε``, ``f ~ GP(0, σ_f² k_ARD)``, ``ε ~ N(0, σ_n²)``, with the kernel's hyperparameters (one
length-scale per parent, ``σ_f²``, ``σ_n²``) set by type-II maximum likelihood
(:class:`pyro_dag.baselines.ExactGP`, L-BFGS with restarts, after centring ``x_j``):

    f_j(G) = log N(x_j - x̄_j | 0, K_G + σ_n² I) - c |G|   at the hyperparameters maximising the first term,

and, for ``G = ∅``, ``log N(x_j - x̄_j | 0, σ̂² I)`` with ``σ̂²`` the maximum-likelihood variance. The evidence
maximised over one more length-scale never decreases (an irrelevant input can take an infinite length-scale), so
type-II ML alone leans to extra parents; ``c`` charges each parent's length-scale: ``½ log N`` by default (a BIC
charge for the hyperparameter the evidence is maximised over; ``hyper_penalty=0`` gives the plain type-II ML
evidence). The score is not
score-equivalent and picks up nonlinear dependence a linear score misses. Each ``(node, parent set)`` is fitted
once and cached (:class:`GPFamilyScorer`); with :func:`~pyro_dag.structure.exact_posterior` (``likelihood="gp"``)
the scores feed the exact order DP, so every query of :class:`~pyro_dag.structure.ExactStructurePosterior` works;
with :func:`~pyro_dag.structure.candidate_tables` they feed candidate tables. The cost is one GP fit per parent set,
``O(N³)`` each, so the parent sets are capped (``max_parents``, default :data:`GP_DEFAULT_MAX_PARENTS`).
"""
import math

import numpy as np
import torch

__all__ = ["GP_DEFAULT_MAX_PARENTS", "GPFamilyScorer"]

#: Parent-set cap of the GP score when none is given (one GP fit per set: ``p Σ_{k ≤ 2} C(p - 1, k)`` fits).
GP_DEFAULT_MAX_PARENTS = 2


class GPFamilyScorer:
    """Cached GP local scores ``f_j(G)`` (see the module docstring).

    :param X: ``[N, p]`` data (as scored; :func:`~pyro_dag.structure.exact_posterior` standardises first).
    :param str kernel: ``"rbf"`` (ARD squared exponential, default) or ``"matern52"`` (the kernels of
        :class:`~pyro_dag.baselines.ExactGP`).
    :param int restarts: L-BFGS starts per fit.
    :param int seed: seeds the random starts.
    :param hyper_penalty: ``c`` per parent: ``"bic"`` (``½ log N``, default) or a non-negative number.
    :ivar dict cache: ``{(j, G): evidence}`` (before the penalty) with ``G`` a sorted tuple of parent indices.
    :ivar int num_fits: GP fits done (the cache's misses with ``G ≠ ∅``).

    ``scorer(j, sets)`` with ``sets`` ``[M, L]`` (node indices, ``-1`` pads) returns ``[M]`` scores;
    :meth:`subsets` scores every subset of a candidate list, as :class:`~pyro_dag.structure.scores.FamilyScorer`.
    """

    def __init__(self, X, kernel="rbf", restarts=2, seed=0, hyper_penalty="bic"):
        self.X = np.asarray(torch.as_tensor(X, dtype=torch.float64).cpu())
        self.kernel, self.restarts, self.seed = kernel, int(restarts), int(seed)
        if hyper_penalty == "bic":
            self.penalty = 0.5 * math.log(self.X.shape[0])
        elif isinstance(hyper_penalty, (int, float)) and not isinstance(hyper_penalty, bool) and hyper_penalty >= 0:
            self.penalty = float(hyper_penalty)
        else:
            raise ValueError(f"hyper_penalty must be 'bic' or a non-negative number; got {hyper_penalty!r}")
        self.cache = {}
        self.num_fits = 0

    def score(self, j, parents):
        """``f_j(G)`` for node ``j`` and parents ``G`` (an iterable of indices, not containing ``j``)."""
        G = tuple(sorted(int(k) for k in parents))
        if j in G:
            raise ValueError(f"node {j} cannot be its own parent")
        key = (int(j), G)
        if key not in self.cache:
            self.cache[key] = self._fit(int(j), G)
        return self.cache[key] - self.penalty * len(G)

    def _fit(self, j, G):
        y = self.X[:, j]
        n = len(y)
        if not G:
            var = float(np.mean((y - y.mean()) ** 2))
            return -0.5 * n * (math.log(2 * math.pi * max(var, 1e-300)) + 1.0)
        from pyro_dag.baselines import ExactGP

        self.num_fits += 1
        gp = ExactGP(kernel=self.kernel, restarts=self.restarts, seed=self.seed)
        with torch.no_grad():
            gp.fit(self.X[:, list(G)], y)
        return float(gp.log_marginal_likelihood)

    def __call__(self, j, sets):
        sets = np.asarray(sets, dtype=np.int64)
        sets = sets.reshape(len(sets), sets.shape[1] if sets.ndim == 2 else 0)
        return np.array([self.score(j, [k for k in row if k >= 0]) for row in sets])

    def subsets(self, j, cand, max_size=GP_DEFAULT_MAX_PARENTS):
        """``[2^K]`` ``f_j`` of the subsets of the candidates ``cand`` (``[K]``, ``-1`` pads) in candidate-bit
        order; ``-inf`` for subsets using a padding bit or larger than ``max_size`` (``None``: no cap, 2^K fits)."""
        cand = np.asarray(cand, dtype=np.int64)
        K = len(cand)
        out = np.full(1 << K, -np.inf)
        for m in range(1 << K):
            bits = [b for b in range(K) if (m >> b) & 1]
            if any(cand[b] < 0 for b in bits) or (max_size is not None and len(bits) > max_size):
                continue
            out[m] = self.score(j, [int(cand[b]) for b in bits])
        return out

    def local_scores(self, max_parents=GP_DEFAULT_MAX_PARENTS):
        """``[p, 2^p]`` ``f_j(mask)`` for every parent-set mask up to ``max_parents`` parents (``-inf`` above it and
        where the mask holds ``j``): the table :func:`~pyro_dag.structure.exact_posterior` uses."""
        p = self.X.shape[1]
        out = np.full((p, 1 << p), -np.inf)
        for m in range(1 << p):
            G = [k for k in range(p) if (m >> k) & 1]
            if max_parents is not None and len(G) > max_parents:
                continue
            for j in range(p):
                if not (m >> j) & 1:
                    out[j, m] = self.score(j, G)
        return out
