"""The batched per-node hypernetwork ``a_j -> (loc_j, scale_j)`` of the mechanisms' guides ``q(theta | A)``."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .base import _check_int

__all__ = ["NodeHyperNet"]


class NodeHyperNet(nn.Module):
    r"""Per-node hypernetwork ``(loc_j, scale_j) = H_j(a_j)`` for a Gaussian guide over node parameters.

    SVI-DAG's ``q_phi(theta | A)`` with row-wise conditioning (Zinage 2026, arXiv:2608.04930, §3.7): node ``j``'s network
    sees only its parent vector ``a_j = A[:, j]``. All ``p`` networks are evaluated in one batched pass
    (``hidden`` ReLU layers). The scale head starts at ``softplus(-2) ~ 0.13`` (zero weights, bias -2) and the
    location head at ``loc_init`` with small weights.

    :param int num_nodes: ``p``.
    :param int in_dim: length of the conditioning vector (``p``).
    :param int out_dim: number of parameters per node.
    :param tuple hidden: hidden widths.
    :param torch.Tensor loc_init: optional ``[p, out_dim]`` initial location (bias of the location head).

    Input ``[..., p, in_dim]``; output ``(loc, scale)``, each ``[..., p, out_dim]``.
    """

    def __init__(self, num_nodes, in_dim, out_dim, hidden=(32, 32), loc_init=None):
        super().__init__()
        _check_int(num_nodes, "num_nodes")
        _check_int(in_dim, "in_dim")
        _check_int(out_dim, "out_dim")
        self.num_nodes, self.in_dim, self.out_dim = num_nodes, in_dim, out_dim
        dims = [in_dim] + list(hidden)
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for d_in, d_out in zip(dims[:-1], dims[1:]):
            w = torch.empty(num_nodes, d_out, d_in)
            for j in range(num_nodes):
                nn.init.kaiming_uniform_(w[j], a=math.sqrt(5))
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(torch.zeros(num_nodes, d_out)))
        h = dims[-1]
        self.loc_weight = nn.Parameter(0.01 * torch.randn(num_nodes, out_dim, h))
        if loc_init is None:
            loc_init = torch.zeros(num_nodes, out_dim)
        if tuple(loc_init.shape) != (num_nodes, out_dim):
            raise ValueError(f"loc_init must be [{num_nodes}, {out_dim}]; got {tuple(loc_init.shape)}")
        self.loc_bias = nn.Parameter(loc_init.clone().to(torch.get_default_dtype()))
        self.scale_weight = nn.Parameter(torch.zeros(num_nodes, out_dim, h))
        self.scale_bias = nn.Parameter(torch.full((num_nodes, out_dim), -2.0))

    def forward(self, a):
        h = a
        for w, b in zip(self.weights, self.biases):
            h = F.relu(torch.einsum("...ji,jhi->...jh", h, w) + b)
        loc = torch.einsum("...ji,jhi->...jh", h, self.loc_weight) + self.loc_bias
        scale = F.softplus(torch.einsum("...ji,jhi->...jh", h, self.scale_weight) + self.scale_bias) + 1e-6
        return loc, scale
