"""The check every standardisation in pyro_dag shares: a column's mean and standard deviation, refused with an error
naming the column when they overflow (or underflow) float64.

``(y - mean) / sd`` with an infinite ``sd`` turns every value into 0 without a word, and the fit that follows learns
nothing (a CSV fit then reports RMSE 0, structure learning returns its prior). The sum of squares behind ``sd``
overflows once values reach about ``1.34e154`` (the square root of float64's largest number), so such data are
refused here, as :class:`~pyro_dag.DAGDGP` refuses data whose squares overflow; the fix is to rescale the column
(e.g. divide it by a power of ten, or take logs of a positive one).
"""
import math

import numpy as np

__all__ = ["column_moments", "float32_overflow"]

#: the largest magnitude whose square is finite in float64
_SQRT_MAX = math.sqrt(np.finfo(np.float64).max)


def column_moments(values, name, *, error=ValueError, ddof=0):
    """``(mean, sd)`` of one column, as Python floats, computed in float64 with missing values (NaN) ignored.

    :param values: ``[n]`` numbers (numpy array, tensor, list, pandas Series); NaN = missing.
    :param str name: the column as the user knows it (e.g. ``"column 'b'"``, ``"indicator 'y1'"``), for the error.
    :param type error: the error class to raise (the caller's, e.g. :class:`~pyro_dag.DAGInputError`).
    :param int ddof: delta degrees of freedom of ``sd`` (0: population, 1: sample).
    :returns: ``(mean, sd)``; ``sd`` is 0 for a constant column (the caller refuses it in its own words) and NaN
        when fewer than ``ddof + 1`` values are observed.
    :raises error: when the values' squares overflow float64 (``|value| > 1.34e154``), or when they are so small
        that the standard deviation underflows to 0 although the values differ; the message names ``name`` and the
        fix (rescale the column).
    """
    if hasattr(values, "detach"):  # a torch tensor: float64 on the CPU (a float32 sum of squares overflows at 1e19)
        values = values.detach().cpu().double().numpy()
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return float("nan"), float("nan")
    big = float(np.max(np.abs(v)))
    if not big <= _SQRT_MAX:
        raise error(f"{name} reaches {big:.3g}, whose square overflows float64 (largest {np.finfo(np.float64).max:.3g})"
                    ", so its standard deviation cannot be computed and standardising it would turn every value into "
                    "0: rescale the column (e.g. divide it by a power of ten, or take the log of a positive quantity)")
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        mean = float(np.mean(v))
        sd = float(np.std(v, ddof=ddof)) if v.size > ddof else float("nan")
    if not (math.isfinite(mean) and (math.isfinite(sd) or v.size <= ddof)):
        raise error(f"{name} has values up to {big:.3g} whose mean or standard deviation overflows float64: rescale "
                    "the column (e.g. divide it by a power of ten)")
    if sd == 0 and float(np.min(v)) != float(np.max(v)):
        raise error(f"{name} has values of magnitude {big:.3g} whose standard deviation underflows to 0 in float64, "
                    "so they cannot be standardised: rescale the column (e.g. multiply it by a power of ten)")
    return mean, sd


def float32_overflow(source, converted, name, *, error=ValueError, fix="use float64 (model.double())"):
    """Raise ``error`` when ``converted`` (a tensor) has an infinite value where ``source`` (what the user passed,
    any array-like) is finite: the value is finite in float64 but beyond the converted dtype's range, and reporting
    it as "NaN or inf" would send the user looking for a bad value that is not in their data.

    :param str fix: what to do instead, e.g. ``"use a float64 model (model.double())"``.
    """
    import torch

    if converted.dtype == torch.float64 or not converted.is_floating_point() or converted.numel() == 0:
        return
    if bool(torch.isfinite(converted).all()):
        return
    if hasattr(source, "detach"):
        src = source.detach().cpu().double()
    else:
        try:
            src = torch.as_tensor(np.asarray(source, dtype=np.float64))
        except (TypeError, ValueError):
            return
    if src.numel() != converted.numel():
        return
    src = src.reshape(converted.shape)
    over = torch.isfinite(src) & ~torch.isfinite(converted.detach().cpu())
    if bool(over.any()):
        big = float(src[over].abs().max())
        raise error(f"{name} holds {big:.3g}, which is finite but overflows {converted.dtype} (largest "
                    f"{torch.finfo(converted.dtype).max:.3g}): {fix}, or rescale the data")
