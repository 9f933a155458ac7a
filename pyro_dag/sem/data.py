"""Data handling of latent SEMs: a DataFrame of indicators -> a centred (and scaled) tensor with a missing mask.

Silva & Gramacy (2010, arXiv:1002.4802, Sec. 3.2) centre every observed variable at its empirical mean; with
``standardize=True`` (the default of :class:`~pyro_dag.sem.LatentSEM`) each indicator is also divided by its
empirical standard deviation, so that one set of unit-scale priors fits any data. The transform is fitted once
(on the training data) and reused for new cases; log-densities are reported in the original units (the
log-Jacobian ``-Σ_j log s_j`` of the scaling is added back by :func:`pyro_dag.sem.predictive_log_likelihood`).
"""
from dataclasses import dataclass

import numpy as np
import torch

from ..scaling import column_moments
from .identifiability import SEMSpecError

__all__ = ["IndicatorScaler", "check_subsample", "indicator_array"]


def indicator_array(data, columns):
    """The indicator columns of ``data`` as a float64 array ``[n, J]`` (NaN = missing).

    :param data: a pandas DataFrame (or a dict ``{column: 1-D array}``).
    :param list columns: indicator names, in model order.
    :raises SEMSpecError: for a missing or non-numeric column, or a column with inf.
    """
    if data is None:
        raise SEMSpecError("data is None; pass a DataFrame with the indicator columns")
    if hasattr(data, "columns"):
        present = set(data.columns)
    elif isinstance(data, dict):
        present = set(data)
    else:
        raise SEMSpecError(f"data must be a pandas DataFrame (or a dict of columns), got {type(data).__name__}")
    if hasattr(data, "columns"):
        names = [str(c) for c in data.columns]
        twice = sorted({c for c in names if names.count(c) > 1})
        if twice:   # data[c] would be a frame of both columns (reported as columns of different lengths)
            raise SEMSpecError(f"the data name column {twice[0]!r} twice; rename or drop one of them")
    cols = []
    for c in columns:
        if c not in present:
            raise SEMSpecError(f"indicator {c!r} is not a column of the data (columns: {sorted(map(str, present))})")
        values = data[c]
        arr = np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)
        if arr.dtype == bool or not np.issubdtype(arr.dtype, np.number):
            raise SEMSpecError(f"indicator column {c!r} is not numeric (dtype {arr.dtype}); indicators are "
                               "continuous: encode or drop it")
        arr = arr.astype(np.float64).reshape(-1)
        if np.isinf(arr).any():
            raise SEMSpecError(f"indicator column {c!r} contains inf; use NaN for a missing value")
        cols.append(arr)
    lengths = {len(a) for a in cols}
    if len(lengths) != 1:
        raise SEMSpecError(f"indicator columns have different lengths {sorted(lengths)}")
    out = np.stack(cols, axis=1)
    if out.shape[0] == 0:
        raise SEMSpecError("data has no rows")
    if out.shape[0] == 1:   # one row is not a constant indicator: there is nothing to estimate a scale from
        raise SEMSpecError("data has one row; a latent SEM needs at least 2 (and many more to identify it)")
    return out


@dataclass
class IndicatorScaler:
    """Per-indicator centring and scaling, ``(y - mean) / scale``, fitted on training data.

    :ivar numpy.ndarray mean: ``[J]`` empirical means (missing values ignored).
    :ivar numpy.ndarray scale: ``[J]`` empirical standard deviations (ones when not standardising).
    """

    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(cls, array, standardize=True, columns=None):
        """Fit on ``[n, J]`` (NaN = missing). :raises SEMSpecError: for a column observed nowhere, constant, or
        whose standard deviation overflows float64 (:func:`pyro_dag.scaling.column_moments`)."""
        mean, sd = np.zeros(array.shape[1]), np.zeros(array.shape[1])
        for j in range(array.shape[1]):
            name = columns[j] if columns is not None else j
            if np.isnan(array[:, j]).all():
                raise SEMSpecError(f"indicator {name!r} is missing (NaN) in every row")
            # refuses values whose standard deviation overflows (every scaled value would be 0)
            mean[j], sd[j] = column_moments(array[:, j], f"indicator {name!r}", error=SEMSpecError)
            if standardize and not sd[j] > 0:
                raise SEMSpecError(f"indicator {name!r} is constant, so it carries no information about its latent; "
                                   "drop it")
        scale = sd if standardize else np.ones_like(sd)
        return cls(mean=mean, scale=scale)

    def transform(self, array, dtype=torch.float64, device=None):
        """``(y, mask)``: the scaled tensor ``[n, J]`` with missing entries set to 0 and the bool mask (True =
        observed)."""
        z = (array - self.mean) / self.scale
        mask = ~np.isnan(z)
        z = np.where(mask, z, 0.0)
        return (torch.as_tensor(z, dtype=dtype, device=device), torch.as_tensor(mask, device=device))

    def log_jacobian(self):
        """``-Σ_j log s_j``: add to a log-density of the scaled data to get the one in the original units (per
        fully observed case)."""
        return float(-np.log(self.scale).sum())


def check_subsample(subsample_size, subsample, n):
    """Refuse a minibatch size outside ``1..n`` (or a bool / non-integer) and explicit indices outside ``[0, n)``,
    naming the fix, before Pyro's plate does with its own error (or, for a size above ``n``, silently uses ``n``).

    :raises SEMSpecError:
    """
    if subsample_size is not None:
        ok = isinstance(subsample_size, (int, np.integer)) and not isinstance(subsample_size, (bool, np.bool_))
        if not ok or not 1 <= int(subsample_size) <= n:
            raise SEMSpecError(f"subsample_size must be an integer between 1 and the number of cases n = {n}, got "
                               f"{subsample_size!r}; pass subsample_size=None for full-batch training")
    if subsample is not None:
        idx = torch.as_tensor(subsample)
        if idx.dim() != 1 or idx.numel() == 0 or idx.dtype.is_floating_point or idx.dtype == torch.bool \
                or not bool(((idx >= 0) & (idx < n)).all()):
            raise SEMSpecError(f"subsample must be a non-empty 1-d tensor of case indices in [0, n = {n}), got "
                               f"{idx.dtype} of shape {tuple(idx.shape)}")
