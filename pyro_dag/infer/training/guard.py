"""Guards of :func:`~pyro_dag.infer.training.train` against silent divergence.

Beyond the DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645), which trains with
Adam only. The natural-gradient steps of the recommended recipe (Salimbeni, Eleftheriadis & Hensman 2018, Eq. 5)
use a Monte Carlo estimate of the likelihood's curvature ``-2 ∂E[log p(y | V)]/∂Σ``. For sinks with a Gaussian
likelihood and observed inputs it is positive semi-definite; for nodes whose inputs are sampled (latent parents,
latent per-case inputs) it is not, and a step can push the precision towards singularity: the posterior then
spreads along a direction the data pin down, the expected log-likelihood collapses, and Adam raises the noise
variances to explain the residuals. Two guards, both on by default:

* a trust region on each natural-gradient step (:data:`DEFAULT_NATURAL_GRADIENT_MAX_KL` nats, see
  :class:`~pyro_dag.infer.GaussianNaturalGradient`);
* :class:`NaturalGradientGuard`: the mean loss over windows of :attr:`~NaturalGradientGuard.window` steps is
  compared with the best window so far (the last Adam window before the phase included); a window worse by more
  than the tolerance restores the parameters of the best window and hands the rest of the run to Adam, with a
  :class:`NaturalGradientDivergenceWarning` naming the step and the node whose noise variance grew most.

:func:`noise_warnings` checks, after a run, that no Gaussian node's noise variance exceeds twice the variance of
its training data (a fit worse than a constant), naming the node; :func:`signal_warnings` that no node's noise
explains most of its variance where a plain GP on its observed inputs explains far more.
"""
import math
import warnings

import torch

from ...dgp.scale import scale_hint
from .checkpoint import capture_params, restore_params
from .rollback import _clone

__all__ = ["NaturalGradientGuard", "NaturalGradientDivergenceWarning", "NoiseRunawayWarning", "noise_variances",
           "noise_warnings", "NoiseExplainsDataWarning", "signal_warnings", "noise_took_signal", "DEFAULT_NATURAL_GRADIENT_MAX_KL"]

#: Default trust region (nats) of one natural-gradient step of the recommended recipe: on the paper's collider
#: the largest step moves ``q`` by 1.08 nats (5 optimisation seeds, 2000 steps each), so the limit never binds
#: there; on the Sachs extrapolation split 0 without it a step of ``γ = 0.01`` moved ``q`` by 6.1 nats and the
#: loss rose from 1.3e4 to 4.3e6 in 100 steps.
DEFAULT_NATURAL_GRADIENT_MAX_KL = 2.0


class NaturalGradientDivergenceWarning(RuntimeWarning):
    """The natural-gradient phase of :func:`~pyro_dag.infer.training.train` made the loss worse and was stopped."""


class NoiseRunawayWarning(RuntimeWarning):
    """A node's fitted noise variance exceeds twice the variance of its training data."""


def noise_variances(dgp):
    """``{node: mean noise variance (float)}`` of the nodes of ``dgp`` whose likelihood has a ``variance``."""
    out = {}
    if dgp is None:
        return out
    for w, lik in dgp.likelihoods.items():
        var = getattr(lik, "variance", None)
        if torch.is_tensor(var):
            out[w] = float(var.detach().mean())
    return out


class NaturalGradientGuard:
    """Stops a natural-gradient phase whose loss gets worse, restoring the best parameters seen.

    The losses of consecutive windows of ``window`` steps are averaged (each loss is the estimator's at the
    parameters before its step). The reference is the last window of Adam steps before the phase, with the
    parameters at the phase's start; after each window of the phase the best window mean and its parameters
    (Pyro's parameter store, :func:`~pyro_dag.infer.training.capture_params`) are kept. A window whose mean
    exceeds the best by more than ``max(3 · sd, relative · |best|)``, ``sd`` the standard deviation of the
    losses within the reference window, is a divergence: :meth:`observe` restores the best parameters and
    returns ``True``. Given the Adam optimiser of the other parameters (``adam``, kernel hyperparameters, noise and
    inducing inputs, stepped beside the natural-gradient steps), its moments are kept and restored with the
    parameters: the moments of the diverging window point the way the divergence went, and Adam's first steps after
    a restore of the parameters alone followed them (the latent collider, data set 0, stream 3: the restored state's
    loss 36, then 813 after one Adam step, and the run never came back: held-out RMSE 0.146 against 0.06-0.07).

    :param int window: steps per window (default 50). :param float relative: relative tolerance (default 0.05).
    :param dict noise: ``{node: noise variance}`` at the start of the phase (for the warning).
    :param int start_step: the step after which the parameters the guard holds first were taken (the phase's first
        step minus one); the phase sets it on its first step when not given. It is part of :meth:`state`, so a run
        resumed from a checkpoint names, and rolls back to, the same step as the uninterrupted run.

    :ivar int stopped_at: the step at which the guard fired (``None`` while it has not).
    """

    def __init__(self, reference_losses, *, window=50, relative=0.05, noise=None, adam=None, start_step=None):
        if not (isinstance(window, int) and window >= 2):
            raise ValueError(f"window must be an integer >= 2, got {window!r}")
        ref = [float(x) for x in reference_losses][-window:]
        self.window, self.relative = window, float(relative)
        self.best = sum(ref) / len(ref) if ref else math.inf
        self.sd = _sd(ref)
        self.best_step = None
        self.start_step = start_step
        self.best_params = capture_params()
        self.adam = adam
        self.best_adam = _adam_state(adam)
        self.noise = dict(noise or {})
        self.buffer = []
        self.stopped_at = None

    @property
    def restored_step(self):
        """The step whose parameters a firing restores: the best window's last step, else :attr:`start_step`."""
        return self.best_step if self.best_step is not None else self.start_step

    @property
    def tolerance(self):
        """``max(3 · sd, relative · |best|)`` (``inf`` before there is a reference)."""
        if not math.isfinite(self.best):
            return math.inf
        return max(3 * self.sd, self.relative * abs(self.best))

    def observe(self, step, loss):
        """Record the loss of natural-gradient step ``step``; at the end of a window compare and keep or restore.

        :returns: ``True`` if the phase diverged (the best parameters are then back in the store).
        """
        self.buffer.append(float(loss))
        if len(self.buffer) < self.window:
            return False
        mean = sum(self.buffer) / len(self.buffer)
        self.buffer = []
        if not math.isfinite(self.best) or mean < self.best:
            self.best, self.best_step, self.best_params = mean, step, capture_params()
            self.best_adam = _adam_state(self.adam)
            return False
        if mean > self.best + self.tolerance or not math.isfinite(mean):
            self.stopped_at = step
            self._mean = mean
            restore_params(self.best_params, ignore_missing=("MeanFieldWarmStart",))
            if self.adam is not None and self.best_adam is not None:
                self.adam.load_state_dict(_clone(self.best_adam))
            return True
        return False

    def message(self, name, noise_now):
        """The warning's text: step, window means, the restored state and the noise variance that grew most."""
        grown = {w: noise_now[w] / self.noise[w] for w in noise_now if w in self.noise and self.noise[w] > 0}
        worst = ""
        if grown:
            w = max(grown, key=grown.get)
            worst = (f" The noise variance that grew most is node {w!r}'s: {self.noise[w]:.4g} -> {noise_now[w]:.4g} "
                     f"(x{grown[w]:.3g}) during the phase.")
        where = "the phase's start" if self.best_step is None else f"step {self.best_step}"
        return (f"{name}, step {self.stopped_at}: the natural-gradient steps made the loss worse (mean of the last "
                f"{self.window} steps {self._mean:.6g} against the best {self.best:.6g}, tolerance "
                f"{self.tolerance:.3g}).{worst} Restored the parameters of {where} and continued with Adam only. "
                "Pass natural_gradient=0 to skip the phase, or a smaller natural_gradient_max_kl / natural_gradient.")

    def state(self):
        """A picklable state for checkpoints."""
        return {"window": self.window, "relative": self.relative, "best": self.best, "sd": self.sd,
                "best_step": self.best_step, "best_params": self.best_params, "best_adam": self.best_adam,
                "noise": self.noise, "start_step": self.start_step,
                "buffer": list(self.buffer), "stopped_at": self.stopped_at, "mean": getattr(self, "_mean", None)}

    @classmethod
    def from_state(cls, state):
        """Rebuild from :meth:`state` (without touching the parameter store)."""
        guard = cls.__new__(cls)
        guard.window, guard.relative, guard.best, guard.sd = (state["window"], state["relative"], state["best"],
                                                              state["sd"])
        guard.best_step, guard.best_params, guard.noise = state["best_step"], state["best_params"], state["noise"]
        guard.start_step = state.get("start_step")   # (checkpoints before it was recorded: set again on resume)
        guard.adam, guard.best_adam = None, state.get("best_adam")   # the phase sets .adam before each observe
        guard.buffer, guard.stopped_at = list(state["buffer"]), state["stopped_at"]
        if state["mean"] is not None:
            guard._mean = state["mean"]
        return guard


def _adam_state(adam):
    """A detached copy of ``adam``'s state (moments and step counts), or ``None`` without an optimiser or moments."""
    return None if adam is None else _clone(adam.state_dict())


def _sd(values):
    if len(values) < 2:
        return 0.0
    m = sum(values) / len(values)
    return math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))


def noise_warnings(dgp, data, name="train", factor=2.0, inputs=None):
    """Warn (:class:`NoiseRunawayWarning`) for each observed node whose mean noise variance exceeds ``factor``
    times the variance of its observed training values, naming the node: the fit is then worse than predicting
    the data's mean, the signature of a diverged run.

    :param dgp: a :class:`~pyro_dag.DAGDGP` (or ``None``: nothing to check). :param dict data: ``{node: [n, d]}``
        (NaN = missing). :param dict inputs: the training inputs (to name a scale far from 1 as the cause).
        :returns: the list of the nodes warned about.
    """
    flagged = []
    if dgp is None or not isinstance(data, dict):
        return flagged
    for w, tau2 in noise_variances(dgp).items():
        y = data.get(w)
        if not torch.is_tensor(y):
            continue
        y = y.detach().reshape(y.shape[0], -1)
        var = []
        for j in range(y.shape[1]):
            col = y[:, j][~torch.isnan(y[:, j])]
            if col.numel() >= 2:
                var.append(float(col.var()))
        if not var:
            continue
        data_var = sum(var) / len(var)
        if data_var > 0 and tau2 > factor * data_var:
            flagged.append(w)
            warnings.warn(f"{name}: node {w!r} ended with noise variance {tau2:.4g}, {tau2 / data_var:.3g} times the "
                          f"variance of its training data ({data_var:.4g}): its fit is worse than its mean, which "
                          "signals a diverged run. Check the loss history; try recipe='adam', a smaller lr, or "
                          "likelihood_lr_multiplier < 1." + scale_hint(dgp, w, inputs, data), NoiseRunawayWarning,
                          stacklevel=3)
    return flagged


class NoiseExplainsDataWarning(UserWarning):
    """A node's fitted noise explains most of its variance while a plain GP on its observed inputs explains far more:
    the DAG-DGP fits noise instead of signal."""


def noise_took_signal(dgp, most=0.5, far_more=4.0):
    """The observed Gaussian nodes of ``dgp`` whose fitted noise variance is more than ``most`` of their data's
    variance while the pilot exact GP of the noise rule left less than ``1 / far_more`` of that fraction to noise:
    ``{node: (fitted fraction, pilot fraction)}`` (:func:`signal_warnings` warns about them)."""
    flagged = {}
    choices = getattr(dgp, "noise_choices", None) or {}
    noise = noise_variances(dgp) if choices else {}
    for w, choice in choices.items():
        choice = choice[0] if isinstance(choice, list) else choice
        if w not in noise or not choice.data_variance > 0:
            continue
        fitted = noise[w] / choice.data_variance
        if fitted > most and choice.pilot_fraction * far_more < fitted:
            flagged[w] = (fitted, choice.pilot_fraction)
    return flagged


def signal_warnings(dgp, name="train", most=0.5, far_more=4.0, inputs=None, data=None):
    """Warn (:class:`NoiseExplainsDataWarning`) for each observed Gaussian node whose fitted noise variance is more
    than ``most`` of its data's variance while the pilot exact GP of the noise rule (:mod:`pyro_dag.gp.noise`, fitted
    at set-up on the node's observed parents or ancestral roots) left less than ``1 / far_more`` of that fraction to
    noise.

    :param dgp: a :class:`~pyro_dag.DAGDGP` (or ``None``). :returns: ``{node: (fitted fraction, pilot fraction)}`` of
        the nodes warned about.
    """
    flagged = noise_took_signal(dgp, most, far_more)
    for w, (fitted, pilot_fraction) in flagged.items():
        choice = dgp.noise_choices[w]
        choice = choice[0] if isinstance(choice, list) else choice
        warnings.warn(f"{name}: node {w!r} ended with its noise explaining {100 * min(fitted, 1):.0f} % of its "
                      f"variance, while an exact GP on its observed {choice.inputs} leaves "
                      f"{100 * pilot_fraction:.1f} % to noise: the DAG-DGP fits noise instead of signal. "
                      "Compare it with that baseline (pyro_dag.baselines), and try more steps, restarts with other "
                      "seeds, kernels that keep the roots (kernels.InputConnected), or fewer hidden nodes."
                      + scale_hint(dgp, w, inputs, data), NoiseExplainsDataWarning, stacklevel=3)
    return flagged
