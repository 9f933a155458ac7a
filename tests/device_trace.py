"""A CPU-only stand-in for a second device: which tensors would sit on the host on a GPU run, and where they meet
tensors that would sit on the device.

On a CUDA run a tensor made by a factory without ``device=`` (``torch.zeros(n)``, ``torch.eye(m, dtype=...)``,
``torch.as_tensor(array)``) lands on the CPU and the first op that mixes it with the model's tensors fails (or, for a
0-dim one, silently syncs). Without a GPU every tensor is on the CPU and the mistake is invisible. Inside
:class:`HostTrace` (a ``TorchFunctionMode``) every tensor that existed before (the model's parameters, the data) counts
as *device*; a factory called without ``device=``, or with the literal string ``"cpu"``, and ``.cpu()`` make *host*
tensors; an op's result is host when all its tensor inputs are, else device. An op that mixes a host tensor of one
element or more dimensions with a device tensor is recorded with the innermost ``pyro_dag`` frame that called it,
except the cross-device ops CUDA allows (``copy_``, ``to``, indexing with host indices). ``device=x.device`` counts as
device: the check cannot tell it from a literal CPU device, which is what makes it a stand-in, not a GPU.
"""
import traceback

import torch
from torch.overrides import TorchFunctionMode

FACTORIES = {torch.zeros, torch.ones, torch.empty, torch.full, torch.eye, torch.arange, torch.linspace,
             torch.logspace, torch.tensor, torch.as_tensor, torch.randn, torch.rand, torch.randint, torch.randperm,
             torch.tril_indices, torch.triu_indices, torch.from_numpy, torch.scalar_tensor}
#: ops CUDA runs across devices: copies, moves, and indexing a device tensor with host indices
CROSS_DEVICE_OK = {"copy_", "to", "cpu", "__getitem__", "__setitem__", "index_select", "__format__", "__repr__",
                   "item", "tolist", "numpy", "__bool__", "__float__", "__int__", "__len__", "__index__"}
HOST = "_pyro_dag_trace_place"


def _tensors(obj, out):
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            _tensors(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _tensors(o, out)
    return out


def _where(t):
    """``"host"``, ``"device"`` (a tensor made before the trace: parameters, data) or ``"any"`` (made with an
    explicit ``device=`` object, which could be either)."""
    return getattr(t, HOST, "device")


def _mark(out, where):
    for t in _tensors(out, []):
        try:
            setattr(t, HOST, where)
        except (AttributeError, RuntimeError):  # e.g. a tensor subclass without a __dict__
            pass


def _literal_cpu(device):
    return isinstance(device, str) and device.split(":")[0] == "cpu"


def _caller():
    """The innermost frame in pyro_dag's own code (``file:line: code``), or the innermost frame outside torch."""
    frames = traceback.extract_stack()[:-3]
    for fr in reversed(frames):
        if "/pyro_dag/" in fr.filename.replace("\\", "/"):
            return f"{fr.filename.rsplit('/pyro_dag/', 1)[-1]}:{fr.lineno}: {fr.line}"
    for fr in reversed(frames):
        if "/torch/" not in fr.filename:
            return f"{fr.filename}:{fr.lineno}: {fr.line}"
    return "?"


class HostTrace(TorchFunctionMode):
    """Record the ops that would mix host and device tensors on a GPU run (module docstring); ``.violations`` is a
    dict ``{caller: op name}``."""

    def __init__(self):
        super().__init__()
        self.violations = {}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        inputs = _tensors(args, []) + _tensors(kwargs, [])
        if func in FACTORIES and not inputs:
            device = kwargs.get("device")
            _mark(out, "host" if device is None or _literal_cpu(device) else "any")
            return out
        if name == "cpu" or (name == "to" and any(_literal_cpu(a) for a in list(args[1:]) + [kwargs.get("device")])):
            _mark(out, "host")
            return out
        if name == "to":
            like = [a for a in args[1:] if isinstance(a, torch.Tensor)]
            if like:                                             # x.to(other): other's place
                _mark(out, _where(like[0]))
                return out
            if kwargs.get("device") is not None or any(isinstance(a, torch.device) for a in args[1:]):
                _mark(out, "any")
                return out
        if func in FACTORIES:  # torch.tensor(x) / as_tensor(x) of a tensor: follows it unless a device is named
            device = kwargs.get("device")
            if device is not None:
                _mark(out, "host" if _literal_cpu(device) else "any")
                return out
        if not inputs:
            return out
        places = [_where(t) for t in inputs]
        host = [t for t, w in zip(inputs, places) if w == "host"]
        if host and "device" in places and name not in CROSS_DEVICE_OK and any(t.dim() > 0 for t in host):
            self.violations.setdefault(_caller(), name)
        _mark(out, "device" if "device" in places else "host" if host else "any")
        return out
