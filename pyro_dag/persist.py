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

A file proves what it holds (format 2): it carries the SHA-256 checksum of everything in it
(:func:`pyro_dag.fingerprint.checksum`; a byte changed on disk or by hand is refused at load, naming the file) and a
record of what it is: its kind, the classes of the model's and the guide's modules (kernels, likelihoods), the
guide's precision, the graph, the dtype and the fingerprint of the training inputs and data. :func:`load` refuses a
model or guide that differs from the record, naming the difference. :func:`save` never replaces a file of another
kind (a training checkpoint, a saved emulator, a file that pyro_dag did not write). Files of format 1 (before
checksums) still load, with a :class:`SavedFormatWarning` saying what could not be verified.
"""
import os
import tempfile
import warnings

import torch

from .fingerprint import checksum, data_fingerprint
from .outputs import OutputError, torch_save

__all__ = ["SavedFileError", "SavedFormatWarning", "LoadPrecisionWarning", "load", "load_state", "read_saved", "save", "write_saved",
           "module_state", "file_kind"]

#: The value of a saved file's ``"pyro_dag_format"`` entry (and its version, in ``"version"``).
FORMAT = "pyro_dag.saved"
VERSION = 2
#: Versions this pyro_dag reads: 1 (no checksum, no record of the guide's precision or modules) and 2.
READABLE_VERSIONS = (1, 2)
#: dtypes a saved file may name.
DTYPES = ("float64", "float32", "float16", "bfloat16")


class SavedFileError(ValueError):
    """A file that is not a pyro_dag saved model of the expected kind, or that does not fit the object loading it."""


class SavedFormatWarning(UserWarning):
    """A saved file of an earlier format: it loads, but what that format did not record could not be verified."""


class LoadPrecisionWarning(UserWarning):
    """A fit loaded in a lower precision than it was fitted in (``load(..., dtype=torch.float32)`` of a float64 fit):
    its predictions may differ from the saved fit's by more than the rounding of its values."""


# ------------------------------------------------------------------------------------------------ what a file is
def file_kind(path):
    """What the file at ``path`` holds, in words (``None`` if there is no file or it is empty): ``"a saved
    DAGDGP"`` (or another kind), ``"a train() checkpoint"``, or a description of a file pyro_dag did not write.
    Used so that no writer replaces a file of another kind."""
    path = os.fspath(path)
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 -- any unreadable content is "not ours"
        return "a file that is not a torch file written by pyro_dag (unreadable with torch.load(weights_only=True))"
    if isinstance(state, dict) and state.get("pyro_dag_format") == FORMAT:
        return f"a saved {state.get('kind')}"
    if isinstance(state, dict) and "settings" in state and "params" in state and "format" in state:
        return "a train() checkpoint"
    return f"a torch file of a {type(state).__name__} not written by pyro_dag"


# ------------------------------------------------------------------------------------------------ the file
def write_saved(path, kind, payload):
    """Write ``payload`` (plain containers, strings, numbers, tensors) as a saved ``kind`` to ``path``, atomically
    (a temporary file in the same directory, flushed and synced, then ``os.replace``), with the checksum of all it
    holds. A missing folder is created. A file already at ``path`` is replaced only if it is a saved ``kind``.

    :raises SavedFileError: naming ``path``, when it is a directory or holds a file of another kind.
    :raises pyro_dag.outputs.OutputError: naming ``path`` when the file cannot be written (a full disk: torch's
        ``RuntimeError`` included); a file already at ``path`` is then left as it was."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise SavedFileError(f"save: {path!r} is a directory; pass a file path (e.g. {os.path.join(path, 'fit.pt')!r})")
    existing = file_kind(path)
    if existing is not None and existing != f"a saved {kind}":
        raise SavedFileError(f"save: {path!r} already holds {existing}; save() does not replace a file of another "
                             f"kind: pass another path (or delete that file first)")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as e:
        raise OutputError(e.errno, f"save: could not create the folder {directory!r} for {path!r} "
                          f"({e.strerror or e}); save to a writable folder", path) from None
    content = {"pyro_dag_format": FORMAT, "version": VERSION, "kind": kind, **payload}
    content["checksum"] = checksum(content)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=directory)
        with os.fdopen(fd, "wb") as f:   # closed on every path, a failed write included
            torch_save(content, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        tmp = None
    except BaseException as e:
        if isinstance(e, OSError) and not isinstance(e, OutputError):
            raise OutputError(e.errno, f"save: could not write {path} ({e.strerror or e}); a file already there was "
                              "left as it was (no partial file): free some space or save to another disk",
                              path) from e
        raise
    finally:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
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
    version = state.get("version")
    if version not in READABLE_VERSIONS:
        raise SavedFileError(f"load: {path!r} was saved in format version {version!r}; this pyro_dag reads versions "
                             f"{list(READABLE_VERSIONS)}: save it again with this version (or upgrade pyro_dag)")
    if state.get("kind") != kind:
        raise SavedFileError(f"load: {path!r} holds a saved {state.get('kind')}, not a {kind}; load it with the "
                             f"{state.get('kind')}'s own load")
    if version == 1:
        warnings.warn(f"load: {path!r} is a saved {kind} of format 1 (written before saved files carried a checksum "
                      "and a record of the guide's precision and module classes): its bytes, and a guide or kernels "
                      "built differently from the saved ones with the same parameter names, cannot be verified; save "
                      "it again to upgrade it to format 2", SavedFormatWarning, stacklevel=3)
        return state
    stored = state.pop("checksum", None)
    if stored is None or checksum(state) != stored:
        raise SavedFileError(f"load: {path!r} does not match its checksum: its contents changed after it was written "
                             "(corrupted on disk, or edited); its values cannot be trusted: save the fit again (or "
                             "restore the file from a backup)")
    return state


def saved_dtype(state, path):
    """The torch dtype a saved file names.

    :raises SavedFileError: naming ``path`` for an entry that is not one of :data:`DTYPES`."""
    name = state.get("dtype")
    if name not in DTYPES:
        raise SavedFileError(f"load: {path!r} names the dtype {name!r}, which is not one of {list(DTYPES)}: the file "
                             "is corrupt or was edited; save the fit again")
    return getattr(torch, name)


def module_classes(module):
    """``{name: class name}`` of ``module`` and its submodules (kernels, likelihoods, ...): two modules with the same
    parameter names and shapes but other classes (an RBF and a Matérn kernel) compute other things."""
    return {name: type(m).__name__ for name, m in module.named_modules()}


def check_module_classes(saved, module, what, path):
    """Refuse ``module`` when its :func:`module_classes` differ from the ``saved`` record, naming the first one."""
    if saved is None:
        return
    mine = module_classes(module)
    for name in sorted(set(saved) | set(mine)):
        if saved.get(name) != mine.get(name):
            where = f"{what}'s {name!r}" if name else what
            raise SavedFileError(f"load: {where} is a {mine.get(name) or 'missing module'} here and a "
                                 f"{saved.get(name) or 'missing module'} in {path!r}: build it with the same "
                                 "constructor arguments (kernels, likelihoods) as the saved one")


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
    inputs = {r: x.detach().cpu() for r, x in X.items()}
    data = {w: y.detach().cpu() for w, (y, _) in obs.items()}
    masks = {w: m.detach().cpu() for w, (_, m) in obs.items()}
    return {
        "model": module_state(model), "guide": None if guide is None else module_state(guide),
        "guide_class": None if guide is None else type(guide).__name__,
        "precision": getattr(guide, "precision", None) if guide is not None else None,
        "modules": {"model": module_classes(model), "guide": None if guide is None else module_classes(guide)},
        "graph": _graph_state(model.graph), "dtype": _dtype_name(model.dtype),
        "fingerprint": data_fingerprint(inputs, data, masks),
        "inputs": inputs, "data": data, "mask": masks,
        # the nodes fitted on their parents' observed values: their prediction feeds on measured-like parents
        "exact_fit_nodes": sorted(getattr(model, "exact_fit_nodes", ())),
    }


def _load_dtype(dtype, saved, path, model=None):
    """The dtype :func:`load` gives the model: ``dtype`` (float32 or float64), or the saved one. Loading a float64
    fit in float32 warns (:class:`LoadPrecisionWarning`): the model then computes with float32's rounding and, unless
    its ``jitter`` was given, float32's relative jitter of ``K(Z, Z)`` (1e-5 instead of 1e-8), so a fit whose kernel
    matrices are ill-conditioned predicts otherwise (the battery's 12-case chain, as many inducing points as cases:
    means 2-6 predictive sd from the saved fit's)."""
    if dtype is None:
        return saved
    if dtype not in (torch.float32, torch.float64):
        raise SavedFileError(f"load: dtype={dtype!r}: a DAGDGP computes in torch.float32 or torch.float64; pass one "
                             f"of them, or dtype=None for the saved one ({_dtype_name(saved)}) ({path!r})")
    if saved == torch.float64 and dtype == torch.float32:
        jitter = ("" if getattr(model, "jitter", None) is not None else
                  " and float32's relative jitter of K(Z, Z) (1e-5, not the 1e-8 it was fitted with)")
        warnings.warn(f"load: dtype=torch.float32 computes this float64 fit ({path!r}) with float32's rounding{jitter}: "
                      "where its kernel matrices are ill-conditioned (many inducing points close together, little "
                      "noise) its predictions can differ from the saved fit's by several predictive sd; compare a "
                      "prediction with the float64 fit before relying on it, or load it in float64 (dtype=None)",
                      LoadPrecisionWarning, stacklevel=4)
    return dtype


def _load_device(map_location, model, path):
    """The device :func:`load` puts the model on: ``map_location`` (a device or its name), or the model's own."""
    if map_location is None:
        return model.device
    try:
        device = torch.device(map_location)
    except (RuntimeError, TypeError) as e:
        raise SavedFileError(f"load: map_location={map_location!r} is not a device ({e}); pass e.g. 'cpu', 'cuda' or "
                             f"torch.device('cuda', 0) ({path!r})") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SavedFileError(f"load: map_location={map_location!r}, but CUDA is not available in this process; load "
                             f"on the CPU (map_location='cpu' or None) ({path!r})")
    if device.type == "meta":
        raise SavedFileError(f"load: map_location={map_location!r}: the meta device holds no values to load into; "
                             f"pass a real device such as 'cpu' ({path!r})")
    try:   # a device this torch build or machine lacks (mps, xpu, cuda:7) fails here, not deep inside model.to()
        torch.empty(0, device=device)
    except (RuntimeError, AssertionError, AttributeError) as e:
        raise SavedFileError(f"load: map_location={map_location!r} is not available in this process ({e}); load on "
                             f"the CPU (map_location='cpu' or None) ({path!r})") from None
    return device


def saved_exact_fit_nodes(state, model, path):
    """The nodes a saved file says were fitted exactly (``model.exact_fit_nodes``): a list of non-root nodes of the
    model's graph. A file without the entry (format 1, or format 2 written before pyro_dag kept it) loads with a
    :class:`SavedFormatWarning`: its prediction may feed those nodes other parents' values than the saved model's.

    :raises SavedFileError: naming ``path`` and the entry, for anything but a list of the graph's non-root nodes."""
    if "exact_fit_nodes" not in state:
        if state.get("version") != 1:   # format 1's own warning already says what cannot be verified
            warnings.warn(f"load: {path!r} does not record which nodes were fitted exactly (exact_fit_nodes; "
                          "written before pyro_dag saved them): the loaded model feeds every node its parents' "
                          "predictions, so nodes the saved run fitted exactly may predict otherwise; save the fit "
                          "again with this pyro_dag to keep them", SavedFormatWarning, stacklevel=4)
        return set()
    nodes = state["exact_fit_nodes"]
    if not isinstance(nodes, (list, tuple)) or not all(isinstance(w, str) for w in nodes):
        raise SavedFileError(f"load: {path!r} holds exact_fit_nodes={nodes!r}, not a list of node names: the file is "
                             "corrupt or was edited; save the fit again")
    unknown = [w for w in nodes if w not in model.gp_nodes]
    if unknown:
        raise SavedFileError(f"load: {path!r} says node(s) {unknown} were fitted exactly (exact_fit_nodes), but they "
                             f"are not non-root nodes of this model's graph ({list(model.gp_nodes)}): the file is "
                             "corrupt or was edited; save the fit again")
    return set(nodes)


def restore_model(state, model, guide, path, dtype=None, map_location=None):
    """Set up ``model`` (and ``guide``) as the saved ones were and copy the saved values in (see :func:`load`):
    in ``dtype`` (default: the saved one) on ``map_location`` (default: the model's device)."""
    if _graph_state(model.graph) != state["graph"]:
        raise SavedFileError(f"load: {path!r} holds a model of the graph with edges {state['graph']['edges']}, not "
                             f"this model's {_graph_state(model.graph)['edges']}; build the model on the saved graph")
    if (guide is None) != (state["guide"] is None):
        raise SavedFileError(f"load: {path!r} was saved " + ("without a guide; load it without one" if guide is not
                             None else f"with a {state['guide_class']}; pass a fresh one: load(path, model, guide)"))
    if guide is not None and type(guide).__name__ != state["guide_class"]:
        raise SavedFileError(f"load: {path!r} was saved with a guide of class {state['guide_class']}, this guide is "
                             f"of class {type(guide).__name__}; build the guide as the saved one was")
    if guide is not None and "precision" in state and state["precision"] != getattr(guide, "precision", None):
        raise SavedFileError(f"load: {path!r} was saved with a guide of precision {state.get('precision')!r}, this "
                             f"guide has precision {getattr(guide, 'precision', None)!r}; build it as the saved one "
                             f"was ({type(guide).__name__}(model, precision={state.get('precision')!r}))")
    if guide is not None and getattr(guide, "prototype_trace", None) is not None:
        raise SavedFileError("load: the guide has already been run; pass a fresh guide (built on the fresh model "
                             "with the same arguments)")
    modules = state.get("modules") or {}
    check_module_classes(modules.get("model"), model, "the model", path)   # the set-up creates no module
    exact_fit_nodes = saved_exact_fit_nodes(state, model, path)
    dtype = _load_dtype(dtype, saved_dtype(state, path), path, model)
    device = _load_device(map_location, model, path)
    model.to(device=device, dtype=dtype)
    inputs = {r: x.to(device=device, dtype=dtype) for r, x in state["inputs"].items()}
    data = {w: torch.where(state["mask"][w], y, torch.full_like(y, float("nan"))).to(device=device, dtype=dtype)
            for w, y in state["data"].items()}
    mask = {w: m.to(device) for w, m in state["mask"].items()}
    # the set-up draws nothing the saved values do not overwrite: keep the caller's random stream as it was
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        if not model.is_setup:
            model.setup(inputs, data, mask)
        load_state(model, state["model"], "the model")
        model.exact_fit_nodes = exact_fit_nodes
        if guide is not None:
            with torch.no_grad():
                guide(inputs, data, mask)
            check_module_classes(modules.get("guide"), guide, "the guide", path)
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


def load(path, model, guide=None, *, dtype=None, map_location=None):
    """Load a fit written by :func:`save` into a fresh ``model`` (and ``guide``), built with the same constructor
    arguments as the saved ones (and the same :func:`~pyro_dag.utils.freeze` calls, if any: a hyperparameter held
    fixed in the saved model is held fixed here too).

    The model is set up on the saved training inputs and data, the guide is called once on them, and the saved
    parameters and buffers are copied in; the model takes the saved dtype unless ``dtype`` is given (a fit saved in
    float64 loads into float32 and back: the values are rounded to the new dtype; where the kernel matrices are
    well conditioned predictions agree to its precision, where they are not a float32 model predicts otherwise, and
    :class:`LoadPrecisionWarning` says so), and stays on its device unless ``map_location`` is given (a fit saved
    from a GPU loads on the CPU: the file itself always holds CPU tensors). The caller's random-number stream is
    left as it was, so predictions with the same seed equal the saved model's. In a process that still holds the
    saved model, call ``pyro.clear_param_store()`` (or give the new model another ``name``) first, as for any new
    model (:class:`~pyro_dag.param_store.ParamStoreCollisionWarning`).

    ``load(path, lamp)`` with a :class:`~pyro_dag.infer.LatentMAP` or a
    :class:`~pyro_dag.emulation.MultiFidelityEmulator` alone is ``lamp.load(path)``.

    :param dtype: ``torch.float32`` or ``torch.float64``; ``None``: the saved dtype.
    :param map_location: the device to load onto (``"cpu"``, ``"cuda"``, a ``torch.device``); ``None``: the model's.
    :returns: ``model``. :raises SavedFileError: for a missing, corrupt or foreign file, a model or guide that
        does not match the saved one (naming the difference and the fix), another ``dtype``, or a device that is not
        available (``map_location="cuda"`` without CUDA).
    """
    if _own_persistence(model, guide):
        if dtype is not None or map_location is not None:
            raise SavedFileError(f"load: dtype and map_location apply to a DAGDGP; a {type(model).__name__} loads "
                                 "with its own load(path)")
        return model.load(path)
    _check_model(model, "load")
    _check_guide(guide, model, "load")
    return restore_model(read_saved(path, "DAGDGP"), model, guide, path, dtype=dtype, map_location=map_location)
