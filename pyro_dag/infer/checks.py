"""Guards against non-finite losses and gradients in the library's estimators and training loops.

An infinite or NaN ELBO is never a usable result: left alone, the optimiser turns it into NaN parameters and the
next step fails far from the cause (typically inside a distribution's argument validation). The library's
estimator (:class:`~pyro_dag.infer.DAGELBO`) and its training loops raise :class:`NonFiniteLossError` instead,
naming the term (the KL, or which node's expected log-likelihood), the step where the loop knows it, and the
likely causes: data on a scale whose squares overflow the dtype, or a learning rate (step size) so large
that the parameters diverged.
"""
import contextlib
import math

import torch

__all__ = ["NonFiniteLossError", "LIKELY_CAUSES", "check_finite_loss", "check_finite_gradients", "data_scale_note",
           "training_step"]

#: The advice every non-finite error ends with.
LIKELY_CAUSES = ("Likely causes: observations or inputs on a very large scale (standardise them, e.g. to zero "
                 "mean and unit variance per column), or a learning rate / step size so large that the parameters "
                 "diverged (lower it).")


class NonFiniteLossError(ValueError):
    """A loss or a gradient is infinite or NaN.

    :ivar step: the 1-based step of the training loop that raised it, or ``None`` outside a loop.
    """

    step = None


def _tensors(obj, depth=0):
    if torch.is_tensor(obj):
        yield obj
    elif depth < 3 and isinstance(obj, dict):
        for v in obj.values():
            yield from _tensors(v, depth + 1)
    elif depth < 3 and isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _tensors(v, depth + 1)


def data_scale_note(*objs):
    """A sentence on the largest finite magnitude among the floating-point tensors in ``objs`` (nested dicts,
    lists and tuples of tensors, e.g. a model's ``(inputs, data)``) and the dtype's overflow limit for its
    square, or ``""`` if there is no such tensor."""
    best, dtype = None, None
    for t in _tensors(objs):
        if not t.is_floating_point() or t.numel() == 0:
            continue
        a = t.detach().abs()
        a = a[torch.isfinite(a)]
        if a.numel() == 0:
            continue
        m = float(a.max())
        if best is None or m > best:
            best, dtype = m, t.dtype
    if best is None:
        return ""
    limit = math.sqrt(torch.finfo(dtype).max)
    if best > limit:
        return (f" The largest |value| in the model's arguments, {best:.3g} ({dtype}), exceeds {limit:.3g}, above "
                "which its square overflows to inf.")
    return f" The largest |value| in the model's arguments is {best:.3g} ({dtype}; squares overflow above {limit:.3g})."


def check_finite_loss(loss, where, *data):
    """Raise :class:`NonFiniteLossError` if ``loss`` (a float or a scalar tensor) is not finite.

    :param str where: what it is, e.g. ``"the loss"``; starts the message (``"{where} is inf. ..."``).
    :param data: the model's arguments, for :func:`data_scale_note`.
    """
    value = float(loss)
    if not math.isfinite(value):
        raise NonFiniteLossError(f"{where} is {value}. {LIKELY_CAUSES}{data_scale_note(*data)}")


def check_finite_gradients(named_tensors, where, loss=None):
    """Raise :class:`NonFiniteLossError` naming the first parameter whose gradient has a non-finite entry.

    :param named_tensors: iterable of ``(name, tensor)``; tensors without ``.grad`` are skipped.
    :param str where: starts the message. :param float loss: the (finite) loss, quoted in the message.
    """
    named = [(n, t.grad) for n, t in named_tensors if t.grad is not None]
    if not named:
        return
    # one reduction and one synchronisation in the common (finite) case (a sum that overflows is checked below)
    total = torch.cat([g.reshape(-1) for _, g in named]).sum()
    if torch.isfinite(total):
        return
    for name, g in named:
        bad = ~torch.isfinite(g)
        if bad.any():
            kind = "NaN" if torch.isnan(g).any() else "infinite"
            at = "" if loss is None else f" the loss is finite ({float(loss):.6g}) but"
            raise NonFiniteLossError(f"{where}:{at} the gradient of parameter {name!r} has {int(bad.sum())} {kind} "
                                     f"entries. {LIKELY_CAUSES}")
    # every gradient is finite but their sum overflowed: nothing to report


@contextlib.contextmanager
def training_step(loop, step, record=True):
    """Prefix any :class:`NonFiniteLossError` raised in the block with ``"{loop}, step {step}: "``, keeping the
    original traceback.

    :param str loop: the loop's name. :param int step: its 1-based step.
    :param bool record: also set the error's :attr:`~NonFiniteLossError.step` (the first loop that records a
        step wins, and later loops leave the message alone); ``False`` for an optimiser's own step count inside
        a caller's loop, which still prefixes the message.
    """
    try:
        yield
    except NonFiniteLossError as e:
        if e.step is None:
            e.args = (f"{loop}, step {step}: {e.args[0] if e.args else ''}",) + tuple(e.args[1:])
            if record:
                e.step = step
        raise
