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


def prepare_data(data, dtype, device, node_names=None):
    """The data as a finite ``[N, p]`` tensor (``N >= 2``, ``p >= 2``) and the column names.

    :param data: ``[N, p]`` tensor, array, nested list or ``pandas.DataFrame`` (numeric columns only: a string or
        categorical column raises an error that names it).
    :param list node_names: ``p`` distinct names of the columns (default: a DataFrame's column names); the errors
        name a bad column by its name.
    :returns: ``(X, names)``; ``names`` is ``node_names`` (as strings), else a DataFrame's column names, else
        ``None``.
    :raises ValueError: naming the column (by name where known) that holds NaN, inf or a value beyond ``dtype``'s
        range; naming the duplicated name when two columns share one (a DataFrame's or ``node_names``); when
        ``node_names`` does not have ``p`` names.
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
            data = np.array(data, dtype=float)
            X = torch.as_tensor(data, dtype=dtype, device=device)
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
    if node_names is not None:
        if isinstance(node_names, str) or len(node_names) != p:
            raise ValueError(f"node_names must hold one name per column of the data ({p}); got {node_names!r}")
        names = [str(v) for v in node_names]
    if names is not None:
        _check_distinct(names, "node_names" if node_names is not None else "the data's columns")
    if not torch.isfinite(X).all():
        for j in range(p):  # a value finite in float64 but beyond float32: say so, not "NaN or inf"
            float32_overflow(data[:, j], X[:, j], f"data column {_label(j, names)}",
                             fix="pass dtype=torch.float64 (structure.fit) or float64 data")
        bad = (~torch.isfinite(X)).any(0).nonzero().flatten().tolist()
        rows = (~torch.isfinite(X)).any(1).nonzero().flatten().tolist()
        shown = ", ".join(_label(j, names) for j in bad)
        raise ValueError(f"data contain NaN or inf in column{'s' if len(bad) > 1 else ''} {shown} (rows "
                         f"{rows[:5]}{' ...' if len(rows) > 5 else ''}); impute or drop those rows first")
    return X, names


def _label(j, names):
    """Column ``j`` as the user knows it: its name where known, else its index."""
    return repr(names[j]) if names is not None else str(j)


def _check_distinct(names, what):
    seen = {}
    for j, v in enumerate(names):
        if v in seen:
            raise ValueError(f"{what} name {v!r} twice (columns {seen[v]} and {j}): structure learning needs one "
                             "distinct name per variable; rename or drop one of them")
        seen[v] = j


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
        bad = [repr(names[j]) if isinstance(names, list) else str(j) for j in (sd == 0).nonzero().flatten().tolist()]
        raise ValueError(f"column{'s' if len(bad) > 1 else ''} {', '.join(bad)} {'are' if len(bad) > 1 else 'is'} "
                         f"constant (no variation, so no dependence to learn); drop {'them' if len(bad) > 1 else 'it'} before fitting")
    mean = torch.tensor([m for m, _ in moments], dtype=torch.float64)
    return (X - mean.to(X)) / sd.to(X)
