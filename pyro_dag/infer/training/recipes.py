"""Named training recipes of :func:`~pyro_dag.infer.train`, in a registry (``RECIPES``) that other algorithms add
theirs to (:mod:`pyro_dag.infer.lamp` registers ``"lamp"``).

* ``"adam"``: Adam on every parameter for all steps with the DAGELBO estimator (Perlino, Hamelijnck, Johansen &
  Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645, Algorithm 4), plain Monte
  Carlo samples: the paper's protocol;
* ``"recommended"``: the nodes whose inputs are all observed fitted exactly first (their collapsed bound, Titsias
  2009, by L-BFGS: :mod:`~pyro_dag.infer.training.collapsed`), then antithetic sample pairs and, for structured
  guides, a natural-gradient phase on the whole Gaussian inducing posterior (Salimbeni, Eleftheriadis & Hensman
  2018) after the Adam phase.
"""
import contextlib
import os
from dataclasses import dataclass

import torch.distributed as dist

from ...param_store import adopting_param_store
from ...progress import quiet_setup
from ...threads import limit_threads
from ..distributed import require_process_group
from .checkpoint import CheckpointLock, check_replaceable, check_writable, checkpoint_file
from .run import TrainingRun

__all__ = ["RECIPES", "SVIRecipe", "register_recipe"]

#: ``{name: recipe}``: every recipe has ``run(model, guide, inputs, data, config)`` returning a
#: :class:`~pyro_dag.infer.training.TrainResult`.
RECIPES = {}


def register_recipe(name, recipe):
    """Make ``recipe`` (an object with ``run(model, guide, inputs, data, config)``) available as
    ``train(..., recipe=name)``."""
    RECIPES[name] = recipe
    return recipe


@dataclass(frozen=True)
class SVIRecipe:
    """A stochastic-variational-inference recipe: the defaults it gives the options left at ``None``.

    :ivar bool antithetic: the default DAGELBO pairs its samples antithetically (with an even number of them).
    :ivar float natural_gradient: the default step size ``γ`` of the natural-gradient phase for structured
        (chordal / full) guides (0: Adam only).
    :ivar bool collapse: the default of ``collapse``: fit the nodes whose inputs are all observed exactly first
        (:func:`~pyro_dag.infer.training.fit_collapsed`).
    :ivar bool start_hidden: the default of ``start_hidden``: start hidden nodes at the shallow fit
        (:func:`~pyro_dag.infer.training.start_hidden_nodes`).
    :ivar int candidate_starts: the count ``candidate_starts="auto"`` gives a DAGDGP with hidden nodes
        (:mod:`~pyro_dag.infer.training.candidates`; 1: none).
    """

    antithetic: bool
    natural_gradient: float
    collapse: bool = False
    start_hidden: bool = False
    candidate_starts: int = 1

    def run(self, model, guide, inputs, data, config):
        """Train with :class:`~pyro_dag.infer.training.run.TrainingRun` (checkpoint file, threads, resumption)."""
        path = None
        if config.distributed:
            require_process_group("train(distributed=True)")
        if config.checkpoint is not None:
            path = checkpoint_file(config.checkpoint)
            if config.distributed:
                root, ext = os.path.splitext(path)
                path = f"{root}.rank{dist.get_rank()}of{dist.get_world_size()}{ext}"
            check_writable(path)
        # resuming overwrites every stored value, so a rebuilt model may take the store's tensors without a warning
        resuming = bool(config.resume) and path is not None and os.path.exists(path)
        # one writer per checkpoint, and never over a file of another kind (a saved fit, a user's file)
        lock = CheckpointLock(path) if path is not None else contextlib.nullcontext()
        with lock, limit_threads(config.num_threads), \
                (adopting_param_store() if resuming else contextlib.nullcontext()), quiet_setup(not config.progress):
            if path is not None and not resuming:
                check_replaceable(path)
            return TrainingRun(model, guide, inputs, data, config, self, path).run()


register_recipe("adam", SVIRecipe(antithetic=False, natural_gradient=0.0))
register_recipe("recommended", SVIRecipe(antithetic=True, natural_gradient=0.01, collapse=True,
                                          start_hidden=True, candidate_starts=2))
