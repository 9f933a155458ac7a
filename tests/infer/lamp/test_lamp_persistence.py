"""LatentMAP.save / load (pyro_dag.infer.lamp.persistence): a fitted LatentMAP loaded into a fresh one built with the
same arguments predicts exactly as before, keeps its history, and refuses a file that does not match."""
import networkx as nx
import pytest
import torch

from pyro_dag import DAGDGP, persist
from pyro_dag.infer import LatentMAP
from pyro_dag.errors import NotFittedError
from pyro_dag.persist import SavedFileError

GRAPH = nx.DiGraph([("x", "w"), ("w", "y")])


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(40, 1, generator=g, dtype=torch.float64)
    Y = torch.sin(6 * X) + 0.01 * torch.randn(40, 1, generator=g, dtype=torch.float64)
    lamp = LatentMAP(DAGDGP(GRAPH).double(), nugget="estimate")
    lamp.fit({"x": X}, {"y": Y}, num_epochs=30)
    path = tmp_path_factory.mktemp("lamp") / "lamp.pt"
    assert lamp.save(path) == str(path)
    return lamp, path


def test_round_trip_predicts_identically(fitted):
    lamp, path = fitted
    test = {"x": torch.linspace(0, 1, 9, dtype=torch.float64)[:, None]}
    loaded = LatentMAP(DAGDGP(GRAPH), nugget="estimate").load(path)  # float32 model: takes the saved dtype
    before, after = lamp.predict(test, num_samples=4, seed=5), loaded.predict(test, num_samples=4, seed=5)
    for w in before:
        for field in ("samples", "mean", "variance"):
            assert torch.equal(getattr(before[w], field), getattr(after[w], field)), (w, field)
    assert torch.equal(lamp.latent_values()["w"], loaded.latent_values()["w"])
    assert torch.equal(lamp.fitted_rows, loaded.fitted_rows)
    assert loaded.history.losses == lamp.history.losses and loaded.history.settings == lamp.history.settings
    # the model's own predict with the LatentMAP as its guide, and the generic entry point
    assert torch.equal(loaded.model.predict(loaded, test, num_samples=1)["y"].mean, before["y"].mean)
    again = persist.load(path, LatentMAP(DAGDGP(GRAPH), nugget="estimate"))
    assert torch.equal(again.predict(test, num_samples=0)["y"].mean, before["y"].mean)
    assert torch.load(path, weights_only=True)["kind"] == "LatentMAP"


def test_load_refuses_what_does_not_match(fitted, tmp_path):
    lamp, path = fitted
    with pytest.raises(SavedFileError, match="nugget='estimate'"):
        LatentMAP(DAGDGP(GRAPH)).load(path)
    with pytest.raises(SavedFileError, match="graph"):
        LatentMAP(DAGDGP(nx.DiGraph([("x", "w"), ("w", "y"), ("x", "y")])), nugget="estimate").load(path)
    with pytest.raises(SavedFileError, match="output dims"):
        LatentMAP(DAGDGP(GRAPH, output_dims={"w": 2}), nugget="estimate").load(path)
    bad = tmp_path / "bad.pt"
    bad.write_bytes(path.read_bytes()[:100])
    with pytest.raises(SavedFileError, match="truncated"):
        LatentMAP(DAGDGP(GRAPH), nugget="estimate").load(bad)
    with pytest.raises(NotFittedError, match=r"LatentMAP.save: this LatentMAP has not been fitted; call fit"):
        LatentMAP(DAGDGP(GRAPH)).save(tmp_path / "unfitted.pt")   # was a RuntimeError
