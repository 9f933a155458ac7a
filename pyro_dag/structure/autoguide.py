"""The :class:`AutoEdgeFlowGuide`: a Pyro autoguide for structure models with potentials, edge logits and a DAG.

``q(r) q_phi(gamma | r) q(A | r, gamma) q(theta | A)`` with the edge flow of :mod:`pyro_dag.structure.flows`,
the straight-through :class:`~pyro_dag.structure.RelaxedOrderedDAG` and an optional
:class:`~pyro_dag.structure.Mechanism` whose ``guide(A)`` covers the SEM parameters (Zinage 2026, *SVI-DAG: A
Structured Variational Inference Approach to Bayesian Causal Discovery*, arXiv:2608.04930, §3.5, Derivation A.3).
"""
import numbers

import pyro
import pyro.distributions as dist
import torch
import torch.nn as nn
import torch.nn.functional as F
from pyro import poutine
from pyro.infer.autoguide import AutoGuide
from pyro.nn import PyroParam
from torch.distributions import constraints

from .adjacency import fill_offdiag, offdiag
from .flows import edge_flow
from .mechanisms import Mechanism
from .ordered_dag import OrderedDAG, RelaxedOrderedDAG
from .sinkhorn import soft_order_mask

__all__ = ["AutoEdgeFlowGuide", "EdgeOffsetNet"]


class EdgeOffsetNet(nn.Module):
    r"""Order-conditioned logit offset ``delta(r)`` of the guide's edge conditional ``q(B | gamma, r)``.

    SVI-DAG's guide reuses the model's conditional, ``q(B_ij | gamma_ij) = Bernoulli(sigmoid(gamma_ij))``, so that
    ``log p(B | gamma) - log q(B | gamma)`` cancels (SVI-DAG §3.5, Derivation A.3). In that family the optimum of
    ``q(gamma_ij)`` is ``∝ p(gamma_ij) exp(sigmoid(gamma_ij) Delta_ij)`` (``Delta_ij`` the log-likelihood gain of the
    edge), whose mean ``sigmoid(gamma)`` -- the reported edge probability -- saturates at about
    ``Delta / (Delta + beta)`` for a strong edge and stays near the prior for a useless one, while the exact
    ``P(B_ij = 1 | D)`` is ``~1`` and ``~0``. With ``q(B_ij | gamma_ij, r) = Bernoulli(sigmoid(gamma_ij + delta_ij(r)))``
    the guide can represent the exact conditional; the ELBO then contains the Bernoulli KL
    ``KL(q(B | gamma, r) || p(B | gamma))`` (analytic, registered for :class:`RelaxedOrderedDAG` vs
    :class:`OrderedDAG`).

    ``delta = MLP(offdiag(M_tau(r)))`` (ReLU, zero-initialised output: ``delta = 0`` at the start, the paper's guide).

    :param int num_nodes: ``p``; :param tuple hidden: widths.
    """

    def __init__(self, num_nodes, hidden=(64,)):
        super().__init__()
        d = num_nodes * (num_nodes - 1)
        dims = [d] + list(hidden) + [d]
        layers = []
        for a, b in zip(dims[:-1], dims[1:]):
            layers.append(nn.Linear(a, b))
        self.layers = nn.ModuleList(layers)
        with torch.no_grad():
            self.layers[-1].weight.zero_()
            self.layers[-1].bias.zero_()

    def forward(self, mask_offdiag):
        h = mask_offdiag
        for layer in self.layers[:-1]:
            h = F.relu(layer(h))
        return self.layers[-1](h)


class _FisherScaledOffset(torch.autograd.Function):
    """Identity on the offset ``delta``; its backward divides the incoming gradient by the Bernoulli Fisher
    information ``sigmoid'(logits)`` of the edge it shifts, clipped at ``max_scale`` (see
    :class:`AutoEdgeFlowGuide` ``offset_gradient_cap``)."""

    @staticmethod
    def forward(ctx, delta, logits, max_scale):
        ctx.save_for_backward(logits)
        ctx.max_scale = max_scale
        return delta.clone()

    @staticmethod
    def backward(ctx, grad):
        (logits,) = ctx.saved_tensors
        s = torch.sigmoid(logits)
        return grad / (s * (1 - s)).clamp(min=1.0 / ctx.max_scale), None, None


def _unwrap(fn):
    while isinstance(fn, (dist.Independent, torch.distributions.Independent)) or type(fn).__name__ == "MaskedDistribution":
        fn = fn.base_dist
    return fn


class AutoEdgeFlowGuide(AutoGuide):
    r"""Structured guide ``q(r) q_phi(gamma | r) q(A | r, gamma) q(theta | A)`` for DAG structure models (SVI-DAG §3.5).

    The model must contain three sample sites (names configurable):

    * ``r`` ``[p]``: node potentials (e.g. ``Normal(0, 1).to_event(1)``);
    * ``gamma`` ``[p (p - 1)]``: flat off-diagonal edge logits (e.g. :class:`LogisticBeta`; see
      :func:`~pyro_dag.structure.fill_offdiag`);
    * ``A`` ``[p, p]``: ``OrderedDAG(r, fill_offdiag(gamma, p))``;

    and any other latent sites must be covered by ``mechanism.guide(A)`` (e.g. the SEM parameters of a
    :class:`~pyro_dag.structure.Mechanism`), or by another guide in an ``AutoGuideList``.

    The guide samples ``r`` from a learnable diagonal Normal (used as is under plain ``SVI``; under
    :class:`~pyro_dag.structure.OrderSVGD` that site is replaced by the SVGD particles), ``gamma`` from the
    conditional spline-coupling flow :func:`edge_flow` given the centred potentials ``r - mean(r)``,
    ``A`` from :class:`RelaxedOrderedDAG` (straight-through, shares the model's Bernoulli conditional so that
    ``log p(A | r, gamma) - log q(A | r, gamma) = 0``, A.3), and ``theta`` from the mechanism's hypernetwork guide.
    It is fully vectorised over leading batch (particle) dimensions.

    :param callable model: the Pyro model.
    :param Mechanism mechanism: optional mechanism whose ``guide(A)`` covers the remaining latent sites.
    :param str potential_site, edge_site, adjacency_site: site names.
    :param tuple hidden_dims: flow conditioner widths (paper: (64, 64); (5, 5) for 2 nodes).
    :param int num_blocks: coupling blocks (paper: 5).
    :param int count_bins: spline bins (paper: 8).
    :param float bound: spline domain (paper: 5).
    :param float temperature: Concrete temperature of the edges (paper: 0.3).
    :param float order_temperature: Sinkhorn temperature ``tau``; an attribute, anneal it during training.
    :param int sinkhorn_iters: ``K_S`` (paper: 100).
    :param bool scale_normalize: RMS-normalise potentials in the Sinkhorn relaxation.
    :param str edge_relaxation: backward path of the edges, ``"concrete"`` (paper) or ``"mean"``
        (see :class:`RelaxedOrderedDAG`).
    :param bool edge_offset: use ``q(B | gamma, r) = Bernoulli(sigmoid(gamma + delta(r)))`` with an
        :class:`EdgeOffsetNet` (default) instead of the paper's ``q(B | gamma) = p(B | gamma)``; see there.
    :param tuple offset_hidden: widths of the offset network.
    :param float offset_gradient_cap: the gradient reaching each edge's offset ``delta_ij`` is divided by the
        Bernoulli Fisher information ``sigmoid'(gamma_ij + delta_ij)`` (per-edge natural-gradient scaling), by at most
        this factor; ``1`` gives the plain gradient. The ELBO is unchanged; only the update direction of the
        offset network is (a preconditioned direction, since the network is shared between edges). Why: the plain
        gradient of a Bernoulli logit shrinks as ``sigmoid'``, so an edge whose logit ran to an extreme early in
        training (when the particles' orders were still poor) stays there.
    :param float init_scale: initial scale of ``q(r)`` (its location starts at a ``N(0, 1)`` draw).

    Example::

        guide = AutoEdgeFlowGuide(model, mechanism=sem)
        svgd = OrderSVGD(model, guide, pyro.optim.Adam({"lr": 3e-3}), num_particles=20, max_plate_nesting=1)
    """

    def __init__(
        self,
        model,
        mechanism=None,
        *,
        potential_site="r",
        edge_site="gamma",
        adjacency_site="A",
        hidden_dims=(64, 64),
        num_blocks=5,
        count_bins=8,
        bound=5.0,
        temperature=0.3,
        order_temperature=0.1,
        sinkhorn_iters=100,
        scale_normalize=True,
        edge_relaxation="concrete",
        edge_offset=True,
        offset_hidden=(64,),
        offset_gradient_cap=1000.0,
        init_scale=1.0,
    ):
        if mechanism is not None and not isinstance(mechanism, Mechanism):
            raise TypeError(f"mechanism must be a pyro_dag.structure.Mechanism; got {type(mechanism).__name__}")
        super().__init__(model)
        self.mechanism = mechanism
        self.potential_site, self.edge_site, self.adjacency_site = potential_site, edge_site, adjacency_site
        self.hidden_dims = tuple(hidden_dims)
        self.num_blocks, self.count_bins, self.bound = num_blocks, count_bins, bound
        self.temperature = temperature
        self.order_temperature = order_temperature
        self.sinkhorn_iters = sinkhorn_iters
        self.scale_normalize = scale_normalize
        self.edge_relaxation = edge_relaxation
        self.edge_offset = bool(edge_offset)
        self.offset_hidden = tuple(offset_hidden)
        if not (isinstance(offset_gradient_cap, numbers.Real) and offset_gradient_cap >= 1):
            raise ValueError(f"offset_gradient_cap must be a number >= 1 (1: plain gradient); got {offset_gradient_cap!r}")
        self.offset_gradient_cap = float(offset_gradient_cap)
        if not init_scale > 0:
            raise ValueError(f"init_scale must be positive; got {init_scale!r}")
        self.init_scale = float(init_scale)

    def _setup_prototype(self, *args, **kwargs):
        super()._setup_prototype(*args, **kwargs)
        nodes = self.prototype_trace.nodes
        names = (self.potential_site, self.edge_site, self.adjacency_site)
        for name in names:
            if name not in nodes:
                latent = [n for n, s in self.prototype_trace.iter_stochastic_nodes()]
                raise ValueError(
                    f"AutoEdgeFlowGuide: the model has no latent sample site '{name}' (latent sites: {latent}). "
                    "Pass potential_site=, edge_site=, adjacency_site= with your site names."
                )
        r = nodes[self.potential_site]["value"]
        gamma = nodes[self.edge_site]["value"]
        A = nodes[self.adjacency_site]["value"]
        if r.dim() != 1:
            raise ValueError(f"site '{self.potential_site}' must be a vector [p] outside plates; got {tuple(r.shape)}")
        p = r.shape[-1]
        if tuple(gamma.shape) != (p * (p - 1),):
            raise ValueError(
                f"site '{self.edge_site}' must be the flat off-diagonal logit vector [p (p - 1)] = [{p * (p - 1)}]; "
                f"got {tuple(gamma.shape)}. Use fill_offdiag(gamma, p) to build the [p, p] logit matrix in the model."
            )
        if tuple(A.shape) != (p, p):
            raise ValueError(f"site '{self.adjacency_site}' must be [p, p] = [{p}, {p}]; got {tuple(A.shape)}")
        covered = set(names) | set(self.mechanism.latent_sites if self.mechanism is not None else [])
        other = [n for n, _ in self.prototype_trace.iter_stochastic_nodes() if n not in covered]
        if other:
            raise ValueError(
                f"AutoEdgeFlowGuide covers {sorted(covered)} but the model has other latent sites {other}. Pass the "
                "Mechanism that declares them (mechanism=...), or build AutoGuideList(model) with this guide on "
                f"poutine.block(model, expose={list(names)}) plus another guide for the rest."
            )
        if self.mechanism is not None:
            missing = [n for n in self.mechanism.latent_sites if n not in nodes]
            if missing:
                raise ValueError(f"mechanism sites {missing} are not in the model; was the mechanism called in it?")
        self.num_nodes = p
        dtype, device = r.dtype, r.device
        # initial flow output scale: the prior's spread when it is available (e.g. a LogisticBeta)
        prior = _unwrap(nodes[self.edge_site]["fn"])
        try:
            loc = prior.mean.detach().expand(gamma.shape).to(dtype).clone()
            scale = prior.variance.detach().sqrt().expand(gamma.shape).to(dtype).clone()
            if not (torch.isfinite(loc).all() and torch.isfinite(scale).all() and (scale > 0).all()):
                raise ValueError
        except Exception:
            loc, scale = torch.zeros_like(gamma), torch.ones_like(gamma)
        self.flow = edge_flow(
            p * (p - 1), p, self.num_blocks, self.hidden_dims, self.count_bins, self.bound, loc, scale
        ).to(dtype=dtype, device=device)
        if self.edge_offset:
            self.offset_net = EdgeOffsetNet(p, self.offset_hidden).to(dtype=dtype, device=device)
        self.potential_loc = nn.Parameter(torch.randn(p, dtype=dtype, device=device))
        self.potential_scale = PyroParam(
            torch.full((p,), self.init_scale, dtype=dtype, device=device), constraint=constraints.positive
        )

    def edge_distribution(self, potentials):
        """``q_phi(gamma | r)``: the flow distribution ``[..., p (p - 1)]`` given potentials ``[..., p]``."""
        p = self.num_nodes
        d = p * (p - 1)
        base = dist.Normal(potentials.new_zeros(potentials.shape[:-1] + (d,)), 1.0).to_event(1)
        rc = potentials - potentials.mean(-1, keepdim=True)
        aff = self.flow.affine
        aff.temperature, aff.sinkhorn_iters, aff.scale_normalize = (
            self.order_temperature, self.sinkhorn_iters, self.scale_normalize)
        return dist.ConditionalTransformedDistribution(base, self.flow.transforms()).condition(rc)

    def guide_edge_logits(self, potentials, gamma):
        """Logits of ``q(B | gamma, r)``: ``gamma + delta(r)`` with :class:`EdgeOffsetNet` (or ``gamma``)."""
        if not self.edge_offset:
            return gamma
        m = offdiag(soft_order_mask(potentials, self.order_temperature, self.sinkhorn_iters, self.scale_normalize))
        delta = self.offset_net(m)
        if self.offset_gradient_cap > 1:
            delta = _FisherScaledOffset.apply(delta, (gamma + delta).detach(), self.offset_gradient_cap)
        return gamma + delta

    def dag_distribution(self, potentials, edge_logits_flat):
        """``q(A | r, gamma)``: the straight-through :class:`RelaxedOrderedDAG` with the guide's temperatures."""
        return RelaxedOrderedDAG(
            potentials,
            fill_offdiag(edge_logits_flat, self.num_nodes),
            temperature=self.temperature,
            order_temperature=self.order_temperature,
            sinkhorn_iters=self.sinkhorn_iters,
            scale_normalize=self.scale_normalize,
            edge_relaxation=self.edge_relaxation,
        )

    def forward(self, *args, **kwargs):
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        r = pyro.sample(self.potential_site, dist.Normal(self.potential_loc, self.potential_scale).to_event(1))
        gamma = pyro.sample(self.edge_site, self.edge_distribution(r))
        A = pyro.sample(self.adjacency_site, self.dag_distribution(r, self.guide_edge_logits(r, gamma)))
        out = {self.potential_site: r, self.edge_site: gamma, self.adjacency_site: A}
        if self.mechanism is not None:
            # A tempered model (fit's warm-up) scales the mechanism's whole contribution, parameter prior included;
            # the parameter guide gets the same scale so that the analytic KL(q(theta) || p(theta)) is tempered
            # with the likelihood. Otherwise the unscaled KL dominates early, q(theta | A) collapses to the prior,
            # random-weight MLPs make every edge look harmful and the posterior sticks at the empty graph.
            with poutine.scale(scale=getattr(self.model, "likelihood_scale", 1.0)):
                params = self.mechanism.guide(A)
            prefix = self.mechanism.site_prefix
            out.update({f"{prefix}.{k}": v for k, v in params.items()})
        return out

    @torch.no_grad()
    def sample_dags(self, potentials, num_samples=1):
        """Hard DAG samples given potentials ``[K, p]``: ``[num_samples, K, p, p]`` (SVI-DAG §4.1)."""
        gamma = self.edge_distribution(potentials).sample((num_samples,))
        logits = self.guide_edge_logits(potentials, gamma)
        return OrderedDAG(potentials, fill_offdiag(logits, self.num_nodes)).sample()

    @torch.no_grad()
    def edge_probs(self, potentials, num_samples=1):
        """Rao-Blackwellised ``E[sigmoid(gamma) * M(r)]`` per potential vector: ``[K, p, p]``."""
        gamma = self.edge_distribution(potentials).sample((num_samples,))
        return self.dag_distribution(potentials, self.guide_edge_logits(potentials, gamma)).edge_probs.mean(0)
