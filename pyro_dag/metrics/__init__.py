"""Metrics: regression scores for DAG-DGP predictions and structure-learning scores.

Regression metrics live in :mod:`pyro_dag.metrics.regression` (digest-000 §4.0); structure metrics
in :mod:`pyro_dag.metrics.structure` (digest-001, digest-004 §5).
"""
from .regression import *  # noqa: F401,F403
from .regression import __all__ as _regression_all
from .structure import *  # noqa: F401,F403
from .structure import __all__ as _structure_all

__all__ = list(_regression_all) + list(_structure_all)
