"""Prediction through a factor of ``I - S`` computed once (pyro_dag.infer.factored_prediction) against the reference
path (a triangular solve per sample and case): the same moments given the same draws, the dropped eigenvalues
within their bound, and the reference path where the factored form is not trusted."""
import math

import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.infer import train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.autoguide.gaussians import MeanFieldPosterior
from pyro_dag.infer.factored_prediction import NodeFactor, node_factors


def _fitted_chain(n=300, seed=0):
    """``x -> h -> y`` with ``h`` measured: both nodes fitted exactly (every row an inducing input), independent
    blocks at prediction."""
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, dtype=torch.float64, generator=g) * 4 - 2
    h = torch.sin(2 * x) + 0.2 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    y = torch.cos(2 * h) + 0.1 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    model = DAGDGP(nx.DiGraph([("x", "h"), ("h", "y")]), seed=seed).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, {"x": x}, {"h": h, "y": y}, num_steps=10, progress=False)
    return model, guide


@pytest.fixture(scope="module")
def chain():
    return _fitted_chain()


def _predict(model, guide, xt, tolerance, seed=1, num_samples=64, **kw):
    old = model.predict_factored_tolerance
    model.predict_factored_tolerance = tolerance
    try:
        pyro.set_rng_seed(seed)
        return model.predict(guide, {"x": xt}, num_samples=num_samples, **kw)
    finally:
        model.predict_factored_tolerance = old


def test_the_factored_path_gives_the_reference_moments_given_the_same_draws(chain):
    model, guide = chain
    assert model.exact_fit_nodes == {"h", "y"}
    xt = torch.linspace(-2.5, 2.5, 41, dtype=torch.float64)[:, None]   # also a little outside the data
    ref = _predict(model, guide, xt, None)
    fast = _predict(model, guide, xt, 1e-3)
    for w in ("h", "y"):
        noise = float(model.likelihoods[w].variance.detach())
        # the same standard-normal draws: h's mean to rounding, its variance within the bound (1e-3 of the noise);
        # y is then predicted at draws of h that differ by that much, and its moments follow
        assert torch.allclose(fast[w].loc, ref[w].loc, rtol=0, atol=1e-10 if w == "h" else 1e-6)
        assert float((fast[w].var - ref[w].var).abs().max()) <= 1e-3 * noise
        assert torch.allclose(fast[w].samples, ref[w].samples, rtol=0, atol=1e-6)
    # the factors drop eigenvalues (the work is O(M r), r < M) and say how much they dropped
    post = guide.family.prediction_posterior()
    assert isinstance(post, MeanFieldPosterior)
    factors = node_factors(model, post, model.cholesky_cache(), 1e-3)
    assert set(factors) == {"h", "y"}
    for w, f in factors.items():
        assert f.rank < model.num_inducing[w]
        assert f.dropped * float(model.kernels[w](f.Z, diag=True).detach().max()) <= f.tolerance


def test_the_dropped_part_is_within_its_bound_row_by_row(chain):
    """A coarse tolerance drops many eigenvalues: every variance moves by at most ``λ_drop k(x, x)`` (the bound),
    and the bound is at most the tolerance."""
    model, guide = chain
    post = guide.family.prediction_posterior()
    cache = model.cholesky_cache()
    Z, R = cache["y"]
    L = post.scale_trils["y"]
    noise = float(model.likelihoods["y"].variance.detach())
    X = torch.linspace(-3, 3, 500, dtype=torch.float64)[:, None]
    for tol in (1e-1 * noise, 1e-3 * noise, 1e-6 * noise):
        f = NodeFactor(model.kernels["y"], Z, R, post.locs["y"], L @ L.T, tol)
        loc, var = f.moments(X)
        ref_loc, ref_var = f.reference(X)
        kdiag = model.kernels["y"](X, diag=True).detach()
        assert f.dropped * float(kdiag.max()) <= tol + 1e-15
        assert bool(((var - ref_var).abs() <= f.dropped * kdiag + 1e-9 * noise).all())
        assert torch.allclose(loc, ref_loc, rtol=0, atol=1e-8)


def test_rows_outside_the_bound_take_the_reference_path(chain):
    """Where ``λ_drop k(x, x)`` exceeds the tolerance (here: the tolerance lowered after the factor was built, as
    for a kernel whose prior variance at x exceeds its value at the inducing inputs), the rows take the reference
    moments."""
    model, guide = chain
    post = guide.family.prediction_posterior()
    Z, R = model.cholesky_cache()["y"]
    L = post.scale_trils["y"]
    noise = float(model.likelihoods["y"].variance.detach())
    f = NodeFactor(model.kernels["y"], Z, R, post.locs["y"], L @ L.T, 0.1 * noise)
    assert f.dropped > 0
    f.tolerance = 0.5 * f.dropped * float(model.kernels["y"](Z, diag=True).detach().max())   # the bound now fails everywhere
    X = torch.linspace(-2, 2, 50, dtype=torch.float64)[:, None]
    loc, var = f.moments(X)
    ref_loc, ref_var = f.reference(X)
    assert torch.equal(loc, ref_loc) and torch.equal(var, ref_var)


def test_a_factor_that_fails_its_check_hands_back_to_the_reference_path(chain):
    model, guide = chain
    post = guide.family.prediction_posterior()
    Z, R = model.cholesky_cache()["y"]
    L = post.scale_trils["y"]
    f = NodeFactor(model.kernels["y"], Z, R, post.locs["y"], L @ L.T, 1e-6)
    f.c = f.c + 1.0   # a corrupted factor: its first rows disagree with the reference
    X = torch.linspace(-2, 2, 50, dtype=torch.float64)[:, None]
    assert f.moments(X) is None and f.moments(X) is None


def test_the_factored_prediction_does_not_depend_on_the_batch_size(chain):
    model, guide = chain
    xt = torch.linspace(-2, 2, 23, dtype=torch.float64)[:, None]
    one = _predict(model, guide, xt, 1e-3, num_samples=16)
    chunked = _predict(model, guide, xt, 1e-3, num_samples=16, batch_size=4)
    for w in ("h", "y"):
        assert torch.allclose(one[w].samples, chunked[w].samples, rtol=0, atol=1e-9)


def test_float32_and_coupled_posteriors_keep_the_reference_path(chain):
    model, guide = chain
    post = guide.family.prediction_posterior()
    assert node_factors(model, post, model.cholesky_cache(), None) == {}
    assert node_factors(model, guide.family.posterior(), model.cholesky_cache(), 1e-3) == {}
    assert math.isfinite(float(model.likelihoods["y"].variance.detach()))
