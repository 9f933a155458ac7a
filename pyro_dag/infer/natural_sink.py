"""SinkNaturalGradient: closed-form natural-gradient steps on the Gaussian-likelihood sinks of a DAGDGP guide.

Beyond the DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645).

The ELBO of a deep GP is slow to optimise with Adam alone: the inducing outputs of an observed node with a
small noise variance sit in a narrow, badly conditioned valley. For a node ``w`` that feeds no other node and has a Gaussian likelihood, the part of the ELBO that
depends on ``q(V_w | V_rest)`` is conjugate: with the rest of the guide fixed, the best Gaussian conditional
has a closed form. :class:`SinkNaturalGradient` takes a damped step towards it, which is the natural-gradient
step of Salimbeni, Eleftheriadis & Hensman (2018, "Natural gradients in practice", AISTATS) for the last
layer of a deep GP, extended to the structured guide (DAG-SVI), where the sink is coupled to its neighbours
in ``H``. The other parameters stay with Adam (exclude the sink's from it with :meth:`optim_args`).

The step, for a sink ``w`` with ``F_{w,b} = a_bᵀ V_w + √r_b ε`` (the whitened conditional, Eq. 80 of the paper), observations ``y`` with
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
import torch

from ..gp.likelihoods import Gaussian
from .autoguide.families import StructuredFamily
from .autoguide.samplers import JointSampleState, MeanFieldState
from .checks import LIKELY_CAUSES, NonFiniteLossError
from ..dgp.handoff import suspended
from .marginal import marginal_pass
from .natural import family_param_names, freezing_optim_args

__all__ = ["SinkNaturalGradient"]


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
        self.num_steps = 0

    # ------------------------------------------------------------------ parameters
    def param_names(self):
        """Names (in Pyro's parameter store) of the parameters this step sets: each sink's mean and diagonal block."""
        return family_param_names(self.guide.family, self.nodes)

    def optim_args(self, args):
        """A per-parameter argument callable for ``pyro.optim`` that freezes (``lr = 0``) what this step sets.

        :param dict args: the optimiser's arguments for every other parameter, e.g. ``{"lr": 0.01}``.
        """
        return freezing_optim_args(self.param_names(), args)

    # ------------------------------------------------------------------ the step
    @torch.no_grad()
    def step(self, inputs, data, mask=None, subsample_size=None):
        """One damped natural-gradient step on every sink in :attr:`nodes`.

        :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d]}`` (NaN = missing).
        :param dict mask: optional observation masks, as for the model.
        :param int subsample_size: use a random minibatch of cases (the data term is scaled by ``n / B``).
        :returns: dict with ``{node: |Δm| / (|m| + 1)}`` relative change of each sink's mean.
        :raises NonFiniteLossError: naming the node and the step (counted from 1 per instance), if the update is
            not finite; the guide is then left unchanged for that node.
        """
        model, family = self.model, self.guide.family
        self.num_steps += 1
        X, n, obs = model.checked_arguments(inputs, data, mask)
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
            passes = marginal_pass(model, posterior, X, S, idx, cache, state=state)
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
            c = state.conditional_offset(w)                                  # [S, B, d, M]
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
        L_new, info = torch.linalg.cholesky_ex(P_new)
        m_new = torch.cholesky_solve(theta.unsqueeze(-1), L_new).squeeze(-1)
        if int(info) != 0 or not bool(torch.isfinite(m_new).all()):
            raise NonFiniteLossError(
                f"SinkNaturalGradient step {self.num_steps}: the update of node {w!r} is not finite (its precision "
                f"is not positive definite or its mean has NaN/inf entries). {LIKELY_CAUSES}")
        if structured:
            # keep the regression on the neighbours, B = -L_ww⁻ᵀ L_vwᵀ: L_vw ← L_vw L_old⁻¹ L_new
            family.set_node(w, m_new, L_new)
            for v, u in family.edges:
                if u == w:
                    L_vw = torch.linalg.solve_triangular(L_old, fb[(v, w)], upper=False, left=False) @ L_new
                    family.set_offdiagonal_block(v, w, L_vw)
        else:
            C_new = torch.cholesky_inverse(L_new)
            family.set_node(w, m_new, torch.linalg.cholesky(C_new))
        return float((m_new - m_old).norm() / (m_old.norm() + 1))
