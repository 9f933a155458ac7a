"""Data-parallel SVI of a DAG deep GP over processes: ``torchrun --nproc_per_node=2 examples/distributed_fit.py``.

Every process builds the same model and guide, keeps its block of the cases and trains with
``train(..., distributed=True)``; the global parameters stay identical on every process, and rank 0 reports.
"""
import networkx as nx
import pyro
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.distributed import init_process_group, shard

torch.set_num_threads(1)
rank, world_size = init_process_group()          # gloo on CPU, nccl when each process has a GPU
pyro.set_rng_seed(rank)                          # independent minibatches and draws per process

n = 20_000
g = torch.Generator().manual_seed(0)             # the same data set on every process
x = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
h_true = torch.randn(n, 1, generator=g, dtype=torch.float64)
a = torch.sin(2 * x) + 0.5 * h_true + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
b = torch.tanh(a) - 0.5 * h_true + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
inputs, data = shard({"x": x}, {"a": a, "b": b})  # this process's cases

graph = nx.DiGraph([("x", "a"), ("h", "a"), ("h", "b"), ("a", "b")])
model = DAGDGP(graph, num_inducing=16, latent_inputs={"h": 1}).double()   # q(h_i) lives on its shard
guide = AutoStructuredGuide(model, init_scale=0.1)
result = train(model, guide, inputs, data, num_steps=300, recipe="adam", lr=0.01, distributed=True,
               model_kwargs={"subsample_size": 256}, progress=rank == 0)
if rank == 0:
    print(f"{world_size} processes, final full-data ELBO estimate {-result.losses[-1]:.1f}")
torch.distributed.destroy_process_group()
