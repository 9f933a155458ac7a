"""Sparse-GP building blocks of a DAG node: whitened conditional, likelihoods, inducing initialisation."""
from .collapsed import CollapsedGaussianLeaf
from .conditional import NonFiniteGramError, NotPositiveDefiniteError, cholesky_with_jitter, whitened_conditional
from .inducing import init_inducing_inputs, kmeans, sobol_normal
from .likelihoods import Bernoulli, Gaussian, Likelihood, Poisson, StudentT, get_likelihood

__all__ = ["CollapsedGaussianLeaf", "NotPositiveDefiniteError", "NonFiniteGramError", "cholesky_with_jitter",
           "whitened_conditional", "init_inducing_inputs", "kmeans", "sobol_normal", "Likelihood", "Gaussian",
           "Bernoulli", "Poisson", "StudentT", "get_likelihood"]
