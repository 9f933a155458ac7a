"""The structured Gaussian guides are one family: AutoStructuredGuide picks the DAG or the generic layout from the
model's trace, and AutoDAGGuide / AutoGenericGuide are those layouts alone, with the same parameters and draws."""
import networkx as nx
import pyro
import pyro.distributions as dist
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer.autoguide import AutoDAGGuide, AutoGenericGuide, AutoStructuredGuide, StructuredGaussianGuide


def plain_model():
    a = pyro.sample("a", dist.Normal(0.0, 1.0))
    pyro.sample("b", dist.Normal(a, 1.0), obs=torch.tensor(0.5))


def _dag():
    x = torch.linspace(0, 1, 10, dtype=torch.float64).unsqueeze(-1)
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=4).double()
    return model, {"x": x}, {"y": torch.sin(3 * x)}


def _draw(guide, *args):
    pyro.set_rng_seed(3)
    return {k: v.detach() for k, v in guide(*args).items()}


def test_every_guide_is_a_structured_gaussian_guide():
    for cls in (AutoStructuredGuide, AutoDAGGuide, AutoGenericGuide):
        assert issubclass(cls, StructuredGaussianGuide)


def test_the_generic_layout_alone_equals_the_automatic_guide_on_a_plain_model():
    pyro.clear_param_store()
    auto = AutoStructuredGuide(plain_model, name="auto")
    generic = AutoGenericGuide(plain_model, name="generic")
    a, g = _draw(auto), _draw(generic)
    assert a.keys() == g.keys() and all(torch.equal(a[k], g[k]) for k in a)
    with pytest.raises(ValueError, match="no DAGDGP inducing site"):
        AutoDAGGuide(plain_model, name="dag")()


def test_the_dag_layout_alone_equals_the_automatic_guide_on_a_dagdgp():
    pyro.clear_param_store()
    model, inputs, data = _dag()
    model.setup(inputs, data)
    auto, dag = AutoStructuredGuide(model, name="auto"), AutoDAGGuide(model, name="dag")
    a, d = _draw(auto, inputs, data), _draw(dag, inputs, data)
    assert a.keys() == d.keys() == {"y.u"} and torch.equal(a["y.u"], d["y.u"])
    assert auto.family.blocks[0].node == dag.family.blocks[0].node == "y"
