"""The phases of a :func:`~pyro_dag.infer.train` run, each an object that owns its stepper: the mean-field warm
start, the Adam phase (with the optional conjugate step on the Gaussian sinks) and the natural-gradient phase on
the whole Gaussian inducing posterior (Salimbeni, Eleftheriadis & Hensman 2018, "Natural gradients in practice:
non-conjugate variational inference in Gaussian process models", AISTATS), guarded against divergence.

The run (:class:`~pyro_dag.infer.training.run.TrainingRun`) decides which phase takes each step; the phases read
the run's model, guide, arguments, estimator and settings.
"""
import math
import warnings

import pyro
import torch

from ..autoguide import AutoStructuredGuide
from ..natural_gaussian import GaussianNaturalGradient
from ..natural_sink import SinkNaturalGradient
from .adam import JointAdam
from .guard import NaturalGradientDivergenceWarning, NaturalGradientGuard, noise_variances

__all__ = ["WARM_START_NAME", "WarmStartPhase", "AdamPhase", "NaturalGradientPhase"]

#: Parameter-store prefix of the mean-field guide of a warm start.
WARM_START_NAME = "MeanFieldWarmStart"


class WarmStartPhase:
    """The first ``steps`` steps train a mean-field guide that then initialises the structured guide
    (:meth:`~pyro_dag.infer.autoguide.AutoStructuredGuide.warm_start`).

    :ivar guide: the mean-field guide (``None`` until :meth:`make_guide`).
    """

    def __init__(self, run, steps):
        self.run, self.steps, self.guide = run, steps, None

    def make_guide(self):
        """Build the mean-field guide (under :data:`WARM_START_NAME` in the parameter store)."""
        # a finished warm start of an earlier run leaves its guide's parameters in the store under the same names,
        # which the new guide would silently start from and share (a resumed run restores its own values next)
        store = pyro.get_param_store()
        for stale in [n for n in store.keys() if n.startswith(WARM_START_NAME + ".")]:
            del store[stale]
        run = self.run
        self.guide = AutoStructuredGuide(run.model, precision="mean_field", init_scale=run.guide.init_scale,
                                         name=WARM_START_NAME)

    def hand_over(self):
        """Initialise the run's guide from the mean-field guide."""
        run = self.run
        run.guide(*run.args, **run.kw)
        run.guide.warm_start(self.guide)


class AdamPhase:
    """Adam on every learnable parameter not held (:class:`~pyro_dag.infer.training.JointAdam`), and after each
    Adam step the optional conjugate natural-gradient step on the Gaussian sinks
    (:class:`~pyro_dag.infer.SinkNaturalGradient`).

    :ivar adam: the stepper (``None`` until :meth:`start`). :ivar sink: the sink step, or ``None``.
    """

    def __init__(self, run):
        self.run, self.adam, self.sink = run, None, None

    def start(self, guide, run_guide=True):
        """The Adam stepper (and sink step) for ``guide``, as the phase's first step needs them."""
        run = self.run
        self.adam = JointAdam(run.model, guide, run.elbo if run.dp is None else run.dp.scaled_elbo(),
                              run.optim_args, run.lr_scale, spike_factor=run.config.spike_factor)
        if run.dp is not None:
            self.adam.reduce = run.dp.reduce_gradients
        self.sink = None
        if run.config.sink_step_size:
            if run_guide:
                guide(*run.args, **run.kw)
            self.sink = SinkNaturalGradient(run.dgp, guide, step_size=run.config.sink_step_size,
                                            num_samples=getattr(run.elbo, "num_particles", 4))

    def sink_ids(self):
        """Ids of the parameters the sink step sets (held out of Adam), computed once per sink step object."""
        if self.sink is None:
            return set()
        cached = self.__dict__.get("_sink_cache")
        if cached is None or cached[0] is not self.sink:
            names = self.sink.param_names()
            cached = self._sink_cache = (self.sink, {id(p) for n, p in pyro.get_param_store().named_parameters()
                                                     if n in names})
        return cached[1]

    def step(self, frozen):
        """One Adam step (and sink step) holding ``frozen``; returns the loss."""
        run = self.run
        self.adam.hold = set(frozen) | self.sink_ids()
        loss = self.adam.step(*run.args, **run.kw)
        if self.sink is not None:
            self.sink.step(*run.args, **{k: v for k, v in run.kw.items() if k in ("mask", "subsample_size")})
        return loss


class NaturalGradientPhase:
    """Damped natural-gradient steps of size ``step_size`` on the whole Gaussian inducing posterior
    (:class:`~pyro_dag.infer.GaussianNaturalGradient`) after ``after`` Adam steps of the main phase, with Adam
    (through ``adam_phase``) on every other learnable parameter, evaluated after the natural-gradient step; stopped
    by a :class:`~pyro_dag.infer.training.guard.NaturalGradientGuard` when it makes the loss worse.

    :ivar gauss: the stepper (``None`` until :meth:`make`). :ivar guard: the divergence guard, or ``None``.
    :ivar stopped: the step at which the guard stopped the phase, or ``None``.
    """

    def __init__(self, run, adam_phase, step_size, after, max_kl):
        self.run, self.adam_phase = run, adam_phase
        self.step_size, self.after, self.max_kl = step_size, after, max_kl
        self.gauss = self.guard = self.stopped = None
        self.ids = set()

    def active(self, s):
        """Whether step ``s`` (1-based, warm start included) is a natural-gradient step."""
        run = self.run
        return bool(self.step_size) and s > run.warm and s - run.warm > self.after and self.stopped is None

    def make(self):
        """Build the stepper (running the guide once if its Gaussian does not exist yet) and the guard."""
        run = self.run
        if run.guide.family is None:
            run.guide(*run.args, **run.kw)
        self.gauss = GaussianNaturalGradient(run.model, run.guide, run.elbo, step_size=self.step_size,
                                             max_kl=None if math.isinf(self.max_kl) else self.max_kl)
        if run.config.natural_gradient_guard and self.guard is None:
            self.guard = NaturalGradientGuard(run.result.losses[run.warm:], noise=noise_variances(run.dgp),
                                              adam=self.adam_phase.adam)
        self.ids = {id(p) for p in run.guide.family.parameters()}

    def rest(self, frozen):
        """Learnable parameters outside the natural-gradient step and outside ``frozen`` (cached per ``frozen``)."""
        run = self.run
        key = id(frozen)
        cached = self.__dict__.get("_rest_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        seen = {}
        for p in list(_parameters(run.model)) + list(_parameters(run.guide)):
            seen[id(p)] = p
        for _, p in pyro.get_param_store().named_parameters():
            seen[id(p)] = p
        rest = [p for i, p in seen.items() if p.requires_grad and i not in self.ids and i not in frozen]
        self._rest_cache = (key, rest)
        return rest

    def step(self, s, frozen):
        """Natural-gradient step ``s`` and the Adam step of the other parameters; returns the loss."""
        run = self.run
        if self.gauss is None:
            self.make()
            if self.guard is not None and self.guard.start_step is None:
                self.guard.start_step = s - 1   # the state the guard holds first is the one after step s - 1
        loss = self.gauss.step(*run.args, **run.kw)
        if self.rest(frozen):
            if self.adam_phase.adam is None:
                self.adam_phase.start(run.guide)
            self.adam_phase.adam.hold = set(frozen) | self.ids
            self.adam_phase.adam.step(*run.args, **run.kw)
        if self.guard is not None:
            self.guard.adam = self.adam_phase.adam   # (a resumed guard gets the rebuilt optimiser)
        if self.guard is not None and self.guard.observe(s, loss):
            self.stopped = run.result.natural_gradient_stopped = s
            warnings.warn(self.guard.message(run.name, noise_variances(run.dgp)),
                          NaturalGradientDivergenceWarning, stacklevel=6)
        return loss


def _parameters(obj):
    return obj.parameters() if isinstance(obj, torch.nn.Module) else ()
