"""CentredInducing: the wrapped model is the same posterior (its joint density is the model's times the Jacobian of
u = U L⁻¹, at draws of the hyperpriors), its draws map back to the model's sites, NUTS runs on it and
to_inference_data reads the run as the model's; bad arguments are rejected."""
import networkx as nx
import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import MCMC, NUTS

from pyro_dag import DAGDGP, kernels
from pyro_dag.diagnostics import to_inference_data
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import CentredInducing, CompiledNUTS

pytestmark = pytest.mark.usefixtures("float64_default")


def latent_collider(collapse, priors="weakly_informative"):
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.rand(9, 1, generator=g), torch.rand(9, 1, generator=g)
    data = {"w3": torch.sin(3 * x1) + torch.cos(2 * x2) + 0.05 * torch.randn(9, 1, generator=g)}
    model = DAGDGP(nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")]),
                   kernels={"w3": kernels.SumInput(kernels.RBF(lengthscale=0.6))}, num_inducing={"w1": 4, "w2": 3,
                                                                                                 "w3": 5},
                   likelihoods={"w3": Gaussian(0.01)}, sample_f=True, priors=priors, collapse=collapse).double()
    inputs = {"x1": x1, "x2": x2}
    model.setup(inputs, data)
    return model, inputs, data


def latent_sites(trace):
    return {k: s["value"] for k, s in trace.nodes.items() if s["type"] == "sample" and not s["is_observed"]}


@pytest.mark.parametrize("collapse", ["values", "inducing"])
@pytest.mark.parametrize("priors", ["weakly_informative", None])
def test_joint_density_is_the_models_times_the_jacobian(collapse, priors):
    model, inputs, data = latent_collider(collapse, priors)
    wrapped = CentredInducing(model)
    assert wrapped.nodes == ["w1", "w2"]
    for seed in range(3):
        pyro.set_rng_seed(seed)
        tw = poutine.trace(wrapped).get_trace(inputs, data)
        draw = latent_sites(tw)
        assert {"w1.u_centred", "w2.u_centred"} <= set(draw) and "w1.u" not in draw
        u = {w: tw.nodes[f"{w}.u"]["value"] for w in wrapped.nodes}
        own = {k: v for k, v in draw.items() if not k.endswith("_centred")} | {f"{w}.u": u[w] for w in u}
        tm = poutine.trace(poutine.condition(model, data=own)).get_trace(inputs, data)
        assert set(latent_sites(poutine.trace(model).get_trace(inputs, data))) == set(own)
        # the Jacobian of u = U L⁻¹ with L the factor of K(Z, Z) under this draw's hyperparameters
        jacobian = 0.0
        with poutine.condition(data=own):
            for w in wrapped.nodes:
                _, L = model._node_cholesky(w)
                jacobian = jacobian - model.output_dims[w] * torch.log(torch.diagonal(L).abs()).sum()
        diff = tw.log_prob_sum() - tm.log_prob_sum()
        assert abs(float((diff - jacobian).detach())) < 1e-9
        # and the centred values are the values at the inducing inputs: U = u L, whose prior is N(0, K(Z, Z))
        for w in wrapped.nodes:
            with poutine.condition(data=own):
                Z, L = model._node_cholesky(w)
            torch.testing.assert_close(draw[f"{w}.u_centred"], u[w] @ L, rtol=0, atol=1e-10)


def test_centred_prior_has_the_kernel_covariance():
    """Monte Carlo: the centred prior's draws have covariance K(Z, Z) (hyperparameters fixed), the implied u ~ N(0, I)."""
    model, inputs, data = latent_collider("values", priors=None)
    wrapped = CentredInducing(model, nodes=["w1"])
    pyro.set_rng_seed(1)
    with pyro.plate("draws", 20000, dim=-3):
        tr = poutine.trace(wrapped).get_trace(inputs, data)
    U = tr.nodes["w1.u_centred"]["value"].reshape(20000, -1)
    u = tr.nodes["w1.u"]["value"].reshape(20000, -1)
    Z, L = model._node_cholesky("w1")
    K = L.mT @ L
    assert float((U.T @ U / 20000 - K).abs().max()) < 0.05 * float(K.diagonal().max())
    assert float((u.T @ u / 20000 - torch.eye(u.shape[-1])).abs().max()) < 0.05


def test_model_draws_and_inference_data_from_nuts():
    model, inputs, data = latent_collider("inducing")
    wrapped = CentredInducing(model)
    pyro.set_rng_seed(0)
    mcmc = MCMC(NUTS(wrapped, max_tree_depth=4), num_samples=6, warmup_steps=6, disable_progbar=True)
    mcmc.run(inputs, data)
    samples = mcmc.get_samples()
    draws = wrapped.model_draws(samples, inputs, data)
    assert "w1.u_centred" not in draws and draws["w1.u"].shape == (6, 1, 4)
    for s in (0, 5):  # each draw's u with that draw's hyperparameters
        own = {k: v[s] for k, v in draws.items()}
        with poutine.condition(data=own):
            _, L = model._node_cholesky("w1")
        torch.testing.assert_close(samples["w1.u_centred"][s], draws["w1.u"][s] @ L, rtol=0, atol=1e-10)
    idata = to_inference_data(mcmc=mcmc)
    assert "w1.u" in idata.posterior and "w1.u_centred" not in idata.posterior
    assert "w3.y" in idata.log_likelihood and "w1.f" in idata.posterior


def test_compiled_nuts_records_the_wrapper():
    """CompiledNUTS records the wrapped model's potential (``backend="eager"``: the recording without the compiler,
    whose own check is covered in test_mcmc.py) and runs a chain on it with a dense block over the centred sites."""
    model, inputs, data = latent_collider("inducing")
    pyro.set_rng_seed(0)
    kernel = CompiledNUTS(CentredInducing(model), max_tree_depth=4, backend="eager",
                          full_mass=[("w1.u_centred", "w2.u_centred")])
    mcmc = MCMC(kernel, num_samples=4, warmup_steps=4, disable_progbar=True)
    mcmc.run(inputs, data)
    samples = mcmc.get_samples()
    assert samples["w1.u_centred"].shape == (4, 1, 4) and all(bool(torch.isfinite(v).all()) for v in samples.values())


def test_bad_arguments():
    model, inputs, data = latent_collider("inducing")
    with pytest.raises(ValueError, match="not a GP node"):
        CentredInducing(model, nodes=["x1"])
    with pytest.raises(ValueError, match="no node to centre"):
        CentredInducing(model, nodes=[])
    fresh = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=3)
    with pytest.raises(RuntimeError, match="set the model up"):
        CentredInducing(fresh)
    with pytest.raises(KeyError, match="lack the sites"):
        CentredInducing(model).model_draws({"w2.u_centred": torch.zeros(2, 1, 3)}, inputs, data)
