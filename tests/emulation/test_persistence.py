"""MultiFidelityEmulator.save / load (pyro_dag.emulation.persistence): a fitted emulator loaded into a fresh one
built from the same runs and arguments predicts exactly as before; one built otherwise is refused."""
import warnings

import numpy as np
import pyro
import pytest

from pyro_dag.datasets.multifidelity import chain_problem
from pyro_dag.emulation import MultiFidelityEmulator
from pyro_dag.persist import SavedFileError


@pytest.mark.parametrize("precision", ["chordal", "mean_field"])
def test_round_trip_predicts_identically(precision, tmp_path):
    pyro.clear_param_store()
    p = chain_problem("forrester", [30, 10], num_test=20, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, precision=precision, num_inducing=15)
    em.fit(num_steps=12, pretrain_steps=20)
    X = np.linspace(0.05, 0.95, 7)[:, None]
    before = em.predict(X, num_samples=5, seed=2)
    path = em.save(tmp_path / "em.pt")
    pyro.clear_param_store()
    fresh = MultiFidelityEmulator(p.train, p.parents, precision=precision, num_inducing=15)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fresh.load(path) is fresh
    after = fresh.predict(X, num_samples=5, seed=2)
    for f in before:
        assert np.array_equal(before[f].samples, after[f].samples), f
        assert np.array_equal(before[f].mean, after[f].mean) and np.array_equal(before[f].variance, after[f].variance)
    assert fresh.history.keys() == em.history.keys()
    with pytest.raises(SavedFileError, match="fitted already"):
        fresh.load(path)
    other = MultiFidelityEmulator(p.train, p.parents, precision=precision, num_inducing=15, kernel="nargp")
    with pytest.raises(SavedFileError, match="kernel"):
        other.load(path)
    runs = dict(p.train)
    f = list(runs)[0]
    runs[f] = (runs[f][0], runs[f][1] * 2.0)
    with pytest.raises(SavedFileError, match="y_"):
        MultiFidelityEmulator(runs, p.parents, precision=precision, num_inducing=15).load(path)
    swapped = dict(p.train)              # issue 42: other runs, with the same bounds and summary statistics
    X, y = swapped[f]
    y = np.array(y, dtype=float).copy()
    y[[0, 1]] = y[[1, 0]]
    swapped[f] = (X, y)
    with pytest.raises(SavedFileError, match="fitted to other runs"):
        MultiFidelityEmulator(swapped, p.parents, precision=precision, num_inducing=15).load(path)
    with pytest.raises(SavedFileError, match="not been fitted"):
        MultiFidelityEmulator(p.train, p.parents).save(tmp_path / "unfitted.pt")


def test_a_rewritten_selection_record_is_refused_by_name(tmp_path):
    """A saved fit(method="auto") whose record of the chosen kernels or noise decisions was rewritten (with a fresh
    checksum: a tool, not a changed byte) is refused naming the fidelity and the entry, before the model is built."""
    from pyro_dag.emulation.persistence import KIND, _scalings
    from pyro_dag.persist import write_saved

    p = chain_problem("forrester", [10, 5], num_test=5, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents)
    low, high = em.mf.fidelities
    for change, match in [(lambda a: a["chosen"].update({high: "rbf_x"}), f"kernel 'rbf_x' for fidelity '{high}'"),
                          (lambda a: a["chosen"].update({low: "nargp"}), f"kernel 'nargp' for fidelity '{low}'"),
                          (lambda a: a["chosen"].pop(high), "chosen for fidelities"),
                          (lambda a: a["deterministic"].update(ghost=True), "deterministic for fidelities"),
                          (lambda a: a["deterministic"].update({high: "yes"}), "deterministic='yes'")]:
        auto = {"chosen": {low: "rbf", high: "ar1"}, "deterministic": {low: True, high: False}}
        change(auto)
        # only the record is read before the refusal: the rest of a saved fit is not needed
        path = write_saved(tmp_path / "em.pt", KIND, {"emulator": _scalings(em, auto=True), "auto": auto})
        with pytest.raises(SavedFileError, match=match):
            MultiFidelityEmulator(p.train, p.parents).load(path)
