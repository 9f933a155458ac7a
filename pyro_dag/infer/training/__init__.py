"""Training DAG deep GPs: :func:`train` (a :class:`TrainConfig` and a named recipe, as plain Pyro pieces) and the
pieces it is made of, each usable on its own.

* :func:`train`, :class:`TrainConfig`, :class:`TrainResult` -- one run: its settings, its result;
* :mod:`~pyro_dag.infer.training.recipes` -- the named recipes (:data:`RECIPES`, :func:`register_recipe`);
* :mod:`~pyro_dag.infer.training.phases` -- the warm start, Adam and natural-gradient phases;
* :mod:`~pyro_dag.infer.training.run` -- the loop with validation, callbacks and checkpoints;
* :class:`JointAdam` -- Pyro's Adam step with one ``torch.optim.Adam`` and parameters held fixed on demand;
* :func:`fit_collapsed` -- exact fits (collapsed bound, L-BFGS) of the nodes whose inputs are all observed;
* :func:`start_hidden_nodes` -- hidden nodes started at the shallow fit (pilot GPs of their observed descendants);
* :func:`pretrain_nodes` -- node-wise pretraining (each node a sparse GP on its observed parents);
* :func:`lr_multiplier_args`, :func:`group_tensors`, :data:`GROUPS` -- parameter groups (inducing inputs,
  likelihood, kernel) for freezing and per-group learning rates;
* :func:`initial_scales` -- data-driven initial scales of the guide for observed nodes
  (:mod:`pyro_dag.infer.autoguide.scales`);
* :class:`NaturalGradientGuard`, :func:`noise_warnings` -- guards against a diverging natural-gradient phase;
* :class:`DivergenceRollback` -- a diverging Adam phase goes back to its last healthy state with half the step;
* :class:`NoiseStep` -- each observed Gaussian node's noise follows the fit down, in closed form;
* :class:`BestIterate` -- a run that ends worse than its best window of steps ends with that window's parameters;
* :func:`save_checkpoint` / :func:`load_checkpoint` and the state helpers -- atomic checkpoints.
"""
from .best import BestIterate, BestIterateWarning
from .candidates import CandidateWarning
from .rollback import DivergenceRollback, RollbackWarning
from .noise_step import NoiseStep
from ..autoguide.scales import initial_scales
from .adam import JointAdam
from .checkpoint import (capture_params, capture_rng_state, load_checkpoint, restore_params, restore_rng_state,
                         save_checkpoint)
from .collapsed import CollapsedFit, collapsed_bound, fit_collapsed
from .config import TrainConfig
from .hidden_start import start_hidden_nodes
from .groups import GROUPS, find_dagdgp, group_param_names, group_tensors, lr_multiplier_args
from .guard import (DEFAULT_NATURAL_GRADIENT_MAX_KL, NaturalGradientDivergenceWarning, NaturalGradientGuard,
                    NoiseRunawayWarning, noise_warnings)
from .loop import train
from .pretrain import node_elbo, pretrain_nodes, pretrainable_nodes
from .recipes import RECIPES, SVIRecipe, register_recipe
from .result import TrainResult
from .validation import validation_loss

__all__ = ["train", "TrainConfig", "TrainResult", "RECIPES", "SVIRecipe", "register_recipe", "validation_loss",
           "JointAdam", "fit_collapsed", "CollapsedFit", "collapsed_bound", "start_hidden_nodes", "pretrain_nodes",
           "pretrainable_nodes", "node_elbo", "initial_scales", "GROUPS", "find_dagdgp", "group_tensors",
           "group_param_names", "lr_multiplier_args", "save_checkpoint", "load_checkpoint", "capture_params",
           "restore_params", "capture_rng_state", "restore_rng_state", "NaturalGradientGuard",
           "NaturalGradientDivergenceWarning", "NoiseRunawayWarning", "noise_warnings",
           "DEFAULT_NATURAL_GRADIENT_MAX_KL", "BestIterate", "BestIterateWarning", "NoiseStep",
           "DivergenceRollback", "RollbackWarning", "CandidateWarning"]
