import sys
import types

import networkx as nx
import numpy as np
import pandas as pd
import pytest
import torch
from pyro import poutine
from pyro.infer import MCMC, NUTS

from pyro_dag.sem import LatentSEM, sem_inference_data

IND = {"A": ["a1", "a2", "a3"], "B": ["b1", "b2", "b3"]}


def frame(n=15, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = np.tanh(a) + 0.3 * rng.normal(size=n)
    cols = {c: (1 + 0.2 * i) * a + 0.5 * rng.normal(size=n) + 3 * i for i, c in enumerate(IND["A"])}
    cols.update({c: (1 - 0.2 * i) * b * 10 + rng.normal(size=n) for i, c in enumerate(IND["B"])})
    df = pd.DataFrame(cols)
    df.iloc[2, 4] = np.nan  # one missing indicator
    return df


def prior_draws(model, df, S):
    """S joint draws of every latent site from the prior (a known posterior stand-in)."""
    out = {}
    for _ in range(S):
        tr = poutine.trace(model).get_trace(df)
        for k, s in tr.nodes.items():
            if s["type"] == "sample" and not s["is_observed"]:
                out.setdefault(k, []).append(s["value"].detach())
    return {k: torch.stack(v) for k, v in out.items()}


def test_groups_dims_and_loglik_in_original_units():
    df = frame()
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=4, anchors={"A": "a1", "B": "b2"})
    draws = prior_draws(model, df, 3)
    idata = sem_inference_data(model, df, samples=draws)
    assert set(idata.groups()) >= {"posterior", "log_likelihood", "posterior_predictive", "observed_data"}
    post = idata.posterior
    assert post["A.x"].dims == ("chain", "draw", "case") and post["A.x"].shape == (1, 3, 15)
    assert post["B.xbar"].dims == ("chain", "draw", "B_inducing", "B_parent")
    assert list(post["indicators.loading"].coords["loading"].values) == ["a2<-A", "a3<-A", "b1<-B", "b3<-B"]
    assert list(post.coords["indicator"].values) == list(df.columns)
    obs = idata.observed_data["indicators"].values
    np.testing.assert_allclose(obs, df.to_numpy())  # original units, NaN kept
    # reference log-likelihood in the original units: y ~ N(mean + s (λ0 + Λ x), s² υ_ε) on observed entries
    mean, s = model.scaler.mean, model.scaler.scale
    ll = idata.log_likelihood["indicators"].values[0]  # [3, 15]
    assert ll.shape == (3, 15)
    for d in range(3):
        g = {k: v[d] for k, v in draws.items()}
        with poutine.block(), poutine.condition(data=g):
            icpt, load, noise = model.measurement_params(model.sample_globals())
        xs = torch.stack([g["A.x"], g["B.x"]], -1)
        loc = torch.as_tensor(mean) + torch.as_tensor(s) * (icpt + xs @ load.T)
        sd = torch.as_tensor(s) * noise.sqrt()
        y = torch.as_tensor(df.to_numpy().copy())
        ok = ~torch.isnan(y)
        ref = torch.where(ok, torch.distributions.Normal(loc, sd).log_prob(torch.nan_to_num(y)), 0.0).sum(-1)
        np.testing.assert_allclose(ll[d], ref.numpy(), rtol=1e-10)


def test_posterior_predictive_is_the_measurement_model():
    """One draw repeated: replicated indicators have the model's mean and variance (Monte Carlo, 4000 copies)."""
    df = frame()
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=4)
    one = prior_draws(model, df, 1)
    draws = {k: v.expand((4000,) + v.shape[1:]) for k, v in one.items()}
    idata = sem_inference_data(model, df, samples=draws, log_likelihood=False)
    assert "log_likelihood" not in idata.groups()
    pp = idata.posterior_predictive["indicators"].values[0]  # [4000, 15, 6]
    g = {k: v[0] for k, v in one.items()}
    with poutine.block(), poutine.condition(data=g):
        icpt, load, noise = model.measurement_params(model.sample_globals())
    xs = torch.stack([g["A.x"], g["B.x"]], -1)
    s = model.scaler.scale
    loc = model.scaler.mean + s * (icpt + xs @ load.T).numpy()
    sd = s * noise.sqrt().numpy()
    np.testing.assert_allclose(pp.mean(0), loc, atol=5 * float(sd.max()) / np.sqrt(4000))
    np.testing.assert_allclose(pp.std(0), np.broadcast_to(sd, loc.shape), rtol=0.08)


def test_from_mcmc_runs_rhat_and_loo():
    import arviz as az

    df = frame(n=12)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=3)
    model(df)
    runs = []
    for c in range(2):
        torch.manual_seed(c)
        m = MCMC(NUTS(model, init_strategy=model.init_loc_fn, max_tree_depth=3), warmup_steps=6, num_samples=5,
                 disable_progbar=True)
        m.run(df)
        runs.append(m)
    idata = sem_inference_data(model, df, mcmc=runs)
    assert idata.posterior["A.x"].shape == (2, 5, 12)
    assert idata.sample_stats["diverging"].shape == (2, 5)
    r = az.rhat(idata, var_names=["A.x"])["A.x"]
    assert r.shape == (12,)
    assert np.isfinite(idata.log_likelihood["indicators"].values).all()


def test_from_guide_and_errors(monkeypatch):
    from pyro_dag.sem import sem_guide

    df = frame()
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=4)
    guide = sem_guide(model)
    guide(df)
    idata = sem_inference_data(model, df, guide=guide, num_samples=7)
    assert idata.posterior["B.x"].shape == (1, 7, 15)
    assert "B.xbar" in idata.posterior  # the point-estimated pseudo-inputs are recorded too
    draws = prior_draws(model, df, 2)
    with pytest.raises(ValueError, match="exactly one"):
        sem_inference_data(model, df)
    with pytest.raises(ValueError, match="exactly one"):
        sem_inference_data(model, df, samples=draws, guide=guide)
    with pytest.raises(ValueError, match="per-case latents"):
        sem_inference_data(model, df, samples={k: v for k, v in draws.items() if k != "A.x"})
    with pytest.raises(ValueError, match="cases"):
        sem_inference_data(model, df.iloc[:5], samples=draws)
    with pytest.raises(ValueError, match="been run"):
        sem_inference_data(model, df, mcmc=MCMC(NUTS(model), num_samples=2))
    # ArviZ >= 1 takes one dict of groups (a stand-in module: ArviZ 1.x needs Python >= 3.12)
    calls = []
    fake = types.SimpleNamespace(__version__="1.0.0", from_dict=lambda *a, **k: calls.append((a, k)) or "tree")
    monkeypatch.setitem(sys.modules, "arviz", fake)
    assert sem_inference_data(model, df, samples=draws) == "tree"
    (args, kwargs), = calls
    assert set(args[0]) == {"posterior", "log_likelihood", "posterior_predictive", "observed_data"}
    assert kwargs["dims"]["A.x"] == ["case"]
