"""Saving and loading a fitted model: :func:`save` and :func:`load` for a :class:`~pyro_dag.DAGDGP` with its guide, and
the file format behind :meth:`pyro_dag.infer.LatentMAP.save` and :meth:`pyro_dag.emulation.MultiFidelityEmulator.save`.

A :class:`~pyro_dag.DAGDGP` and its guide create their parameters lazily, at the first call (the inducing inputs, the
bound kernels, the guide's Gaussian all take their shapes from the data), so a fresh model has nothing for
``load_state_dict`` to fill. The saved file therefore holds, besides the parameters and buffers of the model and the
guide, the training inputs and data that set them up: :func:`load` repeats the set-up of a fresh model and guide
built with the same constructor arguments (``model.setup(inputs, data)`` and one call of the guide), then copies the
saved values in. Predictions of the loaded model are then those of the saved one (the same draws for the same seed).

The file is a ``torch.save`` of plain containers, strings, numbers and tensors only, so it loads with
``torch.load(path, weights_only=True)`` (no code runs from the file); it is written to a temporary file beside
``path``, then moved over it, so that an interrupted save leaves the previous file or the new one.
"""
import os
import tempfile

import torch

from .outputs import OutputError, torch_save

__all__ = ["SavedFileError", "load", "load_state", "read_saved", "save", "write_saved", "module_state"]

#: The value of a saved file's ``"pyro_dag_format"`` entry (and its version, in ``"version"``).
FORMAT = "pyro_dag.saved"
VERSION = 1


class SavedFileError(ValueError):
    """A file that is not a pyro_dag saved model of the expected kind, or that does not fit the object loading it."""


# ------------------------------------------------------------------------------------------------ the file
def write_saved(path, kind, payload):
    """Write ``payload`` (plain containers, strings, numbers, tensors) as a saved ``kind`` to ``path``, atomically
    (a temporary file in the same directory, flushed and synced, then ``os.replace``).

    :raises pyro_dag.outputs.OutputError: naming ``path`` when the file cannot be written (a full disk: torch's
        ``RuntimeError`` included); a file already at ``path`` is then left as it was."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise SavedFileError(f"save: {path!r} is a directory; pass a file path (e.g. {os.path.join(path, 'fit.pt')!r})")
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            torch_save({"pyro_dag_format": FORMAT, "version": VERSION, "kind": kind, **payload}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(e, OSError) and not isinstance(e, OutputError):
            raise OutputError(e.errno, f"save: could not write {path} ({e.strerror or e}); a file already there was "
                              "left as it was (no partial file): free some space or save to another disk",
                              path) from e
        raise
    return path


def read_saved(path, kind):
    """Read a file written by :func:`write_saved` (with ``torch.load(weights_only=True)``, onto the CPU).

    :raises SavedFileError: naming ``path``, for a missing, empty, truncated, corrupt or foreign file, or a saved
        object of another kind.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise SavedFileError(f"load: no file {path!r}; pass the path that save() wrote")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch's own text would suggest weights_only=False: never load an unknown file so
        raise SavedFileError(
            f"load: {path!r} is not a readable pyro_dag saved file ({type(e).__name__} while reading it with "
            "torch.load(weights_only=True)): it is empty, truncated, corrupt or not written by pyro_dag's save; "
            "save the fitted model again") from None
    if not isinstance(state, dict) or state.get("pyro_dag_format") != FORMAT:
        what = "a train() checkpoint" if isinstance(state, dict) and "settings" in state and "params" in state \
            else f"a {type(state).__name__}" if not isinstance(state, dict) else "a dict without pyro_dag's format tag"
        raise SavedFileError(f"load: {path!r} holds {what}, not a fitted model saved by pyro_dag (resume a train() "
                             "checkpoint with train(..., checkpoint=path)); save the fitted model with its save()")
    if state.get("version") != VERSION:
        raise SavedFileError(f"load: {path!r} was saved in format version {state.get('version')!r}; this pyro_dag "
                             f"reads version {VERSION}")
    if state.get("kind") != kind:
        raise SavedFileError(f"load: {path!r} holds a saved {state.get('kind')}, not a {kind}; load it with the "
                             f"{state.get('kind')}'s own load")
    return state


# --------------------------------------------------------------------------------------------- module states
def module_state(module):
    """``{name: tensor}`` the persistent parameters and buffers of ``module`` (detached CPU clones)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in module.state_dict().items()}


@torch.no_grad()
def load_state(module, state, what):
    """Copy a :func:`module_state` into ``module`` in place (the tensors that Pyro's parameter store and any optimiser
    hold see the values). A learnable hyperparameter that was held fixed (:func:`pyro_dag.utils.freeze`) in the
    saved module is held fixed here too.

    :param str what: the module as messages name it (``"the model"``, ``"the guide"``).
    :raises SavedFileError: naming the entry, for an entry missing on either side or of another shape.
    """
    from .utils import freeze

    own = module.state_dict()
    for key in state:
        if key in own or f"{key}_unconstrained" not in own:
            continue
        path, _, name = key.rpartition(".")
        sub = module.get_submodule(path) if path else module
        if name in sub.__dict__.get("_pyro_params", {}):
            freeze(sub, {name})  # fixed in the saved module, learnable in this one
    own = module.state_dict()
    missing = [k for k in own if k not in state]
    extra = [k for k in state if k not in own]
    if missing or extra:
        key = (missing or extra)[0]
        learned = key[:-len("_unconstrained")] if key.endswith("_unconstrained") else None
        hint = (f" ({learned!r} is learned in the saved one and fixed here)" if learned in own or learned in state
                else "")
        raise SavedFileError(f"load: {what} has {len(missing)} entr(ies) the saved one lacks and lacks {len(extra)} "
                             f"that it has, e.g. {key!r}{hint}: build it with the same constructor arguments (and "
                             "the same freeze calls) as the saved one")
    for key, value in state.items():
        if own[key].shape != value.shape:
            raise SavedFileError(f"load: {key!r} of {what} has shape {tuple(own[key].shape)}, the saved one "
                                 f"{tuple(value.shape)}: build it with the same constructor arguments as the saved "
                                 "one")
        own[key].copy_(value)


# ------------------------------------------------------------------------------------------ DAGDGP and guide
def _graph_state(graph):
    return {"nodes": sorted(str(v) for v in graph.nodes), "edges": sorted([str(a), str(b)] for a, b in graph.edges)}


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _check_model(model, where):
    if not (hasattr(model, "checked_arguments") and hasattr(model, "setup") and hasattr(model, "gp_nodes")):
        raise TypeError(f"{where}: model must be a DAGDGP, got {type(model).__name__}; a LatentMAP or a "
                        "MultiFidelityEmulator saves and loads with its own save(path) / load(path)")


def _own_persistence(obj, *rest):
    """A :class:`~pyro_dag.infer.LatentMAP` or :class:`~pyro_dag.emulation.MultiFidelityEmulator` (its own ``save``
    and ``load``, no guide or data besides)."""
    return (not hasattr(obj, "gp_nodes") and callable(getattr(obj, "save", None))
            and callable(getattr(obj, "load", None)) and all(r is None for r in rest))


def _check_guide(guide, model, where):
    if guide is None:
        return
    user = getattr(guide, "_user_model", None)
    target = user[0] if isinstance(user, tuple) and user else getattr(guide, "model", None)
    if target is not model and hasattr(target, "gp_nodes"):
        raise SavedFileError(f"{where}: the guide was built on another model than the one given; save and load a "
                             "DAGDGP with the guide built on it (AutoStructuredGuide(model), or a Pyro autoguide of "
                             "the model)")


def model_payload(model, guide, inputs, data, mask=None):
    """The saved state of a set-up :class:`~pyro_dag.DAGDGP` and its guide (see :func:`save`)."""
    if not model.is_setup:
        raise SavedFileError("save: the model has not been set up, so there is nothing fitted to save; train it "
                             "first (or call model.setup(inputs, data))")
    X, n, obs = model.checked_arguments(inputs, data, mask)
    observed = [w for w in model.gp_nodes if w in obs]
    dims = {r: x.shape[1] for r, x in X.items()}
    if observed != list(model.observed_nodes) or dims != model.input_dims:
        raise SavedFileError(f"save: the inputs and data given (observed nodes {observed}, input dims {dims}) are "
                             f"not those the model was set up with (observed nodes {list(model.observed_nodes)}, "
                             f"input dims {model.input_dims}); pass the training inputs and data")
    if guide is not None and getattr(guide, "prototype_trace", None) is None:
        raise SavedFileError("save: the guide has not been run yet, so there is nothing fitted to save; train the "
                             "model and guide first")
    return {
        "model": module_state(model), "guide": None if guide is None else module_state(guide),
        "guide_class": None if guide is None else type(guide).__name__,
        "graph": _graph_state(model.graph), "dtype": _dtype_name(model.dtype),
        "inputs": {r: x.detach().cpu() for r, x in X.items()},
        "data": {w: y.detach().cpu() for w, (y, _) in obs.items()},
        "mask": {w: m.detach().cpu() for w, (_, m) in obs.items()},
    }


def restore_model(state, model, guide, path):
    """Set up ``model`` (and ``guide``) as the saved ones were and copy the saved values in (see :func:`load`)."""
    if _graph_state(model.graph) != state["graph"]:
        raise SavedFileError(f"load: {path!r} holds a model of the graph with edges {state['graph']['edges']}, not "
                             f"this model's {_graph_state(model.graph)['edges']}; build the model on the saved graph")
    if (guide is None) != (state["guide"] is None):
        raise SavedFileError(f"load: {path!r} was saved " + ("without a guide; load it without one" if guide is not
                             None else f"with a {state['guide_class']}; pass a fresh one: load(path, model, guide)"))
    if guide is not None and type(guide).__name__ != state["guide_class"]:
        raise SavedFileError(f"load: {path!r} was saved with a guide of class {state['guide_class']}, this guide is "
                             f"of class {type(guide).__name__}; build the guide as the saved one was")
    if guide is not None and getattr(guide, "prototype_trace", None) is not None:
        raise SavedFileError("load: the guide has already been run; pass a fresh guide (built on the fresh model "
                             "with the same arguments)")
    dtype = getattr(torch, state["dtype"])
    model.to(dtype=dtype)
    device = model.device
    inputs = {r: x.to(device=device, dtype=dtype) for r, x in state["inputs"].items()}
    data = {w: torch.where(state["mask"][w], y, torch.full_like(y, float("nan"))).to(device=device, dtype=dtype)
            for w, y in state["data"].items()}
    mask = {w: m.to(device) for w, m in state["mask"].items()}
    # the set-up draws nothing the saved values do not overwrite: keep the caller's random stream as it was
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        if not model.is_setup:
            model.setup(inputs, data, mask)
        load_state(model, state["model"], "the model")
        if guide is not None:
            with torch.no_grad():
                guide(inputs, data, mask)
            load_state(guide, state["guide"], "the guide")
    return model


def save(path, model, guide=None, inputs=None, data=None, *, mask=None):
    """Save a fitted :class:`~pyro_dag.DAGDGP` and its guide to ``path``.

    The file holds the parameters and buffers of the model and the guide (``state_dict()``) and the training inputs
    and data, with which :func:`load` repeats their set-up (the shapes of the inducing inputs, the bound kernels and
    the guide's Gaussian come from the data at the first call). It loads with ``torch.load(weights_only=True)``.

    :param path: the file to write (replaced atomically).
    :param model: the fitted :class:`~pyro_dag.DAGDGP`; or a fitted :class:`~pyro_dag.infer.LatentMAP` or
        :class:`~pyro_dag.emulation.MultiFidelityEmulator` alone (``save(path, lamp)`` is ``lamp.save(path)``).
    :param guide: its trained guide (an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` of any precision, or
        a Pyro autoguide of the model), or ``None`` (e.g. a model fitted by ``MCMC``).
    :param dict inputs: the training inputs, as passed to ``train`` / ``svi.step``.
    :param dict data: the training data (NaN = missing). :param dict mask: optional, as in training.
    :returns: ``path``.

    Example::

        pyro_dag.persist.save("fit.pt", model, guide, inputs, data)
        # later, in another process:
        model = DAGDGP(graph, ...)                   # the same constructor arguments
        guide = AutoStructuredGuide(model)
        pyro_dag.persist.load("fit.pt", model, guide)
        pred = model.predict(guide, inputs_test)
    """
    if _own_persistence(model, guide, inputs, data):
        return model.save(path)
    _check_model(model, "save")
    _check_guide(guide, model, "save")
    if inputs is None and (model.root_nodes or data is None):
        raise SavedFileError("save: pass the training inputs and data (save(path, model, guide, inputs, data)); load "
                             "repeats the model's set-up with them")
    return write_saved(path, "DAGDGP", model_payload(model, guide, inputs or {}, data, mask))


def load(path, model, guide=None):
    """Load a fit written by :func:`save` into a fresh ``model`` (and ``guide``), built with the same constructor
    arguments as the saved ones (and the same :func:`~pyro_dag.utils.freeze` calls, if any: a hyperparameter held
    fixed in the saved model is held fixed here too).

    The model is set up on the saved training inputs and data, the guide is called once on them, and the saved
    parameters and buffers are copied in; the model takes the saved dtype. The caller's random-number stream is
    left as it was, so predictions with the same seed equal the saved model's. In a process that still holds the
    saved model, call ``pyro.clear_param_store()`` (or give the new model another ``name``) first, as for any new
    model (:class:`~pyro_dag.param_store.ParamStoreCollisionWarning`).

    ``load(path, lamp)`` with a :class:`~pyro_dag.infer.LatentMAP` or a
    :class:`~pyro_dag.emulation.MultiFidelityEmulator` alone is ``lamp.load(path)``.

    :returns: ``model``. :raises SavedFileError: for a missing, corrupt or foreign file, or a model or guide that
        does not match the saved one (naming the difference and the fix).
    """
    if _own_persistence(model, guide):
        return model.load(path)
    _check_model(model, "load")
    _check_guide(guide, model, "load")
    return restore_model(read_saved(path, "DAGDGP"), model, guide, path)
