"""The hand-off between :class:`~pyro_dag.infer.DAGELBO`, the guide and the model.

DAGELBO evaluates the paper's estimator (digest-000 §2.5-2.9): the guide does not sample the inducing
sites; it publishes its inducing posterior ``q(U)`` and its analytic KL here, and the model
(:class:`~pyro_dag.DAGDGP`), seeing an active estimator, runs marginal ancestral sampling against that
``q(U)`` and records the expected log-likelihood of each observed node as a factor site. Everything runs
inside the ordinary ``forward`` calls of the guide and the model, so Pyro's parameter capture (and hence
``SVI``) sees every parameter.
"""
import contextlib

import torch

__all__ = ["MarginalEstimator", "current_estimator", "estimating", "standard_normal", "suspended"]

_STACK = []


class MarginalEstimator:
    """State of one DAGELBO evaluation.

    :param int num_particles: ``S``, the number of ancestral samples per data case.
    :param str sampler: ``"conditional"`` (Algorithms 1-3) or ``"joint"`` (see :class:`~pyro_dag.infer.DAGELBO`).
    :param bool antithetic: pair the ``S`` samples as ``(ε, -ε)``.
    :ivar dict posteriors: model key -> inducing posterior published by the guide.
    :ivar list kl_terms: analytic KL terms published by the guide.
    """

    def __init__(self, num_particles, sampler="conditional", antithetic=False):
        self.num_particles = int(num_particles)
        self.sampler = sampler
        self.antithetic = bool(antithetic)
        self.posteriors = {}
        self.kl_terms = []
        self.used = set()

    def publish(self, model_key, posterior):
        """Called by a guide: make ``posterior`` available to the model and add its KL."""
        self.posteriors[model_key] = posterior
        self.kl_terms.append(posterior.kl())

    def posterior(self, model_key, node_name="?"):
        """Called by the model: the inducing posterior for ``model_key``."""
        if model_key not in self.posteriors:
            raise ValueError(
                "DAGELBO found no inducing posterior for this DAGDGP: its guide must be a "
                "pyro_dag.infer.autoguide.AutoStructuredGuide built for this model (node "
                f"{node_name!r}). With other guides (AutoNormal, AutoMultivariateNormal, ...) use Trace_ELBO.")
        self.used.add(model_key)
        return self.posteriors[model_key]


def standard_normal(shape, like, antithetic=False, dim=0):
    """``N(0, I)`` draws of ``shape``; with ``antithetic`` the second half along ``dim`` is minus the first.

    Antithetic pairs keep every draw's law (so estimates stay unbiased) and cancel the odd-order terms of the
    integrand's Taylor expansion in ``ε`` between the two halves (variance reduction for near-linear integrands).
    """
    if not antithetic:
        return torch.randn(shape, dtype=like.dtype, device=like.device)
    shape = list(shape)
    if shape[dim] % 2:
        raise ValueError(f"antithetic sampling needs an even number of samples, got {shape[dim]}")
    shape[dim] //= 2
    half = torch.randn(shape, dtype=like.dtype, device=like.device)
    return torch.cat([half, -half], dim=dim)


def current_estimator():
    """The active :class:`MarginalEstimator`, or ``None``."""
    return _STACK[-1] if _STACK else None


@contextlib.contextmanager
def estimating(estimator):
    """Activate ``estimator`` for the duration of the block."""
    _STACK.append(estimator)
    try:
        yield estimator
    finally:
        _STACK.pop()


@contextlib.contextmanager
def suspended():
    """Run a block as ordinary Pyro code even inside a DAGELBO evaluation (e.g. a guide's prototype trace)."""
    _STACK.append(None)
    try:
        yield
    finally:
        _STACK.pop()
