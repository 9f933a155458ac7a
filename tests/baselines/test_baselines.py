"""The baselines against references known to be right: the exact GP's log marginal likelihood and predictive
against a dense closed form, least squares against numpy's solver, and the comparison's warning."""
import math

import numpy as np
import pytest
import torch

from pyro_dag.baselines import BaselineWarning, ExactGP, LinearRegression, baseline_scores, compare_with_baselines
from pyro_dag.baselines.exact_gp import _kernel


def _data(n=40, seed=0, noise=0.05):
    gen = torch.Generator().manual_seed(seed)
    X = torch.rand(n, 2, dtype=torch.float64, generator=gen)
    y = torch.sin(5 * X[:, 0]) + X[:, 1] ** 2 + noise * torch.randn(n, dtype=torch.float64, generator=gen)
    return X, y


def test_exact_gp_matches_the_closed_form_posterior_and_evidence():
    X, y = _data()
    gp = ExactGP(restarts=2).fit(X, y)
    Xs, ys = gp._Xs, gp._ys
    K = _kernel("rbf", Xs, Xs, gp.log_lengthscale, gp.log_signal) + gp.noise_fraction * torch.eye(len(y),
                                                                                               dtype=torch.float64)
    Xnew = torch.rand(7, 2, dtype=torch.float64)
    ks = _kernel("rbf", (Xnew - gp._lo) / gp._span, Xs, gp.log_lengthscale, gp.log_signal)
    mean = ks @ torch.linalg.solve(K, ys)
    var = gp.log_signal.exp() - (ks @ torch.linalg.solve(K, ks.T)).diagonal()
    m, v = gp.predict(Xnew)
    assert torch.allclose(m, gp._y_mean + gp._y_sd * mean, atol=1e-8)
    assert torch.allclose(v, gp._y_sd ** 2 * var, atol=1e-8)
    dist = torch.distributions.MultivariateNormal(torch.zeros(len(y), dtype=torch.float64), K)
    evidence = float(dist.log_prob(ys)) - len(y) * math.log(float(gp._y_sd))
    assert gp.log_marginal_likelihood == pytest.approx(evidence, rel=1e-8)


def test_exact_gp_interpolates_a_smooth_function_and_finds_its_noise():
    X, y = _data(n=60, noise=0.0)
    gp = ExactGP().fit(X, y)
    Xt, yt = _data(n=200, seed=1, noise=0.0)
    m, _ = gp.predict(Xt)
    assert float((m - yt).pow(2).mean().sqrt()) < 0.01
    assert gp.noise_fraction < 1e-4
    X, y = _data(n=150, noise=0.2)
    assert ExactGP().fit(X, y).noise_variance == pytest.approx(0.04, rel=0.5)


def test_linear_regression_matches_numpy_least_squares():
    X, y = _data()
    lin = LinearRegression().fit(X, y)
    design = np.c_[np.ones(len(y)), X.numpy()]
    coef = np.linalg.lstsq(design, y.numpy(), rcond=None)[0]
    assert np.allclose(lin.coef.numpy(), coef, atol=1e-8)
    resid = y.numpy() - design @ coef
    assert lin.noise_variance == pytest.approx(resid @ resid / (len(y) - 3), rel=1e-10)


def test_baseline_scores_and_the_warning():
    X, y = _data(n=80)
    Xt, yt = _data(n=50, seed=2)
    scores = baseline_scores(X, y, Xt, yt)
    assert set(scores) == {"exact_gp", "linear", "mean"}
    assert scores["exact_gp"]["rmse"] < scores["linear"]["rmse"] < scores["mean"]["rmse"]
    with pytest.warns(BaselineWarning, match="exact_gp"):
        report = compare_with_baselines("node 'y'", 2 * scores["exact_gp"]["rmse"], scores)
    assert not report["better_than_baselines"] and report["best_baseline"] == "exact_gp"
    assert compare_with_baselines("node 'y'", scores["exact_gp"]["rmse"], scores)["better_than_baselines"]
