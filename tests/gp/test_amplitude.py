"""The leave-one-out amplitude of deterministic nodes (pyro_dag.gp.amplitude, fit_collapsed's calibration): the
factor against brute-force leave-one-out, and its effect on a fitted DAGDGP (same mean, variances times c)."""
import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.gp.amplitude import (AMPLITUDE_FACTOR_FLOOR, AMPLITUDE_MIN_CASES, bounded_amplitude_factor,
                                   loo_amplitude_factor, scale_amplitude)
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide


def _features(n=25, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, dtype=torch.float64, generator=g)
    K = torch.exp(-0.5 * (x - x.T) ** 2 / 0.3 ** 2)
    a = torch.linalg.cholesky(K + 1e-10 * torch.eye(n, dtype=torch.float64))
    y = torch.sin(5 * x[:, 0]) + 0.3 * x[:, 0]
    return K, a, y


@pytest.mark.parametrize("latent", [False, True])
@pytest.mark.parametrize("with_residual", [False, True])
def test_the_factor_is_the_mean_squared_standardised_leave_one_out_residual(with_residual, latent):
    K, a, y = _features()
    noise = 1e-4
    r = torch.linspace(0, 0.01, len(y), dtype=torch.float64) if with_residual else None
    C = K + noise * torch.eye(len(y), dtype=torch.float64) + (torch.diag(r) if with_residual else 0)
    z2, amplification = [], 1.0
    for i in range(len(y)):
        keep = torch.arange(len(y)) != i
        Ck, k = C[keep][:, keep], C[i, keep]
        mu = k @ torch.linalg.solve(Ck, y[keep])
        var = C[i, i] - k @ torch.linalg.solve(Ck, k)
        # latent: the left-out case's f, whose variance is the observation's less the nugget
        z2.append((y[i] - mu) ** 2 / (var - noise if latent else var))
        if latent:   # subtracting the nugget magnifies both computations' rounding by var / (var - noise)
            amplification = max(amplification, float(var / (var - noise)))
    assert loo_amplitude_factor(a, y, noise, residual=r, latent=latent) == pytest.approx(
        float(torch.stack(z2).mean()), rel=1e-6 * amplification)


def test_the_factor_is_bounded_and_needs_enough_cases():
    K, a, y = _features(n=40)
    assert bounded_amplitude_factor(a, y * 1e-6, 1e-4) == AMPLITUDE_FACTOR_FLOOR   # residuals far below sd
    assert bounded_amplitude_factor(a[:AMPLITUDE_MIN_CASES - 1], y[:AMPLITUDE_MIN_CASES - 1], 1e-4) is None
    # the factor of a scaled problem scales: c(K, y·s) = s² c(K, y)
    c = loo_amplitude_factor(a, y, 1e-4)
    assert loo_amplitude_factor(a, 2 * y, 1e-4) == pytest.approx(4 * c, rel=1e-8)


def test_scale_amplitude_multiplies_the_kernel_variance():
    k = kernels.RBF(lengthscale=0.5, variance=2.0).double()
    x = torch.rand(5, 1, dtype=torch.float64)
    before = k(x, x).detach().clone()
    assert scale_amplitude(k, 0.25)
    assert torch.allclose(k(x, x).detach(), 0.25 * before)


def _simulator(n=60, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, dtype=torch.float64, generator=g)
    y = torch.sin(2 * x[:, :1]) + x[:, 1:] ** 2           # noise-free: the noise rule fixes a nugget
    return nx.DiGraph([("x", "y")]), {"x": x}, {"y": y}


def _fit(amplitude):
    pyro.clear_param_store()
    graph, inputs, data = _simulator()
    model = DAGDGP(graph, deterministic_amplitude=amplitude).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, inputs, data, num_steps=10, progress=False)
    xt = torch.rand(30, 2, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    pred = model.predict(guide, {"x": xt}, nodes=["y"], num_samples=4)["y"]
    return model, pred


def test_a_deterministic_node_keeps_its_mean_and_scales_its_variances():
    ml, p_ml = _fit("ml")
    loo, p_loo = _fit("loo")
    assert ml.noise_choices["y"].fixed and ml.amplitude_factors == {}
    c = loo.amplitude_factors["y"]
    assert c != pytest.approx(1.0)
    assert torch.allclose(p_loo.loc, p_ml.loc, rtol=1e-5, atol=1e-7 * float(p_ml.loc.abs().max()))
    assert torch.allclose(p_loo.var, c * p_ml.var, rtol=1e-4, atol=1e-12)
    assert float(loo.likelihoods["y"].variance) == pytest.approx(c * float(ml.likelihoods["y"].variance), rel=1e-9)


def test_a_node_with_children_calibrates_its_latent_function():
    """A parent propagates its latent f to its children, so its factor compares the left-out errors with f's
    variance (larger than a leaf's factor on the same data, whose variance holds the nugget too)."""
    x = torch.rand(60, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    y = torch.sin(3 * x)   # dense and smooth: between the cases f's variance is below the nugget
    pyro.clear_param_store()
    leaf = DAGDGP(nx.DiGraph([("x", "y")])).double()
    train(leaf, AutoStructuredGuide(leaf), {"x": x}, {"y": y}, num_steps=10, progress=False)
    pyro.clear_param_store()
    chain = DAGDGP(nx.DiGraph([("x", "y"), ("y", "z")])).double()
    train(chain, AutoStructuredGuide(chain), {"x": x}, {"y": y, "z": torch.cos(3 * y)}, num_steps=10, progress=False)
    assert chain.noise_choices["y"].fixed and leaf.noise_choices["y"].fixed
    assert chain.amplitude_factors["y"] > 3 * leaf.amplitude_factors["y"]   # measured: 0.070 against 0.010
    assert "z" in chain.amplitude_factors   # the leaf of the chain is calibrated as an observation


def test_a_learned_noise_is_not_calibrated():
    pyro.clear_param_store()
    graph, inputs, data = _simulator()
    data = {"y": data["y"] + 0.1 * torch.randn(60, 1, dtype=torch.float64, generator=torch.Generator().manual_seed(1))}
    model = DAGDGP(graph).double()
    train(model, AutoStructuredGuide(model), inputs, data, num_steps=10, progress=False)
    assert not model.noise_choices["y"].fixed and model.amplitude_factors == {}


def test_a_bad_amplitude_rule_is_refused():
    with pytest.raises(Exception, match="deterministic_amplitude"):
        DAGDGP(nx.DiGraph([("x", "y")]), deterministic_amplitude="cv")
