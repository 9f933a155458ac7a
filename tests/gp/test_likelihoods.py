"""Likelihood.predictive_moments against Monte Carlo: the Bernoulli node's predictive mean is the probability of
y = 1 (E[sigmoid(f)]), the Student-t node's is its location when ν > 1 (infinite variance for ν ≤ 2, no mean for
ν ≤ 1); DAGDGP.predict reports them as y_mean / y_variance."""
import math

import networkx as nx
import pyro
import pytest
import torch

from pyro_dag import DAGDGP
from pyro_dag.gp import Bernoulli, StudentT
from pyro_dag.infer.autoguide import AutoStructuredGuide

LOC = torch.tensor([[-2.0, 0.3], [1.5, 0.0]], dtype=torch.float64)
VAR = torch.tensor([[0.5, 4.0], [0.01, 9.0]], dtype=torch.float64)


def _monte_carlo(lik, num=400_000, seed=0):
    g = torch.Generator().manual_seed(seed)
    f = LOC + VAR.sqrt() * torch.randn((num,) + LOC.shape, generator=g, dtype=torch.float64)
    torch.manual_seed(seed + 1)
    y = lik.dist(f).sample()
    return y.mean(0), y.var(0), y.std(0) / math.sqrt(num)


def test_bernoulli_predictive_mean_is_the_probability():
    lik = Bernoulli().double()
    mean, var = lik.predictive_moments(LOC, VAR)
    mc_mean, mc_var, se = _monte_carlo(lik)
    assert ((mean - mc_mean).abs() < 4 * se).all(), (mean, mc_mean)
    torch.testing.assert_close(var, mean * (1 - mean))
    assert ((var - mc_var).abs() < 1e-2).all()


@pytest.mark.parametrize("df", [6.0, 1.5])
def test_student_t_predictive_mean_is_the_location(df):
    lik = StudentT(df=df, scale=0.7).double()
    mean, var = lik.predictive_moments(LOC, VAR)
    torch.testing.assert_close(mean, LOC)
    if df > 2:
        torch.testing.assert_close(var, VAR + 0.49 * df / (df - 2))
        mc_mean, mc_var, se = _monte_carlo(lik)
        assert ((mean - mc_mean).abs() < 4 * se).all()
        assert ((var - mc_var).abs() / var < 0.05).all()  # a heavy-tailed sample variance: a loose check
    else:
        assert torch.isinf(var).all()


def test_student_t_without_a_mean_gives_none():
    assert StudentT(df=1.0).double().predictive_moments(LOC, VAR) is None


@pytest.mark.parametrize("likelihood", ["bernoulli", "studentt"])
def test_predict_reports_y_mean(likelihood):
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(0)
    X = torch.rand(20, 1, generator=g, dtype=torch.float64)
    Y = (X > 0.5).double() if likelihood == "bernoulli" else torch.sin(4 * X)
    model = DAGDGP(nx.DiGraph([("x", "y")]), likelihoods={"y": likelihood}, num_inducing=5).double()
    guide = AutoStructuredGuide(model)
    guide({"x": X}, {"y": Y})
    pyro.set_rng_seed(0)
    pred = model.predict(guide, {"x": X}, num_samples=2000)["y"]
    assert pred.y_mean is not None and pred.y_mean.shape == (20, 1)
    if likelihood == "bernoulli":   # the mixture of the draws' probabilities, by Monte Carlo over f
        mc = torch.sigmoid(pred.loc + pred.var.sqrt() * torch.randn((50,) + pred.loc.shape, dtype=torch.float64))
        assert ((pred.y_mean - mc.mean((0, 1))).abs() < 0.01).all()
        torch.testing.assert_close(pred.y_variance, pred.y_mean * (1 - pred.y_mean))
    else:
        torch.testing.assert_close(pred.y_mean, pred.mean)
