"""Gaussian-process local scores: the GP network score of Friedman & Nachman 2000 (*Gaussian process networks*, UAI).

A node's family is scored by the marginal likelihood of a GP regression of ``x_j`` on its parents,
``x_j = f(x_G) + ε``, ``f ~ GP(0, σ_f² k_ARD)``, ``ε ~ N(0, σ_n²)``, with the kernel's hyperparameters (one
length-scale per parent, ``σ_f²``, ``σ_n²``) set by type-II maximum likelihood
(:class:`pyro_dag.baselines.ExactGP`'s parametrisation and starts; the families are fitted in batches by
:func:`~pyro_dag.structure.gp_batch.batched_gp_fit`):

    f_j(G) = log N(x_j - x̄_j | 0, K_G + σ_n² I) - c |G|   at the hyperparameters maximising the first term,

and, for ``G = ∅``, ``log N(x_j - x̄_j | 0, σ̂² I)`` with ``σ̂²`` the maximum-likelihood variance. Above a few
hundred rows the evidence is replaced by the collapsed variational bound of Titsias 2009 (AISTATS) with a fixed
subset of the rows as inducing inputs (``inducing``), ``O(N M²)`` instead of ``O(N³)`` per evaluation. The evidence
maximised over one more length-scale never decreases (an irrelevant input can take an infinite length-scale), so
type-II ML alone leans to extra parents; ``c`` charges each parent's length-scale: ``½ log N`` by default (a BIC
charge for the hyperparameter the evidence is maximised over; ``hyper_penalty=0`` gives the plain type-II ML
evidence). The score is not
score-equivalent and picks up nonlinear dependence a linear score misses. Each ``(node, parent set)`` is fitted
once and cached (:class:`GPFamilyScorer`; :meth:`GPFamilyScorer.prefetch` fits a list of families in batches,
which the tables below use); with :func:`~pyro_dag.structure.exact_posterior` (``likelihood="gp"``)
the scores feed the exact order DP, so every query of :class:`~pyro_dag.structure.ExactStructurePosterior` works;
with :func:`~pyro_dag.structure.candidate_tables` they feed candidate tables. The cost is one GP fit per parent set,
``O(N³)`` each, so the parent sets are capped (``max_parents``, default :data:`GP_DEFAULT_MAX_PARENTS`).
"""
import math

import numpy as np
import torch

from .gp_batch import batched_gp_fit

__all__ = ["GP_DEFAULT_MAX_PARENTS", "GPFamilyScorer"]

#: Parent-set cap of the GP score when none is given. Every set of at most :data:`GP_FULL_SIZE` parents is fitted
#: (``p Σ_{k ≤ 2} C(p - 1, k)`` fits); larger sets only within the node's :data:`GP_WIDE_CANDIDATES` best candidates.
#: On ER graphs with 10 nodes and 10 edges the true in-degree is 3 or 4 on four seeds of five, which a cap of 2
#: cannot represent (``benchmarks/structure_gp_peers.py``).
GP_DEFAULT_MAX_PARENTS = 3
#: Parent sets up to this size are all fitted.
GP_FULL_SIZE = 2
#: Candidates per node among which the larger parent sets are fitted (``C(6, 3) = 20`` three-parent sets per node).
GP_WIDE_CANDIDATES = 6
#: ``inducing="auto"``: the exact evidence up to this many rows, the sparse bound above (an exact fit costs
#: ``O(N³)`` per evaluation: at ``N = 853``, Sachs' observational rows, about 80 times one at ``N = 200``).
GP_EXACT_ROWS = 400
#: Inducing inputs of the sparse bound under ``inducing="auto"`` (rows of the data, one draw for every family).
GP_INDUCING = 128
#: ``hyper="laplace"``: independent Gaussian priors ``(mean, sd)`` on the log-hyperparameters of the scaled problem
#: (inputs in the unit cube, the child standardised): each length-scale around 0.3 of the inputs' range, the signal
#: variance around half and the noise variance around a tenth of the child's variance, each within a factor of
#: about e^1.5 (length-scales e^1) at one standard deviation.
GP_HYPER_PRIOR = dict(log_lengthscale=(math.log(0.3), 1.0), log_signal=(math.log(0.5), 1.5),
                      log_noise=(math.log(0.1), 1.5))


def empty_family_laplace(y, prior_mean, prior_sd, iters=50):
    """``log p(y)`` of ``y ~ N(ȳ, σ² I)`` (``y [N]``, in its units) with ``log σ²`` of the standardised ``y`` under
    ``N(prior_mean, prior_sd²)``, by Laplace's method (a 1-D Newton search for the mode): the empty family's score
    under ``hyper="laplace"``."""
    y = np.asarray(y, dtype=np.float64)
    n, sd = len(y), float(np.std(y, ddof=1)) or 1.0
    S = float(np.sum(((y - y.mean()) / sd) ** 2))
    s = math.log(S / n)

    def h(s):  # log p(y_std | s) + log N(s | prior)
        return (-0.5 * n * math.log(2 * math.pi) - 0.5 * n * s - 0.5 * S * math.exp(-s)
                - 0.5 * ((s - prior_mean) / prior_sd) ** 2 - math.log(prior_sd * math.sqrt(2 * math.pi)))

    for _ in range(iters):
        g = -0.5 * n + 0.5 * S * math.exp(-s) - (s - prior_mean) / prior_sd ** 2
        H = -0.5 * S * math.exp(-s) - 1.0 / prior_sd ** 2
        s -= g / H
        if abs(g / H) < 1e-12:
            break
    H = 0.5 * S * math.exp(-s) + 1.0 / prior_sd ** 2
    return h(s) + 0.5 * math.log(2 * math.pi) - 0.5 * math.log(H) - n * math.log(sd)


class GPFamilyScorer:
    """Cached GP local scores ``f_j(G)`` (see the module docstring).

    :param X: ``[N, p]`` data (as scored; :func:`~pyro_dag.structure.exact_posterior` standardises first).
    :param str kernel: ``"rbf"`` (ARD squared exponential, default) or ``"matern52"`` (the kernels of
        :class:`~pyro_dag.baselines.ExactGP`).
    :param int restarts: L-BFGS starts per fit.
    :param int seed: seeds the random starts.
    :param hyper_penalty: ``c`` per parent: ``"bic"`` (``½ log N``, default) or a non-negative number.
    :param str hyper: ``"ml"`` (default: type-II maximum likelihood, less ``hyper_penalty`` per parent) or
        ``"laplace"``: the hyperparameters integrated out under :data:`GP_HYPER_PRIOR` by Laplace's method at the
        posterior mode (as Giudice, Kuipers & Moffa 2023, *A Bayesian take on Gaussian process networks*, NeurIPS,
        integrate them; they use bridge sampling), no per-parent charge; the empty family integrates its variance
        under the noise prior.
    :param int wide_candidates: candidates per node among which parent sets larger than :data:`GP_FULL_SIZE` are
        fitted (:meth:`wide_set`; default :data:`GP_WIDE_CANDIDATES`).
    :param inducing: ``"auto"`` (default: the exact evidence up to :data:`GP_EXACT_ROWS` rows, above that the
        collapsed bound of Titsias 2009 with :data:`GP_INDUCING` of the rows as inducing inputs), ``None`` (always
        exact) or a number of inducing rows. The bound is a lower bound on each family's evidence, tight for
        smooth mechanisms of one or two parents; the empty family's score stays exact.
    :ivar dict cache: ``{(j, G): evidence}`` (before the penalty) with ``G`` a sorted tuple of parent indices.
    :ivar int num_fits: GP fits done (the cache's misses with ``G ≠ ∅``).
    :ivar dict hyperparameters: ``{(j, G): [|G| + 2]}`` the fitted ``(log ls, log σ_f², log σ_n²)`` on the scaled
        problem (inputs in the unit cube, ``x_j`` standardised).

    ``scorer(j, sets)`` with ``sets`` ``[M, L]`` (node indices, ``-1`` pads) returns ``[M]`` scores;
    :meth:`subsets` scores every subset of a candidate list, as :class:`~pyro_dag.structure.scores.FamilyScorer`.
    """

    def __init__(self, X, kernel="rbf", restarts=2, seed=0, hyper_penalty="bic", inducing="auto", hyper="ml",
                 wide_candidates=GP_WIDE_CANDIDATES):
        from ..baselines.exact_gp import KERNELS

        if kernel not in KERNELS:   # any other string ran the Matérn-5/2 branch of the kernel without a word
            raise ValueError(f"GPFamilyScorer: kernel must be one of {list(KERNELS)} (lower case), got {kernel!r}")
        if isinstance(restarts, bool) or not isinstance(restarts, (int, np.integer)) or restarts < 1:
            raise ValueError(f"GPFamilyScorer: restarts must be a positive integer, got {restarts!r}")
        self.X = np.asarray(torch.as_tensor(X, dtype=torch.float64).cpu())
        self.kernel, self.restarts, self.seed = kernel, int(restarts), int(seed)
        N = self.X.shape[0]
        if inducing == "auto":
            inducing = None if N <= GP_EXACT_ROWS else GP_INDUCING
        elif inducing is not None and not (isinstance(inducing, int) and not isinstance(inducing, bool)
                                           and inducing >= 1):
            raise ValueError(f"inducing must be 'auto', None or a positive number of rows; got {inducing!r}")
        #: inducing rows of the sparse bound (``None``: exact evidence)
        self.inducing = None if inducing is None or inducing >= N else int(inducing)
        if hyper not in ("ml", "laplace"):
            raise ValueError(f"hyper must be 'ml' (type-II maximum likelihood) or 'laplace'; got {hyper!r}")
        self.hyper = hyper
        #: candidates per node among which sets of more than :data:`GP_FULL_SIZE` parents are fitted
        self.wide_candidates = int(wide_candidates)
        if hyper_penalty == "bic":
            self.penalty = 0.5 * math.log(self.X.shape[0])
        elif isinstance(hyper_penalty, (int, float)) and not isinstance(hyper_penalty, bool) and hyper_penalty >= 0:
            self.penalty = float(hyper_penalty)
        else:
            raise ValueError(f"hyper_penalty must be 'bic' or a non-negative number; got {hyper_penalty!r}")
        self.cache = {}
        self.hyperparameters = {}
        self.num_fits = 0

    def score(self, j, parents):
        """``f_j(G)`` for node ``j`` and parents ``G`` (an iterable of indices, not containing ``j``)."""
        G = tuple(sorted(int(k) for k in parents))
        if j in G:
            raise ValueError(f"node {j} cannot be its own parent")
        key = (int(j), G)
        if key not in self.cache:
            self.prefetch([key])
        return self.cache[key] - (self.penalty * len(G) if self.hyper == "ml" else 0.0)

    def prefetch(self, families):
        """Fit every family of ``families`` (pairs ``(j, G)``, ``G`` an iterable of parent indices) not yet
        cached, in batches of equal parent-set size (one :func:`~pyro_dag.structure.gp_batch.batched_gp_fit` call
        per size)."""
        todo = {}
        for j, G in families:
            key = (int(j), tuple(sorted(int(k) for k in G)))
            if key[0] in key[1]:
                raise ValueError(f"node {key[0]} cannot be its own parent")
            # the sub-families too: the maximised evidence of G is at least theirs (below)
            for m in (range(1 << len(key[1])) if self.hyper == "ml" else [(1 << len(key[1])) - 1]):
                sub = (key[0], tuple(k for b, k in enumerate(key[1]) if (m >> b) & 1))
                if sub not in self.cache:
                    todo[sub] = True
        by_size = {}
        for key in todo:
            by_size.setdefault(len(key[1]), []).append(key)
        for size in sorted(by_size):
            keys = by_size[size]
            if size == 0:
                for j, G in keys:
                    y = self.X[:, j]
                    if self.hyper == "laplace":
                        self.cache[(j, G)] = empty_family_laplace(y, *GP_HYPER_PRIOR["log_noise"])
                        continue
                    var = float(np.mean((y - y.mean()) ** 2))
                    self.cache[(j, G)] = -0.5 * len(y) * (math.log(2 * math.pi * max(var, 1e-300)) + 1.0)
                continue
            X = torch.as_tensor(np.stack([self.X[:, list(G)] for _, G in keys]))
            y = torch.as_tensor(np.stack([self.X[:, j] for j, _ in keys]))
            prior = None
            if self.hyper == "laplace":
                rows = ([GP_HYPER_PRIOR["log_lengthscale"]] * size + [GP_HYPER_PRIOR["log_signal"]]
                        + [GP_HYPER_PRIOR["log_noise"]])
                prior = tuple(torch.tensor(c, dtype=torch.float64) for c in zip(*rows))
            with torch.no_grad():
                lml, params = batched_gp_fit(X, y, kernel=self.kernel, restarts=self.restarts, seed=self.seed,
                                             inducing=self.inducing, prior=prior)
            for (j, G), v, theta in zip(keys, lml.tolist(), params):
                # A family nests each of its sub-families in the limit of an infinite length-scale (and the
                # empty one as σ_f² -> 0), so its maximised evidence is at least theirs; an optimiser that stops
                # short of such a limit in a flat direction gets the limit's value. (An integrated evidence has no
                # such order: an extra input's prior volume is its Occam factor.)
                subs = [self.cache[(j, tuple(k for b, k in enumerate(G) if (m >> b) & 1))]
                        for m in range((1 << size) - 1)] if self.hyper == "ml" else []
                self.cache[(j, G)] = max([v] + subs)
                self.hyperparameters[(j, G)] = theta
            self.num_fits += len(keys)

    def __call__(self, j, sets):
        sets = np.asarray(sets, dtype=np.int64)
        sets = sets.reshape(len(sets), sets.shape[1] if sets.ndim == 2 else 0)
        self.prefetch([(j, [k for k in row if k >= 0]) for row in sets])
        return np.array([self.score(j, [k for k in row if k >= 0]) for row in sets])

    def _allowed(self, j, sets, max_size):
        """The sets of ``sets`` (lists of parent indices) this scorer fits for node ``j``: at most ``max_size``
        parents, and sets of more than :data:`GP_FULL_SIZE` parents only within ``j``'s :attr:`wide_candidates`
        best candidates (:meth:`wide_set`)."""
        small = [G for G in sets if len(G) <= min(GP_FULL_SIZE, max_size if max_size is not None else GP_FULL_SIZE)]
        if max_size is not None and max_size <= GP_FULL_SIZE:
            return small
        self.prefetch([(j, G) for G in small])
        wide = set(self.wide_set(j, {k for G in sets for k in G}))
        return small + [G for G in sets if len(G) > GP_FULL_SIZE and (max_size is None or len(G) <= max_size)
                        and set(G) <= wide]

    def wide_set(self, j, pool):
        """``j``'s :attr:`wide_candidates` best candidates in ``pool``, ranked by the best score of a family of at
        most :data:`GP_FULL_SIZE` parents from ``pool`` holding them (ties by index)."""
        pool = sorted(int(k) for k in pool if int(k) != j)
        best = {k: -np.inf for k in pool}
        for (i, G), _ in list(self.cache.items()):
            if i == j and 0 < len(G) <= GP_FULL_SIZE and set(G) <= set(pool):
                v = self.score(j, G)
                for k in G:
                    best[k] = max(best[k], v)
        return sorted(pool, key=lambda k: (-best[k], k))[: self.wide_candidates]

    def subsets(self, j, cand, max_size=GP_DEFAULT_MAX_PARENTS):
        """``[2^K]`` ``f_j`` of the subsets of the candidates ``cand`` (``[K]``, ``-1`` pads) in candidate-bit
        order; ``-inf`` for subsets using a padding bit, larger than ``max_size`` (``None``: no cap), or of more than
        :data:`GP_FULL_SIZE` parents outside ``j``'s :meth:`wide_set`."""
        cand = np.asarray(cand, dtype=np.int64)
        K = len(cand)
        out = np.full(1 << K, -np.inf)
        sets = {m: [int(cand[b]) for b in range(K) if (m >> b) & 1] for m in range(1 << K)}
        sets = {m: G for m, G in sets.items() if all(k >= 0 for k in G)}
        allowed = {tuple(G) for G in self._allowed(j, list(sets.values()), max_size)}
        self.prefetch([(j, G) for G in allowed])
        for m, G in sets.items():
            if tuple(G) in allowed:
                out[m] = self.score(j, G)
        return out

    def local_scores(self, max_parents=GP_DEFAULT_MAX_PARENTS):
        """``[p, 2^p]`` ``f_j(mask)`` for every parent-set mask the scorer fits (:meth:`subsets`' rule: at most
        ``max_parents`` parents, the larger sets within the node's :meth:`wide_set`); ``-inf`` elsewhere and where the
        mask holds ``j``: the table :func:`~pyro_dag.structure.exact_posterior` uses."""
        p = self.X.shape[1]
        out = np.full((p, 1 << p), -np.inf)
        for j in range(p):
            others = np.array([k for k in range(p) if k != j], dtype=np.int64)
            sub = self.subsets(j, others, max_parents)                      # [2^(p-1)] over the others' bits
            loc = np.arange(1 << (p - 1))
            bits = (loc[:, None] >> np.arange(p - 1)) & 1
            masks = (bits << others[None, :]).sum(1)
            out[j, masks] = sub
        return out
