"""Checksums of saved files and fingerprints of training data: what lets a saved fit or a checkpoint prove what it
holds.

:func:`checksum` hashes a nested structure of plain containers, strings, numbers and tensors (the content of a
:func:`pyro_dag.persist.save` file or a :func:`~pyro_dag.infer.train` checkpoint) with SHA-256: the tensors by dtype,
shape and bytes, dict entries in sorted key order. A file whose stored checksum is not the checksum of what it holds
changed after it was written (bytes corrupted on disk, or edited).

:func:`data_fingerprint` is the checksum of the training inputs and data (dicts of tensors, values as float64 on the
CPU, so a float32 copy of float64 data has another fingerprint only where rounding changed it): a checkpoint or a
saved fit records it, and a run that resumes or loads with other data is refused instead of silently continuing.
"""
import hashlib
import math

import torch

__all__ = ["checksum", "data_fingerprint"]


def _feed(h, obj):
    if isinstance(obj, torch.Tensor):
        t = obj.detach().to("cpu").contiguous()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.dtype != torch.bool
                     else t.to(torch.uint8).numpy().tobytes())
    elif isinstance(obj, dict):
        h.update(f"D{len(obj)}".encode())
        for key in sorted(obj, key=repr):
            _feed(h, key)
            _feed(h, obj[key])
    elif isinstance(obj, (list, tuple)):
        h.update(f"L{len(obj)}".encode())
        for item in obj:
            _feed(h, item)
    elif isinstance(obj, bool) or obj is None:
        h.update(f"B{obj!r}".encode())
    elif isinstance(obj, int):
        h.update(f"I{obj}".encode())
    elif isinstance(obj, float):
        h.update(f"F{obj.hex() if math.isfinite(obj) else repr(obj)}".encode())
    elif isinstance(obj, str):
        h.update(f"S{len(obj)}:".encode() + obj.encode("utf-8", "surrogatepass"))
    elif isinstance(obj, bytes):
        h.update(f"Y{len(obj)}:".encode() + obj)
    elif isinstance(obj, torch.dtype):
        h.update(f"P{obj}".encode())
    else:  # numpy scalars and the like: their Python value
        item = getattr(obj, "item", None)
        if item is None:
            raise TypeError(f"checksum: cannot hash a {type(obj).__name__}")
        _feed(h, item())


def checksum(obj):
    """SHA-256 (hex) of ``obj``: nested dicts, lists, tuples, strings, numbers, ``None`` and tensors (any dtype,
    any device; hashed by dtype, shape and bytes). Equal structures give equal checksums in any process.

    :raises TypeError: for an object of another type (a saved file holds none)."""
    h = hashlib.sha256()
    _feed(h, obj)
    return h.hexdigest()


def data_fingerprint(*parts):
    """The fingerprint (SHA-256 hex, first 16 characters) of training inputs and data: each part a ``{name: tensor}``
    dict (or ``None``); values are compared as float64 on the CPU, with missing values (NaN) in place."""
    def plain(part):
        if part is None:
            return None
        out = {}
        for k, v in dict(part).items():
            t = torch.as_tensor(v).detach()
            t = t.to("cpu", torch.float64 if t.is_floating_point() else t.dtype)
            if t.is_floating_point():  # one NaN bit pattern: a missing value is missing however it was written
                t = torch.where(torch.isnan(t), torch.full_like(t, float("nan")), t)
            out[str(k)] = t
        return out
    return checksum([plain(p) for p in parts])[:16]
