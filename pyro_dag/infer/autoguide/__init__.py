"""Autoguides for DAG models and any Pyro model: :class:`AutoStructuredGuide` and its posterior families."""
from .encoder import AutoEncodedStructuredGuide, AutoLatentEncoder
from .gaussians import Block, InducingPosterior, MeanFieldPosterior
from .structured import AutoStructuredGuide, InducingDistribution

__all__ = ["AutoStructuredGuide", "InducingDistribution", "Block", "InducingPosterior", "MeanFieldPosterior",
           "AutoLatentEncoder", "AutoEncodedStructuredGuide"]
