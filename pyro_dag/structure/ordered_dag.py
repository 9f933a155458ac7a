"""Distributions over DAGs given node potentials and edge logits.

* :class:`OrderedDAG` -- the exact law ``A = B * M(r)``, ``B_ij ~ Bernoulli(sigmoid(gamma_ij))``; every sample
  is a DAG (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to Bayesian Causal Discovery*,
  arXiv:2608.04930, §3.2.1, Thm. B.3);
* :class:`RelaxedOrderedDAG` -- Gumbel-sigmoid edges with the Sinkhorn order relaxation and the straight-through
  combination ``A_ST = A + (A~ - sg(A~))`` (§3.3, Eq. 1-2), with the same ``log_prob`` as :class:`OrderedDAG`;
* the analytic ``KL(RelaxedOrderedDAG || OrderedDAG)`` (and ``OrderedDAG || OrderedDAG``) for equal potentials.

Conventions: ``A[..., i, j] = 1`` means the edge ``i -> j`` (SVI-DAG's paper uses the transpose; everything here
is converted); potentials ``[..., p]``, higher = upstream; edge logits ``[..., p, p]`` (a flat site vector is
converted with :func:`~pyro_dag.structure.fill_offdiag`).
"""
import math
import numbers

import torch
import torch.nn.functional as F
from pyro.distributions import constraints
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import broadcast_shape

from .constraints import dag
from .sinkhorn import _check_potentials, hard_order_mask, soft_order_mask

__all__ = ["OrderedDAG", "RelaxedOrderedDAG"]


def _dag_batch(potentials, edge_logits):
    _check_potentials(potentials)
    if not torch.is_tensor(edge_logits) or edge_logits.dim() < 2:
        raise ValueError("edge_logits must be a tensor [..., p, p] (use fill_offdiag on a flat logit vector)")
    p = potentials.shape[-1]
    if edge_logits.shape[-2:] != (p, p):
        raise ValueError(
            f"edge_logits must be [..., {p}, {p}] to match {p} potentials; got {tuple(edge_logits.shape)}. "
            "A flat [..., p (p - 1)] logit vector is converted with fill_offdiag(gamma, p)."
        )
    return broadcast_shape(potentials.shape[:-1], edge_logits.shape[:-2]), p


def _ordered_dag_log_prob(potentials, edge_logits, value):
    p = value.shape[-1]
    eye = torch.eye(p, dtype=torch.bool, device=value.device)
    allowed = (potentials.unsqueeze(-1) > potentials.unsqueeze(-2)) & ~eye
    lp = value * F.logsigmoid(edge_logits) + (1 - value) * F.logsigmoid(-edge_logits)
    lp = torch.where(allowed, lp, torch.zeros_like(lp)).sum((-1, -2))
    violation = ((value > 0.5) & ~allowed).any(-1).any(-1)
    return torch.where(violation, torch.full_like(lp, -math.inf), lp)


class OrderedDAG(TorchDistribution):
    r"""Distribution over DAGs given node potentials and edge logits (SVI-DAG §3.2.1, Thm. B.3).

    .. math:: A = B \odot M(r), \qquad B_{ij} \sim \mathrm{Bernoulli}(\sigma(\gamma_{ij})), \quad i \ne j,

    with ``M(r)`` the :func:`hard_order_mask` (``i -> j`` allowed iff ``r_i > r_j``). Every sample is acyclic and
    every DAG is reachable (completeness, Thm B.3). ``log_prob`` is exact:
    ``sum_{allowed (i, j)} log Bernoulli(A_ij | sigmoid(gamma_ij))``, and ``-inf`` for an edge the order forbids.

    As a model site it pairs with :class:`RelaxedOrderedDAG` in the guide: both have the same ``log_prob`` of the
    (hard) sampled value, so ``log p(A | r, gamma) - log q(A | r, gamma)`` cancels exactly (the guide "shares the
    Bernoulli conditional", SVI-DAG §3.5, Derivation A.3).

    :param torch.Tensor potentials: ``[..., p]`` node potentials (higher = upstream).
    :param torch.Tensor edge_logits: ``[..., p, p]``, ``edge_logits[i, j]`` the logit of ``i -> j``; diagonal ignored.

    Example::

        r = pyro.sample("r", dist.Normal(torch.zeros(p), 1.0).to_event(1))
        gamma = pyro.sample("gamma", LogisticBeta(a, b).to_event(1))         # [p (p - 1)]
        A = pyro.sample("A", OrderedDAG(r, fill_offdiag(gamma, p)))            # [p, p], a DAG
    """

    arg_constraints = {"potentials": constraints.real_vector, "edge_logits": constraints.independent(constraints.real, 2)}
    support = dag
    has_rsample = False

    def __init__(self, potentials, edge_logits, validate_args=None):
        batch_shape, p = _dag_batch(potentials, edge_logits)
        self.potentials = potentials.expand(batch_shape + (p,))
        self.edge_logits = edge_logits.expand(batch_shape + (p, p))
        super().__init__(batch_shape, torch.Size((p, p)), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        new = self._get_checked_instance(OrderedDAG, _instance)
        batch_shape = torch.Size(batch_shape)
        p = self.event_shape[-1]
        new.potentials = self.potentials.expand(batch_shape + (p,))
        new.edge_logits = self.edge_logits.expand(batch_shape + (p, p))
        super(OrderedDAG, new).__init__(batch_shape, self.event_shape, validate_args=False)
        new._validate_args = self._validate_args
        return new

    @property
    def mask(self):
        """``[..., p, p]`` hard order mask with a zero diagonal: which edges the potentials allow."""
        return hard_order_mask(self.potentials)

    @property
    def edge_probs(self):
        """``[..., p, p]`` exact ``P(i -> j | r, gamma) = sigmoid(gamma_ij) M_ij(r)``."""
        return torch.sigmoid(self.edge_logits) * self.mask

    @property
    def mean(self):
        return self.edge_probs

    def sample(self, sample_shape=torch.Size()):
        shape = self._extended_shape(sample_shape)
        with torch.no_grad():
            probs = self.edge_probs.expand(shape)
            return torch.bernoulli(probs)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return _ordered_dag_log_prob(self.potentials, self.edge_logits, value)


class RelaxedOrderedDAG(TorchDistribution):
    r"""Relaxed / straight-through version of :class:`OrderedDAG` (SVI-DAG §3.3, Eq. 1-2).

    With logistic noise ``L_ij`` (shared by the hard and soft edges),

    .. math::
        B_{ij} = 1\{\gamma_{ij} + L_{ij} > 0\}, \quad \tilde B_{ij} = \sigma((\gamma_{ij} + L_{ij}) / T),

        A = B \odot M(r), \quad \tilde A = \tilde B \odot M_\tau(r) \odot (1 - I), \quad
        A_{ST} = A + (\tilde A - \mathrm{sg}(\tilde A)).

    ``rsample`` returns ``A_ST`` when ``straight_through`` (forward value: the hard DAG ``A``, exactly; backward:
    the gradient of the soft ``A~`` through the Gumbel-sigmoid edges and the Sinkhorn order relaxation, a biased
    surrogate gradient), otherwise the soft ``A~`` (generally cyclic). :meth:`rsample_with_parts` returns
    ``(A, A~)``.

    ``log_prob`` is the exact :class:`OrderedDAG` log-probability of the hard value (like Pyro's
    ``RelaxedBernoulliStraightThrough`` the density is that of the discrete variable), so a guide site of this
    type cancels an :class:`OrderedDAG` model site exactly. It is undefined for soft values.

    :param torch.Tensor potentials: ``[..., p]``.
    :param torch.Tensor edge_logits: ``[..., p, p]``.
    :param float temperature: Concrete temperature ``T`` of the edges (paper 0.3).
    :param float order_temperature: Sinkhorn temperature ``tau`` (paper: 0.1 final).
    :param int sinkhorn_iters: ``K_S`` (paper 100).
    :param bool scale_normalize: RMS-normalise potentials inside the Sinkhorn relaxation.
    :param bool straight_through: return ``A_ST`` (default) or the soft ``A~``.
    :param str edge_relaxation: ``"concrete"`` (the paper's Gumbel-sigmoid ``B~``, Eq. 1) or ``"mean"``
        (``B~ = sigmoid(gamma)``, the original straight-through estimator of Bengio et al. 2013: the backward pass
        uses the edge probability instead of a noisy Concrete sample; lower variance, same forward value).
    """

    arg_constraints = {"potentials": constraints.real_vector, "edge_logits": constraints.independent(constraints.real, 2)}
    has_rsample = True

    def __init__(
        self,
        potentials,
        edge_logits,
        temperature=0.3,
        order_temperature=0.1,
        sinkhorn_iters=100,
        scale_normalize=True,
        straight_through=True,
        edge_relaxation="concrete",
        validate_args=None,
    ):
        batch_shape, p = _dag_batch(potentials, edge_logits)
        if edge_relaxation not in ("concrete", "mean"):
            raise ValueError(f"edge_relaxation must be 'concrete' or 'mean'; got {edge_relaxation!r}")
        for name, v in (("temperature", temperature), ("order_temperature", order_temperature)):
            if not isinstance(v, numbers.Real) or v <= 0:
                raise ValueError(f"{name} must be a positive number; got {v!r}")
        if not isinstance(sinkhorn_iters, numbers.Integral) or sinkhorn_iters < 1:
            raise ValueError(f"sinkhorn_iters must be a positive integer; got {sinkhorn_iters!r}")
        self.potentials = potentials.expand(batch_shape + (p,))
        self.edge_logits = edge_logits.expand(batch_shape + (p, p))
        self.temperature = float(temperature)
        self.order_temperature = float(order_temperature)
        self.sinkhorn_iters = int(sinkhorn_iters)
        self.scale_normalize = bool(scale_normalize)
        self.straight_through = bool(straight_through)
        self.edge_relaxation = edge_relaxation
        super().__init__(batch_shape, torch.Size((p, p)), validate_args=validate_args)

    def _kwargs(self):
        return dict(
            temperature=self.temperature,
            order_temperature=self.order_temperature,
            sinkhorn_iters=self.sinkhorn_iters,
            scale_normalize=self.scale_normalize,
            straight_through=self.straight_through,
            edge_relaxation=self.edge_relaxation,
        )

    def expand(self, batch_shape, _instance=None):
        batch_shape = torch.Size(batch_shape)
        p = self.event_shape[-1]
        new = RelaxedOrderedDAG(
            self.potentials.expand(batch_shape + (p,)),
            self.edge_logits.expand(batch_shape + (p, p)),
            validate_args=False,
            **self._kwargs(),
        )
        new._validate_args = self._validate_args
        return new

    @constraints.dependent_property(is_discrete=False, event_dim=2)
    def support(self):
        return dag if self.straight_through else constraints.independent(constraints.unit_interval, 2)

    def soft_mask(self):
        """``[..., p, p]`` relaxed order mask ``M_tau(r) * (1 - I)``."""
        p = self.event_shape[-1]
        M = soft_order_mask(self.potentials, self.order_temperature, self.sinkhorn_iters, self.scale_normalize)
        return M * (1 - torch.eye(p, dtype=M.dtype, device=M.device))

    def rsample_with_parts(self, sample_shape=torch.Size()):
        """Return ``(A, A_soft)``: the hard DAG and the relaxed adjacency built from the same noise."""
        shape = self._extended_shape(sample_shape)
        gamma = self.edge_logits.expand(shape)
        eps = torch.finfo(gamma.dtype).eps
        u = torch.rand(shape, dtype=gamma.dtype, device=gamma.device).clamp(eps, 1 - eps)
        z = gamma + (u.log() - torch.log1p(-u))
        hard = (z > 0).to(gamma.dtype) * hard_order_mask(self.potentials)
        if self.edge_relaxation == "concrete":
            soft = torch.sigmoid(z / self.temperature) * self.soft_mask()
        else:
            soft = torch.sigmoid(gamma) * self.soft_mask()
        return hard, soft

    def rsample(self, sample_shape=torch.Size()):
        hard, soft = self.rsample_with_parts(sample_shape)
        if not self.straight_through:
            return soft
        return hard + (soft - soft.detach())

    def log_prob(self, value):
        if not self.straight_through:
            raise NotImplementedError(
                "RelaxedOrderedDAG(straight_through=False) has no tractable density (the Sinkhorn order relaxation "
                "has none); use straight_through=True for a guide site, whose log_prob is that of the hard DAG."
            )
        if self._validate_args:
            self._validate_sample(value)
        return _ordered_dag_log_prob(self.potentials, self.edge_logits, value)

    @property
    def edge_probs(self):
        """``[..., p, p]`` exact ``P(i -> j | r, gamma)`` of the hard DAG."""
        return torch.sigmoid(self.edge_logits) * hard_order_mask(self.potentials)


def _bernoulli_kl_on_allowed(q_potentials, q_logits, p_logits):
    p = q_logits.shape[-1]
    allowed = hard_order_mask(q_potentials) * (1 - torch.eye(p, dtype=q_logits.dtype, device=q_logits.device))
    q1 = torch.sigmoid(q_logits)
    kl = q1 * (F.logsigmoid(q_logits) - F.logsigmoid(p_logits)) + (1 - q1) * (
        F.logsigmoid(-q_logits) - F.logsigmoid(-p_logits)
    )
    return (kl * allowed).sum((-1, -2))


@torch.distributions.kl.register_kl(RelaxedOrderedDAG, OrderedDAG)
def _kl_relaxed_ordered(q, p):
    """``KL(q(A | r, gamma_q) || p(A | r, gamma_p))`` for the same potentials: a sum of Bernoulli KLs over the edges
    the order allows (zero when the logits agree, as in SVI-DAG's guide)."""
    return _bernoulli_kl_on_allowed(q.potentials, q.edge_logits, p.edge_logits)


@torch.distributions.kl.register_kl(OrderedDAG, OrderedDAG)
def _kl_ordered_ordered(q, p):
    return _bernoulli_kl_on_allowed(q.potentials, q.edge_logits, p.edge_logits)
