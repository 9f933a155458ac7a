"""Closed-form kernel expectations under Gaussian inputs against Monte Carlo and the plain kernel."""
import pytest
import torch

from pyro_dag.infer.lamp.expectations import (PairTerms, expected_kernel, expected_kernel_product,
                                              expected_quadratic_form, kernel_matrix)

KERNELS = ["rbf", "matern52"]


def _design(seed=0, n=7):
    g = torch.Generator().manual_seed(seed)
    X = 1.5 * torch.randn(n, 2, dtype=torch.float64, generator=g)
    ell = torch.tensor([0.7, 1.3], dtype=torch.float64)
    return X, ell


def _monte_carlo(kernel, X, ell, mean, var, num=400_000, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = mean + var.sqrt() * torch.randn(num, mean.shape[-1], dtype=torch.float64, generator=g)
    k = kernel_matrix(kernel, x, X, ell)  # [S, n]
    kk = k.unsqueeze(-1) * k.unsqueeze(-2)  # [S, n, n]
    return (k.mean(0), k.std(0) / num ** 0.5), (kk.mean(0), kk.std(0) / num ** 0.5)


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("mean,var", [
    ([0.2, -0.4], [0.3, 0.0]),      # one deterministic dimension
    ([1.0, 0.5], [1e-6, 2.0]),      # nearly deterministic + wide
    ([-0.3, 2.5], [0.05, 0.5]),
    ([0.0, 0.0], [4.0, 9.0]),       # input sd larger than the lengthscales
    ([6.0, -5.0], [0.5, 0.2]),      # far from the design
])
def test_expectations_match_monte_carlo(kernel, mean, var):
    X, ell = _design()
    mean = torch.tensor([mean], dtype=torch.float64)
    var = torch.tensor([var], dtype=torch.float64)
    (k_mc, k_se), (h_mc, h_se) = _monte_carlo(kernel, X, ell, mean, var)
    kbar = expected_kernel(kernel, X, ell, mean, var)[0]
    H = expected_kernel_product(kernel, X, ell, mean, var)[0]
    # 5 standard errors (a few tenths of a percent of the values here); far from the design the MC average of
    # rare large values has an unreliable standard error, hence the absolute 1e-7 for values of order 1e-8
    assert ((kbar - k_mc).abs() <= 5 * k_se + 1e-7).all(), (kbar - k_mc).abs().max()
    assert ((H - h_mc).abs() <= 5 * h_se + 1e-7).all(), (H - h_mc).abs().max()
    assert torch.allclose(H, H.transpose(-1, -2), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("kernel", KERNELS)
def test_deterministic_inputs_give_the_plain_kernel(kernel):
    X, ell = _design(seed=2)
    mean = torch.randn(5, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    k = kernel_matrix(kernel, mean, X, ell)
    zero = torch.zeros_like(mean)
    assert torch.allclose(expected_kernel(kernel, X, ell, mean, zero), k, rtol=1e-12, atol=1e-14)
    assert torch.allclose(expected_kernel_product(kernel, X, ell, mean, zero), k.unsqueeze(-1) * k.unsqueeze(-2),
                          rtol=1e-12, atol=1e-14)
    # and continuously: a tiny variance is within O(σ) of the kernel (no 0/0 in the truncated moments)
    tiny = torch.full_like(mean, 1e-14)
    assert torch.allclose(expected_kernel(kernel, X, ell, mean, tiny), k, atol=1e-6)
    assert torch.allclose(expected_kernel_product(kernel, X, ell, mean, tiny), k.unsqueeze(-1) * k.unsqueeze(-2),
                          atol=1e-6)


@pytest.mark.parametrize("kernel", KERNELS)
def test_mixed_rows_and_extremes_are_finite(kernel):
    X, ell = _design(seed=4)
    mean = torch.tensor([[0.0, 0.0], [40.0, -40.0], [0.1, 0.2]], dtype=torch.float64)
    var = torch.tensor([[0.0, 0.3], [1e-3, 1e-3], [100.0, 400.0]], dtype=torch.float64)
    kbar = expected_kernel(kernel, X, ell, mean, var)
    H = expected_kernel_product(kernel, X, ell, mean, var)
    assert torch.isfinite(kbar).all() and torch.isfinite(H).all()
    assert (kbar >= 0).all() and (kbar <= 1).all()
    assert kbar[1].max() < 1e-20  # 40 lengthscales away
    # each row equals the same computation done alone (no leakage between test points)
    for i in range(3):
        assert torch.allclose(expected_kernel_product(kernel, X, ell, mean[i:i + 1], var[i:i + 1])[0], H[i])


@pytest.mark.parametrize("kernel", KERNELS)
def test_float32_follows_dtype(kernel):
    X, ell = _design(seed=5)
    mean = torch.tensor([[0.3, -0.2], [1.0, 1.0]], dtype=torch.float64)
    var = torch.tensor([[0.2, 0.0], [0.5, 1.0]], dtype=torch.float64)
    ref = expected_kernel_product(kernel, X, ell, mean, var)
    out = expected_kernel_product(kernel, X.float(), ell.float(), mean.float(), var.float())
    assert out.dtype == torch.float32
    assert torch.allclose(out.double(), ref, atol=1e-5)
    assert expected_kernel(kernel, X.float(), ell.float(), mean.float(), var.float()).dtype == torch.float32


def test_bad_shapes_and_kernels():
    X, ell = _design()
    mean = torch.zeros(3, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="kernel must be"):
        expected_kernel("matern32", X, ell, mean, mean)
    with pytest.raises(ValueError, match="mean and var"):
        expected_kernel("rbf", X, ell, mean[:, :1], mean[:, :1])
    with pytest.raises(ValueError, match="non-negative"):
        expected_kernel_product("rbf", X, ell, mean, -torch.ones_like(mean))


@pytest.mark.parametrize("kernel", KERNELS)
@pytest.mark.parametrize("mean,sd,rtol", [(0.3, 0.5, 1e-8), (-1.0, 0.01, 1e-8), (3.0, 4.0, 1e-8), (20.0, 0.3, 1e-8),
                                          (-20.0, 0.3, 1e-8), (0.0, 6.0, 1e-8), (0.0, 30.0, 1e-5)])
def test_one_dimensional_expectations_match_quadrature(kernel, mean, sd, rtol):
    # deterministic check, also where the truncated moments cancel (far tails, sd >> ℓ). The Matérn middle
    # region loses about ε (√5 sd/ℓ)⁴ in absolute terms: 2e-6 relative at sd = 67 ℓ, 4e-10 at 13 ℓ
    X = 2 * torch.randn(20, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(9))
    X[5] = X[7]  # a tie
    ell = torch.tensor([0.45], dtype=torch.float64)
    z = torch.linspace(-12, 12, 200_001, dtype=torch.float64)
    w = torch.exp(-z ** 2 / 2) / (2 * torch.pi) ** 0.5 * (z[1] - z[0])
    k = kernel_matrix(kernel, (mean + sd * z).unsqueeze(-1), X, ell)  # [Z, n]
    quad_k = w @ k
    quad_h = torch.einsum("z,zi,zj->ij", w, k, k)
    m = torch.tensor([[mean]], dtype=torch.float64)
    v = torch.tensor([[sd ** 2]], dtype=torch.float64)
    kbar = expected_kernel(kernel, X, ell, m, v)[0]
    H = expected_kernel_product(kernel, X, ell, m, v)[0]
    # (values below 1e-13 are zero for any prediction; the ±12 sd grid does not resolve them far from the data)
    assert torch.allclose(kbar, quad_k, rtol=rtol, atol=1e-13)
    assert torch.allclose(H, quad_h, rtol=rtol, atol=1e-13)
    assert (kbar >= 0).all() and (H >= 0).all()


@pytest.mark.parametrize("kernel", KERNELS)
def test_quadratic_form_equals_the_contraction_of_H(kernel):
    X, ell = _design(seed=6, n=9)
    g = torch.Generator().manual_seed(7)
    B = torch.randn(9, 9, dtype=torch.float64, generator=g)
    B = B + B.T
    mean = torch.randn(4, 2, dtype=torch.float64, generator=g)
    var = torch.rand(4, 2, dtype=torch.float64, generator=g) * torch.tensor([1.0, 0.0], dtype=torch.float64)
    var[0, 1] = 0.7
    ref = torch.einsum("ij,cij->c", B, expected_kernel_product(kernel, X, ell, mean, var))
    pairs = PairTerms(kernel, X, B)
    assert torch.allclose(expected_quadratic_form(kernel, X, ell, mean, var, B, pairs=pairs), ref, rtol=1e-11)
    assert torch.allclose(expected_quadratic_form(kernel, X, ell, mean, var, B), ref, rtol=1e-11)
