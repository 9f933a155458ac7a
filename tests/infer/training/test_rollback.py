"""train rolls a diverging Adam phase back to its last healthy window with half the learning rate
(DivergenceRollback), and leaves a run that does not diverge bit for bit as it was."""
import pyro
import pytest
import torch

from pyro_dag.infer.training import DivergenceRollback, RollbackWarning, capture_params

from test_best_iterate import _sabotage, run_chain


def _fit(num_steps, callbacks_for=lambda model: (), **kw):
    model, result, caught = run_chain(num_steps, callbacks_for, **kw)
    return model, result, [w for w in caught if w.category is RollbackWarning]


def test_a_diverging_run_goes_back_to_its_last_healthy_window():
    seen = {}

    def keep(step, loss):
        if step == 150:
            seen["params"] = capture_params()
        return False

    def cbs(model):
        return [_sabotage(model, 151), keep]

    model, result, caught = _fit(200, cbs)
    assert len(result.rollbacks) == 1 and len(caught) == 1
    step, back, factor = result.rollbacks[0]
    assert back == 150 and factor == 0.5 and 151 < step <= 165
    assert "after step 150" in str(caught[0].message)
    assert float(model.likelihoods["y"].variance.detach()) < 1      # the sabotage was undone
    assert result.restored_step is None                            # nothing left for the best iterate to do


def test_the_rolled_back_state_is_the_snapshot_and_the_step_is_halved():
    """After the rollback, the run's next step starts from the step-150 parameters (checked through a callback at
    the rollback's step: the callback runs after the rollback) and Adam's learning rate is halved."""
    state = {}

    def cbs(model):
        def grab(step, loss):
            if step == 150:
                state["at150"] = capture_params()
            if state.get("rolled") is None and "at150" in state and step > 151:
                now = capture_params()
                if all(torch.equal(now[k], v) for k, v in state["at150"].items()):
                    state["rolled"] = step
            return False
        return [_sabotage(model, 151), grab]

    _, result, _ = _fit(200, cbs)
    assert state["rolled"] == result.rollbacks[0][0]


def test_no_divergence_no_change():
    _, on, caught = _fit(150)
    _, off, _ = _fit(150, rollback=False)
    assert on.losses == off.losses and not on.rollbacks and not caught
    assert on.settings["rollback"] is True and off.settings["rollback"] is False


def test_tracker_tolerance_reset_and_state():
    class FakeAdam:
        def __init__(self):
            self.optim = type("O", (), {"param_groups": [{"lr": 0.01}]})()

        def state_dict(self):
            return {"x": torch.zeros(2)}

        def load_state_dict(self, state):
            self.loaded = state

    pyro.clear_param_store()
    pyro.param("p", torch.zeros(2))
    adam = FakeAdam()
    rb = DivergenceRollback(window=5, probe=3)
    for s in range(1, 11):
        assert not rb.observe(s, 100.0 - s, adam)
    assert rb.snapshot[0] == 10 and rb.reference[0] == pytest.approx(92.0)
    assert not rb.observe(11, 500.0, adam)           # one spike: the median of the last 3 does not move
    assert not rb.observe(12, 90.0, adam)
    assert rb.observe(13, 600.0, adam)                # median of (500, 90, 600) = 500 > 92 + 20 nats
    pyro.param("p").data.fill_(7.0)
    back, factor = rb.roll_back(13, adam)
    assert (back, factor) == (10, 0.5) and adam.optim.param_groups[0]["lr"] == 0.005
    assert torch.equal(pyro.param("p").detach(), torch.zeros(2)) and torch.equal(adam.loaded["x"], torch.zeros(2))
    again = DivergenceRollback.from_state(rb.state())
    assert again.events == [(13, 10, 0.5)] and again.lr_factor == 0.5
    rb.reset()
    assert rb.reference is None and rb.snapshot is None and not rb.observe(14, 1e9, adam)


def test_a_seeded_state_is_rolled_back_to_at_once():
    """After the natural-gradient guard restores its best state, the rollback takes that state as its snapshot: an
    Adam step that diverges from there at once goes back to it with half the step, instead of running on until a
    window of its own is healthy (the collider, data set 0, stream 0: loss 0.2 after the restore, 4558 two Adam
    steps later, and the run ended at loss 96 instead of -54)."""
    from pyro_dag.infer.training.adam import JointAdam

    def model():
        pyro.sample("obs", pyro.distributions.Normal(pyro.param("x", torch.zeros(2)), 1.0).to_event(1),
                    obs=torch.ones(2))

    pyro.clear_param_store()
    adam = JointAdam(model, lambda: None, pyro.infer.Trace_ELBO(), {"lr": 0.1})
    adam.step()
    rb = DivergenceRollback(window=50, probe=3)
    kept = capture_params()
    rb.seed(40, kept, adam.state_dict(), (5.0, 0.5), adam)
    pyro.param("x").data.fill_(7.0)                       # Adam's next steps diverge
    assert [rb.observe(s, 5e3, adam) for s in (41, 42, 43)] == [False, False, True]
    back, factor = rb.roll_back(43, adam)
    assert (back, factor) == (40, 0.5) and torch.equal(pyro.param("x").detach(), kept["x"])
    assert adam.optim.param_groups[0]["lr"] == pytest.approx(0.05)
