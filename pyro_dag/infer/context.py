"""The state of one :class:`~pyro_dag.infer.DAGELBO` evaluation, as an effect handler: the guide publishes its
inducing posterior ``q(U)`` and KL to it, and the model, seeing it active, runs marginal ancestral sampling against
that ``q(U)`` (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic
Graphs", arXiv:2607.09645, Eqs. 92-95, Prop. 9 and Algorithm 4). The channel itself (the :class:`Estimator`
protocol, :func:`current_estimator`, :func:`suspended`) is :mod:`pyro_dag.dgp.handoff`.
"""
from ..dgp.handoff import Estimator
from .marginal import forward_marginal

__all__ = ["MarginalEstimator"]


class MarginalEstimator(Estimator):
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

    def forward_model(self, model, X, obs, plate, cache):
        """The model's run under DAGELBO: marginal ancestral sampling against the published ``q(U)`` and the
        closed-form expected log-likelihood of each observed node (:func:`~pyro_dag.infer.marginal.forward_marginal`)."""
        return forward_marginal(model, self, X, obs, plate, cache)
