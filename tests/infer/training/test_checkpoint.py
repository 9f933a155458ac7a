"""Checkpoints of ``train``: an unreadable or foreign file gives a clear error, a full disk keeps the previous
checkpoint, the temporary files of killed writes are removed, and ``recipe="lamp"`` refuses ``checkpoint=``."""
import errno
import os
import time

import pytest
import torch

from helpers import collider_problem, FullFile
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import load_checkpoint
from pyro_dag.infer.training.checkpoint import CheckpointError
from pyro_dag.outputs import OutputError


def run(path, num_steps=2, resume=False, **kwargs):
    model, inputs, data = collider_problem()
    return train(model, AutoStructuredGuide(model), inputs, data, num_steps=num_steps, recipe="adam",
                 checkpoint=path, checkpoint_every=1, resume=resume, progress=False, **kwargs)


def _bad_files(tmp_path, good):
    raw = good.read_bytes()
    files = {"empty": b"", "truncated": raw[: len(raw) // 2], "garbage": os.urandom(300),
             "text": b"step,loss\n1,2.0\n"}
    out = {}
    for name, content in files.items():
        out[name] = tmp_path / f"{name}.pt"
        out[name].write_bytes(content)
    torch.save({"weight": torch.ones(2)}, tmp_path / "state_dict.pt")          # a foreign torch file
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    out["state_dict"], out["tensor"] = tmp_path / "state_dict.pt", tmp_path / "tensor.pt"
    return out


def test_unreadable_or_foreign_checkpoints_name_the_file_and_the_fix(tmp_path):
    good = tmp_path / "good.pt"
    run(good)
    for name, path in _bad_files(tmp_path, good).items():
        with pytest.raises(CheckpointError) as exc:
            run(path, resume=True)
        msg = str(exc.value)
        assert repr(str(path)) in msg and "delete it" in msg, name
        assert ("is empty" in msg if name == "empty" else "cannot be read" in msg if name in
                ("truncated", "garbage", "text") else "is not a checkpoint written by train" in msg), (name, msg)
        assert "weights_only" not in msg, name            # torch's text suggests weights_only=False
    assert load_checkpoint(good)["step"] == 2


def test_a_full_disk_keeps_the_previous_checkpoint(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    real, calls = torch.save, []

    def save(obj, f, *args, **kwargs):
        calls.append(f)
        if len(calls) > 2:                  # the third checkpoint finds the disk full half way
            with open(f, "wb") as fh:
                fh.write(b"PK\x03\x04partial")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(OutputError, match=r"could not write the checkpoint .*ckpt.pt.*No space left on device.*"
                                          r"previous checkpoint there, if any, is intact") as exc:
        run(path, num_steps=5)
    assert exc.value.errno == errno.ENOSPC
    monkeypatch.setattr(torch, "save", real)
    assert load_checkpoint(path)["step"] == 2
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]                       # no temporary file left


def test_torchs_runtime_error_on_a_full_disk_is_an_output_error(tmp_path, monkeypatch):
    """torch's C++ writer reports a failed write as a RuntimeError ("unexpected pos ..."), which escaped the
    OSError handling of the checkpoint write."""
    path = tmp_path / "ckpt.pt"
    real, calls = torch.save, []

    Full = FullFile                         # a disk that fills after 100 more bytes (tests/helpers.py)

    def save(obj, f, *args, **kwargs):
        calls.append(f)
        if len(calls) > 1:                  # the second checkpoint finds the disk full
            with open(f, "wb") as fh:
                return real(obj, Full(fh), *args, **kwargs)
        return real(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(OutputError, match=r"could not write the checkpoint .*ckpt.pt.*No space left on device") as exc:
        run(path, num_steps=4)
    assert exc.value.errno == errno.ENOSPC and isinstance(exc.value.__cause__.__cause__, RuntimeError)
    monkeypatch.setattr(torch, "save", real)
    assert load_checkpoint(path)["step"] == 1
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


def test_leftover_temporary_files_are_removed_at_the_next_write_and_resume(tmp_path):
    path = tmp_path / "train_checkpoint.pt"
    own = tmp_path / ".train_checkpoint.tmp-abc123.pt"
    old_legacy, fresh_legacy = tmp_path / ".tmp-k1ll3d.pt", tmp_path / ".tmp-bu5y00.pt"
    other = tmp_path / ".other.tmp-abc123.pt"                                # another file's: left alone
    for f in (own, old_legacy, fresh_legacy, other):
        f.write_bytes(b"partial")
    hour_ago = time.time() - 3600
    os.utime(old_legacy, (hour_ago, hour_ago))
    run(path)
    assert sorted(os.listdir(tmp_path)) == sorted([".other.tmp-abc123.pt", ".tmp-bu5y00.pt", "train_checkpoint.pt"])
    own.write_bytes(b"partial")
    run(path, resume=True)
    assert not own.exists()


def test_lamp_recipe_refuses_a_checkpoint(tmp_path):
    import networkx as nx

    from pyro_dag import DAGDGP
    from pyro_dag.infer import LatentMAP

    x = torch.linspace(0, 1, 12, dtype=torch.float64)[:, None]
    model = DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")])).double()
    with pytest.raises(ValueError, match=r"recipe='lamp'\) writes no checkpoints .* drop checkpoint="):
        train(model, LatentMAP(model), {"x": x}, {"y": torch.sin(6 * x)}, num_steps=3, recipe="lamp",
              checkpoint=tmp_path / "lamp.pt")
    assert os.listdir(tmp_path) == []
