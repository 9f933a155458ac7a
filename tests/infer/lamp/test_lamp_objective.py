"""The LaMP-DGP objective against the paper's closed-form gradients (Chang & Sung 2026, Sec. 3.1, Eq. (8)), against
the unprofiled likelihood and against independent dense densities."""
import math

import numpy as np
import pytest
import torch
from scipy.stats import multivariate_normal

from pyro_dag.infer.lamp import LaMPNumericalError, LaMPObjective
from pyro_dag.infer.lamp.expectations import kernel_matrix as predictor_kernel
from pyro_dag.infer.lamp.objective import (gaussian_log_likelihood, gp_log_density, kernel_matrix,
                                           profiled_log_likelihood)

EPS = 1e-6


def two_layer(n=14, d=2, D=2, seed=0):
    """The paper's two-layer DGP x -> w (D outputs) -> y, with random W and hyperparameters."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64)
    Y = torch.sin(3 * X.sum(-1, keepdim=True)) + 0.05 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    W = X[:, :D] + 0.2 * torch.randn(n, D, generator=g, dtype=torch.float64)
    ls_w = torch.tensor([[0.4], [0.7]], dtype=torch.float64)[:D]
    ls_y = torch.tensor([[0.6]], dtype=torch.float64)
    g_y = torch.tensor([0.03], dtype=torch.float64)
    obj = LaMPObjective(nodes=["w", "y"], inputs={"w": ("x",), "y": ("w",)}, hidden={"w"},
                        fixed={"x": X, "y": Y}, kernel="rbf", jitter=EPS)
    return obj, X, Y, W, ls_w, ls_y, g_y


def test_autograd_equals_the_papers_closed_form_gradients():
    """∂L_n/∂W, ∂L_n/∂θ₂, ∂L_n/∂g, ∂L_n/∂θ₁ⱼ of Sec. 3.1 (θ = 2ℓ², Σ₁ⱼ with the jitter)."""
    obj, X, Y, W, ls_w, ls_y, g_y = two_layer()
    n, D = W.shape
    W_ = W.clone().requires_grad_()
    log_w = ls_w.log().requires_grad_()
    log_y = ls_y.log().requires_grad_()
    log_g = g_y.log().requires_grad_()
    rows = torch.arange(n)
    loss = obj(rows, {"w": W_}, {"w": log_w.exp(), "y": log_y.exp()}, {"y": log_g.exp()})
    gW, gw, gy, gg = torch.autograd.grad(loss, [W_, log_w, log_y, log_g])

    def sq(A):
        return ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1)

    theta1 = 2 * ls_w[:, 0] ** 2
    theta2 = 2 * ls_y[0, 0] ** 2
    g = g_y[0]
    K2 = torch.exp(-sq(W) / theta2)
    S2 = K2 + g * torch.eye(n, dtype=torch.float64)
    S2i = torch.linalg.inv(S2)
    tau2 = (Y.T @ S2i @ Y / n).squeeze()
    B = 0.5 * (S2i - S2i @ Y @ Y.T @ S2i / tau2)                                   # Eq. (8)
    A = B * K2
    grad_W = (4 / theta2) * (A @ W - torch.diag(A.sum(1)) @ W)
    cols, grad_t1 = [], []
    for j in range(D):
        K1 = torch.exp(-sq(X) / theta1[j])
        S1 = K1 + EPS * torch.eye(n, dtype=torch.float64)
        S1i = torch.linalg.inv(S1)
        cols.append(S1i @ W[:, j])
        C = 0.5 * (S1i - S1i @ W[:, j:j + 1] @ W[:, j:j + 1].T @ S1i)
        grad_t1.append((C * K1 * sq(X)).sum() / theta1[j] ** 2 / n)
    grad_W = (torch.stack(cols, -1) + grad_W) / n
    grad_t2 = (B * K2 * sq(W)).sum() / theta2 ** 2 / n
    grad_g = torch.trace(B) / n
    # on the log scale: ∂/∂log ℓ = ∂/∂θ · 2θ (θ = 2ℓ²), ∂/∂log g = g ∂/∂g
    torch.testing.assert_close(gW, grad_W, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(gy.squeeze(), grad_t2 * 2 * theta2, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(gg.squeeze(), grad_g * g, rtol=1e-6, atol=1e-9)
    torch.testing.assert_close(gw.squeeze(-1), torch.stack(grad_t1) * 2 * theta1, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
@pytest.mark.parametrize("ard", [False, True])
def test_objective_gradcheck(kernel, ard):
    obj, X, Y, W, ls_w, ls_y, g_y = two_layer(n=8)
    obj.kernel = kernel
    rows = torch.arange(8)
    if ard:
        ls_w = ls_w.expand(2, 2) * torch.tensor([1.0, 1.3], dtype=torch.float64)
        ls_y = ls_y.expand(1, 2).clone()

    def f(W_, lw, ly, lg):
        return obj(rows, {"w": W_}, {"w": lw.exp(), "y": ly.exp()}, {"y": lg.exp()})

    args = [t.clone().requires_grad_() for t in (W, ls_w.log(), ls_y.log(), g_y.log())]
    assert torch.autograd.gradcheck(f, args, eps=1e-6, atol=1e-6)


def test_profiled_equals_unprofiled_at_the_optimum_and_is_its_maximum():
    """Eq. (5): the profiled likelihood equals log N(y; 0, τ̂² Σ), and no τ² on a fine grid does better."""
    obj, X, Y, W, ls_w, ls_y, g_y = two_layer(n=20)
    K = kernel_matrix(W, W, ls_y) + g_y.view(-1, 1, 1) * torch.eye(20, dtype=torch.float64)
    prof, tau2 = profiled_log_likelihood(Y, K)
    dense = multivariate_normal(np.zeros(20), (tau2 * K[0]).numpy()).logpdf(Y[:, 0].numpy())
    assert prof.item() == pytest.approx(dense, rel=1e-10)
    assert prof.item() == pytest.approx(gaussian_log_likelihood(Y, K, tau2).item(), rel=1e-12)
    grid = tau2.item() * torch.logspace(-1, 1, 2001, dtype=torch.float64)
    brute = torch.stack([gaussian_log_likelihood(Y, K, t.view(1)) for t in grid]).squeeze(-1)
    assert brute.max().item() <= prof.item() + 1e-12
    assert brute.max().item() == pytest.approx(prof.item(), abs=1e-5)
    assert grid[brute.argmax()].item() == pytest.approx(tau2.item(), rel=2e-3)
    # the paper's ℓ₂ (Eq. (7)) differs by a constant only
    paper = -(20 / 2) * torch.log(Y.T @ torch.linalg.solve(K[0], Y)) - 0.5 * torch.logdet(K[0])
    const = -(20 / 2) * (math.log(2 * math.pi / 20) + 1)
    assert prof.item() == pytest.approx(paper.item() + const, rel=1e-10)


def test_objective_is_the_sum_of_dense_node_densities_over_n():
    obj, X, Y, W, ls_w, ls_y, g_y = two_layer(n=10)
    rows = torch.tensor([1, 3, 4, 7, 9])
    loss = obj(rows, {"w": W[rows]}, {"w": ls_w, "y": ls_y}, {"y": g_y})
    total = 0.0
    for j in range(2):
        K = torch.exp(-0.5 * torch.cdist(X[rows], X[rows]) ** 2 / ls_w[j, 0] ** 2) + EPS * torch.eye(5)
        total += multivariate_normal(np.zeros(5), K.numpy()).logpdf(W[rows, j].numpy())
    K = torch.exp(-0.5 * torch.cdist(W[rows], W[rows]) ** 2 / ls_y[0, 0] ** 2) + g_y * torch.eye(5)
    tau2 = (Y[rows].T @ torch.linalg.solve(K, Y[rows])).item() / 5
    total += multivariate_normal(np.zeros(5), tau2 * K.numpy()).logpdf(Y[rows, 0].numpy())
    assert loss.item() == pytest.approx(-total / 5, rel=1e-9)


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_kernel_matches_the_predictors(kernel):
    g = torch.Generator().manual_seed(1)
    A = torch.randn(6, 3, generator=g, dtype=torch.float64)
    B = torch.randn(4, 3, generator=g, dtype=torch.float64)
    ls = torch.tensor([[0.5, 1.0, 2.0], [0.9, 0.9, 0.9]], dtype=torch.float64)
    K = kernel_matrix(A, B, ls, kernel)
    for j in range(2):
        torch.testing.assert_close(K[j], predictor_kernel(kernel, A, B, ls[j]), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(kernel_matrix(A, B, ls[1:, :1], kernel)[0], K[1], rtol=1e-12, atol=1e-12)


def test_singular_gram_names_the_node():
    y = torch.ones(3, 1, dtype=torch.float64)
    with pytest.raises(LaMPNumericalError, match="node 'w'"):
        gp_log_density(y, torch.zeros(1, 3, 3, dtype=torch.float64), "w")
