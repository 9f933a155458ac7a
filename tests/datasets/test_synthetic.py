"""Tests of the synthetic DAG and SEM generators (SVI-DAG's benchmarks, Zinage 2026, arXiv:2608.04930, §4.1-4.3)."""
import numpy as np
import pytest
import torch

from pyro_dag.datasets import erdos_renyi_dag, sample_sem, scale_free_dag, synthetic_sem, two_node
from pyro_dag.metrics import is_dag


@pytest.mark.parametrize("p, m", [(5, 0), (10, 10), (20, 40), (6, 15)])
def test_erdos_renyi_exact_edges_acyclic_seeded(p, m):
    a = erdos_renyi_dag(p, m, seed=3)
    assert a.shape == (p, p) and int(a.sum()) == m and is_dag(a)
    assert not (a * a.T).any()
    assert torch.equal(a, erdos_renyi_dag(p, m, seed=3))
    if 0 < m < p * (p - 1) // 2:
        assert any(not torch.equal(a, erdos_renyi_dag(p, m, seed=s)) for s in range(4, 8))
    with pytest.raises(ValueError, match="num_edges"):
        erdos_renyi_dag(p, p * p)


@pytest.mark.parametrize("m", [1, 2, 3])
def test_scale_free_edges_and_hubs(m):
    p = 30
    a = scale_free_dag(p, m, seed=0)
    assert is_dag(a) and int(a.sum()) == sum(min(m, t) for t in range(p))
    assert int(a.sum(0).max()) <= m  # hubs are parents: every node has at most m parents
    assert int(a.sum(1).max()) > 2 * m  # and some node has many children (preferential attachment)
    b = scale_free_dag(p, m, hubs="children", seed=0)
    assert is_dag(b) and int(b.sum(1).max()) <= m
    assert torch.equal(a, scale_free_dag(p, m, seed=0))


def test_linear_sem_recovers_weights_by_regression():
    d = sample_sem(p=8, n=20000, graph="er", mechanism="linear", num_edges=10, seed=1, dtype=torch.float64)
    x, a, w = d.data.numpy(), d.adjacency.numpy(), d.weights.numpy()
    assert np.array_equal(w != 0, a == 1)
    assert np.all((np.abs(w[a == 1]) >= 0.3) & (np.abs(w[a == 1]) <= 0.7))
    for j in range(8):
        pa = np.nonzero(a[:, j])[0]
        if len(pa) == 0:
            assert x[:, j].std() == pytest.approx(1.0, abs=0.03)
            continue
        coef, res, *_ = np.linalg.lstsq(x[:, pa], x[:, j], rcond=None)
        assert coef == pytest.approx(w[pa, j], abs=0.03)
        assert (x[:, j] - x[:, pa] @ coef).std() == pytest.approx(1.0, abs=0.03)


@pytest.mark.parametrize("mechanism", ["mlp", "gp"])
def test_nonlinear_sem_is_function_of_parents(mechanism):
    a = torch.tensor([[0, 0, 0], [0, 0, 1], [0, 0, 0]])  # 1 -> 2; node 0 is an unrelated root
    d = synthetic_sem(a, 4000, mechanism=mechanism, noise_scale=[1, 1, 1e-3], seed=0, dtype=torch.float64)
    x = d.data.numpy()
    by_parent = np.abs(np.diff(x[np.argsort(x[:, 1]), 2]))
    by_other = np.abs(np.diff(x[np.argsort(x[:, 0]), 2]))
    assert np.median(by_parent) < 0.05 * x[:, 2].std()  # x2 is a smooth function of its parent
    assert np.median(by_other) > 5 * np.median(by_parent)  # and not of the other root
    assert d.weights is None and d.mechanism == mechanism
    d2 = synthetic_sem(a, 4000, mechanism=mechanism, noise_scale=[1, 1, 1e-3], seed=0, dtype=torch.float64)
    assert torch.equal(d.data, d2.data)


def test_gp_mechanism_has_unit_prior_variance():
    # for x ~ N(0, 1) and an RBF kernel with unit variance and length-scale 1, a GP draw f has
    # E[empirical Var_x f(x)] = 1 - E[k(x, x')] = 1 - 1/sqrt(3)
    a = np.zeros((2, 2), dtype=int)
    a[0, 1] = 1
    var = [synthetic_sem(a, 500, "gp", noise_scale=[1, 1e-3], num_features=300, seed=s).data[:, 1]
           .var(unbiased=False).item() for s in range(40)]
    assert abs(np.mean(var) - (1 - 1 / np.sqrt(3))) < 0.15


def test_sample_sem_seeding_and_standardize():
    d1 = sample_sem(10, 100, mechanism="linear", seed=5)
    d2 = sample_sem(10, 500, mechanism="mlp", seed=5, standardize=True)
    assert torch.equal(d1.adjacency, d2.adjacency)  # graph stream independent of n and mechanism
    assert d2.data.shape == (500, 10)
    assert torch.allclose(d2.data.mean(0), torch.zeros(10), atol=1e-5)
    assert torch.allclose(d2.data.std(0, unbiased=False), torch.ones(10), atol=1e-4)
    assert not torch.equal(d1.adjacency, sample_sem(10, 100, seed=6).adjacency)
    sf = sample_sem(12, 50, graph="sf", edges_per_node=2, seed=0)
    assert int(sf.adjacency.sum()) == 2 * 12 - 3 and sf.info["graph"] == "sf"


def test_two_node():
    lin = two_node("linear", n=900, standardize=False, seed=0, dtype=torch.float64).data.numpy()
    assert np.corrcoef(lin.T)[0, 1] == pytest.approx(1 / np.sqrt(2), abs=0.05)
    nl = two_node("nonlinear", n=900, standardize=False, seed=0, dtype=torch.float64).data.numpy()
    x1 = nl[:, 0]
    f = np.exp(-x1**2) * np.sin(5 * x1**3) + np.abs(x1) ** 0.5 * np.cos(4 * x1) + np.sin(3 * np.pi * x1)
    assert (nl[:, 1] - f).std() == pytest.approx(0.1, abs=0.01)
    d = two_node("nonlinear")
    assert d.data.shape == (1000, 2) and d.adjacency.tolist() == [[0, 1], [0, 0]]
    assert torch.allclose(d.data.std(0, unbiased=False), torch.ones(2), atol=1e-5)


def test_bad_inputs():
    with pytest.raises(ValueError, match="cycle"):
        synthetic_sem([[0, 1], [1, 0]], 10)
    with pytest.raises(ValueError, match="noise_scale"):
        synthetic_sem([[0, 1], [0, 0]], 10, noise_scale=[1, 1, 1])
    with pytest.raises(ValueError, match="mechanism"):
        synthetic_sem([[0, 1], [0, 0]], 10, mechanism="quadratic")
    with pytest.raises(ValueError, match="graph"):
        sample_sem(5, 10, graph="ba")
    with pytest.raises(ValueError, match="p"):
        erdos_renyi_dag(1)
    with pytest.raises(ValueError, match="kind"):
        two_node("cubic")
