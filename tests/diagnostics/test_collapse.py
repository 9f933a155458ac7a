"""Prior-collapse diagnostics against closed forms and small Monte Carlo simulations (Perlino et al. 2026, Sec. 4)."""
import math
import warnings

import networkx as nx
import numpy as np
import pytest
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.diagnostics import (PriorCollapseWarning, antichain_decomposition, check_prior_collapse,
                                  contrast_covariance, gaussian_refresh, is_root_retaining, p_eps,
                                  product_fusion_contraction_check, product_fusion_recursion,
                                  separation_constant, theorem1_bound)


def test_antichain_decomposition_is_progressive():
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c"), ("x", "d"), ("d", "c"), ("x", "e")])
    slices = antichain_decomposition(g)
    assert slices == [["x"], ["a"], ["b", "d"], ["c", "e"]]
    level = {v: i for i, s in enumerate(slices) for v in s}
    for i, s in enumerate(slices):
        for u in s:  # antichain: no path inside a slice
            assert not any(nx.has_path(g, u, v) for v in s if v != u)
            if i + 1 < len(slices):  # progressive: every node reaches the next slice
                assert any(nx.has_path(g, u, v) for v in slices[i + 1])
    assert all(level[u] < level[v] for u, v in g.edges)
    assert antichain_decomposition(g, nodes=["a", "c"]) == [[], ["a"], [], ["c"]]
    with pytest.raises(ValueError, match="cycle"):
        antichain_decomposition(nx.DiGraph([("a", "b"), ("b", "a")]))


def test_contrast_covariance_of_an_rbf():
    k = kernels.RBF(variance=1.7, lengthscale=0.6).double()
    ua = torch.tensor([[0.0], [0.5]], dtype=torch.float64)
    ub = torch.tensor([[0.3], [-1.0]], dtype=torch.float64)
    gamma = contrast_covariance(k, ua, ub)
    expected = 2 * 1.7 * (1 - torch.exp(-(ua - ub).squeeze(-1) ** 2 / (2 * 0.36)))
    torch.testing.assert_close(gamma, expected)
    torch.testing.assert_close(separation_constant(k, ua, ub), expected.min())


def test_p_eps_is_the_tail_probability_of_the_contrast():
    """For Δ ~ N(0, v⋆), P(|Δ| > ε) = p_ε exactly; and the Thm. 1 bound is 1 - (1 - p_ε)^s."""
    v, eps = 0.09, 0.3
    g = torch.Generator().manual_seed(0)
    delta = math.sqrt(v) * torch.randn(200_000, generator=g, dtype=torch.float64)
    freq = float((delta.abs() > eps).double().mean())
    p = float(p_eps(eps, v))
    assert abs(freq - p) < 4 * math.sqrt(p * (1 - p) / 200_000)
    assert float(theorem1_bound(eps, v, 3)) == pytest.approx(1 - (1 - p) ** 3)
    assert float(p_eps(eps, 0.0)) == 0.0
    with pytest.raises(ValueError, match="v_star"):
        p_eps(eps, -1.0)


def _layered_frequency(s, depth=24, width=6, realisations=300, eps=0.3, burn=8, seed=0):
    """Thm. 1 set-up of Perlino et al. 2026, App. G.2 (Fig. 3a), small: each node has one parent in the previous
    slice; ``s`` nodes per slice are separating (an extra additive SE root component)."""
    rng = np.random.default_rng(seed)
    ra, rb = 0.0, 0.3
    k_root = math.exp(-(ra - rb) ** 2 / 2)
    fa = np.zeros((realisations, width)) + ra
    fb = np.zeros((realisations, width)) + rb
    hits = []
    for level in range(depth):
        par = rng.integers(0, width, size=(realisations, width))
        pa, pb = np.take_along_axis(fa, par, 1), np.take_along_axis(fb, par, 1)
        k = np.exp(-(pa - pb) ** 2 / 2)
        sep = np.arange(width) < s
        var = np.where(sep, 2.0, 1.0)
        cov = np.where(sep, k + k_root, k)
        z1, z2 = rng.standard_normal((2, realisations, width))
        fa = np.sqrt(var) * z1
        rho = np.clip(cov / var, -1, 1)
        fb = np.sqrt(var) * (rho * z1 + np.sqrt(1 - rho ** 2) * z2)
        if level >= burn:
            hits.append(np.abs(fa - fb).max(1) > eps)
    return np.mean(hits, axis=0)


def test_theorem1_bound_holds_in_a_small_simulation():
    v_star = 2 * (1 - math.exp(-0.3 ** 2 / 2))
    for s in (0, 1, 3):
        rho = _layered_frequency(s)
        bound = float(theorem1_bound(0.3, v_star, s))
        assert rho.mean() >= bound - 3 * rho.std() / math.sqrt(len(rho))
    assert _layered_frequency(0).mean() < 0.2  # without separating nodes the contrasts collapse


def test_is_root_retaining_and_the_build_warning():
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("x", "b"), ("b", "c"), ("c", "d"), ("d", "e"), ("e", "f")])
    model = DAGDGP(g, kernels={"b": kernels.InputConnected()})
    assert is_root_retaining(model, "a")  # all parents are roots
    assert is_root_retaining(model, "b")
    assert not is_root_retaining(model, "c")
    m2 = DAGDGP(g, kernels={"b": kernels.Additive()})
    assert is_root_retaining(m2, "b")
    m3 = DAGDGP(g, kernels={"b": kernels.Product()})
    assert not is_root_retaining(m3, "b")
    m4 = DAGDGP(g, kernels={"b": kernels.SubsetAdditive([("a",), ("a", "x")])})
    assert not is_root_retaining(m4, "b")
    with pytest.raises(ValueError, match="not a GP node"):
        is_root_retaining(model, "x")
    with pytest.warns(PriorCollapseWarning, match="InputConnected"):
        slices, retaining, gap = check_prior_collapse(model, max_gap=3)
    assert gap == 4 and retaining == [True, True, False, False, False, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_prior_collapse(model, max_gap=4)[2] == 4


def test_product_fusion_contraction_check_matches_the_paper_example():
    """d = 2, τ² = 1, λ = 2: a chain (k̄ = 1) contracts, in-degree 2 does not meet the condition (Cor. 4)."""
    assert product_fusion_contraction_check(2, 1.0, 2.0, 1) == (0.5, True)
    assert product_fusion_contraction_check(2, 1.0, 2.0, 2).contracts is False
    # slope of Ψ_k at 0 is the rate
    h = 1e-7
    assert product_fusion_recursion(h, 2, 1.0, 2.0, 3) / h == pytest.approx(1.5, rel=1e-5)
    with pytest.raises(ValueError, match="lengthscale"):
        product_fusion_contraction_check(2, 1.0, 0.0, 1)


def test_gaussian_refresh_is_gaussian_conditioning():
    gamma, s2, dy = 1.0, 0.2, 1.0
    mean, var, q = gaussian_refresh(gamma, s2, dy, eps=0.35)
    # (Δ, D_Y) jointly Gaussian: cov(Δ, D) = Γ, var(D) = Γ + 2σ²
    assert float(mean) == pytest.approx(gamma / (gamma + 2 * s2) * dy)
    assert float(var) == pytest.approx(gamma - gamma ** 2 / (gamma + 2 * s2))
    normal = torch.distributions.Normal(mean, var.sqrt())
    exact = float(1 - normal.cdf(torch.tensor(0.35)) + normal.cdf(torch.tensor(-0.35)))
    assert float(q) <= exact and float(q) > 0.5 * exact


def test_a_deep_dag_without_root_connections_warns_at_build_time():
    deep = nx.DiGraph([("x", "h1")] + [(f"h{i}", f"h{i + 1}") for i in range(1, 6)])
    with pytest.warns(PriorCollapseWarning, match="InputConnected"):
        DAGDGP(deep)
    connected = nx.DiGraph(list(deep.edges) + [("x", f"h{i}") for i in range(2, 7)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        DAGDGP(connected, kernels={f"h{i}": kernels.InputConnected() for i in range(2, 7)})
        DAGDGP(nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c")]))  # shallow: no warning
