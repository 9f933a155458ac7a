"""Baselines a user already has, fitted on the same cases as a DAG-DGP so that every report can say whether the
deep model earns its keep: :class:`ExactGP` (an exact GP with an ARD kernel, type-II maximum likelihood) and
:class:`LinearRegression` (least squares); :func:`baseline_scores` scores both on held-out cases."""
from .exact_gp import ExactGP
from .linear import LinearRegression
from .scores import BaselineWarning, baseline_scores, compare_with_baselines

__all__ = ["BaselineWarning", "ExactGP", "LinearRegression", "baseline_scores", "compare_with_baselines"]
