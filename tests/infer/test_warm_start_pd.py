"""AutoStructuredGuide.warm_start on near-noiseless fits: the source's covariance has a condition number near or
beyond 1/eps of the dtype, where inverting it and factorising the inverse gives a precision that is not
numerically positive definite. The reference is the exact (conjugate) posterior of a single GP node's whitened
inducing outputs, computed densely."""
import warnings

import networkx as nx
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.utils import freeze


def _near_noiseless(noise, dtype, n, M):
    """A GP node ``y(x)`` with fixed noise variance ``noise``, a mean-field guide set to the exact posterior of its
    whitened inducing outputs ``V`` (``Σ = (I + AᵀA/τ²)⁻¹``, ``A`` the whitened interpolation matrix) and the
    model's arguments; returns ``(model, source guide, inputs, data, exact covariance [M, M] float64)``."""
    x = torch.linspace(-2, 2, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(2 * x)
    model = DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=M, likelihoods={"y": Gaussian(noise)}).to(dtype)
    freeze(model.likelihoods)
    inputs, data = {"x": x}, {"y": y}
    source = AutoStructuredGuide(model, precision="mean_field", name="source", init_scale=1.0)
    source(inputs, data)
    with torch.no_grad():
        a, _ = model.node_conditional("y", {"x": model._as_tensor(x)})
        A = a.double()
        cov = torch.linalg.inv(torch.eye(M, dtype=torch.float64) + A.mT @ A / noise)
        cov = (cov + cov.mT) / 2
        mean = cov @ (A.mT @ y.squeeze(-1)) / noise
        source.family.set_node("y", mean.to(dtype), torch.linalg.cholesky(cov).to(dtype))
    return model, source, inputs, data, cov


@pytest.mark.parametrize("structure", ["chordal", "full", "mean_field"])
@pytest.mark.parametrize("noise,dtype,n,M,tol", [
    (1e-12, torch.float64, 60, 30, 1e-9),   # condition number ~3e13: inverse-then-Cholesky was not PD
    (1e-16, torch.float64, 60, 30, 1e-9),   # ~4e17, beyond 1/eps
    (1e-6, torch.float32, 40, 12, 1e-4),    # ~2e7 in float32, beyond 1/eps
])
def test_warm_start_copies_a_near_noiseless_posterior(structure, noise, dtype, n, M, tol):
    model, source, inputs, data, exact = _near_noiseless(noise, dtype, n, M)
    eig = torch.linalg.eigvalsh(exact)
    assert eig.max() / eig.min() > 1e7  # the regime of the defect
    guide = AutoStructuredGuide(model, precision=structure)
    guide(inputs, data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an exact copy is possible: no jitter, no warning
        guide.warm_start(source)
    copied = guide.inducing_posterior().covariance_block("y").detach().double()
    given = source.inducing_posterior().covariance_block("y").detach().double()
    assert float((copied - given).norm() / given.norm()) < tol
    assert torch.equal(guide.median()["y.u"].reshape(-1), source.median()["y.u"].reshape(-1))
    # the precision factor is finite with a positive diagonal, and the guide samples finite values
    draws = guide.get_posterior().rsample((8,))
    assert bool(torch.isfinite(draws).all())


def test_warm_start_jitters_a_singular_covariance_with_a_warning():
    model, source, inputs, data, _ = _near_noiseless(1e-4, torch.float64, 20, 6)
    # a covariance factor whose product rounds to a singular matrix: [[1, 1], [1, 1 + 1e-24]] in one 2x2 block
    F = torch.eye(6, dtype=torch.float64)
    F[1, 0], F[1, 1] = 1.0, 1e-12
    source.family.set_node("y", torch.zeros(6, dtype=torch.float64), F)
    given = source.inducing_posterior().covariance_block("y").detach()
    assert int(torch.linalg.cholesky_ex(given)[1]) != 0  # numerically not positive definite
    guide = AutoStructuredGuide(model, precision="chordal")
    guide(inputs, data)
    with pytest.warns(UserWarning, match=r"node 'y' in the source guide is not numerically positive definite.*"
                                         r"added [0-9.e+-]+ × its mean variance"):
        guide.warm_start(source)
    copied = guide.inducing_posterior().covariance_block("y").detach()
    # the jitter is a few eps of the mean variance: the copy differs from the source by about that, no more
    assert float((copied - given).abs().max()) < 1e-12
    assert bool(torch.isfinite(guide.get_posterior().rsample((4,))).all())
