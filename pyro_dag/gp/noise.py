"""The noise rule: the initial noise of an observed Gaussian node, and whether to learn it or fix a nugget, from a
pilot GP on the node's observed inputs.

For an observed node ``w`` with a Gaussian likelihood, :func:`choose_noise` fits a pilot exact GP
(:class:`pyro_dag.baselines.ExactGP`, ARD RBF, type-II maximum likelihood; Rasmussen & Williams 2006, Sec. 5.4.1)
of ``y_w`` on

* its parents' values, when every parent is observed (a root or an observed node), on the cases where they all are;
* else the observed roots among its ancestors (the hidden nodes in between make the pilot's noise an upper bound of
  the node's own).

Let ``ν`` be the pilot's noise variance as a fraction of ``Var(y_w)``. The rule:

* ``ν ≤ deterministic`` (default 1e-4) with every parent observed: the node is (near-)deterministic given its
  parents, e.g. a computer simulator; its noise is **fixed** at ``max(ν, nugget) · Var(y_w)`` (a learned noise on
  such data drifts to several per cent of the variance and smooths the fit: Andrianakis & Challenor 2012, "The
  effect of the nugget on Gaussian process emulators of computer models", CSDA 56(12));
* otherwise the noise is **learned**, starting from ``max(ν, nugget) · Var(y_w)``: the data's own scale instead of a
  fixed 0.1.
"""
from dataclasses import dataclass

import torch

from ..baselines import ExactGP

__all__ = ["NoiseChoice", "choose_noise", "choose_noise_many", "fit_exact_gps", "DETERMINISTIC_FRACTION", "NUGGET_FRACTION"]

#: Pilot noise fraction at or below which a node with observed parents is treated as deterministic.
DETERMINISTIC_FRACTION = 1e-4
#: The smallest noise variance the rule sets, as a fraction of the node's variance.
NUGGET_FRACTION = 1e-6


@dataclass
class NoiseChoice:
    """What :func:`choose_noise` decided for one node.

    :ivar float variance: the noise variance to set (data units). :ivar bool fixed: fix it (a nugget) or learn it.
    :ivar float pilot_fraction: ``ν``, the pilot GP's noise as a fraction of the node's variance.
    :ivar float data_variance: ``Var(y_w)`` on the pilot's cases. :ivar str inputs: ``"parents"`` or
        ``"ancestral roots"``. :ivar int num_cases: the pilot's cases. :ivar pilot: the fitted
        :class:`~pyro_dag.baselines.ExactGP` (its length-scales start a default kernel with
        ``kernel_init="pilot"``).
    """

    variance: float
    fixed: bool
    pilot_fraction: float
    data_variance: float
    inputs: str
    num_cases: int
    pilot: object = None


def _pilot_data(y, X):
    """``y [n]`` and ``X [n, D]`` on the CPU in float64 with the rows holding a non-finite value dropped, or ``None``
    with fewer than 5 usable cases or a constant ``y`` (the pilot runs on the CPU whatever the model's device)."""
    y = torch.as_tensor(y).detach().to("cpu", torch.float64).reshape(-1)
    X = torch.as_tensor(X).detach().to("cpu", torch.float64)
    keep = torch.isfinite(y) & torch.isfinite(X).all(-1)
    y, X = y[keep], X[keep]
    if y.numel() < 5 or not float(y.var()) > 0:
        return None
    return y, X


def _choice(pilot, y, parents_observed, deterministic, nugget, max_cases):
    data_variance = float(y.var())
    nu = pilot.noise_fraction
    fixed = bool(parents_observed and nu <= deterministic)
    return NoiseChoice(variance=max(nu, nugget) * data_variance, fixed=fixed, pilot_fraction=nu,
                       data_variance=data_variance, inputs="parents" if parents_observed else "ancestral roots",
                       num_cases=min(int(y.numel()), int(max_cases)), pilot=pilot)


#: Box of the log-hyperparameters in :func:`fit_exact_gps`: wide enough for a noise fraction at ExactGP's floor
#: (``min_noise = 1e-8``, log ≈ -18.4) and the large signal variances of noise-free data.
FIT_MANY_BOUNDS = (-20.0, 20.0)


def fit_exact_gps(problems, *, restarts=2, max_exact=2000, seed=0, progress=None):
    """Fit many independent :class:`ExactGP` s (RBF kernel, learned noise) at once: the problems with the same number
    of cases and inputs are stacked and fitted together by the batched BFGS of
    :func:`pyro_dag.structure.gp_batch.batched_gp_fit` (one ``[B, n, n]`` Cholesky per evaluation instead of ``B``
    L-BFGS runs whose Python overhead dominates small problems). Same model, parametrisation, scaling, subset and
    first start as :meth:`ExactGP.fit`, so each fit reaches the optimum a one-by-one fit reaches, to the optimisers'
    tolerance (Rasmussen & Williams 2006, Sec. 5.4.1).

    :param problems: a list of ``(X [n_i, D_i], y [n_i])`` (finite; a NaN row is refused as by :meth:`ExactGP.fit`).
    :param int restarts: starts per problem. :param int max_exact: a random subset of that many cases above it.
    :param int seed: seed of the subsets and the random starts.
    :param progress: called with the number of problems each batch fitted (e.g. a tqdm bar's ``update``).
    :returns: a list of fitted :class:`ExactGP`, in the order of ``problems``.
    """
    from ..structure.gp_batch import batched_gp_fit  # (structure imports nothing from gp.noise)

    fits, groups = [], {}
    for i, (X, y) in enumerate(problems):
        gp = ExactGP(restarts=restarts, max_exact=max_exact, seed=seed)
        X, y, Xs, ys, _ = gp._prepare(X, y, "fit_exact_gps")
        fits.append((gp, Xs, ys))
        groups.setdefault((X.shape[0], X.shape[1]), []).append((i, X, y))
    for members in groups.values():
        idx = [i for i, _, _ in members]
        _, params = batched_gp_fit(torch.stack([X for _, X, _ in members]), torch.stack([y for _, _, y in members]),
                                   restarts=restarts, seed=seed, bounds=FIT_MANY_BOUNDS)
        for i, x in zip(idx, params):
            gp, Xs, ys = fits[i]
            D = Xs.shape[1]
            best = [x[:D].clone(), x[D].clone(), x[D + 1].clone()]
            with torch.no_grad():
                value = gp._nlml(best, Xs, ys)
            if value is None or not torch.isfinite(value):  # the batch's optimum does not factorise here: refit alone
                gp.fit(*problems[i])
                continue
            gp._finish(Xs, ys, best, float(value))
        if progress is not None:
            progress(len(members))
    return [gp for gp, _, _ in fits]


def choose_noise(y, X, parents_observed, *, deterministic=DETERMINISTIC_FRACTION, nugget=NUGGET_FRACTION,
                 max_cases=300, seed=0):
    """Apply the noise rule (module docstring) to one output column.

    :param torch.Tensor y: ``[n]`` observations (NaN = missing). :param torch.Tensor X: ``[n, D]`` the pilot's
        inputs (rows with a NaN are dropped). :param bool parents_observed: ``X`` holds the node's parents (so a
        tiny pilot noise means a deterministic node), not merely its ancestral roots.
    :param float deterministic: the threshold on ``ν``. :param float nugget: the floor, as a fraction.
    :param int max_cases: the pilot's largest number of cases (a random subset above it).
    :returns: a :class:`NoiseChoice`, or ``None`` with fewer than 5 usable cases or a constant ``y``.
    """
    cleaned = _pilot_data(y, X)
    if cleaned is None:
        return None
    y, X = cleaned
    pilot = ExactGP(restarts=2, max_exact=max_cases, seed=seed).fit(X, y)
    return _choice(pilot, y, parents_observed, deterministic, nugget, max_cases)


def choose_noise_many(columns, *, deterministic=DETERMINISTIC_FRACTION, nugget=NUGGET_FRACTION, max_cases=300,
                      seed=0, progress=None):
    """:func:`choose_noise` for many columns at once: the pilots with the same number of cases and inputs are fitted
    together (:func:`pyro_dag.baselines.exact_gp.fit_exact_gps`), which on a graph of hundreds of nodes costs a few
    batched evaluations instead of one L-BFGS run per node (the same rule and the same pilot model, each at its own
    type-II maximum-likelihood optimum to the optimisers' tolerance).

    :param columns: a list of ``(y [n], X [n, D], parents_observed)`` as for :func:`choose_noise`.
    :param progress: called with the number of pilots each batch fitted (e.g. a tqdm bar's ``update``).
    :returns: a list of :class:`NoiseChoice` (or ``None``, as :func:`choose_noise`), in the order of ``columns``.
    """
    cleaned = [_pilot_data(y, X) for y, X, _ in columns]
    todo = [i for i, c in enumerate(cleaned) if c is not None]
    pilots = fit_exact_gps([(cleaned[i][1], cleaned[i][0]) for i in todo], restarts=2, max_exact=max_cases, seed=seed,
                           progress=progress)
    if progress is not None and len(todo) < len(columns):
        progress(len(columns) - len(todo))
    out = [None] * len(columns)
    for i, pilot in zip(todo, pilots):
        out[i] = _choice(pilot, cleaned[i][0], columns[i][2], deterministic, nugget, max_cases)
    return out
