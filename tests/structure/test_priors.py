"""Tests of the edge priors: LogisticBeta, edge_belief_prior, sparsity_prior (SVI-DAG, Zinage 2026, arXiv:2608.04930, §3.2.1)."""
import math

import numpy as np
import pytest
import torch
from torch.distributions import Beta

from pyro_dag.structure import (
    LogisticBeta,
    edge_belief_prior,
    edge_prior_parameters,
    sparsity_prior,
)


def test_logistic_beta_log_prob_matches_change_of_variables():
    torch.manual_seed(0)
    alpha = torch.tensor([0.7, 1.5, 4.0, 120.84], dtype=torch.float64)
    beta = torch.tensor([2.0, 1.5, 18.0, 2.21], dtype=torch.float64)
    x = torch.linspace(-6, 6, 25, dtype=torch.float64).unsqueeze(-1)
    d = LogisticBeta(alpha, beta)
    s = torch.sigmoid(x)
    ref = Beta(alpha, beta).log_prob(s) + torch.log(s * (1 - s))
    assert torch.allclose(d.log_prob(x), ref, atol=1e-10)


def test_logistic_beta_normalised_and_moments():
    alpha = torch.tensor(4.0, dtype=torch.float64)
    beta = torch.tensor(18.0, dtype=torch.float64)
    d = LogisticBeta(alpha, beta)
    x = torch.linspace(-30, 20, 200001, dtype=torch.float64)
    dens = d.log_prob(x).exp()
    dx = x[1] - x[0]
    assert abs(float(dens.sum() * dx) - 1) < 1e-6
    assert abs(float((x * dens).sum() * dx) - float(d.mean)) < 1e-6
    assert abs(float(((x - d.mean) ** 2 * dens).sum() * dx) - float(d.variance)) < 1e-5
    assert abs(float(x[dens.argmax()]) - float(d.mode)) < 1e-3  # mode log(alpha / beta)


def test_logistic_beta_rsample_moments_and_pathwise_gradient():
    torch.manual_seed(1)
    alpha = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    beta = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)
    n = 200_000
    x = LogisticBeta(alpha, beta).rsample((n,))
    m = x.mean()
    se = x.std() / math.sqrt(n)
    ref = torch.digamma(alpha) - torch.digamma(beta)
    assert abs(float(m - ref)) < 5 * float(se)
    # E[d x / d alpha] = d E[x] / d alpha = trigamma(alpha), E[d x / d beta] = -trigamma(beta)
    ga, gb = torch.autograd.grad(m, (alpha, beta))
    assert abs(float(ga) - float(torch.polygamma(1, alpha))) < 0.02
    assert abs(float(gb) + float(torch.polygamma(1, beta))) < 0.02


def test_edge_belief_prior_values_from_the_paper():
    p = torch.tensor([[0.0, 0.99], [0.5, 0.0]])
    alpha, beta = edge_belief_prior(p)
    # SVI-DAG §3.2.1: p = 0.99 -> nu = 121.05, alpha = 120.84, beta = 2.21; p = 0.5 -> alpha = beta = 1.5
    assert abs(alpha[0, 1].item() - 120.8395) < 1e-3 and abs(beta[0, 1].item() - 2.2105) < 1e-3
    assert alpha[1, 0].item() == pytest.approx(1.5) and beta[1, 0].item() == pytest.approx(1.5)
    # Figure 1 legend: p -> nu
    for b, nu in [(0.05, 102.25), (0.1, 81.0), (0.3, 21.0), (0.7, 21.0), (0.9, 81.0)]:
        a_, b_ = edge_belief_prior(torch.tensor([[0.5, b], [0.5, 0.5]]))
        assert (a_[0, 1] + b_[0, 1] - 2).item() == pytest.approx(nu, rel=1e-5)
        assert ((a_[0, 1] - 1) / (a_[0, 1] + b_[0, 1] - 2)).item() == pytest.approx(b, rel=1e-5)  # Beta mode = p


def test_edge_belief_prior_and_sparsity_prior_errors_and_values():
    with pytest.raises(ValueError, match="strictly inside"):
        edge_belief_prior(torch.tensor([[0.0, 1.0], [0.5, 0.0]]))
    with pytest.raises(ValueError, match="square"):
        edge_belief_prior(torch.full((2, 3), 0.5))
    a, b = sparsity_prior(11, 0.15, 20.0)
    assert a[0, 1].item() == pytest.approx(4.0) and b[0, 1].item() == pytest.approx(18.0)  # Sachs profile
    with pytest.raises(ValueError, match="edge_prob"):
        sparsity_prior(3, 1.5)


@pytest.mark.parametrize("belief", [1.0, 0.0, float("nan")])
def test_edge_beliefs_outside_the_open_interval_name_the_argument_and_the_fix(belief):
    """A belief of 1.0 said 'off-diagonal beliefs must lie strictly inside (0, 1)' without naming edge_beliefs."""
    from pyro_dag.structure import exact_posterior

    B = np.full((3, 3), 0.5)
    B[0, 1] = belief
    with pytest.raises(ValueError, match=r"edge_beliefs\[0, 1\] = .*strictly inside \(0, 1\).*np.clip\(edge_beliefs"):
        edge_prior_parameters(3, B)
    with pytest.raises(ValueError, match=r"edge_beliefs\[0, 1\]"):
        exact_posterior(np.random.default_rng(0).normal(size=(20, 3)), edge_beliefs=B)
