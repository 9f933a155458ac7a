"""LinearHiddenGP: the exact GP of y on (x, h = xA) nests the exact GP of y on x, predicts as a dense Gaussian
conditioning does, finds the direction of a ridge and keeps depth by Schwarz's criterion only where it pays; and
DeepRegression's default uses it."""
import math

import pytest
import torch

from pyro_dag.baselines import ExactGP
from pyro_dag.infer import DeepRegression
from pyro_dag.infer.linear_hidden import LinearHiddenGP, active_subspace


def _ridge(n=100, d=3, seed=0, noise=0.01):
    """A crease along a direction that is not an axis: an axis-aligned ARD kernel must shorten every length-scale."""
    g = torch.Generator().manual_seed(seed)
    w = torch.tensor([0.6, -0.8, 0.0][:d], dtype=torch.float64)
    f = lambda x: (x @ w - 0.1).abs()   # noqa: E731
    X = torch.rand(n, d, generator=g, dtype=torch.float64)
    Xt = torch.rand(200, d, generator=g, dtype=torch.float64)
    y = f(X) + noise * torch.randn(n, generator=g, dtype=torch.float64)
    return X, y, Xt, f(Xt), w


def test_switching_the_hidden_layer_off_is_the_exact_gp():
    X, y, _, _, _ = _ridge(n=40)
    gp = ExactGP(seed=0).fit(X, y)
    deep = LinearHiddenGP().fit(X, y, gp)
    off = [gp.log_lengthscale, gp.log_signal, deep.projection, torch.tensor(-800.0, dtype=torch.float64),
           gp.log_noise]
    assert abs(float(deep._nlml(off, gp._Xs, gp._ys)) - float(gp._nlml([gp.log_lengthscale, gp.log_signal,
                                                                         gp.log_noise], gp._Xs, gp._ys))) < 1e-8
    # the fit starts there (half the signal through h) and can only climb: never below the shallow evidence by much
    assert deep.log_marginal_likelihood >= gp.log_marginal_likelihood - 1e-6


def test_prediction_is_dense_gaussian_conditioning():
    X, y, Xt, _, _ = _ridge(n=30)
    deep = LinearHiddenGP().fit(X, y)
    gp = deep.shallow
    log_ls, log_sx, A, log_sh, log_sn = deep.params
    # the reference: the joint Gaussian of (training observations, test values) written out entry by entry
    Z = torch.cat([gp._Xs, (Xt - gp._lo) / gp._span])
    n, m = gp._Xs.shape[0], Xt.shape[0]

    def k(a, b):
        rx = (((a - b) / log_ls.exp()) ** 2).sum()
        rh = ((a @ A - b @ A) ** 2).sum()
        return float(log_sx.exp() * torch.exp(-0.5 * rx) + log_sh.exp() * torch.exp(-0.5 * rh))

    idx = list(range(n)) + list(range(n, n + 5))
    K = torch.tensor([[k(Z[i], Z[j]) for j in idx] for i in idx], dtype=torch.float64)
    noise = float(log_sn.exp()) + gp.min_noise
    Kyy = K[:n, :n] + noise * torch.eye(n, dtype=torch.float64)
    mean = K[n:, :n] @ torch.linalg.solve(Kyy, gp._ys)
    cov = K[n:, n:] - K[n:, :n] @ torch.linalg.solve(Kyy, K[:n, n:])
    got_mean, got_var = deep.predict(Xt[:5])
    assert torch.allclose(got_mean, gp._y_mean + gp._y_sd * mean, atol=1e-6 * float(gp._y_sd))
    assert torch.allclose(got_var, gp._y_sd ** 2 * cov.diagonal().clamp_min(1e-12), rtol=1e-5, atol=1e-10)
    _, var_y = deep.predict(Xt[:5], include_noise=True)
    assert torch.allclose(var_y - got_var, torch.full((5,), deep.noise_variance, dtype=torch.float64))


def test_a_ridge_is_found_and_kept():
    X, y, Xt, ft, w = _ridge(n=100)
    gp = ExactGP(seed=0).fit(X, y)
    V, values = active_subspace(gp, 1)
    assert abs(float(V[:, 0] @ w)) > 0.9 and bool((values[:-1] >= values[1:]).all())
    deep = LinearHiddenGP().fit(X, y, gp)
    a = deep.projection[:, 0]
    assert abs(float(a @ w)) / float(a.norm()) > 0.95        # the hidden layer is the ridge's direction
    assert deep.bic_gain > 0 and deep.extra_parameters == 4
    rmse = lambda mean: float((mean - ft).pow(2).mean().sqrt())   # noqa: E731
    assert rmse(deep.predict(Xt)[0]) < 0.7 * rmse(gp.predict(Xt)[0])
    reg = DeepRegression(seed=0).fit(X, y)                     # the default method
    assert reg.method == "linear" and reg.choice == "deep"
    assert reg.evidence["bic_gain"] > 0
    assert abs(reg.evidence["penalty"] - 0.5 * 4 * math.log(100)) < 1e-9
    assert rmse(reg.predict(Xt)[0]) < 0.7 * rmse(gp.predict(Xt)[0])


def test_a_smooth_axis_aligned_function_stays_shallow():
    g = torch.Generator().manual_seed(3)
    X = torch.rand(60, 2, generator=g, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + 0.3 * X[:, 1] + 0.05 * torch.randn(60, generator=g, dtype=torch.float64)
    reg = DeepRegression(seed=0).fit(X, y)
    assert reg.evidence["bic_gain"] <= 0 and reg.choice == "shallow"
    Xt = torch.rand(20, 2, generator=g, dtype=torch.float64)
    mean, var = reg.predict(Xt)
    assert torch.allclose(mean, reg.exact.predict(reg._scale_x(Xt))[0] * reg._y_scale + reg._y_loc)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="width"):
        LinearHiddenGP(width=0)
    with pytest.raises(ValueError, match="start_scales"):
        LinearHiddenGP(start_scales=(0.0,))
    X, y, _, _, _ = _ridge(n=20)
    with pytest.raises(ValueError, match="learn its noise"):
        LinearHiddenGP().fit(X, y, ExactGP(noise=1e-6).fit(X, y))
    with pytest.raises(ValueError, match="same data"):
        LinearHiddenGP().fit(X[:10], y[:10], ExactGP().fit(X, y))
