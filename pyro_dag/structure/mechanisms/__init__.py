"""Structural-equation mechanisms ``p(X | A, theta) p(theta)`` with guides ``q(theta | A)``, one per module.

* :class:`Mechanism` (:mod:`.base`) -- the interface;
* :class:`LinearGaussianSEM` (:mod:`.linear`) -- ``x_j = sum_i A_ij W_ij x_i + eps_j``, with parameter sites or
  (``marginalize=True``) the conjugate Normal-Inverse-Gamma prior integrated out exactly;
* :class:`BGeSEM` (:mod:`.bge`) -- linear-Gaussian with the score-equivalent BGe marginal likelihood;
* :class:`MLPSEM` (:mod:`.mlp`) -- one tanh MLP per node (SVI-DAG's node model, Zinage 2026, *SVI-DAG: A Structured
  Variational Inference Approach to Bayesian Causal Discovery*, arXiv:2608.04930, §3.2.2);
* :class:`NodeHyperNet` (:mod:`.hypernet`) -- the per-node hypernetwork guide of the parameters (§3.7).
"""
from .base import Mechanism
from .bge import BGeSEM
from .hypernet import NodeHyperNet
from .linear import LinearGaussianSEM
from .mlp import MLPSEM

__all__ = ["BGeSEM", "LinearGaussianSEM", "MLPSEM", "Mechanism", "NodeHyperNet"]
