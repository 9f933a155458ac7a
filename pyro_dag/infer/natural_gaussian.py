"""GaussianNaturalGradient: damped natural-gradient steps on the whole Gaussian inducing posterior of a guide.

Beyond the DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645), which trains the
variational parameters with Adam; the step is that of Khan & Lin (2017) and Salimbeni, Eleftheriadis & Hensman
(2018, "Natural gradients in practice", AISTATS, Eq. 5), kept on the guide's sparsity pattern.
"""
import torch

from .autoguide.families import MeanFieldFamily, StructuredFamily, substituted_posterior
from .autoguide.gaussians import DenseGaussianPosterior, InducingPosterior, MeanFieldPosterior
from .autoguide.samplers import DenseAncestralState
from .checks import LIKELY_CAUSES, NonFiniteLossError, check_finite_loss, training_step
from .natural import family_param_names, freezing_optim_args, gaussian_kl

__all__ = ["GaussianNaturalGradient"]


class GaussianNaturalGradient:
    """Damped natural-gradient steps on the whole Gaussian inducing posterior of a structured guide.

    For ``q(V) = N(m, Σ)`` with natural parameters ``(Λm, -½Λ)``, ``Λ = Σ⁻¹``, the natural gradient of the
    ELBO ``L`` is its ordinary gradient with respect to the expectation parameters ``(m, mmᵀ + Σ)``, so a step
    of size ``γ`` is (Khan & Lin 2017; Salimbeni, Eleftheriadis & Hensman 2018, Eq. 5):

        Λ ← Λ - 2γ ∂L/∂Σ,          Λm ← Λm + γ (∂L/∂m - 2 (∂L/∂Σ) m),

    with ``(∂L/∂m, ∂L/∂Σ)`` the reparameterisation gradients of the ELBO estimator (DAGELBO by default:
    the paper's marginal sampler, Prop. 9 and Algorithm 1). With a Gaussian likelihood and ``γ = 1`` the step
    lands on the conjugate optimum; with latent parents it follows the Fisher geometry, in which badly scaled
    directions for Adam (such as co-parents' explaining-away direction, which shares its scale with their tightly
    constrained sum) are as easy as the others.

    The update keeps the guide's structure: ``∂L/∂Σ`` is masked to the blocks the family has (the diagonal
    blocks for mean field; the diagonal blocks and the edges of the chordal graph ``H`` for the structured
    family, on which the ELBO's dependence on ``Σ`` lives, the paper's App. E.4), so ``Λ`` keeps the support of
    ``H`` and its Cholesky factor in the elimination order has no fill-in. If a step would leave ``Λ`` not
    positive definite (or, with ``max_kl``, would move ``q`` by more than ``max_kl`` nats), ``γ`` is halved for
    that step; :attr:`last_step_size` records the ``γ`` taken.

    The step materialises ``Σ`` (``O(P³)`` for ``P`` inducing outputs in all), whatever the backend; it is
    meant for models up to a few thousand inducing outputs. Other guide parameters (e.g. of non-GP latent
    sites) stay with the ordinary optimiser: exclude the ones this step sets with :meth:`optim_args`.

    Use it in place of (or beside) ``SVI``::

        guide(inputs, data)                                    # set the guide up
        ng = GaussianNaturalGradient(model, guide, DAGELBO(num_particles=4), step_size=0.1)
        for _ in range(steps):
            loss = ng.step(inputs, data)

    :param model: the :class:`~pyro_dag.DAGDGP` (or a Pyro model calling it).
    :param guide: its :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`, already run once.
    :param elbo: the ELBO estimator whose gradients are used (default ``DAGELBO(num_particles=4)``).
    :param float step_size: ``γ`` in (0, 1].
    :param bool positive_curvature: project the likelihood's curvature estimate
        ``Ĥ = -2 ∂E[log p(y | V)]/∂Σ`` (the step is ``Λ ← (1-γ) Λ + γ (I + Ĥ)``) onto the positive
        semi-definite cone (then masked to the family's blocks) before the step: a Gauss-Newton-like safeguard
        that keeps ``Λ ⪰ (1-γ) Λ + γ I`` on a complete ``H``. Clipping the noise biases the precision upwards
        (posterior variances shrink), so it is off by default.
    :param float max_kl: a trust region: ``γ`` is halved (up to 20 times, then the step is skipped) until
        ``KL(q_new || q_old) ≤ max_kl`` nats, bounding how far one noisy step can move ``q``. ``None``
        (default): no limit.

    A non-finite loss or gradient raises :class:`~pyro_dag.infer.checks.NonFiniteLossError` naming the step
    (:attr:`num_steps`, counted from 1 per instance) before the guide is changed.
    """

    def __init__(self, model, guide, elbo=None, step_size=0.1, positive_curvature=False, max_kl=None):
        if not 0 < float(step_size) <= 1:
            raise ValueError(f"step_size must be in (0, 1], got {step_size}")
        if max_kl is not None and not float(max_kl) > 0:
            raise ValueError(f"max_kl must be a positive number of nats or None, got {max_kl}")
        self.max_kl = None if max_kl is None else float(max_kl)
        self.positive_curvature = bool(positive_curvature)
        family = getattr(guide, "family", None)
        if family is None:
            raise RuntimeError("GaussianNaturalGradient: run the guide once (e.g. guide(inputs, data)) before "
                               "building it")
        if not isinstance(family, (MeanFieldFamily, StructuredFamily)):
            raise ValueError(f"GaussianNaturalGradient: unsupported variational family {type(family).__name__}")
        if elbo is None:
            from .elbo import DAGELBO

            elbo = DAGELBO(num_particles=4)
        self.model, self.guide, self.elbo = model, guide, elbo
        self.step_size = float(step_size)
        self.last_step_size = None
        self.num_steps = 0
        blocks = family.blocks
        size = sum(b.size for b in blocks)
        ref = family.loc() if isinstance(family, StructuredFamily) else getattr(family.locs, blocks[0].node)
        mask = torch.zeros(size, size, dtype=torch.bool, device=ref.device)
        pos = {b.node: b for b in blocks}
        for b in blocks:
            mask[b.slice, b.slice] = True
        for v, w in getattr(family, "edges", ()):
            mask[pos[v].slice, pos[w].slice] = True
            mask[pos[w].slice, pos[v].slice] = True
        self._mask = mask

    def param_names(self):
        """Names (in Pyro's parameter store) of the variational parameters this step sets."""
        family = self.guide.family
        return family_param_names(family, [b.node for b in family.blocks], offdiagonal=True)

    def optim_args(self, args):
        """A per-parameter argument callable for ``pyro.optim`` that freezes (``lr = 0``) what this step sets."""
        return freezing_optim_args(self.param_names(), args)

    def _moments(self):
        """Current ``m`` ``[P]``, ``Λ`` ``[P, P]`` and the moment :meth:`_posterior` takes (``Λ`` for the
        structured family, the block-diagonal ``Σ`` for mean field), in the family's block order."""
        family = self.guide.family
        if isinstance(family, StructuredFamily):
            L = family.dense_tril()
            lam = L @ L.T
            return family.loc(), lam, lam
        m = torch.cat([getattr(family.locs, b.node) for b in family.blocks])
        trils = [family.scale_tril(b.node) for b in family.blocks]
        lam = torch.block_diag(*[torch.cholesky_inverse(C) for C in trils])
        return m, lam, torch.block_diag(*[C @ C.T for C in trils])

    def _posterior(self, m, moment):
        """The posterior at leaf tensors: ``moment`` is ``Λ`` for the structured family (one Cholesky) and
        ``Σ`` (block-diagonal) for mean field."""
        family = self.guide.family
        moment = 0.5 * (moment + moment.T)
        if isinstance(family, StructuredFamily):
            return DenseGaussianPosterior(family.blocks, m, torch.linalg.cholesky(moment))
        return MeanFieldPosterior(family.blocks, [m[b.slice] for b in family.blocks],
                                  [torch.linalg.cholesky(moment[b.slice, b.slice]) for b in family.blocks])

    def _parameter_gradients(self, args, kwargs):
        """ELBO gradients with respect to ``(m, Σ)`` by autograd through a posterior built from leaf tensors
        ``(m, Λ)`` (structured; ``∂L/∂Σ = -Λ (∂L/∂Λ) Λ``) or ``(m, Σ)`` (mean field): any ELBO estimator.

        :returns: ``(loss, ∂L/∂m [P], ∂L/∂Σ [P, P], Λ [P, P], m [P])`` at the current guide.
        """
        family = self.guide.family
        with torch.no_grad():
            m0, lam0, moment0 = (t.detach().clone() for t in self._moments())
        m = m0.clone().requires_grad_(True)
        moment = moment0.clone().requires_grad_(True)
        with substituted_posterior(family, self._posterior(m, moment)):
            loss = self.elbo.differentiable_loss(self.model, self.guide, *args, **kwargs)
        g_m, g_moment = torch.autograd.grad(-loss, [m, moment])       # gradients of the ELBO
        # dΛ = -Λ dΣ Λ
        g_cov = -lam0 @ g_moment @ lam0 if isinstance(family, StructuredFamily) else g_moment
        return loss, g_m, g_cov, lam0, m0

    def _conditional_dagelbo(self):
        from .elbo import DAGELBO

        return isinstance(self.elbo, DAGELBO) and self.elbo.sampler == "conditional"

    def _moment_gradients(self, args, kwargs):
        """ELBO gradients of the structured family with respect to ``(m, Σ)`` from a moment-form posterior:
        the expected log-likelihood's by autograd (no Cholesky in the graph), the KL's in closed form,
        ``∂KL/∂m = m``, ``∂KL/∂Σ = ½(I - Λ)`` (from the paper's Eq. 92).

        :returns: ``(loss, ∂L/∂m [P], ∂L/∂Σ [P, P], Λ [P, P], m [P])``, ``L`` the ELBO, at the current guide.
        """
        family = self.guide.family
        with torch.no_grad():
            # loc() and dense_tril(), bit for bit, without PyroModule's attribute machinery (outside a guide run it
            # reads the same tensors through the same transforms)
            m0, L = family.factor_values()
            lam0 = L @ L.T
            cov0 = torch.cholesky_inverse(L)
            kl = 0.5 * (cov0.diagonal().sum() + m0.pow(2).sum() - m0.shape[0] + 2 * L.diagonal().log().sum())
        m = m0.clone().requires_grad_(True)
        cov = cov0.clone().requires_grad_(True)
        with substituted_posterior(family, _MomentPosterior(family.blocks, m, cov, kl)):
            loss = self.elbo.differentiable_loss(self.model, self.guide, *args, **kwargs)
        g_m, g_cov = torch.autograd.grad(-loss, [m, cov])            # of the expected log-likelihood
        self._factor0 = L                                              # a Cholesky factor of lam0, for _step
        return loss, g_m - m0, g_cov - 0.5 * (self._eye(lam0) - lam0), lam0, m0

    def _eye(self, like):
        """The identity of ``like``'s size, dtype and device (made once)."""
        eye = self.__dict__.get("_eye_cache")
        if eye is None or eye.shape != like.shape or eye.dtype != like.dtype or eye.device != like.device:
            eye = self._eye_cache = torch.eye(like.shape[-1], dtype=like.dtype, device=like.device)
        return eye

    def _write(self, m, lam, chol):
        family = self.guide.family
        if isinstance(family, StructuredFamily):
            family.set_precision_tril(m, chol)
        else:
            for b in family.blocks:
                cov = torch.cholesky_inverse(torch.linalg.cholesky(lam[b.slice, b.slice]))
                family.set_node(b.node, m[b.slice], torch.linalg.cholesky(cov))

    def step(self, *args, **kwargs):
        """One natural-gradient step; arguments are the model's. :returns: the ELBO estimator's loss (float)
        at the parameters before the step.

        :raises NonFiniteLossError: if the loss or its gradients are not finite (the guide is left unchanged).
        """
        self.num_steps += 1
        with training_step("GaussianNaturalGradient", self.num_steps, record=False):
            return self._step(args, kwargs)

    def _step(self, args, kwargs):
        family = self.guide.family
        structured = isinstance(family, StructuredFamily)
        self._factor0 = None
        if structured and self._conditional_dagelbo():
            loss, g_m, g_cov, lam0, m0 = self._moment_gradients(args, kwargs)
        else:
            loss, g_m, g_cov, lam0, m0 = self._parameter_gradients(args, kwargs)
        check_finite_loss(loss.detach(), f"the loss of {type(self.elbo).__name__}", args, kwargs)
        for name, g in (("mean", g_m), ("covariance", g_cov)):
            if not bool(torch.isfinite(g).all()):
                raise NonFiniteLossError(f"the ELBO's gradient with respect to the posterior {name} has NaN/inf "
                                         f"entries (the loss is finite, {loss.item():.6g}). {LIKELY_CAUSES}")
        with torch.no_grad():
            # the trust region's KL needs a Cholesky factor of Λ0: the family's own factor L (Λ0 = L Lᵀ) when the
            # gradients came from it (the same factor to rounding, and the KL only decides whether γ is halved)
            chol0 = None if self.max_kl is None else (
                self._factor0 if self._factor0 is not None else torch.linalg.cholesky(lam0))
            g_cov = 0.5 * (g_cov + g_cov.T) * self._mask
            eye = self._eye(lam0)
            # -2 ∂L/∂Σ = (I - Λ) + Ĥ: the KL's part is exact; Ĥ = -2 ∂E[log p(y|V)]/∂Σ = -E[∇² log p(y|V)]
            # is the likelihood's curvature, a noisy Monte Carlo estimate.
            curv = (-2 * g_cov - (eye - lam0)) * self._mask
            if self.positive_curvature:
                evals, evecs = torch.linalg.eigh(0.5 * (curv + curv.T))
                curv = (evecs * evals.clamp_min(0)) @ evecs.T * self._mask
            gamma = self.step_size
            for _ in range(21):
                lam = (1 - gamma) * lam0 + gamma * (eye + curv)
                lam = 0.5 * (lam + lam.T)
                chol, info = torch.linalg.cholesky_ex(lam)
                if int(info) == 0:
                    # Λ'm' = Λm + γ(∂L/∂m - 2 (∂L/∂Σ) m) = Λ'm + γ ∂L/∂m  (with Λ' = Λ - 2γ ∂L/∂Σ)
                    m_new = m0 + gamma * torch.cholesky_solve(g_m.unsqueeze(-1), chol).squeeze(-1)
                    if self.max_kl is None or gaussian_kl(m_new, chol, m0, chol0) <= self.max_kl:
                        break
                gamma *= 0.5
            else:
                self.last_step_size = 0.0
                return loss.item()
            self._write(m_new, lam, chol)
        self.last_step_size = gamma
        return loss.item()


class _MomentPosterior(InducingPosterior):
    """``N(m, Σ)`` given by its moments, for one evaluation of DAGELBO with the conditional sampler, whose dense
    ancestral state (:class:`~pyro_dag.infer.autoguide.samplers.DenseAncestralState`, Algorithm 1) reads only
    ``loc`` and ``covariance``: differentiating with respect to a leaf ``Σ`` gives ``∂E/∂Σ`` without a Cholesky
    factorisation and its backward pass. :meth:`kl` is the KL's value only (no gradient):
    :class:`GaussianNaturalGradient` adds the KL's exact gradient, ``(m, ½(I - Λ))``, itself. Joint draws
    (``rsample``, ``log_prob``, the joint sampler) are not available.
    """

    def __init__(self, blocks, loc, covariance, kl_value):
        super().__init__(blocks)
        self.loc = loc
        self.covariance = covariance
        self.kl_value = kl_value

    def kl(self):
        return self.kl_value

    def mean_blocks(self):
        return {b.node: self.loc[b.slice].reshape(b.dim, b.num_inducing) for b in self.blocks}

    def mean_vector(self):
        return self.loc

    def covariance_matrix(self):
        return self.covariance

    def covariance_block(self, node, other=None):
        b, c = self.block_of[node], self.block_of[other or node]
        return self.covariance[b.slice, c.slice]

    def ancestral_state(self):
        return DenseAncestralState(self)

