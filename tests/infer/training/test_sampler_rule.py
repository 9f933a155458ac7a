"""train's sampler size rule: the conditional sampler's state size against a count along the elimination tree, and
the switch to the joint sampler (with its one-line warning) only when that state would exceed the budget."""
import networkx as nx
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import DAGELBO, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training.sampler_rule import choose_sampler
from pyro_dag.ops.chordal import ChordalFactor
from pyro_dag.progress import ScaledDefaultWarning


def _chain(depth, n=12, M=5):
    g = nx.DiGraph([("x", "h1")] + [(f"h{i}", f"h{i + 1}") for i in range(1, depth)])
    x = torch.linspace(-1, 1, n, dtype=torch.float64)[:, None]
    data = {f"h{depth}": torch.sin(3 * x)}
    model = DAGDGP(g, num_inducing=M, noise="learned", kernel_init="default").double()
    guide = AutoStructuredGuide(model, precision="chordal", backend="sparse")
    guide({"x": x}, data)
    return model, guide, {"x": x}, data


def test_state_size_is_the_sum_over_nodes_of_their_paths_blocks():
    model, guide, _, _ = _chain(6)
    fam = guide.family
    blocks = {(v, w): None for v, w in fam.edges}
    blocks.update({(b.node, b.node): None for b in fam.blocks})
    factor = ChordalFactor(fam.order, {b.node: b.size for b in fam.blocks}, blocks)
    size = {b.node: b.size for b in fam.blocks}
    count = sum(size[j] ** 2 for w in fam.order for j in factor.path(w))
    assert fam.conditional_state_bytes(4, 12) == 4 * 12 * count * 8
    assert count > len(fam.order) * 25          # a chain: the paths overlap, more than one block per node


def test_the_joint_sampler_is_chosen_only_above_the_budget():
    model, guide, inputs, data = _chain(6)
    elbo = DAGELBO(num_particles=4)
    need = guide.family.conditional_state_bytes(4, 12)
    assert choose_sampler(elbo, guide.family, 12, budget=need) == "conditional"
    with pytest.warns(ScaledDefaultWarning, match="is used instead"):
        assert choose_sampler(elbo, guide.family, 12, budget=need - 1) == "joint"
    assert elbo.sampler == "joint"


def test_train_keeps_the_conditional_sampler_on_small_graphs_and_a_users_elbo():
    model, guide, inputs, data = _chain(3)
    result = train(model, guide, inputs, data, num_steps=2, progress=False)
    assert result.settings["sampler"] == "conditional"
