"""The latent-collider experiment: the model lives here (not in the data module), arguments are checked before
any training, and the fit runs with a bounded thread count that is restored afterwards."""
import json
import math

import pytest
import torch

import pyro_dag.datasets.collider as collider_data
import pyro_dag.experiments.collider as experiment
from pyro_dag import DAGDGP, kernels
from pyro_dag.datasets import collider


def test_the_data_module_builds_no_model():
    assert not hasattr(collider_data, "collider_model")
    assert not any(isinstance(v, type) and issubclass(v, torch.nn.Module) for v in vars(collider_data).values())


def test_collider_model_is_the_papers_model():
    ds = collider(seed=0)
    model = experiment.collider_model(ds)
    assert isinstance(model, DAGDGP) and model.dtype == torch.float64
    assert model.num_inducing == {"w1": 15, "w2": 15, "w3": 49}
    assert isinstance(model.kernels["w3"], kernels.SumInput)
    assert not any(p.requires_grad for p in model.kernels.parameters())     # fixed, as in the paper's protocol
    assert not any(p.requires_grad for p in model.likelihoods.parameters())
    assert math.isclose(float(model.likelihoods["w3"].variance), 0.015**2, rel_tol=1e-6)  # set in float32
    learnable = experiment.collider_model(ds, fixed=False)
    assert any(p.requires_grad for p in learnable.kernels.parameters())


BAD = [
    (dict(steps=0), "steps must be a positive integer"),
    (dict(steps=2.5), "steps must be a positive integer"),
    (dict(precision="dense"), "precision must be one of"),
    (dict(backend="gpu"), "backend must be one of"),
    (dict(sampler="exact"), "sampler must be one of"),
    (dict(lr=0.0), "lr must be a positive finite number"),
    (dict(lr=float("nan")), "lr must be a positive finite number"),
    (dict(num_particles=0), "num_particles must be a positive integer"),
    (dict(num_particles=3, antithetic=True), "num_particles must be even"),
    (dict(warm_start=-1), "warm_start must be a non-negative integer"),
    (dict(natural_gradient_after=-1), "natural_gradient_after must be a non-negative integer"),
    (dict(natural_gradient=2.0), "natural_gradient must be a step size"),
    (dict(sink_step_size=-0.5), "sink_step_size must be a step size"),
    (dict(natural_gradient=0.1, sink_step_size=0.5), "use either natural_gradient"),
    (dict(num_threads=0), "num_threads must be a positive integer"),
]


@pytest.mark.parametrize("kwargs,message", BAD)
def test_fit_collider_rejects_bad_arguments_before_training(monkeypatch, kwargs, message):
    def fail(*args, **kw):
        raise AssertionError("the fit started")

    monkeypatch.setattr(experiment, "_fit_collider", fail)
    with pytest.raises(ValueError, match=message):
        experiment.fit_collider(progress=False, **kwargs)


@pytest.mark.parametrize("num_threads,expected", [(1, 1), (None, 2)])
def test_fit_collider_limits_threads_and_restores_them(monkeypatch, num_threads, expected):
    seen = []
    monkeypatch.setattr(experiment, "_fit_collider", lambda *a: seen.append(torch.get_num_threads()))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        experiment.fit_collider(steps=3, progress=False, num_threads=num_threads)
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert seen == [expected]


def test_a_short_fit_is_reproducible():
    kw = dict(steps=4, progress=False, num_eval_samples=10, antithetic=True, natural_gradient=0.01,
              natural_gradient_after=2)
    a = experiment.fit_collider(**kw)
    b = experiment.fit_collider(**kw)
    assert len(a["losses"]) == 4 and all(math.isfinite(x) for x in a["losses"])
    assert a["losses"] == b["losses"]
    assert set(a["prediction"]) == {"w1", "w2", "w3"}


def test_fit_collider_is_train_with_the_papers_adam():
    result = experiment.fit_collider(steps=3, progress=False, num_eval_samples=10)
    run = result["train"]
    assert run.losses == result["losses"] and run.settings["recipe"] == "adam"
    assert run.settings["fixed_kernels"] and run.settings["elbo"] == "DAGELBO"


def test_an_interrupted_fit_collider_resumes_to_the_same_numbers(tmp_path, monkeypatch):
    from pyro_dag.infer.training import run as loop

    kw = dict(steps=8, progress=False, num_eval_samples=20, antithetic=True, natural_gradient=0.01,
              natural_gradient_after=4)
    whole = experiment.fit_collider(**kw)
    one_step = loop.TrainingRun._one_step

    def interrupted(self, s):
        if s == 6:
            raise KeyboardInterrupt
        return one_step(self, s)

    monkeypatch.setattr(loop.TrainingRun, "_one_step", interrupted)
    with pytest.raises(KeyboardInterrupt):
        experiment.fit_collider(checkpoint=str(tmp_path), checkpoint_every=3, resume=True, **kw)
    monkeypatch.setattr(loop.TrainingRun, "_one_step", one_step)
    resumed = experiment.fit_collider(checkpoint=str(tmp_path), checkpoint_every=3, resume=True, **kw)
    assert resumed["train"].resumed_from == 3
    assert resumed["losses"] == whole["losses"]
    assert resumed["metrics"]["rmse_train"] == whole["metrics"]["rmse_train"]


def test_cli_fit_checkpoint_dir(tmp_path, capsys):
    from pyro_dag.cli import main

    ckpt = tmp_path / "ckpt"
    argv = ["fit", "collider", "--steps", "4", "--no-progress", "--out", str(tmp_path / "out"), "--checkpoint",
            str(ckpt), "--checkpoint-every", "2"]
    assert main(argv) == 0
    assert (ckpt / "train_checkpoint.pt").is_file()
    first = (tmp_path / "out" / "collider_metrics.json").read_text()
    capsys.readouterr()
    assert main(argv) == 0                                        # a finished run: resumed at its last step
    assert "resumed from the checkpoint" in capsys.readouterr().out
    again = json.loads((tmp_path / "out" / "collider_metrics.json").read_text())
    assert again["rmse_train"] == json.loads(first)["rmse_train"]


def test_cli_checkpoint_must_be_writable(tmp_path, capsys):
    from pyro_dag.cli import main

    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(SystemExit) as exc:
        main(["fit", "collider", "--steps", "2", "--out", str(tmp_path / "out"), "--checkpoint", str(blocker / "d")])
    assert exc.value.code == 2 and "argument --checkpoint" in capsys.readouterr().err
