"""The default minibatch of train's steps (pyro_dag.infer.training.minibatch): chosen by the number of cases, said
in one line, left alone where it does not apply, and an unbiased estimate of the full-batch ELBO."""
import math

import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import DAGELBO, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import minibatch as minibatch_module
from pyro_dag.infer.training.minibatch import choose_minibatch
from pyro_dag.progress import ScaledDefaultWarning


def _hidden_chain(n=60, seed=0):
    """x -> h -> y with h hidden (y is not fitted exactly: the steps train it)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, dtype=torch.float64, generator=g) * 2 - 1
    y = torch.sin(3 * x) ** 2 + 0.1 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    return nx.DiGraph([("x", "h"), ("h", "y")]), {"x": x}, {"y": y}


def _set_up(n=60, **kw):
    pyro.clear_param_store()
    graph, inputs, data = _hidden_chain(n)
    model = DAGDGP(graph, num_inducing=8, **kw).double()
    model.setup(inputs, data)
    return model, inputs, data


def test_the_rule_chooses_minibatches_above_the_threshold_only():
    model, _, _ = _set_up()
    with pytest.warns(ScaledDefaultWarning, match="random minibatch of 16"):
        assert choose_minibatch("auto", model, model, 60, {}, above=50, size=16) == 16
    assert choose_minibatch("auto", model, model, 60, {}, above=60, size=16) is None      # not above
    assert choose_minibatch("auto", model, model, 60, {}, above=10, size=60) is None      # B >= n: full batch
    assert choose_minibatch(False, model, model, 60, {}, above=10, size=16) is None
    assert choose_minibatch("auto", model, model, 60, {"subsample_size": 5}, above=10, size=16) is None
    assert choose_minibatch("auto", model, model, 60, {}, distributed=True, above=10, size=16) is None
    assert choose_minibatch("auto", object(), model, 60, {}, above=10, size=16) is None   # DAGDGP inside a model


def test_latent_inputs_and_collapsed_inducing_keep_full_batches():
    pyro.clear_param_store()
    graph = nx.DiGraph([("z", "y")])
    lv = DAGDGP(graph, latent_inputs={"z": 1}, num_inducing=4).double()
    assert choose_minibatch("auto", lv, lv, 100, {}, above=10, size=16) is None
    model, _, _ = _set_up(collapse="inducing", sample_f=True)
    assert choose_minibatch("auto", model, model, 60, {}, above=10, size=16) is None


def test_train_minibatches_the_steps_above_the_threshold(monkeypatch):
    monkeypatch.setattr(minibatch_module, "MINIBATCH_ABOVE", 40)
    monkeypatch.setattr(minibatch_module, "MINIBATCH_SIZE", 16)
    pyro.clear_param_store()
    graph, inputs, data = _hidden_chain(60)
    model = DAGDGP(graph, num_inducing=8).double()
    guide = AutoStructuredGuide(model)
    sizes = []
    forward = model.forward

    def spy(*args, **kwargs):
        sizes.append(kwargs.get("subsample_size"))
        return forward(*args, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    with pytest.warns(ScaledDefaultWarning, match="60 cases, so each step uses a random minibatch of 16"):
        result = train(model, guide, inputs, data, num_steps=3, progress=False, fallback_start=False)
    assert result.settings["minibatch"] == 16 and len(result.losses) == 3
    assert sizes[-3:] == [16, 16, 16]   # every step (an earlier call may set the guide up)


def test_minibatch_false_and_small_data_keep_full_batches(monkeypatch):
    monkeypatch.setattr(minibatch_module, "MINIBATCH_ABOVE", 40)
    for n, options in ((60, {"minibatch": False}), (30, {})):
        pyro.clear_param_store()
        graph, inputs, data = _hidden_chain(n)
        model = DAGDGP(graph, num_inducing=8).double()
        result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=2, progress=False,
                       fallback_start=False, **options)
        assert result.settings["minibatch"] is None


def test_no_minibatch_rule_when_every_node_is_fitted_exactly(monkeypatch, recwarn):
    monkeypatch.setattr(minibatch_module, "MINIBATCH_ABOVE", 10)
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(1)
    x = torch.rand(50, 1, dtype=torch.float64, generator=g)
    y = torch.sin(4 * x) + 0.1 * torch.randn(50, 1, dtype=torch.float64, generator=g)
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=8).double()
    result = train(model, AutoStructuredGuide(model), {"x": x}, {"y": y}, num_steps=5, progress=False)
    assert result.stopped == "collapsed" and result.settings["minibatch"] is None
    assert not [w for w in recwarn if issubclass(w.category, ScaledDefaultWarning)]


def test_minibatch_config_is_checked():
    with pytest.raises(ValueError, match="minibatch must be 'auto' or False"):
        pyro.clear_param_store()
        graph, inputs, data = _hidden_chain(20)
        model = DAGDGP(graph, num_inducing=4).double()
        train(model, AutoStructuredGuide(model), inputs, data, num_steps=2, minibatch=64)
    from pyro_dag.infer.training import TrainConfig

    with pytest.raises(ValueError, match=r"got 64; to choose the minibatch size B yourself, pass model_kwargs"):
        TrainConfig(num_steps=2, minibatch=64)
    with pytest.raises(ValueError, match=r"minibatch=False asks for full-batch steps.*'subsample_size'\]=8"):
        TrainConfig(num_steps=2, minibatch=False, model_kwargs={"subsample_size": 8})


def test_the_minibatch_elbo_is_unbiased_on_the_hidden_chain():
    """The loss train's steps take with subsample_size=B (data term scaled by n/B) has the full-batch loss's
    expectation, at a trained (not initial) guide: their Monte Carlo means agree within 4 standard errors."""
    pyro.clear_param_store()
    graph, inputs, data = _hidden_chain(24, seed=3)
    model = DAGDGP(graph, num_inducing=6).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, inputs, data, num_steps=10, progress=False, fallback_start=False)
    elbo = DAGELBO(num_particles=2)
    torch.manual_seed(0)
    with torch.no_grad():
        full = torch.tensor([elbo.loss(model, guide, inputs, data) for _ in range(100)])
        mini = torch.tensor([elbo.loss(model, guide, inputs, data, subsample_size=6) for _ in range(500)])
    se = math.sqrt(full.var() / len(full) + mini.var() / len(mini))
    assert abs(float(full.mean() - mini.mean())) < 4 * se
    assert float(mini.var()) > float(full.var())   # really minibatches: more spread than the full batch
