"""The NUTS parameterisation of DAGDGP: non-centred node values and hyperpriors (opt-in; SVI paths unchanged)."""
import networkx as nx
import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import MCMC, NUTS, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from helpers import chain_problem
from pyro_dag import DAGDGP, DAGInputError
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.priors import set_hyperpriors


def chain(sample_f, priors=None, n=10):
    x = torch.linspace(-1, 1, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(2 * x)
    model = DAGDGP(nx.DiGraph([("x", "a"), ("a", "b")]), num_inducing=4, sample_f=sample_f, priors=priors,
                   likelihoods={"b": Gaussian(0.01)}).double()
    model.setup({"x": x}, {"b": y})
    return model, {"x": x}, {"b": y}


def test_non_centred_and_centred_give_the_same_joint_density():
    """f = μ + sd·ε with ε ~ N(0, I): the density of (U, ε, y) equals that of (U, f, y) times |df/dε| = Π sd."""
    nc, inputs, data = chain(True)
    tr = poutine.trace(nc).get_trace(inputs, data)
    assert tr.nodes["a.eps"]["type"] == "sample" and "a.f" in tr.nodes and "a.f" not in [
        k for k, s in tr.nodes.items() if s["type"] == "sample" and not s["infer"].get("_deterministic")]
    c, _, _ = chain("centred")
    c.load_state_dict(nc.state_dict())
    f = tr.nodes["a.f"]["value"]
    ctr = poutine.trace(poutine.condition(c, data={"a.u": tr.nodes["a.u"]["value"], "b.u": tr.nodes["b.u"]["value"],
                                                   "a.f": f})).get_trace(inputs, data)
    _, r = nc.node_conditional("a", inputs)
    log_jac = 0.5 * r.log().sum()
    torch.testing.assert_close(tr.log_prob_sum(), ctr.log_prob_sum() + log_jac)


def test_default_model_and_svi_paths_are_unchanged():
    model, inputs, data = chain_problem()
    tr = poutine.trace(model).get_trace(inputs, data)
    assert "a.eps" not in tr.nodes and tr.nodes["a.f"]["type"] == "sample"  # pyro.deterministic
    assert not any(k.startswith(("kernels.", "likelihoods.")) for k, s in tr.nodes.items() if s["type"] == "sample")


def test_hyperpriors_are_sample_sites_outside_the_data_plate():
    model, inputs, data = chain(True, priors="weakly_informative")
    tr = poutine.trace(model).get_trace(inputs, data)
    hyper = [k for k in tr.nodes if k.startswith(("kernels.", "likelihoods."))]
    assert sorted(hyper) == ["kernels.a.base.lengthscale", "kernels.a.base.variance", "kernels.b.base.lengthscale",
                             "kernels.b.base.variance", "likelihoods.b.variance"]
    for k in hyper:
        assert tr.nodes[k]["value"].shape == () and tr.nodes[k]["value"].dtype == torch.float64
        assert not tr.nodes[k]["cond_indep_stack"]  # sampled once, not per case
    # the LogNormal(-3, 1.5) prior of the noise
    lp = tr.nodes["likelihoods.b.variance"]["fn"].log_prob(torch.tensor(0.05, dtype=torch.float64))
    expected = torch.distributions.LogNormal(torch.tensor(-3.0, dtype=torch.float64), 1.5).log_prob(
        torch.tensor(0.05, dtype=torch.float64))
    torch.testing.assert_close(lp, expected)
    # NUTS covers them
    pyro.set_rng_seed(0)
    mcmc = MCMC(NUTS(model, max_tree_depth=3), num_samples=5, warmup_steps=5, disable_progbar=True)
    mcmc.run(inputs, data)
    samples = mcmc.get_samples()
    assert {"kernels.a.base.lengthscale", "likelihoods.b.variance", "a.eps", "a.u", "b.u"} <= set(samples)
    assert (samples["likelihoods.b.variance"] > 0).all()


def test_hyperpriors_work_with_a_guide_and_frozen_parameters_stay():
    model, inputs, data = chain(False)
    model.kernels["a"].base.variance_unconstrained.requires_grad_(False)
    sites = set_hyperpriors(model)
    assert "kernels.a.base.variance" not in sites and "kernels.a.base.lengthscale" in sites
    guide = AutoNormal(model)
    loss = Trace_ELBO().loss(model, guide, inputs, data)
    assert torch.isfinite(torch.tensor(loss))
    with pytest.raises(ValueError, match="weakly_informative"):
        set_hyperpriors(model, "flat")
    with pytest.raises(ValueError, match="unknown keys"):
        set_hyperpriors(model, {"kernel.period": (0.0, 1.0)})


def test_bad_switches_are_refused():
    g = nx.DiGraph([("x", "a")])
    with pytest.raises(DAGInputError, match="sample_f"):
        DAGDGP(g, sample_f="sideways")
    with pytest.raises(DAGInputError, match="priors"):
        DAGDGP(g, priors="strong")


def test_nuts_on_a_model_that_is_set_up_by_its_first_call():
    x = torch.linspace(-1, 1, 8, dtype=torch.float64).unsqueeze(-1)
    model = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=3, sample_f=True, priors="weakly_informative").double()
    pyro.set_rng_seed(0)
    mcmc = MCMC(NUTS(model, max_tree_depth=3), num_samples=3, warmup_steps=3, disable_progbar=True)
    mcmc.run({"x": x}, {"a": torch.sin(3 * x)})
    assert "kernels.a.base.lengthscale" in mcmc.get_samples()


def test_fix_latent_variance_keeps_only_the_hidden_scale_fixed():
    """The identifiability constraint of the NUTS benchmark: fix_latent_variance=True: the hidden node's kernel variance is a fixed parameter (its value kept), every other
    hyperparameter keeps its prior, and the joint density is that of the full-prior model at σ²_a = its value,
    less the prior term of σ²_a."""
    model, inputs, data = chain(True)
    model.kernels["a"].base.variance = torch.tensor(1.7, dtype=torch.float64)
    sites = set_hyperpriors(model, fix_latent_variance=True)
    assert "kernels.a.base.variance" not in sites
    assert {"kernels.a.base.lengthscale", "kernels.b.base.variance", "kernels.b.base.lengthscale",
            "likelihoods.b.variance"} <= set(sites)
    assert not model.kernels["a"].base.variance_unconstrained.requires_grad
    torch.testing.assert_close(model.kernels["a"].base.variance, torch.tensor(1.7, dtype=torch.float64))
    tr = poutine.trace(model).get_trace(inputs, data)
    assert tr.nodes.get("kernels.a.base.variance", {"type": "param"})["type"] == "param"  # not a sample site
    pyro.clear_param_store()  # the two models share site names; keep the first model's parameters out of the second
    full, _, _ = chain(True, priors="weakly_informative")
    values = {k: s["value"] for k, s in tr.nodes.items() if s["type"] == "sample" and not s["is_observed"]}
    values["kernels.a.base.variance"] = torch.tensor(1.7, dtype=torch.float64)
    ftr = poutine.trace(poutine.condition(full, data=values)).get_trace(inputs, data)
    prior_a = torch.distributions.LogNormal(torch.tensor(0.0, dtype=torch.float64), 1.0).log_prob(values[
        "kernels.a.base.variance"])
    torch.testing.assert_close(tr.log_prob_sum(), ftr.log_prob_sum() - prior_a)


def test_fix_latent_kernels_keeps_the_hidden_kernel_fixed_and_the_rest_sampled():
    """fix_latent_kernels=True: every hyperparameter of the hidden node's kernel is a fixed parameter at its set
    value (a length-scale given at construction included), the observed node's kernel and noise keep their priors,
    and the joint density is the full-prior model's at those values less their prior terms."""
    model, inputs, data = chain(True)
    model.kernels["a"].base.variance = torch.tensor(1.7, dtype=torch.float64)
    model.kernels["a"].base.lengthscale = torch.tensor([3.0], dtype=torch.float64)
    sites = set_hyperpriors(model, fix_latent_kernels=True)
    assert sorted(sites) == ["kernels.b.base.lengthscale", "kernels.b.base.variance", "likelihoods.b.variance"]
    fixed = {"kernels.a.base.variance": torch.tensor(1.7, dtype=torch.float64),
             "kernels.a.base.lengthscale": torch.tensor([3.0], dtype=torch.float64)}
    for name, value in fixed.items():
        module, attr = model.kernels["a"].base, name.rsplit(".", 1)[1]
        assert not getattr(module, attr + "_unconstrained").requires_grad
        torch.testing.assert_close(getattr(module, attr), value)
    tr = poutine.trace(model).get_trace(inputs, data)
    assert all(tr.nodes.get(name, {"type": "param"})["type"] == "param" for name in fixed)
    # NUTS samples exactly the observed node's hyperparameters and the inducing outputs / node values
    sampled = {k for k, s in tr.nodes.items() if s["type"] == "sample" and not s["is_observed"]
               and not s["infer"].get("_deterministic")}
    assert {k for k in sampled if k.startswith(("kernels.", "likelihoods."))} == set(sites)
    pyro.clear_param_store()
    full, _, _ = chain(True, priors="weakly_informative")
    values = {k: s["value"] for k, s in tr.nodes.items() if s["type"] == "sample" and not s["is_observed"]}
    values.update(fixed)
    ftr = poutine.trace(poutine.condition(full, data=values)).get_trace(inputs, data)
    one = torch.tensor(0.0, dtype=torch.float64)
    prior_a = sum(torch.distributions.LogNormal(one, 1.0).log_prob(v).sum() for v in fixed.values())
    torch.testing.assert_close(tr.log_prob_sum(), ftr.log_prob_sum() - prior_a)


def test_a_gram_failure_inside_a_leapfrog_step_is_a_divergence_not_a_crash():
    """Pyro's integrator turns a potential that fails with a registered numerical error into NaN energy (a
    divergent step); the Gram-matrix errors of DAGDGP are registered, so a NUTS trajectory that reaches
    hyperparameters with a non-finite Gram matrix does not stop the chain."""
    from pyro.infer.mcmc.util import initialize_model
    from pyro.ops.integrator import potential_grad

    from pyro_dag.gp.conditional import NonFiniteGramError

    pyro.clear_param_store()
    model, inputs, data = chain(True, priors="weakly_informative")
    params, potential, _, _ = initialize_model(model, model_args=(inputs, data))
    grads, energy = potential_grad(potential, {k: v.clone() for k, v in params.items()})
    assert torch.isfinite(energy)
    bad = {k: v.clone() for k, v in params.items()}
    bad["kernels.a.base.variance"] = torch.full_like(bad["kernels.a.base.variance"], float("nan"))
    with pytest.raises(NonFiniteGramError):  # outside the integrator the error still names the node
        potential(bad)
    grads, energy = potential_grad(potential, bad)
    assert torch.isnan(energy) and all(bool((g == 0).all()) for g in grads.values())
