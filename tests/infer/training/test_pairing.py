"""train refuses a guide built for another model, and the model and guide swapped, before any step (earlier: a NaN
loss at step 1, or an error about the other model's nodes after the pretraining steps, or an AttributeError)."""
import networkx as nx
import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer.autoguide import AutoGuideList, AutoNormal
from torch.optim.optimizer import register_optimizer_step_pre_hook

from pyro_dag import DAGDGP
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training.pairing import check_model_and_guide, guide_model

CHAIN = nx.DiGraph([("x", "a"), ("a", "b")])


def problem():
    pyro.clear_param_store()
    x = torch.linspace(0, 1, 8, dtype=torch.float64)[:, None]
    return DAGDGP(CHAIN, num_inducing=4).double(), {"x": x}, {"b": torch.sin(3 * x)}


@pytest.fixture
def steps():
    count = {"n": 0}
    handle = register_optimizer_step_pre_hook(lambda *a: count.__setitem__("n", count["n"] + 1))
    yield count
    handle.remove()


def other_model_guide(model):
    return AutoStructuredGuide(DAGDGP(nx.DiGraph([("x", "b")]), name="other").double(), name="other_guide")


@pytest.mark.parametrize("make,match", [
    (lambda m: ("swap", AutoStructuredGuide(m)), r"the first argument \(the model\) is AutoStructuredGuide and the "
                                                 r"second \(the guide\) DAGDGP: the model and the guide look swapped"),
    (lambda m: ("", other_model_guide(m)), r"built for another model \(another DAGDGP, whose graph differs: GP "
                                            r"nodes \['b'\].*\['a', 'b'\].*not for the DAGDGP being trained"),
    (lambda m: ("", AutoStructuredGuide(lambda *a, **k: None)), r"built for another model \(the function "),
])
def test_a_guide_of_another_model_or_swapped_arguments_are_refused_before_any_step(make, match, steps):
    model, inputs, data = problem()
    how, guide = make(model)
    args = (guide, model) if how == "swap" else (model, guide)
    with pytest.raises(ValueError, match=match):
        train(*args, inputs, data, num_steps=3, progress=False)
    assert steps["n"] == 0


def test_guides_of_the_model_pass_wrapped_or_listed():
    model, inputs, data = problem()
    check_model_and_guide(model, AutoStructuredGuide(model))
    check_model_and_guide(model, AutoNormal(poutine.block(model, hide=["b.y"])))
    guides = AutoGuideList(model)
    guides.append(AutoNormal(poutine.block(model, expose=["a.u"])))
    check_model_and_guide(model, guides)
    check_model_and_guide(model, lambda *a, **k: None)                 # a guide function says nothing: trusted
    assert guide_model(AutoNormal(poutine.condition(model, data={}))) is model

    class Wrapper(pyro.nn.PyroModule):                                 # a model holding the DAGDGP
        def __init__(self):
            super().__init__()
            self.dgp = model

        def forward(self, *args):
            return self.dgp(*args)

    check_model_and_guide(Wrapper(), AutoStructuredGuide(model))
    twin = DAGDGP(CHAIN, num_inducing=4, name="twin").double()        # same sites: its guide guides the model
    check_model_and_guide(model, AutoStructuredGuide(twin, name="twin_guide"))
    train(model, AutoStructuredGuide(model), inputs, data, num_steps=2, progress=False)
