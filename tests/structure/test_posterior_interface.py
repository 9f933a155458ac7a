"""StructurePosterior and ExactStructurePosterior share one query interface (DAGPosterior)."""
import inspect

import networkx as nx
import pytest
import torch

import pyro_dag.infer
from pyro_dag.graph import is_acyclic
from pyro_dag.structure import (DAGPosterior, ExactStructurePosterior, OrderSPN, StructurePosterior, exact_posterior,
                                fit)


@pytest.fixture(scope="module")
def posteriors():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(150, 3, generator=g)
    X[:, 1] += X[:, 0]
    X[:, 2] += X[:, 1]
    return fit(X, num_steps=8, num_particles=4, progress=False), exact_posterior(X)


def test_both_posteriors_implement_the_interface(posteriors):
    names = ("edge_probs", "sample", "to_networkx", "prob", "map_dag", "causal_effects", "held_out_log_likelihood")
    base = {name: inspect.signature(getattr(DAGPosterior, name)).parameters for name in names}
    for cls in (StructurePosterior, ExactStructurePosterior, OrderSPN):
        assert issubclass(cls, DAGPosterior)
        for name, params in base.items():
            own = inspect.signature(getattr(cls, name)).parameters
            positional = [p for p in params.values() if p.kind is not p.KEYWORD_ONLY]
            own_pos = [p for p in own.values() if p.kind is not p.KEYWORD_ONLY]
            # the shared positional parameters come first, with the same names and defaults
            assert [(p.name, p.default) for p in own_pos[:len(positional)]] == \
                [(p.name, p.default) for p in positional]
            # and the shared keyword-only ones (given=, return_stderr=) exist with the same defaults
            for p in params.values():
                if p.kind is p.KEYWORD_ONLY:
                    assert own[p.name].default == p.default, (cls.__name__, name, p.name)
    for post in posteriors:
        P = post.edge_probs(200, seed=0)
        S = post.sample(30, seed=1)
        assert P.shape == (3, 3) and S.shape == (30, 3, 3) and bool(is_acyclic(S).all())
        assert torch.equal(post.sample(30, seed=1), S)              # a seed makes the draw reproducible
        g = post.to_networkx(threshold=0.5, num_samples=200)
        assert isinstance(g, nx.DiGraph) and list(g.nodes) == ["0", "1", "2"]
        assert all(d["prob"] > 0.5 for _, _, d in g.edges(data=True))


def test_exact_sample_without_seed_follows_torchs_generator(posteriors):
    exact = posteriors[1]
    torch.manual_seed(3)
    a = exact.sample(20)
    torch.manual_seed(3)
    assert torch.equal(exact.sample(20), a)


def test_abstract_base_cannot_be_instantiated():
    with pytest.raises(TypeError):
        DAGPosterior()


def test_order_svgd_lives_in_structure_not_in_infer():
    import pyro_dag.structure as structure

    assert structure.OrderSVGD.__module__ == "pyro_dag.structure.svgd"
    assert not hasattr(pyro_dag.infer, "OrderSVGD") and "OrderSVGD" not in pyro_dag.infer.__all__
