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


@pytest.mark.parametrize("backend", ["dense", "sparse"])
def test_an_uncoupled_structured_posterior_predicts_through_independent_blocks(backend):
    """With every off-diagonal block zero (as after the exact fits), prediction outside autograd uses independent
    blocks (no per-case conditioning): the same Gaussian as the chordal posterior, to rounding."""
    import networkx as nx

    from pyro_dag import DAGDGP
    from pyro_dag.infer.autoguide import AutoStructuredGuide
    from pyro_dag.infer.autoguide.gaussians import MeanFieldPosterior

    pyro.clear_param_store()
    g = torch.Generator().manual_seed(0)
    x = torch.rand(12, 1, dtype=torch.float64, generator=g)
    graph = nx.DiGraph([("x", "a"), ("a", "b")])
    model = DAGDGP(graph, num_inducing=5).double()
    guide = AutoStructuredGuide(model, backend=backend)
    guide({"x": x}, {"a": torch.sin(3 * x), "b": torch.cos(3 * x)})
    family = guide.family
    with torch.no_grad():
        for b in family.blocks:   # a non-trivial diagonal block per node
            A = torch.randn(b.size, b.size, dtype=torch.float64, generator=g)
            family.set_node(b.node, torch.randn(b.size, dtype=torch.float64, generator=g),
                            torch.linalg.cholesky(A @ A.T + b.size * torch.eye(b.size, dtype=torch.float64)))
        family.zero_offdiagonal()
    fast = family.prediction_posterior()
    chordal = family.posterior()          # what training and natural gradients use: the chordal posterior itself
    assert isinstance(fast, MeanFieldPosterior) and not isinstance(chordal, MeanFieldPosterior)
    assert torch.allclose(fast.covariance_matrix(), chordal.covariance_matrix().detach(), atol=1e-10)
    assert torch.allclose(fast.mean_vector(), chordal.mean_vector().detach(), atol=1e-12)
