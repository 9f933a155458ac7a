"""Data-parallel SVI on torch.distributed (pyro_dag.infer.distributed, train(..., distributed=True)).

Two gloo processes on 127.0.0.1 (tests/infer/distributed_worker.py, one launch for every check) against one
process on the union of their shards:

* after rank 0's broadcast both ranks hold the same global parameters, and after minibatch steps of
  ``train(distributed=True)`` (independent draws per rank) they still do, bit for bit, with the same losses;
  the run interrupted and resumed from its per-rank checkpoints gives the same losses;
* the reduced full-batch gradient equals the one-process gradient of the full-data loss to 1e-10 (float64),
  for the global parameters and, with latent inputs, for each shard's per-case parameters; so does the loss.
  The ELBO is made deterministic for this comparison (a two-root DAG has closed-form expectations; the latent
  input's reparameterised draws use fixed noise per case), so a wrong scaling (KL counted twice, data term not
  summed, local gradients not divided) fails by far more than rounding.
"""
import os
import socket
import subprocess
import sys

import pyro
import pytest
import torch

from pyro_dag.infer import DAGELBO, train
from pyro_dag.infer.distributed import (DataParallel, DataScale, DistributedSetupError, init_process_group, shard,
                                        shard_bounds)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import distributed_worker as worker  # noqa: E402

WORLD = 2


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    out = tmp_path_factory.mktemp("dist")
    port = _free_port()
    procs = []
    for rank in range(WORLD):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE=str(WORLD), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(port), OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join(sys.path))
        procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "distributed_worker.py"), str(out)],
                                      env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=240)[0])
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            pytest.fail("the distributed workers did not finish in 240 s")
    for p, log in zip(procs, logs):
        assert p.returncode == 0, log
    return {v: [torch.load(out / f"{v}.rank{r}.pt", weights_only=False) for r in range(WORLD)]
            for v in worker.VARIANTS}


def _reference(variant, recs):
    """One process, all N cases, from the ranks' starting values: ``(loss, {name: grad})`` of the full-data loss."""
    pyro.clear_param_store()
    model, guide, inputs, data = worker.problem(variant)
    with worker.FixedNoise(worker.noise(), 0):
        guide(inputs, data)                       # create the parameters
        params = dict(pyro.get_param_store().named_parameters())
        with torch.no_grad():
            for name, value in recs[0]["global"].items():
                params[name].copy_(value)
            for name in recs[0]["local"]:
                params[name].copy_(torch.cat([r["local"][name] for r in recs], 0))
        loss = DAGELBO(num_particles=2).differentiable_loss(model, guide, inputs, data)
        loss.backward()
    return float(loss.detach()), {n: p.grad.clone() for n, p in params.items() if p.grad is not None}


@pytest.mark.parametrize("variant", worker.VARIANTS)
def test_broadcast_and_train_keep_ranks_identical(records, variant):
    recs = records[variant]
    for name, value in recs[0]["global"].items():
        assert torch.equal(value, recs[1]["global"][name]), name
    assert recs[0]["train_losses"] == recs[1]["train_losses"]
    assert len(recs[0]["train_losses"]) == 4
    for r, rec in enumerate(recs):  # resumed from the per-rank checkpoints: the uninterrupted run's losses
        assert rec["resumed_from"] == 2 and rec["resumed_losses"] == rec["train_losses"]
        assert rec["checkpoint_files"] == [f"{variant}_ckpt.rank0of2.pt", f"{variant}_ckpt.rank1of2.pt"]
    # validation on each rank's own shard, averaged: the same values (and early-stopping decisions) everywhere
    assert [s for s, _ in recs[0]["validation"]] == [1, 2, 3, 4]
    assert recs[0]["validation"] == recs[1]["validation"]
    names = set(recs[0]["train_global"])
    assert names == set(recs[1]["train_global"]) and any(n.startswith("inducing.") for n in names)
    for name in names:
        assert torch.equal(recs[0]["train_global"][name], recs[1]["train_global"][name]), name
    # the steps moved the parameters (the test would pass trivially on untrained values)
    moved = [n for n in recs[0]["global"] if n in names and not torch.equal(recs[0]["global"][n],
                                                                             recs[0]["train_global"][n])]
    assert moved
    if variant == "latent":
        assert set(recs[0]["local"]) == {"AutoStructuredGuide.other_guide.locs.h.x",
                                         "AutoStructuredGuide.other_guide.scales.h.x"}
        lo0, hi0 = shard_bounds(worker.N, 0, WORLD)
        assert recs[0]["local"]["AutoStructuredGuide.other_guide.locs.h.x"].shape[0] == hi0 - lo0
    else:
        assert recs[0]["local"] == {}


@pytest.mark.parametrize("variant", worker.VARIANTS)
def test_gradient_equals_one_process_on_the_union(records, variant):
    recs = records[variant]
    loss, grads = _reference(variant, recs)
    assert recs[0]["loss"] == recs[1]["loss"]
    assert abs(recs[0]["loss"] - loss) <= 1e-10 * max(1.0, abs(loss))
    for name, g in recs[0]["grad_global"].items():
        assert torch.equal(g, recs[1]["grad_global"][name]), name
        assert torch.allclose(g, grads[name], rtol=1e-10, atol=1e-10), (name, g, grads[name])
    for name in recs[0]["local"]:
        got = torch.cat([r["grad_local"][name] for r in recs], 0)
        assert torch.allclose(got, grads[name], rtol=1e-10, atol=1e-10), name
    assert set(grads) == set(recs[0]["grad_global"]) | set(recs[0]["grad_local"])


def test_shard_blocks():
    x = torch.arange(7.0).reshape(7, 1)
    parts = [shard({"x": x}, {"a": 2 * x}, rank=r, world_size=3) for r in range(3)]
    assert [p[0]["x"].shape[0] for p in parts] == [3, 2, 2]
    assert torch.equal(torch.cat([p[1]["a"] for p in parts]), 2 * x)
    assert [shard_bounds(7, r, 3) for r in range(3)] == [(0, 3), (3, 5), (5, 7)]
    with pytest.raises(ValueError, match="has 7 cases but"):
        shard({"x": x}, {"a": x[:5]}, rank=0, world_size=2)
    with pytest.raises(ValueError, match="cannot be split over 8 processes"):
        shard_bounds(7, 0, 8)


def test_data_scale_scales_only_the_data_plate():
    def model():
        pyro.sample("g", pyro.distributions.Normal(0.0, 1.0))
        with pyro.plate("data", 3):
            pyro.sample("l", pyro.distributions.Normal(0.0, 1.0))

    with DataScale(2.0):
        tr = pyro.poutine.trace(model).get_trace()
    assert tr.nodes["g"]["scale"] == 1.0 and tr.nodes["l"]["scale"] == 2.0


def test_without_process_group_errors_name_torchrun(monkeypatch):
    assert not torch.distributed.is_initialized()
    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    model, guide, inputs, data = worker.problem("observed")
    with pytest.raises(DistributedSetupError, match="torchrun"):
        train(model, guide, inputs, data, num_steps=2, distributed=True, progress=False)
    with pytest.raises(DistributedSetupError, match="torchrun"):
        DataParallel(DAGELBO())
    with pytest.raises(DistributedSetupError, match="RANK is not set.*torchrun"):
        init_process_group()
    with pytest.raises(DistributedSetupError, match="torchrun"):
        shard(inputs)


def _csv_problem(tmp_path, n=40):
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.uniform(-2, 2, n)
    a = np.sin(x) + 0.1 * rng.normal(size=n)
    b = np.tanh(a) + 0.1 * rng.normal(size=n)
    csv = tmp_path / "data.csv"
    csv.write_text("x,a,b\n" + "\n".join(f"{u:.6f},{v:.6f},{w:.6f}" for u, v, w in zip(x, a, b)) + "\n")
    graph = tmp_path / "graph.txt"
    graph.write_text("x -> a\na -> b\n")
    return csv, graph


def test_cli_distributed_without_torchrun_is_a_clear_error(tmp_path, monkeypatch, capsys):
    from pyro_dag.cli import main

    for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(k, raising=False)
    csv, graph = _csv_problem(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["fit", "--csv", str(csv), "--graph", str(graph), "--distributed", "--out", str(tmp_path / "o"),
              "--steps", "2", "--no-progress"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "--distributed" in err and "torchrun" in err
    with pytest.raises(SystemExit) as e:
        main(["fit", "collider", "--distributed", "--out", str(tmp_path / "o2")])
    assert e.value.code == 2 and "use it with 'fit --csv" in capsys.readouterr().err


@pytest.mark.slow
def test_cli_fit_csv_distributed_under_torchrun(tmp_path):
    """``torchrun --nproc_per_node=2 -m pyro_dag.cli fit --csv ... --distributed``: both processes train, rank 0
    writes the outputs (a few steps: this checks the wiring, not the fit)."""
    csv, graph = _csv_problem(tmp_path)
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "pyro_dag.cli",
           "fit", "--csv", str(csv), "--graph", str(graph), "--distributed", "--out", str(out), "--steps", "3",
           "--pretrain-steps", "0", "--num-inducing", "4", "--latent-steps", "2", "--no-progress"]
    proc = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"), capture_output=True, text=True,
                          timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(p.suffix == ".json" for p in out.iterdir()), list(out.iterdir())


@pytest.fixture
def one_process_group():
    """A gloo group of one process in this process (destroyed afterwards)."""
    assert not torch.distributed.is_initialized()
    torch.distributed.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0,
                                         world_size=1)
    yield
    torch.distributed.destroy_process_group()


def test_amortised_encoder_parameters_are_global(one_process_group):
    """An encoder's weights are shared by every case (all-reduced); only per-case Gaussians are local. With one
    process the reduced gradient is the plain one."""
    from pyro_dag.infer.autoguide import AutoEncodedStructuredGuide

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model, _, inputs, data = worker.problem("latent")
    guide = AutoEncodedStructuredGuide(model, hidden=(4,))
    dp = DataParallel(DAGELBO(num_particles=2)).setup(model, guide, inputs, data)
    assert dp.local_params == []
    names = [n for n, _ in dp.global_params]
    assert any(n.startswith("AutoEncodedStructuredGuide.1.net.") for n in names), names  # the encoder's MLP
    assert len(names) == len(dict(pyro.get_param_store().named_parameters()))
    # the per-case guide of the same model has local parameters
    pyro.clear_param_store()
    model, guide, inputs, data = worker.problem("latent")
    dp = DataParallel(DAGELBO(num_particles=2)).setup(model, guide, inputs, data)
    assert {n for n, _ in dp.local_params} == {"AutoStructuredGuide.other_guide.locs.h.x",
                                              "AutoStructuredGuide.other_guide.scales.h.x"}
    pyro.set_rng_seed(3)
    loss = dp.loss_and_grads(model, guide, inputs, data)
    grads = {n: p.grad.clone() for n, p in dp.params}
    for _, p in dp.params:
        p.grad = None
    pyro.set_rng_seed(3)
    ref = DAGELBO(num_particles=2).differentiable_loss(model, guide, inputs, data)
    ref.backward()
    assert loss == pytest.approx(float(ref.detach()), rel=1e-12)
    for n, p in dp.params:
        assert torch.allclose(grads[n], p.grad, rtol=1e-12, atol=1e-12), n
