"""Inference for DAG models: :class:`DAGELBO` and the structured autoguide (:mod:`pyro_dag.infer.autoguide`)."""
from . import autoguide
from .context import current_estimator
from .elbo import DAGELBO
from .natural import GaussianNaturalGradient, SinkNaturalGradient

__all__ = ["DAGELBO", "GaussianNaturalGradient", "SinkNaturalGradient", "autoguide", "current_estimator"]
