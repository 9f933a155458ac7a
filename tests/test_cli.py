"""The command line (``pyro-dag fit``); the tutorials and the Sphinx docs are tested in tests/test_docs.py."""
import json

import pytest

from pyro_dag.cli import main


@pytest.mark.parametrize("sampler,extra", [("conditional", []), ("joint", []), ("conditional", ["--antithetic"]),
                                           ("conditional", ["--warm-start", "0", "--natural-gradient", "0.01",
                                                            "--natural-gradient-after", "20"]),
                                           ("conditional", ["--recipe", "paper"])])
def test_cli_fit_collider_writes_json_and_png(tmp_path, capsys, sampler, extra):
    assert main(["fit", "collider", "--steps", "30", "--out", str(tmp_path), "--no-progress",
                 "--sampler", sampler] + extra) == 0
    metrics = json.loads((tmp_path / "collider_metrics.json").read_text())
    for key in ["rmse_train", "rmse_test", "crps_train", "crps_test", "mean_abs_corr", "parent_var", "final_elbo"]:
        assert key in metrics
    assert (tmp_path / "collider.png").stat().st_size > 10_000
    assert "child w3 RMSE" in capsys.readouterr().out


BAD_OPTIONS = [
    (["--guide", "nonsense"], "--guide: invalid choice"),
    (["--sampler", "exact"], "--sampler: invalid choice"),
    (["--steps", "0"], "--steps: must be a positive integer"),
    (["--steps", "-5"], "--steps: must be a positive integer"),
    (["--steps", "ten"], "--steps: expected an integer"),
    (["--num-particles", "0"], "--num-particles: must be a positive integer"),
    (["--antithetic", "--num-particles", "3"], "--num-particles must be even"),
    (["--num-particles", "3"], "--no-antithetic"),  # the recommended recipe pairs the samples
    (["--natural-gradient", "2"], "--natural-gradient: must be a step size in (0, 1]"),
    (["--natural-gradient", "nan"], "--natural-gradient: must be a step size"),
    (["--natural-gradient-after", "-1"], "--natural-gradient-after: must be a non-negative integer"),
    (["--warm-start", "-1"], "--warm-start: must be a non-negative integer"),
    (["--lr", "0"], "--lr: must be a finite number > 0"),
    (["--lr", "-0.1"], "--lr: must be a finite number > 0"),
    (["--lr", "nan"], "--lr: must be a finite number > 0"),
    (["--lr", "inf"], "--lr: must be a finite number > 0"),
    (["--lr", "fast"], "--lr: expected a number"),
    (["--device", "tpu"], "--device: 'tpu' is not supported: use cpu, cuda or cuda:N"),
    (["--device", "mps"], "--device: 'mps' is not supported"),
    (["--device", "cpu:1"], "--device: 'cpu:1' is not supported"),
    (["--device", "cuda:99"], "--device: cuda:99"),  # no CUDA here, or fewer than 100 devices
    (["--threads", "0"], "--threads: must be a positive integer"),
    (["--seed", "-1"], "--seed: must be a non-negative integer"),
]


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if a command reaches the fit: every bad option must be refused before training."""
    import pyro_dag.experiments.collider as experiment

    def fail(**kwargs):
        raise AssertionError("the fit started")

    monkeypatch.setattr(experiment, "fit_collider", fail)


@pytest.mark.parametrize("extra,message", BAD_OPTIONS)
def test_cli_rejects_bad_options_before_training(tmp_path, capsys, no_training, extra, message):
    with pytest.raises(SystemExit) as exc:
        main(["fit", "collider", "--out", str(tmp_path / "out")] + extra)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


def test_cli_device_cuda_needs_cuda(tmp_path, capsys, no_training):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    with pytest.raises(SystemExit):
        main(["fit", "collider", "--device", "cuda", "--out", str(tmp_path)])
    assert "CUDA is not available" in capsys.readouterr().err


def test_cli_checks_out_before_training(tmp_path, capsys, no_training):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    for out, message in [(blocker, "exists and is not a directory"),
                         (blocker / "sub" / "dir", "is a file, not a directory"),
                         ("", "is empty")]:
        with pytest.raises(SystemExit) as exc:
            main(["fit", "collider", "--out", str(out)])
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "--out" in err and message in err
    assert not (tmp_path / "a_file" / "sub").exists()


def test_cli_probes_out_before_training(tmp_path, capsys, no_training, monkeypatch):
    """A directory that os.access calls writable but that refuses files still fails before the fit."""
    import tempfile

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "TemporaryFile", refuse)
    with pytest.raises(SystemExit) as exc:
        main(["fit", "collider", "--steps", "5", "--out", str(tmp_path / "new")])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "argument --out" in err and "is not writable" in err


def test_cli_fit_runs_inside_limit_threads(tmp_path, monkeypatch):
    import torch

    import pyro_dag.experiments.collider as experiment

    seen = {}

    def fake_fit(**kwargs):
        seen.update(kwargs, threads=torch.get_num_threads())
        raise RuntimeError("stop here")

    monkeypatch.setattr(experiment, "fit_collider", fake_fit)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(RuntimeError, match="stop here"):
            main(["fit", "collider", "--threads", "1", "--out", str(tmp_path), "--steps", "3",
                  "--warm-start", "10", "--recipe", "paper"])
        assert torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(before)
    assert seen["threads"] == 1 and seen["num_threads"] == 1
    assert seen["warm_start"] == 2  # capped at steps - 1
    assert seen["antithetic"] is False and seen["natural_gradient"] == 0.0  # the paper's recipe


def test_cli_fit_multifidelity_reports_baselines(tmp_path, capsys):
    out = tmp_path / "mf"
    assert main(["fit", "multifidelity", "--problem", "forrester", "--steps", "3", "--pretrain-steps", "10",
                 "--guide", "mean_field", "--no-progress", "--out", str(out)]) == 0
    result = json.loads((out / "multifidelity_forrester_published.json").read_text())
    base = result["baselines"]
    assert set(base["baselines"]) == {"exact_gp", "linear", "mean"} and base["n_train"] == 14
    assert base["comparison"]["rmse"] == pytest.approx(result["metrics"]["rmse"])
    assert "baselines on the high fidelity's runs alone" in capsys.readouterr().out


def _full_disk_at(stem):
    """A ``Figure.savefig`` that writes an empty file and finds the disk full when the name starts with ``stem``."""
    import errno

    from matplotlib.figure import Figure

    real = Figure.savefig

    def savefig(self, path, **kwargs):
        if not str(path).split("/")[-1].lstrip(".").startswith(stem):
            return real(self, path, **kwargs)
        open(path, "wb").close()
        raise OSError(errno.ENOSPC, "No space left on device")
    return savefig


def test_cli_fit_collider_full_disk_names_the_file(tmp_path, capsys, monkeypatch):
    from matplotlib.figure import Figure

    monkeypatch.setattr(Figure, "savefig", _full_disk_at("collider"))
    assert main(["fit", "collider", "--steps", "3", "--out", str(tmp_path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "could not write" in err and "collider.png (No space left on device)" in err
    assert "written completely: collider_metrics.json; not written: collider.png" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["collider_metrics.json"]
    assert "rmse_test" in json.loads((tmp_path / "collider_metrics.json").read_text())


def test_cli_corrupt_checkpoint_is_named(tmp_path, capsys):
    """A truncated checkpoint in --checkpoint: exit 2 naming it (it was a raw unpickling traceback)."""
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "train_checkpoint.pt").write_bytes(b"PK\x03\x04 truncated")
    rc = main(["fit", "collider", "--steps", "3", "--out", str(tmp_path / "o"), "--checkpoint", str(ck),
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and "train_checkpoint.pt' cannot be read" in err and "delete it" in err
