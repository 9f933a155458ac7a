"""Nonlinear SEM: one tanh MLP per node on its masked parents, Gaussian noise, a hypernetwork guide."""
import math
import numbers

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from .base import Mechanism, _check_pos, _noise_args, _rows_last
from .hypernet import NodeHyperNet

__all__ = ["MLPSEM"]


class MLPSEM(Mechanism):
    r"""Nonlinear SEM: one MLP per node on its masked parents plus Gaussian noise (SVI-DAG §3.2, Table E.1).

    .. math:: x_j = f_j(A_{:, j} \odot x; \theta_j) + \epsilon_j, \quad \epsilon_j \sim N(0, \sigma_j^2),

    ``f_j``: ``p -> hidden[0] -> ... -> 1`` with ``tanh`` (paper: two layers of 32). Non-parent inputs are zeroed
    exactly by the (straight-through) adjacency. Sites: ``"{name}.weights"`` ``[p, D]`` (all MLP weights and biases of
    node ``j`` flattened in row ``j``; prior ``N(0, prior_scale^2)``), ``"{name}.log_noise"`` ``[p]`` unless
    ``noise`` is fixed (prior ``N(noise_prior)`` on ``log sigma``; paper: centred at ``log 0.1`` with scale 2),
    and the observation ``"{name}.x"``. Guide: a :class:`NodeHyperNet` of the parent vector ``A[:, j]``
    (row-wise conditioning, SVI-DAG §3.7).

    :param int num_nodes: ``p``.
    :param tuple hidden: hidden widths of each node MLP.
    :param float prior_scale: prior scale of the MLP weights.
    :param float noise: fixed noise scale (paper ER runs: 0.5); ``None`` learns it.
    :param tuple noise_prior: ``(loc, scale)`` of ``log sigma``.
    :param tuple hyper_hidden: hypernetwork widths.
    :param str name: site prefix.
    :param int subsample_size: rows per step (paper: 64).
    :param float kl_weight: scale of the parameter sites in model and guide alike, i.e. the weight of
        ``KL(q(theta | A) || p(theta))`` in the ELBO (1: exact; SVI-DAG's ER runs: 0.01).
    """

    def __init__(
        self,
        num_nodes,
        hidden=(32, 32),
        prior_scale=1.0,
        noise=None,
        noise_prior=(math.log(0.1), 2.0),
        hyper_hidden=(32, 32),
        name="sem",
        subsample_size=None,
        kl_weight=1.0,
    ):
        super().__init__(num_nodes, name=name, subsample_size=subsample_size)
        _check_pos(kl_weight, "kl_weight")
        self.kl_weight = float(kl_weight)
        if not hidden or any(not isinstance(h, numbers.Integral) or h < 1 for h in hidden):
            raise ValueError(f"hidden must be a non-empty tuple of positive widths; got {hidden!r}")
        _check_pos(prior_scale, "prior_scale")
        _noise_args(noise, noise_prior)
        self.hidden = tuple(int(h) for h in hidden)
        self.prior_scale = float(prior_scale)
        self.noise = None if noise is None else float(noise)
        self.noise_prior = (float(noise_prior[0]), float(noise_prior[1]))
        dims = [num_nodes] + list(self.hidden) + [1]
        self._layer_dims = list(zip(dims[:-1], dims[1:]))
        self.num_weights = sum(o * i + o for i, o in self._layer_dims)
        # initial means: the usual fan-in initialisation of an MLP, one draw per node
        init = []
        for _ in range(num_nodes):
            parts = []
            for i, o in self._layer_dims:
                bound = 1.0 / math.sqrt(i)
                parts += [torch.empty(o * i).uniform_(-bound, bound), torch.empty(o).uniform_(-bound, bound)]
            init.append(torch.cat(parts))
        loc_init = torch.stack(init)
        if self.noise is None:
            loc_init = torch.cat([loc_init, torch.full((num_nodes, 1), self.noise_prior[0])], -1)
        self.hypernet = NodeHyperNet(num_nodes, num_nodes, loc_init.shape[-1], tuple(hyper_hidden), loc_init=loc_init)

    @property
    def latent_sites(self):
        return [f"{self.site_prefix}.weights"] + ([f"{self.site_prefix}.log_noise"] if self.noise is None else [])

    def sample_params(self, X):
        with poutine.scale(scale=self.kl_weight):
            return self._sample_params(X)

    def _sample_params(self, X):
        p, D = self.num_nodes, self.num_weights
        z = X.new_zeros(())
        params = {
            "weights": pyro.sample(f"{self.site_prefix}.weights", dist.Normal(z, self.prior_scale).expand([p, D]).to_event(2))
        }
        if self.noise is None:
            params["log_noise"] = pyro.sample(
                f"{self.site_prefix}.log_noise",
                dist.Normal(z + self.noise_prior[0], self.noise_prior[1]).expand([p]).to_event(1),
            )
        return params

    def guide(self, A):
        # the same scale as the model's parameter sites: KL(q(theta | A) || p(theta)) is weighted by kl_weight
        with poutine.scale(scale=self.kl_weight):
            return self._guide(A)

    def _guide(self, A):
        D = self.num_weights
        loc, scale = self.hypernet(A.transpose(-1, -2))
        params = {"weights": pyro.sample(f"{self.site_prefix}.weights", dist.Normal(loc[..., :D], scale[..., :D]).to_event(2))}
        if self.noise is None:
            params["log_noise"] = pyro.sample(
                f"{self.site_prefix}.log_noise", dist.Normal(loc[..., D], scale[..., D]).to_event(1)
            )
        return params

    def predict(self, X, A, weights):
        """Node means ``f_j(A[:, j] * x)``: ``X`` ``[N, p]``, ``A`` ``batch + [p, p]``, weights ``batch + [p, D]``.

        :returns: ``[batch..., N, p]`` with ``N`` broadcast against the last batch dim (which must be 1 if present).
        """
        h = X.unsqueeze(-3) * A.transpose(-1, -2).unsqueeze(-2)  # [..., j, N, i]: inputs of node j
        offset = 0
        for k, (i, o) in enumerate(self._layer_dims):
            W = weights[..., offset: offset + o * i].reshape(weights.shape[:-1] + (o, i))
            offset += o * i
            b = weights[..., offset: offset + o]
            offset += o
            h = h @ W.transpose(-1, -2) + b.unsqueeze(-2)  # [..., j, N, o]
            if k < len(self._layer_dims) - 1:
                h = torch.tanh(h)
        return _rows_last(h.squeeze(-1).transpose(-1, -2))  # [..., N, j]

    def observation_dist(self, X, A, params):
        mean = self.predict(X, A, params["weights"])
        if self.noise is None:
            sigma = params["log_noise"].exp().expand_as(mean)
        else:
            sigma = torch.full_like(mean, self.noise)
        return dist.Normal(mean, sigma).to_event(1)

    def log_likelihood(self, X, A, params):
        """``[batch..., N]`` per-row log-likelihood."""
        return self.observation_dist(X, A, params).log_prob(X)
