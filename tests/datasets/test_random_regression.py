"""Random regression problems (pyro_dag.datasets.random_regression): reproducible from a seed, standardised,
the documented shapes, families and noise, and clear errors."""
import numpy as np
import pytest
import torch

from pyro_dag.datasets.random_regression import NONSTATIONARY_FAMILIES, random_regression


@pytest.mark.parametrize("kind", ["smooth", "nonstationary"])
def test_same_seed_same_problem_other_seed_other_problem(kind):
    a, b = random_regression(3, kind=kind), random_regression(3, kind=kind)
    assert torch.equal(a.X, b.X) and torch.equal(a.y, b.y) and torch.equal(a.f_test, b.f_test)
    c = random_regression(4, kind=kind)
    assert a.description != c.description or not torch.equal(a.y[:5], c.y[:5])


@pytest.mark.parametrize("kind", ["smooth", "nonstationary"])
def test_shapes_box_standardisation_and_noise(kind):
    for seed in range(6):
        p = random_regression(seed, kind=kind, n_test=300)
        n, d = p.X.shape
        assert p.y.shape == p.f.shape == (n,) and p.X_test.shape == (300, d) and p.y_test.shape == (300,)
        assert 1 <= d <= (6 if kind == "smooth" else 3) and p.d == d
        assert float(p.X.min()) >= 0 and float(p.X.max()) <= 1
        # standardised with the training function values: mean 0, sd 1 (population sd)
        assert abs(float(p.f.mean())) < 1e-10 and abs(float(p.f.std(unbiased=False)) - 1) < 1e-10
        residual = p.y - p.f
        if p.noise_sd == 0:
            assert torch.equal(p.y, p.f)
        else:
            assert abs(float(residual.std()) / p.noise_sd - 1) < 0.35
        assert p.kind == kind and p.seed == seed and kind in p.description
        # a Latin hypercube: each column has one point in each of the n strata
        strata = torch.floor(p.X * n).long().clamp_max(n - 1)
        assert all(len(set(strata[:, j].tolist())) == n for j in range(d))


def test_families_options_and_the_drawn_families_cover_all():
    drawn = {random_regression(s, kind="nonstationary").family for s in range(40)}
    assert drawn == set(NONSTATIONARY_FAMILIES)
    for fam in NONSTATIONARY_FAMILIES:
        p = random_regression(0, kind="nonstationary", family=fam, d=2, n=50, noise_ratio=0.0)
        assert p.family == fam and p.X.shape == (50, 2) and torch.isfinite(p.f_test).all()
    p = random_regression(1, kind="smooth", d=4, n=30, noise_ratio=0.1)
    assert p.X.shape == (30, 4) and p.noise_sd == 0.1


def test_a_step_has_a_jump_and_a_smooth_draw_is_smooth():
    p = random_regression(0, kind="nonstationary", family="step", d=1, n=400, noise_ratio=0.0)
    order = torch.argsort(p.X[:, 0])
    jumps = p.f[order].diff().abs()
    assert float(jumps.max()) > 20 * float(jumps.median())   # one jump of a size no neighbouring pair comes near
    q = random_regression(0, kind="smooth", d=1, n=400, noise_ratio=0.0)
    order = torch.argsort(q.X[:, 0])
    assert float(q.f[order].diff().abs().max()) < 0.2


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="seed"):
        random_regression(-1)
    with pytest.raises(ValueError, match="kind"):
        random_regression(0, kind="rough")
    with pytest.raises(ValueError, match="family"):
        random_regression(0, kind="nonstationary", family="spiral")
    with pytest.raises(ValueError, match="noise_ratio"):
        random_regression(0, noise_ratio=-0.1)
    with pytest.raises(ValueError, match="d must"):
        random_regression(0, d=0)
