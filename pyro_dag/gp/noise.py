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

__all__ = ["NoiseChoice", "choose_noise", "DETERMINISTIC_FRACTION", "NUGGET_FRACTION"]

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
    # the pilot runs on the CPU in float64, whatever the model's device and dtype
    y = torch.as_tensor(y).detach().to("cpu", torch.float64).reshape(-1)
    X = torch.as_tensor(X).detach().to("cpu", torch.float64)
    keep = torch.isfinite(y) & torch.isfinite(X).all(-1)
    y, X = y[keep], X[keep]
    if y.numel() < 5 or not float(y.var()) > 0:
        return None
    data_variance = float(y.var())
    pilot = ExactGP(restarts=2, max_exact=max_cases, seed=seed).fit(X, y)
    nu = pilot.noise_fraction
    fixed = bool(parents_observed and nu <= deterministic)
    return NoiseChoice(variance=max(nu, nugget) * data_variance, fixed=fixed, pilot_fraction=nu,
                       data_variance=data_variance, inputs="parents" if parents_observed else "ancestral roots",
                       num_cases=min(int(y.numel()), int(max_cases)), pilot=pilot)
