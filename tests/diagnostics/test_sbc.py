"""Simulation-based calibration: exact posteriors pass, deliberately wrong ones are rejected."""
import networkx as nx
import numpy as np
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.diagnostics import sbc_ranks, sbc_uniformity_test, simulation_based_calibration
from pyro_dag.gp.likelihoods import Gaussian

pytest.importorskip("scipy")


def test_ranks_and_histogram_by_hand():
    prior = np.array([[0.5], [2.0], [-3.0]])
    post = np.array([[[0.0], [1.0], [0.2]], [[0.0], [1.0], [3.0]], [[0.0], [1.0], [3.0]]])
    assert sbc_ranks(prior, post).ravel().tolist() == [2, 2, 0]
    out = sbc_uniformity_test(np.array([0, 1, 2, 3] * 5), num_draws=3, num_bins=2)
    assert out["counts"].tolist() == [[10, 10]] and out["chi2"][0] == 0.0
    with pytest.raises(ValueError, match="num_draws"):
        sbc_uniformity_test(np.array([0, 5]), num_draws=3)
    with pytest.raises(ValueError, match=r"\[R, L, P\]"):
        sbc_ranks(prior, post[:2])


def exact_posterior(model, scale=1.0, num_draws=19):
    """Closed-form Gaussian posterior of the whitened inducing outputs of x -> a (collapsed Gaussian leaf):
    y ~ N(A u, diag(r + τ²)), u ~ N(0, I); ``scale`` != 1 makes it deliberately wrong."""

    def posterior_fn(inputs, data):
        with torch.no_grad():
            A, r = model.node_conditional("a", inputs)
            d = r + model.likelihoods["a"].variance
            prec = torch.eye(A.shape[-1], dtype=A.dtype) + A.T @ (A / d[:, None])
            cov = torch.linalg.inv(prec)
            mean = cov @ (A.T @ (data["a"].squeeze(-1) / d))
            L = torch.linalg.cholesky(cov)
            eps = torch.randn(num_draws, A.shape[-1], dtype=A.dtype)
            u = mean + scale * eps @ L.T
        return {"a.u": u.unsqueeze(-2)}

    return posterior_fn


@pytest.mark.parametrize("scale,calibrated", [(1.0, True), (0.5, False), (2.0, False)])
def test_sbc_accepts_the_exact_posterior_and_rejects_wrong_ones(scale, calibrated):
    x = torch.linspace(-1, 1, 6, dtype=torch.float64).unsqueeze(-1)
    model = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=3, sample_f=True,
                   likelihoods={"a": Gaussian(0.1)}).double()
    model.setup({"x": x}, {"a": torch.zeros(6, 1, dtype=torch.float64)})
    out = simulation_based_calibration(model, {"x": x}, exact_posterior(model, scale), num_replications=120)
    assert out["ranks"]["a.u"].shape == (120, 3) and out["num_draws"] == 19
    test = sbc_uniformity_test(out["ranks"]["a.u"], out["num_draws"])
    if calibrated:
        assert test["pvalue"].min() > 1e-3
    else:
        assert test["pvalue"].min() < 1e-4
