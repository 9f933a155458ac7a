"""Inference for DAG deep GPs: :class:`DAGELBO`, the structured autoguide (:mod:`pyro_dag.infer.autoguide`) and
natural-gradient steps (:class:`GaussianNaturalGradient`, :class:`SinkNaturalGradient`)."""
from . import autoguide
from .checks import NonFiniteLossError
from .context import MarginalEstimator, current_estimator, suspended
from .elbo import DAGELBO
from .natural_gaussian import GaussianNaturalGradient
from .natural_sink import SinkNaturalGradient

__all__ = ["DAGELBO", "GaussianNaturalGradient", "MarginalEstimator", "NonFiniteLossError", "SinkNaturalGradient",
           "autoguide", "current_estimator", "suspended"]
