"""Shapley attribution: the exact combinatorics (hand-computed two-player game, brute force over orderings), and on a
trained DAG-DGP: efficiency, shares, the full coalition = the model's prediction, additivity for a linear fusion."""
import itertools
import math

import networkx as nx
import numpy as np
import pyro
import pytest
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.emulation.attribution import normalised_shares, shapley, shapley_values
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import train


def test_two_player_by_hand():
    v = {frozenset(): 1.0, frozenset("a"): 3.0, frozenset("b"): 2.0, frozenset("ab"): 7.0}
    phi, values = shapley_values(lambda c: torch.tensor(v[c]), ["a", "b"])
    # φ_a = ½[(v(a) - v(∅)) + (v(ab) - v(b))] = ½[2 + 5]; φ_b = ½[(v(b) - v(∅)) + (v(ab) - v(a))] = ½[1 + 4]
    torch.testing.assert_close(phi, torch.tensor([3.5, 2.5], dtype=phi.dtype))
    assert float(phi.sum()) == v[frozenset("ab")] - v[frozenset()]
    torch.testing.assert_close(normalised_shares(phi), torch.tensor([3.5 / 6, 2.5 / 6], dtype=phi.dtype))


def test_three_players_against_orderings():
    rng = np.random.default_rng(0)
    players = ["p", "q", "r"]
    table = {frozenset(c): float(rng.normal()) for k in range(4) for c in itertools.combinations(players, k)}
    phi, _ = shapley_values(lambda c: torch.tensor(table[c]), players)
    brute = np.zeros(3)
    for order in itertools.permutations(players):
        seen = frozenset()
        for p in order:
            brute[players.index(p)] += table[seen | {p}] - table[seen]
            seen = seen | {p}
    np.testing.assert_allclose(phi.numpy(), brute / math.factorial(3), atol=1e-12)


def _fit(kernel_h, structure, steps=80):
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    g = nx.DiGraph([("x", "L1"), ("x", "L2"), ("x", "H"), ("L1", "H"), ("L2", "H")])
    x = torch.linspace(0, 1, 40, dtype=torch.float64)[:, None]
    l1, l2 = torch.sin(6 * x), torch.cos(4 * x)
    h = torch.full_like(x, float("nan"))
    h[::4] = (2 * l1 + 0.5 * l2)[::4]
    model = DAGDGP(g, kernels={"H": kernel_h}, num_inducing=10).double()
    guide = AutoStructuredGuide(model, precision=structure)
    data = {"L1": l1, "L2": l2, "H": h}
    train(model, guide, {"x": x}, data, num_steps=steps, recipe="adam", lr=0.03, progress=False)
    return model, guide, x


@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_efficiency_and_full_coalition(structure):
    model, guide, x = _fit(kernels.MultiFidelity(), structure)
    res = shapley(model, guide, "H", {"x": x[:12]}, num_samples=400)
    assert res.players == ["L1", "L2"] and res.mean.shape == (12, 2)
    full, empty = frozenset(["L1", "L2"]), frozenset()
    for phi, values in ((res.mean, res.mean_values), (res.variance, res.variance_values)):
        torch.testing.assert_close(phi.sum(-1), values[full] - values[empty])
    for share in (res.mean_share, res.variance_share):
        assert bool(((share >= 0) & (share <= 1)).all())
        torch.testing.assert_close(share.sum(-1), torch.ones(12, dtype=share.dtype))
    # the full coalition is the model's own predictive mean of H (Monte Carlo error only)
    pred = model.predict(guide, {"x": x[:12]}, nodes=["H"], num_samples=1000)["H"]
    se = (pred.variance[:, 0] / 400).sqrt()
    assert bool(((res.mean_values[full] - pred.mean[:, 0]).abs() < 5 * se + 1e-6).all())
    # the variance with every parent's uncertainty propagated is the predictive variance
    torch.testing.assert_close(res.variance_values[full], pred.variance[:, 0], rtol=0.25, atol=1e-6)


def test_linear_fusion_is_additive():
    # a linear kernel on (x, L1, L2): H's conditional mean is linear in the parents, so each parent's Shapley value
    # of the mean is its own marginal contribution, whatever the other player does
    model, guide, x = _fit(kernels.Linear(), "mean_field", steps=60)
    res = shapley(model, guide, "H", {"x": x[:10]}, num_samples=64)
    v = res.mean_values
    e, a, b, ab = frozenset(), frozenset(["L1"]), frozenset(["L2"]), frozenset(["L1", "L2"])
    torch.testing.assert_close(res.mean[:, 0], v[a] - v[e])
    torch.testing.assert_close(res.mean[:, 0], v[ab] - v[b])
    torch.testing.assert_close(res.mean[:, 1], v[b] - v[e])


def test_bad_arguments():
    model, guide, x = _fit(kernels.MultiFidelity(), "mean_field", steps=2)
    with pytest.raises(ValueError, match="not a GP node"):
        shapley(model, guide, "nope", {"x": x})
    with pytest.raises(ValueError, match="no non-root parent"):
        shapley(model, guide, "L1", {"x": x})
    with pytest.raises(ValueError, match="mean_reference must be one of"):
        shapley(model, guide, "H", {"x": x}, mean_reference="prior")
