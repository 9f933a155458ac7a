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
from pyro_dag.infer.training.checkpoint import (CheckpointError, CheckpointFormatWarning, CheckpointInUseError,
                                                CheckpointLock)
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
            f.write(b"PK\x03\x04partial")    # (pyro_dag opens the file itself and passes the file object)
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
            return real(obj, Full(f), *args, **kwargs)
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


# ------------------------------------------------------------------- checkpoints that prove what they hold (issue 42)
def _deleted_open_files(directory):
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)) and target.endswith("(deleted)"):
            out.append(target)
    return out


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_failed_write_closes_its_temporary_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.pt"
    real, calls = torch.save, []

    def save(obj, f, *args, **kwargs):
        calls.append(f)
        return real(obj, FullFile(f) if len(calls) > 1 else f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    with pytest.raises(OutputError) as exc:
        run(path, num_steps=3)
    assert exc.value is not None                           # the traceback (and torch's writer) still alive here
    assert _deleted_open_files(tmp_path) == []
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


def _flip(path, value):
    raw = bytearray(path.read_bytes())
    at = raw.find(value.reshape(-1)[:2].numpy().tobytes())
    assert at >= 0
    raw[at:at + 8] = torch.tensor([1e300], dtype=value.dtype).numpy().tobytes()[:8]
    path.write_bytes(bytes(raw))


def test_changed_bytes_are_refused_by_the_checksum(tmp_path):
    path = tmp_path / "ckpt.pt"
    run(path)
    state = load_checkpoint(path)
    name, value = max(state["params"].items(), key=lambda kv: kv[1].numel())
    _flip(path, value)
    assert not torch.equal(torch.load(path, weights_only=True)["params"][name], value)   # torch reads it
    with pytest.raises(CheckpointError, match="does not match its checksum"):
        run(path, num_steps=4, resume=True)


def test_resuming_with_other_data_or_another_guide_is_refused(tmp_path):
    from helpers import collider_problem

    path = tmp_path / "ckpt.pt"
    run(path)
    model, inputs, data = collider_problem()
    other = {k: v + 1.0 for k, v in data.items()}
    with pytest.raises(CheckpointError, match="training inputs and data of fingerprint.*another data set needs its "
                                              "own checkpoint"):
        train(model, AutoStructuredGuide(model), inputs, other, num_steps=4, recipe="adam", checkpoint=path,
              resume=True, progress=False)
    import pyro
    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    with pytest.raises(CheckpointError, match="precision 'chordal', this run has 'mean_field'"):
        train(model, AutoStructuredGuide(model, precision="mean_field"), inputs, data, num_steps=4, recipe="adam",
              checkpoint=path, resume=True, progress=False)


def test_resuming_past_num_steps_names_the_fix(tmp_path):
    path = tmp_path / "ckpt.pt"
    run(path, num_steps=3)
    with pytest.raises(ValueError, match="at step 3, beyond num_steps = 2: resume with num_steps >= 3"):
        run(path, num_steps=2, resume=True)


def test_a_saved_fit_or_another_file_is_never_replaced(tmp_path):
    from helpers import collider_problem
    from pyro_dag import persist

    model, inputs, data = collider_problem()
    guide = AutoStructuredGuide(model)
    train(model, guide, inputs, data, num_steps=2, recipe="adam", progress=False)
    fit = tmp_path / "fit.pt"
    persist.save(fit, model, guide, inputs, data)
    before = fit.read_bytes()
    with pytest.raises(CheckpointError, match="holds a saved DAGDGP; a run writes its checkpoints there"):
        run(fit)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(CheckpointError, match="not a torch file written by pyro_dag"):
        run(notes)
    assert fit.read_bytes() == before and notes.read_text() == "mine"


def test_one_writer_per_checkpoint(tmp_path):
    path = tmp_path / "ckpt.pt"
    with CheckpointLock(path):                      # another run holds it (flock conflicts across open files)
        with pytest.raises(CheckpointInUseError, match=f"in use by another run \\(pid {os.getpid()} on"):
            run(path)
    assert not path.exists()
    run(path)                                       # free again
    assert sorted(os.listdir(tmp_path)) == ["ckpt.pt"]


def test_format_1_checkpoints_resume_with_a_warning(tmp_path):
    path = tmp_path / "ckpt.pt"
    run(path)
    state = load_checkpoint(path)
    del state["record"]
    state["format"] = 1
    torch.save(state, path)
    with pytest.warns(CheckpointFormatWarning, match="format 1"):
        result = run(path, num_steps=3, resume=True)
    assert result.resumed_from == 2 and len(result.losses) == 3
