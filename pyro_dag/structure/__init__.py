"""Bayesian DAG structure learning as Pyro primitives (digest-001: SVI-DAG; digest-004 §5: evaluation).

Convention: ``A[i, j] = 1`` means the edge ``i -> j``; potentials: higher = upstream.

* distributions: :class:`LogisticBeta`, :func:`edge_belief_prior`, :func:`sparsity_prior`, :class:`OrderedDAG`,
  :class:`RelaxedOrderedDAG`, :func:`hard_order_mask`, :func:`soft_order_mask`, :func:`log_sinkhorn`,
  :func:`offdiag`, :func:`fill_offdiag`, :func:`is_acyclic`, the :data:`dag` constraint;
* mechanisms (SEM likelihoods): :class:`Mechanism`, :class:`LinearGaussianSEM`, :class:`MLPSEM`,
  :class:`NodeHyperNet`;
* guides: :class:`AutoEdgeFlowGuide`, :class:`ConditionalSplineCoupling`, :func:`edge_flow`;
* inference: :class:`~pyro_dag.infer.svgd.OrderSVGD`, :class:`~pyro_dag.infer.svgd.OrderMaskKernel`;
* one call: :func:`fit` -> :class:`StructurePosterior`; :func:`structure_model`;
* exact reference for small graphs (collapsed likelihoods): :func:`exact_posterior` -> :class:`ExactStructurePosterior`.
"""
from .distributions import (
    LogisticBeta,
    OrderedDAG,
    RelaxedOrderedDAG,
    dag,
    edge_belief_prior,
    fill_offdiag,
    hard_order_mask,
    is_acyclic,
    log_sinkhorn,
    offdiag,
    soft_order_mask,
    sparsity_prior,
)
from .models import BGeSEM, LinearGaussianSEM, Mechanism, MLPSEM, NodeHyperNet
from .guides import AutoEdgeFlowGuide, ConditionalSplineCoupling, edge_flow
from .exact import ExactStructurePosterior, exact_posterior, local_scores
from pyro_dag.infer.svgd import OrderMaskKernel, OrderSVGD  # noqa: E402  (after the modules it imports lazily)
from .fitting import StructureModel, StructurePosterior, fit, structure_model

__all__ = [
    "AutoEdgeFlowGuide",
    "BGeSEM",
    "ConditionalSplineCoupling",
    "ExactStructurePosterior",
    "LinearGaussianSEM",
    "LogisticBeta",
    "MLPSEM",
    "Mechanism",
    "NodeHyperNet",
    "OrderMaskKernel",
    "OrderSVGD",
    "OrderedDAG",
    "RelaxedOrderedDAG",
    "StructureModel",
    "StructurePosterior",
    "dag",
    "edge_belief_prior",
    "edge_flow",
    "exact_posterior",
    "fill_offdiag",
    "fit",
    "hard_order_mask",
    "is_acyclic",
    "local_scores",
    "log_sinkhorn",
    "offdiag",
    "soft_order_mask",
    "sparsity_prior",
    "structure_model",
]
