"""Candidate starts kept by their loss: the first steps of a fit with hidden nodes taken on several random streams
from the same start, and only the best continued.

Which basin a latent fit settles in is decided in its first few hundred steps, by the Monte Carlo draws more than by
the start: on the latent collider (``pyro_dag.datasets.collider``, data set 0), one stream in five settled where a
stationary child kernel on its two hidden parents predicts like an exact GP of the child on the roots (held-out RMSE
0.54 after 6000 steps, final loss +66 against -40 to -64 on the other streams), while the same start re-run on
another stream from step 1 reached the good basin (0.16 at step 1000, like the others). Neither the noise nor the
pilot GP's evidence flags that run, but its loss after 500 steps is already the worst of the five (111 against
79-99). So the default fit of a model with hidden nodes takes ``K`` short candidate runs of ``R`` steps from the same
start, each on its own random stream, and continues the one with the lowest mean loss over its last
:data:`WINDOW` steps (the stochastic-search form of "restarts kept by ELBO", at ``(K - 1) · R`` extra steps rather
than ``K`` full fits; GP objectives have several local optima, Rasmussen & Williams 2006, "Gaussian Processes
for Machine Learning", Sec. 5.4.1). The kept candidate's steps count towards ``num_steps``; the others are discarded.

The start itself can be the trap: on a random latent DAG (``pyro_dag.datasets.random_latent(100)``: ``x1 -> h1 ->
h2 -> y`` with ``h1 -> h3 -> y`` and ``x1 -> h3, y``, h1 and h2 hidden) the hidden-node start
(:func:`~pyro_dag.infer.training.start_hidden_nodes`) led to held-out RMSE 0.17 after 3000 steps (final loss -132),
while the same model without it reached 0.018 after 500 steps (loss -223; an exact GP of y on x1: 0.014). So when
the run started hidden nodes, the last candidate starts from the values before the start; when it wins, a second
candidate without the start is taken, so that the run kept was weighed against another stream of its own kind (on the
collider's data set 4 the single candidate without the start won at losses 81 and 142 against 370-407 with it).
"""
import math
import warnings

import pyro
import torch

from ..checks import NonFiniteLossError
from .checkpoint import capture_rng_state, restore_rng_state
from .config import DEFAULT_CANDIDATE_STEPS

__all__ = ["CandidateStarts", "CandidateWarning", "WINDOW", "resolve_candidates"]


class CandidateWarning(UserWarning):
    """A candidate start was dropped (its loss was not finite), or a candidate option had no effect."""

#: Steps whose mean loss ranks a candidate (the same window as the fallback's and the best iterate's).
WINDOW = 50


class CandidateStarts:
    """Run ``count`` candidates of ``steps`` steps of a :class:`~pyro_dag.infer.training.run.TrainingRun` from its
    current state and leave the run in the state of the best one (by mean loss over the last :data:`WINDOW` steps).

    Candidate 0 runs on the run's own random stream (with ``count == 1`` the run is unchanged); candidate ``k >= 1``
    on ``torch.manual_seed(seed_k)``, the seeds drawn from the run's stream before the first candidate (so the whole
    fit stays reproducible under ``pyro.set_rng_seed``). Each candidate ends with its full training state (the
    checkpoint's: parameters, Adam's moments, trackers, random state), and the kept one is restored from it.

    :param int count: ``K >= 2`` candidates. :param int steps: ``R >= 1`` steps each.
    """

    def __init__(self, *, count, steps):
        self.count, self.steps = int(count), int(steps)
        self.losses = []
        self.kept = None

    def run(self, training, rebuild, unstarted=None):
        """Take the candidates' steps on ``training`` (a fresh TrainingRun about to start its loop) and restore the
        best candidate's state into it; ``rebuild()`` gives the run fresh phases (optimisers) before each restore.
        ``unstarted``: ``(model state dict, guide state dict)`` before the hidden-node start, or ``None``; with it the
        last candidate starts from those values instead (see the module's note), and when that one has the lowest
        loss, one more candidate without the start, on another stream, is weighed against it.
        :returns: ``{"losses": [K floats], "kept": k, "steps": R, "starts": ["start" / "no start" / "same", ...],
            "failed": {k: message}}``; a candidate that a callback stopped (``result.stopped == "callback"``) ends
            the candidates, is kept, and has loss ``nan``; a candidate whose loss or gradient was not finite
            (:class:`~pyro_dag.infer.checks.NonFiniteLossError`) is dropped with a :class:`CandidateWarning` (loss
            ``inf``, its error in ``"failed"``) and the others are weighed.
        :raises NonFiniteLossError: when every candidate failed so; the run is then left at the start (finite).
        A ``KeyboardInterrupt`` inside a candidate gets a note saying which candidate's state the model holds."""
        # every guide parameter must exist in the start's snapshot: set the guide up (drawing nothing from the stream)
        rng = capture_rng_state()
        training.guide(*training.args, **training.kw)
        restore_rng_state(rng)
        start = training._state()
        rng0 = capture_rng_state()
        seeds = torch.randint(0, 2 ** 62, (self.count + 1,), dtype=torch.int64).tolist()
        restore_rng_state(rng0)
        best, best_state, failed = math.inf, None, {}
        starts = ["same"] * self.count if unstarted is None else ["start"] * (self.count - 1) + ["no start"]
        k = 0
        while k < len(starts):
            if k:
                rebuild()
                _forget(training.result)
                training._restore(start)
                if starts[k] == "no start":
                    training.model.load_state_dict(unstarted[0])
                    training.guide.load_state_dict(unstarted[1])
                torch.manual_seed(seeds[k])
            try:
                training._loop(until=self.steps)
            except NonFiniteLossError as e:   # this candidate diverged: drop it, weigh the others
                failed[k] = str(e)
                self.losses.append(math.inf)
                k += 1
                continue
            except KeyboardInterrupt as e:
                e.add_note(f"train: interrupted in candidate start {k + 1} of {len(starts)}, after "
                           f"{training.step - start['step']} of its {self.steps} steps: the model and guide hold that "
                           "candidate's parameters, not the best candidate's; the fit is not finished: train again")
                raise
            if training.result.stopped is not None:   # a callback asked to stop: this candidate's state is the fit
                self.losses.append(math.nan)
                self.kept = k
                return {"losses": list(self.losses), "kept": k, "steps": self.steps, "starts": starts[:k + 1],
                        "failed": dict(failed)}
            tail = training.result.losses[-WINDOW:]
            loss = sum(tail) / len(tail) if tail else math.inf
            if not math.isfinite(loss):
                loss = math.inf
            self.losses.append(loss)
            if best_state is None or loss < best:
                best, self.kept = loss, k
                best_state = training._state()
            if k == len(starts) - 1 == self.kept and starts[k] == "no start" and len(starts) == self.count:
                starts.append("no start")   # the one run without the start won: weigh it against a second stream
            k += 1
        if best_state is None:   # every candidate diverged: go back to the start, then say so
            rebuild()
            _forget(training.result)
            training._restore(start)
            first = next(iter(failed.values()))
            raise NonFiniteLossError(f"train: every one of the {len(starts)} candidate starts hit a non-finite loss; "
                                     "the model and guide are left at their values before the candidates. "
                                     f"Candidate 0: {first}")
        if failed:
            said = "; ".join(f"candidate {j}: {m.split('. ')[0]}" for j, m in failed.items())
            warnings.warn(f"train: {len(failed)} of {len(starts)} candidate starts hit a non-finite loss and were "
                          f"dropped ({said}); kept candidate {self.kept} of the others (TrainResult.candidates"
                          "['failed'])", CandidateWarning, stacklevel=6)
        if self.kept != len(starts) - 1:
            rebuild()
            _forget(training.result)
            training._restore(best_state)
        training.result.resumed_from = 0
        return {"losses": list(self.losses), "kept": self.kept, "steps": self.steps, "starts": starts,
                "failed": failed}


def _forget(result):
    """Clear what a candidate's steps wrote into the run's result and a restore does not overwrite (its wall-clock
    seconds stay: they were spent)."""
    result.noise_steps, result.natural_gradient_stopped, result.restored_step = 0, None, None
    result.rollbacks = []


def resolve_candidates(training, recipe_count):
    """``(K, R)`` for a :class:`~pyro_dag.infer.training.run.TrainingRun`: its config's ``candidate_starts``
    (``"auto"``: the recipe's count for a DAGDGP with hidden GP nodes or latent inputs and learned kernels, noise or
    inducing inputs, when ``num_steps >= 2 R``; else 1) and ``candidate_steps`` (``None``:
    :data:`~pyro_dag.infer.training.config.DEFAULT_CANDIDATE_STEPS`). A ``candidate_steps`` given where no
    candidates are taken gets a :class:`CandidateWarning` saying why.

    :raises ValueError: for ``K > 1`` where candidates cannot run, naming why."""
    config = training.config
    count, given = config.candidate_starts, config.candidate_steps
    steps = DEFAULT_CANDIDATE_STEPS if given is None else given
    blockers = [why for why, on in (
        ("a checkpoint", training.path is not None), ("validation", config.validation is not None),
        ("distributed", training.dp is not None), ("a warm start", bool(training.warm)),
        ("pretraining", bool(config.pretrain_steps)),
        ("module-local parameters", bool(pyro.settings.get("module_local_params"))),
        ("a guide that is not an AutoStructuredGuide of the DAGDGP model",
         not (training.dag_guide and training.model is training.dgp))) if on]
    if count == "auto":
        dgp = training.dgp
        # with every kernel, noise and inducing input fixed only q is learned (the paper's protocol): no basins of
        # hyperparameters to choose between, and the Quickstart stays as it was
        why = None
        if recipe_count < 2:
            why = f"the {config.recipe!r} recipe takes none"
        elif blockers:
            why = f"not with {blockers[0]}"
        elif config.num_steps < 2 * steps:
            why = f"num_steps ({config.num_steps}) is below 2 * candidate_steps ({2 * steps})"
        elif not dgp.is_setup:
            why = "the DAGDGP is not set up"
        elif training.use_fixed:
            why = "every kernel hyperparameter and inducing input is fixed"
        else:
            _, _, observed = dgp.checked_arguments(training.inputs, training.data, training.kw.get("mask"))
            if not (dgp.latent_inputs or any(w not in observed for w in dgp.gp_nodes)):
                why = "the model has no hidden GP nodes or latent inputs"
        if why is None:
            return recipe_count, steps
        if given is not None:
            _ignored(f"candidate_starts='auto' takes no candidates here ({why})", given)
        return 1, steps
    if count > 1 and blockers:
        raise ValueError(f"train: candidate_starts={count} cannot run with {blockers[0]} (the candidates restore "
                         "in-memory snapshots of Pyro's parameter store); pass candidate_starts=1")
    if count > 1 and steps >= config.num_steps:
        raise ValueError(f"train: candidate_steps ({steps}) must be smaller than num_steps ({config.num_steps}) "
                         f"with candidate_starts={count}")
    if count == 1 and given is not None:
        _ignored("candidate_starts=1 takes no candidates", given)
    return count, steps


def _ignored(why, steps):
    warnings.warn(f"train: candidate_steps={steps} has no effect: {why}; pass candidate_starts=K (K >= 2) to take "
                  "candidates, or leave candidate_steps out", CandidateWarning, stacklevel=6)
