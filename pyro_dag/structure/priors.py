"""Edge priors of Bayesian structure learning: the Beta-Bernoulli prior on edge probabilities, seen on the logits.

* :class:`LogisticBeta` -- ``gamma = logit(pi)`` with ``pi ~ Beta(alpha, beta)``, the prior of one edge logit;
* :func:`edge_belief_prior` -- Beta parameters from a matrix of prior edge beliefs;
* :func:`sparsity_prior` -- the graph-agnostic prior with one edge probability for every pair;
* :func:`edge_prior_parameters` -- the combination :func:`~pyro_dag.structure.fit` and
  :func:`~pyro_dag.structure.exact_posterior` use (beliefs where given, the sparsity prior elsewhere).

Reference: Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to Bayesian Causal Discovery*,
arXiv:2608.04930, §3.2.1 (domain-informed Beta-Bernoulli edge prior). Convention: ``[p, p]`` matrices with
entry ``[i, j]`` for the edge ``i -> j``; diagonals are ignored (set to 1 in the returned parameters).
"""
import numbers

import numpy as np
import torch
import torch.nn.functional as F
from pyro.distributions import constraints
from pyro.distributions.torch_distribution import TorchDistribution
from torch.distributions.utils import broadcast_all

__all__ = ["LogisticBeta", "edge_belief_prior", "edge_prior_parameters", "sparsity_prior"]


class LogisticBeta(TorchDistribution):
    r"""Logistic-Beta distribution: ``gamma = logit(pi)`` with ``pi ~ Beta(alpha, beta)`` (SVI-DAG §3.2.1).

    It is the prior of an edge logit under the Beta-Bernoulli edge prior of SVI-DAG: with a Beta on the edge
    probability, the induced density of the logit is

    .. math:: p(\gamma) = \sigma(\gamma)^\alpha \, (1 - \sigma(\gamma))^\beta / B(\alpha, \beta),

    a proper density whose mode is ``log(alpha / beta)`` (not ``logit`` of the Beta mode).
    ``rsample`` is reparameterised through Gamma variables, ``gamma = log G_a - log G_b`` with
    ``G_a ~ Gamma(alpha)``, ``G_b ~ Gamma(beta)``, which avoids rounding ``pi`` to 0 or 1.

    :param alpha: positive, any shape (batch shape = broadcast of ``alpha`` and ``beta``).
    :param beta: positive.

    Example::

        alpha, beta = edge_belief_prior(beliefs)                   # [p, p] each
        prior = LogisticBeta(offdiag(alpha), offdiag(beta)).to_event(1)
        gamma = pyro.sample("gamma", prior)                        # [p (p - 1)]
    """

    arg_constraints = {"alpha": constraints.positive, "beta": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, alpha, beta, validate_args=None):
        self.alpha, self.beta = broadcast_all(alpha, beta)
        super().__init__(self.alpha.shape, validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(LogisticBeta, _instance)
        batch_shape = torch.Size(batch_shape)
        new.alpha = self.alpha.expand(batch_shape)
        new.beta = self.beta.expand(batch_shape)
        super(LogisticBeta, new).__init__(batch_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    def rsample(self, sample_shape=torch.Size()):
        shape = self._extended_shape(sample_shape)
        tiny = torch.finfo(self.alpha.dtype).tiny
        ga = torch._standard_gamma(self.alpha.expand(shape)).clamp_min(tiny)
        gb = torch._standard_gamma(self.beta.expand(shape)).clamp_min(tiny)
        return ga.log() - gb.log()

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        lbeta = torch.lgamma(self.alpha) + torch.lgamma(self.beta) - torch.lgamma(self.alpha + self.beta)
        return self.alpha * F.logsigmoid(value) + self.beta * F.logsigmoid(-value) - lbeta

    @property
    def mean(self):
        return torch.digamma(self.alpha) - torch.digamma(self.beta)

    @property
    def mode(self):
        return self.alpha.log() - self.beta.log()

    @property
    def variance(self):
        return torch.polygamma(1, self.alpha) + torch.polygamma(1, self.beta)


def _as_tensor(x, name, dtype=None, device=None):
    if torch.is_tensor(x):
        t = x
        if dtype is not None:
            t = t.to(dtype)
    else:
        try:
            t = torch.as_tensor(x, dtype=dtype if dtype is not None else torch.get_default_dtype())
        except Exception as e:  # pragma: no cover - message only
            raise TypeError(f"{name} must be a tensor, an array or a nested list of numbers; got {type(x)}") from e
    if not t.is_floating_point():
        t = t.to(torch.get_default_dtype())
    if device is not None:
        t = t.to(device)
    return t


def edge_belief_prior(beliefs, strength=500.0, min_concentration=1.0, exponent=2.0):
    r"""Beta parameters from a matrix of prior edge beliefs, as SVI-DAG does (§3.2.1).

    A belief ``p_ij`` in ``(0, 1)`` is the *mode* of the Beta prior on ``P(i -> j)``; ``0.5`` means no opinion.
    Confident beliefs get concentrated Betas:

    .. math:: \nu = \nu_{min} + \kappa |p - 0.5|^\eta, \quad \alpha = \nu p + 1, \quad \beta = \nu (1 - p) + 1

    with ``kappa = strength`` (paper: ``nu_min = 1, kappa = 500, eta = 2``; e.g. ``p = 0.99 -> nu = 121``).
    The marginal prior edge probability is ``alpha / (alpha + beta)``, not ``p``.

    :param beliefs: ``[p, p]`` (or ``[..., p, p]``) with ``beliefs[i, j]`` the belief in ``i -> j``; the
        diagonal is ignored (any value).
    :param float strength: ``kappa``, how fast the concentration grows away from 0.5.
    :param float min_concentration: ``nu_min``, the concentration of a "no opinion" entry.
    :param float exponent: ``eta``.
    :returns: ``(alpha, beta)``, each shaped like ``beliefs``; diagonal entries are set to 1.
    """
    b = _as_tensor(beliefs, "beliefs")
    if b.dim() < 2 or b.shape[-1] != b.shape[-2]:
        raise ValueError(f"beliefs must be a square [p, p] matrix (beliefs[i, j] = belief in i -> j); got {tuple(b.shape)}")
    for name, v in (("strength", strength), ("min_concentration", min_concentration), ("exponent", exponent)):
        if not isinstance(v, numbers.Real) or v < 0:
            raise ValueError(f"{name} must be a non-negative number; got {v!r}")
    p = b.shape[-1]
    eye = torch.eye(p, dtype=torch.bool, device=b.device)
    off = b.masked_select(~eye.expand(b.shape))
    if torch.isnan(off).any() or (off <= 0).any() or (off >= 1).any():
        raise ValueError(
            "off-diagonal beliefs must lie strictly inside (0, 1) (0.5 = no opinion); clip certainties to e.g. "
            f"0.01 / 0.99. Got min {off.min().item():.4g}, max {off.max().item():.4g}."
        )
    b = torch.where(eye, torch.full_like(b, 0.5), b)
    nu = min_concentration + strength * (b - 0.5).abs().pow(exponent)
    alpha = nu * b + 1.0
    beta = nu * (1.0 - b) + 1.0
    one = torch.ones_like(alpha)
    return torch.where(eye, one, alpha), torch.where(eye, one, beta)


def sparsity_prior(num_nodes, edge_prob, concentration=20.0, dtype=None, device=None):
    r"""Uniform sparsity prior: every off-diagonal belief equals ``edge_prob`` with a fixed concentration.

    This is the graph-agnostic prior that SVI-DAG's official code uses in its benchmarks instead of
    "no opinion" (not stated in the paper):
    ``alpha = nu p0 + 1, beta = nu (1 - p0) + 1`` with ``nu = concentration`` (paper code: 20).

    :param int num_nodes: ``p``.
    :param float edge_prob: ``p0`` in ``(0, 1)``, e.g. ``expected_parents / (p - 1)``.
    :param float concentration: ``nu``.
    :returns: ``(alpha, beta)``, each ``[p, p]`` with a diagonal of ones.
    """
    if not isinstance(num_nodes, numbers.Integral) or num_nodes < 2:
        raise ValueError(f"num_nodes must be an integer >= 2; got {num_nodes!r}")
    if not isinstance(edge_prob, numbers.Real) or not 0 < edge_prob < 1:
        raise ValueError(f"edge_prob must be a number in (0, 1); got {edge_prob!r}")
    if not isinstance(concentration, numbers.Real) or concentration < 0:
        raise ValueError(f"concentration must be a non-negative number; got {concentration!r}")
    dtype = dtype or torch.get_default_dtype()
    eye = torch.eye(num_nodes, dtype=torch.bool, device=device)
    alpha = torch.full((num_nodes, num_nodes), concentration * edge_prob + 1.0, dtype=dtype, device=device)
    beta = torch.full((num_nodes, num_nodes), concentration * (1.0 - edge_prob) + 1.0, dtype=dtype, device=device)
    return alpha.masked_fill(eye, 1.0), beta.masked_fill(eye, 1.0)


def edge_prior_parameters(num_nodes, edge_beliefs=None, expected_parents=1.5, prior_concentration=20.0,
                          belief_strength=500.0, dtype=None, device=None):
    r"""The ``[p, p]`` Beta parameters ``(alpha, beta)`` of the edge prior that :func:`~pyro_dag.structure.fit` and
    :func:`~pyro_dag.structure.exact_posterior` use.

    Entries with a belief other than 0.5 in ``edge_beliefs`` get :func:`edge_belief_prior` (strength
    ``belief_strength``); "no opinion" entries (0.5), and all entries when ``edge_beliefs`` is ``None``, get the
    :func:`sparsity_prior` with ``p0 = min(0.5, expected_parents / (p - 1))`` and concentration
    ``prior_concentration`` (``expected_parents=None`` or ``p0 = 0.5``: the flat "no opinion" Beta instead).

    :param int num_nodes: ``p``.
    :param edge_beliefs: optional ``[p, p]`` beliefs ``P(i -> j)`` in ``(0, 1)``.
    :param float expected_parents: expected number of parents per node, or ``None``.
    :returns: ``(alpha, beta)``, each ``[p, p]`` with a diagonal of ones.
    """
    p = num_nodes
    dtype = dtype or torch.get_default_dtype()
    edge_prob = None
    if expected_parents is not None:
        if not isinstance(expected_parents, numbers.Real) or expected_parents <= 0:
            raise ValueError(f"expected_parents must be a positive number or None; got {expected_parents!r}")
        edge_prob = min(0.5, expected_parents / (p - 1))
    if edge_beliefs is None:
        if edge_prob is None:
            beliefs = torch.full((p, p), 0.5, dtype=dtype, device=device)
            return edge_belief_prior(beliefs, strength=belief_strength)
        if edge_prob == 0.5:
            return edge_belief_prior(torch.full((p, p), 0.5, dtype=dtype, device=device), strength=belief_strength)
        return sparsity_prior(p, edge_prob, prior_concentration, dtype=dtype, device=device)
    beliefs = torch.as_tensor(np.asarray(edge_beliefs, dtype=float) if not torch.is_tensor(edge_beliefs) else edge_beliefs)
    beliefs = beliefs.to(dtype=dtype, device=device)
    if tuple(beliefs.shape) != (p, p):
        raise ValueError(f"edge_beliefs must be [p, p] = [{p}, {p}] (beliefs[i, j] = belief in i -> j); got {tuple(beliefs.shape)}")
    off = ~torch.eye(p, dtype=torch.bool, device=beliefs.device)
    bad = (off & ~((beliefs > 0) & (beliefs < 1))).nonzero().tolist()
    if bad:  # a Beta whose mode is 0 or 1 does not exist: say which entries, in the caller's words
        i, j = bad[0]
        raise ValueError(f"edge_beliefs[{i}, {j}] = {beliefs[i, j].item():.4g}" + (f" (and {len(bad) - 1} more)" if
                         len(bad) > 1 else "") + ": off-diagonal beliefs must lie strictly inside (0, 1) (0.5 = no "
                         "opinion; a certainty of 0 or 1 is not a Beta prior): clip them, e.g. np.clip(edge_beliefs, "
                         "0.01, 0.99) (0.99 is already a strong belief), or condition the posterior's queries on the "
                         "edge with given={(i, j): True}")
    alpha, beta = edge_belief_prior(beliefs, strength=belief_strength)
    if edge_prob is not None and edge_prob != 0.5:
        # "no opinion" entries get the graph-agnostic sparsity prior
        sa, sb = sparsity_prior(p, edge_prob, prior_concentration, dtype=dtype, device=device)
        none = (beliefs == 0.5) & ~torch.eye(p, dtype=torch.bool, device=device)
        alpha = torch.where(none, sa, alpha)
        beta = torch.where(none, sb, beta)
    return alpha, beta
