"""train ends a run that got worse at its best window of steps (BestIterate), and leaves a healthy run alone."""
import warnings

import pyro
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import BestIterate, BestIterateWarning, capture_params


def _chain(n=30, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
    h = torch.sin(x)
    y = h ** 2 + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    import networkx as nx
    return nx.DiGraph([("x", "h"), ("h", "y")]), {"x": x}, {"y": y}


def run_chain(num_steps, callbacks_for=lambda model: (), **kw):
    """Train the mean-field chain for ``num_steps``; ``callbacks_for(model)`` gives the callbacks. Returns the model,
    the result and every warning raised. The sabotage below raises the noise, which the noise step would lower
    again in closed form (test_noise_step.py): it is off here, so that these tests see the other safeguards alone."""
    kw.setdefault("noise_step", False)
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    graph, inputs, data = _chain()
    model = DAGDGP(graph, num_inducing=8, noise="learned", kernel_init="default").double()
    guide = AutoStructuredGuide(model, precision="mean_field")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = train(model, guide, inputs, data, num_steps=num_steps, progress=False, start_hidden=False,
                       callbacks=callbacks_for(model), **kw)
    return model, result, caught


def _run(num_steps, **kw):
    model, result, caught = run_chain(num_steps, **kw)
    return model, result, [w for w in caught if w.category is BestIterateWarning]


def _sabotage(model, at):
    """A callback that, at step ``at``, sets the child's noise variance to 100 times the data's variance: the loss
    jumps by hundreds of nats and Adam at lr 0.01 cannot undo it within the remaining steps."""
    def cb(step, loss):
        if step == at:
            raw = model.likelihoods["y"].variance_unconstrained
            with torch.no_grad():
                raw.fill_(float(torch.log(torch.tensor(100.0))))
        return False
    return cb


def test_a_run_that_degrades_ends_at_its_best_window():
    seen = {}

    def keep(step, loss):
        if step == 150:
            seen["params"] = capture_params()
        return False

    # the rollback would repair the sabotage before the end; best_iterate is the last line of defence
    model, result, caught = run_chain(200, lambda m: [keep, _sabotage(m, 151)], rollback=False)
    caught = [w for w in caught if w.category is BestIterateWarning]
    assert result.restored_step == 150
    assert len(caught) == 1 and "step 150" in str(caught[0].message)
    now = capture_params()
    for name, value in seen["params"].items():
        assert torch.equal(now[name], value), name
    assert float(model.likelihoods["y"].variance.detach()) < 10


def test_a_healthy_run_is_left_alone_and_the_option_turns_it_off():
    _, result, caught = _run(200)
    assert result.restored_step is None and not caught
    assert result.settings["best_iterate"] is True
    _, off, caught = _run(200, best_iterate=False)
    assert off.restored_step is None and off.settings["best_iterate"] is False
    assert off.losses == result.losses            # tracking never changes the trajectory


def test_best_iterate_tolerance_and_state_round_trip():
    tracker = BestIterate(window=4)
    for s, loss in enumerate([10, 10, 10, 10, 5, 5, 5, 5, 5.1, 5.1, 5.1, 5.1], start=1):
        tracker.observe(s, loss)
    assert tracker.best_step == 8 and tracker.best == 5
    assert not tracker.worse_at_end()             # 5.1 is within 5 % of 5
    for s in range(13, 17):
        tracker.observe(s, 9.0)
    assert tracker.worse_at_end()
    again = BestIterate.from_state(tracker.state())
    assert again.best_step == 8 and again.worse_at_end() and again.buffer == tracker.buffer


def test_best_iterate_is_checked():
    with pytest.raises(ValueError, match="best_iterate"):
        _run(10, best_iterate="yes")
