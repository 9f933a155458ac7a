"""CollapsedGaussianLeaf and DAGDGP(collapse="inducing") against dense Gaussian references and Monte Carlo."""
import math

import networkx as nx
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine

from pyro_dag import DAGDGP
from pyro_dag.dgp import DAGInputError
from pyro_dag.gp.collapsed import CollapsedGaussianLeaf
from pyro_dag.gp.likelihoods import Gaussian



pytestmark = pytest.mark.usefixtures("float64_default")


def _leaf(batch=(), B=7, M=3, d=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(batch + (B, M), generator=g)
    r = torch.rand(batch + (B,), generator=g) * 0.3 + 0.01
    tau2 = torch.tensor([0.05, 0.2])[:d]
    mask = torch.rand(B, d, generator=g) > 0.3
    mask[0] = True
    y = torch.randn(B, d, generator=g)
    y = torch.where(mask, y, torch.full_like(y, float("nan")))
    return a, r, tau2, mask, y


def _dense_log_prob(a, r, tau2, mask, y):
    total = 0.0
    for j in range(mask.shape[1]):
        o = mask[:, j]
        cov = a[o] @ a[o].T + torch.diag(r[o] + tau2[j])
        total = total + dist.MultivariateNormal(torch.zeros(int(o.sum())), cov).log_prob(y[o, j])
    return total


def test_log_prob_is_the_dense_marginal_with_missing_entries():
    a, r, tau2, mask, y = _leaf()
    leaf = CollapsedGaussianLeaf(a, r, tau2, output_dim=2, mask=mask)
    assert leaf.event_shape == (7, 2) and leaf.batch_shape == ()
    assert torch.allclose(leaf.log_prob(y), _dense_log_prob(a, r, tau2, mask, y), atol=1e-10)


def test_batched_log_prob_matches_each_batch_member():
    a, r, tau2, mask, y = _leaf(batch=(3,))
    lp = CollapsedGaussianLeaf(a, r, tau2, output_dim=2, mask=mask).log_prob(y)
    assert lp.shape == (3,)
    for i in range(3):
        assert torch.allclose(lp[i], _dense_log_prob(a[i], r[i], tau2, mask, y), atol=1e-10)


def test_inducing_posterior_is_dense_gaussian_conditioning():
    a, r, tau2, mask, y = _leaf()
    leaf = CollapsedGaussianLeaf(a, r, tau2, output_dim=2, mask=mask)
    mean, L = leaf.inducing_posterior(y)
    for j in range(2):
        o = mask[:, j]
        # joint of (V_j, y_j[o]): cov(V) = I, cov(V, y) = A_oᵀ, cov(y) = A_o A_oᵀ + D
        S_vy, S_yy = a[o].T, a[o] @ a[o].T + torch.diag(r[o] + tau2[j])
        ref_mean = S_vy @ torch.linalg.solve(S_yy, y[o, j])
        ref_cov = torch.eye(3) - S_vy @ torch.linalg.solve(S_yy, S_vy.T)
        assert torch.allclose(mean[j], ref_mean, atol=1e-10)
        assert torch.allclose(torch.cholesky_inverse(L[j]), ref_cov, atol=1e-10)


def test_sample_inducing_has_the_posterior_moments():
    torch.manual_seed(1)
    a, r, tau2, mask, y = _leaf()
    leaf = CollapsedGaussianLeaf(a, r, tau2, output_dim=2, mask=mask)
    mean, L = leaf.inducing_posterior(y)
    cov = torch.cholesky_inverse(L)
    draws = torch.stack([leaf.sample_inducing(y) for _ in range(20000)])  # [S, d, M]
    se = (cov.diagonal(dim1=-2, dim2=-1) / 20000).sqrt()
    assert ((draws.mean(0) - mean).abs() < 5 * se).all()
    emp = torch.einsum("sjm,sjn->jmn", draws - mean, draws - mean) / 20000
    assert torch.allclose(emp, cov, atol=0.02)


def test_sample_has_the_marginal_covariance():
    torch.manual_seed(2)
    a, r, tau2, _, _ = _leaf(B=4)
    leaf = CollapsedGaussianLeaf(a, r, tau2, output_dim=2)
    y = leaf.sample((40000,))
    assert y.shape == (40000, 4, 2)
    for j in range(2):
        emp = y[..., j].T @ y[..., j] / 40000
        ref = a @ a.T + torch.diag(r + tau2[j])
        assert torch.allclose(emp, ref, atol=0.1 * ref.diagonal().max())


# ----------------------------------------------------------------------------- the model
def _chain(collapse, n=6, priors=None):
    pyro.clear_param_store()
    x = torch.linspace(-1, 1, n).unsqueeze(-1)
    y = torch.sin(2 * x) + 0.1 * torch.randn(n, 1, generator=torch.Generator().manual_seed(3))
    model = DAGDGP(nx.DiGraph([("x", "a"), ("a", "b")]), num_inducing=3, sample_f=True, collapse=collapse,
                   likelihoods={"b": Gaussian(0.04)}, priors=priors).double()
    model.setup({"x": x}, {"b": y})
    return model, {"x": x}, {"b": y}


def test_collapsed_model_is_the_monte_carlo_marginal_of_the_full_model():
    """log p(y | a) of collapse="inducing" = log E_{V_b ~ N(0, I)} p(y | a, V_b) of collapse="values"."""
    torch.manual_seed(4)
    full, inputs, data = _chain("values")
    tr = poutine.trace(full).get_trace(inputs, data)
    hidden = {k: tr.nodes[k]["value"] for k in ["a.u", "a.eps"]}
    S = 200000
    vb = torch.randn(S, 1, 3)

    def loglik_given(v):
        t = poutine.trace(poutine.condition(full, data={**hidden, "b.u": v})).get_trace(inputs, data)
        return t.nodes["b.y"]["fn"].log_prob(t.nodes["b.y"]["value"]).sum()

    # vectorised over V_b: the leaf's per-case conditional is N(a_bᵀ V_b, r_b + τ²)
    a, r = full.node_conditional("b", {"a": tr.nodes["a.f"]["value"]})
    ys = data["b"]
    loc = (vb @ a.T).transpose(-1, -2)  # [S, n, 1]
    lls = dist.Normal(loc, (r + 0.04).sqrt().unsqueeze(-1)).log_prob(ys).sum((-1, -2))
    mc = torch.logsumexp(lls, 0) - math.log(S)
    for i in range(3):  # the vectorised form is the model's own likelihood
        assert torch.allclose(loglik_given(vb[i]), lls[i], atol=1e-10)

    collapsed, _, _ = _chain("inducing")
    tc = poutine.trace(poutine.condition(collapsed, data=hidden)).get_trace(inputs, data)
    exact = tc.nodes["b.y"]["fn"].log_prob(tc.nodes["b.y"]["value"])
    se = (lls - mc).exp().std() / math.sqrt(S)  # relative Monte Carlo error of the mean
    assert abs(float(exact.detach() - mc)) < 5 * float(se) + 1e-3
    assert "b.u" not in tc.nodes and "b.u" in tr.nodes


@pytest.mark.slow  # over 10 s on 2 cores: run by `pytest -m slow`
def test_full_model_draws_of_a_leaf_are_the_exact_conditional():
    torch.manual_seed(5)
    model, inputs, data = _chain("inducing")
    tr = poutine.trace(model).get_trace(inputs, data)
    S = 6000
    samples = {k: tr.nodes[k]["value"].expand((S,) + tr.nodes[k]["value"].shape).clone() for k in ["a.u", "a.eps"]}
    out = model.full_model_draws(samples, inputs, data)
    assert out["b.u"].shape == (S, 1, 3) and set(out) == {"a.u", "a.eps", "b.u"}
    a, r = model.node_conditional("b", {"a": tr.nodes["a.f"]["value"]})
    D = torch.diag(r + 0.04)
    S_yy = a @ a.T + D
    ref = a.T @ torch.linalg.solve(S_yy, data["b"][:, 0])
    ref_cov = torch.eye(3) - a.T @ torch.linalg.solve(S_yy, a)
    se = (ref_cov.diagonal() / S).sqrt()
    assert ((out["b.u"][:, 0].mean(0) - ref).abs() < 5 * se).all()


def test_errors_name_the_fix():
    with pytest.raises(DAGInputError, match="sample_f=True"):
        DAGDGP(nx.DiGraph([("x", "a")]), collapse="inducing")
    with pytest.raises(DAGInputError, match="collapse must be"):
        DAGDGP(nx.DiGraph([("x", "a")]), sample_f=True, collapse="all")
    model, inputs, data = _chain("inducing")
    with pytest.raises(DAGInputError, match="minibatched"):
        model(inputs, data, subsample_size=3)


def test_nuts_to_inference_data_and_predictive_on_a_collapsed_model():
    pytest.importorskip("arviz")
    import arviz as az
    from pyro.infer import MCMC, NUTS, Predictive

    from pyro_dag.diagnostics import to_inference_data

    torch.manual_seed(6)
    pyro.set_rng_seed(6)
    model, inputs, data = _chain("inducing", priors="weakly_informative")
    mcmc = MCMC(NUTS(model, max_tree_depth=4), num_samples=30, warmup_steps=30, disable_progbar=True)
    mcmc.run(inputs, data)
    assert "b.u" not in mcmc.get_samples() and "kernels.b.base.lengthscale" in mcmc.get_samples()
    idata = to_inference_data(mcmc=mcmc)
    assert idata.posterior["b.u"].shape == (1, 30, 1, 3)
    assert idata.log_likelihood["b.y"].shape == (1, 30, 6)
    az.loo(idata, var_name="b.y")
    completed = model.full_model_draws(mcmc.get_samples(), inputs, data)
    pred = Predictive(model, posterior_samples=completed)(inputs)
    assert pred["b.y"].shape == (30, 6, 1)
    # the completed draws fit the data: the posterior-predictive mean is near y (prior draws of b.u would not be)
    assert float((pred["b.y"].mean(0) - data["b"]).abs().mean()) < 0.4


# ----------------------------------------------------------------------------- observed nodes with children
def _observed_chain(n=7):
    pyro.clear_param_store()
    g = torch.Generator().manual_seed(8)
    x = torch.linspace(-1, 1, n).unsqueeze(-1)
    a_obs = x + 0.1 * torch.randn(n, 1, generator=g)
    a_obs[2] = float("nan")  # one case where the intermediate node is missing
    y = torch.sin(2 * x) + 0.1 * torch.randn(n, 1, generator=g)
    model = DAGDGP(nx.DiGraph([("x", "a"), ("a", "b")]), num_inducing=3, sample_f=True, collapse="inducing",
                   likelihoods={"a": Gaussian(0.03), "b": Gaussian(0.04)}).double()
    inputs, data = {"x": x}, {"a": a_obs, "b": y}
    model.setup(inputs, data)
    return model, inputs, data


def test_posterior_whitening_is_the_full_joint_density_times_its_jacobian():
    """p(U) p(F | U) p(y | F) = p(y) p(U | y) p(F | U, y): the density of (z, ε) under collapse="inducing" equals
    the full model's density of (U, F, y_a) times |∂(U, F)/∂(z, ε)|, for any (z, ε)."""
    torch.manual_seed(9)
    model, inputs, data = _observed_chain()
    tr = poutine.trace(model).get_trace(inputs, data)
    assert tr.nodes["a.z"]["type"] == "sample" and "a.u" in tr.nodes and tr.nodes["a.u"]["infer"].get("_deterministic")
    z, eps = tr.nodes["a.z"]["value"], tr.nodes["a.eps"]["value"]
    u, f = tr.nodes["a.u"]["value"], tr.nodes["a.f"]["value"]
    lhs = (tr.nodes["a.z"]["fn"].log_prob(z) + tr.nodes["a.eps"]["fn"].log_prob(eps).sum()
           + tr.nodes["a.y"]["fn"].log_prob(tr.nodes["a.y"]["value"]))
    a, r = model.node_conditional("a", {"x": inputs["x"]})
    m = ~torch.isnan(data["a"])
    tau2 = 0.03
    full = (dist.Normal(0.0, 1.0).log_prob(u).sum() + dist.Normal(a @ u.T, r.sqrt().unsqueeze(-1)).log_prob(f).sum()
            + dist.Normal(f[m], math.sqrt(tau2)).log_prob(data["a"][m]).sum())
    _, L = CollapsedGaussianLeaf(a, r, tau2, 1, mask=m).inducing_posterior(torch.nan_to_num(data["a"]))
    sd_post = torch.where(m, (r.unsqueeze(-1) * tau2 / (r.unsqueeze(-1) + tau2)).sqrt(), r.sqrt().unsqueeze(-1))
    log_jac = -L.diagonal(dim1=-2, dim2=-1).log().sum() + sd_post.log().sum()
    assert torch.allclose(lhs, full + log_jac, atol=1e-8)
    # and the prior-standardised residual reproduces the value: F = μ(U) + √r ε'
    eps_prior = tr.nodes["a.eps_prior"]["value"]
    assert torch.allclose(a @ u.T + r.sqrt().unsqueeze(-1) * eps_prior, f, atol=1e-10)


def test_full_model_draws_evaluate_the_same_values_in_the_full_model():
    torch.manual_seed(10)
    model, inputs, data = _observed_chain()
    tr = poutine.trace(model).get_trace(inputs, data)
    samples = {k: tr.nodes[k]["value"].unsqueeze(0) for k in ["a.z", "a.eps"]}
    out = model.full_model_draws(samples, inputs, data)
    assert set(out) == {"a.u", "a.eps", "b.u"}
    model.collapse = "values"  # the same model and parameters, in the full model's coordinates
    tf = poutine.trace(poutine.condition(model, data={k: v[0] for k, v in out.items()})).get_trace(inputs, data)
    assert tf.nodes["a.u"]["type"] == "sample" and not tf.nodes["a.u"]["infer"].get("_deterministic")
    assert torch.allclose(tf.nodes["a.f"]["value"], tr.nodes["a.f"]["value"], atol=1e-10)


def test_nuts_on_an_observed_chain_goes_to_arviz_and_predictive():
    pytest.importorskip("arviz")
    import arviz as az
    from pyro.infer import MCMC, NUTS, Predictive

    from pyro_dag.diagnostics import to_inference_data

    pyro.set_rng_seed(11)
    model, inputs, data = _observed_chain()
    mcmc = MCMC(NUTS(model, max_tree_depth=4), num_samples=20, warmup_steps=20, disable_progbar=True)
    mcmc.run(inputs, data)
    assert {"a.z", "a.eps"} <= set(mcmc.get_samples()) and "a.u" not in mcmc.get_samples()
    idata = to_inference_data(mcmc=mcmc)
    assert idata.posterior["a.u"].shape == (1, 20, 1, 3) and idata.posterior["b.u"].shape == (1, 20, 1, 3)
    assert "a.z" not in idata.posterior
    assert idata.log_likelihood["a.y"].shape == (1, 20, 6) and idata.log_likelihood["b.y"].shape == (1, 20, 7)
    az.waic(idata, var_name="b.y")
    pred = Predictive(model, posterior_samples=model.full_model_draws(mcmc.get_samples(), inputs, data))(inputs)
    assert pred["a.y"].shape == (20, 7, 1)
    assert float((pred["a.y"].mean(0) - inputs["x"]).abs().mean()) < 0.3
