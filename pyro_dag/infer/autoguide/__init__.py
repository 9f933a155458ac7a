"""Autoguides for DAG models and any Pyro model: one family of structured Gaussian guides (a chordal precision) and
their posterior families.

* :class:`AutoStructuredGuide` -- the guide to use: the DAG layout for a model with a DAGDGP, the generic one for any
  other Pyro model;
* :class:`AutoDAGGuide`, :class:`AutoGenericGuide` -- the two layouts on their own; :class:`StructuredGaussianGuide`
  -- their base (state, sampling, queries);
* :class:`AutoEncodedStructuredGuide`, :class:`AutoLatentEncoder` -- amortised latent inputs.
"""
from .base import InducingDistribution, StructuredGaussianGuide
from .dag_guide import AutoDAGGuide
from .encoder import AutoEncodedStructuredGuide, AutoLatentEncoder
from .gaussians import Block, InducingPosterior, MeanFieldPosterior
from .generic_guide import AutoGenericGuide
from .structured import AutoStructuredGuide

__all__ = ["AutoStructuredGuide", "AutoDAGGuide", "AutoGenericGuide", "StructuredGaussianGuide",
           "InducingDistribution", "Block", "InducingPosterior", "MeanFieldPosterior", "AutoLatentEncoder",
           "AutoEncodedStructuredGuide"]
