"""Checkpoints of a training run: parameters, optimiser moments, counters and random-number state, written
atomically.

A checkpoint is a ``torch.save`` file of plain containers, tensors and numbers only (it loads with
``torch.load(..., weights_only=True)``). It is written to a temporary file in the same directory, flushed to disk
and moved over the old one with ``os.replace``, so that a run killed at any moment leaves either the previous
checkpoint or the new one, never a partial file.
"""
import os
import random
import tempfile

import numpy as np
import pyro
import torch

__all__ = ["capture_rng_state", "restore_rng_state", "capture_params", "restore_params", "save_checkpoint",
           "load_checkpoint", "check_writable", "checkpoint_file", "CHECKPOINT_NAME"]

#: File name used when a checkpoint path names a directory.
CHECKPOINT_NAME = "train_checkpoint.pt"


def capture_rng_state():
    """torch (CPU and every CUDA device), numpy and Python random-number states, as plain containers."""
    state = {"torch": torch.get_rng_state(), "python": _py_state(random.getstate())}
    np_state = np.random.get_state()
    state["numpy"] = [np_state[0], torch.from_numpy(np_state[1].astype(np.int64)), int(np_state[2]),
                      int(np_state[3]), float(np_state[4])]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _py_state(state):
    version, internal, gauss = state
    return [version, list(internal), gauss]


def restore_rng_state(state):
    """Inverse of :func:`capture_rng_state`."""
    torch.set_rng_state(state["torch"])
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def capture_params():
    """``{name: unconstrained value}`` (detached clones) of every parameter in Pyro's parameter store."""
    return {name: p.detach().clone() for name, p in pyro.get_param_store().named_parameters()}


@torch.no_grad()
def restore_params(values, ignore_missing=()):
    """Copy ``values`` (from :func:`capture_params`) into the parameter store's tensors in place, so that modules
    and optimisers holding them see the values.

    :param ignore_missing: name prefixes that may be absent from the store (e.g. a finished warm-start guide's).
    :raises ValueError: naming a parameter that the store does not hold or whose shape differs.
    """
    store = dict(pyro.get_param_store().named_parameters())
    for name, value in values.items():
        p = store.get(name)
        if p is None:
            if any(name.startswith(prefix) for prefix in ignore_missing):
                continue
            raise ValueError(f"the checkpoint has parameter {name!r}, which the model and guide did not create; "
                             "build them as in the run that was saved")
        if p.shape != value.shape:
            raise ValueError(f"parameter {name!r} has shape {tuple(p.shape)} but the checkpoint's has "
                             f"{tuple(value.shape)}; build the model and guide as in the run that was saved")
        p.copy_(value)


def checkpoint_file(path):
    """The file a checkpoint path names: ``path`` itself, or ``path/train_checkpoint.pt`` when ``path`` is an
    existing directory or ends with a separator."""
    path = os.fspath(path)
    if os.path.isdir(path) or path.endswith(os.sep):
        return os.path.join(path, CHECKPOINT_NAME)
    return path


def check_writable(path):
    """Create the checkpoint's directory if needed and write a probe file there.

    :raises ValueError: naming the directory, if it cannot be created or written.
    """
    directory = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(directory, exist_ok=True)
        with tempfile.TemporaryFile(dir=directory):
            pass
    except OSError as e:
        raise ValueError(f"train: cannot write the checkpoint {path!r}: its directory {directory!r} is not a "
                         f"writable directory ({e.strerror or e}); pass checkpoint= a path in a writable "
                         "directory") from None
    if os.path.isdir(path):
        raise ValueError(f"train: the checkpoint path {path!r} is a directory")


def save_checkpoint(path, state):
    """Write ``state`` (a dict of containers, tensors and numbers) to ``path`` atomically: a temporary file in
    the same directory, flushed and synced, then ``os.replace``."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def load_checkpoint(path, map_location=None):
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``: no code is run)."""
    return torch.load(path, map_location=map_location, weights_only=True)
