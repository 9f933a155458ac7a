"""Inference for DAG models: :class:`DAGELBO` and the structured autoguide (:mod:`pyro_dag.infer.autoguide`)."""
from . import autoguide
from .context import current_estimator
from .elbo import DAGELBO

__all__ = ["DAGELBO", "autoguide", "current_estimator"]
