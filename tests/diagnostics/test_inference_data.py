"""to_inference_data: groups, named dims, pointwise log-likelihood against a dense computation, ArviZ functions."""
import sys
import types

import networkx as nx
import numpy as np
import pyro
import pytest
import torch
from pyro.infer import MCMC, NUTS, SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from helpers import collider_problem, setup_guide
from pyro_dag import DAGDGP
from pyro_dag.diagnostics import MCMCStats, to_inference_data
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide

az = pytest.importorskip("arviz")


def tiny(n=8, missing=(2,)):
    x = torch.linspace(-1, 1, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(3 * x) + 0.05 * torch.randn(n, 1, generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    for i in missing:
        y[i] = float("nan")
    model = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=3, sample_f=True,
                   likelihoods={"a": Gaussian(0.05)}).double()
    model.setup({"x": x}, {"a": y})
    return model, {"x": x}, {"a": y}


def run_nuts(model, inputs, data, num_samples=12, warmup=12, num_chains=1, hook=None, seed=0):
    pyro.set_rng_seed(seed)
    mcmc = MCMC(NUTS(model, max_tree_depth=4), num_samples=num_samples, warmup_steps=warmup, num_chains=num_chains,
                disable_progbar=True, hook_fn=hook)
    mcmc.run(inputs, data)
    return mcmc


def all_dims(idata):
    return [d for g in idata.groups() for d in idata[g].dims]


def test_mcmc_groups_dims_and_stats():
    model, inputs, data = tiny()
    stats = MCMCStats()
    mcmc = run_nuts(model, inputs, data, hook=stats)
    idata = to_inference_data(mcmc=mcmc, sample_stats=stats)
    assert set(idata.groups()) >= {"posterior", "log_likelihood", "posterior_predictive", "observed_data",
                                   "sample_stats"}
    assert idata.posterior["a.u"].dims == ("chain", "draw", "a_output", "a_inducing")
    assert idata.log_likelihood["a.y"].dims == ("chain", "draw", "a_case")
    # the missing case 2 is not an observation
    assert list(idata.observed_data["a_case"].values) == [0, 1, 3, 4, 5, 6, 7]
    assert idata.posterior_predictive["a.y"].shape == (1, 12, 7, 1)
    assert not any("dim_0" in d for d in all_dims(idata))
    ss = idata.sample_stats
    assert ss["diverging"].shape == ss["step_size"].shape == ss["tree_depth"].shape == (1, 12)
    assert int(ss["tree_depth"].max()) <= 4 and int(ss["tree_depth"].min()) >= 1
    assert np.allclose(ss["step_size"].values, mcmc.kernel.step_size)  # constant after warm-up
    assert int(ss["diverging"].sum()) == len(mcmc.diagnostics()["divergences"]["chain 0"])


def test_pointwise_log_likelihood_matches_dense_computation():
    """log N(y_i; a_i u, r_i + τ²) for every draw, from the whitened conditional computed by hand."""
    model, inputs, data = tiny()
    mcmc = run_nuts(model, inputs, data)
    idata = to_inference_data(mcmc=mcmc)
    u = mcmc.get_samples()["a.u"]  # [S, 1, M]
    with torch.no_grad():
        a, r = model.node_conditional("a", inputs)
        loc = (a @ u.transpose(-1, -2)).squeeze(-1)  # [S, n]
        sd = (r + model.likelihoods["a"].variance).sqrt()
        y = torch.nan_to_num(data["a"].squeeze(-1))
        ll = torch.distributions.Normal(loc, sd).log_prob(y)[:, [0, 1, 3, 4, 5, 6, 7]]
    np.testing.assert_allclose(idata.log_likelihood["a.y"].values[0], ll.numpy(), rtol=1e-10)


def test_several_runs_are_chains_and_arviz_functions_run():
    model, inputs, data = tiny()
    stats = MCMCStats()
    runs = [run_nuts(model, inputs, data, hook=stats, seed=s) for s in range(2)]
    idata = to_inference_data(mcmc=runs, sample_stats=stats)
    assert idata.posterior.sizes["chain"] == 2
    np.testing.assert_allclose(idata.posterior["a.u"].values[1], runs[1].get_samples()["a.u"].numpy())
    summary = az.summary(idata, var_names=["a.u"])
    assert len(summary) == 3 and "r_hat" in summary
    assert np.isfinite(az.waic(idata, var_name="a.y").elpd_waic)
    assert np.isfinite(az.loo(idata, var_name="a.y").elpd_loo)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    az.plot_trace(idata, var_names=["a.u"])
    az.plot_ppc(idata, var_names=["a.y"], num_pp_samples=5)
    plt.close("all")


def train(model, guide, inputs, data, loss, steps=60):
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.05}), loss)
    for _ in range(steps):
        svi.step(inputs, data)
    return guide


def test_guides_give_loo_and_compare_with_nuts():
    """DAG-VI, DAG-SVI and Pyro's AutoNormal through the same conversion, compared with NUTS by az.compare."""
    model, inputs, data = tiny(missing=())
    mcmc = run_nuts(model, inputs, data, num_samples=20, warmup=20)
    fits = {"NUTS": to_inference_data(mcmc=mcmc)}
    for name, guide in [("DAG-VI", AutoStructuredGuide(model, precision="mean_field")),
                        ("DAG-SVI", AutoStructuredGuide(model, precision="chordal"))]:
        pyro.clear_param_store()
        train(model, guide, inputs, data, DAGELBO(num_particles=2))
        fits[name] = to_inference_data(model, guide, inputs, data=data, num_samples=20)
        assert fits[name].posterior["a.u"].dims == ("chain", "draw", "a_output", "a_inducing")
        assert fits[name].log_likelihood["a.y"].shape == (1, 20, 8)
    pyro.clear_param_store()
    normal = train(model, AutoNormal(model), inputs, data, Trace_ELBO())
    fits["AutoNormal"] = to_inference_data(model, normal, inputs, data=data, num_samples=20)
    table = az.compare(fits, var_name="a.y")
    assert set(table.index) == set(fits)
    assert np.isfinite(table["elpd_loo"]).all()


def test_guide_log_likelihood_is_the_collapsed_form():
    """For a guide, log_likelihood = log N(y; a u, r + τ²) at the guide's draw of u (collapsed leaf)."""
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data)
    pyro.set_rng_seed(3)
    idata = to_inference_data(model, guide, inputs, data=data, num_samples=4)
    u3 = torch.as_tensor(idata.posterior["w3.u"].values[0])  # [S, 1, M]
    f = {k: torch.as_tensor(idata.posterior[f"{k}.f"].values[0]) for k in ("w1", "w2")}  # [S, n, 1]
    with torch.no_grad():
        a, r = model.node_conditional("w3", {**{k: v.unsqueeze(0).expand(4, -1, -1) for k, v in inputs.items()},
                                             **f})
        loc = (a @ u3.transpose(-1, -2)).squeeze(-1)
        sd = (r + model.likelihoods["w3"].variance).sqrt()
        ll = torch.distributions.Normal(loc, sd).log_prob(data["w3"].squeeze(-1))
    np.testing.assert_allclose(idata.log_likelihood["w3.y"].values[0], ll.numpy(), rtol=1e-8)
    assert not model.sample_f  # restored
    assert "_AutoStructuredGuide_latent" not in idata.posterior


def test_arviz_1x_dict_path(monkeypatch):
    """ArviZ >= 1 takes one dict of groups (checked with a stand-in module: ArviZ 1.x needs Python >= 3.12)."""
    calls = []
    fake = types.SimpleNamespace(__version__="1.2.0", from_dict=lambda *a, **k: calls.append((a, k)) or "tree")
    model, inputs, data = tiny()
    mcmc = run_nuts(model, inputs, data, num_samples=4, warmup=4)
    monkeypatch.setitem(sys.modules, "arviz", fake)
    assert to_inference_data(mcmc=mcmc) == "tree"
    (args, kwargs), = calls
    groups = args[0]
    assert set(groups) == {"posterior", "log_likelihood", "posterior_predictive", "observed_data", "sample_stats"}
    assert groups["posterior"]["a.u"].shape == (1, 4, 1, 3)
    assert kwargs["dims"]["a.u"] == ["a_output", "a_inducing"]
    assert list(kwargs["coords"]["a_case"]) == [0, 1, 3, 4, 5, 6, 7]


def test_bad_arguments():
    model, inputs, data = tiny()
    with pytest.raises(ValueError, match="mcmc"):
        to_inference_data(model)
    with pytest.raises(ValueError, match="not GP nodes"):
        to_inference_data(model, AutoNormal(model), inputs, data=data, nodes=["zz"], num_samples=2)
    with pytest.raises(ValueError, match="been run"):
        to_inference_data(mcmc=MCMC(NUTS(model), num_samples=2))


def test_fourth_argument_is_data_as_in_train():
    """to_inference_data(model, guide, inputs, data) reads data as in train(model, guide, inputs, data): all four
    groups (the fourth positional argument was nodes, so a dict of data silently gave a posterior group only)."""
    model, inputs, data = tiny()
    pyro.clear_param_store()
    guide = AutoNormal(model)
    guide(inputs, data)
    idata = to_inference_data(model, guide, inputs, data, num_samples=3)
    assert {"posterior", "log_likelihood", "posterior_predictive", "observed_data"} <= set(idata.groups())
    assert idata.log_likelihood["a.y"].shape == (1, 3, 7)
    with pytest.raises(ValueError, match="fourth argument is data"):
        to_inference_data(model, guide, inputs, ["a"], num_samples=3)
    with pytest.raises(ValueError, match="nodes must be a list"):
        to_inference_data(model, guide, inputs, nodes=data, num_samples=3)


@pytest.mark.parametrize("num_samples", [0, -2, 1.5, True])
def test_num_samples_below_one_is_refused(num_samples):
    """num_samples=0 returned the observed data alone."""
    model, inputs, data = tiny()
    with pytest.raises(ValueError, match="num_samples must be a positive integer"):
        to_inference_data(model, AutoNormal(model), inputs, data, num_samples=num_samples)
