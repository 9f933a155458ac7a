"""DAGELBO: the evidence lower bound estimator of the DAG-DGP paper as a Pyro ELBO.

Perlino, Hamelijnck, Johansen & Damoulas (2026), "Deep Gaussian Processes on Directed Acyclic Graphs",
arXiv:2607.09645, Eqs. (92)-(95) and Algorithm 4:

``L̂ = (n/B) (1/S) Σ_s Σ_{i∈B} Σ_w E_{N(μ_{w,b}, σ²_{w,b})}[log p_w(Y_w^{(i)} | f)] - KL(q(U) || p(U))``

* the KL is analytic (Eq. 92);
* node values are drawn by marginal ancestral sampling in topological order, conditioning on the
  values already drawn for the same (sample, case) pair (Prop. 9; Algorithms 1-3);
* the expected log-likelihood at each observed node is evaluated under the final Gaussian conditional
  in closed form (Gaussian, Poisson) or by Gauss-Hermite quadrature (Rao-Blackwellisation);
* minibatching through the model's ``"data"`` plate scales the data term by ``n/B`` (Eq. 94).

Other latent sites of the model (e.g. hyperparameters with priors) are estimated as in ``Trace_ELBO``
with one guide sample per step.
"""
import torch
from pyro import poutine
from pyro.infer.elbo import ELBO
from pyro.infer.util import torch_item
from pyro.poutine.util import prune_subsample_sites

from .checks import LIKELY_CAUSES, NonFiniteLossError, check_finite_gradients, data_scale_note
from .context import MarginalEstimator

__all__ = ["DAGELBO"]


class DAGELBO(ELBO):
    """The DAG-DGP paper's ELBO estimator for :class:`~pyro_dag.DAGDGP` models (Perlino et al. 2026,
    arXiv:2607.09645, Eqs. 92-95, Algorithm 4).

    Use it with :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` in ``pyro.infer.SVI``::

        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
        loss = svi.step(inputs, data)          # inputs, data as for the model

    Each evaluation enters a :class:`~pyro_dag.infer.context.MarginalEstimator` effect handler around one run
    of the guide and one of the model: the guide publishes ``q(U)`` and its KL to it, the model draws node
    values against it.

    A loss or gradient that is not finite raises :class:`~pyro_dag.infer.checks.NonFiniteLossError` naming the
    term (the KL or the node whose expected log-likelihood is not finite) instead of passing an infinite loss
    to the optimiser.

    :param int num_particles: ``S``, ancestral samples per data case (vectorised).
    :param str sampler: how node values are drawn for a structured (chordal/full) guide.
        ``"conditional"`` (default): the paper's marginal ancestral sampling, exact Gaussian conditioning on the
        values already drawn (Algorithm 1 dense, Algorithm 2 sparse); its cost per node grows with the node's
        elimination-tree path. ``"joint"`` (beyond the paper): one joint draw of the inducing outputs per
        (sample, case) pair by a single block back-substitution, and each sink's predictive Rao-Blackwellised
        over its own block (:class:`~pyro_dag.infer.autoguide.samplers.JointSampleState`); the same ELBO in
        expectation at a cost per node independent of the graph's depth, with more gradient variance.
        Mean-field guides are unaffected. The default is the sampler that reaches a given gradient precision with
        less CPU time (variance × seconds per ELBO + gradient): the conditional one on every model measured
        (binary trees of 6-510 GP nodes, chains, the latent collider; the joint sampler's gradient variance was
        1.3-12× the conditional's, 7.6-10.3× on trees and chains, at 1.1-4.4× less CPU per gradient;
        ``benchmarks/sampler_work.py``). On that trend the joint sampler would need less work only beyond a mean
        elimination-tree path of about 17 blocks (a binary tree of depth ~19); it suits a budget of steps rather
        than of CPU time.
    :param bool antithetic: draw the ``S`` samples in antithetic pairs, ``ε`` and ``-ε`` (``S`` must be even;
        beyond the paper). Each draw keeps its law, so the estimate stays unbiased; the odd-order terms of the
        integrand in ``ε`` cancel within each pair.
    """

    SAMPLERS = ("conditional", "joint")

    def __init__(self, num_particles=1, max_plate_nesting=float("inf"), strict_enumeration_warning=True,
                 ignore_jit_warnings=False, sampler="conditional", antithetic=False):
        if int(num_particles) < 1:
            raise ValueError(f"num_particles must be >= 1, got {num_particles}")
        if antithetic and int(num_particles) % 2:
            raise ValueError(f"antithetic=True pairs the samples, so num_particles must be even, got {num_particles}")
        self.antithetic = bool(antithetic)
        if sampler not in self.SAMPLERS:
            raise ValueError(f"sampler must be one of {self.SAMPLERS}, got {sampler!r}")
        self.sampler = sampler
        super().__init__(num_particles=1, max_plate_nesting=max_plate_nesting,
                         strict_enumeration_warning=strict_enumeration_warning,
                         ignore_jit_warnings=ignore_jit_warnings)
        self.num_particles = int(num_particles)

    def _traces(self, model, guide, args, kwargs):
        with MarginalEstimator(self.num_particles, self.sampler, self.antithetic) as estimator:
            guide_trace = poutine.trace(guide).get_trace(*args, **kwargs)
            try:
                model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(*args, **kwargs)
            except (ValueError, RuntimeError) as e:
                bad = [kl for kl in estimator.kl_terms if not torch.isfinite(kl)]
                if not bad:
                    raise
                # a diverged guide makes the model fail inside a distribution's validation: say why
                raise NonFiniteLossError(
                    f"DAGELBO evaluation: the KL(q(U) || p(U)) of the inducing posterior is {float(bad[0].detach())}: "
                    f"the guide's parameters are not finite (an earlier step diverged), and the model failed with "
                    f"{type(e).__name__}. {LIKELY_CAUSES}{data_scale_note(args, kwargs)}") from e
        if not estimator.posteriors:
            raise ValueError("DAGELBO: the guide published no inducing posterior; use "
                             "pyro_dag.infer.autoguide.AutoStructuredGuide (with other guides use Trace_ELBO)")
        unused = set(estimator.posteriors) - estimator.used
        if unused:
            raise ValueError("DAGELBO: the guide was built for a DAGDGP that the model did not run; build the guide "
                             "from the same model instance")
        model_trace = prune_subsample_sites(model_trace)
        guide_trace = prune_subsample_sites(guide_trace)
        for name, site in model_trace.nodes.items():
            if site["type"] == "sample" and not site["is_observed"] and name not in guide_trace.nodes:
                raise ValueError(f"DAGELBO: latent site {name!r} of the model is not in the guide")
        return estimator, model_trace, guide_trace

    def _get_trace(self, model, guide, args, kwargs):
        """One (model, guide) trace pair evaluated under the estimator (the model holds factor sites)."""
        _, model_trace, guide_trace = self._traces(model, guide, args, kwargs)
        return model_trace, guide_trace

    def _loss(self, model, guide, args, kwargs):
        estimator, model_trace, guide_trace = self._traces(model, guide, args, kwargs)
        elbo = model_trace.log_prob_sum() - guide_trace.log_prob_sum() - sum(estimator.kl_terms)
        loss = -elbo
        if not torch.isfinite(loss):
            raise NonFiniteLossError(self._describe_non_finite(loss, estimator, model_trace, guide_trace,
                                                               args, kwargs))
        return loss, model_trace, guide_trace

    @staticmethod
    def _describe_non_finite(loss, estimator, model_trace, guide_trace, args, kwargs):
        terms = []
        for key, kl in estimator.kl_by_model.items():
            if not torch.isfinite(kl):
                terms.append(f"the KL(q(U) || p(U)) of the inducing posterior is {float(kl.detach())} (the guide's "
                             "parameters are not finite: an earlier step diverged)")
        for name, site in model_trace.nodes.items():
            if site["type"] != "sample":
                continue
            value = site.get("log_prob_sum")  # memoised by log_prob_sum()
            if value is None:
                continue
            if torch.isfinite(value):
                continue
            role = site["infer"].get("dag", {}).get("role")
            node = site["infer"].get("dag", {}).get("node")
            if role is None and name.endswith(".y") and site["fn"].__class__.__name__ == "Unit":
                node, role = name[:-2], "observation"
            if role == "observation":
                terms.append(f"the expected log-likelihood of node {node!r} (site {name!r}) is "
                             f"{float(value.detach())}")
            else:
                terms.append(f"the model's log-density at site {name!r} is {float(value.detach())}")
        for name, site in guide_trace.nodes.items():
            value = site.get("log_prob_sum")
            if site["type"] == "sample" and value is not None and not torch.isfinite(value):
                terms.append(f"the guide's log-density at site {name!r} is {float(value.detach())}")
        what = "; ".join(terms) if terms else "the terms are finite but their sum is not"
        return (f"DAGELBO evaluation: the loss is {float(loss.detach())}: {what}. {LIKELY_CAUSES}"
                f"{data_scale_note(args, kwargs)}")

    def differentiable_loss(self, model, guide, *args, **kwargs):
        """The negative ELBO as a differentiable scalar tensor.

        :raises NonFiniteLossError: if it is not finite, naming the term.
        """
        return self._loss(model, guide, args, kwargs)[0]

    def loss(self, model, guide, *args, **kwargs):
        """:returns: the negative ELBO estimate (a float)."""
        with torch.no_grad():
            return torch_item(self.differentiable_loss(model, guide, *args, **kwargs))

    def loss_and_grads(self, model, guide, *args, **kwargs):
        """Negative ELBO (a float); gradients are accumulated into the parameters.

        :raises NonFiniteLossError: if the loss or the gradient of a parameter is not finite, naming it.
        """
        loss, model_trace, guide_trace = self._loss(model, guide, args, kwargs)
        if loss.requires_grad:
            loss.backward()
            params = {}
            for trace in (guide_trace, model_trace):
                for name, site in trace.nodes.items():
                    if site["type"] == "param":
                        params[name] = site["value"].unconstrained()
            check_finite_gradients(params.items(), "DAGELBO evaluation", loss=loss.item())
        return torch_item(loss)
