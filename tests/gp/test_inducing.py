"""Inducing-input initialisation (pyro_dag.gp.inducing): k-means on a random subset of the rows above max_cases."""
import torch

from pyro_dag.gp.inducing import kmeans


def _clusters(n=3000, seed=0):
    g = torch.Generator().manual_seed(seed)
    means = torch.tensor([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0], [5.0, 5.0]], dtype=torch.float64)
    labels = torch.randint(4, (n,), generator=g)
    return means[labels] + 0.1 * torch.randn(n, 2, dtype=torch.float64, generator=g), means


def _matched_error(C, means):
    return float(torch.cdist(means, C).min(-1).values.max())


def test_kmeans_on_a_subset_finds_the_clusters_and_is_deterministic():
    X, means = _clusters()
    C = kmeans(X, 4, seed=1, max_cases=200)     # subset: max(200, 4 * 4) rows of 3000
    assert C.shape == (4, 2) and _matched_error(C, means) < 0.1
    assert torch.equal(C, kmeans(X, 4, seed=1, max_cases=200))


def test_kmeans_below_max_cases_uses_every_row():
    X, means = _clusters(n=500)
    C = kmeans(X, 4, seed=2)
    assert torch.equal(C, kmeans(X, 4, seed=2, max_cases=500))  # n <= max_cases: no subset, same draws
    assert _matched_error(C, means) < 0.05


def test_the_subset_keeps_at_least_four_rows_per_centre():
    X, _ = _clusters(n=400)
    C = kmeans(X, 50, seed=0, max_cases=10)     # 10 < 4 * 50: 200 rows clustered, 50 distinct centres
    assert C.shape == (50, 2) and torch.unique(C, dim=0).shape[0] == 50
