"""pyro_dag.outputs: each output file is written atomically, and a failed output set says which files are complete."""
import errno
import json
import os

import pytest

from pyro_dag.outputs import OutputError, OutputSet, atomic_write, save_figure, write_json
from helpers import FullFile


def full_disk(tmp):
    """A writer that gets half way and then finds the disk full."""
    with open(tmp, "w") as f:
        f.write("{\"partial\": ")
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_failed_write_leaves_the_previous_file_and_no_temporary(tmp_path):
    path = tmp_path / "metrics.json"
    write_json(path, {"a": 1})
    with pytest.raises(OutputError, match=r"could not write .*metrics.json \(No space left on device\)") as exc:
        atomic_write(path, full_disk)
    assert exc.value.errno == errno.ENOSPC and exc.value.path == str(path)
    assert json.loads(path.read_text()) == {"a": 1}
    assert os.listdir(tmp_path) == ["metrics.json"]
    with pytest.raises(OutputError):
        atomic_write(tmp_path / "new.csv", full_disk)
    assert os.listdir(tmp_path) == ["metrics.json"]                  # no 0-byte or partial new.csv


def test_an_output_set_names_the_failed_file_and_the_complete_ones(tmp_path):
    out = OutputSet(tmp_path / "o", ["metrics.json", "predictions.csv", "figure.png", "extra.txt"])
    out.json("metrics.json", {"rmse": 0.1})
    out.write("predictions.csv", lambda tmp: open(tmp, "w").write("row\n0\n"))
    with pytest.raises(OutputError) as exc:
        out.write("figure.png", full_disk)
    msg = str(exc.value)
    assert "could not write" in msg and "figure.png (No space left on device)" in msg
    assert "written completely: metrics.json, predictions.csv; not written: figure.png, extra.txt" in msg
    assert sorted(os.listdir(tmp_path / "o")) == ["metrics.json", "predictions.csv"]


def test_save_figure_is_atomic_and_closes_the_figure(tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    fig = plt.figure()
    assert save_figure(fig, tmp_path / "a.png") == str(tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:4] == b"\x89PNG" and not plt.get_fignums()
    monkeypatch.setattr(Figure, "savefig", lambda self, path, **kw: full_disk(path))
    fig = plt.figure()
    with pytest.raises(OutputError, match="b.png"):
        save_figure(fig, tmp_path / "b.png")
    assert os.listdir(tmp_path) == ["a.png"] and not plt.get_fignums()


_FullFile = FullFile   # tests/helpers.py


def test_torch_save_reports_torchs_write_failure_as_the_oserror_behind_it(tmp_path, monkeypatch):
    """torch.save on a full disk raises RuntimeError, which the OSError handling of the writers did not catch."""
    import torch

    from pyro_dag.outputs import torch_save

    path = tmp_path / "state.pt"
    torch_save({"w": torch.zeros(3)}, path)
    with open(tmp_path / "other.pt", "wb") as f, pytest.raises(OSError, match="No space left on device") as exc:
        torch_save({"w": torch.zeros(1000)}, _FullFile(f, 100))
    assert exc.value.errno == errno.ENOSPC and isinstance(exc.value.__cause__, RuntimeError)
    real = torch.save

    def full_save(obj, f, *a, **k):        # torch_save opens a path itself and gives torch the file object
        return real(obj, _FullFile(f, 100), *a, **k)

    monkeypatch.setattr(torch, "save", full_save)
    with pytest.raises(OutputError, match=r"could not write .*state.pt \(torch.save failed: No space left") as exc:
        atomic_write(path, lambda tmp: torch_save({"w": torch.ones(1000)}, tmp))
    assert exc.value.errno == errno.ENOSPC
    assert sorted(os.listdir(tmp_path)) == ["other.pt", "state.pt"]          # no temporary file left
    monkeypatch.setattr(torch, "save", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("file write failed")))
    with pytest.raises(OSError, match=r"torch.save failed: is the disk full\? \(file write failed\)") as exc:
        torch_save({}, tmp_path / "new.pt")
    assert exc.value.errno == errno.EIO
    assert torch.load(path, weights_only=True)["w"].shape == (3,)            # the earlier file is intact
