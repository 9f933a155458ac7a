"""``train``: the recommended way to fit a DAGDGP, as plain Pyro pieces (in the spirit of
``pyro.contrib.gp.util.train``)."""
import math
import numbers
import os
import time
import warnings
from dataclasses import dataclass, field

import pyro
import torch
from pyro.infer import Trace_ELBO

from ...param_store import adopting_param_store
from ...threads import DEFAULT_NUM_THREADS, limit_threads
from ..checks import check_finite_loss, training_step
from .adam import JointAdam
from .checkpoint import (capture_params, capture_rng_state, check_writable, checkpoint_file, load_checkpoint,
                         restore_params, restore_rng_state, save_checkpoint)
from .groups import GROUPS, find_dagdgp, group_tensors
from .guard import (DEFAULT_NATURAL_GRADIENT_MAX_KL, NaturalGradientDivergenceWarning, NaturalGradientGuard,
                    noise_variances, noise_warnings)
from .pretrain import pretrain_nodes

__all__ = ["train", "TrainResult", "RECIPES", "validation_loss"]

#: The training recipes of :func:`train`.
RECIPES = ("recommended", "adam")

#: Parameter-store prefix of the mean-field guide of a warm start.
WARM_START_NAME = "MeanFieldWarmStart"


@dataclass
class TrainResult:
    """What :func:`train` returns.

    :ivar list losses: the loss (negative ELBO estimate, a float) of every step run, warm-start steps included;
        each is evaluated at the parameters before the step.
    :ivar list pretrain_losses: the summed node-wise losses of the pretraining steps.
    :ivar list pretrained_nodes: the nodes fitted alone first.
    :ivar list validation: ``(step, validation loss)`` pairs.
    :ivar best_step: the step of the lowest validation loss (``None`` without validation).
    :ivar best_validation_loss: that loss.
    :ivar stopped: ``None`` (all steps ran), ``"early_stopping"`` or ``"callback"``.
    :ivar dict settings: the resolved recipe (ELBO, learning rate, natural-gradient phase, freezing, ...).
    :ivar float seconds: wall-clock seconds of the steps run in this call (pretraining excluded).
    :ivar float warm_start_seconds: of which in the mean-field warm start.
    :ivar int resumed_from: the step the run resumed after (``0`` for a fresh run).
    :ivar natural_gradient_stopped: the step at which the divergence guard stopped the natural-gradient phase
        (:class:`~pyro_dag.infer.training.guard.NaturalGradientGuard`), else ``None``.
    """

    losses: list = field(default_factory=list)
    pretrain_losses: list = field(default_factory=list)
    pretrained_nodes: list = field(default_factory=list)
    validation: list = field(default_factory=list)
    best_step: int = None
    best_validation_loss: float = None
    stopped: str = None
    settings: dict = field(default_factory=dict)
    seconds: float = 0.0
    warm_start_seconds: float = 0.0
    resumed_from: int = 0
    natural_gradient_stopped: int = None

    @property
    def num_steps(self):
        """Steps run (warm start included)."""
        return len(self.losses)


def _is_int(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _check(cond, message):
    if not cond:
        raise ValueError(f"train: {message}")


def _positive_real(x):
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def _check_arguments(num_steps, recipe, lr, num_particles, antithetic, elbo, natural_gradient, natural_gradient_after,
                     natural_gradient_max_kl, sink_step_size, warm_start, pretrain_steps, freeze_fraction, freeze,
                     likelihood_lr_multiplier, optim_args, validation, validate_every, patience, callbacks,
                     fixed_kernels, checkpoint, checkpoint_every, resume):
    _check(_is_int(num_steps) and num_steps >= 1, f"num_steps must be a positive integer, got {num_steps!r}")
    _check(recipe in RECIPES, f"recipe must be one of {RECIPES}, got {recipe!r}")
    _check(_positive_real(lr), f"lr must be a positive finite number, got {lr!r}")
    if elbo is not None:
        _check(num_particles is None and antithetic is None,
               "num_particles and antithetic configure the default ELBO; with elbo= given, set them on it")
        _check(hasattr(elbo, "differentiable_loss"), f"elbo must be a Pyro ELBO (with differentiable_loss), got "
                                                     f"{elbo!r}")
    if num_particles is not None:
        _check(_is_int(num_particles) and num_particles >= 1,
               f"num_particles must be a positive integer, got {num_particles!r}")
        _check(not (antithetic and num_particles % 2),
               f"antithetic pairs the samples, so num_particles must be even, got {num_particles}")
    for name, value in (("natural_gradient", natural_gradient), ("sink_step_size", sink_step_size)):
        _check(value is None or (isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value <= 1),
               f"{name} must be a step size in (0, 1] (0: off), got {value!r}")
    _check(not (natural_gradient and sink_step_size),
           "use either natural_gradient (the whole posterior) or sink_step_size (the sinks only)")
    _check(natural_gradient_max_kl is None or (isinstance(natural_gradient_max_kl, numbers.Real)
                                               and not isinstance(natural_gradient_max_kl, bool)
                                               and natural_gradient_max_kl > 0),
           f"natural_gradient_max_kl must be a positive number of nats (math.inf: no trust region) or None, got "
           f"{natural_gradient_max_kl!r}")
    _check(natural_gradient_after is None or (_is_int(natural_gradient_after) and natural_gradient_after >= 0),
           f"natural_gradient_after must be a non-negative integer, got {natural_gradient_after!r}")
    _check(_is_int(warm_start) and warm_start >= 0, f"warm_start must be a non-negative integer, got {warm_start!r}")
    _check(warm_start < num_steps, f"warm_start ({warm_start}) must be smaller than num_steps ({num_steps})")
    _check(_is_int(pretrain_steps) and pretrain_steps >= 0,
           f"pretrain_steps must be a non-negative integer, got {pretrain_steps!r}")
    _check(isinstance(freeze_fraction, numbers.Real) and not isinstance(freeze_fraction, bool)
           and 0 <= freeze_fraction <= 1, f"freeze_fraction must be a fraction of the steps in [0, 1], got "
                                         f"{freeze_fraction!r}")
    groups = (freeze,) if isinstance(freeze, str) else tuple(freeze)
    for g in groups:
        _check(g in GROUPS, f"freeze names an unknown parameter group {g!r}; choose from {GROUPS}")
    _check(_positive_real(likelihood_lr_multiplier),
           f"likelihood_lr_multiplier must be a positive finite number, got {likelihood_lr_multiplier!r}")
    _check(optim_args is None or isinstance(optim_args, dict) or callable(optim_args),
           f"optim_args must be a dict or a callable param_name -> dict, got {optim_args!r}")
    _check(validation is None or callable(validation)
           or (isinstance(validation, (tuple, list)) and len(validation) in (2, 3)),
           "validation must be an (inputs, data) pair, an (inputs, data, model_kwargs) triple or a callable "
           "returning a loss")
    _check(_is_int(validate_every) and validate_every >= 1,
           f"validate_every must be a positive integer, got {validate_every!r}")
    _check(patience is None or (_is_int(patience) and patience >= 1),
           f"patience must be a positive integer (validations without improvement) or None, got {patience!r}")
    _check(patience is None or validation is not None, "patience needs validation= (an (inputs, data) pair)")
    for cb in callbacks:
        _check(callable(cb), f"callbacks must be callables (step, loss) -> bool, got {cb!r}")
    _check(fixed_kernels in ("auto", True, False), f"fixed_kernels must be 'auto', True or False, got "
                                                   f"{fixed_kernels!r}")
    _check(_is_int(checkpoint_every) and checkpoint_every >= 1,
           f"checkpoint_every must be a positive integer, got {checkpoint_every!r}")
    _check(not resume or checkpoint is not None, "resume=True needs checkpoint= (the file to resume from)")
    # Checkpoints read and write Pyro's global parameter store; with module-local parameters the store is empty,
    # so a checkpoint would silently hold no parameters and a resume would restart from the initial values.
    _check(checkpoint is None or not pyro.settings.get("module_local_params"),
           "checkpoint= saves Pyro's global parameter store, which pyro.settings.set(module_local_params=True) "
           "leaves empty; train without module-local parameters to checkpoint, or drop checkpoint=")
    return groups


def validation_loss(model, guide, elbo, inputs, data, seed=0, model_kwargs=None):
    """The ELBO estimator's loss on held-out ``(inputs, data)``, drawn with the fixed ``seed`` inside a forked
    random-number state: the training stream is untouched, and every evaluation of a run uses the same draws
    (common random numbers), so that successive values differ by the change of the parameters, not by noise.

    :returns: a float.
    """
    devices = []
    args = (inputs,) if data is None else (inputs, data)
    ref = next(iter(inputs.values())) if isinstance(inputs, dict) and inputs else inputs
    if torch.is_tensor(ref) and ref.is_cuda:
        devices = [ref.device.index or 0]
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        with torch.no_grad():
            return float(elbo.loss(model, guide, *args, **(model_kwargs or {})))


def structured_part(guide):
    """``guide`` if it is an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`, else the first one among the
    parts of an ``AutoGuideList`` (e.g. :class:`~pyro_dag.infer.autoguide.AutoEncodedStructuredGuide`), else
    ``None``."""
    from pyro.infer.autoguide import AutoGuideList

    from ..autoguide import AutoStructuredGuide

    if isinstance(guide, AutoStructuredGuide):
        return guide
    if isinstance(guide, AutoGuideList):
        for part in guide:
            if isinstance(part, AutoStructuredGuide):
                return part
    return None


def _setup_done(guide):
    if hasattr(guide, "family") and getattr(guide, "_model_key", None) is not None:
        return guide.family is not None
    return getattr(guide, "prototype_trace", None) is not None


def train(model, guide, inputs, data=None, *, num_steps, recipe="recommended", lr=0.01, elbo=None,
          num_particles=None, antithetic=None, natural_gradient=None, natural_gradient_after=None,
          natural_gradient_max_kl=None, natural_gradient_guard=True, sink_step_size=0.0, warm_start=0,
          pretrain_steps=0, freeze_fraction=0.0, freeze=("inducing", "likelihood"), likelihood_lr_multiplier=1.0,
          optim_args=None, validation=None,
          validate_every=50, patience=None, restore_best=True, callbacks=(), progress=True,
          num_threads=DEFAULT_NUM_THREADS, fixed_kernels="auto", checkpoint=None, checkpoint_every=100,
          resume=False, model_kwargs=None, name="train", distributed=False):
    r"""Fit ``guide`` (and the model's learnable parameters) to ``(inputs, data)`` by stochastic variational
    inference; the library's recommended recipe by default.

    Plain Pyro underneath: each step is ``elbo.differentiable_loss(model, guide, inputs, data)`` and an Adam
    update (:class:`~pyro_dag.infer.training.JointAdam`, Pyro's "custom objectives" recipe), or a
    :class:`~pyro_dag.infer.GaussianNaturalGradient` step; every piece is usable on its own
    (:func:`~pyro_dag.infer.training.pretrain_nodes`, :func:`~pyro_dag.infer.training.lr_multiplier_args`,
    :func:`~pyro_dag.infer.training.initial_scales`, :func:`~pyro_dag.infer.training.save_checkpoint`).

    **Recipes.** ``"adam"``: Adam on every parameter for all steps with the DAGELBO estimator (Perlino,
    Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645, Algorithm 4), plain Monte Carlo samples: the paper's
    protocol. ``"recommended"`` (beyond the paper): antithetic sample pairs, and for structured (chordal / full)
    guides, after ``natural_gradient_after`` Adam steps, damped natural-gradient steps of size
    ``natural_gradient`` (default 0.01) on the whole Gaussian inducing posterior (Salimbeni, Eleftheriadis &
    Hensman 2018), with Adam on every other learnable parameter (kernel hyperparameters, noise, inducing inputs,
    other guide parameters) evaluated after the natural-gradient step; mean-field guides keep Adam. Every option
    below overrides the recipe's default.

    **Schedule** of one call: node-wise pretraining (``pretrain_steps``), then ``num_steps`` joint steps, of which
    the first ``warm_start`` train a mean-field guide that then initialises ``guide``
    (:meth:`~pyro_dag.infer.autoguide.AutoStructuredGuide.warm_start`); the parameter groups in ``freeze`` are
    held fixed (bitwise) during the first ``floor(freeze_fraction · num_steps)`` joint steps, as the paper's Sachs
    protocol holds the inducing inputs and noise for 40 % of them (Sec. 6, App. G.4).

    :param model: a :class:`~pyro_dag.DAGDGP` (or a Pyro model; freezing, pretraining, lr multipliers and the
        natural-gradient steps need a DAGDGP, as the model or a submodule of it).
    :param guide: an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` or an ``AutoGuideList`` holding one
        (e.g. :class:`~pyro_dag.infer.autoguide.AutoEncodedStructuredGuide`; DAGELBO is then the default
        estimator; the natural-gradient, sink and warm-start steps need the AutoStructuredGuide itself), or any
        Pyro guide (default estimator ``Trace_ELBO``).
    :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d_w]}``, NaN = missing.
    :param int num_steps: joint steps, ``>= 1`` (warm start included, pretraining not).
    :param str recipe: ``"recommended"`` (default), ``"adam"`` or ``"lamp"``: latent-MAP fitting (Chang & Sung
        2026) with a :class:`~pyro_dag.infer.LatentMAP` as ``guide``, ``num_steps`` epochs of
        :meth:`~pyro_dag.infer.LatentMAP.fit`, ``optim_args`` a dict of
        :class:`~pyro_dag.infer.lamp.LaMPSettings` fields; the other options do not apply.
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
    :param callbacks: callables ``(step, loss) -> bool`` called after every step (1-based step); a true return
        value stops the run.
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
    :returns: a :class:`TrainResult` (``.losses`` is the loss history).
    :raises ValueError: for a bad argument, naming it, before any training.
    :raises NonFiniteLossError: naming the step, if a loss or a gradient is not finite.

    Example::

        model = DAGDGP(g, kernels={"w3": kernels.SumInput(kernels.RBF())}, num_inducing=16).double()
        guide = AutoStructuredGuide(model, init_scale=initial_scales(model, inputs, data))
        result = train(model, guide, inputs, data, num_steps=3000)
        posterior = model.predict(guide, inputs_test, num_samples=500)
    """
    if recipe == "lamp":
        from ..lamp.fit import train_lamp

        with limit_threads(num_threads):
            return train_lamp(model, guide, inputs, data, num_steps=num_steps, optim_args=optim_args,
                              model_kwargs=model_kwargs)
    callbacks = tuple(callbacks)
    groups = _check_arguments(num_steps, recipe, lr, num_particles, antithetic, elbo, natural_gradient,
                              natural_gradient_after, natural_gradient_max_kl, sink_step_size, warm_start,
                              pretrain_steps, freeze_fraction, freeze, likelihood_lr_multiplier, optim_args,
                              validation, validate_every, patience, callbacks, fixed_kernels, checkpoint,
                              checkpoint_every, resume)
    path = None
    if distributed:
        from ..distributed import require_process_group

        require_process_group("train(distributed=True)")
    if checkpoint is not None:
        path = checkpoint_file(checkpoint)
        if distributed:
            import torch.distributed as dist

            root, ext = os.path.splitext(path)
            path = f"{root}.rank{dist.get_rank()}of{dist.get_world_size()}{ext}"
        check_writable(path)
    # resuming overwrites every stored value, so a rebuilt model may take the store's tensors without a warning
    resuming = bool(resume) and path is not None and os.path.exists(path)
    with limit_threads(num_threads), (adopting_param_store() if resuming else _null()):
        return _Run(model, guide, inputs, data, locals(), groups, path).run()


class _Run:
    """One call of :func:`train` (the loop's state in one place, so that it can be saved and restored)."""

    def __init__(self, model, guide, inputs, data, opts, groups, path):
        from ..autoguide import AutoStructuredGuide
        from ..elbo import DAGELBO

        self.model, self.guide, self.inputs, self.data = model, guide, inputs, data
        self.args = (inputs,) if data is None else (inputs, data)
        self.o = opts
        self.kw = dict(opts["model_kwargs"] or {})
        self.path = path
        self.name = opts["name"]
        self.dgp = find_dagdgp(model)
        dgp = self.dgp
        needs = [k for k in ("pretrain_steps", "freeze_fraction", "sink_step_size") if opts[k]]
        if opts["likelihood_lr_multiplier"] != 1.0:
            needs.append("likelihood_lr_multiplier")
        if needs and dgp is None:
            raise ValueError(f"train: {needs[0]} needs a DAGDGP model (as the model or a submodule)")
        self.dag_guide = structured_part(guide) is not None and dgp is not None
        structured = self.dag_guide and isinstance(guide, AutoStructuredGuide) and guide.structure != "mean_field"
        recommended = opts["recipe"] == "recommended"
        elbo = opts["elbo"]
        if elbo is None:
            num_particles = 4 if opts["num_particles"] is None else opts["num_particles"]
            antithetic = opts["antithetic"]
            if self.dag_guide:
                if antithetic is None:
                    antithetic = recommended and num_particles % 2 == 0
                elbo = DAGELBO(num_particles=num_particles, antithetic=antithetic)
            else:
                if antithetic:
                    raise ValueError("train: antithetic pairs are a DAGELBO option, which needs an "
                                     "AutoStructuredGuide of a DAGDGP; pass elbo= for other guides")
                elbo = Trace_ELBO(num_particles=num_particles)
        self.elbo = elbo
        self.dp = None
        ng = opts["natural_gradient"]
        if opts["distributed"]:
            from ..distributed import DataParallel

            for k in ("natural_gradient", "sink_step_size", "warm_start"):
                if opts[k]:
                    raise ValueError(f"train(distributed=True): {k} steps are not data-parallel (Adam steps only); "
                                     f"pass {k}=0")
            ng = 0.0
            self.dp = DataParallel(elbo)
        if ng is None:
            ng = 0.01 if (recommended and structured) else 0.0
        if ng and not isinstance(guide, AutoStructuredGuide):
            raise ValueError("train: natural_gradient steps need the guide to be an AutoStructuredGuide (its "
                             f"Gaussian posterior), got {type(guide).__name__}; pass natural_gradient=0")
        if opts["sink_step_size"] and not (self.dag_guide and isinstance(guide, AutoStructuredGuide)):
            raise ValueError("train: sink_step_size needs the guide to be an AutoStructuredGuide of a DAGDGP, got "
                             f"{type(guide).__name__}")
        self.ng = float(ng)
        after = opts["natural_gradient_after"]
        self.ng_after = 1000 if after is None else after
        max_kl = opts["natural_gradient_max_kl"]
        self.ng_max_kl = DEFAULT_NATURAL_GRADIENT_MAX_KL if max_kl is None else float(max_kl)
        warm = opts["warm_start"]
        if warm and not structured:
            raise ValueError("train: warm_start initialises a structured (chordal / full) AutoStructuredGuide of a "
                             "DAGDGP from a mean-field one; this guide is not one (pass warm_start=0)")
        self.warm = warm
        self.freeze_steps = int(math.floor(opts["freeze_fraction"] * opts["num_steps"] + 1e-9))
        if dgp is not None and not dgp.is_setup:
            if dgp is model:
                dgp.setup(inputs, data, self.kw.get("mask"))
            elif self.freeze_steps and "inducing" in groups:
                raise ValueError("train: freezing the inducing inputs needs them to exist: set the DAGDGP up first "
                                 "(dgp.setup(inputs, data)) when it is part of a larger model")
        self.frozen = group_tensors(dgp, groups) if (dgp is not None and self.freeze_steps and groups) else {}
        self.lr_scale = {}
        if opts["likelihood_lr_multiplier"] != 1.0:
            self.lr_scale = {i: opts["likelihood_lr_multiplier"] for i in group_tensors(dgp, "likelihood")}
        self.optim_args = opts["optim_args"] if opts["optim_args"] is not None else {"lr": opts["lr"]}
        fk = opts["fixed_kernels"]
        if fk == "auto":
            fk = dgp is not None and dgp.is_setup and _all_fixed(dgp)
        self.use_fixed = bool(fk)
        self.settings = {
            "recipe": opts["recipe"], "lr": opts["lr"], "elbo": type(elbo).__name__,
            "num_particles": getattr(elbo, "num_particles", None), "antithetic": getattr(elbo, "antithetic", False),
            "sampler": getattr(elbo, "sampler", None), "natural_gradient": self.ng,
            "natural_gradient_after": self.ng_after if self.ng else None,
            "natural_gradient_max_kl": self.ng_max_kl if self.ng else None,
            "natural_gradient_guard": bool(opts["natural_gradient_guard"]) if self.ng else None,
            "sink_step_size": float(opts["sink_step_size"]), "warm_start": warm,
            "pretrain_steps": opts["pretrain_steps"], "freeze_steps": self.freeze_steps,
            "freeze": list(groups) if self.freeze_steps else [],
            "likelihood_lr_multiplier": opts["likelihood_lr_multiplier"],
            "validate_every": opts["validate_every"] if opts["validation"] is not None else None,
            "patience": opts["patience"], "fixed_kernels": self.use_fixed,
        }
        if self.dp is not None:
            self.settings["world_size"] = self.dp.world_size
        self.result = TrainResult(settings=dict(self.settings, num_steps=opts["num_steps"]))
        self.step = 0
        self.mf = None
        self.adam = None
        self.sink = None
        self.gauss = None
        self.best_params = None
        self.bad = 0
        self.pretrained = False
        self._no_freeze = {}
        self.ng_guard = None
        self.ng_stopped = None

    # ------------------------------------------------------------------ phases
    def _make_mf(self):
        import pyro

        from ..autoguide import AutoStructuredGuide

        # a finished warm start of an earlier run leaves its guide's parameters in the store under the same names,
        # which the new guide would silently start from and share (a resumed run restores its own values next)
        store = pyro.get_param_store()
        for stale in [n for n in store.keys() if n.startswith(WARM_START_NAME + ".")]:
            del store[stale]
        self.mf = AutoStructuredGuide(self.model, structure="mean_field", init_scale=self.guide.init_scale,
                                      name=WARM_START_NAME)

    def _start_phase(self, guide, run_guide=True):
        """The Adam stepper (and sink step) of one phase, as the phase's first step needs them."""
        from ..natural_sink import SinkNaturalGradient

        self.adam = JointAdam(self.model, guide, self.elbo if self.dp is None else self.dp.scaled_elbo(),
                              self.optim_args, self.lr_scale)
        if self.dp is not None:
            self.adam.reduce = self.dp.reduce_gradients
        self.sink = None
        if self.o["sink_step_size"]:
            if run_guide:
                guide(*self.args, **self.kw)
            self.sink = SinkNaturalGradient(self.dgp, guide, step_size=self.o["sink_step_size"],
                                            num_samples=getattr(self.elbo, "num_particles", 4))

    def _sink_ids(self):
        """Ids of the parameters the sink step sets (held out of Adam), computed once per sink step object."""
        if self.sink is None:
            return set()
        cached = self.__dict__.get("_sink_cache")
        if cached is None or cached[0] is not self.sink:
            import pyro

            names = self.sink.param_names()
            cached = self._sink_cache = (self.sink, {id(p) for n, p in pyro.get_param_store().named_parameters()
                                                     if n in names})
        return cached[1]

    def _make_gauss(self):
        from ..natural_gaussian import GaussianNaturalGradient

        if self.guide.family is None:
            self.guide(*self.args, **self.kw)
        self.gauss = GaussianNaturalGradient(self.model, self.guide, self.elbo, step_size=self.ng,
                                             max_kl=None if math.isinf(self.ng_max_kl) else self.ng_max_kl)
        if self.o["natural_gradient_guard"] and self.ng_guard is None:
            self.ng_guard = NaturalGradientGuard(self.result.losses[self.warm:], noise=noise_variances(self.dgp))
        self.gauss_ids = {id(p) for p in self.guide.family.parameters()}

    def _rest(self, frozen):
        """Learnable parameters outside the natural-gradient step and outside ``frozen`` (cached per ``frozen``)."""
        import pyro

        key = id(frozen)
        cached = self.__dict__.get("_rest_cache")
        if cached is not None and cached[0] == key:
            return cached[1]
        seen = {}
        for p in list(_parameters(self.model)) + list(_parameters(self.guide)):
            seen[id(p)] = p
        for _, p in pyro.get_param_store().named_parameters():
            seen[id(p)] = p
        rest = [p for i, p in seen.items() if p.requires_grad and i not in self.gauss_ids and i not in frozen]
        self._rest_cache = (key, rest)
        return rest

    # ------------------------------------------------------------------ one step
    def _one_step(self, s):
        frozen = self.frozen if s <= self.freeze_steps else self._no_freeze
        in_warm = s <= self.warm
        t = s - self.warm                                            # step of the main phase
        if self.ng and not in_warm and t > self.ng_after and self.ng_stopped is None:
            if self.gauss is None:
                self._make_gauss()
            loss = self.gauss.step(*self.args, **self.kw)
            if self._rest(frozen):
                if self.adam is None:
                    self._start_phase(self.guide)
                self.adam.hold = set(frozen) | self.gauss_ids
                self.adam.step(*self.args, **self.kw)
            if self.ng_guard is not None and self.ng_guard.observe(s, loss):
                self.ng_stopped = self.result.natural_gradient_stopped = s
                warnings.warn(self.ng_guard.message(self.name, noise_variances(self.dgp)),
                              NaturalGradientDivergenceWarning, stacklevel=4)
        else:
            self.adam.hold = set(frozen) | self._sink_ids()
            loss = self.adam.step(*self.args, **self.kw)
            if self.sink is not None:
                self.sink.step(*self.args, **{k: v for k, v in self.kw.items() if k in ("mask", "subsample_size")})
        check_finite_loss(loss, "the loss", self.inputs, self.data)
        return loss

    def _validate(self, s):
        validation = self.o["validation"]
        if callable(validation):
            v = float(validation())
        else:
            v = validation_loss(self.model, self.guide, self.elbo, validation[0], validation[1],
                                model_kwargs=validation[2] if len(validation) > 2 else None)
        if self.dp is not None:
            v = self.dp.mean(v)
        r = self.result
        r.validation.append((s, v))
        if r.best_validation_loss is None or v < r.best_validation_loss:
            r.best_step, r.best_validation_loss = s, v
            self.best_params = capture_params() if self.o["restore_best"] else None
            self.bad = 0
        else:
            self.bad += 1
        if self.o["patience"] is not None and self.bad >= self.o["patience"]:
            r.stopped = "early_stopping"

    # ------------------------------------------------------------------ checkpoints
    def _state(self):
        r = self.result
        return {
            "format": 1, "settings": self.settings, "step": self.step, "num_steps": self.o["num_steps"],
            "losses": list(r.losses), "pretrain_losses": list(r.pretrain_losses),
            "pretrained_nodes": list(r.pretrained_nodes), "pretrained": self.pretrained,
            "validation": [list(v) for v in r.validation], "best_step": r.best_step,
            "best_validation_loss": r.best_validation_loss, "best_params": self.best_params, "bad": self.bad,
            "stopped": r.stopped, "params": capture_params(),
            "adam": None if self.adam is None else self.adam.state_dict(),
            "gauss": None if self.gauss is None else {"num_steps": self.gauss.num_steps,
                                                      "last_step_size": self.gauss.last_step_size},
            "sink": None if self.sink is None else {"num_steps": self.sink.num_steps},
            "guard": None if self.ng_guard is None else self.ng_guard.state(), "ng_stopped": self.ng_stopped,
            "setup": {"guide": _setup_done(self.guide), "warm": self.mf is not None and _setup_done(self.mf)},
            "rng": capture_rng_state(),
        }

    def _save(self):
        if self.path is not None:
            save_checkpoint(self.path, self._state())

    def _restore(self, state):
        r = self.result
        diff = {k: (state["settings"].get(k), v) for k, v in self.settings.items() if state["settings"].get(k) != v}
        if diff:
            k, (old, new) = next(iter(diff.items()))
            raise ValueError(f"train: the checkpoint {self.path!r} was written with {k}={old!r}, this call has "
                             f"{k}={new!r} ({len(diff)} setting(s) differ); resume with the saved run's settings "
                             "or start a new checkpoint")
        if state["step"] > self.o["num_steps"]:
            raise ValueError(f"train: the checkpoint {self.path!r} is at step {state['step']}, beyond num_steps = "
                             f"{self.o['num_steps']}")
        self.step = state["step"]
        in_warm_phase = self.warm and self.step <= self.warm
        if in_warm_phase or state["setup"]["warm"]:
            self._make_mf()
            if state["setup"]["warm"]:
                self.mf(*self.args, **self.kw)
        if state["setup"]["guide"] and not _setup_done(self.guide):
            self.guide(*self.args, **self.kw)
        restore_params(state["params"], ignore_missing=() if in_warm_phase else (WARM_START_NAME,))
        if self.step < self.warm or (self.warm and self.step == self.warm):
            self._start_phase(self.mf, run_guide=False)
        else:
            self._start_phase(self.guide, run_guide=False)
        self.adam.load_state_dict(state["adam"])
        if state["sink"] is not None and self.sink is not None:
            self.sink.num_steps = state["sink"]["num_steps"]
        if state["gauss"] is not None:
            self._make_gauss()
            guard = state.get("guard")
            self.ng_guard = None if guard is None else NaturalGradientGuard.from_state(guard)
            self.ng_stopped = r.natural_gradient_stopped = state.get("ng_stopped")
            self.gauss.num_steps = state["gauss"]["num_steps"]
            self.gauss.last_step_size = state["gauss"]["last_step_size"]
        r.losses = list(state["losses"])
        r.pretrain_losses = list(state["pretrain_losses"])
        r.pretrained_nodes = list(state["pretrained_nodes"])
        self.pretrained = state["pretrained"]
        r.validation = [tuple(v) for v in state["validation"]]
        r.best_step, r.best_validation_loss = state["best_step"], state["best_validation_loss"]
        self.best_params, self.bad = state["best_params"], state["bad"]
        r.stopped = state["stopped"]
        r.resumed_from = self.step
        restore_rng_state(state["rng"])

    # ------------------------------------------------------------------ the run
    def run(self):
        state = None
        if self.o["resume"] and os.path.exists(self.path):
            state = load_checkpoint(self.path)
        r = self.result
        if state is None and self.o["pretrain_steps"]:
            r.pretrained_nodes, r.pretrain_losses = pretrain_nodes(
                self.dgp, self.guide, self.inputs, self.data, self.o["pretrain_steps"], lr=self.o["lr"],
                mask=self.kw.get("mask"), lr_scale=self.lr_scale, progress=self.o["progress"])
            self.pretrained = True
            self._save()
        context = self.dgp.fixed_kernels() if self.use_fixed else _null()
        with context:
            if state is not None:
                self._restore(state)
            else:
                if self.warm:
                    self._make_mf()
                    self._start_phase(self.mf)
                else:
                    self._start_phase(self.guide)
            if self.dp is not None and not self.dp.is_setup:
                self.dp.setup(self.model, self.guide, *self.args, **self.kw)
            self._loop()
        if self.o["validation"] is not None and self.o["restore_best"] and self.best_params is not None:
            restore_params(self.best_params, ignore_missing=(WARM_START_NAME,))
        if self.o["natural_gradient_guard"]:
            noise_warnings(self.dgp, self.data, self.name)
        return r

    def _loop(self):
        r, o = self.result, self.o
        num_steps = o["num_steps"]
        steps = range(self.step + 1, num_steps + 1)
        bar = None
        if o["progress"] and r.stopped is None:
            from tqdm.auto import tqdm

            bar = steps = tqdm(steps, desc=self.name, mininterval=0.5, initial=self.step, total=num_steps)
        start = time.perf_counter()
        warm_end = None
        if r.stopped is not None:
            steps = ()
        for s in steps:
            if self.warm and s == self.warm + 1:
                warm_end = time.perf_counter()
                self.guide(*self.args, **self.kw)
                self.guide.warm_start(self.mf)
                self._start_phase(self.guide)
            label = f"{self.name} (mean-field warm start)" if s <= self.warm else self.name
            with training_step(label, s):
                loss = self._one_step(s)
            self.step = s
            r.losses.append(loss)
            if o["validation"] is not None and s > self.warm and (s % o["validate_every"] == 0 or s == num_steps):
                self._validate(s)
            if self.path is not None and s % o["checkpoint_every"] == 0:
                self._save()
            for cb in o["callbacks"]:
                if cb(s, loss):
                    r.stopped = "callback"
            if bar is not None and (s % 25 == 0 or s == num_steps):
                recent = r.losses[-25:]
                bar.set_postfix(elbo=f"{-sum(recent) / len(recent):.1f}")
            if r.stopped is not None:
                break
        end = time.perf_counter()
        r.seconds = end - start
        if self.warm and self.step <= self.warm:
            warm_end = end
        r.warm_start_seconds = 0.0 if warm_end is None else warm_end - start
        if bar is not None:
            bar.close()
        if self.path is not None:
            self._save()


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _parameters(obj):
    return obj.parameters() if isinstance(obj, torch.nn.Module) else ()


def _all_fixed(dgp):
    """Whether every kernel hyperparameter and inducing input of ``dgp`` is fixed (no gradient, no prior)."""
    for w in dgp.topo_nodes:
        kernel = dgp.kernels[w]
        if any(p.requires_grad for p in kernel.parameters()):
            return False
        if any(getattr(m, "_pyro_samples", None) for m in kernel.modules()):
            return False
        if dgp.inducing_inputs(w).requires_grad:
            return False
    return True
