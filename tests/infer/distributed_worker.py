"""One process of the data-parallel tests (tests/infer/test_distributed.py), started with RANK, WORLD_SIZE,
MASTER_ADDR and MASTER_PORT in its environment: ``python distributed_worker.py OUT_DIR``.

For each variant (observed inputs only; a latent input with per-case Gaussians) it writes
``OUT_DIR/{variant}.rank{r}.pt``: the global parameters after rank 0's broadcast, this shard's local
parameters, the full-batch gradients of the data-parallel loss, the reduced loss, the global parameters
and losses after a few minibatch steps of ``train(..., distributed=True)``, and the losses of the same run
interrupted after 2 steps and resumed from its per-rank checkpoints (with validation on each shard).
"""
import os
import sys

import networkx as nx
import pyro
import torch
from pyro.poutine.messenger import Messenger

from pyro_dag import DAGDGP
from pyro_dag.infer import DAGELBO, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.distributed import DataParallel, init_process_group, shard, shard_bounds

N = 24
VARIANTS = ("observed", "latent")


def problem(variant):
    """``(model, guide, inputs, data)`` on all N cases (float64, the same on every process)."""
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.randn(N, 1, generator=g, dtype=torch.float64), torch.randn(N, 1, generator=g, dtype=torch.float64)
    a = torch.sin(2 * x1) + 0.5 * x2 + 0.1 * torch.randn(N, 1, generator=g, dtype=torch.float64)
    if variant == "observed":
        graph = nx.DiGraph([("x1", "a"), ("x2", "a")])
        model = DAGDGP(graph, num_inducing=5).double()
        inputs = {"x1": x1, "x2": x2}
    else:
        graph = nx.DiGraph([("x1", "a"), ("h", "a")])
        model = DAGDGP(graph, num_inducing=5, latent_inputs={"h": 1}).double()
        inputs = {"x1": x1}
    guide = AutoStructuredGuide(model, init_scale=0.1)
    return model, guide, inputs, {"a": a}


class FixedNoise(Messenger):
    """Reparameterised draws of the latent input ``h.x`` (its unconstrained site) with fixed noise
    ``eps[offset + local index]``, so that a shard and the union of the shards use the same noise per case (the
    ELBO is then deterministic)."""

    def __init__(self, eps, offset):
        super().__init__()
        self.eps, self.offset = eps, offset

    def _pyro_sample(self, msg):
        if msg["name"] == "h.x_unconstrained" and not msg["is_observed"] and msg["value"] is None:
            fn = msg["fn"]
            base = fn.base_dist if hasattr(fn, "base_dist") else fn
            b = base.loc.shape[-2]
            msg["value"] = base.loc + base.scale * self.eps[self.offset:self.offset + b]
            msg["done"] = True


def noise():
    return torch.randn(N, 1, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def store():
    return {n: p.detach().clone() for n, p in pyro.get_param_store().named_parameters()}


def main(out):
    rank, world = init_process_group("gloo")
    for variant in VARIANTS:
        pyro.clear_param_store()
        pyro.set_rng_seed(100 + rank)           # the ranks' own inits: the broadcast must make the globals equal
        model, guide, inputs, data = problem(variant)
        inputs, data = shard(inputs, data)
        lo, _ = shard_bounds(N)
        dp = DataParallel(DAGELBO(num_particles=2))
        with FixedNoise(noise(), lo):
            dp.setup(model, guide, inputs, data)
            loss = dp.loss_and_grads(model, guide, inputs, data)
        record = {
            "offset": lo, "loss": loss,
            "global": {n: p.detach().clone() for n, p in dp.global_params},
            "local": {n: p.detach().clone() for n, p in dp.local_params},
            "grad_global": {n: p.grad.clone() for n, p in dp.global_params},
            "grad_local": {n: p.grad.clone() for n, p in dp.local_params},
        }
        # a few minibatch steps of train on fresh parameters, independent draws per rank
        pyro.clear_param_store()
        pyro.set_rng_seed(7 + rank)
        model, guide, inputs, data = problem(variant)
        inputs, data = shard(inputs, data)
        result = train(model, guide, inputs, data, num_steps=4, recipe="adam", lr=0.05, distributed=True,
                       progress=False, model_kwargs={"subsample_size": 5})
        record["train_losses"] = result.losses
        record["train_global"] = {n: p for n, p in store().items() if ".locs.h." not in n and ".scales.h." not in n}
        # interrupted after 2 steps (per-rank checkpoints), then resumed to 4: the same losses as the run above
        ckpt = os.path.join(out, f"{variant}_ckpt.pt")
        for steps in (2, 4):
            pyro.clear_param_store()
            pyro.set_rng_seed(7 + rank)
            model, guide, inputs, data = problem(variant)
            inputs, data = shard(inputs, data)
            resumed = train(model, guide, inputs, data, num_steps=steps, recipe="adam", lr=0.05, distributed=True,
                            progress=False, model_kwargs={"subsample_size": 5}, checkpoint=ckpt, resume=True,
                            checkpoint_every=2, validation=(inputs, data), validate_every=1)
        record["resumed_losses"], record["resumed_from"] = resumed.losses, resumed.resumed_from
        record["validation"] = resumed.validation
        record["checkpoint_files"] = sorted(f for f in os.listdir(out) if f.startswith(f"{variant}_ckpt"))
        torch.save(record, os.path.join(out, f"{variant}.rank{rank}.pt"))
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
