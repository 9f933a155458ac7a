"""Data preparation for structure learning: ``[N, p]`` tensors, arrays or DataFrames checked and standardised."""
import numpy as np
import torch

from ..scaling import column_moments, float32_overflow

__all__ = ["prepare_data", "standardize_columns"]


def _check_frame(frame):
    for name, dtype in zip(frame.columns, frame.dtypes):
        if getattr(dtype, "kind", "O") not in "biuf":
            if str(dtype) == "category":
                fix = f"encode it as numbers (e.g. df[{name!r}].cat.codes) or drop it"
            else:
                fix = (f"convert it with pd.to_numeric(df[{name!r}]) if it holds numbers, encode it as numbers if it "
                       "holds categories, or drop it")
            raise ValueError(f"column {name!r} has dtype {dtype}, not numbers; structure learning needs a numeric "
                             f"column for every variable: {fix}")


def _check_array(data):
    a = np.asarray(data, dtype=object)
    if a.ndim != 2:
        return
    for j in range(a.shape[1]):
        try:
            np.asarray(a[:, j], dtype=float)
        except (TypeError, ValueError):
            bad = next(v for v in a[:, j] if not _is_number(v))
            raise ValueError(f"column {j} holds a value that is not a number ({bad!r}); encode or drop that column "
                             "before fitting") from None


def _is_number(v):
    try:
        float(v)
        return True
    except (TypeError, ValueError):
        return False


def prepare_data(data, dtype, device):
    """The data as a finite ``[N, p]`` tensor (``N >= 2``, ``p >= 2``) and the column names of a DataFrame.

    :param data: ``[N, p]`` tensor, array, nested list or ``pandas.DataFrame`` (numeric columns only: a string or
        categorical column raises an error that names it).
    :returns: ``(X, names)``; ``names`` is ``None`` unless ``data`` is a DataFrame.
    """
    names = None
    if hasattr(data, "columns") and hasattr(data, "to_numpy"):  # pandas DataFrame
        _check_frame(data)
        names = [str(c) for c in data.columns]
        data = data.to_numpy(dtype=float)
    if torch.is_tensor(data):
        X = data.detach().to(dtype=dtype, device=device)
    else:
        try:
            X = torch.as_tensor(np.array(data, dtype=float), dtype=dtype, device=device)
        except (TypeError, ValueError) as e:
            _check_array(data)
            raise TypeError(f"data must be a [N, p] tensor, array or DataFrame of numbers; got {type(data).__name__}") from e
    if X.dim() != 2:
        raise ValueError(f"data must be 2-D [N, p] (rows = samples, columns = variables); got shape {tuple(X.shape)}")
    N, p = X.shape
    if p < 2:
        raise ValueError(f"structure learning needs at least 2 variables (columns); got {p}")
    if N < 2:
        raise ValueError(f"need at least 2 rows of data; got {N}")
    if not torch.isfinite(X).all():
        float32_overflow(data, X, "data", fix="pass dtype=torch.float64 (structure.fit) or float64 data")
        bad = (~torch.isfinite(X)).any(0).nonzero().flatten().tolist()
        raise ValueError(f"data contain NaN or inf in columns {bad}; impute or drop those rows first")
    return X, names


def standardize_columns(X, names=None):
    """``(X - mean) / sd`` per column of ``X`` ``[N, p]``; a constant column, or one whose standard deviation
    overflows float64 (:func:`pyro_dag.scaling.column_moments`: it would standardise to all zeros and the fit would
    return its prior), raises an error naming it. The moments are computed in float64 whatever ``X``'s dtype (a
    float32 sum of squares overflows from 1e19). :param list names: column names for the errors (default indices).
    """
    names = list(names) if names is not None and len(names) == X.shape[1] else range(X.shape[1])
    moments = [column_moments(X[:, j], f"column {names[j]!r}", ddof=1) for j in range(X.shape[1])]
    sd = torch.tensor([s for _, s in moments], dtype=torch.float64)
    if (sd == 0).any():
        raise ValueError(f"columns {(sd == 0).nonzero().flatten().tolist()} are constant; drop them before fitting")
    mean = torch.tensor([m for m, _ in moments], dtype=torch.float64)
    return (X - mean.to(X)) / sd.to(X)
