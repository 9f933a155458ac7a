"""Numerical building blocks: block-sparse Cholesky algebra on chordal patterns (:mod:`pyro_dag.ops.chordal`)."""
from .chordal import ChordalFactor, SparseConditioningState, SparseSquareRootConditioningState

__all__ = ["ChordalFactor", "SparseConditioningState", "SparseSquareRootConditioningState"]
