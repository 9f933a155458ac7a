"""Saving and loading a fitted :class:`~pyro_dag.infer.LatentMAP` (:meth:`~pyro_dag.infer.LatentMAP.save`,
:meth:`~pyro_dag.infer.LatentMAP.load`) in the file format of :mod:`pyro_dag.persist`.

The file holds the fitted state of LaMP-DGP (Chang & Sung 2026, "Efficient Deep Gaussian Process Surrogates via
Mini-Batch Latent MAP Estimation", Secs. 3-4): the per-case values ``Ŵ`` of the hidden nodes, the log length-scales
and nuggets, the cases the fitted GPs condition on (root design columns and observations) and the fit's history;
the linked-GP predictor (Sec. 3.2) is rebuilt from them, so the loaded LatentMAP predicts exactly as the saved one.
"""
import dataclasses

import torch

from ...persist import SavedFileError, _dtype_name, _graph_state, read_saved, saved_dtype, write_saved
from .algorithm import LaMPHistory
from .objective import LaMPObjective
from .schedule import LaMPSettings

__all__ = ["save_lamp", "load_lamp"]

KIND = "LatentMAP"


def _cpu(tensors):
    return {k: v.detach().to("cpu", copy=True) for k, v in tensors.items()}


def _settings(lamp):
    return {"kernel": lamp.kernel, "lengthscale": lamp.lengthscale_kind, "nugget": lamp.nugget,
            "jitter": lamp.jitter}


def save_lamp(path, lamp):
    """Write the fitted state of ``lamp`` to ``path`` (see :meth:`~pyro_dag.infer.LatentMAP.save`)."""
    lamp._require_fit("save")
    obj = lamp._objective
    history = None
    if lamp.history is not None:
        history = {f.name: getattr(lamp.history, f.name) for f in dataclasses.fields(lamp.history)}
        history["settings"] = None if lamp.history.settings is None else dataclasses.asdict(lamp.history.settings)
    payload = {
        "graph": _graph_state(lamp.model.graph), "dtype": _dtype_name(lamp.dtype), "settings": _settings(lamp),
        "objective": {"nodes": list(obj.nodes), "inputs": {v: list(p) for v, p in obj.inputs.items()},
                      "hidden": sorted(obj.hidden), "fixed": _cpu(obj.fixed), "observed_rows": _cpu(obj.observed_rows),
                      "kernel": obj.kernel, "jitter": obj.jitter},
        "W": _cpu(lamp._W), "log_ls": _cpu(lamp._log_ls), "log_g": _cpu(lamp._log_g), "fixed_g": _cpu(lamp._fixed_g),
        "train_rows": lamp._train_rows.cpu(), "fitted_rows": lamp._fitted_rows.cpu(),
        "input_dims": dict(lamp.input_dims), "history": history,
    }
    return write_saved(path, KIND, payload)


def load_lamp(path, lamp):
    """Restore a fit written by :func:`save_lamp` into ``lamp`` (see :meth:`~pyro_dag.infer.LatentMAP.load`)."""
    state = read_saved(path, KIND)
    if _graph_state(lamp.model.graph) != state["graph"]:
        raise SavedFileError(f"load: {path!r} holds a LatentMAP of the graph with edges {state['graph']['edges']}, "
                             f"not this model's {_graph_state(lamp.model.graph)['edges']}; build the model on the "
                             "saved graph")
    diff = {k: (v, state["settings"][k]) for k, v in _settings(lamp).items() if state["settings"][k] != v}
    if diff:
        k, (mine, saved) = next(iter(diff.items()))
        raise SavedFileError(f"load: {path!r} was fitted with LatentMAP({k}={saved!r}), this LatentMAP has "
                             f"{k}={mine!r}; build it with the saved arguments")
    dims = {v: lamp.model.output_dims[v] for v in lamp.model.gp_nodes}
    saved_dims = {v: state["W"][v].shape[1] for v in state["W"]}
    if any(dims[v] != d for v, d in saved_dims.items()):
        raise SavedFileError(f"load: the hidden nodes of {path!r} have output dims {saved_dims}, this model's "
                             f"{dims}; build the model with the saved output_dims")
    dtype = saved_dtype(state, path)
    lamp.model.to(dtype=dtype)
    device = lamp.device

    def put(tensors, requires_grad=False):
        out = {}
        for k, v in tensors.items():
            v = v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype)
            out[k] = v.requires_grad_() if requires_grad else v
        return out

    o = state["objective"]
    lamp._objective = LaMPObjective(nodes=o["nodes"], inputs={v: tuple(p) for v, p in o["inputs"].items()},
                                    hidden=set(o["hidden"]), fixed=put(o["fixed"]),
                                    observed_rows=put(o["observed_rows"]), kernel=o["kernel"], jitter=o["jitter"])
    lamp._W = put(state["W"])
    lamp._log_ls, lamp._log_g = put(state["log_ls"], True), put(state["log_g"], True)
    lamp._fixed_g = put(state["fixed_g"])
    lamp._train_rows = state["train_rows"].to(device)
    lamp._fitted_rows = state["fitted_rows"].to(device)
    lamp._row_adams = None  # the optimiser's moments are not saved: a new fit starts afresh
    lamp.input_dims = dict(state["input_dims"])
    lamp._fitted_cache = None
    lamp._state = True
    h = state["history"]
    if h is not None:
        settings = None if h["settings"] is None else LaMPSettings(**h["settings"])
        lamp.history = LaMPHistory(**{**h, "settings": settings})
    return lamp
