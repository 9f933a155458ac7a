"""A one-sided closed-form step on the noise of each observed Gaussian node: the noise follows the fit down.

For a node ``w`` with a Gaussian likelihood ``y ~ N(f, τ²)``, the ELBO depends on ``τ²`` only through its expected
log-likelihood, ``-(n/2) log τ² - Σ_i E_q[(y_i - f_i)²] / (2 τ²)`` (``n`` observed entries, ``f`` the node's values
under the guide's marginal ancestral sampling; Perlino et al. 2026, arXiv:2607.09645, Prop. 9), which is unimodal in
``τ²`` with its maximum at ``τ²* = mean_i E_q[(y_i - f_i)²]``: the M-step of variational EM for the noise. Every
:data:`EVERY` Adam steps, :class:`NoiseStep` estimates ``τ²*`` by Monte Carlo (:data:`NUM_SAMPLES` draws of the
model's predictive, on at most :data:`MAX_CASES` cases) and, **only where it lies below the current ``τ²``**, sets
the noise to it and clears that parameter's Adam momentum. Moving towards a unimodal optimum without passing it
raises the ELBO (up to the Monte Carlo error of ``τ²*``).

Why: on the latent collider with default kernels (``DAGDGP(ds.graph)``, ``benchmarks/collider_default_streams.py``)
Adam moves ``log τ²`` by at most ``lr`` per step and, with noisy gradients, about a quarter of that; the child's noise
lagged the fit by over a thousand steps (noise sd 0.12 at step 1500 against 0.015 in truth, held-out RMSE 0.11; the
same run with this step: 0.024 and 0.058). Why one-sided: the two-sided step (the plain M-step) set the noise to the
residual of the first, poor fit and kept it there: the noise took the signal (held-out 0.86, the mean predictor's
error). A noise that only follows the fit down never takes the signal it did not already hold; rising is left to
Adam's small steps, as before.

Nodes left to Adam: those whose noise is held (exactly fitted, frozen, fixed), has a hyperprior, or belongs to a
model with latent inputs (their predictive depends on ``q(h)``, which the model's predictive does not draw).
"""
import torch
from torch.distributions import transform_to

from ...gp.likelihoods import Gaussian
from .checkpoint import capture_rng_state, restore_rng_state

__all__ = ["NoiseStep", "check_noise_step", "EVERY", "NUM_SAMPLES", "MAX_CASES"]

#: Adam steps between two noise steps.
EVERY = 50
#: Monte Carlo draws of the predictive for ``τ²*``.
NUM_SAMPLES = 32
#: At most this many cases (evenly spaced, always the same ones) enter ``τ²*``.
MAX_CASES = 2000


class NoiseStep:
    """One-sided closed-form noise steps for the observed Gaussian nodes of a :class:`~pyro_dag.DAGDGP` (module
    docstring).

    :param model: the set-up DAGDGP. :param guide: its guide (anything :meth:`~pyro_dag.DAGDGP.predict` takes).
    :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d_w]}``, NaN = missing.
    :param mask: optional ``{node: [n, d_w] bool}`` as given to :func:`~pyro_dag.infer.train`.
    :param int every: Adam steps between two noise steps.
    :ivar int taken: the number of node-steps that lowered a noise.
    :ivar str idle: why no node is eligible (the steps then do nothing), or ``None``.
    """

    def __init__(self, model, guide, inputs, data, *, mask=None, every=EVERY):
        self.model, self.guide, self.every = model, guide, int(every)
        self.taken = 0
        _, n, obs = model.checked_arguments(inputs, data, mask)
        rows = torch.linspace(0, n - 1, min(n, MAX_CASES)).round().long().unique() if n > MAX_CASES else None
        self.inputs = {r: (x if rows is None else x[rows]) for r, x in inputs.items()}
        self.observed = {}
        self.idle = None
        if model.latent_inputs:
            self.idle = (f"the model has latent inputs ({list(model.latent_inputs)}), whose q(h) the model's "
                         "predictive does not draw")
            return
        if getattr(model, "priors", None) is not None:
            self.idle = f"the model's hyperparameters have priors (priors={model.priors!r}), not learned values"
            return
        for w, (y, m) in obs.items():
            lik = model.likelihoods.get(w) if hasattr(model.likelihoods, "get") else model.likelihoods[w]
            if type(lik) is not Gaussian or not _learnable(lik):
                continue
            if rows is not None:
                y, m = y[rows.to(y.device)], m[rows.to(m.device)]
            if int(m.sum()) >= 2:
                self.observed[w] = (y, m)
        if not self.observed:
            self.idle = "no observed node has a Gaussian likelihood with a learnable noise and two observed cases"

    def due(self, step):
        """Whether step ``step`` (1-based) is followed by a noise step."""
        return bool(self.observed) and self.every > 0 and step % self.every == 0

    @torch.no_grad()
    def __call__(self, optim=None, held=()):
        """Lower each eligible node's noise to ``τ²*`` where that is below it.

        :param optim: the Adam optimiser whose momentum of a changed noise is cleared (``ForeachAdam`` or
            ``torch.optim.Adam``), or ``None``.
        :param held: ids of unconstrained tensors held fixed (left alone).
        :returns: ``{node: new τ²}`` for the nodes changed.
        """
        nodes = [w for w in self.observed
                 if id(self.model.likelihoods[w].variance_unconstrained) not in set(held)]
        if not nodes:
            return {}
        rng = capture_rng_state()   # the run's random stream is the same as without the step
        try:
            pred = self.model.predict(self.guide, self.inputs, nodes=nodes, num_samples=NUM_SAMPLES)
        finally:
            restore_rng_state(rng)
        changed = {}
        for w in nodes:
            y, m = self.observed[w]
            loc, var = pred[w].loc, pred[w].var                       # [S, n, d]
            sq = torch.where(m, (y - loc) ** 2 + var, torch.zeros_like(loc)).sum(0)   # [n, d]
            lik = self.model.likelihoods[w]
            raw = lik.variance_unconstrained
            constraint = lik._pyro_params["variance"][0]
            current = transform_to(constraint)(raw)
            if current.dim() == 0:
                best = sq.sum() / (m.sum() * loc.shape[0])
            else:
                best = sq.sum(0) / (m.sum(0).clamp_min(1) * loc.shape[0])
                best = torch.where(m.sum(0) > 0, best, current)
            best = best.to(current)
            lower = torch.isfinite(best) & (best > 0) & (best < current)
            if not bool(lower.any()):
                continue
            new = torch.where(lower, best, current)
            raw.copy_(transform_to(constraint).inv(new))
            _clear_momentum(optim, raw)
            changed[w] = new.clone()
            self.taken += 1
        return changed


def check_noise_step(config, model, guide, dgp, dag_guide):
    """Refuse ``train(..., noise_step=True)`` where the noise step cannot run, rather than train without it without a
    word: it needs the :class:`~pyro_dag.DAGDGP` as the model and a guide with its structured part (a data-parallel
    run is refused by :class:`~pyro_dag.infer.training.TrainConfig`: each process holds a shard of the cases).

    :raises ValueError: naming ``noise_step`` and the fix."""
    if config.noise_step is not True:   # "auto" turns itself off where it cannot run
        return
    if dgp is None or dgp is not model:
        what = "not a DAGDGP" if dgp is None else "a larger model holding a DAGDGP"
        raise ValueError(f"train: noise_step=True lowers the noise of a DAGDGP's observed nodes from the DAGDGP's own "
                         f"predictive, and the model is {what} ({type(model).__name__}); pass noise_step=False")
    if not dag_guide:
        raise ValueError("train: noise_step=True needs an AutoStructuredGuide of the DAGDGP (or an AutoGuideList "
                         f"holding one) as the guide, got {type(guide).__name__}; pass noise_step=False")


def _learnable(lik):
    raw = getattr(lik, "variance_unconstrained", None)
    return (isinstance(raw, torch.Tensor) and raw.requires_grad and "variance" in getattr(lik, "_pyro_params", {})
            and "variance" not in getattr(lik, "_pyro_samples", {}))


def _clear_momentum(optim, param):
    """Zero Adam's first moment of ``param`` (its second moment, the gradient's scale, stays valid)."""
    if optim is None:
        return
    moments = getattr(optim, "_moments", None)
    if moments is not None:
        pair = moments.get(id(param))
        if pair is not None:
            pair[0].zero_()
        return
    state = getattr(optim, "state", {}).get(param)
    if state and "exp_avg" in state:
        state["exp_avg"].zero_()
