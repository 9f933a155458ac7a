"""JointAdam clips a gradient spike to spike_factor times the median norm of the last steps: without the clip, one
spike moves the parameter by ~30 learning rates over the following steps."""
import pyro
import pytest
import torch
from pyro.infer import Trace_ELBO

from pyro_dag.infer.training import JointAdam
from pyro_dag.infer.training.adam import SPIKE_WARMUP


def _trajectory(spike_factor, spike_at=40, steps=80, scale=1e6):
    pyro.clear_param_store()
    state = {"step": 0}

    def model():
        x = pyro.param("x", torch.tensor([1.0, -1.0], dtype=torch.float64))
        # a constant pull of the same size each step; one step multiplies it by `scale`
        factor = scale if state["step"] == spike_at else 1.0
        pyro.factor("pull", -factor * (x * torch.tensor([1.0, 1.0], dtype=torch.float64)).sum())

    def guide():
        pass

    adam = JointAdam(model, guide, Trace_ELBO(), {"lr": 0.01}, spike_factor=spike_factor)
    path = []
    for s in range(steps):
        state["step"] = s
        adam.step()
        path.append(pyro.param("x").detach().clone())
    return torch.stack(path), adam


def test_a_spike_is_clipped_and_normal_steps_are_not():
    clipped, adam = _trajectory(10.0)
    unclipped, plain = _trajectory(None)
    assert adam.clipped == 1 and plain.clipped == 0
    assert torch.equal(clipped[:40], unclipped[:40])           # bit for bit before the spike
    # once the spike's momentum has decayed, Adam's second moment still holds the spike: without the clip the steps
    # stall (the constant pull moves x by ~lr per step before the spike); with the clip they go on at ~lr
    moved_clipped = (clipped[79] - clipped[59]).abs().max()
    moved_plain = (unclipped[79] - unclipped[59]).abs().max()
    assert moved_clipped > 0.1 and moved_plain < 0.02


def test_no_clip_during_the_warmup_and_state_round_trip():
    _, adam = _trajectory(10.0, spike_at=SPIKE_WARMUP - 5, steps=SPIKE_WARMUP + 5)
    assert adam.clipped == 0
    state = adam.state_dict()
    assert len(state["norms"]) == SPIKE_WARMUP + 5 and state["clipped"] == 0


def test_spike_factor_is_checked():
    with pytest.raises(ValueError, match="spike_factor"):
        JointAdam(lambda: None, lambda: None, Trace_ELBO(), {"lr": 0.01}, spike_factor=0.5)
