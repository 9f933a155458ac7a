"""Metrics: regression scores for DAG-DGP predictions and structure-learning scores.

Regression metrics live in :mod:`pyro_dag.metrics.regression` (the scores of Perlino et al. 2026, arXiv:2607.09645,
Sec. 7 and App. G.5); structure metrics in :mod:`pyro_dag.metrics.structure` (the four of Zinage 2026, *SVI-DAG*,
arXiv:2608.04930, App. C, plus AUPRC as Wang, Wicker & Kwiatkowska, ICML 2022, recommend).
"""
from .regression import *  # noqa: F401,F403
from .regression import __all__ as _regression_all
from .structure import *  # noqa: F401,F403
from .structure import __all__ as _structure_all

__all__ = list(_regression_all) + list(_structure_all)
