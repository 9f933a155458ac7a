"""The checks of :class:`~pyro_dag.emulation.MultiFidelityEmulator`'s arguments that are not data: the input box
(``bounds``) and :meth:`~pyro_dag.emulation.MultiFidelityEmulator.fit`'s step counts and rates, each refused by
name before any work (Perlino et al. 2026, arXiv:2607.09645, App. G.5, for the workflow they guard).
"""
import inspect
import math
import warnings

import numpy as np

from ..dgp import DAGInputError

__all__ = ["check_fit_arguments", "check_exact_fit_arguments", "design_box"]


def design_box(bounds, X):
    """``(lower [d], upper [d])``: the input box of the simulators, ``bounds`` ``[d, 2]`` (default: the box of the
    designs ``X`` ``[n, d]``).

    :raises DAGInputError: for bounds of the wrong shape, with ``lower >= upper`` or non-finite, or that exclude
        every design point (a warning names the designs outside the box when only some are)."""
    if bounds is None:
        return X.min(0), X.max(0)
    try:
        b = np.asarray(bounds, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise DAGInputError(f"bounds must be a [d, 2] array of numbers ({e})") from None
    d = X.shape[1]
    if b.shape != (d, 2) or not np.isfinite(b).all() or not (b[:, 1] > b[:, 0]).all():
        raise DAGInputError(f"bounds must be a [d, 2] = [{d}, 2] array of finite (lower, upper) with lower < upper, "
                            f"got shape {b.shape}")
    outside = ((X < b[:, 0]) | (X > b[:, 1])).any(1)
    if outside.all():
        raise DAGInputError(f"bounds {b.tolist()} exclude every design point (the designs span {X.min(0).tolist()} "
                            f"to {X.max(0).tolist()}): give the simulators' input box, in the designs' units")
    if outside.any():
        warnings.warn(f"{int(outside.sum())} of {len(X)} design points lie outside bounds {b.tolist()}; the "
                      "emulator's unit box does not cover them", stacklevel=3)
    return b[:, 0], b[:, 1]


def check_fit_arguments(*, num_steps, pretrain_steps, warm_start, num_particles, chordal, **rates):
    """:meth:`MultiFidelityEmulator.fit`'s arguments, checked before any pretraining (a bad ``num_steps`` must not
    cost the pretraining, and ``num_steps <= warm_start`` must not become one structured step without a word).

    :param rates: the learning rates and multipliers by name (each a positive finite number).
    :returns: the warm-start steps (``warm_start``, or ``num_steps // 6`` when it is ``None``).
    :raises ValueError: naming the argument.
    """
    def integer(name, value, low):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"MultiFidelityEmulator.fit: {name} must be an integer >= {low}, got {value!r}")

    integer("num_steps", num_steps, 1)
    warm_start = num_steps // 6 if warm_start is None else warm_start
    for name, value, low in (("pretrain_steps", pretrain_steps, 0), ("warm_start", warm_start, 0),
                             ("num_particles", num_particles, 1)):
        integer(name, value, low)
    for name, value in rates.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            raise ValueError(f"MultiFidelityEmulator.fit: {name} must be a positive finite number, got {value!r}")
    if chordal and warm_start >= num_steps:
        raise ValueError(f"MultiFidelityEmulator.fit: warm_start ({warm_start}) must be smaller than num_steps "
                         f"({num_steps}): the chordal guide trains for num_steps - warm_start steps after it")
    return int(warm_start)


def _same(value, default):
    """``value`` is the argument's default (``nan`` never is)."""
    return value is default or (type(value) is type(default) and value == default)


def check_exact_fit_arguments(fit, **given):
    """``fit(method="exact")`` takes no steps: refuse each step option of ``given`` that differs from its default in
    ``fit``'s signature, which the exact fit would otherwise ignore without a word.

    :raises ValueError: naming the first such argument and the fix."""
    defaults = inspect.signature(fit).parameters
    changed = [k for k, v in given.items() if not _same(v, defaults[k].default)]
    if changed:
        raise ValueError(f"MultiFidelityEmulator.fit(method='exact'): {changed[0]}={given[changed[0]]!r} does not "
                         "apply: the exact fit runs L-BFGS to convergence on each fidelity's collapsed bound, with no "
                         f"steps or learning rates; drop {', '.join(changed)} (or use method='svi')")
