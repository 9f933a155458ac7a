"""train's candidate starts: K short runs from the same start on different random streams, the one with the lowest
mean loss continued; candidate 0 is the run's own stream, and the kept candidate's full state is what continues."""
import warnings

import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import candidates as candidates_module
from pyro_dag.infer.training import run as run_module
from pyro_dag.infer.training.checkpoint import capture_params

R = 6


def _fit(graph=None, observed="y", callbacks=(), **kw):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(30, 1, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * x) + 0.05 * torch.randn(30, 1, generator=g, dtype=torch.float64)
    graph = graph or nx.DiGraph([("x", "h"), ("h", "y")])
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    model = DAGDGP(graph, num_inducing=8).double()
    guide = AutoStructuredGuide(model, precision="chordal")
    kw = {"num_steps": 2 * R + 3, "candidate_steps": R, "progress": False, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = train(model, guide, {"x": x}, {observed: y}, callbacks=list(callbacks), **kw)
    return model, guide, result


class _Recorder:
    """A callback that splits the steps it sees into runs (a run restarts at step 1) and snapshots the parameters
    after step ``R`` of each."""

    def __init__(self):
        self.runs, self.snapshots = [], []

    def __call__(self, s, loss):
        if s == 1:
            self.runs.append([])
        self.runs[-1].append(loss)
        if s == R:
            self.snapshots.append(capture_params())
        return False


def test_candidate_zero_is_the_runs_own_stream():
    rec = _Recorder()
    _, _, result = _fit(candidate_starts=2, callbacks=[rec])
    _, _, plain = _fit(candidate_starts=1)
    assert plain.candidates is None and plain.settings["candidate_starts"] == 1
    assert len(rec.runs) == 2 and len(rec.runs[0]) == R
    assert rec.runs[0] == plain.losses[:R]          # bitwise: drawing the seeds leaves the stream as it was
    assert rec.runs[1][:R] != rec.runs[0]           # candidate 1 draws other numbers from the same start
    assert rec.runs[1][0] != rec.runs[0][0] or rec.runs[1][1] != rec.runs[0][1]


def test_the_kept_candidate_is_the_best_and_its_state_continues(monkeypatch):
    after_restore = []

    class Spy(candidates_module.CandidateStarts):
        def run(self, training, rebuild, unstarted=None):
            out = super().run(training, rebuild, unstarted=unstarted)
            after_restore.append(capture_params())
            return out

    monkeypatch.setattr(run_module, "CandidateStarts", Spy)
    rec = _Recorder()
    _, _, result = _fit(candidate_starts=3, callbacks=[rec])
    c = result.candidates
    assert c["steps"] == R and len(c["losses"]) == 3
    assert len(rec.runs) == 3   # the continuation's steps R + 1, ... follow the last candidate's
    means = [sum(run[:R]) / R for run in rec.runs]        # R < 50: the window is every step of a candidate
    assert c["losses"] == pytest.approx(means, rel=1e-12)
    assert c["kept"] == min(range(3), key=lambda k: means[k])
    kept = rec.snapshots[c["kept"]]
    (restored,) = after_restore
    assert restored.keys() == kept.keys()
    assert all(torch.equal(restored[n], kept[n]) for n in kept)   # the continuation starts from the kept state
    assert len(result.losses) == 2 * R + 3 and result.losses[:R] == rec.runs[c["kept"]][:R]
    assert result.losses[R:] == rec.runs[2][R:]


def _loop_entries(monkeypatch):
    """Patch the run's loop to record the model's values each time a loop starts (a candidate, then the rest)."""
    entries, loop = [], run_module.TrainingRun._loop

    def recording(self, until=None):
        entries.append({k: v.detach().clone() for k, v in self.model.state_dict().items()})
        return loop(self, until)

    monkeypatch.setattr(run_module.TrainingRun, "_loop", recording)
    return entries


def test_the_last_candidate_starts_without_the_hidden_node_start(monkeypatch):
    entries = _loop_entries(monkeypatch)
    _, _, result = _fit(candidate_starts=2)
    starts = result.candidates["starts"]
    assert result.started_nodes and starts[:2] == ["start", "no start"]
    # a winning candidate without the start is weighed against a second one
    assert starts[2:] == (["no start"] if result.candidates["losses"][1] < result.candidates["losses"][0] else [])
    started, unstarted = entries[0], entries[1]
    plain_entries = _loop_entries(monkeypatch)
    _, _, plain = _fit(candidate_starts=1, start_hidden=False)
    assert not plain.started_nodes and len(plain_entries) == 1
    (before,) = plain_entries
    assert unstarted.keys() == before.keys()
    assert all(torch.equal(unstarted[k], before[k]) for k in before)        # the values before the start
    assert not all(torch.equal(started[k], before[k]) for k in before)      # the start changed the model
    if starts[result.candidates["kept"]] == "no start":
        assert result.fallback is None   # the kept run is already the one without the start


def test_auto_takes_candidates_only_for_hidden_nodes_and_long_enough_runs():
    _, _, hidden = _fit()
    assert hidden.settings["candidate_starts"] == 3 and hidden.candidates["starts"] == ["start", "start", "no start"]
    _, _, unstarted = _fit(start_hidden=False)
    assert unstarted.settings["candidate_starts"] == 2 and unstarted.candidates["starts"] == ["same", "same"]
    _, _, short = _fit(num_steps=2 * R - 1)
    assert short.settings["candidate_starts"] == 1 and short.candidates is None
    _, _, observed = _fit(graph=nx.DiGraph([("x", "y")]))
    assert observed.settings["candidate_starts"] == 1
    _, _, paper = _fit(recipe="adam")
    assert paper.settings["candidate_starts"] == 1


@pytest.mark.parametrize("bad", [0, -1, 1.5, "two", True])
def test_bad_candidate_starts_is_refused(bad):
    with pytest.raises(ValueError, match="candidate_starts"):
        _fit(candidate_starts=bad)


def test_bad_candidate_steps_and_conflicts_are_refused(tmp_path):
    with pytest.raises(ValueError, match="candidate_steps"):
        _fit(candidate_steps=0)
    with pytest.raises(ValueError, match="candidate_steps .* smaller than num_steps"):
        _fit(candidate_starts=2, candidate_steps=50, num_steps=20)
    with pytest.raises(ValueError, match="candidate_starts=2 cannot run with a checkpoint"):
        _fit(candidate_starts=2, checkpoint=str(tmp_path / "c.pt"))


def test_a_winning_candidate_without_the_start_meets_a_second_one(monkeypatch):
    calls, loop = [], run_module.TrainingRun._loop

    def rigged(self, until=None):   # the first candidate without the start gets by far the lowest losses
        out = loop(self, until)
        calls.append(until)
        if until is not None and len(calls) == 2:
            self.result.losses[:] = [v - 1e6 for v in self.result.losses]
        return out

    monkeypatch.setattr(run_module.TrainingRun, "_loop", rigged)
    _, _, result = _fit(candidate_starts=2)
    c = result.candidates
    assert c["starts"] == ["start", "no start", "no start"] and len(c["losses"]) == 3
    assert calls == [R, R, R, None] and c["kept"] == 1 and c["losses"][1] < -1e5
    assert result.fallback is None


def test_a_callback_that_stops_the_run_stops_the_candidates_too():
    _, _, result = _fit(candidate_starts=3, callbacks=[lambda s, loss: s == 3])
    assert result.stopped == "callback" and len(result.losses) == 3
    assert result.candidates["kept"] == 0 and len(result.candidates["losses"]) == 1


# ------------------------------------------------------------------ robustness (the battery's candidate cases)
def _fit_warned(graph=None, observed="y", **kw):
    """``_fit`` with the warnings recorded: ``(model, guide, result, [CandidateWarning messages])``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        g = torch.Generator().manual_seed(0)
        x = torch.rand(30, 1, generator=g, dtype=torch.float64) * 4 - 2
        y = torch.sin(2 * x) + 0.05 * torch.randn(30, 1, generator=g, dtype=torch.float64)
        pyro.set_rng_seed(0)
        pyro.clear_param_store()
        model = DAGDGP(graph or nx.DiGraph([("x", "h"), ("h", "y")]), num_inducing=8).double()
        guide = AutoStructuredGuide(model, precision="chordal")
        data = {observed: y} if observed != "both" else {"h": torch.sin(x), "y": y}
        result = train(model, guide, {"x": x}, data, **{"num_steps": 2 * R + 3, "progress": False, **kw})
    said = [str(w.message) for w in caught if issubclass(w.category, candidates_module.CandidateWarning)]
    return model, guide, result, said


def test_a_huge_candidate_count_is_refused_before_any_work():
    from pyro_dag.infer.training import TrainConfig
    from pyro_dag.infer.training.config import MAX_CANDIDATE_STARTS

    with pytest.raises(ValueError, match=f"candidate_starts=1000000000 is more than {MAX_CANDIDATE_STARTS}"):
        TrainConfig(num_steps=10, candidate_starts=10 ** 9)
    TrainConfig(num_steps=10, candidate_starts=MAX_CANDIDATE_STARTS)   # the bound itself is allowed
    with pytest.raises(ValueError, match="candidate_steps must be a positive integer"):
        TrainConfig(num_steps=10, candidate_steps=float("nan"))


def test_candidate_steps_given_without_effect_is_said():
    _, _, plain, said = _fit_warned(candidate_starts=1)          # default candidate_steps: nothing to say
    assert plain.candidates is None and not said
    _, _, one, said = _fit_warned(candidate_starts=1, candidate_steps=R)
    assert one.candidates is None and len(said) == 1 and "candidate_steps=6 has no effect" in said[0]
    _, _, short, said = _fit_warned(candidate_steps=R, num_steps=2 * R - 1)   # "auto" needs num_steps >= 2 R
    assert short.candidates is None and len(said) == 1 and "num_steps (11) is below 2 * candidate_steps (12)" in said[0]
    _, _, taken, said = _fit_warned(candidate_steps=R)            # "auto" takes them: nothing to say
    assert taken.candidates is not None and taken.candidates["steps"] == R and not said


def test_unset_candidate_steps_is_the_default(monkeypatch):
    from pyro_dag.infer.training import TrainConfig
    from pyro_dag.infer.training.config import DEFAULT_CANDIDATE_STEPS

    assert DEFAULT_CANDIDATE_STEPS == 500 and TrainConfig(num_steps=10).candidate_steps is None
    monkeypatch.setattr(candidates_module, "DEFAULT_CANDIDATE_STEPS", R)    # 500 steps would take 30 s here
    _, _, result, said = _fit_warned(candidate_starts=2)
    assert result.candidates["steps"] == R and result.settings["candidate_steps"] == R and not said
    _, _, short, said = _fit_warned(num_steps=2 * R - 1)      # "auto" with the default: no candidates, no word
    assert short.candidates is None and not said


def test_explicit_candidates_on_a_model_fitted_exactly_are_said_to_do_nothing():
    _, _, result, said = _fit_warned(observed="both", candidate_starts=2, candidate_steps=R)
    assert result.stopped == "collapsed" and result.candidates is None
    assert len(said) == 1 and "candidate_starts=2 took no candidates" in said[0] and "collapse=False" in said[0]


def _poison_second_steps(monkeypatch, calls):
    """After the Adam steps numbered in ``calls`` (1-based, raising calls counted) the guide's first parameter
    becomes NaN, so that the next step raises NonFiniteLossError (a candidate that diverged)."""
    from pyro_dag.infer.training import phases

    real, count = phases.AdamPhase.step, {"n": 0}

    def step(self, frozen):
        count["n"] += 1
        loss = real(self, frozen)
        if count["n"] in calls:
            with torch.no_grad():
                next(self.run.guide.parameters()).fill_(float("nan"))
        return loss

    monkeypatch.setattr(phases.AdamPhase, "step", step)


def _all_finite():
    store = pyro.get_param_store()
    return all(bool(torch.isfinite(store.get_param(n).detach()).all()) for n in store.keys())


def test_a_candidate_with_a_non_finite_loss_is_dropped_and_the_others_weighed(monkeypatch):
    _poison_second_steps(monkeypatch, {R + 2})              # candidate 1's 2nd step: its 3rd raises
    model, guide, result, said = _fit_warned(candidate_starts=3, candidate_steps=R, start_hidden=False)
    c = result.candidates
    assert list(c["failed"]) == [1] and "nan" in c["failed"][1]
    assert c["losses"][1] == float("inf") and c["kept"] in (0, 2) and max(c["losses"][0], c["losses"][2]) < 1e300
    assert len(said) == 1 and "1 of 3 candidate starts hit a non-finite loss" in said[0] and "candidate 1" in said[0]
    assert len(result.losses) == 2 * R + 3 and _all_finite()   # the kept candidate continued to num_steps
    pred = model.predict(guide, {"x": torch.linspace(-2, 2, 5, dtype=torch.float64).unsqueeze(-1)}, num_samples=4)
    assert torch.isfinite(pred["y"].mean).all()


def test_every_candidate_non_finite_raises_and_leaves_the_start(monkeypatch):
    from pyro_dag.infer.checks import NonFiniteLossError

    starts = []

    class Spy(candidates_module.CandidateStarts):
        def run(self, training, rebuild, unstarted=None):
            starts.append(capture_params())
            return super().run(training, rebuild, unstarted=unstarted)

    monkeypatch.setattr(run_module, "CandidateStarts", Spy)
    _poison_second_steps(monkeypatch, {2, R + 2, 2 * R + 2})
    with pytest.raises(NonFiniteLossError, match="every one of the 3 candidate starts hit a non-finite loss"):
        _fit_warned(candidate_starts=3, candidate_steps=R, start_hidden=False)
    assert _all_finite()
    now = capture_params()
    (before,) = starts
    assert all(torch.equal(now[k], v) for k, v in before.items() if k in now)


def test_a_keyboard_interrupt_in_a_candidate_says_which_state_the_model_holds(monkeypatch):
    from pyro_dag.infer.training import phases

    real, count = phases.AdamPhase.step, {"n": 0}

    def step(self, frozen):
        count["n"] += 1
        if count["n"] == R + 2:                            # candidate 1's 2nd step
            raise KeyboardInterrupt
        return real(self, frozen)

    monkeypatch.setattr(phases.AdamPhase, "step", step)
    with pytest.raises(KeyboardInterrupt) as info:
        _fit_warned(candidate_starts=2, candidate_steps=R, start_hidden=False)
    note = " ".join(info.value.__notes__)
    assert "candidate start 2 of 2, after 1 of its 6 steps" in note and "not the best candidate's" in note
    assert _all_finite()
