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


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(values=[float("inf")]), ValueError, "values holds inf"),
    (dict(values=[float("nan")]), ValueError, "values holds nan"),
    (dict(values=[]), ValueError, "values is empty"),
    (dict(values=["abc"]), TypeError, "values must be numbers"),
    (dict(intervene=True), TypeError, "intervene must be a node name or an integer index"),
    (dict(intervene=1.7), TypeError, "intervene must be a node name or an integer index"),
    (dict(target=-1), ValueError, "target -1 is not a node index"),
    (dict(num_dags=0), ValueError, "num_dags must be a positive integer"),
    (dict(draws_per_dag=0), ValueError, "draws_per_dag must be a positive integer"),
    (dict(num_dags=1, draws_per_dag=1), ValueError, "at least 2: raise draws_per_dag"),
])
def test_bad_inputs_are_refused_before_any_draw(chain, kwargs, error, match, monkeypatch):
    """Issue 42: inf gave a finite effect, NaN / empty / strings, True or 1.7 as an index, num_dags=0 (blamed on
    num_samples) and draws_per_dag=0 (NaN) were not refused by name."""
    monkeypatch.setattr(chain, "sample", lambda *a, **k: pytest.fail("drew DAGs before checking the inputs"))
    call = dict(posterior=chain, target=2, intervene=0, values=[0.5], num_dags=4, draws_per_dag=4)
    call.update(kwargs)
    with pytest.raises(error, match=match):
        gp_interventional_effect(**call)


def test_values_far_outside_the_data_are_named(chain):
    with pytest.warns(UserWarning, match="far outside the data of 'a'.*rescale"):
        gp_interventional_effect(chain, "c", "a", [1e6], num_dags=2, draws_per_dag=4)


def test_a_misspelt_gp_kernel_is_refused(chain):
    """Issue 42: gp_kernel="RBF" ran the Matérn-5/2 branch without a word."""
    from pyro_dag.structure.gp_scores import GPFamilyScorer

    X = np.asarray(chain.data)
    with pytest.raises(ValueError, match=r"gp_kernel must be one of \['rbf', 'matern52'\].*'RBF'"):
        exact_posterior(X, "gp", gp_kernel="RBF")
    with pytest.raises(ValueError, match="gp_restarts must be a positive integer"):
        exact_posterior(X, "gp", gp_restarts=0)
    with pytest.raises(ValueError, match="kernel must be one of"):
        GPFamilyScorer(X, kernel="Matern")
