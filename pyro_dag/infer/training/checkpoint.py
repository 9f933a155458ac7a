"""Checkpoints of a training run: parameters, optimiser moments, counters and random-number state, written
atomically.

A checkpoint is a ``torch.save`` file of plain containers, tensors and numbers only (it loads with
``torch.load(..., weights_only=True)``). It is written to a temporary file in the same directory, flushed to disk
and moved over the old one with ``os.replace``, so that a run killed at any moment leaves either the previous
checkpoint or the new one, never a partial file (the temporary files of killed writes are removed at the next
write or resume). A file that is not a readable checkpoint raises :class:`CheckpointError` naming it.

A checkpoint proves what it holds (format 2): the SHA-256 checksum of its content
(:func:`pyro_dag.fingerprint.checksum`) and a record of the run (:func:`run_record`: the guide's class and precision,
the graph, the dtype and the fingerprint of the training inputs and data). Resuming verifies both and refuses a
mismatch by name (:func:`check_record`), so a run never continues from changed bytes or from another run's
parameters. One process writes a checkpoint at a time (:class:`CheckpointLock`, an advisory ``fcntl`` lock on
``.{name}.lock`` beside it with the owner's pid, host and start time), and a run never replaces a file that is not a
checkpoint (:func:`check_replaceable`). Checkpoints of format 1 still resume, with a :class:`CheckpointFormatWarning`.
"""
import contextlib
import glob
import json
import os
import random
import socket
import tempfile
import time
import warnings

import numpy as np
import pyro
import torch

from ...fingerprint import checksum, data_fingerprint
from ...outputs import OutputError, atomic_write, remove_leftovers, torch_save

try:
    import fcntl
except ImportError:  # not on POSIX: no lock (the owner record is still written)
    fcntl = None

__all__ = ["CheckpointError", "CheckpointInUseError", "CheckpointFormatWarning", "CheckpointLock", "capture_rng_state",
           "restore_rng_state", "capture_params", "restore_params", "save_checkpoint", "load_checkpoint",
           "check_writable", "check_replaceable", "checkpoint_file", "run_record", "check_record", "CHECKPOINT_NAME",
           "FORMAT"]

#: The ``"format"`` entry of checkpoints written now; format 1 (no checksum, no record) is still read.
FORMAT = 2

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


class CheckpointInUseError(CheckpointError):
    """Another process holds the checkpoint (:class:`CheckpointLock`); the message names its owner."""


class CheckpointFormatWarning(UserWarning):
    """A checkpoint of format 1: it resumes, but its bytes and the data it belongs to cannot be verified."""


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
    state = {k: v for k, v in state.items() if k != "checksum"}
    state["checksum"] = checksum(state)
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
    if not isinstance(state, dict) or state.get("format") not in (1, FORMAT) or any(k not in state for k in _REQUIRED):
        if isinstance(state, dict) and "pyro_dag_format" in state:
            what = "a saved model (pyro_dag.persist.save), which pyro_dag.persist.load reads"
        elif isinstance(state, dict):
            what = f"a dict with keys {sorted(map(str, state))[:6]}"
        else:
            what = f"a {type(state).__name__}"
        raise CheckpointError(f"train: {path!r} is not a checkpoint written by train(checkpoint=...) (it holds "
                              f"{what}): {fix}")
    if state["format"] == 1:
        warnings.warn(f"train: the checkpoint {path!r} is of format 1 (written before checkpoints carried a checksum "
                      "and a record of the run's data, guide and graph): resuming from it, but its bytes and the data "
                      "it belongs to cannot be verified", CheckpointFormatWarning, stacklevel=3)
        return state
    stored = state.pop("checksum", None)
    if stored is None or checksum(state) != stored:
        raise CheckpointError(f"train: the checkpoint {path!r} does not match its checksum: its contents changed "
                              "after it was written (corrupted on disk, or edited), so its values cannot be trusted: "
                              f"{fix}")
    return state


# ------------------------------------------------------------------------------------------ what a run is
def _data_fingerprint(inputs, data, mask):
    try:
        parts = [p if p is None or isinstance(p, dict) else {"": p} for p in (inputs, data, mask)]
        return data_fingerprint(*parts)
    except (TypeError, ValueError, RuntimeError):  # a generic model's arguments: not fingerprinted
        return None


def run_record(model, guide, inputs, data, mask=None, dgp=None):
    """What a checkpoint belongs to: the guide's class and precision, the DAG-DGP's graph and dtype (``dgp``, when
    the model is or holds one) and the fingerprint of the training inputs and data
    (:func:`pyro_dag.fingerprint.data_fingerprint`)."""
    record = {"guide_class": type(guide).__name__, "precision": getattr(guide, "precision", None),
              "graph": None, "dtype": None, "data": _data_fingerprint(inputs, data, mask)}
    if dgp is not None:
        record["graph"] = {"nodes": sorted(str(v) for v in dgp.graph.nodes),
                           "edges": sorted([str(a), str(b)] for a, b in dgp.graph.edges)}
        record["dtype"] = str(dgp.dtype).rsplit(".", 1)[-1]
    return record


_RECORD_WORDS = {"guide_class": ("a guide of class", "build the guide as in the saved run"),
                 "precision": ("a guide of precision", "build the guide with the saved run's precision"),
                 "graph": ("a model of the graph", "build the model on the saved run's graph"),
                 "dtype": ("a model of dtype", "build the model in the saved run's dtype"),
                 "data": ("training inputs and data of fingerprint",
                          "resume with the saved run's inputs and data (another data set needs its own checkpoint)")}


def check_record(state, record, path):
    """Refuse to resume ``state`` (a loaded checkpoint) in a run whose :func:`run_record` differs, naming what.

    :raises CheckpointError: naming the checkpoint, the entry (guide class, precision, graph, dtype, data), both
        values and the fix."""
    saved = state.get("record")
    if saved is None:   # format 1: warned at load
        return
    for key, (words, fix) in _RECORD_WORDS.items():
        old, new = saved.get(key), record.get(key)
        if old is None or new is None or old == new:
            continue
        if key == "graph":
            old, new = old["edges"], new["edges"]
        raise CheckpointError(f"train: the checkpoint {path!r} was written by a run on {words} {old!r}, this run "
                              f"has {new!r}: {fix}, or pass checkpoint= another path to start afresh")


def check_replaceable(path):
    """Refuse to start a run whose checkpoint path holds a file that is not a :func:`~pyro_dag.infer.train`
    checkpoint (a saved fit, another torch file, any other file): the run would replace it.

    :raises CheckpointError: naming the file, what it holds and the fix."""
    from ...persist import file_kind

    kind = file_kind(path)
    if kind is not None and kind != "a train() checkpoint":
        raise CheckpointError(f"train: the checkpoint path {os.fspath(path)!r} holds {kind}; a run writes its "
                              "checkpoints there and would replace it: pass checkpoint= another path")


# ------------------------------------------------------------------------------------------ one writer
class CheckpointLock:
    """One writer per checkpoint: an exclusive advisory lock (``fcntl.flock``) on ``.{name}.lock`` beside the
    checkpoint, taken for a whole run, with an owner record (pid, host, start time) that a refused process names.
    The lock goes with the process (a killed run leaves no stale lock, only the small lock file, which the next run
    takes over); a finished run removes the lock file.

    :raises CheckpointInUseError: on entering, when another process holds the lock."""

    def __init__(self, path):
        path = os.fspath(path)
        self.path = path
        self.lock_path = os.path.join(os.path.dirname(os.path.abspath(path)), f".{os.path.basename(path)}.lock")
        self._fd = None

    def __enter__(self):
        for _ in range(10):  # the lock file of a run that just finished may be removed under us: take the new one
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                if fcntl is not None:
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        owner = self._owner(fd)
                        raise CheckpointInUseError(
                            f"train: the checkpoint {self.path!r} is in use by another run ({owner}); two runs "
                            "writing one checkpoint would overwrite each other's state: wait for that run to finish, "
                            "or pass checkpoint= another path") from None
                try:
                    current = os.stat(self.lock_path).st_ino
                except FileNotFoundError:
                    current = None
                if current != os.fstat(fd).st_ino:
                    os.close(fd)
                    continue
                record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                     "since": time.strftime("%Y-%m-%d %H:%M:%S")}).encode()
                os.ftruncate(fd, 0)
                os.pwrite(fd, record, 0)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            return self
        raise CheckpointInUseError(f"train: could not take the lock {self.lock_path!r} of the checkpoint "
                                   f"{self.path!r}: other runs keep replacing it; pass checkpoint= another path")

    @staticmethod
    def _owner(fd):
        try:
            owner = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
            return f"pid {owner['pid']} on {owner['host']}, since {owner['since']}"
        except (OSError, ValueError, KeyError):
            return "owner unknown"

    def __exit__(self, *exc):
        if self._fd is not None:
            with contextlib.suppress(OSError):  # removed while held: a process that opened it retries on the new one
                os.unlink(self.lock_path)
            if fcntl is not None:
                with contextlib.suppress(OSError):
                    fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
        return False
