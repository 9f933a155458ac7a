"""Training DAG deep GPs: :func:`train` (the recommended recipe, as plain Pyro pieces) and the pieces it is made
of, each usable on its own.

* :func:`train` / :class:`TrainResult` -- the loop (recipes, schedules, validation, callbacks, checkpoints);
* :class:`JointAdam` -- Pyro's Adam step with one ``torch.optim.Adam`` and parameters held fixed on demand;
* :func:`pretrain_nodes` -- node-wise pretraining (each node a sparse GP on its observed parents);
* :func:`lr_multiplier_args`, :func:`group_tensors`, :data:`GROUPS` -- parameter groups (inducing inputs,
  likelihood, kernel) for freezing and per-group learning rates;
* :func:`initial_scales` -- data-driven initial scales of the guide for observed nodes;
* :class:`NaturalGradientGuard`, :func:`noise_warnings` -- guards against a diverging natural-gradient phase;
* :func:`save_checkpoint` / :func:`load_checkpoint` and the state helpers -- atomic checkpoints.
"""
from .adam import JointAdam
from .checkpoint import (capture_params, capture_rng_state, load_checkpoint, restore_params, restore_rng_state,
                         save_checkpoint)
from .groups import GROUPS, find_dagdgp, group_param_names, group_tensors, lr_multiplier_args
from .guard import (DEFAULT_NATURAL_GRADIENT_MAX_KL, NaturalGradientDivergenceWarning, NaturalGradientGuard,
                    NoiseRunawayWarning, noise_warnings)
from .loop import RECIPES, TrainResult, train, validation_loss
from .pretrain import node_elbo, pretrain_nodes, pretrainable_nodes
from .scales import initial_scales

__all__ = ["train", "TrainResult", "RECIPES", "validation_loss", "JointAdam", "pretrain_nodes", "pretrainable_nodes",
           "node_elbo", "initial_scales", "GROUPS", "find_dagdgp", "group_tensors", "group_param_names",
           "lr_multiplier_args", "save_checkpoint", "load_checkpoint", "capture_params", "restore_params",
           "capture_rng_state", "restore_rng_state", "NaturalGradientGuard", "NaturalGradientDivergenceWarning",
           "NoiseRunawayWarning", "noise_warnings", "DEFAULT_NATURAL_GRADIENT_MAX_KL"]
