"""The collapse reparameterisation for MCMC (``DAGDGP(sample_f=True, collapse=...)``): Gaussian leaves with their
values (or also their inducing outputs) integrated out, observed Gaussian nodes with children in
posterior-whitened coordinates, and the conversion of such draws back to the full model's sites
(Perlino, Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645, Eq. (80); Papaspiliopoulos, Roberts & Sköld
2007, "A general framework for the parametrization of hierarchical models", Statistical Science). A mixin of
:class:`~pyro_dag.dgp.DAGDGP`.
"""
import pyro
import pyro.distributions as dist
import torch

from ..gp.collapsed import CollapsedGaussianLeaf, value_posterior
from ..gp.likelihoods import Gaussian
from .inputs import DAGInputError

__all__ = ["CollapsedParameterisation"]


class CollapsedParameterisation:
    """Which nodes ``collapse`` reparameterises, their sites, and :meth:`full_model_draws`."""

    def _collapsed(self, w):
        """Gaussian-likelihood leaves are integrated out analytically in ``sample_f`` mode."""
        return (self.sample_f and self.collapse is not None and self.graph.out_degree(w) == 0
                and isinstance(self.likelihoods[w], Gaussian))

    def _collapsed_inducing(self, obs, generate):
        """The observed Gaussian-likelihood nodes that ``collapse="inducing"`` reparameterises: leaves with their
        inducing outputs integrated out, nodes with children sampled in posterior-whitened coordinates (none when
        generating: a draw of new observations needs the inducing outputs)."""
        if self.collapse != "inducing" or generate:
            return []
        return [w for w in self.gp_nodes if w in obs and isinstance(self.likelihoods[w], Gaussian)
                and (self._collapsed(w) or not self.centred)]

    def _posterior_whitened_values(self, w, a, r, z, observed):
        """Node values ``[B, d]``, inducing outputs ``[d, M]`` and the marginal of ``y`` (a
        :class:`CollapsedGaussianLeaf`) of an observed Gaussian node with children under ``collapse="inducing"``,
        from its standardised sites ``z`` (``"{w}.z"``) and ``ε`` (``"{w}.eps"``).

        ``p(U) p(F | U) p(y | F) = p(y) p(U | y) p(F | U, y)`` for the node's own observations ``y``, all Gaussian:
        with ``U = m + L⁻ᵀ z`` (``U | y ~ N(m, (L Lᵀ)⁻¹)``) and ``F_b = E[F_b | U, y_b] + sd(F_b | U, y_b) · ε_b``
        the density in ``(z, ε)`` is ``p(y) N(z; 0, I) N(ε; 0, I)``, so ``z`` and ``ε`` are a posteriori standard
        normal but for the children's likelihood (the data-informed non-centring of Papaspiliopoulos, Roberts &
        Sköld 2007, with the conjugate part exact); ``p(y)`` is the :class:`CollapsedGaussianLeaf` site."""
        y, m = observed
        tau2 = self.likelihoods[w].hyper("variance")  # [d] or, batched, [*batch, 1, d] (see Likelihood.hyper)
        y0 = torch.where(m, y, torch.zeros_like(y))
        marginal = CollapsedGaussianLeaf(a, r, tau2, self.output_dims[w], mask=m)
        mean, L = marginal.inducing_posterior(y0)
        u = mean + torch.linalg.solve_triangular(L.transpose(-1, -2), z.unsqueeze(-1), upper=True).squeeze(-1)
        loc = a @ u.transpose(-1, -2)
        var = r.unsqueeze(-1).expand_as(loc)
        mean_f, var_f, gain = value_posterior(loc, var, y0, m, tau2)
        eps = pyro.sample(f"{w}.eps", dist.Normal(torch.zeros_like(loc), 1.0).to_event(1),
                          infer=self._site_meta(w, "value"))
        f = mean_f + var_f.clamp_min(0).sqrt() * eps
        pyro.deterministic(f"{w}.f", f, event_dim=1)
        # the same value's standardised residual under the prior conditional, ε' = (F - μ(U)) / √r (the "{w}.eps"
        # of collapse="values"), written without dividing by √r (r goes down to the jitter)
        eps_prior = torch.where(m, var.sqrt() / (var + tau2) * (y0 - loc) + (1 - gain).sqrt() * eps, eps)
        pyro.deterministic(f"{w}.eps_prior", eps_prior, event_dim=1)
        return f, u, marginal

    def full_model_draws(self, samples, inputs, data=None, mask=None):
        """Posterior draws of a ``collapse="inducing"`` run in the coordinates of the full model.

        NUTS on ``DAGDGP(..., sample_f=True, collapse="inducing")`` samples reparameterised sites for the observed
        Gaussian-likelihood nodes (:class:`~pyro_dag.gp.CollapsedGaussianLeaf`): a leaf's whitened
        inducing outputs ``"{w}.u"`` are integrated out, and a node with children is sampled through
        posterior-whitened ``"{w}.z"`` and ``"{w}.eps"``. This returns, for every draw, the sites of the model
        with ``collapse="values"``: a leaf's ``"{w}.u"`` drawn exactly from ``p(U_w | y, rest)``, once per draw
        (Rao-Blackwellisation), and a node with children's ``"{w}.u"`` and prior-standardised ``"{w}.eps"``
        computed from its draw (Perlino et al. 2026, arXiv:2607.09645, Eq. (80)). Use the result wherever the full
        model's draws are needed, e.g. ``Predictive(model, posterior_samples=...)`` (which runs the model without
        data, so with every ``"{w}.u"`` site) or :func:`pyro_dag.diagnostics.to_inference_data` (which calls
        this itself).

        :param dict samples: ``{site: [S, ...]}`` posterior draws, e.g. ``mcmc.get_samples()``.
        :param dict inputs: the inputs of the run. :param dict data: its data. :param dict mask: its mask.
        :returns: a new dict: ``samples`` with ``"{w}.u"`` ``[S, d_w, M_w]`` for each reparameterised node,
            ``"{w}.eps"`` in the full model's coordinates and no ``"{w}.z"``.
        """
        X, n, obs = self.checked_arguments(inputs, data, mask)
        nodes = self._collapsed_inducing(obs, generate=data is None)
        if not nodes:
            return dict(samples)
        num = {int(v.shape[0]) for v in samples.values()}
        if len(num) != 1:
            raise DAGInputError(f"samples must hold the same number of draws at every site, got sizes {sorted(num)}")
        num = num.pop()
        draws = {}
        with torch.no_grad():
            for s in range(num):
                with pyro.poutine.trace() as tr, pyro.poutine.condition(data={k: v[s] for k, v in samples.items()}):
                    self(inputs, data, mask)
                for w in nodes:
                    if self.graph.out_degree(w) == 0:
                        site = tr.trace.nodes[f"{w}.y"]
                        draws.setdefault(f"{w}.u", []).append(site["fn"].sample_inducing(site["value"]))
                    else:
                        draws.setdefault(f"{w}.u", []).append(tr.trace.nodes[f"{w}.u"]["value"])
                        draws.setdefault(f"{w}.eps", []).append(tr.trace.nodes[f"{w}.eps_prior"]["value"])
        out = {k: v for k, v in samples.items() if not (k.endswith(".z") and k[:-2] in nodes)}
        out.update({k: torch.stack(v) for k, v in draws.items()})
        return out
