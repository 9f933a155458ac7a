"""The best iterate of a run: a stochastic-gradient run that ends worse than it was is handed back at its best.

Beyond the guard of the natural-gradient phase (:class:`~pyro_dag.infer.training.guard.NaturalGradientGuard`),
which restores the best parameters when that phase makes the loss worse, a run can also degrade under Adam (a
noise variance drifting back to the all-noise optimum after a sampled spike, a kernel collapsing): on the latent
collider of Perlino et al. (2026, arXiv:2607.09645, Sec. 4.1) with learned kernels, runs of 3000 steps ended with a
loss 500-3000 nats above their best window and a held-out error ten times larger. :class:`BestIterate` keeps the
parameters of the window of steps with the lowest mean loss; at the end of the run, if the last window is worse
than that by more than the windows' noise, :func:`~pyro_dag.infer.train` restores them (and says so in
:attr:`~pyro_dag.infer.training.TrainResult.restored_step` and a :class:`BestIterateWarning`).
"""
import math

from .checkpoint import capture_params, restore_params

__all__ = ["BestIterate", "BestIterateWarning"]


class BestIterateWarning(RuntimeWarning):
    """A training run ended worse than its best window of steps, whose parameters were restored."""


class BestIterate:
    """Track the window of ``window`` consecutive steps with the lowest mean loss and the parameters after it.

    Each loss is the estimator's at the parameters before its step, so a window's mean scores the parameters it
    passed through; the parameters kept are those after its last step. :meth:`worse_at_end` compares the last
    window with the best by ``max(3 · sd, relative · |best|)``, ``sd`` the standard deviation of the losses within
    the best window (a run that merely fluctuates around its optimum is left as it is).

    :param int window: steps per window (default 50). :param float relative: relative tolerance (default 0.05).
    :param int start: steps before the tracking starts (the first windows of a run from a fresh start are never the
        best, and capturing them costs a copy of the parameters each).
    """

    def __init__(self, *, window=50, relative=0.05, start=0):
        self.window, self.relative, self.start = int(window), float(relative), int(start)
        self.buffer = []
        self.best = math.inf
        self.best_sd = 0.0
        self.best_step = None
        self.best_params = None
        self.last = math.inf

    def observe(self, step, loss):
        """Record the loss of step ``step`` (1-based); at the end of a window keep its parameters if it is the best."""
        if step <= self.start:
            return
        self.buffer.append(float(loss))
        if len(self.buffer) < self.window:
            return
        values, self.buffer = self.buffer, []
        mean = sum(values) / len(values)
        self.last = mean
        if math.isfinite(mean) and mean < self.best:
            self.best, self.best_step, self.best_params = mean, step, capture_params()
            self.best_sd = math.sqrt(sum((v - mean) ** 2 for v in values) / max(1, len(values) - 1))

    @property
    def tolerance(self):
        """``max(3 · sd, relative · |best|)``."""
        return max(3 * self.best_sd, self.relative * abs(self.best)) if math.isfinite(self.best) else math.inf

    def worse_at_end(self):
        """Whether the last complete window is worse than the best by more than :attr:`tolerance` (or not finite)."""
        if self.best_params is None:
            return False
        return not math.isfinite(self.last) or self.last > self.best + self.tolerance

    def restore(self):
        """Copy the best window's parameters back into Pyro's parameter store (in place)."""
        restore_params(self.best_params, ignore_missing=("MeanFieldWarmStart",))

    def state(self):
        """A picklable state for checkpoints."""
        return {k: getattr(self, k) for k in ("window", "relative", "start", "buffer", "best", "best_sd",
                                               "best_step", "best_params", "last")}

    @classmethod
    def from_state(cls, state):
        """Rebuild from :meth:`state` (without touching the parameter store)."""
        tracker = cls.__new__(cls)
        for k, v in state.items():
            setattr(tracker, k, list(v) if k == "buffer" else v)
        return tracker
