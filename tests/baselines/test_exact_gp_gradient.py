"""ExactGP's negative log marginal likelihood has a closed-form gradient (Rasmussen & Williams 2006, Eq. (5.9)):
the same value and gradient as autograd through the Cholesky factor, for both kernels, learned and fixed noise."""
import math

import pytest
import torch

from pyro_dag.baselines import ExactGP
from pyro_dag.baselines.exact_gp import _kernel


def _autograd_nlml(gp, params, X, y):
    """The reference: autograd through the Cholesky factor and the solve."""
    log_ls, log_sf2, log_sn2 = params
    n = X.shape[0]
    noise = (log_sn2.exp() + gp.min_noise) if gp.noise is None else torch.as_tensor(gp.noise).to(X)
    K = _kernel(gp.kernel, X, X, log_ls, log_sf2) + noise * torch.eye(n, dtype=X.dtype)
    L = torch.linalg.cholesky(K)
    alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
    return 0.5 * (y @ alpha) + L.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)


@pytest.mark.parametrize("kernel", ["rbf", "matern52"])
@pytest.mark.parametrize("noise", [None, 1e-3])
def test_closed_form_gradient_matches_autograd(kernel, noise):
    g = torch.Generator().manual_seed(1)
    X = torch.rand(60, 3, dtype=torch.float64, generator=g)
    X[5] = X[4]   # a repeated input (r = 0: the Matérn's derivative there)
    y = torch.sin(5 * X[:, 0]) * X[:, 1] + 0.1 * torch.randn(60, dtype=torch.float64, generator=g)
    gp = ExactGP(kernel=kernel, noise=noise)
    for _ in range(3):
        raw = [torch.randn(3, dtype=torch.float64, generator=g) * 0.5 - 1, torch.randn((), dtype=torch.float64,
               generator=g) * 0.5, torch.randn((), dtype=torch.float64, generator=g) - 4]
        mine = [p.clone().requires_grad_() for p in raw]
        ref = [p.clone().requires_grad_() for p in raw]
        v = gp._nlml(mine, X, y)
        v.backward()
        r = _autograd_nlml(gp, ref, X, y)
        r.backward()
        assert torch.allclose(v, r, rtol=1e-12)
        for a, b in zip(mine, ref):
            expected = torch.zeros_like(b) if b.grad is None else b.grad   # fixed noise: no gradient (zero)
            assert torch.allclose(a.grad, expected, rtol=1e-7, atol=1e-9), (kernel, noise, a.grad, expected)
        # without gradients: the value alone
        with torch.no_grad():
            assert torch.allclose(gp._nlml(raw, X, y), r.detach(), rtol=1e-12)
