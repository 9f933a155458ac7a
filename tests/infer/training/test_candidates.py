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
