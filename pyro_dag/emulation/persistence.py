"""Saving and loading a fitted :class:`~pyro_dag.emulation.MultiFidelityEmulator`
(:meth:`~pyro_dag.emulation.MultiFidelityEmulator.save`, :meth:`~pyro_dag.emulation.MultiFidelityEmulator.load`) in
the file format of :mod:`pyro_dag.persist`: the DAG-DGP and its guide as :func:`pyro_dag.persist.save` writes them
(Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, Sec. 7), the emulator's scalings (to check that the loading emulator was built on the same runs)
and its training history.
"""
import uuid

from ..fingerprint import data_fingerprint
from ..persist import SavedFileError, model_payload, read_saved, restore_model, write_saved

__all__ = ["save_emulator", "load_emulator"]

KIND = "MultiFidelityEmulator"


def _scalings(em, auto=False):
    out = {"fidelities": list(em.mf.fidelities), "lower": [float(v) for v in em.lower],
           "span": [float(v) for v in em.span], "y_loc": dict(em.y_loc), "y_scale": dict(em.y_scale),
           "kernel": em.kernel_name}
    if not auto:   # fit(method="auto") sets the inducing points itself (one per run)
        out["num_inducing"] = dict(em.num_inducing)
    return out


def _runs(em):
    """The emulator's scaled designs, outputs and masks, as :func:`pyro_dag.persist.model_payload` records them."""
    payload_inputs = {k: v.detach().cpu() for k, v in em.model_inputs().items()}
    X, n, obs = em.model.checked_arguments(payload_inputs, em.model_data(), None)
    return ({r: x.detach().cpu() for r, x in X.items()}, {w: y.detach().cpu() for w, (y, _) in obs.items()},
            {w: m.detach().cpu() for w, (_, m) in obs.items()})


def save_emulator(path, em):
    """Write the fitted emulator ``em`` to ``path`` (see :meth:`~pyro_dag.emulation.MultiFidelityEmulator.save`)."""
    if em.guide is None:
        raise SavedFileError("save: the emulator has not been fitted, so there is nothing to save; call fit() first")
    auto = em.selection is not None
    payload = {"fit": model_payload(em.model, em.guide, em.model_inputs(), em.model_data()),
               "precision": em.guide.precision, "emulator": _scalings(em, auto), "history": em.history}
    if auto:   # fit(method="auto"): the chosen kernels, to rebuild the model's structure on load
        payload["auto"] = em.selection.as_dict()
    return write_saved(path, KIND, payload)


def _check_selection(auto, em, path):
    """Refuse a saved ``fit(method="auto")`` record that does not name one kernel and one noise decision for each
    of ``em``'s fidelities (``"rbf"`` where it refines nothing, a fusion kernel where it does): a file rewritten by
    hand or by another tool, whose model could not be rebuilt (or would be rebuilt wrongly) from it."""
    from .selection import KERNEL_CANDIDATES

    fids = list(em.mf.fidelities)
    chosen, deterministic = auto.get("chosen"), auto.get("deterministic")
    for name, record in (("chosen", chosen), ("deterministic", deterministic)):
        if not isinstance(record, dict) or sorted(record) != sorted(fids):
            raise SavedFileError(f"load: {path!r} records the fit's {name} for fidelities "
                                 f"{sorted(record) if isinstance(record, dict) else record!r}, not for this "
                                 f"emulator's {fids}: the file is corrupt or was edited; fit and save it again")
    for f in fids:
        allowed = KERNEL_CANDIDATES if em.mf.parents[f] else ("rbf",)
        if chosen[f] not in allowed:
            raise SavedFileError(f"load: {path!r} records the kernel {chosen[f]!r} for fidelity {f!r}, which is not "
                                 f"one of {list(allowed)}: the file is corrupt or was edited; fit and save it again")
        if not isinstance(deterministic[f], bool):
            raise SavedFileError(f"load: {path!r} records deterministic={deterministic[f]!r} for fidelity {f!r}, "
                                 "not True or False: the file is corrupt or was edited; fit and save it again")


def load_emulator(path, em):
    """Restore a fit written by :func:`save_emulator` into ``em`` (see
    :meth:`~pyro_dag.emulation.MultiFidelityEmulator.load`)."""
    from ..infer.autoguide import AutoStructuredGuide

    state = read_saved(path, KIND)
    if em.guide is not None:
        raise SavedFileError("load: this emulator has been fitted already; load into a fresh one built with the "
                             "same arguments")
    auto = state.get("auto")
    mine = _scalings(em, auto is not None)
    for key, saved in state["emulator"].items():
        if mine[key] != saved:
            raise SavedFileError(f"load: {path!r} holds an emulator whose {key} is {saved!r}, this one's is "
                                 f"{mine[key]!r}: build it with the same runs and arguments as the saved one")
    if auto is not None:
        _check_selection(auto, em, path)
        em._auto_skeleton(auto)
    elif em.model is None:
        em.build()
    saved_runs = state["fit"].get("fingerprint")
    runs = data_fingerprint(*_runs(em))
    if saved_runs is not None and saved_runs != runs:
        raise SavedFileError(f"load: {path!r} holds an emulator fitted to other runs (fingerprint {saved_runs} of "
                             f"its designs and outputs, this emulator's runs {runs}) with the same fidelities, "
                             "bounds and summary statistics: build it with the saved emulator's runs")
    # a fresh name: the guide's parameters must not meet a live emulator's in Pyro's parameter store
    guide = AutoStructuredGuide(em.model, precision=state["precision"],
                                name=f"MultiFidelityEmulator_{uuid.uuid4().hex[:12]}_loaded")
    restore_model(state["fit"], em.model, guide, path)
    em.guide = guide
    em.history = state["history"]
    return em
