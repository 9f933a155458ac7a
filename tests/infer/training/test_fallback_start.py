"""train's fallback without the hidden-node start: when the started run ends with a node's noise taking the signal,
it trains again from the state before the start and keeps the run with the lower final loss."""
import warnings

import networkx as nx
import pyro
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import run as run_module


def _problem(n=40, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.sin(2 * x) + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return nx.DiGraph([("x", "h"), ("h", "y")]), {"x": x}, {"y": y}


def _fit(monkeypatch=None, flag=None, **kw):
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    graph, inputs, data = _problem()
    model = DAGDGP(graph, num_inducing=10).double()
    guide = AutoStructuredGuide(model, precision="mean_field")
    if flag is not None:
        calls = {"n": 0}

        def fake(dgp, *a, **k):   # the first run's end "took the signal"; the second's did not
            calls["n"] += 1
            return {"y": (0.9, 0.01)} if calls["n"] == 1 and flag else {}

        monkeypatch.setattr(run_module, "noise_took_signal", fake)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = train(model, guide, inputs, data, num_steps=60, progress=False, **kw)
    return model, guide, result


def test_no_fallback_when_the_fit_is_healthy(monkeypatch):
    _, _, result = _fit(monkeypatch, flag=False)
    assert result.fallback is None and result.started_nodes


def test_fallback_trains_again_without_the_start_and_keeps_the_better_run(monkeypatch):
    model, guide, result = _fit(monkeypatch, flag=True)
    assert result.fallback is not None and result.fallback["nodes"] == ["y"]
    assert result.fallback["kept"] in ("start", "no start") and len(result.losses) == 60
    kept_loss = min(result.fallback["start_loss"], result.fallback["no_start_loss"])
    assert abs(sum(result.losses[-50:]) / 50 - kept_loss) < 1e-9 or result.restored_step is not None
    # the run without the start began from the pre-start state: its first loss is the untouched model's, the same
    # as a run with start_hidden=False from the same seed would have at its first step up to the random stream
    _, _, plain = _fit(start_hidden=False)
    assert plain.fallback is None and not plain.started_nodes


def test_fallback_can_be_turned_off(monkeypatch):
    _, _, result = _fit(monkeypatch, flag=True, fallback_start=False)
    assert result.fallback is None
