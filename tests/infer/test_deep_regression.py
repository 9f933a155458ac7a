"""DeepRegression: the deep model x -> h -> y with x -> y nests the exact GP (at the nested point it predicts as the
exact GP does and its ELBO is the exact log marginal likelihood), the deep fit is kept only on a higher ELBO, and
bad input is refused."""
import math

import pyro
import pytest
import torch

from pyro_dag.baselines import ExactGP
from pyro_dag.infer import DAGELBO, DeepRegression


def _data(n=40, d=2, seed=0, noise=0.05):
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=torch.float64) * 4 - 1      # not on the unit cube: scaling is tested
    f = lambda x: torch.sin(3 * x[:, 0]) + 0.5 * x[:, 1:].sum(-1)        # noqa: E731
    y = 10 + 3 * (f(X) + noise * torch.randn(n, generator=g, dtype=torch.float64))
    Xt = torch.rand(50, d, generator=g, dtype=torch.float64) * 4 - 1
    return X, y, Xt


def test_the_nested_point_is_the_exact_gp():
    X, y, Xt = _data()
    reg = DeepRegression(method="svi", num_steps=0, seed=1).fit(X, y)
    assert reg.choice == "shallow"
    # the reference: the exact GP on the same scaled inputs and standardised outputs
    gp = reg.exact
    Xs = reg._scale_x(Xt)
    ref_mean, ref_var = gp.predict(Xs)
    pred = reg.model.predict(reg.guide, {"x": Xs}, nodes=["y"], num_samples=20)["y"]
    assert torch.allclose(pred.mean[:, 0].double(), ref_mean, atol=1e-3)   # the jitter of K(Z, Z)
    assert torch.allclose(pred.variance[:, 0].double(), ref_var, rtol=1e-3, atol=1e-8)
    # the deep model's ELBO at the nested point is the exact log marginal likelihood (Titsias' bound with Z = X)
    loss = DAGELBO(num_particles=8).loss(reg.model, reg.guide, reg._inputs, reg._data)
    assert abs(-loss - gp.log_marginal_likelihood) < 1e-3 * abs(gp.log_marginal_likelihood) + 1e-3
    # predict() in the data's units is the exact GP of the raw data
    mean, var = reg.predict(Xt)
    raw = ExactGP(restarts=3, seed=1).fit(X, y)
    m2, v2 = raw.predict(Xt)
    assert torch.allclose(mean, m2, atol=1e-3 * float(y.std()))
    assert torch.allclose(var, v2, rtol=1e-2, atol=1e-6)
    _, var_y = reg.predict(Xt, include_noise=True)
    assert torch.allclose(var_y - var, torch.full_like(var, reg.noise_variance), rtol=1e-6)


def test_a_short_deep_fit_does_not_beat_the_shallow_elbo_and_is_dropped():
    X, y, Xt = _data(n=30)
    reg = DeepRegression(method="svi", num_steps=20, elbo_particles=32, seed=0).fit(X, y)
    assert set(reg.elbo) == {"shallow", "deep"} and reg.elbo_se >= 0
    assert math.isfinite(reg.elbo["deep"])
    kept_deep = reg.elbo["deep"] > reg.elbo["shallow"] + 2 * reg.elbo_se
    assert reg.choice == ("deep" if kept_deep else "shallow")
    if reg.choice == "shallow":   # written back to the nested point: the exact GP's predictions
        mean, _ = reg.predict(Xt)
        assert torch.allclose(mean, reg.exact.predict(reg._scale_x(Xt))[0] * reg._y_scale + reg._y_loc)
        loss = DAGELBO(num_particles=8).loss(reg.model, reg.guide, reg._inputs, reg._data)
        assert abs(-loss - reg.elbo["shallow"]) < 1e-3 * abs(reg.elbo["shallow"]) + 1e-3


def test_a_higher_deep_elbo_keeps_the_deep_fit(monkeypatch):
    X, y, Xt = _data(n=30)
    monkeypatch.setattr(DeepRegression, "_estimate_elbo", lambda self: (1e9, 0.0))
    reg = DeepRegression(method="svi", num_steps=5, seed=0).fit(X, y)
    assert reg.choice == "deep"
    pyro.set_rng_seed(7)
    mean, var = reg.predict(Xt, num_samples=16)
    pyro.set_rng_seed(7)   # the same draws: the deep predictive (k_int is switched on, so h's draws matter)
    pred = reg.model.predict(reg.guide, {"x": reg._scale_x(Xt)}, nodes=["y"], num_samples=16)["y"]
    assert mean.shape == var.shape == (50,) and bool((var > 0).all()) and torch.isfinite(mean).all()
    assert torch.allclose(mean, reg._y_loc + reg._y_scale * pred.mean[:, 0].double(), atol=1e-8 * float(y.std()))


def test_lamp_method_chooses_by_validation():
    X, y, Xt = _data(n=40)
    reg = DeepRegression(method="lamp", seed=0, lamp_options={"num_epochs": 50}).fit(X, y)
    assert reg.width == 2 and set(reg.validation) == {"shallow", "deep"}
    assert reg.choice == ("deep" if reg.validation["deep"] < reg.validation["shallow"] else "shallow")
    mean, var = reg.predict(Xt)
    assert mean.shape == (50,) and bool((var >= 0).all())
    if reg.choice == "shallow":
        assert torch.allclose(mean, reg.exact.predict(reg._scale_x(Xt))[0] * reg._y_scale + reg._y_loc)


def test_bad_input_is_refused():
    X, y, _ = _data(n=20)
    with pytest.raises(ValueError, match="method"):
        DeepRegression(method="mcmc")
    with pytest.raises(ValueError, match="num_steps must be an int >= 0"):
        DeepRegression(method="svi", num_steps=-1)
    with pytest.raises(ValueError, match="same n"):
        DeepRegression(method="svi", num_steps=0).fit(X, y[:-1])
    y2 = y.clone()
    y2[3] = float("nan")
    with pytest.raises(ValueError, match="row 3"):
        DeepRegression(method="svi", num_steps=0).fit(X, y2)
    with pytest.raises(RuntimeError, match="fit"):
        DeepRegression().predict(X)
    # options of another method, and a seed that is not an int, are refused (they were ignored, or failed in int())
    with pytest.raises(ValueError, match="num_steps applies to method='svi' only, not method='linear'"):
        DeepRegression(num_steps=100)
    with pytest.raises(ValueError, match="elbo_particles applies to method='svi' only, not method='lamp'"):
        DeepRegression(method="lamp", elbo_particles=8)
    with pytest.raises(ValueError, match="lamp_options applies to method='lamp' only, not method='svi'"):
        DeepRegression(method="svi", lamp_options={"num_epochs": 5})
    with pytest.raises(ValueError, match="seed must be an int, got 'a'"):
        DeepRegression(seed="a")


class _LosingLinearLayer:
    """A stand-in for LinearHiddenGP that loses to the exact GP at once: the tests below check what predict and an
    interrupted fit do, not the linear layer's (slow) fit."""
    bic_gain, log_marginal_likelihood = -1.0, 0.0

    def __init__(self, width):
        self.width = width

    def fit(self, X, y, exact):
        return self


def test_predict_refuses_other_columns_and_non_finite_inputs(monkeypatch):
    """X with another number of columns than fit's (which broadcast against the scaling without a word) or with NaN
    (which came back as NaN means) is refused by name."""
    from pyro_dag.infer import deep_regression

    monkeypatch.setattr(deep_regression, "LinearHiddenGP", _LosingLinearLayer)
    X, y, _ = _data(n=20)
    reg = DeepRegression(restarts=1).fit(X, y)
    assert reg.choice == "shallow"
    with pytest.raises(ValueError, match=f"X must be \\[m, {X.shape[1]}\\].*got shape \\(3, 1\\)"):
        reg.predict(X[:3, :1])
    bad = X[:3].clone()
    bad[1, 0] = float("nan")
    with pytest.raises(ValueError, match="1 rows of X hold NaN or inf \\(first at row 1\\)"):
        reg.predict(bad)


def test_an_interrupted_refit_leaves_it_unfitted(monkeypatch):
    """A second fit stopped inside (a KeyboardInterrupt) must not predict with the first fit's choice on the second
    fit's scaling: predict refuses until a fit ends."""
    from pyro_dag.errors import NotFittedError
    from pyro_dag.infer import deep_regression

    monkeypatch.setattr(deep_regression, "LinearHiddenGP", _LosingLinearLayer)
    X, y, _ = _data(n=20)
    reg = DeepRegression(restarts=1).fit(X, y)

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_LosingLinearLayer, "fit", interrupted)
    with pytest.raises(KeyboardInterrupt):
        reg.fit(X * 100, y)
    with pytest.raises(NotFittedError, match="the last fit did not finish"):
        reg.predict(X[:3])
