"""Prop. 6 (branching) and Theorem 2 (Gaussian refresh along disjoint routes) of Perlino et al. 2026
(arXiv:2607.09645, App. C.3, App. D, Fig. 3 c-d): the bound functions against closed forms and exact
Galton-Watson enumeration, the benchmark's Monte Carlo simulators against one-step quadratures, and the bounds
against the simulators."""
import math
import os
import sys

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from pyro_dag.diagnostics import (branching_survival_bound, branching_threshold_probability, gaussian_exceedance,
                                  gaussian_refresh, route_retention_factor, theorem2_bound)

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks import prior_collapse as bench  # noqa: E402

PHI = stats.norm.cdf


def _se(p, n):
    return math.sqrt(max(p * (1 - p), 1e-4) / n)


# ---------------------------------------------------------------- Prop. 6: branching


def test_threshold_probability_is_the_chi2_tail_of_the_worst_case_child():
    t, tau2, ls = 0.45, 1.0, 1.0
    sigma2 = 2 * tau2 * (1 - math.exp(-t ** 2 / (2 * ls ** 2)))
    p1 = float(branching_threshold_probability(t, tau2, ls).double())
    assert p1 == pytest.approx(2 * PHI(-t / math.sqrt(sigma2)), rel=1e-5)  # Cor. 5
    assert p1 == pytest.approx(0.3052, abs=1e-4)
    for d in (2, 3):
        p = float(branching_threshold_probability(t, tau2, ls, d=d))
        assert p == pytest.approx(stats.chi2.sf(t ** 2 / sigma2, d), rel=1e-5)
    with pytest.raises(ValueError, match="lengthscale"):
        branching_threshold_probability(t, tau2, 0.0)


def _exact_galton_watson_survival(p, b, depth):
    """P(Z_depth > 0 | Z_0 = 1) for Bin(b, p) offspring, by propagating the whole law of Z_l."""
    law = {1: 1.0}
    for _ in range(depth):
        new = {}
        for n, pn in law.items():
            for m in range(n * b + 1):
                new[m] = new.get(m, 0.0) + pn * math.comb(n * b, m) * p ** m * (1 - p) ** (n * b - m)
        law = new
    return 1 - law.get(0, 0.0)


@pytest.mark.parametrize("b", [1, 2, 3])
@pytest.mark.parametrize("p", [0.3, 0.55, 0.8])
def test_branching_survival_bound_is_the_galton_watson_survival(b, p):
    for depth in range(5):
        exact = _exact_galton_watson_survival(p, b, depth)
        assert float(branching_survival_bound(torch.tensor(p, dtype=torch.float64), b, depth)) == \
            pytest.approx(exact, abs=1e-12)
        assert float(branching_survival_bound(torch.tensor(p, dtype=torch.float64), b, depth, seed_prob=0.4)) == \
            pytest.approx(0.4 * exact, abs=1e-12)


def test_all_depth_survival_is_one_minus_the_extinction_probability():
    for p in (0.3, 0.5, 0.6, 0.9):  # b = 2: g(s) = s has the roots 1 and ((1 - p)/p)^2
        expected = max(0.0, 1 - ((1 - p) / p) ** 2)
        got = float(branching_survival_bound(torch.tensor(p, dtype=torch.float64), 2))
        assert got == pytest.approx(expected, abs=1e-10)
        assert float(branching_survival_bound(torch.tensor(p, dtype=torch.float64), 2, 400)) == \
            pytest.approx(expected, abs=1e-6 if p != 0.5 else 1e-2)  # critical: 1 - g^L(0) ~ 2/(L p^2 b ...)
    assert float(branching_survival_bound(1.0, 1)) == 1.0 and float(branching_survival_bound(0.99, 1)) == 0.0
    with pytest.raises(ValueError, match="b must"):
        branching_survival_bound(0.5, 0)
    with pytest.raises(ValueError, match="p_t"):
        branching_survival_bound(1.5, 2)


def _one_step_survival(b, t=0.45, variance=1.0, lengthscale=1.0, gap=1.0):
    """P(|Δ_w0| ≥ t, max_{children} |Δ_v| ≥ t) = E[1{|Δ_w0| ≥ t} (1 - (1 - r(Δ_w0))^b)], by quadrature."""
    sd0 = math.sqrt(2 * variance * (1 - math.exp(-gap ** 2 / (2 * lengthscale ** 2))))

    def r(x):
        return 2 * PHI(-t / math.sqrt(2 * variance * (1 - math.exp(-x ** 2 / (2 * lengthscale ** 2)))))

    val, _ = integrate.quad(lambda x: stats.norm.pdf(x, scale=sd0) * (1 - (1 - r(x)) ** b), t, np.inf)
    return 2 * val, 2 * stats.norm.sf(t, scale=sd0)


@pytest.mark.parametrize("b", [1, 3])
def test_branching_simulator_matches_the_exact_first_two_levels(b):
    n = 40_000
    surv = bench.fig3c(b, n, max_depth=1, seed=11)
    one, zero = _one_step_survival(b)
    assert abs(surv[0] - zero) < 4 * _se(zero, n)
    assert abs(surv[1] - one) < 4 * _se(one, n)
    # the bound is exact at L = 0 and strictly below the exact one-step survival
    bound0, _, _ = bench.fig3c_bound(b, 0)
    bound1, _, _ = bench.fig3c_bound(b, 1)
    assert bound0 == pytest.approx(zero, rel=1e-9)
    assert bound1 < one


def test_branching_bound_holds_in_the_simulation():
    n = 1500
    for b in (1, 2, 3, 5):
        surv = bench.fig3c(b, n, max_depth=5, seed=3)
        for L in range(6):
            bound = bench.fig3c_bound(b, L)[0]
            assert surv[L] >= bound - 3 * _se(surv[L], n), (b, L, surv[L], bound)
    # without the seed factor the Galton-Watson survival alone would exceed the simulated survival
    p_t = branching_threshold_probability(0.45, 1.0, 1.0)
    assert float(branching_survival_bound(p_t, 5, 5)) > surv[5] + 3 * _se(surv[5], n)


# ---------------------------------------------------------------- Theorem 2: Gaussian refresh along routes


def test_gaussian_exceedance_is_the_two_sided_tail():
    mean, var, q_cor6 = gaussian_refresh(1.0, 0.2, 1.0, eps=0.35)
    q = float(gaussian_exceedance(mean, var, 0.35))
    g = torch.Generator().manual_seed(0)
    x = float(mean) + float(var) ** 0.5 * torch.randn(400_000, generator=g, dtype=torch.float64)
    freq = float((x.abs() > 0.35).double().mean())
    assert abs(freq - q) < 4 * _se(q, 400_000)
    assert float(q_cor6) < q  # Cor. 6 keeps only the tail on the side of the mean
    assert q == pytest.approx(0.7755, abs=1e-4)
    assert gaussian_exceedance(0.5, 0.0, 0.35).item() == 1.0 and gaussian_exceedance(0.2, 0.0, 0.35).item() == 0.0
    with pytest.raises(ValueError, match="var"):
        gaussian_exceedance(0.0, -1.0, 0.35)


def test_route_retention_factor_is_the_worst_case_one_step_probability():
    eps, s2, ls = 0.35, 0.6, 0.55
    beta = float(route_retention_factor(eps, s2, ls).double())
    # a route parent whose contrast is exactly eps: the child contrast is N(0, 2 s2 (1 - k(eps))) (Lemma 2)
    gamma = 2 * s2 * (1 - math.exp(-eps ** 2 / (2 * ls ** 2)))
    assert beta == pytest.approx(2 * PHI(-eps / math.sqrt(gamma)), rel=1e-5)
    assert float(route_retention_factor(eps, [s2] * 3, [ls] * 3)) == pytest.approx(beta ** 3, rel=1e-5)
    assert float(route_retention_factor(eps, [], [])) == 1.0
    with pytest.raises(ValueError, match="length-scale"):
        route_retention_factor(eps, [s2], [0.0])


def test_theorem2_bound_combines_disjoint_routes():
    assert float(theorem2_bound(0.7, 0.5)) == pytest.approx(0.35)
    assert float(theorem2_bound([0.7, 0.4], [0.5, 0.25])) == pytest.approx(1 - (1 - 0.35) * (1 - 0.1))
    with pytest.raises(ValueError, match="rho"):
        theorem2_bound(0.5, 1.5)


def _one_step_refresh(routes, s=bench.FIG3D):
    """Exact P(M_{l0+1} > ε) by Gauss-Hermite quadrature over the filtered source contrasts."""
    mean, var = (float(x) for x in gaussian_refresh(s["gamma"], s["noise_var"], s["gap"]))
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    x, w = mean + math.sqrt(var) * nodes, weights / weights.sum()

    def tail(route_parent, cross_parent):
        g = 2 * s["route_var"] * (1 - np.exp(-route_parent ** 2 / (2 * s["route_ls"] ** 2)))
        g = g + 2 * s["cross_var"] * (1 - np.exp(-cross_parent ** 2 / (2 * s["cross_ls"] ** 2)))
        return 2 * PHI(-s["eps"] / np.sqrt(g))

    if routes == 1:
        g = 2 * s["route_var"] * (1 - np.exp(-x ** 2 / (2 * s["route_ls"] ** 2)))
        return float((w * 2 * PHI(-s["eps"] / np.sqrt(g))).sum())
    x1, x2 = np.meshgrid(x, x, indexing="ij")
    w2 = np.outer(w, w)
    return float(1 - (w2 * (1 - tail(x1, x2)) * (1 - tail(x2, x1))).sum())


@pytest.mark.parametrize("routes", [1, 2])
def test_refresh_simulator_matches_the_exact_first_step(routes):
    n = 200_000
    freq = bench.fig3d(n, routes, max_steps=1, seed=5)
    mean, var = gaussian_refresh(1.0, 0.2, 1.0)
    q = float(gaussian_exceedance(mean.double(), var.double(), 0.35))
    exact0 = 1 - (1 - q) ** routes
    exact1 = _one_step_refresh(routes)
    assert abs(freq[0] - exact0) < 4 * _se(exact0, n)
    assert abs(freq[1] - exact1) < 4 * _se(exact1, n)
    if routes == 2:  # the weak cross parent is simulated: dropping it moves the exact value by many s.e.
        no_cross = _one_step_refresh(2, dict(bench.FIG3D, cross_var=0.0))
        assert abs(exact1 - no_cross) > 6 * _se(exact1, n)


def test_theorem2_bound_holds_in_the_simulation():
    n = 20_000
    for routes in (1, 2):
        freq = bench.fig3d(n, routes, seed=7)
        for h, f in enumerate(freq):
            bound, bound_cor6, *_ = bench.fig3d_bound(routes, h)
            assert bound_cor6 <= bound
            assert f >= bound - 3 * _se(f, n), (routes, h, f, bound)
    chain, dag = bench.fig3d(n, 1, seed=8), bench.fig3d(n, 2, seed=8)
    assert all(d > c for c, d in zip(chain, dag))  # two refreshed routes beat one at every depth
