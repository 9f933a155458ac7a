"""Autoguides for DAG models (digest-000 §2.2): :class:`AutoStructuredGuide` and its posterior families."""
from .posteriors import Block, InducingPosterior, MeanFieldPosterior
from .structured import AutoStructuredGuide, InducingDistribution

__all__ = ["AutoStructuredGuide", "InducingDistribution", "Block", "InducingPosterior", "MeanFieldPosterior"]
