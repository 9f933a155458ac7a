"""pyro_dag.datasets.random_latent: random latent-DAG problems from a seed."""
import math

import networkx as nx
import pytest
import torch

from pyro_dag.datasets.random_latent import MECHANISMS, random_latent

SEEDS = range(40)


def test_same_seed_same_problem_other_seed_other_problem():
    a, b, c = random_latent(3, n=40, n_test=30), random_latent(3, n=40, n_test=30), random_latent(4, n=40, n_test=30)
    assert a.description == b.description and a.mechanisms == b.mechanisms
    for k in a.data:
        assert torch.equal(a.data[k], b.data[k])
    assert torch.equal(a.y_test["y"], b.y_test["y"])
    assert not torch.equal(a.f_test["y"], c.f_test["y"])


@pytest.mark.parametrize("seed", SEEDS)
def test_graph_and_observations(seed):
    p = random_latent(seed, n=50, n_test=40)
    g = p.graph
    assert nx.is_directed_acyclic_graph(g)
    roots = [w for w in g.nodes if g.in_degree(w) == 0]
    assert set(roots) == set(p.inputs) == set(p.test_inputs) and 1 <= len(roots) <= 2
    assert 1 <= sum(v.shape[1] for v in p.inputs.values()) <= 3
    assert all(g.out_degree(r) > 0 for r in roots)
    inner = [w for w in g.nodes if w not in roots and w != "y"]
    assert 1 <= len(inner) <= 3 and all("y" in nx.descendants(g, h) for h in inner)
    assert 1 <= len(p.hidden) and set(p.hidden) <= set(inner)
    assert set(p.data) == set(inner) - set(p.hidden) | {"y"}
    assert all(g.in_degree(w) <= 4 for w in g.nodes)
    assert set(p.mechanisms) == set(inner) | {"y"}
    assert all(any(m.split(": ")[1].startswith(k) for k in MECHANISMS) for m in p.mechanisms.values())
    for r in roots:
        assert p.inputs[r].shape[0] == 50 and p.test_inputs[r].shape[0] == 40
        assert float(p.inputs[r].min()) >= 0 and float(p.inputs[r].max()) <= 1
    for w, v in p.data.items():
        assert v.shape == (50, 1) and v.dtype == torch.float64 and torch.isfinite(v).all()
        assert float(v.mean()) == pytest.approx(0.0, abs=1e-10)    # standardised with the training values
        assert float(v.std()) == pytest.approx(1.0, abs=1e-10)
        assert 0 < p.noise_sd[w] < 0.5
    assert p.y_test["y"].shape == p.f_test["y"].shape == (40, 1) and p.f_train["y"].shape == (50, 1)
    assert set(p.truth) == set(inner) | {"y"}


def test_noise_is_what_it_says():
    """The held-out observations scatter around the noise-free target with the stated sd; the training data too."""
    p = random_latent(11, n=2000, n_test=4000)
    resid = (p.y_test["y"] - p.f_test["y"]).reshape(-1)
    assert float(resid.std()) == pytest.approx(p.noise_sd["y"], rel=0.05)
    assert float(resid.mean()) == pytest.approx(0.0, abs=4 * p.noise_sd["y"] / math.sqrt(4000))
    train_resid = (p.data["y"] - p.f_train["y"]).reshape(-1)
    assert float(train_resid.std()) == pytest.approx(p.noise_sd["y"], rel=0.08)


def test_noise_free_when_asked():
    p = random_latent(5, n=30, n_test=20, noise_ratio=0.0)
    assert torch.allclose(p.y_test["y"], p.f_test["y"]) and torch.allclose(p.data["y"], p.f_train["y"])
    assert p.noise_sd["y"] == 0.0


def test_nodes_are_standardised_on_the_design_distribution():
    """Every mechanism's values have mean ~0 and sd ~1 over the design (the reference sample's units), so no node
    is constant or dominates its child by scale alone."""
    for seed in range(10):
        p = random_latent(seed, n=3000, n_test=10)
        for w, v in p.truth.items():
            assert abs(float(v.mean())) < 0.15, (seed, w)
            assert 0.85 < float(v.std()) < 1.15, (seed, w)


def test_target_depends_on_the_inputs():
    """The target is a non-trivial function of the inputs: least squares on the inputs explains less than all of
    it on some draws (non-linear) and the noise-free target is never constant."""
    for seed in range(10):
        p = random_latent(seed, n=300, n_test=10)
        assert float(p.f_train["y"].std()) > 0.5


def test_the_draws_cover_the_mechanisms_and_shapes():
    kinds, hidden, widths = set(), set(), set()
    for seed in SEEDS:
        p = random_latent(seed, n=10, n_test=5)
        kinds |= {m.split(": ")[1].split(" ")[0].rstrip(":") for m in p.mechanisms.values()}
        hidden.add(len(p.hidden))
        widths.add(sum(v.shape[1] for v in p.inputs.values()))
    assert kinds == set(MECHANISMS)
    assert hidden == {1, 2, 3} and widths == {1, 2, 3}


@pytest.mark.parametrize("kw, match", [({"seed": -1}, "seed"), ({"seed": 1.5}, "seed"), ({"seed": 0, "n": 1}, "n must"),
                                       ({"seed": 0, "noise_ratio": -0.1}, "noise_ratio")])
def test_bad_arguments_are_named(kw, match):
    seed = kw.pop("seed")
    with pytest.raises(ValueError, match=match):
        random_latent(seed, **kw)
