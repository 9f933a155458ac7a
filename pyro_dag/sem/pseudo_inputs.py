"""Priors on the pseudo-inputs of a latent structural GP (Silva & Gramacy 2010, arXiv:1002.4802, Sec. 3).

In GPSEM-LV the ``M`` pseudo-inputs ``x̄_i`` of latent ``X_i``'s sparse GP are random variables, not fitted
parameters. The paper gives two priors:

* an empirical Gaussian, ``x̄_i^{(m)} ~ N(μ, σ² I)`` with ``μ`` the empirical means of the parents' anchor
  indicators (0 after centring), :func:`gaussian_pseudo_input_prior`;
* a space-filling (determinantal) prior, ``p(x̄_i) ∝ det(D_i) 1{x̄_i ∈ [-L, L]^{|P_i|}}``,
  ``(D_i)_{jk} = exp(-||x̄^{(j)} - x̄^{(k)}||² / (2 · 0.1²)) + 10⁻⁴ δ_{jk}``, with ``L`` three times the largest
  standard deviation of the observed variables, :class:`SpaceFillingPrior`. It pushes pseudo-inputs apart.
"""
import torch
import pyro.distributions as dist
from pyro.distributions.torch_distribution import TorchDistribution
from torch.distributions import constraints

__all__ = ["SpaceFillingPrior", "gaussian_pseudo_input_prior"]


def gaussian_pseudo_input_prior(num_inducing, input_dim, scale=1.0, dtype=torch.float64, device=None):
    """The empirical Gaussian prior ``N(0, scale² I)`` on ``[M, D]`` pseudo-inputs (event shape ``[M, D]``)."""
    loc = torch.zeros(num_inducing, input_dim, dtype=dtype, device=device)
    return dist.Normal(loc, scale).to_event(2)


class SpaceFillingPrior(TorchDistribution):
    r"""Determinantal space-filling prior on ``M`` pseudo-inputs in ``[-L, L]^D`` (Silva & Gramacy 2010, Sec. 3).

    ``log p(x̄) = log det(D) + const`` on the box, ``D_{jk} = exp(-||x̄_j - x̄_k||² / (2 ℓ²)) + ν δ_{jk}``,
    ``ℓ = 0.1``, ``ν = 10⁻⁴`` (the normaliser is unknown and constant; MCMC and SVI do not need it). Event shape
    ``[M, D]``; the support is the box, so Pyro's NUTS and autoguides work in unconstrained space through
    :func:`torch.distributions.biject_to`. ``sample`` draws uniformly on the box (a feasible point, not an exact
    draw from the prior).

    :param int num_inducing: ``M``. :param int input_dim: ``D``. :param float bound: ``L``.
    :param float lengthscale: ``ℓ`` (0.1 in the paper). :param float nugget: ``ν`` (1e-4 in the paper).
    """

    arg_constraints = {}
    has_rsample = False

    def __init__(self, num_inducing, input_dim, bound, lengthscale=0.1, nugget=1e-4, dtype=torch.float64,
                 device=None, validate_args=False):
        if not bound > 0:
            raise ValueError(f"SpaceFillingPrior needs a positive bound L, got {bound}")
        self.num_inducing, self.input_dim = int(num_inducing), int(input_dim)
        self.bound, self.lengthscale, self.nugget = float(bound), float(lengthscale), float(nugget)
        self._dtype, self._device = dtype, device
        super().__init__(torch.Size(), torch.Size([self.num_inducing, self.input_dim]), validate_args=validate_args)

    @constraints.dependent_property(is_discrete=False, event_dim=2)
    def support(self):
        return constraints.independent(constraints.interval(-self.bound, self.bound), 2)

    def sample(self, sample_shape=torch.Size()):
        shape = torch.Size(sample_shape) + self.event_shape
        u = torch.rand(shape, dtype=self._dtype, device=self._device)
        return (2 * u - 1) * self.bound

    def log_prob(self, value):
        """``log det(D(value))`` ``[...]`` (``-inf`` outside the box)."""
        r2 = (value.unsqueeze(-2) - value.unsqueeze(-3)).pow(2).sum(-1)
        D = torch.exp(-0.5 * r2 / self.lengthscale ** 2)
        eye = torch.eye(self.num_inducing, dtype=value.dtype, device=value.device)
        D = D + self.nugget * eye
        L, _ = torch.linalg.cholesky_ex(D)
        logdet = 2 * L.diagonal(dim1=-2, dim2=-1).log().sum(-1)
        inside = ((value >= -self.bound) & (value <= self.bound)).all(-1).all(-1)
        return torch.where(inside, logdet, torch.full_like(logdet, -float("inf")))
