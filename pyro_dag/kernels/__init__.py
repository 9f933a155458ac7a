"""Batched kernels for DAG-DGPs: base kernels and node-wise fusion rules.

Fusion rules follow Perlino et al. 2026, "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, Sec. 2, Eq. (3).

Inputs have shape ``[..., N, D]`` with sample dimensions in front. Fusion rules are bound to a node's
parents by :class:`pyro_dag.DAGDGP`; a plain base kernel given for a node acts on the concatenated
parent state (:class:`Concat`).
"""
from .base import Kernel, ParentSpec, Prod, Sum
from .fusion import (ANOVA, Additive, Concat, FusionKernel, InputConnected, Product, SubsetAdditive, SumInput,
                     as_fusion_kernel)
from .multifidelity import AR1, NARGP, MultiFidelity
from .stationary import RBF, Constant, Linear, Matern12, Matern32, Matern52, RationalQuadratic, Stationary, White

__all__ = [
    "Kernel", "ParentSpec", "Stationary", "RBF", "Matern12", "Matern32", "Matern52", "RationalQuadratic", "Linear",
    "White", "Constant", "Sum", "Prod", "FusionKernel", "Concat", "Additive", "Product", "ANOVA", "SubsetAdditive",
    "InputConnected", "SumInput", "MultiFidelity", "NARGP", "AR1", "as_fusion_kernel",
]
