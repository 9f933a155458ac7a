"""The Gaussian family over the inducing outputs and its samplers (kept under their old import path).

The Gaussians live in :mod:`pyro_dag.infer.autoguide.gaussians`, the samplers that push them through the DAG in
:mod:`pyro_dag.infer.autoguide.samplers`.
"""
from .gaussians import (Block, DenseGaussianPosterior, InducingPosterior, MeanFieldPosterior, SparseChordalPosterior,
                        gaussian_kl_standard)
from .samplers import DenseAncestralState, JointSampleState, MeanFieldState

__all__ = ["Block", "InducingPosterior", "MeanFieldPosterior", "MeanFieldState", "DenseGaussianPosterior",
           "DenseAncestralState", "SparseChordalPosterior", "JointSampleState", "gaussian_kl_standard"]
