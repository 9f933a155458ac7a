"""Chain stacking (Yao, Vehtari & Gelman 2022): weights against brute force and ArviZ's stacking, per-chain LOO
against az.loo, a chain in a wrong mode weighted out, a bimodal data set split evenly, resampled draws."""
import numpy as np
import pytest
import xarray as xr
from scipy.stats import norm

from pyro_dag.diagnostics import chain_stacking, stacked_posterior, stacking_weights
from pyro_dag.diagnostics.inference_data import arviz_from_dict

az = pytest.importorskip("arviz")


def score(lpd, w):
    return np.log(np.exp(lpd) @ w).sum()


def test_weights_match_brute_force_on_two_distributions():
    rng = np.random.default_rng(0)
    lpd = rng.normal(size=(40, 2)) - np.array([0.0, 0.3])
    grid = np.linspace(0, 1, 20001)
    best = grid[np.argmax([score(lpd, np.array([g, 1 - g])) for g in grid])]
    w = stacking_weights(lpd)
    assert w.shape == (2,) and np.isclose(w.sum(), 1.0) and (w >= 0).all()
    assert abs(w[0] - best) < 2e-4


def test_weights_match_arviz_stacking_and_beat_random_points_of_the_simplex():
    rng = np.random.default_rng(1)
    lpd = rng.normal(size=(60, 3)) + np.array([0.0, -0.2, 0.1])
    w = stacking_weights(lpd)
    # az.compare(method="stacking") solves the same problem; its weights (sorted by elpd) as a reference
    elpd = {f"m{k}": az.ELPDData(data=[lpd[:, k].sum(), 0.0, 0.0, 60, 60, False, 0.0, "log"],
                                 index=["elpd_loo", "se", "p_loo", "n_samples", "n_data_points", "warning",
                                        "loo_i", "scale"]) for k in range(3)}
    for k in range(3):
        elpd[f"m{k}"]["loo_i"] = xr.DataArray(lpd[:, k], dims="obs")
        elpd[f"m{k}"]["pareto_k"] = xr.DataArray(np.zeros(60), dims="obs")
    ref = az.compare(elpd, ic="loo", method="stacking")["weight"]
    np.testing.assert_allclose(w, [ref[f"m{k}"] for k in range(3)], atol=1e-4)
    for v in rng.dirichlet(np.ones(3), size=2000):
        assert score(lpd, v) <= score(lpd, w) + 1e-9


def test_weights_do_not_underflow_and_ignore_a_shift_per_point():
    rng = np.random.default_rng(2)
    lpd = rng.normal(size=(30, 3))
    shifted = lpd - rng.uniform(800, 1200, size=(30, 1))  # exp() of these is 0 in float64
    np.testing.assert_allclose(stacking_weights(shifted), stacking_weights(lpd), atol=1e-6)


def normal_chains(means, data, draws=400, sd=0.05, seed=0):
    """InferenceData of chains of a one-parameter model y ~ N(mu, 1), chain k's draws of mu around means[k]."""
    rng = np.random.default_rng(seed)
    mu = np.stack([m + sd * rng.normal(size=draws) for m in means])  # [C, S]
    loglik = norm.logpdf(data[None, None, :], loc=mu[..., None], scale=1.0)  # [C, S, N]
    groups = {"posterior": {"mu": mu, "chain_id": np.repeat(np.arange(len(means))[:, None], draws, 1)},
              "log_likelihood": {"y": loglik}, "observed_data": {"y": data}}
    return arviz_from_dict(groups, coords={"case": np.arange(len(data))}, dims={"y": ["case"]}), mu


def test_a_chain_in_a_wrong_mode_gets_no_weight_and_pointwise_loo_is_arviz_loo():
    data = np.random.default_rng(3).normal(size=50)
    idata, _ = normal_chains([0.0, 0.02, 6.0], data)
    res = chain_stacking(idata)
    assert res.variables == ["y"]
    assert res.weights[2] < 1e-3 and np.isclose(res.weights.sum(), 1.0)
    for c in range(3):
        ref = az.loo(idata.sel(chain=[c]), pointwise=True, var_name="y")
        np.testing.assert_allclose(res.pointwise_elpd[:, c], ref.loo_i.values, rtol=1e-12)
        assert np.isclose(res.elpd_loo[c], ref.elpd_loo)
    assert res.elpd_stacked >= res.elpd_loo.max() - 1e-9  # a vertex of the simplex is feasible
    assert (res.max_pareto_k < 0.7).all()


def test_two_modes_that_each_explain_half_the_data_share_the_weight():
    rng = np.random.default_rng(4)
    data = np.concatenate([-2 + 0.3 * rng.normal(size=30), 2 + 0.3 * rng.normal(size=30)])
    data = np.concatenate([data, -data])  # exactly symmetric: weight 1/2 each
    idata, _ = normal_chains([-2.0, 2.0], data)
    np.testing.assert_allclose(chain_stacking(idata).weights, [0.5, 0.5], atol=0.02)


def test_stacked_posterior_resamples_chains_by_weight_and_keeps_groups_paired():
    data = np.random.default_rng(5).normal(size=20)
    idata, mu = normal_chains([0.0, 1.0, 2.0], data, draws=300)
    out = stacked_posterior(idata, [0.6, 0.4, 0.0], num_draws=6000, seed=0)
    assert out.posterior["mu"].shape == (1, 6000)
    ids = out.posterior["chain_id"].values.reshape(-1)
    assert (ids != 2).all()
    assert abs((ids == 0).mean() - 0.6) < 0.03  # binomial sd 0.006
    # the log-likelihood of each resampled draw is that of its own mu
    ll = norm.logpdf(data[None, :], loc=out.posterior["mu"].values.reshape(-1, 1), scale=1.0)
    np.testing.assert_allclose(out.log_likelihood["y"].values[0], ll, rtol=1e-12)
    np.testing.assert_allclose(out.observed_data["y"].values, data)
    assert np.isfinite(az.loo(out, var_name="y").elpd_loo)


def test_bad_input_is_named():
    data = np.zeros(5)
    idata, _ = normal_chains([0.0], data, draws=50)
    with pytest.raises(ValueError, match="one chain"):
        chain_stacking(idata)
    idata, _ = normal_chains([0.0, 0.1], data, draws=50)
    with pytest.raises(ValueError, match="no variable"):
        chain_stacking(idata, var_names=["z"])
    with pytest.raises(ValueError, match="sum to 1"):
        stacked_posterior(idata, [0.5, 0.6])
    with pytest.raises(ValueError, match="not finite"):
        stacking_weights(np.array([[0.0, -np.inf], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="N points, K distributions"):
        stacking_weights(np.zeros(3))


def test_on_nuts_chains_of_a_dag_dgp():
    """The user's path: MCMC runs of a DAGDGP -> to_inference_data -> chain_stacking -> stacked_posterior."""
    from test_inference_data import run_nuts, tiny

    from pyro_dag.diagnostics import to_inference_data

    model, inputs, data = tiny()
    runs = [run_nuts(model, inputs, data, seed=s) for s in range(2)]
    idata = to_inference_data(mcmc=runs)
    res = chain_stacking(idata)
    assert res.pointwise_elpd.shape == (7, 2)  # the 7 observed cases of node a
    out = stacked_posterior(idata, res.weights, num_draws=30)
    assert out.posterior["a.u"].dims == ("chain", "draw", "a_output", "a_inducing")
    assert out.posterior_predictive["a.y"].shape[:2] == (1, 30)


def test_arviz_1x_path(monkeypatch):
    """ArviZ 1.x (Python >= 3.12, not installable here) gives a DataTree and ELPDData with ``elpd_i``; that branch
    is run with a stand-in for ``az.loo`` that answers in the 1.x form from the 0.x computation."""
    import types

    if not hasattr(xr, "DataTree"):
        pytest.skip("xarray without DataTree")
    data = np.random.default_rng(6).normal(size=30)
    idata, _ = normal_chains([0.0, 0.5, 6.0], data)
    expected = chain_stacking(idata)
    real_loo = az.loo

    def loo_1x(tree, pointwise, var_name):
        one = az.InferenceData(**{g: tree[g].to_dataset() for g in tree.children})
        res = real_loo(one, pointwise=pointwise, var_name=var_name)
        return types.SimpleNamespace(elpd_i=res.loo_i, pareto_k=res.pareto_k)

    tree = xr.DataTree.from_dict({g: idata[g] for g in idata.groups()})
    monkeypatch.setattr(az, "__version__", "1.0.0")
    monkeypatch.setattr(az, "loo", loo_1x)
    res = chain_stacking(tree)
    np.testing.assert_allclose(res.weights, expected.weights, atol=1e-12)
    out = stacked_posterior(tree, res.weights, num_draws=50)
    assert isinstance(out, xr.DataTree) and out["posterior"]["mu"].shape == (1, 50)
    np.testing.assert_allclose(out["observed_data"]["y"].values, data)
