"""Roll a diverging Adam phase back to its last healthy state, with half the learning rate.

A DAG deep GP whose likelihood has become sharp (a noise variance near the truth) is a stiff problem for Adam's
fixed step: on the latent collider of Perlino et al. (2026, arXiv:2607.09645, Sec. 4.1) with learned kernels,
runs at lr 0.01 and 0.02 reached a held-out child RMSE of 0.07 and then, once the child's noise had fallen to
2-3x the truth, one noisy step raised the loss by tens of nats and the following steps, each following the
gradient, raised it further (from -25 to 3e5 within 30 steps: every kernel's length-scale and the guide's scales
moved by tens of percent), never to come back. Clipping gradient spikes (:mod:`~pyro_dag.infer.training.adam`)
does not prevent this: the gradients are not outliers, the step is too long for the curvature.

:class:`DivergenceRollback` watches the loss of the Adam steps. Every ``window`` steps it records the window's mean
and spread and, if the window was healthy, a snapshot of the parameters (Pyro's parameter store) and of Adam's
moments. When the median loss of the last ``probe`` steps exceeds the last healthy window's mean by more than
``max(sigmas · sd, relative · |mean|, absolute)``, the run goes back to that snapshot and Adam's learning rate is
halved (a backtracking line search on the phase, as in Nocedal & Wright 2006, Sec. 3.1, with the snapshot as the
point to return to). The median of several steps keeps one unlucky Monte Carlo sample from triggering it; a run that
never diverges takes exactly the steps it took before.
"""
import statistics

import torch

from .checkpoint import capture_params, restore_params

__all__ = ["DivergenceRollback", "RollbackWarning"]


class RollbackWarning(RuntimeWarning):
    """The loss of a training run rose sharply; the run went back to its last healthy state with a smaller step."""


def _clone(obj):
    if torch.is_tensor(obj):
        return obj.detach().clone()
    if isinstance(obj, dict):
        return {k: _clone(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_clone(v) for v in obj)
    return obj


class DivergenceRollback:
    """Backtracking for the Adam steps of a run (module docstring).

    :param int window: steps per window (its mean and spread are the reference; default 50).
    :param int probe: steps whose median is compared with the reference (default 10).
    :param float sigmas: ``sigmas · sd`` tolerance (default 5). :param float relative: ``relative · |mean|``
        tolerance (default 0.1). :param float absolute: tolerance in nats (default 20).
    :param int max_rollbacks: rollbacks allowed in one run (default 6; each halves the learning rate).

    :ivar int rollbacks: rollbacks so far. :ivar list events: ``(step, back to step, new lr factor)`` per rollback.
    """

    def __init__(self, *, window=50, probe=10, sigmas=5.0, relative=0.1, absolute=20.0, max_rollbacks=6):
        self.window, self.probe = int(window), int(probe)
        self.sigmas, self.relative, self.absolute = float(sigmas), float(relative), float(absolute)
        self.max_rollbacks = int(max_rollbacks)
        self.buffer, self.recent = [], []
        self.reference = None          # (mean, sd) of the last healthy window
        self.snapshot = None           # (step, params, adam state)
        self.rollbacks = 0
        self.lr_factor = 1.0
        self.base_lrs = None
        self.events = []

    def tolerance(self):
        mean, sd = self.reference
        return max(self.sigmas * sd, self.relative * abs(mean), self.absolute)

    def observe(self, step, loss, adam):
        """Record the loss of Adam step ``step``; at a window's end take a snapshot if it was healthy.

        :param adam: the :class:`~pyro_dag.infer.training.JointAdam` of the step (its moments go in the snapshot).
        :returns: ``True`` if the run should roll back now (call :meth:`roll_back`).
        """
        loss = float(loss)
        self.recent = (self.recent + [loss])[-self.probe:]
        self.buffer.append(loss)
        if (self.reference is not None and self.snapshot is not None and len(self.recent) == self.probe
                and self.rollbacks < self.max_rollbacks):
            if not statistics.median(self.recent) <= self.reference[0] + self.tolerance():
                return True
        if len(self.buffer) >= self.window:
            values, self.buffer = self.buffer, []
            mean = sum(values) / len(values)
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            healthy = self.reference is None or mean <= self.reference[0] + self.tolerance()
            if healthy and adam is not None and adam.optim is not None:
                if self.base_lrs is None:
                    self.base_lrs = [group["lr"] for group in adam.optim.param_groups]
                self.reference = (mean, sd)
                self.snapshot = (step, capture_params(), _clone(adam.state_dict()))
        return False

    def seed(self, step, params, adam_state, reference, adam):
        """Take a known healthy state as the snapshot and its window's ``(mean, sd)`` as the reference (after the
        natural-gradient guard restored its best state, so that an Adam step that diverges from there at once is
        rolled back instead of running on until a window of its own is healthy)."""
        self.buffer, self.recent = [], []
        self.reference = (float(reference[0]), float(reference[1]))
        self.snapshot = (step, params, _clone(adam_state))
        if self.base_lrs is None and adam is not None and adam.optim is not None:
            self.base_lrs = [group["lr"] for group in adam.optim.param_groups]

    def reset(self):
        """Forget the reference and the snapshot (the steps between are not Adam's: a natural-gradient phase moves
        the posterior to where the old snapshot would undo its work)."""
        self.buffer, self.recent, self.reference, self.snapshot = [], [], None, None

    def roll_back(self, step, adam):
        """Restore the snapshot's parameters and Adam moments and halve Adam's learning rate.

        :returns: ``(back to step, lr factor now)``.
        """
        back, params, state = self.snapshot
        restore_params(params, ignore_missing=("MeanFieldWarmStart",))
        adam.load_state_dict(_clone(state))
        self.rollbacks += 1
        self.lr_factor *= 0.5
        for group, base in zip(adam.optim.param_groups, self.base_lrs):
            group["lr"] = base * self.lr_factor
        self.buffer, self.recent = [], []
        self.events.append((step, back, self.lr_factor))
        return back, self.lr_factor

    def state(self):
        """A picklable state for checkpoints."""
        return {k: getattr(self, k) for k in ("window", "probe", "sigmas", "relative", "absolute", "max_rollbacks",
                                               "buffer", "recent", "reference", "snapshot", "rollbacks",
                                               "lr_factor", "base_lrs", "events")}

    @classmethod
    def from_state(cls, state):
        """Rebuild from :meth:`state`."""
        tracker = cls.__new__(cls)
        for k, v in state.items():
            setattr(tracker, k, list(v) if k in ("buffer", "recent", "events") else v)
        return tracker
