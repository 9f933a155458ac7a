"""The latent-collider data set of the DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep
Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645, App. G.3).

DAG ``x1 → w1 → w3 ← w2 ← x2``; only the child ``w3`` is observed. The roots lie on fixed asymmetric 1-D
grids (15 and 11 points on [-1, 1], the 11-point grid shifted by a third of its step) and the cases are
their 165-point product grid. ``w1(x1)`` and ``w2(x2)`` are independent GP draws (RBF, length-scale 0.4,
variance 1); the child is a GP draw on the parents' sum, ``w3 = g(w1 + w2)`` with an RBF of length-scale
0.6 and variance 1 (the sum-input kernel); ``y = w3 + ε`` with ``ε ~ N(0, 0.015²)``.

The paper does not state its train/test split (its Fig. 4 quotes 165 and 119 cases): here 119 of the 165
cases, chosen at random with the seed, are observed and the other 46 are held out (their entries of ``data["w3"]`` are NaN).
The noise-free surface is returned for both.

This module only generates data; the paper's model for it is
:func:`pyro_dag.experiments.collider.collider_model`.
"""
from dataclasses import dataclass

import networkx as nx
import torch

__all__ = ["ColliderData", "collider"]

NUM_X1, NUM_X2, NUM_TRAIN = 15, 11, 119
NOISE_SD = 0.015
PARENT_LENGTHSCALE, CHILD_LENGTHSCALE = 0.4, 0.6


@dataclass
class ColliderData:
    """The latent-collider data.

    :ivar networkx.DiGraph graph: ``x1 → w1 → w3 ← w2 ← x2``.
    :ivar dict inputs: ``{"x1": [165, 1], "x2": [165, 1]}`` design matrices (product grid, x1-major).
    :ivar dict data: ``{"w3": [165, 1]}`` noisy child observations, NaN at held-out cases.
    :ivar dict truth: noise-free ``{"w1", "w2", "w3": [165, 1]}``.
    :ivar torch.Tensor train_mask: ``[165]`` bool, True for the 119 observed cases.
    :ivar torch.Tensor y_full: ``[165, 1]`` noisy child values at every case (held-out ones included).
    :ivar torch.Tensor x1_grid: ``[15]``; :ivar torch.Tensor x2_grid: ``[11]``.
    """

    graph: nx.DiGraph
    inputs: dict
    data: dict
    truth: dict
    train_mask: torch.Tensor
    y_full: torch.Tensor
    x1_grid: torch.Tensor
    x2_grid: torch.Tensor

    @property
    def test_mask(self):
        """``[165]`` bool, True for the 46 held-out cases."""
        return ~self.train_mask


def _rbf(x, z, lengthscale):
    return torch.exp(-0.5 * (x.unsqueeze(-1) - z.unsqueeze(-2)).pow(2) / lengthscale**2)


def _gp_draw(x, lengthscale, gen):
    K = _rbf(x, x, lengthscale) + 1e-10 * torch.eye(x.shape[0], dtype=x.dtype)
    L = torch.linalg.cholesky(K)
    return L @ torch.randn(x.shape[0], dtype=x.dtype, generator=gen)


def collider(seed=0, dtype=torch.float64):
    """Generate the latent-collider data (arXiv:2607.09645, App. G.3).

    :param int seed: seed of the GP draws, the noise and the train/test split.
    :returns: :class:`ColliderData`.
    """
    gen = torch.Generator().manual_seed(seed)
    x1 = torch.linspace(-1, 1, NUM_X1, dtype=torch.float64)
    x2 = torch.linspace(-1, 1, NUM_X2, dtype=torch.float64) + (2.0 / (NUM_X2 - 1)) / 3
    w1 = _gp_draw(x1, PARENT_LENGTHSCALE, gen)
    w2 = _gp_draw(x2, PARENT_LENGTHSCALE, gen)
    X1, X2 = torch.meshgrid(x1, x2, indexing="ij")
    W1, W2 = torch.meshgrid(w1, w2, indexing="ij")
    s = (W1 + W2).reshape(-1)
    # w3 = g(w1 + w2): draw g at the distinct sums (duplicates share one value of g).
    uniq, inverse = torch.unique(s, return_inverse=True)
    g = _gp_draw(uniq, CHILD_LENGTHSCALE, gen)
    w3 = g[inverse]
    y = w3 + NOISE_SD * torch.randn(w3.shape, dtype=torch.float64, generator=gen)
    n = s.shape[0]
    perm = torch.randperm(n, generator=gen)
    train_mask = torch.zeros(n, dtype=torch.bool)
    train_mask[perm[:NUM_TRAIN]] = True
    y_obs = torch.where(train_mask, y, torch.full_like(y, float("nan")))
    graph = nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])
    col = lambda t: t.reshape(-1, 1).to(dtype)  # noqa: E731
    return ColliderData(
        graph=graph,
        inputs={"x1": col(X1), "x2": col(X2)},
        data={"w3": col(y_obs)},
        truth={"w1": col(W1), "w2": col(W2), "w3": col(w3)},
        train_mask=train_mask,
        y_full=col(y),
        x1_grid=x1.to(dtype),
        x2_grid=x2.to(dtype),
    )
