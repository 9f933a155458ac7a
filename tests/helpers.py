"""Small models shared by the tests."""
import networkx as nx
import pyro
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.utils import freeze


def chain_problem(n=12, noise=0.1, seed=0, M=5):
    g = torch.Generator().manual_seed(seed)
    x = torch.linspace(-1.5, 1.5, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(2 * x) + noise * torch.randn(n, 1, dtype=torch.float64, generator=g)
    graph = nx.DiGraph([("x", "a"), ("a", "b")])
    model = DAGDGP(graph, num_inducing=M, likelihoods={"b": Gaussian(noise**2)}).double()
    return model, {"x": x}, {"b": y}


def collider_problem(n1=4, n2=3, noise=0.1, M=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    x1 = torch.linspace(-1, 1, n1, dtype=torch.float64)
    x2 = torch.linspace(-1, 1, n2, dtype=torch.float64)
    X1, X2 = torch.meshgrid(x1, x2, indexing="ij")
    y = torch.sin(X1 + X2).reshape(-1, 1) + noise * torch.randn(n1 * n2, 1, dtype=torch.float64, generator=g)
    graph = nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])
    model = DAGDGP(graph, kernels={"w3": kernels.SumInput(kernels.RBF(lengthscale=0.8))}, num_inducing=M,
                   likelihoods={"w3": Gaussian(noise**2)}).double()
    return model, {"x1": X1.reshape(-1, 1), "x2": X2.reshape(-1, 1)}, {"w3": y}


def randomize_guide(guide, scale=0.3, seed=1):
    """Move all guide parameters off their initial values (reproducibly)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in guide.named_parameters():
            p.add_(scale * torch.randn(p.shape, dtype=p.dtype, generator=g))


def setup_guide(model, inputs, data, structure="mean_field", randomize=True, **kwargs):
    guide = AutoStructuredGuide(model, structure=structure, **kwargs)
    guide(inputs, data)
    if randomize:
        randomize_guide(guide)
    return guide


def fixed(model):
    freeze(model.kernels)
    freeze(model.likelihoods)
    freeze(model.inducing)
    return model


__all__ = ["chain_problem", "collider_problem", "randomize_guide", "setup_guide", "fixed", "pyro"]
