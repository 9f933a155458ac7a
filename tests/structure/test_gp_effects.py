"""Interventional predictions of a GP network averaged over the posterior's DAGs."""
import numpy as np
import pytest
import torch

from pyro_dag.structure import exact_posterior
from pyro_dag.structure.gp_effects import gp_interventional_effect


@pytest.fixture(scope="module")
def chain():
    """x0 -> x1 = sin(2 x0) + noise -> x2 = x1² + noise, n = 150."""
    rng = np.random.default_rng(0)
    n = 150
    x0 = rng.uniform(-2, 2, n)
    x1 = np.sin(2 * x0) + 0.1 * rng.normal(size=n)
    x2 = x1 ** 2 + 0.1 * rng.normal(size=n)
    return exact_posterior(np.c_[x0, x1, x2], "gp", node_names=["a", "b", "c"])


def test_intervening_upstream_moves_the_target_along_the_mechanism(chain):
    X = np.asarray(chain.data)
    x0, x1 = X[:, 0], X[:, 1]
    v = np.array([-1.0, 0.0, 1.0])
    mean, sd, anc = gp_interventional_effect(chain, "b", "a", v, num_dags=40, draws_per_dag=40)
    P = chain.edge_probs().numpy()
    assert P[0, 1] > 0.9 and anc > 0.9
    # against the GP regression of b on a alone (the family the posterior puts its mass on)
    from pyro_dag.baselines import ExactGP

    gp = ExactGP(restarts=2).fit(x0[:, None], x1)
    ref, _ = gp.predict(v[:, None])
    np.testing.assert_allclose(mean.numpy(), ref.numpy(), atol=0.1)
    assert bool((sd > 0).all())


def test_intervening_downstream_leaves_the_target_at_its_marginal(chain):
    X = np.asarray(chain.data)
    mean, sd, anc = gp_interventional_effect(chain, "a", "c", [-1.0, 2.0], num_dags=40, draws_per_dag=100)
    assert anc < 0.1
    np.testing.assert_allclose(mean.numpy(), X[:, 0].mean(), atol=0.15)     # unlike conditioning on c
    np.testing.assert_allclose(sd.numpy(), X[:, 0].std(), rtol=0.15)


def test_bad_requests_are_named(chain):
    with pytest.raises(ValueError, match="same node"):
        gp_interventional_effect(chain, "a", "a", [0.0])
    with pytest.raises(ValueError, match="'z' is not a node"):
        gp_interventional_effect(chain, "z", "a", [0.0])
    with pytest.raises(ValueError, match="GP network score"):
        gp_interventional_effect(exact_posterior(np.asarray(chain.data)), 0, 1, [0.0])
