"""Shapley attribution of a node's prediction to its parents: :func:`shapley` (see
:mod:`pyro_dag.emulation.attribution`; Perlino et al. 2026, arXiv:2607.09645, Sec. 7, Fig. 7)."""
from .emulation.attribution import ShapleyResult, normalised_shares, shapley, shapley_values

__all__ = ["shapley", "shapley_values", "normalised_shares", "ShapleyResult"]
