"""Input handling for adjacency matrices given as tensors, arrays or nested lists (shared by graph and metrics)."""
import numpy as np
import torch


def as_numpy(x, name):
    """``x`` as a finite float64 numpy array; a clear error names ``name`` otherwise."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{name} must be a tensor, an array or a nested list of numbers; got {type(x).__name__}") from e
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf; pass finite edge probabilities or 0/1 adjacency samples")
    return a


def check_square(a, name, batched=False):
    """``a`` must be ``[p, p]`` (or ``[k, p, p]`` when ``batched``) with ``p >= 2``."""
    if batched:
        ok = a.ndim == 3 and a.shape[1] == a.shape[2]
        shape = "[k, p, p]"
    else:
        ok = a.ndim == 2 and a.shape[0] == a.shape[1]
        shape = "[p, p]"
    if not ok:
        raise ValueError(f"{name} must have shape {shape}; got {list(a.shape)}")
    if a.shape[-1] < 2:
        raise ValueError(f"{name} must have at least 2 nodes; got p = {a.shape[-1]}")


def check_binary(a, name):
    """``a`` must hold only 0/1 entries."""
    if not np.all((a == 0) | (a == 1)):
        bad = a[(a != 0) & (a != 1)].ravel()[:3]
        raise ValueError(f"{name} must contain only 0/1 entries (an adjacency matrix); found values such as {bad.tolist()}. "
                         "Threshold edge probabilities first or pass a [k, p, p] stack of sampled graphs.")


def check_zero_diag(a, name):
    """``a`` must have no self-loops."""
    d = np.diagonal(a, axis1=-2, axis2=-1)
    if np.any(d != 0):
        raise ValueError(f"{name} has a non-zero diagonal (self-loops); set A[..., i, i] = 0")


def checked_adjacency_stack(adj, name="adj"):
    """``adj`` (a ``[p, p]`` or ``[B, p, p]`` 0/1 array or tensor with a zero diagonal, checked) as an int8 stack
    ``[B, p, p]``, and whether it came batched."""
    a = as_numpy(adj, name)
    batched = a.ndim == 3
    check_square(a, name, batched=batched)
    check_binary(a, name)
    check_zero_diag(a, name)
    s = a.astype(np.int8) if batched else a.astype(np.int8)[None]
    return s, batched
