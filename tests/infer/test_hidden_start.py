"""Hidden GP nodes started at the shallow fit (pyro_dag.infer.training.hidden_start): before any step, the deep model's
prediction is the exact GP's, and the recommended recipe starts from there."""
import networkx as nx
import pyro
import torch

from pyro_dag import DAGDGP
from pyro_dag.baselines import ExactGP
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import start_hidden_nodes


def _chain(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, dtype=torch.float64, generator=g)
    y = torch.sin(6 * x) + 0.3 * (x > 0.5).double() + 0.02 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    return nx.DiGraph([("x", "h"), ("h", "y")]), {"x": x}, {"y": y}


def test_the_start_is_the_shallow_fit():
    """x -> h -> y with h hidden: after the start (no step), the predictive mean of y is close to an exact GP's."""
    pyro.clear_param_store()
    graph, inputs, data = _chain()
    model = DAGDGP(graph).double()
    guide = AutoStructuredGuide(model)
    started = start_hidden_nodes(model, guide, inputs, data)
    assert started == {"h": "hidden", "y": "child"}
    xt = torch.linspace(0.02, 0.98, 100, dtype=torch.float64).reshape(-1, 1)
    ours = model.predict(guide, {"x": xt}, nodes=["y"], num_samples=200)["y"].mean[:, 0]
    ref = ExactGP(restarts=2).fit(inputs["x"], data["y"][:, 0]).predict(xt)[0]
    assert float((ours - ref).pow(2).mean().sqrt()) < 0.1 * float(data["y"].std())
    # from the prior instead, the same prediction is far off (the start is what makes the difference)
    pyro.clear_param_store()
    cold = DAGDGP(graph).double()
    cold_guide = AutoStructuredGuide(cold)
    cold_guide(inputs, data)
    far = cold.predict(cold_guide, {"x": xt}, nodes=["y"], num_samples=200)["y"].mean[:, 0]
    assert float((far - ref).pow(2).mean().sqrt()) > 0.3 * float(data["y"].std())


def test_train_starts_hidden_nodes_by_default_only_with_the_recommended_recipe():
    graph, inputs, data = _chain(n=30)
    for kw, expected in (({}, {"h": "hidden", "y": "child"}), ({"start_hidden": False}, {}),
                         ({"recipe": "adam"}, {})):
        pyro.clear_param_store()
        model = DAGDGP(graph, num_inducing=8).double()
        result = train(model, AutoStructuredGuide(model), inputs, data, num_steps=3, progress=False, **kw)
        assert result.started_nodes == expected, kw
        assert result.settings["start_hidden"] == bool(expected)


def test_nodes_without_an_observed_descendant_are_left_alone():
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(30, 1, dtype=torch.float64, generator=g)
    graph = nx.DiGraph([("x", "h"), ("h", "y"), ("x", "lost")])      # "lost" is hidden with no observed child
    model = DAGDGP(graph).double()
    started = start_hidden_nodes(model, AutoStructuredGuide(model), {"x": x}, {"y": torch.sin(5 * x)})
    assert started == {"h": "hidden", "y": "child"}


def test_fully_observed_graphs_have_nothing_to_start():
    pyro.clear_param_store()
    x = torch.rand(20, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    model = DAGDGP(nx.DiGraph([("x", "y")])).double()
    assert start_hidden_nodes(model, AutoStructuredGuide(model), {"x": x}, {"y": torch.sin(5 * x)}) == {}


class _Killed(Exception):
    pass


def test_a_run_killed_after_the_start_resumes_bit_for_bit(tmp_path):
    """The start runs once, before the first step; a resumed run takes it from the checkpoint, and the start
    puts nothing in the parameter store that a fresh model would not create (a hidden node's unused likelihood)."""
    graph, inputs, data = _chain(n=30)

    def run(path, steps, resume=False, kill_at=None):
        pyro.clear_param_store()
        pyro.set_rng_seed(0 if not resume else 123)
        model = DAGDGP(graph, num_inducing=8).double()

        def kill(step, loss):
            if step == kill_at:
                raise _Killed
            return False

        return train(model, AutoStructuredGuide(model), inputs, data, num_steps=steps, progress=False,
                     checkpoint=str(path), checkpoint_every=2, resume=resume, callbacks=[kill])

    ref = run(tmp_path / "ref.pt", 6).losses
    try:
        run(tmp_path / "run.pt", 6, kill_at=5)
    except _Killed:
        pass
    got = run(tmp_path / "run.pt", 6, resume=True)
    assert got.resumed_from == 4 and got.losses == ref
