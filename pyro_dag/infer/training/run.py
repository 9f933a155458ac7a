"""One run of an SVI recipe of :func:`~pyro_dag.infer.train`: the estimator, freezing, the loop, validation and
checkpoints; the phases (:mod:`~pyro_dag.infer.training.phases`) take the steps."""
import contextlib
import copy
import math
import os
import time
import warnings

from pyro.infer import Trace_ELBO

from ..autoguide import AutoStructuredGuide
from ..checks import check_finite_loss, training_step
from ..distributed import DataParallel
from ..elbo import DAGELBO
from .collapsed import collapsible_nodes, fit_collapsed, learnable_node_tensors
from .minibatch import choose_minibatch
from .hidden_start import start_hidden_nodes
from .best import BestIterate, BestIterateWarning
from .rollback import DivergenceRollback, RollbackWarning
from .noise_step import NoiseStep, check_noise_step
from .candidates import CandidateStarts, CandidateWarning, resolve_candidates
from .checkpoint import (FORMAT, CheckpointError, capture_params, capture_rng_state, check_record, load_checkpoint,
                         restore_params,
                         restore_rng_state, run_record, save_checkpoint)
from .groups import all_fixed, find_dagdgp, group_tensors, same_shapes
from .guard import (DEFAULT_NATURAL_GRADIENT_MAX_KL, NaturalGradientGuard, noise_took_signal, noise_warnings,
                    signal_warnings)
from .phases import WARM_START_NAME, AdamPhase, NaturalGradientPhase, WarmStartPhase
from .pretrain import pretrain_nodes, pretrainable_nodes
from .result import TrainResult
from .sampler_rule import choose_sampler
from .validation import structured_part, validation_loss

__all__ = ["TrainingRun"]


def _setup_done(guide):
    if hasattr(guide, "family") and getattr(guide, "_model_key", None) is not None:
        return guide.family is not None
    return getattr(guide, "prototype_trace", None) is not None


def _mark_unfinished(guide, what):
    """Mark the guide's fit as started, unfinished (``what``) or finished (``None``); ``predict`` refuses the first."""
    if guide is not None:
        object.__setattr__(guide, "_pyro_dag_unfinished_fit", what)


class TrainingRun:
    """One run of an SVI recipe of :func:`~pyro_dag.infer.train`: the loop's state in one place, so that it can be
    saved and restored; the phases (:mod:`~pyro_dag.infer.training.phases`) take the steps.

    :param config: the run's :class:`~pyro_dag.infer.training.TrainConfig`. :param recipe: its
        :class:`~pyro_dag.infer.training.recipes.SVIRecipe`. :param path: the checkpoint file, or ``None``.
    """

    def __init__(self, model, guide, inputs, data, config, recipe, path):
        self.model, self.guide, self.inputs, self.data = model, guide, inputs, data
        self.args = (inputs,) if data is None else (inputs, data)
        self.config = config
        groups = config.freeze_groups
        self.kw = dict(config.model_kwargs or {})
        self.path = path
        self.name = config.name
        self.dgp = find_dagdgp(model)
        dgp = self.dgp
        needs = [k for k in ("pretrain_steps", "freeze_fraction", "sink_step_size") if getattr(config, k)]
        if config.likelihood_lr_multiplier != 1.0:
            needs.append("likelihood_lr_multiplier")
        if needs and dgp is None:
            raise ValueError(f"train: {needs[0]} needs a DAGDGP model (as the model or a submodule)")
        self.dag_guide = structured_part(guide) is not None and dgp is not None
        structured = self.dag_guide and isinstance(guide, AutoStructuredGuide) and guide.precision != "mean_field"
        elbo = config.elbo
        if elbo is None:
            num_particles = 4 if config.num_particles is None else config.num_particles
            antithetic = config.antithetic
            if self.dag_guide:
                if antithetic is None:
                    antithetic = recipe.antithetic and num_particles % 2 == 0
                elbo = DAGELBO(num_particles=num_particles, antithetic=antithetic)
            else:
                if antithetic:
                    raise ValueError("train: antithetic pairs are a DAGELBO option, which needs an "
                                     "AutoStructuredGuide of a DAGDGP; pass elbo= for other guides")
                elbo = Trace_ELBO(num_particles=num_particles)
        self.elbo = elbo
        self.dp = None
        ng = config.natural_gradient
        check_noise_step(config, model, guide, dgp, self.dag_guide)
        if config.distributed:
            for k in ("natural_gradient", "sink_step_size", "warm_start"):
                if getattr(config, k):
                    raise ValueError(f"train(distributed=True): {k} steps are not data-parallel (Adam steps only); "
                                     f"pass {k}=0")
            ng = 0.0
            self.dp = DataParallel(elbo)
        if ng is None:
            ng = recipe.natural_gradient if structured else 0.0
        if ng and not isinstance(guide, AutoStructuredGuide):
            raise ValueError("train: natural_gradient steps need the guide to be an AutoStructuredGuide (its "
                             f"Gaussian posterior), got {type(guide).__name__}; pass natural_gradient=0")
        if config.sink_step_size and not (self.dag_guide and isinstance(guide, AutoStructuredGuide)):
            raise ValueError("train: sink_step_size needs the guide to be an AutoStructuredGuide of a DAGDGP, got "
                             f"{type(guide).__name__}")
        ng = float(ng)
        after = config.natural_gradient_after
        ng_after = 1000 if after is None else after
        max_kl = config.natural_gradient_max_kl
        ng_max_kl = DEFAULT_NATURAL_GRADIENT_MAX_KL if max_kl is None else float(max_kl)
        warm = config.warm_start
        if warm and not structured:
            raise ValueError("train: warm_start initialises a structured (chordal / full) AutoStructuredGuide of a "
                             "DAGDGP from a mean-field one; this guide is not one (pass warm_start=0)")
        self.warm = warm
        self.freeze_steps = int(math.floor(config.freeze_fraction * config.num_steps + 1e-9))
        if dgp is not None and not dgp.is_setup:
            if dgp is model:
                dgp.setup(inputs, data, self.kw.get("mask"))
            elif self.freeze_steps and "inducing" in groups:
                raise ValueError("train: freezing the inducing inputs needs them to exist: set the DAGDGP up first "
                                 "(dgp.setup(inputs, data)) when it is part of a larger model")
        self.frozen = group_tensors(dgp, groups) if (dgp is not None and self.freeze_steps and groups) else {}
        self.lr_scale = {}
        if config.likelihood_lr_multiplier != 1.0:
            self.lr_scale = {i: config.likelihood_lr_multiplier for i in group_tensors(dgp, "likelihood")}
        self.optim_args = config.optim_args if config.optim_args is not None else {"lr": config.lr}
        fk = config.fixed_kernels
        if fk == "auto":
            fk = dgp is not None and dgp.is_setup and all_fixed(dgp)
        self.use_fixed = bool(fk)
        collapse = recipe.collapse if config.collapse is None else config.collapse
        # the exact fit writes q(V_w) into the structured guide; data-parallel shards do not hold every case
        self.collapse = bool(collapse) and self.dag_guide and self.dp is None
        start_hidden = recipe.start_hidden if config.start_hidden is None else config.start_hidden
        self.start_hidden = bool(start_hidden) and self.dag_guide and self.dp is None
        self._choose_minibatch()
        self.settings = {
            "recipe": config.recipe, "lr": config.lr, "elbo": type(elbo).__name__,
            "num_particles": getattr(elbo, "num_particles", None), "antithetic": getattr(elbo, "antithetic", False),
            "sampler": getattr(elbo, "sampler", None), "natural_gradient": ng,
            "natural_gradient_after": ng_after if ng else None,
            "natural_gradient_max_kl": ng_max_kl if ng else None,
            "natural_gradient_guard": bool(config.natural_gradient_guard) if ng else None,
            "sink_step_size": float(config.sink_step_size), "warm_start": warm,
            "pretrain_steps": config.pretrain_steps, "freeze_steps": self.freeze_steps,
            "freeze": list(groups) if self.freeze_steps else [],
            "likelihood_lr_multiplier": config.likelihood_lr_multiplier,
            "validate_every": config.validate_every if config.validation is not None else None,
            "patience": config.patience, "fixed_kernels": self.use_fixed, "collapse": self.collapse,
            "start_hidden": self.start_hidden, "best_iterate": bool(config.best_iterate and config.validation is None and self.dp is None),
            "spike_factor": config.spike_factor, "rollback": bool(config.rollback and self.dp is None),
            "noise_step": bool(config.noise_step in (True, "auto") and self.dag_guide and self.dgp is model
                               and self.dp is None),
            "minibatch": self.minibatch,
        }
        if self.dp is not None:
            self.settings["world_size"] = self.dp.world_size
        self._candidate_count, steps = resolve_candidates(self, recipe.candidate_starts)
        self.settings.update(candidate_starts=self._candidate_count,
                             candidate_steps=steps if self._candidate_count > 1 else None)
        # what a checkpoint of this run belongs to (guide, graph, dtype, data): resuming refuses another run's file
        self.record = run_record(model, guide, inputs, data, self.kw.get("mask"), dgp) if path is not None else None
        self.result = TrainResult(settings=dict(self.settings, num_steps=config.num_steps))
        self.step = 0
        self.warm_phase = WarmStartPhase(self, warm)
        self.adam_phase = AdamPhase(self)
        self.natural = NaturalGradientPhase(self, self.adam_phase, ng, ng_after, ng_max_kl)
        self.best_params = None
        self.bad = 0
        # a run judged by its validation loss ends at its best validation (restore_best) instead
        self.best_iterate = (BestIterate(start=warm) if config.best_iterate and config.validation is None
                             and self.dp is None else None)
        # data-parallel processes would have to agree on every rollback: Adam steps there are left as they are
        self.rollback = DivergenceRollback() if config.rollback and self.dp is None else None
        self.pretrained = False
        self._no_freeze = {}
        self.noise_step = None   # built at its first use, once the model is set up
        # "auto": the second half only (early on, Adam's slow fall of the noise anneals; config.py, noise_step)
        self.noise_step_after = max(self.warm, config.num_steps // 2) if config.noise_step == "auto" else self.warm

    # ------------------------------------------------------------------ one step
    def _one_step(self, s):
        frozen = self.frozen if s <= self.freeze_steps else self._no_freeze
        if self.natural.active(s):
            loss = self.natural.step(s, frozen)
        else:
            loss = self.adam_phase.step(frozen)
        check_finite_loss(loss, "the loss", self.inputs, self.data)
        return loss

    def _watch(self, s, loss, natural_step):
        """Feed the divergence rollback the loss of step ``s``; roll back (with a warning) when it says so."""
        rb = self.rollback
        if natural_step:   # the natural-gradient phase has its own guard
            rb.reset()
            guard = self.natural.guard
            if self.natural.stopped == s and guard is not None and guard.best_adam is not None:
                # the guard restored its best state, from which Adam may diverge at once
                rb.seed(guard.restored_step if guard.restored_step is not None else s,
                        guard.best_params, guard.best_adam, (guard.best, guard.sd), self.adam_phase.adam)
            return
        if not rb.observe(s, loss, self.adam_phase.adam):
            return
        back, factor = rb.roll_back(s, self.adam_phase.adam)
        self.result.rollbacks.append((s, back, factor))
        warnings.warn(f"{self.name}, step {s}: the loss rose far above its level of steps {back - rb.window + 1}-"
                      f"{back} (median of the last {rb.probe} steps); went back to the parameters after step {back} "
                      f"and halved Adam's learning rate (now {factor:g} of the original). Pass rollback=False to "
                      "turn this off.", RollbackWarning, stacklevel=4)

    def _noise_step(self, s, frozen):
        """The one-sided closed-form noise step after step ``s``, when it is due (:class:`NoiseStep`)."""
        if self.noise_step is None:
            self.noise_step = NoiseStep(self.dgp, self.guide, self.inputs, self.data, mask=self.kw.get("mask"))
            if self.noise_step.idle and self.config.noise_step is True:   # "auto" is off there without a word
                warnings.warn(f"{self.name}: noise_step=True does nothing here: {self.noise_step.idle}; pass "
                              "noise_step=False", UserWarning, stacklevel=5)
        if not self.noise_step.due(s - self.warm):
            return
        adam = self.adam_phase.adam
        held = set(frozen) | (adam.hold if adam is not None else set())
        before = self.noise_step.taken
        self.noise_step(None if adam is None else adam.optim, held)
        self.result.noise_steps += self.noise_step.taken - before

    def _validate(self, s):
        validation = self.config.validation
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
            self.best_params = capture_params() if self.config.restore_best else None
            self.bad = 0
        else:
            self.bad += 1
        if self.config.patience is not None and self.bad >= self.config.patience:
            r.stopped = "early_stopping"

    # ------------------------------------------------------------------ checkpoints
    def _state(self):
        r = self.result
        gauss, sink, mf = self.natural.gauss, self.adam_phase.sink, self.warm_phase.guide
        return {
            "format": FORMAT, "record": self.record, "settings": self.settings, "step": self.step, "num_steps": self.config.num_steps,
            "losses": list(r.losses), "pretrain_losses": list(r.pretrain_losses),
            "pretrained_nodes": list(r.pretrained_nodes), "pretrained": self.pretrained,
            "collapsed_nodes": list(r.collapsed_nodes), "collapsed_losses": dict(r.collapsed_losses),
            "validation": [list(v) for v in r.validation], "best_step": r.best_step,
            "best_validation_loss": r.best_validation_loss, "best_params": self.best_params, "bad": self.bad,
            "stopped": r.stopped, "params": capture_params(),
            "adam": None if self.adam_phase.adam is None else self.adam_phase.adam.state_dict(),
            "gauss": None if gauss is None else {"num_steps": gauss.num_steps, "last_step_size": gauss.last_step_size},
            "sink": None if sink is None else {"num_steps": sink.num_steps},
            "guard": None if self.natural.guard is None else self.natural.guard.state(),
            "ng_stopped": self.natural.stopped,
            "best_iterate": None if self.best_iterate is None else self.best_iterate.state(),
            "rollback": None if self.rollback is None else self.rollback.state(),
            "setup": {"guide": _setup_done(self.guide), "warm": mf is not None and _setup_done(mf)},
            "rng": capture_rng_state(),
        }

    def _save(self):
        if self.path is not None:
            save_checkpoint(self.path, self._state())

    def _restore(self, state):
        r = self.result
        # a setting the saved run did not record (an older version) is not compared
        diff = {k: (state["settings"].get(k), v) for k, v in self.settings.items()
                if k in state["settings"] and state["settings"][k] != v}
        if diff:
            k, (old, new) = next(iter(diff.items()))
            raise CheckpointError(f"train: the checkpoint {self.path!r} was written with {k}={old!r}, this call has "
                             f"{k}={new!r} ({len(diff)} setting(s) differ); resume with the saved run's settings "
                             "or start a new checkpoint")
        if state["step"] > self.config.num_steps:
            raise CheckpointError(f"train: the checkpoint {self.path!r} is at step {state['step']}, beyond num_steps = "
                             f"{self.config.num_steps}: resume with num_steps >= {state['step']} (the total, not the "
                             "steps still to take), or start a new checkpoint")
        self.step = state["step"]
        in_warm_phase = self.warm and self.step <= self.warm
        if in_warm_phase or state["setup"]["warm"]:
            self.warm_phase.make_guide()
            if state["setup"]["warm"]:
                self.warm_phase.guide(*self.args, **self.kw)
        if state["setup"]["guide"] and not _setup_done(self.guide):
            self.guide(*self.args, **self.kw)
        restore_params(state["params"], ignore_missing=() if in_warm_phase else (WARM_START_NAME,))
        if self.step < self.warm or (self.warm and self.step == self.warm):
            self.adam_phase.start(self.warm_phase.guide, run_guide=False)
        else:
            self.adam_phase.start(self.guide, run_guide=False)
        self.adam_phase.adam.load_state_dict(state["adam"])
        if state["sink"] is not None and self.adam_phase.sink is not None:
            self.adam_phase.sink.num_steps = state["sink"]["num_steps"]
        if state["gauss"] is not None:
            natural = self.natural
            natural.make()
            guard = state.get("guard")
            natural.guard = None if guard is None else NaturalGradientGuard.from_state(guard)
            natural.stopped = r.natural_gradient_stopped = state.get("ng_stopped")
            natural.gauss.num_steps = state["gauss"]["num_steps"]
            natural.gauss.last_step_size = state["gauss"]["last_step_size"]
        r.losses = list(state["losses"])
        r.pretrain_losses = list(state["pretrain_losses"])
        r.pretrained_nodes = list(state["pretrained_nodes"])
        r.collapsed_nodes = list(state.get("collapsed_nodes", []))
        r.collapsed_losses = dict(state.get("collapsed_losses", {}))
        self._hold(r.collapsed_nodes)
        self.pretrained = state["pretrained"]
        r.validation = [tuple(v) for v in state["validation"]]
        r.best_step, r.best_validation_loss = state["best_step"], state["best_validation_loss"]
        self.best_params, self.bad = state["best_params"], state["bad"]
        r.stopped = state["stopped"]
        if self.best_iterate is not None and state.get("best_iterate") is not None:
            self.best_iterate = BestIterate.from_state(state["best_iterate"])
        if self.rollback is not None and state.get("rollback") is not None:
            self.rollback = DivergenceRollback.from_state(state["rollback"])
            r.rollbacks = [tuple(e) for e in self.rollback.events]
        r.resumed_from = self.step
        restore_rng_state(state["rng"])

    # ------------------------------------------------------------------ the run
    def run(self):
        state = None
        if self.config.resume and os.path.exists(self.path):
            state = load_checkpoint(self.path)
            check_record(state, self.record, self.path)
        r = self.result
        if state is None and self.collapse:
            # an exact fit stopped half way (Ctrl-C) leaves nodes at their start: predict refuses it until a fit ends
            _mark_unfinished(self.guide, "the exact fit of the nodes with observed inputs (train's collapse phase)")
            self._fit_collapsed()
            _mark_unfinished(self.guide, None)
        initial = None
        if state is None and self.start_hidden and r.stopped is None:
            initial = self._initial_state()
            r.started_nodes = start_hidden_nodes(self.dgp, self.guide, self.inputs, self.data,
                                                 mask=self.kw.get("mask"))
            if not r.started_nodes:
                initial = None
        if state is None and self.config.pretrain_steps:
            r.pretrained_nodes, r.pretrain_losses = pretrain_nodes(
                self.dgp, self.guide, self.inputs, self.data, self.config.pretrain_steps, lr=self.config.lr,
                mask=self.kw.get("mask"), lr_scale=self.lr_scale, progress=self.config.progress,
                nodes=self._pretrainable())
            self.pretrained = True
            self._save()
        if state is None and self.config.elbo is None and r.stopped is None:   # no steps, no sampler to choose
            self._choose_sampler()
        context = self.dgp.fixed_kernels() if self.use_fixed else contextlib.nullcontext()
        with context:
            if state is not None:
                self._restore(state)
            else:
                if self.warm:
                    self.warm_phase.make_guide()
                    self.adam_phase.start(self.warm_phase.guide)
                else:
                    self.adam_phase.start(self.guide)
            if self.dp is not None and not self.dp.is_setup:
                self.dp.setup(self.model, self.guide, *self.args, **self.kw)
            self._take_steps(fresh=state is None, unstarted=initial)
            kept = r.candidates
            if kept is not None and kept["starts"][kept["kept"]] == "no start":
                initial = None   # the run kept goes without the hidden-node start already
        if self.config.validation is not None and self.config.restore_best and self.best_params is not None:
            restore_params(self.best_params, ignore_missing=(WARM_START_NAME,))
        self._end_at_best_iterate()
        took = noise_took_signal(self.dgp) if initial is not None and r.stopped is None else {}
        if took and not (same_shapes(initial[0], self.model.state_dict())
                         and same_shapes(initial[1], self.guide.state_dict())):
            took = {}   # the model or guide grew other values since: nothing to go back to
        if took:
            self._fallback(initial, sorted(took))
            r = self.result
        if self.config.natural_gradient_guard:
            noise_warnings(self.dgp, self.data, self.name, inputs=self.inputs)
        signal_warnings(self.dgp, self.name, inputs=self.inputs, data=self.data)
        return r

    def _take_steps(self, fresh, unstarted=None):
        """The loop, after the candidate starts (:mod:`.candidates`) when the run takes them; ``unstarted``: the
        model's and guide's values before the hidden-node start, for a last candidate without it."""
        count = self._candidate_count
        if unstarted is not None and count > 1 and self.config.candidate_starts == "auto":
            count += 1   # the start on two streams, and one candidate without it
            self.settings["candidate_starts"] = self.result.settings["candidate_starts"] = count
        if fresh and count > 1 and self.result.stopped == "collapsed":
            warnings.warn(f"{self.name}: candidate_starts={count} took no candidates: every GP node was fitted exactly "
                          "(collapse), so no steps are left to take; pass collapse=False to fit them by steps from "
                          "candidate starts instead", CandidateWarning, stacklevel=5)
        if fresh and count > 1 and self.result.stopped is None:
            # the phases hold one candidate's optimiser: each restore starts them afresh
            pick = CandidateStarts(count=count, steps=self.settings["candidate_steps"])
            self.result.candidates = pick.run(self, self._fresh_phases, unstarted=unstarted)
        self._loop()

    def _fresh_phases(self):
        """New Adam and natural-gradient phases with this run's settings (their optimisers start empty)."""
        self.adam_phase = AdamPhase(self)
        self.natural = NaturalGradientPhase(self, self.adam_phase, self.natural.step_size, self.natural.after,
                                            self.natural.max_kl)

    def _end_at_best_iterate(self):
        r, tracker = self.result, self.best_iterate
        if tracker is not None and r.stopped is None and tracker.worse_at_end():
            tracker.restore()
            r.restored_step = tracker.best_step
            warnings.warn(f"{self.name}: the loss ended worse than it was (mean of the last {tracker.window} steps "
                          f"{tracker.last:.6g} against {tracker.best:.6g} over steps {tracker.best_step - tracker.window + 1}-"
                          f"{tracker.best_step}); the fit returned is the one after step {tracker.best_step} "
                          "(TrainResult.restored_step). Pass best_iterate=False to keep the last parameters.",
                          BestIterateWarning, stacklevel=5)

    # ------------------------------------------------------------------ fallback without the hidden-node start
    def _initial_state(self):
        """The model's and the guide's values before the hidden-node start (the guide set up first), if this run may
        need to train again without the start (``fallback_start``), else ``None``."""
        c = self.config
        if not (c.fallback_start and self.path is None and self.dp is None and c.validation is None
                and not self.warm and not c.pretrain_steps and self.model is self.dgp):
            return None
        target = structured_part(self.guide)
        dgp = self.dgp
        if target is None or getattr(dgp, "priors", None) is not None:
            return None
        if not dgp.is_setup:
            dgp.setup(self.inputs, self.data, self.kw.get("mask"))
        _, _, obs = dgp.checked_arguments(self.inputs, self.data, self.kw.get("mask"))
        if not any(w not in obs and w not in dgp.latent_inputs for w in dgp.topo_nodes):
            return None   # no hidden node: the start does nothing
        if target.family is None:   # the guide's first call, which the start would make here (same random draws)
            self.guide(*self.args, **self.kw)
        return copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.guide.state_dict())

    def _final_loss(self):
        r = self.result
        if r.restored_step is not None:
            return self.best_iterate.best
        tail = r.losses[-50:]
        return sum(tail) / len(tail) if tail else math.inf

    def _fallback(self, initial, nodes):
        """Train again from ``initial`` without the hidden-node start; keep whichever run ends at the lower loss.

        The start writes the shallow fit into the hidden nodes; where a child depends on its hidden co-parents
        jointly, a pilot on each parent's roots alone can start only some of them, and the steps may then settle
        where the child's noise explains its data (the latent collider, data set 4: held-out RMSE 0.82 on both
        streams tried, the training mean's; without the start 0.215 after 1500 steps)."""
        r = self.result
        first_loss = self._final_loss()
        first = (copy.deepcopy(self.model.state_dict()), copy.deepcopy(self.guide.state_dict()))
        first_result = r
        self.model.load_state_dict(initial[0])
        self.guide.load_state_dict(initial[1])
        self.result = TrainResult(settings=dict(r.settings))
        self.result.collapsed_nodes, self.result.collapsed_losses = r.collapsed_nodes, r.collapsed_losses
        self.result.collapse_seconds = r.collapse_seconds
        self.step = 0
        self._fresh_phases()
        self.best_iterate = BestIterate() if self.best_iterate is not None else None
        self.rollback = DivergenceRollback() if self.rollback is not None else None
        with self.dgp.fixed_kernels() if self.use_fixed else contextlib.nullcontext():
            self.adam_phase.start(self.guide)
            self._take_steps(fresh=True)
        self._end_at_best_iterate()
        second_loss = self._final_loss()
        info = {"start_loss": first_loss, "no_start_loss": second_loss, "nodes": nodes}
        if second_loss < first_loss:
            self.result.fallback = dict(info, kept="no start")
        else:
            self.model.load_state_dict(first[0])
            self.guide.load_state_dict(first[1])
            self.result = first_result
            self.result.fallback = dict(info, kept="start")
        self.result.seconds += (first_result.seconds if self.result is not first_result else 0.0)

    def _choose_sampler(self):
        """The conditional sampler unless its state would not fit in memory (:mod:`.sampler_rule`)."""
        target = structured_part(self.guide) if self.dag_guide and self.model is self.dgp else None
        if target is None or not isinstance(self.elbo, DAGELBO) or self.elbo.sampler != "conditional":
            return
        if getattr(target, "precision", None) == "mean_field":
            return
        if getattr(target, "family", None) is None:   # built at the guide's first call, as the first step would
            rng = capture_rng_state()                  # (the steps draw the same numbers as without this call)
            self.guide(*self.args, **self.kw)
            restore_rng_state(rng)
        n = self.dgp.checked_arguments(self.inputs, self.data, self.kw.get("mask"))[1]
        cases = self.kw.get("subsample_size") or n
        sampler = choose_sampler(self.elbo, target.family, int(cases), self.name)
        self.settings["sampler"] = self.result.settings["sampler"] = sampler

    def _choose_minibatch(self):
        """Minibatches for the steps above a number of cases (:mod:`.minibatch`), unless the exact fits leave no
        step to take; sets ``self.minibatch`` (``B`` or ``None``) and adds ``subsample_size`` to the run's keywords."""
        self.minibatch = None
        dgp = self.dgp
        if self.config.minibatch is False or dgp is None or not dgp.is_setup:
            return
        X, n, obs = dgp.checked_arguments(self.inputs, self.data, self.kw.get("mask"))
        if (self.collapse and self.model is dgp and structured_part(self.guide) is self.guide
                and not dgp.latent_inputs and set(collapsible_nodes(dgp, X, obs)) == set(dgp.gp_nodes)):
            return   # every node fitted exactly: no steps
        self.minibatch = choose_minibatch(self.config.minibatch, self.model, dgp, int(n), self.kw,
                                          distributed=self.dp is not None, name=self.name)
        if self.minibatch is not None:
            self.kw["subsample_size"] = self.minibatch

    def _fit_collapsed(self):
        """Fit the collapsible nodes exactly, hold them, and skip the steps when nothing else is left to train."""
        r, dgp = self.result, self.dgp
        if not dgp.is_setup:
            dgp.setup(self.inputs, self.data, self.kw.get("mask"))
        fit = fit_collapsed(dgp, self.guide, self.inputs, self.data, mask=self.kw.get("mask"))
        r.collapsed_nodes, r.collapsed_losses, r.collapse_seconds = fit.nodes, fit.losses, fit.seconds
        self._hold(fit.nodes)
        everything = (self.model is dgp and structured_part(self.guide) is self.guide and not dgp.latent_inputs
                      and fit.nodes and set(fit.nodes) == set(dgp.gp_nodes))
        if everything:   # the exact optimum of the ELBO over q(V) at fitted hyperparameters: steps only add noise
            r.stopped = "collapsed"

    def _hold(self, nodes):
        """Hold the kernels, likelihoods and inducing inputs of the exactly fitted ``nodes`` through every step."""
        held = {}
        self.dgp.exact_fit_nodes.update(nodes)   # (also when resumed): predict feeds them observed-like parents
        for w in nodes:
            held.update(learnable_node_tensors(self.dgp, w))
        self.frozen.update(held)
        self._no_freeze.update(held)

    def _pretrainable(self):
        """Nodes for node-wise pretraining: all that can be fitted alone, but those already fitted exactly."""
        X, _, obs = self.dgp.checked_arguments(self.inputs, self.data, self.kw.get("mask"))
        return [w for w in pretrainable_nodes(self.dgp, obs) if w not in self.result.collapsed_nodes]

    def _loop(self, until=None):
        r, config = self.result, self.config
        num_steps = config.num_steps
        steps = range(self.step + 1, (num_steps if until is None else min(until, num_steps)) + 1)
        bar = None
        if config.progress and r.stopped is None:
            from tqdm.auto import tqdm

            bar = steps = tqdm(steps, desc=self.name, mininterval=0.5, initial=self.step, total=num_steps)
        start = time.perf_counter()
        warm_end = None
        if r.stopped is not None:
            steps = ()
        for s in steps:
            if self.warm and s == self.warm + 1:
                warm_end = time.perf_counter()
                self.warm_phase.hand_over()
                self.adam_phase.start(self.guide)
                if self.rollback is not None:   # the warm start's snapshots belong to another guide and optimiser
                    self.rollback = DivergenceRollback()
            label = f"{self.name} (mean-field warm start)" if s <= self.warm else self.name
            natural_step = self.natural.active(s)
            with training_step(label, s):
                loss = self._one_step(s)
            self.step = s
            r.losses.append(loss)
            if self.best_iterate is not None:
                self.best_iterate.observe(s, loss)
            if self.rollback is not None:
                self._watch(s, loss, natural_step)
            if self.settings["noise_step"] and s > self.noise_step_after:
                self._noise_step(s, self.frozen if s <= self.freeze_steps else self._no_freeze)
            if config.validation is not None and s > self.warm and (s % config.validate_every == 0 or s == num_steps):
                self._validate(s)
            if self.path is not None and s % config.checkpoint_every == 0:
                self._save()
            for cb in config.callbacks:
                if cb(s, loss):
                    r.stopped = "callback"
            if bar is not None and (s % 25 == 0 or s == num_steps):
                recent = r.losses[-25:]
                bar.set_postfix(elbo=f"{-sum(recent) / len(recent):.1f}")
            if r.stopped is not None:
                break
        end = time.perf_counter()
        r.seconds += end - start   # (candidate starts run the loop more than once)
        if self.warm and self.step <= self.warm:
            warm_end = end
        r.warm_start_seconds += 0.0 if warm_end is None else warm_end - start
        if bar is not None:
            bar.close()
        if self.path is not None:
            self._save()

