"""FitConfig / StructureConfig: validation names the field, per-likelihood defaults, and fit / exact_posterior take
a config with the same results as the keywords."""
import dataclasses

import numpy as np
import pytest
import torch

from pyro_dag.structure import FitConfig, StructureConfig, exact_posterior, fit
from pyro_dag.structure.config import LIKELIHOOD_DEFAULTS


def _data(n=120, seed=0):
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, 3, generator=g)
    X[:, 1] += 0.9 * X[:, 0]
    X[:, 2] -= 0.7 * X[:, 1]
    return X


@pytest.mark.parametrize("field, value", [
    ("likelihood", "gaussian-process"), ("expected_parents", 0.0), ("prior_concentration", -1.0), ("likelihood_scale", 0.0),
    ("num_steps", 0), ("num_particles", 2.5), ("seed", -1), ("lr", 0.0), ("particle_lr", float("nan")),
    ("batch_size", 0), ("order_temperature", (1.0, -0.1)), ("sinkhorn_iters", 0), ("edge_relaxation", "gumbel"),
    ("offset_gradient_cap", 0.5), ("flow_hidden", (64, 0)), ("flow_blocks", -1), ("weighting", "best"),
    ("swap_every", -1), ("swap_moves", "random"), ("warmup", 1.5), ("soft_warmup", -0.1), ("order_score", "bic"),
    ("max_parents", -1), ("candidate_parents", 0), ("order_history", 2.0), ("repulsion_cap", 0.0),
])
def test_validate_names_the_bad_field(field, value):
    with pytest.raises(ValueError, match=field):
        FitConfig(**{field: value})


def test_cross_field_checks_and_unknown_settings():
    with pytest.raises(ValueError, match="collapsed likelihood"):
        FitConfig(likelihood="mlp", order_score="exact")
    with pytest.raises(ValueError, match="needs order_score='exact'"):
        FitConfig(order_score="elbo", weighting="order")
    with pytest.raises(ValueError, match="order_history"):
        FitConfig(weighting="uniform", order_history=0.5)
    # p > 14: the exact order score is no longer the default, so an explicit weighting="order" cannot be met
    with pytest.raises(ValueError, match="needs order_score='exact'"):
        FitConfig(weighting="order").resolve(15)
    with pytest.raises(TypeError, match="num_step.*did you mean 'num_steps'"):
        FitConfig().replace(num_step=3)
    with pytest.raises(TypeError, match="unexpected keyword"):
        fit(_data(), num_step=3, progress=False)
    with pytest.raises(TypeError, match="FitConfig"):
        fit(_data(), config={"num_steps": 3}, progress=False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        FitConfig().num_steps = 3


@pytest.mark.parametrize("likelihood", ["linear", "bge", "linear-sites", "mlp"])
def test_defaults_per_likelihood_and_size(likelihood):
    c = FitConfig.for_likelihood(likelihood)
    for k, v in LIKELIHOOD_DEFAULTS[likelihood].items():
        assert getattr(c, k) == v
    collapsed = likelihood in ("linear", "bge")
    small, large = c.resolve(8, 1000), c.resolve(15, 1000)
    assert small.order_score == ("exact" if collapsed else "elbo") and large.order_score == "elbo"
    assert small.weighting == ("order" if collapsed else "uniform")
    assert large.weighting == ("elbo" if collapsed else "uniform")
    assert small.order_history == (0.5 if collapsed else 0.0) and large.order_history == 0.0
    assert small.max_parents is None and large.max_parents == 4
    assert FitConfig.for_likelihood(likelihood, candidate_parents=6).resolve(15).max_parents is None
    assert small.batch_size == 128 and c.resolve(8, 128).batch_size is None  # a batch of all rows is no batch
    assert small.order_temperature == (1.0, 0.1) and FitConfig(order_temperature=0.2).resolve(3).order_temperature == (0.2, 0.2)
    # explicit values win over the defaults
    assert FitConfig.for_likelihood(likelihood, num_particles=7).resolve(5).num_particles == 7


def test_fit_with_a_config_equals_fit_with_keywords():
    X = _data()
    kw = dict(likelihood="bge", num_steps=6, num_particles=4, seed=2, expected_parents=1.0)
    a = fit(X, progress=False, **kw)
    config = FitConfig.for_likelihood("bge", num_steps=6, num_particles=4, seed=2, expected_parents=1.0)
    b = fit(X, config=config, progress=False)
    c = fit(X, config=FitConfig(num_steps=6, num_particles=4, seed=5, expected_parents=1.0), likelihood="bge",
            seed=2, progress=False)  # keywords override the config's fields
    for post in (b, c):
        assert post.losses == a.losses
        assert torch.equal(post.particles, a.particles)
        assert torch.equal(post.edge_probs(50, seed=0), a.edge_probs(50, seed=0))
        assert post.settings == a.settings
    assert a.config.likelihood == "bge" and a.config.order_score == "exact" and a.config.num_particles == 4
    assert a.config == b.config


def test_exact_posterior_shares_the_model_config():
    X = _data(200, seed=1)
    config = FitConfig(likelihood="bge", expected_parents=1.0, likelihood_scale=0.5, num_steps=3)
    a = exact_posterior(X, config=config)
    b = exact_posterior(X, likelihood="bge", expected_parents=1.0, likelihood_scale=0.5)
    c = exact_posterior(X, config=StructureConfig(likelihood="bge", expected_parents=1.0, likelihood_scale=0.5))
    for post in (b, c):
        np.testing.assert_array_equal(post.edge_probs().numpy(), a.edge_probs().numpy())
        assert post.log_evidence == a.log_evidence
    assert type(a.config) is StructureConfig and a.config == c.config
    assert a.log_evidence != exact_posterior(X, likelihood="bge").log_evidence  # the settings did reach the model
    with pytest.raises(TypeError, match="unexpected keyword"):
        exact_posterior(X, num_steps=3)
    with pytest.raises(ValueError, match="likelihood_scale"):
        exact_posterior(X, likelihood_scale=-1.0)
