"""pyro_dag.persist: a fitted DAGDGP and its guide saved, then loaded into fresh objects built with the same
constructor arguments, predict exactly as before (the same draws for the same seed); the file loads with
``torch.load(weights_only=True)``; a foreign, corrupt or mismatched file gets a clear error."""
import warnings

import networkx as nx
import pyro
import pytest
import torch
from pyro.infer.autoguide import AutoNormal

from pyro_dag import DAGDGP, persist
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.persist import SavedFileError
from pyro_dag.utils import freeze
from helpers import FullFile

GRAPH = nx.DiGraph([("x", "a"), ("a", "b"), ("x", "b")])


def _data():
    g = torch.Generator().manual_seed(0)
    X = torch.rand(24, 1, generator=g, dtype=torch.float64)
    A = torch.sin(3 * X) + 0.05 * torch.randn(24, 1, generator=g, dtype=torch.float64)
    B = A ** 2 + X + 0.05 * torch.randn(24, 1, generator=g, dtype=torch.float64)
    A[::4] = float("nan")  # a partially observed node
    return {"x": X}, {"a": A, "b": B}


def _build(kind, double=True):
    model = DAGDGP(GRAPH, num_inducing=6)
    model = model.double() if double else model
    guide = AutoNormal(model) if kind == "autonormal" else AutoStructuredGuide(model, precision=kind)
    return model, guide


@pytest.fixture
def fitted(request, tmp_path):
    kind = request.param
    pyro.clear_param_store()
    inputs, data = _data()
    model, guide = _build(kind)
    freeze(model.likelihoods["b"])  # a fixed hyperparameter is held fixed after loading too
    train(model, guide, inputs, data, num_steps=15, progress=False, recipe="adam")
    path = tmp_path / "fit.pt"
    persist.save(path, model, guide, inputs, data)
    return kind, model, guide, inputs, path


def _predict(model, guide, inputs):
    pyro.set_rng_seed(3)
    return model.predict(guide, inputs, num_samples=5)


@pytest.mark.parametrize("fitted", ["chordal", "mean_field", "autonormal"], indirect=True)
def test_round_trip_predicts_identically(fitted):
    kind, model, guide, inputs, path = fitted
    test = {"x": torch.linspace(0, 1, 7, dtype=torch.float64)[:, None]}
    before = _predict(model, guide, test)
    pyro.clear_param_store()
    model2, guide2 = _build(kind, double=False)  # a fresh float32 model: load gives it the saved dtype
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert persist.load(path, model2, guide2) is model2
    assert model2.dtype == torch.float64
    assert "likelihoods.b.variance" in dict(model2.named_buffers())  # frozen as in the saved model
    after = _predict(model2, guide2, test)
    for w in before:
        assert torch.equal(before[w].samples, after[w].samples), w
        assert torch.equal(before[w].mean, after[w].mean), w
    # the saved file is plain data
    state = torch.load(path, weights_only=True)
    assert state["kind"] == "DAGDGP" and set(state["inputs"]) == {"x"}


@pytest.mark.parametrize("fitted", ["chordal"], indirect=True)
def test_load_refuses_what_does_not_match(fitted):
    kind, model, guide, inputs, path = fitted
    pyro.clear_param_store()
    other = DAGDGP(nx.DiGraph([("x", "a"), ("a", "b")]), num_inducing=6)
    with pytest.raises(SavedFileError, match="graph"):
        persist.load(path, other, AutoStructuredGuide(other))
    pyro.clear_param_store()
    m = DAGDGP(GRAPH, num_inducing=5)
    with pytest.raises(SavedFileError, match="shape"):
        persist.load(path, m, AutoStructuredGuide(m))
    pyro.clear_param_store()
    m = DAGDGP(GRAPH, num_inducing=6)
    with pytest.raises(SavedFileError, match="pass a fresh one"):
        persist.load(path, m)
    pyro.clear_param_store()
    m = DAGDGP(GRAPH, num_inducing=6)
    with pytest.raises(SavedFileError, match="class AutoStructuredGuide, this guide is of class AutoNormal"):
        persist.load(path, m, AutoNormal(m))


def test_save_needs_a_fitted_model_and_its_training_data(tmp_path):
    pyro.clear_param_store()
    inputs, data = _data()
    model, guide = _build("chordal")
    with pytest.raises(SavedFileError, match="not been set up"):
        persist.save(tmp_path / "f.pt", model, guide, inputs, data)
    model.setup(inputs, data)
    with pytest.raises(SavedFileError, match="guide has not been run"):
        persist.save(tmp_path / "f.pt", model, guide, inputs, data)
    with pytest.raises(SavedFileError, match="pass the training inputs and data"):
        persist.save(tmp_path / "f.pt", model, guide)
    with pytest.raises(SavedFileError, match="not those the model was set up with"):
        persist.save(tmp_path / "f.pt", model, None, inputs, {"b": data["b"]})
    with pytest.raises(TypeError, match="must be a DAGDGP"):
        persist.save(tmp_path / "f.pt", guide, None, inputs, data)


@pytest.mark.parametrize("content", ["empty", "truncated", "garbage", "pickle", "list", "checkpoint", "other_kind"])
def test_a_foreign_or_corrupt_file_gets_a_clear_error(content, tmp_path):
    pyro.clear_param_store()
    inputs, data = _data()
    model, guide = _build("mean_field")
    train(model, guide, inputs, data, num_steps=2, progress=False, recipe="adam")
    good = tmp_path / "good.pt"
    persist.save(good, model, guide, inputs, data)
    path = tmp_path / "bad.pt"
    if content == "empty":
        path.write_bytes(b"")
    elif content == "truncated":
        path.write_bytes(good.read_bytes()[:200])
    elif content == "garbage":
        path.write_bytes(b"not a torch file at all\n" * 10)
    elif content == "pickle":  # a full pickle, which weights_only refuses to run
        torch.save({"model": warnings.WarningMessage}, path)
    elif content == "list":
        torch.save([1, 2, 3], path)
    elif content == "checkpoint":
        torch.save({"format": 1, "settings": {}, "params": {}}, path)
    else:
        persist.write_saved(path, "LatentMAP", {})
    pyro.clear_param_store()
    model2, guide2 = _build("mean_field")
    with pytest.raises(SavedFileError, match="bad.pt") as info:
        persist.load(path, model2, guide2)
    assert "weights_only=False" not in str(info.value)
    with pytest.raises(SavedFileError, match="no file"):
        persist.load(tmp_path / "missing.pt", model2, guide2)


def test_write_is_atomic_and_refuses_a_directory(tmp_path):
    persist.write_saved(tmp_path / "f.pt", "DAGDGP", {"x": torch.zeros(2)})
    assert [p.name for p in tmp_path.iterdir()] == ["f.pt"]  # no temporary file left
    with pytest.raises(SavedFileError, match="is a directory"):
        persist.write_saved(tmp_path, "DAGDGP", {})


def test_a_full_disk_while_saving_is_an_output_error_and_keeps_the_earlier_file(tmp_path, monkeypatch):
    """torch's writer reports the failed write as a RuntimeError ("unexpected pos ..."), which escaped."""
    from pyro_dag.outputs import OutputError

    persist.write_saved(tmp_path / "f.pt", "DAGDGP", {"x": torch.zeros(2)})
    real = torch.save

    Full = FullFile                         # a disk that fills after 100 more bytes (tests/helpers.py)

    monkeypatch.setattr(torch, "save", lambda obj, f, *a, **k: real(obj, Full(f), *a, **k))
    with pytest.raises(OutputError, match=r"could not write .*f.pt \(torch.save failed: No space left on device\)") \
            as exc:
        persist.write_saved(tmp_path / "f.pt", "DAGDGP", {"x": torch.ones(500)})
    assert isinstance(exc.value.__cause__.__cause__, RuntimeError)    # torch's own report of the failed write
    monkeypatch.undo()
    assert [p.name for p in tmp_path.iterdir()] == ["f.pt"]
    assert persist.read_saved(tmp_path / "f.pt", "DAGDGP")["x"].shape == (2,)


# --------------------------------------------------------------------------- files that prove what they hold (issue 42)
def _flip_tensor_bytes(path, tensor):
    """Change 8 bytes inside ``tensor``'s data in the torch zip file at ``path`` (its first float64 value)."""
    raw = bytearray(path.read_bytes())
    needle = tensor.reshape(-1)[:2].numpy().tobytes()
    at = raw.find(needle)
    assert at >= 0
    raw[at:at + 8] = torch.tensor([1e300], dtype=torch.float64).numpy().tobytes()
    path.write_bytes(bytes(raw))


@pytest.mark.parametrize("fitted", ["chordal"], indirect=True)
def test_changed_bytes_are_refused_by_the_checksum(fitted):
    kind, model, guide, inputs, path = fitted
    value = dict(guide.named_parameters())["family.locs.a_unconstrained"].detach().cpu()
    _flip_tensor_bytes(path, value)
    state = torch.load(path, weights_only=True)   # torch itself reads the changed file
    assert state["guide"]["family.locs.a_unconstrained"].reshape(-1)[0] == 1e300
    pyro.clear_param_store()
    model2, guide2 = _build(kind)
    with pytest.raises(SavedFileError, match="does not match its checksum"):
        persist.load(path, model2, guide2)


@pytest.mark.parametrize("fitted", ["chordal"], indirect=True)
def test_another_precision_or_kernel_is_refused(fitted):
    from pyro_dag.kernels import Matern52

    kind, model, guide, inputs, path = fitted
    pyro.clear_param_store()
    model2, _ = _build(kind)
    with pytest.raises(SavedFileError, match="precision 'chordal'.*precision 'full'"):
        persist.load(path, model2, AutoStructuredGuide(model2, precision="full"))
    pyro.clear_param_store()
    model3 = DAGDGP(GRAPH, num_inducing=6, kernels={"b": Matern52()}).double()
    with pytest.raises(SavedFileError, match="'kernels.b.*Matern52 here and a RBF"):
        persist.load(path, model3, AutoStructuredGuide(model3, precision="chordal"))


@pytest.mark.parametrize("fitted", ["chordal"], indirect=True)
def test_format_1_files_load_with_a_warning_and_bad_dtypes_are_named(fitted):
    kind, model, guide, inputs, path = fitted
    state = torch.load(path, weights_only=True)
    for key in ("checksum", "precision", "modules", "fingerprint"):
        del state[key]
    state["version"] = 1
    old = path.parent / "old.pt"
    torch.save(state, old)
    pyro.clear_param_store()
    model2, guide2 = _build(kind)
    with pytest.warns(persist.SavedFormatWarning, match="format 1"):
        persist.load(old, model2, guide2)
    test = {"x": torch.linspace(0, 1, 5, dtype=torch.float64)[:, None]}
    assert torch.equal(_predict(model, guide, test)["b"].mean, _predict(model2, guide2, test)["b"].mean)
    state["dtype"] = "int7"
    torch.save(state, old)
    pyro.clear_param_store()
    model3, guide3 = _build(kind)
    with pytest.warns(persist.SavedFormatWarning), pytest.raises(SavedFileError, match="dtype 'int7'"):
        persist.load(old, model3, guide3)
    state["version"] = 9
    torch.save(state, old)
    with pytest.raises(SavedFileError, match="format version 9"):
        persist.load(old, *_build(kind))


@pytest.mark.parametrize("fitted", ["chordal"], indirect=True)
def test_save_never_replaces_a_file_of_another_kind(fitted, tmp_path):
    kind, model, guide, inputs, path = fitted
    _, data = _data()
    other = tmp_path / "notes.pt"
    other.write_text("my notes")
    with pytest.raises(SavedFileError, match="not a torch file written by pyro_dag.*another path"):
        persist.save(other, model, guide, inputs, data)
    assert other.read_text() == "my notes"
    ckpt = tmp_path / "ckpt.pt"
    torch.save({"format": 1, "settings": {}, "params": {}}, ckpt)
    with pytest.raises(SavedFileError, match="a train\\(\\) checkpoint"):
        persist.save(ckpt, model, guide, inputs, data)
    persist.save(path, model, guide, inputs, data)            # a saved fit of the same kind is replaced
    nested = tmp_path / "new" / "folder" / "fit.pt"             # a missing folder is created
    assert persist.save(nested, model, guide, inputs, data) == str(nested) and nested.is_file()


def _rewritten(path, change, name="edited.pt"):
    """The saved file at ``path`` changed by ``change(state)`` and given a fresh checksum (a file rewritten by a
    tool, which the checksum alone cannot catch)."""
    from pyro_dag.fingerprint import checksum

    state = torch.load(path, weights_only=True)
    del state["checksum"]
    change(state)
    state["checksum"] = checksum(state)
    out = path.parent / name
    torch.save(state, out)
    return out


@pytest.mark.parametrize("fitted", ["chordal"], indirect=True)
def test_exact_fit_nodes_of_a_rewritten_file_are_checked(fitted):
    """Nodes that are not non-root nodes of the graph (or not a list of names) are refused by name; a file without
    the entry (written before pyro_dag kept it) loads with a warning saying what may differ."""
    kind, model, guide, inputs, path = fitted
    for value, match in [(["ghost"], r"\['ghost'\].*not non-root nodes"), (["x"], r"\['x'\].*not non-root nodes"),
                         ("a", "exact_fit_nodes='a', not a list of node names")]:
        edited = _rewritten(path, lambda s: s.update(exact_fit_nodes=value))
        pyro.clear_param_store()
        with pytest.raises(SavedFileError, match=match):
            persist.load(edited, *_build(kind))
    edited = _rewritten(path, lambda s: s.pop("exact_fit_nodes"))
    pyro.clear_param_store()
    model2, guide2 = _build(kind)
    with pytest.warns(persist.SavedFormatWarning, match="exact_fit_nodes"):
        persist.load(edited, model2, guide2)
    assert model2.exact_fit_nodes == set()
