"""The SVI-DAG generative model as a Pyro model callable: potentials, edge logits, the DAG and a mechanism."""
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine

from .adjacency import fill_offdiag, offdiag
from .mechanisms import Mechanism
from .ordered_dag import OrderedDAG, RelaxedOrderedDAG
from .priors import LogisticBeta

__all__ = ["StructureModel", "structure_model"]


class StructureModel:
    r"""The SVI-DAG generative model as a Pyro model callable ``model(X)`` (Zinage 2026, arXiv:2608.04930, §3.2,
    Derivation A.2).

    .. math::
        r \sim N(0, \sigma_r^2 I), \quad \gamma_{ij} \sim \mathrm{LogisticBeta}(\alpha_{ij}, \beta_{ij}), \quad
        A \sim \mathrm{OrderedDAG}(r, \gamma), \quad X \sim p(X \mid A, \theta)\, p(\theta)

    Sites: ``"r"`` ``[p]``, ``"gamma"`` ``[p (p - 1)]`` (flat off-diagonal), ``"A"`` ``[p, p]`` and the mechanism's.

    :param Mechanism mechanism: the SEM likelihood.
    :param alpha, beta: ``[p, p]`` Beta parameters of the edge prior (:func:`edge_belief_prior`,
        :func:`sparsity_prior`).
    :param float potential_scale: ``sigma_r`` (paper: 1).
    :param float likelihood_scale: multiplies the mechanism's log-densities (1: the posterior; ``fit`` ramps it
        up from ``1 / N`` during a warm-up).

    Attribute ``soft_mix`` (default 0, the model proper): during ``fit``'s soft warm-up the mechanism sees
    ``A + soft_mix * (sigmoid(gamma) * M_tau(r) - A)`` (Sinkhorn temperature ``order_temperature``, ``sinkhorn_iters``
    sweeps) while the ``"A"`` site keeps the hard DAG (the soft-to-hard warm-up
    of SVI-DAG's official code).
    """

    def __init__(self, mechanism, alpha, beta, potential_scale=1.0, likelihood_scale=1.0):
        if not isinstance(mechanism, Mechanism):
            raise TypeError(f"mechanism must be a pyro_dag.structure.Mechanism; got {type(mechanism).__name__}")
        p = mechanism.num_nodes
        if tuple(alpha.shape) != (p, p) or tuple(beta.shape) != (p, p):
            raise ValueError(f"alpha and beta must be [{p}, {p}]; got {tuple(alpha.shape)} and {tuple(beta.shape)}")
        self.mechanism = mechanism
        self.num_nodes = p
        self.alpha_offdiag = offdiag(alpha)
        self.beta_offdiag = offdiag(beta)
        self.potential_scale = float(potential_scale)
        self.likelihood_scale = likelihood_scale
        # soft_mix in [0, 1]: weight of the relaxed adjacency in what the mechanism sees (fit's warm-up; 0: the
        # hard DAG, the model proper); order_temperature / sinkhorn_iters: its Sinkhorn relaxation
        self.soft_mix = 0.0
        self.order_temperature = 1.0
        self.sinkhorn_iters = 30

    def edge_prior(self, like):
        """The ``LogisticBeta(...).to_event(1)`` prior of the flat edge logits (dtype/device of ``like``)."""
        return LogisticBeta(self.alpha_offdiag.to(like), self.beta_offdiag.to(like)).to_event(1)

    def __call__(self, X):
        p = self.num_nodes
        r = pyro.sample("r", dist.Normal(X.new_zeros(p), self.potential_scale).to_event(1))
        gamma = pyro.sample("gamma", self.edge_prior(X))
        edge_logits = fill_offdiag(gamma, p)
        A = pyro.sample("A", OrderedDAG(r, edge_logits))
        A_mech = A
        if self.soft_mix > 0:
            # warm-up for mechanisms with parameters: the mechanism sees a blend of the hard
            # DAG and its relaxation sigmoid(gamma) * M_tau(r), so node networks learn to use inputs before the
            # edge decisions harden (with a hard DAG only, an untrained network makes every edge look harmful).
            relaxed = RelaxedOrderedDAG(
                r, edge_logits, order_temperature=self.order_temperature, sinkhorn_iters=self.sinkhorn_iters
            )
            soft = torch.sigmoid(edge_logits) * relaxed.soft_mask()
            A_mech = A + self.soft_mix * (soft - A)
        if self.likelihood_scale == 1.0:
            self.mechanism(X, A_mech)
        else:  # tempered mechanism (fit's warm-up): likelihood and parameter prior; the guide scales q(theta) too
            with poutine.scale(scale=self.likelihood_scale):
                self.mechanism(X, A_mech)
        return A


def structure_model(mechanism, alpha, beta, potential_scale=1.0):
    """Build a :class:`StructureModel` (see there); a function for symmetry with Pyro's model factories."""
    return StructureModel(mechanism, alpha, beta, potential_scale)
