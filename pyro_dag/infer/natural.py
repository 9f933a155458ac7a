"""Natural-gradient steps for the Gaussian inducing posterior of a DAGDGP guide (beyond the paper).

Two tools:

* :class:`GaussianNaturalGradient`: a damped natural-gradient step on the whole ``q(V) = N(m, Λ⁻¹)`` of an
  :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (any structure), from any ELBO estimator.
* :class:`SinkNaturalGradient`: the closed-form (conjugate) step on the Gaussian-likelihood sinks only.

Sinks
-----

The ELBO of a deep GP is slow to optimise with Adam alone: the inducing outputs of an observed node with a
small noise variance sit in a narrow, badly conditioned valley (on the latent collider of digest-000 §4.1
neither DAG-VI nor DAG-SVI has converged after the paper's 3000 Adam steps; both are still climbing at
12000). For a node ``w`` that feeds no other node and has a Gaussian likelihood, the part of the ELBO that
depends on ``q(V_w | V_rest)`` is conjugate: with the rest of the guide fixed, the best Gaussian conditional
has a closed form. :class:`SinkNaturalGradient` takes a damped step towards it, which is the natural-gradient
step of Salimbeni, Eleftheriadis & Hensman (2018, "Natural gradients in practice", AISTATS) for the last
layer of a deep GP, extended to the structured guide (DAG-SVI), where the sink is coupled to its neighbours
in ``H``. The other parameters stay with Adam (exclude the sink's from it with :meth:`optim_args`).

The step, for a sink ``w`` with ``F_{w,b} = a_bᵀ V_w + √r_b ε`` (digest-000 Eq. 80), observations ``y`` with
noise ``τ²`` and the guide's conditional ``q(V_w | V_rest) = N(m_w + c(V_rest), P⁻¹)`` (``c = 0`` under mean
field; ``c(V_rest) = -Λ_ww⁻¹ Λ_{w,rest} (V_rest - m_rest)`` for a structured guide):

    P̂ = I + E[Σ_b a_b a_bᵀ] / τ²,          P̂ m̂ = E[Σ_b a_b (y_b - a_bᵀ c)] / τ²,

the expectations over the current guide's joint draws of ``(V_rest, F_parents)`` (one per (sample, case) pair,
as in DAGELBO's ``"joint"`` sampler), then ``P ← (1-γ) P + γ P̂`` and ``P m ← (1-γ) P m + γ P̂ m̂`` (natural
parameters). The regression ``c`` on the neighbours (the off-diagonal blocks of ``Λ``) is kept, so the
marginal of the other nodes is unchanged. With ``γ = 1`` and parents that are roots this is the exact
optimum (Titsias' ``q(U)``).

Requirements, checked with errors naming the node: ``w`` is a GP node that is observed, has no children and
a :class:`~pyro_dag.gp.likelihoods.Gaussian` likelihood; under a structured guide ``w`` comes before all its
neighbours in the elimination order (true of the simplicial sinks the chordal completion puts first).
"""
import pyro
import torch

from ..gp.likelihoods import Gaussian
from .autoguide.families import MeanFieldFamily, StructuredFamily, _assign, substituted_posterior
from .autoguide.posteriors import (DenseGaussianPosterior, InducingPosterior, JointSampleState, MeanFieldPosterior,
                                   MeanFieldState)
from .context import suspended

__all__ = ["GaussianNaturalGradient", "SinkNaturalGradient"]


def _freezing_optim_args(names, args):
    """Per-parameter ``pyro.optim`` arguments: ``args`` for every parameter, ``lr = 0`` for those in ``names``."""
    frozen = dict(args, lr=0.0)

    def per_param(param_name):
        return frozen if param_name in names else args

    return per_param


class SinkNaturalGradient:
    """Damped natural-gradient (conjugate) steps on the Gaussian-likelihood sinks of a DAGDGP guide.

    Use it beside ``SVI`` (an Adam step for everything else, then this step)::

        ng = SinkNaturalGradient(model, guide, step_size=1.0)
        guide(inputs, data)                      # set the guide up
        svi = SVI(model, guide, pyro.optim.Adam(ng.optim_args({"lr": 0.01})), DAGELBO(num_particles=4))
        for _ in range(steps):
            svi.step(inputs, data)
            ng.step(inputs, data)

    :param model: the :class:`~pyro_dag.DAGDGP`.
    :param guide: its :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (any structure and backend), set up.
    :param nodes: the sinks to update (default: every observed sink with a Gaussian likelihood).
    :param float step_size: ``γ`` in (0, 1]; 1 jumps to the conditional optimum of the current Monte Carlo
        estimate.
    :param int num_samples: ``S``, joint draws per case for the expectations.
    """

    def __init__(self, model, guide, nodes=None, step_size=1.0, num_samples=4):
        if not 0 < float(step_size) <= 1:
            raise ValueError(f"step_size must be in (0, 1], got {step_size}")
        if int(num_samples) < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if getattr(guide, "family", None) is None:
            raise RuntimeError("SinkNaturalGradient: run the guide once (e.g. guide(inputs, data)) before building it")
        if not model.is_setup:
            raise RuntimeError("SinkNaturalGradient: the model is not set up; call model.setup(inputs, data) first")
        self.model, self.guide = model, guide
        self.step_size = float(step_size)
        self.num_samples = int(num_samples)
        family = guide.family
        observed = set(model.observed_nodes or ())
        if nodes is None:
            nodes = [w for w in model.topo_nodes if w in observed and model.graph.out_degree(w) == 0
                     and isinstance(model.likelihoods[w], Gaussian)]
            if not nodes:
                raise ValueError("SinkNaturalGradient: the model has no observed sink with a Gaussian likelihood; "
                                 "there is nothing to update")
        self.nodes = list(nodes)
        earlier = {}
        if isinstance(family, StructuredFamily):
            for v, w in family.edges:  # block (v, w) of L: v is eliminated after w
                earlier.setdefault(v, []).append(w)
        for w in self.nodes:
            if w not in model.gp_nodes:
                raise ValueError(f"SinkNaturalGradient: {w!r} is not a GP node of the model (GP nodes: "
                                 f"{model.gp_nodes})")
            if model.graph.out_degree(w) != 0:
                raise ValueError(f"SinkNaturalGradient: node {w!r} has children {list(model.graph.successors(w))}; "
                                 "only sinks have a conjugate update: drop it from nodes")
            if w not in observed:
                raise ValueError(f"SinkNaturalGradient: node {w!r} is not observed; drop it from nodes")
            if not isinstance(model.likelihoods[w], Gaussian):
                raise ValueError(f"SinkNaturalGradient: node {w!r} has a {type(model.likelihoods[w]).__name__} "
                                 "likelihood; the update needs a Gaussian one: drop it from nodes")
            if earlier.get(w):
                raise ValueError(f"SinkNaturalGradient: node {w!r} is eliminated after its neighbours "
                                 f"{earlier[w]} in the guide's order, so its conditional is not a separate block "
                                 "of the precision factor; use the chordal structure's own order (sinks first)")
        self.last_stats = {}

    # ------------------------------------------------------------------ parameters
    def param_names(self):
        """Names (in Pyro's parameter store) of the parameters this step sets: each sink's mean and diagonal block."""
        prefix = self.guide._pyro_name + ".family"
        out = set()
        for w in self.nodes:
            for part in ("locs", "scales", "unit_trils"):
                out.add(f"{prefix}.{part}.{w}")
        return out

    def optim_args(self, args):
        """A per-parameter argument callable for ``pyro.optim`` that freezes (``lr = 0``) what this step sets.

        :param dict args: the optimiser's arguments for every other parameter, e.g. ``{"lr": 0.01}``.
        """
        return _freezing_optim_args(self.param_names(), args)

    # ------------------------------------------------------------------ the step
    @torch.no_grad()
    def step(self, inputs, data, mask=None, subsample_size=None):
        """One damped natural-gradient step on every sink in :attr:`nodes`.

        :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d]}`` (NaN = missing).
        :param dict mask: optional observation masks, as for the model.
        :param int subsample_size: use a random minibatch of cases (the data term is scaled by ``n / B``).
        :returns: dict with ``{node: |Δm| / (|m| + 1)}`` relative change of each sink's mean.
        """
        model, family = self.model, self.guide.family
        X, n = model._check_inputs(inputs)
        obs = model._check_data(data, mask, n)
        device = next(iter(X.values())).device
        if subsample_size is None or subsample_size >= n:
            idx, scale = None, 1.0
        else:
            idx, scale = torch.randperm(n, device=device)[:subsample_size], n / subsample_size
        with suspended():
            posterior = family.posterior()
            structured = isinstance(family, StructuredFamily)
            S = self.num_samples
            state = JointSampleState(posterior, S, self.nodes) if structured else MeanFieldState(posterior)
            cache = model.cholesky_cache()
            num_cases = n if idx is None else idx.shape[0]
            # Draw every node as DAGELBO does (same law), then read off each sink's statistics from the state.
            passes = model.marginal_pass(posterior, X, S, idx, cache, state=state)
            values = {r: (X[r] if idx is None else X[r][idx]) for r in model.root_nodes}
            values.update({w: passes[w][0] for w in model.topo_nodes})
            stats = {}
            for w in self.nodes:
                stats[w] = self._update_node(w, family, posterior, state, values, cache, obs, idx, scale,
                                             structured, num_cases)
        self.last_stats = stats
        return stats

    def _update_node(self, w, family, posterior, state, values, cache, obs, idx, scale, structured, num_cases):
        model, S, gamma = self.model, self.num_samples, self.step_size
        b = posterior.block_of[w]
        d, M = b.dim, b.num_inducing
        a, _ = model.node_conditional(w, values, cache)
        a = a.expand((S, num_cases, M))                                   # [S, B, M]
        y, m = obs[w]
        if idx is not None:
            y, m = y[idx], m[idx]
        tau2 = model.likelihoods[w].variance.detach().to(a).expand(d)
        wts = m.to(a) / tau2                                               # [B, d]
        if structured:
            # c = conditional mean offset of V_w given the draw of V_rest: (V - m)_w - Λ_ww⁻¹ (L ε)_w
            lam, leps = posterior._joint_precision_row(w, state._eps)
            chol = torch.linalg.cholesky(lam)
            c = state._block(w, state._centred[w] - torch.cholesky_solve(leps, chol))   # [S, B, d, M]
            resid = y - (c * a.unsqueeze(-2)).sum(-1)                     # [S, B, d]
        else:
            resid = y.expand((S,) + y.shape)
        k = scale / S
        eye = torch.eye(M, dtype=a.dtype, device=a.device)
        G = eye + k * torch.einsum("sbm,sbk,bj->jmk", a, a, wts)          # [d, M, M]
        h = k * torch.einsum("sbm,sbj,bj->jm", a, resid, wts)             # [d, M]
        P_hat = torch.block_diag(*G) if d > 1 else G[0]
        # current natural parameters of q(V_w | V_rest)
        if structured:
            fb = family.factor_blocks()
            L_old = fb[(w, w)]
            P_old = L_old @ L_old.T
        else:
            P_old = torch.cholesky_inverse(family.scale_tril(w))             # (C Cᵀ)⁻¹
        m_old = getattr(family.locs, w).detach().clone()
        P_new = (1 - gamma) * P_old + gamma * P_hat
        theta = (1 - gamma) * (P_old @ m_old) + gamma * h.reshape(-1)
        L_new = torch.linalg.cholesky(P_new)
        m_new = torch.cholesky_solve(theta.unsqueeze(-1), L_new).squeeze(-1)
        if structured:
            # keep the regression on the neighbours, B = -L_ww⁻ᵀ L_vwᵀ: L_vw ← L_vw L_old⁻¹ L_new
            s_new = L_new.diagonal().reciprocal()
            for k_edge, (v, u) in enumerate(family.edges):
                if u != w:
                    continue
                L_vw = torch.linalg.solve_triangular(L_old, fb[(v, w)], upper=False, left=False) @ L_new
                _assign(family.offdiag, f"e{k_edge}", L_vw * s_new)
            family.set_node(w, m_new, L_new)
        else:
            C_new = torch.cholesky_inverse(L_new)
            family.set_node(w, m_new, torch.linalg.cholesky(C_new))
        return float((m_new - m_old).norm() / (m_old.norm() + 1))


class GaussianNaturalGradient:
    """Damped natural-gradient steps on the whole Gaussian inducing posterior of a structured guide.

    For ``q(V) = N(m, Σ)`` with natural parameters ``(Λm, -½Λ)``, ``Λ = Σ⁻¹``, the natural gradient of the
    ELBO ``L`` is its ordinary gradient with respect to the expectation parameters ``(m, mmᵀ + Σ)``, so a step
    of size ``γ`` is (Khan & Lin 2017; Salimbeni, Eleftheriadis & Hensman 2018, Eq. 5):

        Λ ← Λ - 2γ ∂L/∂Σ,          Λm ← Λm + γ (∂L/∂m - 2 (∂L/∂Σ) m),

    with ``(∂L/∂m, ∂L/∂Σ)`` the reparameterisation gradients of the ELBO estimator (DAGELBO by default:
    the paper's marginal sampler, digest-000 §2.7). With a Gaussian likelihood and ``γ = 1`` the step lands
    on the conjugate optimum; with latent parents it follows the Fisher geometry, in which the slow directions
    of Adam on the collider (the parents' explaining-away direction, which shares its scale with their
    tightly constrained sum) are as easy as the fast ones.

    The update keeps the guide's structure: ``∂L/∂Σ`` is masked to the blocks the family has (the diagonal
    blocks for mean field; the diagonal blocks and the edges of the chordal graph ``H`` for the structured
    family, on which the ELBO's dependence on ``Σ`` lives, digest-000 §2.2), so ``Λ`` keeps the support of
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
        that keeps ``Λ ⪰ (1-γ) Λ + γ I`` on a complete ``H``. It steadies the first steps from a poor guide,
        but clipping the noise biases the precision upwards: on the collider the parents' explaining-away
        variance grows back only slowly (0.045 after 2500 steps instead of 0.15), so it is off by default.
    :param float max_kl: a trust region: ``γ`` is halved (up to 20 times, then the step is skipped) until
        ``KL(q_new || q_old) ≤ max_kl`` nats, bounding how far one noisy step can move ``q``. ``None``
        (default): no limit. On the collider it did not rescue the one run that went wrong when the natural
        steps started after 500 Adam steps (seed 2 ends at ELBO -17466 with ``max_kl = 1``, -17296 without);
        starting after 1000 did (10 of 10 seeds).
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
        prefix = self.guide._pyro_name + ".family"
        family = self.guide.family
        out = set()
        for b in family.blocks:
            for part in ("locs", "scales", "unit_trils"):
                out.add(f"{prefix}.{part}.{b.node}")
        for k in range(len(getattr(family, "edges", ()))):
            out.add(f"{prefix}.offdiag.e{k}")
        return out

    def optim_args(self, args):
        """A per-parameter argument callable for ``pyro.optim`` that freezes (``lr = 0``) what this step sets."""
        return _freezing_optim_args(self.param_names(), args)

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
        ``∂KL/∂m = m``, ``∂KL/∂Σ = ½(I - Λ)`` (digest-000 Eq. 92).

        :returns: ``(loss, ∂L/∂m [P], ∂L/∂Σ [P, P], Λ [P, P], m [P])``, ``L`` the ELBO, at the current guide.
        """
        family = self.guide.family
        with torch.no_grad():
            L = family.dense_tril()
            m0 = family.loc().detach().clone()
            lam0 = L @ L.T
            cov0 = torch.cholesky_inverse(L)
            kl = 0.5 * (cov0.diagonal().sum() + m0.pow(2).sum() - m0.shape[0] + 2 * L.diagonal().log().sum())
        m = m0.clone().requires_grad_(True)
        cov = cov0.clone().requires_grad_(True)
        with substituted_posterior(family, _MomentPosterior(family.blocks, m, cov, kl)):
            loss = self.elbo.differentiable_loss(self.model, self.guide, *args, **kwargs)
        g_m, g_cov = torch.autograd.grad(-loss, [m, cov])            # of the expected log-likelihood
        eye = torch.eye(m0.shape[0], dtype=m0.dtype, device=m0.device)
        return loss, g_m - m0, g_cov - 0.5 * (eye - lam0), lam0, m0

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
        at the parameters before the step."""
        family = self.guide.family
        structured = isinstance(family, StructuredFamily)
        if structured and self._conditional_dagelbo():
            loss, g_m, g_cov, lam0, m0 = self._moment_gradients(args, kwargs)
        else:
            loss, g_m, g_cov, lam0, m0 = self._parameter_gradients(args, kwargs)
        with torch.no_grad():
            chol0 = None if self.max_kl is None else torch.linalg.cholesky(lam0)
            g_cov = 0.5 * (g_cov + g_cov.T) * self._mask
            eye = torch.eye(lam0.shape[0], dtype=lam0.dtype, device=lam0.device)
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
                    if self.max_kl is None or _gaussian_kl(m_new, chol, m0, chol0) <= self.max_kl:
                        break
                gamma *= 0.5
            else:
                self.last_step_size = 0.0
                return loss.item()
            self._write(m_new, lam, chol)
        self.last_step_size = gamma
        return loss.item()


class _MomentPosterior(DenseGaussianPosterior):
    """``N(m, Σ)`` given by its moments, for one evaluation of DAGELBO with the conditional sampler, which reads
    only ``loc`` and ``covariance`` (Algorithm 1): differentiating with respect to a leaf ``Σ`` gives ``∂E/∂Σ``
    without a Cholesky factorisation and its backward pass. :meth:`kl` is the KL's value only (no gradient):
    :class:`GaussianNaturalGradient` adds the KL's exact gradient, ``(m, ½(I - Λ))``, itself.
    """

    def __init__(self, blocks, loc, covariance, kl_value):
        InducingPosterior.__init__(self, blocks)
        self.loc = loc
        self._cov = covariance
        self._kl_value = kl_value

    def kl(self):
        return self._kl_value

    def _unsupported(self, *args, **kwargs):
        raise NotImplementedError("a moment-form posterior serves DAGELBO's conditional sampler only")

    rsample = log_prob = _joint_centred = _joint_precision_row = joint_state = _unsupported


def _gaussian_kl(m1, chol1, m0, chol0):
    """``KL(N(m1, Λ1⁻¹) || N(m0, Λ0⁻¹))`` from the precision Cholesky factors ``Λ = L Lᵀ`` (``[P]``, ``[P, P]``)."""
    a = torch.linalg.solve_triangular(chol1, chol0, upper=False)          # L1⁻¹ L0: tr(Λ0 Σ1) = ||a||²
    d = chol0.T @ (m1 - m0)                                                # (m1-m0)ᵀ Λ0 (m1-m0) = ||d||²
    logdet = 2 * (chol1.diagonal().log().sum() - chol0.diagonal().log().sum())
    return float(0.5 * (a.pow(2).sum() + d.pow(2).sum() - m1.shape[0] + logdet))
