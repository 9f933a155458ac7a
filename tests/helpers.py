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
    guide = AutoStructuredGuide(model, precision=structure, **kwargs)
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


def linear_gaussian_chain(n_sites=5):
    """x_0 ~ N(0, 1), x_t ~ N(x_{t-1}, 1), y_t ~ N(x_t, 0.5²): a chain-structured Gaussian posterior."""
    import pyro.distributions as dist

    ys = torch.linspace(-1, 1, n_sites, dtype=torch.float64)

    def model():
        x = pyro.sample("x_0", dist.Normal(torch.tensor(0.0, dtype=torch.float64), 1.0))
        pyro.sample("y_0", dist.Normal(x, 0.5), obs=ys[0])
        for t in range(1, n_sites):
            x = pyro.sample(f"x_{t}", dist.Normal(x, 1.0))
            pyro.sample(f"y_{t}", dist.Normal(x, 0.5), obs=ys[t])

    # exact posterior precision and mean
    prec = torch.zeros(n_sites, n_sites, dtype=torch.float64)
    for t in range(n_sites):
        prec[t, t] += 4.0 + (1.0 if t == 0 else 1.0) + (1.0 if t < n_sites - 1 else 0.0)
        if t > 0:
            prec[t, t - 1] = prec[t - 1, t] = -1.0
    mean = torch.linalg.solve(prec, 4.0 * ys)
    cov_y = torch.cumsum(torch.ones(n_sites), 0).to(torch.float64)
    K = torch.minimum(cov_y.unsqueeze(0), cov_y.unsqueeze(1)) + 0.25 * torch.eye(n_sites, dtype=torch.float64)
    log_evidence = torch.distributions.MultivariateNormal(torch.zeros(n_sites, dtype=torch.float64), K).log_prob(ys)
    return model, prec, mean, log_evidence


class FullFile:
    """A binary file on a disk that fills after ``budget`` bytes: then ``write`` raises ENOSPC, which torch's own
    writer reports as a RuntimeError ("unexpected pos ..."). Wrap the file torch.save is given to simulate a full
    disk."""

    def __init__(self, f, budget=100):
        self.f, self.left = f, budget

    def write(self, b):
        import errno

        if len(b) > self.left:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.left -= len(b)
        return self.f.write(b)

    def __getattr__(self, name):
        return getattr(self.f, name)


def brute_force_edge_posterior(log_f, q):
    """Edge posteriors ``[p, p]`` by brute force over every (order, DAG) pair, as the order-modular model of
    ``exact_posterior`` weighs them: ``log_f[j, mask]`` the local score of node ``j`` with the parent set ``mask``
    (``-inf`` for a family the score excludes, e.g. beyond ``max_parents``), ``q[i, j]`` the edge prior."""
    import itertools
    import math

    import numpy as np

    p = log_f.shape[0]
    P, total = np.zeros((p, p)), -np.inf
    for order in itertools.permutations(range(p)):
        pairs = [(order[a], order[b]) for a in range(p) for b in range(a + 1, p)]
        for present in itertools.product([0, 1], repeat=len(pairs)):
            A = np.zeros((p, p), dtype=int)
            for (i, j), e in zip(pairs, present):
                A[i, j] = e
            lw = sum(math.log(q[i, j]) if A[i, j] else math.log(1 - q[i, j]) for i, j in pairs)
            lw += sum(log_f[j, sum(1 << i for i in range(p) if A[i, j])] for j in range(p))
            if np.isfinite(lw):
                total = np.logaddexp(total, lw)
                P += A * math.exp(lw)
    return P / math.exp(total)
