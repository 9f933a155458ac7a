"""Pyro's global parameter store: telling a user when a new module would silently take over another module's
parameters.

A :class:`~pyro.nn.PyroModule` puts its parameters in Pyro's global parameter store under its module path
(``"kernels.w1.base.lengthscale"``, ``"AutoStructuredGuide.family.locs.w1"``) and, for a name the store already
holds, ``pyro.param`` returns the stored tensor: a second model (or guide) with the same names starts from the
first one's values and shares its tensors from then on (training one changes the other). That is the store's
documented behaviour (``pyro.get_param_store().load(...)`` followed by building the model is how saved values are
restored), so it is only reported when the stored tensor was created by another live module of this library:
each checked module records, in this process only, which tensors are its own (:func:`check_param_store`).
"""
import contextlib
import warnings

import pyro
from pyro.nn import PyroModule
from pyro.nn.module import _make_name
from torch.utils.weak import WeakIdKeyDictionary

__all__ = ["ParamStoreCollisionWarning", "adopting_param_store", "check_param_store", "param_store_names"]

# tensor -> key of the module that created it (weak: a tensor's entry goes with the tensor)
_OWNERS = WeakIdKeyDictionary()
_ADOPTING = [0]


class ParamStoreCollisionWarning(UserWarning):
    """A module is about to take (or has taken) parameters that another module put in Pyro's parameter store."""


@contextlib.contextmanager
def adopting_param_store():
    """Within this context, modules take the stored values of their names without a warning: used by
    :func:`pyro_dag.infer.train` when it resumes a checkpoint, which overwrites those values anyway."""
    _ADOPTING[0] += 1
    try:
        yield
    finally:
        _ADOPTING[0] -= 1


def _entries(module):
    """``[(store name, submodule, key in its _parameters)]`` of every parameter of the PyroModule tree ``module``."""
    out = []
    for m in module.modules():
        if not isinstance(m, PyroModule):
            continue
        prefix = m.__dict__["_pyro_name"]
        pyro_params = m.__dict__.get("_pyro_params", {})
        for pname, tensor in m.__dict__["_parameters"].items():
            if tensor is None:
                continue
            base = pname[:-len("_unconstrained")] if pname.endswith("_unconstrained") else None
            out.append((_make_name(prefix, base if base in pyro_params else pname), m, pname))
    return out


def param_store_names(module):
    """``{name in Pyro's parameter store: the module's current unconstrained tensor}`` for every
    :class:`~pyro.nn.PyroParam` and ``nn.Parameter`` of the :class:`~pyro.nn.PyroModule` tree ``module``, named as
    the tree will name them in the store (its module path, with the root module's own name in front)."""
    return {name: m.__dict__["_parameters"][pname] for name, m, pname in _entries(module)}


def check_param_store(module, key, what, fixes, future_names=()):
    """Warn (:class:`ParamStoreCollisionWarning`) if Pyro's parameter store holds, under names ``module`` uses,
    tensors that another checked module created; record ``module``'s own tensors as created by ``key``.

    Does nothing with ``pyro.settings.set(module_local_params=True)`` (every module then keeps its own
    parameters) and inside :func:`adopting_param_store`. A name whose stored tensor has no recorded creator
    (loaded with ``pyro.get_param_store().load`` or set with ``pyro.param``) is taken silently, as Pyro does.

    :param module: a :class:`~pyro.nn.PyroModule`. :param str key: the module's identity (a model's ``_key``).
    :param str what: the module as the message names it (e.g. ``"DAGDGP"``).
    :param str fixes: the remedies, a sentence the message ends with.
    :param future_names: store names of parameters ``module`` will create later (checked, not yet recorded).
    :returns: the list of colliding names (empty if none).
    """
    if pyro.settings.get("module_local_params"):
        return []
    stored = pyro.get_param_store()._params  # the unconstrained tensors by name (ParamStoreDict's own mapping)
    cached = module.__dict__.get("_param_store_entries")
    if cached is not None and not future_names and all(
            stored.get(name) is None or stored.get(name) is m.__dict__["_parameters"].get(pname)
            for name, m, pname in cached):
        return []  # the fast path of every step: each stored name holds this module's own tensor
    entries = _entries(module)
    if not future_names:  # (parameters still to be created would be missing from the fast path's list)
        module.__dict__["_param_store_entries"] = entries
    foreign = []
    names = {name: m.__dict__["_parameters"][pname] for name, m, pname in entries}
    for name in future_names:
        names.setdefault(name, None)
    for name, own in names.items():
        if own is not None:
            _OWNERS.setdefault(own, key)
        held = stored.get(name)
        if held is None or held is own:
            continue
        owner = _OWNERS.get(held)
        if owner is not None and owner != key:
            foreign.append(name)
    warned = module.__dict__.setdefault("_param_store_warned", set())
    new = [n for n in foreign if n not in warned]
    if new and not _ADOPTING[0]:
        warned.update(new)
        shown = ", ".join(repr(n) for n in foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        warnings.warn(
            f"Pyro's global parameter store already holds {len(foreign)} parameter(s) of another {what} under the "
            f"names this {what} uses ({shown}): this {what} would start from that one's values and share its tensors "
            f"(training one changes the other). {fixes}", ParamStoreCollisionWarning, stacklevel=4)
    return foreign
