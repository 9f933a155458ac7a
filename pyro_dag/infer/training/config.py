"""The settings of one training run as a frozen :class:`TrainConfig` (as
:class:`~pyro_dag.structure.StructureConfig` is for structure learning): every option of
:func:`~pyro_dag.infer.train`, checked once, when the config is built."""
import math
import numbers
from dataclasses import dataclass, field

import pyro

from ...threads import DEFAULT_NUM_THREADS
from .groups import GROUPS

__all__ = ["TrainConfig", "SVI_RECIPES", "DEFAULT_CANDIDATE_STEPS", "MAX_CANDIDATE_STARTS"]

#: Steps of each candidate start when ``candidate_steps`` is not given (:mod:`~pyro_dag.infer.training.candidates`).
DEFAULT_CANDIDATE_STEPS = 500
#: The most candidate starts ``train`` takes (the recipe takes 2-3; each is a run of ``candidate_steps`` steps).
MAX_CANDIDATE_STARTS = 100

#: The recipes of stochastic variational inference (:mod:`~pyro_dag.infer.training.recipes`; ``"lamp"`` is
#: registered there by :mod:`pyro_dag.infer.lamp`).
SVI_RECIPES = ("recommended", "adam")


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check(cond, message):
    if not cond:
        raise ValueError(f"train: {message}")


def _positive_real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


@dataclass(frozen=True)
class TrainConfig:
    r"""The options of one :func:`~pyro_dag.infer.train` run (Perlino, Hamelijnck, Johansen & Damoulas 2026,
    "Deep Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645, Algorithm 4, and the recipes of
    :mod:`~pyro_dag.infer.training.recipes`). Frozen: derive variants with ``dataclasses.replace``. Every option is
    checked when the config is built (a ``ValueError`` naming it), except for a recipe registered with its own
    options (``"lamp"``), which checks them itself, and the recipe's name, which :func:`~pyro_dag.infer.train`
    looks up.

    :param int num_steps: joint steps, ``>= 1`` (warm start included, pretraining not).
    :param str recipe: ``"recommended"`` (default), ``"adam"`` or ``"lamp"``: latent-MAP fitting (Chang & Sung
        2026) with a :class:`~pyro_dag.infer.LatentMAP` as ``guide``, ``num_steps`` epochs of
        :meth:`~pyro_dag.infer.LatentMAP.fit`, ``optim_args`` a dict of
        :class:`~pyro_dag.infer.lamp.LaMPSettings` fields; the other options do not apply (set, they are refused).
    :param float lr: Adam's learning rate (default 0.01).
    :param elbo: the ELBO estimator (default ``DAGELBO(num_particles, antithetic=...)`` for an
        AutoStructuredGuide of a DAGDGP, ``Trace_ELBO(num_particles)`` otherwise).
    :param int num_particles: samples per step of the default estimator (default 4).
    :param bool antithetic: antithetic pairs in the default DAGELBO (default: on with ``"recommended"``).
    :param float natural_gradient: ``γ`` in [0, 1] of the natural-gradient steps (0: Adam only).
    :param int natural_gradient_after: Adam steps of the main phase (after the warm start) before the
        natural-gradient steps take over (default 1000: Adam must first find the basin of the posterior's mean;
        natural-gradient steps from a distant mean can make the loss jump by orders of magnitude, so runs of
        up to 1000 steps are Adam only).
    :param float natural_gradient_max_kl: trust region of those steps in nats: ``γ`` is halved until a step moves
        ``q`` by at most this KL (default ``None``: 2 nats,
        :data:`~pyro_dag.infer.training.guard.DEFAULT_NATURAL_GRADIENT_MAX_KL`; ``math.inf``: no limit).
    :param bool natural_gradient_guard: stop the natural-gradient phase when it makes the loss worse (default on):
        window means of 50 losses are compared with the best so far (the last Adam window included); a window
        worse by more than ``max(3 sd, 5 %)`` restores the best window's parameters, hands the remaining steps to
        Adam and warns (:class:`~pyro_dag.infer.training.guard.NaturalGradientDivergenceWarning`, naming the node
        whose noise variance grew most; :attr:`TrainResult.natural_gradient_stopped`). After every run, a node whose
        noise variance exceeds twice its training data's variance is named in a
        :class:`~pyro_dag.infer.training.guard.NoiseRunawayWarning`.
    :param float sink_step_size: ``γ`` of a conjugate natural-gradient step on the Gaussian sinks after every
        Adam step (:class:`~pyro_dag.infer.SinkNaturalGradient`; 0, the default: off).
    :param int warm_start: mean-field warm-start steps for a structured guide (default 0).
    :param int pretrain_steps: node-wise pretraining steps (default 0: none). Each observed node whose parents
        are roots or observed nodes is fitted alone as a sparse GP on its observed parents
        (:func:`~pyro_dag.infer.training.pretrain_nodes`); nodes with latent parents are left to the joint steps.
    :param bool collapse: fit the GP nodes whose inputs are all observed and whose likelihood is Gaussian exactly
        first, by L-BFGS on their collapsed bound (:func:`~pyro_dag.infer.training.fit_collapsed`; Titsias 2009),
        and hold their kernels, noise and inducing inputs through the steps, which then train the rest; with
        every GP node fitted so, the steps are skipped (:attr:`TrainResult.stopped` ``"collapsed"``). Default: on
        with ``"recommended"`` (for an AutoStructuredGuide of a DAGDGP, not ``distributed``), off with ``"adam"``.
    :param bool start_hidden: start the hidden GP nodes and their observed children at the shallow fit before the
        steps (:func:`~pyro_dag.infer.training.start_hidden_nodes`: pseudo-values of each hidden node from pilot
        exact GPs of its observed descendants on its roots). Default: on with ``"recommended"`` (for an
        AutoStructuredGuide of a DAGDGP), off with ``"adam"``.
    :param float freeze_fraction: fraction in [0, 1] of the joint steps during which ``freeze`` is held fixed.
    :param freeze: parameter groups to hold: ``"inducing"``, ``"likelihood"``, ``"kernel"`` (default the first two).
    :param float likelihood_lr_multiplier: multiplies Adam's learning rate of the likelihood parameters (the
        paper's heavy-ion runs use 0.1, Sec. 7).
    :param optim_args: Adam's arguments, a dict or a ``pyro.optim``-style callable ``param_name -> dict``
        (default ``{"lr": lr}``); ``likelihood_lr_multiplier`` applies on top.
    :param validation: held-out ``(inputs, data)`` (or ``(inputs, data, model_kwargs)``, e.g. with its own
        ``mask``) evaluated every ``validate_every`` steps of the main phase and at the last step
        (:func:`validation_loss`: the estimator's loss with fixed draws, which leave the training's random
        stream untouched), or a callable ``() -> float`` (lower is better).
    :param int validate_every: steps between validations (default 50).
    :param int patience: stop after this many validations without a new best (default ``None``: never).
    :param bool restore_best: with validation, end with the parameters of the best validation loss (default).
    :param float spike_factor: Adam's gradient is scaled down to this multiple of the median gradient norm of the
        last 100 steps when it exceeds it (default 10; ``None``: never): one Monte Carlo gradient far above the usual
        scale would move every parameter by ~30 learning rates (:mod:`~pyro_dag.infer.training.adam`).
    :param bool rollback: when the median loss of 10 Adam steps rises far above the last healthy window of 50
        (by ``max(5 sd, 10 %, 20 nats)``), go back to that window's parameters and Adam moments and halve the
        learning rate, up to 6 times (:class:`~pyro_dag.infer.training.rollback.DivergenceRollback`; default on;
        :attr:`TrainResult.rollbacks` and a :class:`~pyro_dag.infer.training.rollback.RollbackWarning` say so). A
        run that never diverges is unchanged.
    :param bool fallback_start: when a run that started its hidden nodes at the shallow fit (``start_hidden``) ends
        with a node's noise explaining over half of its variance where the noise rule's pilot GP left under a quarter
        of that to noise, train again from the state before the start without it, and keep the run with the lower
        final loss (mean of its last 50 steps); :attr:`TrainResult.fallback` records both. Default on; not with a
        checkpoint, validation, a warm start or pretraining.
    :param candidate_starts: ``"auto"`` (default): for the ``"recommended"`` recipe on a DAGDGP with hidden GP
        nodes or latent inputs and learned kernels, noise or inducing inputs (not ``fixed_kernels``), when
        ``num_steps >= 2 · candidate_steps`` and there is no checkpoint, validation, warm start, pretraining or
        data-parallel run: 3 when the run started hidden nodes at the shallow fit (``start_hidden``; the start on two
        random streams, then one candidate from the values before the start), else 2; otherwise 1. Or an integer
        ``K >= 1`` (with the start, the last of ``K > 1`` goes without it). The ``K`` runs of ``candidate_steps``
        steps each draw from their own random stream; the one with the lowest mean loss over its last 50 steps is
        continued (:class:`~pyro_dag.infer.training.candidates.CandidateStarts`; :attr:`TrainResult.candidates`):
        the basin of a latent fit is decided early (the latent collider, data set 0: one stream in five settled at
        held-out RMSE 0.54, against 0.05-0.06; a random latent DAG, ``random_latent(100)``: 0.17 after 3000 steps
        from the start, 0.018 after 500 without it). Costs ``(K - 1) · candidate_steps`` extra steps.
    :param int candidate_steps: steps per candidate (default ``None``: :data:`DEFAULT_CANDIDATE_STEPS`, 500). Given
        where it has no effect (``candidate_starts=1``, or ``"auto"`` taking no candidates, e.g. because
        ``num_steps < 2 · candidate_steps``), a warning says so. ``candidate_starts`` is at most
        :data:`MAX_CANDIDATE_STARTS`.
    :param noise_step: every 50 Adam steps, lower each observed Gaussian node's noise to the ELBO's optimum given
        the current fit, ``mean E_q[(y - f)²]``, where that is below it (never raise it), and clear its Adam momentum
        (:class:`~pyro_dag.infer.training.noise_step.NoiseStep`; :attr:`TrainResult.noise_steps` counts them).
        ``"auto"`` (default): in the second half of the steps, wherever it can run (the DAGDGP as the model with its
        AutoStructuredGuide, not data-parallel), silently off elsewhere; ``True``: from the first step, and refused
        where it cannot run (a warning where no node's noise can be stepped: latent inputs, hyperpriors);
        ``False``: the noise is left to Adam. Why: Adam moves ``log τ²`` by at most ``lr`` a step, so a learned noise
        lags the fit by thousands of steps (on ``random_latent(104)`` and ``(107)`` the noise ended 4.4x and 2.3x
        the truth after 3000 steps, and the 95 % intervals covered 0.996 and 0.998 of held-out cases). Why only in
        the second half: the basin of a latent fit is decided in its first steps, where the noise's slow fall works
        as annealing (with the step from the first step, two streams of five on the collider's data set 0 settled at
        held-out RMSE 0.28-0.29, against 0.06-0.07).
    :param bool best_iterate: without validation, end with the parameters of the window of 50 steps with the lowest
        mean loss when the last window is worse than it by more than ``max(3 sd, 5 %)``
        (:class:`~pyro_dag.infer.training.best.BestIterate`; :attr:`TrainResult.restored_step` and a
        :class:`~pyro_dag.infer.training.best.BestIterateWarning` say so). Default on: a run that degraded is
        never returned in its degraded state.
    :param callbacks: callables ``(step, loss) -> bool`` called after every step (1-based step); a true return
        value stops the run. With candidate starts each candidate's steps are numbered from 1 again (a callback
        sees ``K · candidate_steps`` calls before the continuation), and a stop during a candidate keeps that
        candidate (:attr:`TrainResult.candidates`).
    :param bool progress: a tqdm bar with the running ELBO (mean of the last 25 steps).
    :param num_threads: intra-op threads for the run (:func:`pyro_dag.threads.limit_threads`; default 1;
        ``None`` keeps the process's settings).
    :param fixed_kernels: ``"auto"`` (default): run inside :meth:`~pyro_dag.DAGDGP.fixed_kernels` when every
        kernel hyperparameter and inducing input is fixed; ``True`` / ``False`` to force.
    :param checkpoint: a file path (or an existing directory, for ``train_checkpoint.pt`` in it). The
        parameters (Pyro's parameter store: the model's and the guide's), the optimiser's moments, the
        natural-gradient counters, the step, the loss and validation history and the torch / numpy / Python
        random-number states are written every ``checkpoint_every`` steps and at the end, atomically (a
        temporary file, then ``os.replace``).
    :param int checkpoint_every: steps between checkpoints (default 100).
    :param bool resume: continue from ``checkpoint`` if it exists (build the model and guide as in the saved
        run first); a run killed and resumed gives the uninterrupted run's losses bit for bit. The recipe's
        settings must match the saved ones (``num_steps`` may grow).
    :param dict model_kwargs: extra keyword arguments of every model/guide call (e.g. ``{"mask": ...}``).
    :param str name: the loop's name in error messages (``"{name}, step k: ..."``) and on the progress bar.
    :param bool distributed: data-parallel training over the ``torch.distributed`` process group
        (:mod:`pyro_dag.infer.distributed`; launch with ``torchrun``): ``inputs`` / ``data`` are this process's
        shard (:func:`pyro_dag.infer.distributed.shard`), ``model_kwargs["subsample_size"]`` its minibatch;
        the shards' ELBOs sum to the full-data ELBO (global KL counted once), the global parameters'
        gradients are all-reduced and broadcast from rank 0 at the start, per-case parameters stay on their
        shard, and the losses are full-data estimates, the same on every process. Adam steps only: the
        natural-gradient phase is off by default (an explicit ``natural_gradient > 0``, ``sink_step_size`` or
        ``warm_start`` raises); validation losses are averaged over the processes; each process writes its
        own checkpoint (``checkpoint`` with ``.rank{r}of{R}`` before the extension). Pretraining runs on each
        shard and rank 0's result is broadcast. Callbacks must decide alike on every process.
    :param minibatch: ``"auto"`` (default): above :data:`~pyro_dag.infer.training.minibatch.MINIBATCH_ABOVE`
        cases the steps use random minibatches of
        :data:`~pyro_dag.infer.training.minibatch.MINIBATCH_SIZE` (an unbiased ELBO; one
        :class:`~pyro_dag.progress.ScaledDefaultWarning` says so; :mod:`~pyro_dag.infer.training.minibatch` lists
        where it does not apply); ``False``: full-batch steps. A ``subsample_size`` in ``model_kwargs`` wins over
        ``"auto"`` (with ``False`` it is refused: the two contradict).

    Example::

        config = TrainConfig(num_steps=3000, lr=0.005, validation=(X_val, Y_val), patience=5)
        result = train(model, guide, inputs, data, config=config)
    """

    num_steps: int
    recipe: str = "recommended"
    lr: float = 0.01
    elbo: object = None
    num_particles: int = None
    antithetic: bool = None
    natural_gradient: float = None
    natural_gradient_after: int = None
    natural_gradient_max_kl: float = None
    natural_gradient_guard: bool = True
    sink_step_size: float = 0.0
    warm_start: int = 0
    pretrain_steps: int = 0
    collapse: bool = None
    start_hidden: bool = None
    freeze_fraction: float = 0.0
    freeze: tuple = ("inducing", "likelihood")
    likelihood_lr_multiplier: float = 1.0
    optim_args: object = None
    validation: object = None
    validate_every: int = 50
    patience: int = None
    restore_best: bool = True
    best_iterate: bool = True
    rollback: bool = True
    fallback_start: bool = True
    noise_step: object = "auto"
    candidate_starts: object = "auto"
    candidate_steps: int = None
    spike_factor: float = 10.0
    callbacks: tuple = field(default=())
    progress: bool = True
    num_threads: object = DEFAULT_NUM_THREADS
    fixed_kernels: object = "auto"
    checkpoint: object = None
    checkpoint_every: int = 100
    resume: bool = False
    model_kwargs: dict = None
    name: str = "train"
    distributed: bool = False
    minibatch: object = "auto"

    def __post_init__(self):
        object.__setattr__(self, "callbacks", tuple(self.callbacks))
        if self.recipe in SVI_RECIPES:  # other recipes (registered in recipes.RECIPES) check their own options
            self._check()

    @property
    def freeze_groups(self):
        """The parameter groups of ``freeze`` as a tuple."""
        return (self.freeze,) if isinstance(self.freeze, str) else tuple(self.freeze)

    def _check(self):
        _check(_is_int(self.num_steps) and self.num_steps >= 1, f"num_steps must be a positive integer, got {self.num_steps!r}")
        _check(_positive_real(self.lr), f"lr must be a positive finite number, got {self.lr!r}")
        if self.elbo is not None:
            _check(self.num_particles is None and self.antithetic is None,
                   "num_particles and antithetic configure the default ELBO; with elbo= given, set them on it")
            _check(hasattr(self.elbo, "differentiable_loss"), f"elbo must be a Pyro ELBO (with differentiable_loss), got "
                                                         f"{self.elbo!r}")
        if self.num_particles is not None:
            _check(_is_int(self.num_particles) and self.num_particles >= 1,
                   f"num_particles must be a positive integer, got {self.num_particles!r}")
            _check(not (self.antithetic and self.num_particles % 2),
                   f"antithetic pairs the samples, so num_particles must be even, got {self.num_particles}")
        for name, value in (("natural_gradient", self.natural_gradient), ("sink_step_size", self.sink_step_size)):
            _check(value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value <= 1),
                   f"{name} must be a step size in (0, 1] (0: off), got {value!r}")
        _check(not (self.natural_gradient and self.sink_step_size),
               "use either natural_gradient (the whole posterior) or sink_step_size (the sinks only)")
        _check(self.natural_gradient_max_kl is None or (isinstance(self.natural_gradient_max_kl, numbers.Real)
                                                   and not isinstance(self.natural_gradient_max_kl, bool)
                                                   and self.natural_gradient_max_kl > 0),
               f"natural_gradient_max_kl must be a positive number of nats (math.inf: no trust region) or None, got "
               f"{self.natural_gradient_max_kl!r}")
        _check(self.natural_gradient_after is None or (_is_int(self.natural_gradient_after) and self.natural_gradient_after >= 0),
               f"natural_gradient_after must be a non-negative integer, got {self.natural_gradient_after!r}")
        _check(_is_int(self.warm_start) and self.warm_start >= 0, f"warm_start must be a non-negative integer, got {self.warm_start!r}")
        _check(self.warm_start < self.num_steps, f"warm_start ({self.warm_start}) must be smaller than num_steps ({self.num_steps})")
        _check(_is_int(self.pretrain_steps) and self.pretrain_steps >= 0,
               f"pretrain_steps must be a non-negative integer, got {self.pretrain_steps!r}")
        _check(self.start_hidden in (None, True, False), f"start_hidden must be True, False or None (the recipe's "
                                                        f"default), got {self.start_hidden!r}")
        _check(self.collapse in (None, True, False), f"collapse must be True, False or None (the recipe's default), got "
                                                    f"{self.collapse!r}")
        _check(isinstance(self.freeze_fraction, numbers.Real) and not isinstance(self.freeze_fraction, bool)
               and 0 <= self.freeze_fraction <= 1, f"freeze_fraction must be a fraction of the steps in [0, 1], got "
                                             f"{self.freeze_fraction!r}")
        for g in self.freeze_groups:
            _check(g in GROUPS, f"freeze names an unknown parameter group {g!r}; choose from {GROUPS}")
        _check(_positive_real(self.likelihood_lr_multiplier),
               f"likelihood_lr_multiplier must be a positive finite number, got {self.likelihood_lr_multiplier!r}")
        _check(self.optim_args is None or isinstance(self.optim_args, dict) or callable(self.optim_args),
               f"optim_args must be a dict or a callable param_name -> dict, got {self.optim_args!r}")
        _check(self.validation is None or callable(self.validation)
               or (isinstance(self.validation, (tuple, list)) and len(self.validation) in (2, 3)),
               "validation must be an (inputs, data) pair, an (inputs, data, model_kwargs) triple or a callable "
               "returning a loss")
        _check(_is_int(self.validate_every) and self.validate_every >= 1,
               f"validate_every must be a positive integer, got {self.validate_every!r}")
        _check(self.patience is None or (_is_int(self.patience) and self.patience >= 1),
               f"patience must be a positive integer (validations without improvement) or None, got {self.patience!r}")
        _check(self.patience is None or self.validation is not None, "patience needs validation= (an (inputs, data) pair)")
        _check(self.spike_factor is None or (_positive_real(self.spike_factor) and self.spike_factor > 1),
               f"spike_factor must be a number > 1 (or None: never clip), got {self.spike_factor!r}")
        _check(isinstance(self.fallback_start, bool), f"fallback_start must be True or False, got {self.fallback_start!r}")
        _check(self.candidate_starts == "auto" or (_is_int(self.candidate_starts) and self.candidate_starts >= 1),
               f"candidate_starts must be 'auto' or a positive integer, got {self.candidate_starts!r}")
        # each candidate is a run of candidate_steps steps: a count in the millions would not finish (and drawing
        # its random seeds alone took 8 GB at 10**9, which the kernel answered by killing the process)
        _check(self.candidate_starts == "auto" or self.candidate_starts <= MAX_CANDIDATE_STARTS,
               f"candidate_starts={self.candidate_starts!r} is more than {MAX_CANDIDATE_STARTS} candidate runs "
               f"(each of candidate_steps steps); the recipe takes 2-3: pass a smaller count")
        _check(self.candidate_steps is None or (_is_int(self.candidate_steps) and self.candidate_steps >= 1),
               f"candidate_steps must be a positive integer (or None: {DEFAULT_CANDIDATE_STEPS}), got "
               f"{self.candidate_steps!r}")
        _check(isinstance(self.noise_step, bool) or self.noise_step == "auto",
               f"noise_step must be 'auto', True or False, got {self.noise_step!r}")
        _check(not (self.noise_step is True and self.distributed), "noise_step steps are not data-parallel (each process holds a "
               "shard of the cases, and the step needs them all): pass noise_step=False with distributed=True")
        _check(isinstance(self.rollback, bool), f"rollback must be True or False, got {self.rollback!r}")
        _check(isinstance(self.best_iterate, bool), f"best_iterate must be True or False, got {self.best_iterate!r}")
        for cb in self.callbacks:
            _check(callable(cb), f"callbacks must be callables (step, loss) -> bool, got {cb!r}")
        _check(self.fixed_kernels in ("auto", True, False), f"fixed_kernels must be 'auto', True or False, got "
                                                       f"{self.fixed_kernels!r}")
        _check(self.minibatch in ("auto", False), f"minibatch must be 'auto' or False, got {self.minibatch!r}; to choose "
               "the minibatch size B yourself, pass model_kwargs={'subsample_size': B}")
        subsample = self.model_kwargs.get("subsample_size") if isinstance(self.model_kwargs, dict) else None
        _check(self.minibatch is not False or subsample is None, f"minibatch=False asks for full-batch steps, and "
               f"model_kwargs['subsample_size']={subsample!r} for minibatches of that size: drop one of them")
        _check(_is_int(self.checkpoint_every) and self.checkpoint_every >= 1,
               f"checkpoint_every must be a positive integer, got {self.checkpoint_every!r}")
        _check(not self.resume or self.checkpoint is not None, "resume=True needs checkpoint= (the file to resume from)")
        # Checkpoints read and write Pyro's global parameter store; with module-local parameters the store is empty,
        # so a self.checkpoint would silently hold no parameters and a self.resume would restart from the initial values.
        _check(self.checkpoint is None or not pyro.settings.get("module_local_params"),
               "checkpoint= saves Pyro's global parameter store, which pyro.settings.set(module_local_params=True) "
               "leaves empty; train without module-local parameters to checkpoint, or drop checkpoint=")
