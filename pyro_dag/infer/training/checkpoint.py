"""Checkpoints of a training run: parameters, optimiser moments, counters and random-number state, written
atomically.

A checkpoint is a ``torch.save`` file of plain containers, tensors and numbers only (it loads with
``torch.load(..., weights_only=True)``). It is written to a temporary file in the same directory, flushed to disk
and moved over the old one with ``os.replace``, so that a run killed at any moment leaves either the previous
checkpoint or the new one, never a partial file (the temporary files of killed writes are removed at the next
write or resume). A file that is not a readable checkpoint raises :class:`CheckpointError` naming it.
"""
import contextlib
import glob
import os
import random
import tempfile
import time

import numpy as np
import pyro
import torch

from ...outputs import OutputError, atomic_write, remove_leftovers, torch_save

__all__ = ["CheckpointError", "capture_rng_state", "restore_rng_state", "capture_params", "restore_params",
           "save_checkpoint", "load_checkpoint", "check_writable", "checkpoint_file", "CHECKPOINT_NAME"]

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


class CheckpointError(ValueError):
    """A checkpoint file that cannot be resumed from (empty, truncated, corrupt, or not written by
    :func:`~pyro_dag.infer.train`); the message names the file and the fix."""


#: Entries every checkpoint of :func:`~pyro_dag.infer.train` holds (format 1).
_REQUIRED = ("settings", "step", "losses", "params", "adam", "setup", "rng")
#: Age (seconds) past which a temporary file of the earlier naming (``.tmp-*.pt``, shared with other writers) is a
#: leftover of a killed run rather than a file being written now.
_LEGACY_AGE = 600.0


def _remove_leftovers(path):
    """Temporary files of killed writes of ``path``: this checkpoint's own (``.{stem}.tmp-*.pt``, any age) and
    those of the earlier naming (``.tmp-*.pt``) older than ten minutes."""
    remove_leftovers(path)
    now = time.time()
    for leftover in glob.glob(os.path.join(glob.escape(os.path.dirname(os.path.abspath(path))), ".tmp-*.pt")):
        with contextlib.suppress(OSError):
            if now - os.path.getmtime(leftover) > _LEGACY_AGE:
                os.unlink(leftover)


def save_checkpoint(path, state):
    """Write ``state`` (a dict of containers, tensors and numbers) to ``path`` atomically: a temporary file in
    the same directory (``.{stem}.tmp-*.pt``), flushed and synced, then ``os.replace``. Temporary files that killed
    runs left beside ``path`` are removed first.

    :raises pyro_dag.outputs.OutputError: naming ``path`` when the file cannot be written (a full disk); the
        previous checkpoint is then left intact.
    """
    _remove_leftovers(path)
    try:
        atomic_write(path, lambda tmp: torch_save(state, tmp))   # torch's write failures are OSErrors there
    except OutputError as e:
        cause = e.__cause__ if isinstance(e.__cause__, OSError) else e
        raise OutputError(e.errno, f"train: could not write the checkpoint {os.fspath(path)!r} "
                          f"({cause.strerror or cause}); the previous checkpoint there, if any, is intact. Free some "
                          "space (or pass checkpoint= a path on another disk) and run again with resume=True to "
                          "continue from it", e.path) from cause


def load_checkpoint(path, map_location=None):
    """Read a checkpoint written by :func:`save_checkpoint` (``weights_only=True``: no code is run). Temporary files
    that killed runs left beside ``path`` are removed.

    :raises CheckpointError: naming ``path``, for an empty, truncated or corrupt file, or one that is not a
        checkpoint of :func:`~pyro_dag.infer.train` (another torch file, a saved model).
    """
    path = os.fspath(path)
    _remove_leftovers(path)
    fix = "delete it (or pass checkpoint= / --checkpoint another path) to start afresh"
    if os.path.isfile(path) and os.path.getsize(path) == 0:
        raise CheckpointError(f"train: the checkpoint {path!r} is empty (0 bytes), so it cannot be resumed from: {fix}")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # torch's own text suggests weights_only=False, which would run code from the file
        first = (str(e).strip().splitlines() or [""])[0]
        detail = "" if "weights_only" in str(e) or not first else f": {first[:200]}"
        raise CheckpointError(f"train: the checkpoint {path!r} cannot be read ({type(e).__name__}{detail}); it is "
                              "truncated, corrupt or not a checkpoint written by train(checkpoint=...): "
                              f"{fix}") from None
    if not isinstance(state, dict) or state.get("format") != 1 or any(k not in state for k in _REQUIRED):
        if isinstance(state, dict) and "pyro_dag_format" in state:
            what = "a saved model (pyro_dag.persist.save), which pyro_dag.persist.load reads"
        elif isinstance(state, dict):
            what = f"a dict with keys {sorted(map(str, state))[:6]}"
        else:
            what = f"a {type(state).__name__}"
        raise CheckpointError(f"train: {path!r} is not a checkpoint written by train(checkpoint=...) (it holds "
                              f"{what}): {fix}")
    return state
