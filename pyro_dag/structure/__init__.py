"""Bayesian DAG structure learning as Pyro primitives.

SVI-DAG (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to Bayesian Causal Discovery*,
arXiv:2608.04930) with exact references for small graphs (order dynamic programming, Koivisto & Sood 2004) and
the evaluation of Wang, Wicker & Kwiatkowska 2022 (*Tractable Uncertainty for Structure Learning*, ICML).

Convention: ``A[i, j] = 1`` means the edge ``i -> j``; potentials: higher = upstream. One idea per module:

* edge priors (:mod:`.priors`): :class:`LogisticBeta`, :func:`edge_belief_prior`, :func:`sparsity_prior`,
  :func:`edge_prior_parameters`;
* order masks and their Sinkhorn relaxation (:mod:`.sinkhorn`): :func:`hard_order_mask`, :func:`log_sinkhorn`,
  :func:`soft_order_mask`, :func:`soft_order_mask_jacobian`;
* DAG distributions (:mod:`.ordered_dag`): :class:`OrderedDAG`, :class:`RelaxedOrderedDAG`; the :data:`dag`
  constraint (:mod:`.constraints`); :func:`offdiag`, :func:`fill_offdiag` (:mod:`.adjacency`);
  acyclicity: :func:`is_acyclic` (:mod:`pyro_dag.graph`);
* mechanisms (SEM likelihoods, :mod:`.mechanisms`, one per module): :class:`Mechanism`,
  :class:`LinearGaussianSEM`, :class:`BGeSEM`, :class:`MLPSEM`, :class:`NodeHyperNet`;
* flow transforms (:mod:`.flows`): :class:`ConditionalSplineCoupling`, :class:`OrderMaskAffine`,
  :class:`EdgeFlow`, :func:`edge_flow`; the autoguide (:mod:`.autoguide`): :class:`AutoEdgeFlowGuide`,
  :class:`EdgeOffsetNet`;
* inference (:mod:`.svgd`): :class:`OrderSVGD`, :class:`OrderMaskKernel`;
* the model (:mod:`.model`): :class:`StructureModel`, :func:`structure_model`;
* one call (:mod:`.fitting`): :func:`fit` with a :class:`FitConfig` (:mod:`.config`) -> :class:`StructurePosterior`
  (:mod:`.variational`);
* exact reference (:mod:`.exact`, :mod:`.order_scorer`, :mod:`.scores`): :func:`exact_posterior` with a
  :class:`StructureConfig` -> :class:`ExactStructurePosterior` (also on the GP network score of :mod:`.gp_scores`,
  :class:`GPFamilyScorer`, ``likelihood="gp"``, and its model-averaged interventional predictions
  :func:`gp_interventional_effect`); :class:`OrderScorer`, :func:`local_scores`; the
  subset algebra and the dynamic programme over subsets they share (:mod:`.subsets`); the graph priors
  (:mod:`.graph_priors`);
* the query interface every posterior shares (:mod:`.posterior`): :class:`DAGPosterior`, with edge evidence
  ``{(i, j): present}`` (:mod:`.evidence`) for conditional queries; the most probable DAG among Markov-equivalent
  ones and ties (:mod:`.map_dag`: :func:`equivalent_dags`, :class:`MAPTieWarning`);
* the order circuit of Wang, Wicker & Kwiatkowska 2022 (:mod:`.order_circuit`): :class:`OrderSPN`, exact
  conditional, MAP, sampling and causal-effect queries, built by :func:`order_spn` (:mod:`.order_circuit_builder`);
  linear causal effects (:mod:`.causal`): :func:`bge_mean_weights`, :func:`total_effects`; candidate parent sets
  for circuits beyond ``p = 20``: :func:`candidate_tables` -> :class:`CandidateTables` (:mod:`.parent_set_tables`),
  :func:`select_candidates` (:mod:`.candidate_selection`), :func:`order_mcmc` (:mod:`.order_sampler`);
* tens of variables (:mod:`.hybrid`, the hybrid scheme of Kuipers, Suter & Moffa 2022): :func:`hybrid_posterior`
  -> :class:`OrderMCMCPosterior` (or the exact posterior of its candidate tables), on a PC skeleton and Markov
  blanket (:mod:`.skeleton`: :func:`pc_skeleton`, :func:`markov_blanket_graph`, :func:`skeleton_candidates`);
  published structures and linear-Gaussian data on them (:mod:`.networks`: :func:`network`,
  :func:`linear_gaussian_data`);
* interventional data (:mod:`.interventions`, Cooper & Yoo 1999; Eaton & Murphy 2007): ``interventions=`` on
  :func:`exact_posterior`, :func:`hybrid_posterior`, :func:`candidate_tables` and :func:`fit`; which experiment
  next (:mod:`.design`): :func:`next_experiment` -> :class:`ExperimentValue`.
"""
from pyro_dag.graph import is_acyclic

from .adjacency import fill_offdiag, offdiag
from .autoguide import AutoEdgeFlowGuide, EdgeOffsetNet
from .candidate_selection import select_candidates
from .causal import bge_mean_weights, total_effects
from .config import FitConfig, StructureConfig
from .constraints import dag
from .design import ExperimentValue, next_experiment
from .evidence import Evidence, parse_evidence
from .exact import ExactStructurePosterior, exact_posterior
from .fitting import fit
from .gp_effects import gp_interventional_effect
from .gp_scores import GPFamilyScorer
from .hybrid import OrderMCMCPosterior, hybrid_posterior, order_relocation_mcmc
from .map_dag import MAPTieWarning, equivalent_dags
from .flows import ConditionalSplineCoupling, EdgeFlow, OrderMaskAffine, edge_flow
from .mechanisms import BGeSEM, LinearGaussianSEM, Mechanism, MLPSEM, NodeHyperNet
from .model import StructureModel, structure_model
from .networks import linear_gaussian_data, network
from .order_circuit import OrderSPN
from .order_circuit_builder import order_spn
from .order_sampler import order_mcmc
from .order_scorer import OrderScorer
from .ordered_dag import OrderedDAG, RelaxedOrderedDAG
from .parent_set_tables import CandidateTables, candidate_tables
from .posterior import DAGPosterior
from .priors import LogisticBeta, edge_belief_prior, edge_prior_parameters, sparsity_prior
from .scores import local_scores
from .skeleton import Skeleton, markov_blanket_graph, pc_skeleton, skeleton_candidates
from .sinkhorn import hard_order_mask, log_sinkhorn, soft_order_mask, soft_order_mask_jacobian
from .svgd import OrderMaskKernel, OrderSVGD
from .variational import StructurePosterior

__all__ = [
    "AutoEdgeFlowGuide",
    "BGeSEM",
    "CandidateTables",
    "ConditionalSplineCoupling",
    "DAGPosterior",
    "EdgeFlow",
    "EdgeOffsetNet",
    "Evidence",
    "ExactStructurePosterior",
    "ExperimentValue",
    "FitConfig",
    "GPFamilyScorer",
    "gp_interventional_effect",
    "LinearGaussianSEM",
    "LogisticBeta",
    "MAPTieWarning",
    "MLPSEM",
    "Mechanism",
    "NodeHyperNet",
    "OrderMCMCPosterior",
    "OrderMaskAffine",
    "OrderMaskKernel",
    "OrderSVGD",
    "OrderSPN",
    "OrderScorer",
    "OrderedDAG",
    "RelaxedOrderedDAG",
    "Skeleton",
    "StructureConfig",
    "StructureModel",
    "StructurePosterior",
    "bge_mean_weights",
    "candidate_tables",
    "dag",
    "edge_belief_prior",
    "edge_flow",
    "edge_prior_parameters",
    "equivalent_dags",
    "exact_posterior",
    "fill_offdiag",
    "fit",
    "hard_order_mask",
    "hybrid_posterior",
    "is_acyclic",
    "linear_gaussian_data",
    "local_scores",
    "log_sinkhorn",
    "markov_blanket_graph",
    "network",
    "next_experiment",
    "offdiag",
    "order_mcmc",
    "order_relocation_mcmc",
    "order_spn",
    "parse_evidence",
    "pc_skeleton",
    "select_candidates",
    "skeleton_candidates",
    "soft_order_mask",
    "soft_order_mask_jacobian",
    "sparsity_prior",
    "structure_model",
    "total_effects",
]
