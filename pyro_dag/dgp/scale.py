"""Data and inputs whose scale is far from 1.

A :class:`~pyro_dag.DAGDGP` starts the default kernel of a node whose parents are all observed at a pilot exact GP's
fit (``kernel_init="pilot"``), which follows the data's scale; every other kernel (one you pass, ``kernel_init=
"default"``, a node below a hidden node) starts with length-scales and variances of 1. On inputs or data at 1e-8 or
1e8 such a kernel starts so far from the data that training fits everything to noise (measured on a 3-node chain,
40 rows, 200 steps: node RMSE 0.74 against 0.036 at unit scale, with RBF kernels passed in). :func:`scale_warnings`
names each such input or observed node at set-up, with the word "rescale"; :func:`scale_hint` adds the same cause to
the noise warnings of :func:`~pyro_dag.infer.train`.
"""
import math
import warnings

import torch

__all__ = ["ScaleWarning", "scale_warnings", "scale_hint", "column_scale", "FAR"]

#: A scale (standard deviation of the observed values) outside ``[1 / FAR, FAR]`` is named.
FAR = 1e3


class ScaleWarning(UserWarning):
    """An input or an observed node whose values' scale is far from 1, met by a kernel that starts at unit
    length-scales and variances: rescale it."""


def column_scale(t):
    """The largest standard deviation over the columns of ``t`` ``[n, d]`` (finite values only), or ``None``."""
    if not torch.is_tensor(t) or not t.is_floating_point() or t.dim() < 1 or t.shape[0] < 2:
        return None
    t = t.detach().reshape(t.shape[0], -1).double()
    scales = []
    for j in range(t.shape[1]):
        col = t[:, j][torch.isfinite(t[:, j])]
        if col.numel() >= 2:
            scales.append(float(col.std()))
    scales = [s for s in scales if s > 0 and math.isfinite(s)]
    return max(scales) if scales else None


def _far(scale):
    return scale is not None and not (1 / FAR <= scale <= FAR)


def _pilot_started(model, w, X, obs):
    """Whether the set-up starts ``w``'s kernel at the pilot fit (see :meth:`DAGDGP._set_noise`)."""
    parents = model.parents[w]
    return (model.kernel_init == "pilot" and w in model._default_kernels and w in obs
            and obs[w][0].shape[-1] == 1 and all(p in X or p in obs for p in parents))


def scale_warnings(model, X, obs):
    """Warn (:class:`ScaleWarning`) for each root input and observed node whose scale is outside ``[1e-3, 1e3]``
    and that feeds (or is) a node whose kernel starts at unit hyperparameters. Called by
    :meth:`~pyro_dag.DAGDGP.setup`.

    :param dict X: ``{root: [n, D]}`` the inputs. :param dict obs: ``{node: (values [n, d], mask)}``.
    :returns: the names warned about."""
    named = []
    values = {r: x for r, x in X.items()}
    values.update({w: torch.where(m, y, torch.full_like(y, float("nan"))) for w, (y, m) in obs.items()})
    for v, t in values.items():
        scale = column_scale(t)
        if not _far(scale):
            continue
        children = [w for w in model.gp_nodes if v in model.parents[w] and not _pilot_started(model, w, X, obs)]
        own = v in model.gp_nodes and v in obs and not _pilot_started(model, v, X, obs)
        if not children and not own:
            continue
        what = f"input {v!r}" if v in X else f"the data of node {v!r}"
        met = (f"the kernel of {children[0]!r}" + (" (and others)" if len(children) > 1 else "") if children
               else "its own kernel")
        warnings.warn(f"{what} {'has' if v in X else 'have'} scale {scale:.3g} (standard deviation), far from 1, and {met} starts at unit "
                      "length-scales and variances (a kernel you passed, kernel_init='default', or a node below a "
                      f"hidden node), so training may fit noise instead of signal: rescale {v!r} (standardise each "
                      "column), or start the kernel's hyperparameters at the data's scale", ScaleWarning,
                      stacklevel=4)
        named.append(v)
    return named


def scale_hint(model, w, inputs=None, data=None):
    """A sentence naming the data scale when it is a likely cause of a poor fit at node ``w`` (its data or an
    observed parent's values at a scale outside ``[1e-3, 1e3]``), or ``""``."""
    for v in [w] + list(getattr(model, "parents", {}).get(w, [])):
        t = (inputs or {}).get(v) if isinstance(inputs, dict) else None
        if t is None and isinstance(data, dict):
            t = data.get(v)
        scale = column_scale(t)
        if _far(scale):
            what = "its data" if v == w else f"its parent {v!r}"
            return (f" The likely cause is the scale: {what} ha{'ve' if v == w else 's'} standard deviation "
                    f"{scale:.3g}, far from 1: rescale {v!r} (standardise each column) and fit again.")
    return ""
