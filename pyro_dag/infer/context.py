"""The hand-off between :class:`~pyro_dag.infer.DAGELBO`, the guide and the model, as Pyro effect handlers.

DAGELBO evaluates the estimator of the DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep
Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645, Eqs. 92-95 and Algorithm 4): the guide does
not sample the inducing sites; it publishes its inducing posterior ``q(U)`` and the analytic KL to the active
estimator, and the model (:class:`~pyro_dag.DAGDGP`), seeing an active estimator, runs marginal ancestral
sampling (Prop. 9) against that ``q(U)`` and records the expected log-likelihood of each observed node as a
factor site.

The channel is Pyro's handler stack (``pyro.poutine.runtime._PYRO_STACK``), as for every cross-cutting
channel of Pyro's own inference code:

* :class:`MarginalEstimator` is a :class:`~pyro.poutine.messenger.Messenger`; DAGELBO enters one around the
  guide and model runs of each evaluation (``with MarginalEstimator(...) as estimator:``);
* :class:`SuspendMessenger` (entered by :func:`suspended`) hides every estimator below it, so that the block
  runs as ordinary Pyro code (a guide's prototype trace, prediction);
* :func:`current_estimator` walks the stack from the innermost handler outwards and returns the first
  estimator it meets, or ``None`` if it meets a :class:`SuspendMessenger` first or there is none.

The lookup reads the stack rather than sending a message through it, so ``poutine.block`` (which stops
messages) around part of a model does not cut the model off from its estimator. Because the estimator lives on
the handler stack, Pyro's exception handling removes it when an evaluation fails, and two evaluations (two
DAGELBO instances, or one nested inside another) each see only their own, innermost estimator.
"""
import torch
from pyro.poutine.messenger import Messenger
from pyro.poutine.runtime import _PYRO_STACK

__all__ = ["MarginalEstimator", "SuspendMessenger", "current_estimator", "standard_normal", "suspended"]


class MarginalEstimator(Messenger):
    """Effect handler holding the state of one DAGELBO evaluation.

    While it is on the handler stack (and not hidden by :func:`suspended`), :func:`current_estimator` returns
    it: the guide calls :meth:`publish` and the model calls :meth:`posterior`. It handles no Pyro message
    itself, so sites pass through it unchanged.

    :param int num_particles: ``S``, the number of ancestral samples per data case (``>= 1``).
    :param str sampler: ``"conditional"`` (the paper's Algorithms 1-3) or ``"joint"``
        (see :class:`~pyro_dag.infer.DAGELBO`).
    :param bool antithetic: pair the ``S`` samples as ``(ε, -ε)``.
    :ivar dict posteriors: model key -> inducing posterior published by the guide.
    :ivar list kl_terms: analytic KL terms published by the guide (scalar tensors), in publication order.
    :ivar dict kl_by_model: model key -> its KL term.
    :ivar set used: model keys whose posterior the model has read.

    Example::

        with MarginalEstimator(num_particles=4) as estimator:
            guide_trace = poutine.trace(guide).get_trace(inputs, data)
            model_trace = poutine.trace(poutine.replay(model, guide_trace)).get_trace(inputs, data)
        elbo = model_trace.log_prob_sum() - guide_trace.log_prob_sum() - sum(estimator.kl_terms)
    """

    def __init__(self, num_particles, sampler="conditional", antithetic=False):
        super().__init__()
        if int(num_particles) < 1:
            raise ValueError(f"MarginalEstimator: num_particles must be >= 1, got {num_particles}")
        self.num_particles = int(num_particles)
        self.sampler = sampler
        self.antithetic = bool(antithetic)
        self.posteriors = {}
        self.kl_terms = []
        self.kl_by_model = {}
        self.used = set()

    def publish(self, model_key, posterior):
        """Called by a guide: make ``posterior`` (an inducing posterior with a ``kl()`` method) available to
        the model identified by ``model_key`` and add its analytic KL to the estimate."""
        self.posteriors[model_key] = posterior
        kl = posterior.kl()
        self.kl_terms.append(kl)
        self.kl_by_model[model_key] = kl

    def posterior(self, model_key, node_name="?"):
        """Called by the model: the inducing posterior published for ``model_key``.

        :raises ValueError: if the guide published none for this model (it is not an AutoStructuredGuide of
            this model).
        """
        if model_key not in self.posteriors:
            raise ValueError(
                "DAGELBO found no inducing posterior for this DAGDGP: its guide must be a "
                "pyro_dag.infer.autoguide.AutoStructuredGuide built for this model (node "
                f"{node_name!r}). With other guides (AutoNormal, AutoMultivariateNormal, ...) use Trace_ELBO.")
        self.used.add(model_key)
        return self.posteriors[model_key]


class SuspendMessenger(Messenger):
    """Effect handler that hides every :class:`MarginalEstimator` below it on the stack (see :func:`suspended`)."""


def current_estimator():
    """The innermost active :class:`MarginalEstimator` on Pyro's handler stack, or ``None``.

    ``None`` also when a :func:`suspended` block is entered inside the estimator.
    """
    for frame in reversed(_PYRO_STACK):
        if isinstance(frame, MarginalEstimator):
            return frame
        if isinstance(frame, SuspendMessenger):
            return None
    return None


def suspended():
    """A :class:`SuspendMessenger`: run a block (or, as a decorator, a function) as ordinary Pyro code even
    inside a DAGELBO evaluation, e.g. a guide's prototype trace::

        with suspended():
            assert current_estimator() is None
    """
    return SuspendMessenger()


def standard_normal(shape, like, antithetic=False, dim=0):
    """``N(0, I)`` draws of ``shape`` with ``like``'s dtype and device; with ``antithetic`` the second half along
    ``dim`` is minus the first (``shape[dim]`` must be even).

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
