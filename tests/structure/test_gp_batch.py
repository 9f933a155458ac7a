"""Batched type-II ML GP fits: the analytic gradient against autograd, the fit against one-by-one ExactGP fits."""
import math

import numpy as np
import pytest
import torch

from pyro_dag.baselines import ExactGP
from pyro_dag.structure.gp_batch import _nll_and_grad, batched_gp_fit


def _nll_reference(kernel, X, y, params):
    """The negative log evidence of one problem by torch's MultivariateNormal (X [n, D] scaled, y [n] standardised)."""
    D = X.shape[1]
    d = (X[:, None, :] - X[None, :, :]) / params[:D].exp()
    r2 = d.pow(2).sum(-1)
    if kernel == "rbf":
        K = params[D].exp() * torch.exp(-0.5 * r2)
    else:
        r = (r2 + 1e-30).sqrt()
        K = params[D].exp() * (1 + math.sqrt(5) * r + 5 / 3 * r2) * torch.exp(-math.sqrt(5) * r)
    K = K + (params[D + 1].exp() + 1e-8) * torch.eye(len(y), dtype=X.dtype)
    return -torch.distributions.MultivariateNormal(torch.zeros_like(y), covariance_matrix=K).log_prob(y)


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_value_and_gradient_match_autograd(kernel):
    g = torch.Generator().manual_seed(0)
    X = torch.rand(3, 25, 2, generator=g, dtype=torch.float64)
    y = torch.randn(3, 25, generator=g, dtype=torch.float64)
    params = 0.5 * torch.randn(3, 4, generator=g, dtype=torch.float64)
    D2 = (X.unsqueeze(2) - X.unsqueeze(1)).pow(2).permute(0, 3, 1, 2).contiguous()
    nll, grad = _nll_and_grad(kernel, D2, y, params)
    for b in range(3):
        p = params[b].clone().requires_grad_()
        ref = _nll_reference(kernel, X[b], y[b], p)
        ref.backward()
        assert float(nll[b]) == pytest.approx(float(ref), rel=1e-12)
        torch.testing.assert_close(grad[b], p.grad, rtol=1e-9, atol=1e-10)
    assert torch.autograd.gradcheck(lambda q: _nll_and_grad(kernel, D2, y, q)[0], params.clone().requires_grad_())


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_batched_fit_reaches_the_one_by_one_optimum(kernel):
    rng = np.random.default_rng(1)
    n = 60
    x = rng.uniform(-2, 2, size=(n, 2))
    ys = [np.sin(2 * x[:, 0]) + 0.1 * rng.normal(size=n), x[:, 0] * x[:, 1] + 0.3 * rng.normal(size=n),
          rng.normal(size=n)]
    X = torch.as_tensor(np.stack([x] * 3))
    lml, params = batched_gp_fit(X, torch.as_tensor(np.stack(ys)), kernel=kernel)
    for b, y in enumerate(ys[:2]):
        ref = ExactGP(kernel=kernel, restarts=2, seed=0).fit(x, y).log_marginal_likelihood
        assert float(lml[b]) >= ref - 0.02              # the broad ridge moves the optimum by hundredths of a nat
        assert float(lml[b]) <= ref + 1.0                 # the same model: no evidence from nowhere
    # pure noise: at least the noise-only model's evidence (ExactGP's random start can end in a degenerate
    # interpolating optimum, length-scale 0.006 and noise 1e-9, which is another local optimum)
    noise_only = -0.5 * n * (math.log(2 * math.pi * np.var(ys[2])) + 1)
    assert float(lml[2]) >= noise_only
    assert params.shape == (3, 4)
    # an irrelevant input ends with a long length-scale (the noise-only target: both long)
    assert float(params[0, 1]) > float(params[0, 0]) + 1.0


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
def test_sparse_bound_is_exact_at_the_data_and_below_the_evidence_elsewhere(kernel):
    from pyro_dag.structure.gp_batch import _sparse_nll_and_grad

    g = torch.Generator().manual_seed(2)
    X = torch.rand(2, 40, 2, generator=g, dtype=torch.float64)
    y = torch.sin(4 * X[..., 0]) + 0.2 * torch.randn(2, 40, generator=g, dtype=torch.float64)
    params = torch.tensor([[-1.0, 0.5, 0.2, -2.0], [-0.5, -0.2, -0.3, -1.0]], dtype=torch.float64)
    D2 = (X.unsqueeze(2) - X.unsqueeze(1)).pow(2).permute(0, 3, 1, 2).contiguous()
    exact, _ = _nll_and_grad(kernel, D2, y, params)
    at_data, grad = _sparse_nll_and_grad(kernel, X, X, y, params)          # Z = X: Q = K, the bound is the evidence
    torch.testing.assert_close(at_data, exact, rtol=1e-5, atol=1e-5)         # (up to the 1e-6 jitter of K_uu)
    fewer, _ = _sparse_nll_and_grad(kernel, X, X[:, :10], y, params)
    assert bool((fewer >= exact - 1e-8).all())                               # a lower bound on the evidence
    # the autograd gradient against central differences
    eps = 1e-6
    for k in range(4):
        e = torch.zeros_like(params)
        e[:, k] = eps
        fd = (_sparse_nll_and_grad(kernel, X, X[:, :10], y, params + e)[0]
              - _sparse_nll_and_grad(kernel, X, X[:, :10], y, params - e)[0]) / (2 * eps)
        torch.testing.assert_close(_sparse_nll_and_grad(kernel, X, X[:, :10], y, params)[1][:, k], fd,
                                   rtol=1e-4, atol=1e-5)
    del grad


def test_sparse_fit_comes_close_to_the_exact_fit_on_a_smooth_function():
    rng = np.random.default_rng(4)
    n = 400
    x = rng.uniform(-2, 2, size=(n, 1))
    y = np.sin(2 * x[:, 0]) + 0.2 * rng.normal(size=n)
    exact, _ = batched_gp_fit(torch.as_tensor(x[None]), torch.as_tensor(y[None]))
    sparse, _ = batched_gp_fit(torch.as_tensor(x[None]), torch.as_tensor(y[None]), inducing=64)
    assert float(sparse) <= float(exact) + 1e-6          # a bound
    assert float(exact) - float(sparse) < 2.0            # and a tight one: 64 inducing inputs on a 1-D sine


def test_laplace_evidence_against_quadrature_over_the_hyperparameters():
    """Laplace's method against a brute-force grid integral of p(y | θ) p(θ) over the three log-hyperparameters."""
    rng = np.random.default_rng(6)
    n = 40
    x = rng.uniform(0, 1, size=(n, 1))
    y = np.sin(6 * x[:, 0]) + 0.3 * rng.normal(size=n)
    mean = torch.tensor([math.log(0.3), math.log(0.5), math.log(0.1)], dtype=torch.float64)
    sd = torch.tensor([1.0, 1.5, 1.5], dtype=torch.float64)
    lap, _ = batched_gp_fit(torch.as_tensor(x[None]), torch.as_tensor(y[None]), prior=(mean, sd))
    # the same scaled problem as batched_gp_fit: x already spans ~[0, 1]; rescale exactly as it does
    xs = torch.as_tensor((x - x.min()) / (x.max() - x.min()))
    ys = torch.as_tensor((y - y.mean()) / y.std(ddof=1))
    grids = [torch.linspace(float(m - 5 * s), float(m + 5 * s), 30, dtype=torch.float64) for m, s in zip(mean, sd)]
    G = torch.stack(torch.meshgrid(*grids, indexing="ij"), -1).reshape(-1, 3)
    D2 = (xs[:, None, :] - xs[None, :, :]).pow(2).permute(2, 0, 1)[None]
    logp = torch.cat([-_nll_and_grad("rbf", D2.expand(len(c), -1, -1, -1), ys.expand(len(c), -1), c)[0]
                      for c in G.split(4096)])
    logp = logp + torch.distributions.Normal(mean, sd).log_prob(G).sum(-1)
    cell = math.prod(float(g[1] - g[0]) for g in grids)
    quad = float(torch.logsumexp(logp, 0)) + math.log(cell) - n * math.log(float(np.std(y, ddof=1)))
    assert float(lap) == pytest.approx(quad, abs=0.3)


def test_empty_family_laplace_against_quadrature():
    from pyro_dag.structure.gp_scores import empty_family_laplace

    y = np.random.default_rng(7).normal(2.0, 3.0, size=50)
    s = np.linspace(-6, 4, 20001)
    ys = (y - y.mean()) / y.std(ddof=1)
    S = float((ys ** 2).sum())
    logp = (-0.5 * len(y) * (math.log(2 * math.pi) + s) - 0.5 * S * np.exp(-s) - 0.5 * ((s - math.log(0.1)) / 1.5) ** 2
            - math.log(1.5 * math.sqrt(2 * math.pi)))
    quad = float(np.log(np.trapezoid(np.exp(logp - logp.max()), s)) + logp.max()) - len(y) * math.log(y.std(ddof=1))
    assert empty_family_laplace(y, math.log(0.1), 1.5) == pytest.approx(quad, abs=0.02)
