"""AutoStructuredGuide as a Pyro autoguide, checked against Pyro's AutoMultivariateNormal with the same Gaussian.

Every comparison sets AutoMultivariateNormal's ``loc`` and ``scale_tril`` to our guide's mean and covariance (in
the model's site order) and feeds both guides the same latent vector, so the two must agree to rounding error.
"""
import warnings

import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine
from pyro.infer import Predictive, Trace_ELBO, TraceMeanField_ELBO
from pyro.infer.autoguide import AutoMultivariateNormal, init_to_feasible, init_to_value
from torch.distributions import constraints

from helpers import chain_problem
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.autoguide.families import _assign

VARIANTS = [("chordal", "dense"), ("chordal", "sparse"), ("full", "dense"), ("mean_field", "auto")]
DATA = torch.tensor([[0.3, -1.2, 0.8], [1.1, 0.2, -0.4]], dtype=torch.float64)


def plated_model(data=DATA):
    """Global, batch-shaped (event), plated and doubly plated sites with several constraints."""
    tau = pyro.sample("tau", dist.LogNormal(torch.tensor(0.0, dtype=torch.float64), 0.5))
    mu = pyro.sample("mu", dist.Normal(torch.zeros(2, dtype=torch.float64), 1.0).to_event(1))
    corr = pyro.sample("corr", dist.LKJCholesky(2, torch.tensor(1.0, dtype=torch.float64)))
    with pyro.plate("cols", 3, dim=-1):
        w = pyro.sample("w", dist.Beta(torch.tensor(2.0, dtype=torch.float64), 2.0))
        with pyro.plate("rows", 2, dim=-2):
            # written for vectorisation: the batch dims of mu, tau and corr line up with (rows, cols)
            z = pyro.sample("z", dist.Normal(mu.sum(-1) * w, tau))
            pyro.sample("obs", dist.Normal(z + corr[..., 1, 0], 0.5), obs=data)


def _ours(model, structure="chordal", backend="dense", **kwargs):
    guide = AutoStructuredGuide(model, precision=structure, backend=backend, **kwargs)
    guide()
    # move the Gaussian off its initial (diagonal) state, reproducibly
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _, p in guide.named_parameters():
            p.add_(0.2 * torch.randn(p.shape, dtype=p.dtype, generator=gen))
    return guide


def _matching_amvn(guide, model):
    """An AutoMultivariateNormal with our guide's Gaussian (model order)."""
    amvn = AutoMultivariateNormal(model)
    amvn()
    post = guide.get_posterior()
    with torch.no_grad():
        chol = torch.linalg.cholesky(post.covariance_matrix)
        amvn.loc.copy_(post.mean)
        _assign(amvn, "scale", chol.diagonal())
        _assign(amvn, "scale_tril", chol / chol.diagonal().unsqueeze(-1))
    return amvn


def _latent_name(guide):
    return f"_{guide._pyro_name}_latent"


def _conditioned(guide, latent):
    return poutine.condition(guide, data={_latent_name(guide): latent})


@pytest.mark.parametrize("structure,backend", VARIANTS)
def test_shapes_under_an_outer_plate_match_amvn(structure, backend):
    guide = _ours(plated_model, structure, backend)
    amvn = _matching_amvn(guide, plated_model)
    for shape in [(), (7,), (4, 5)]:
        with pyro.plate_stack("particles", shape, rightmost_dim=-3):
            ours = poutine.trace(guide).get_trace()
            ref = poutine.trace(amvn).get_trace()
            # the model accepts the guide's values (it broadcasts them against its plates)
            poutine.trace(poutine.replay(plated_model, ours)).get_trace()
        for name in ["tau", "mu", "corr", "w", "z"]:
            assert ours.nodes[name]["value"].shape == ref.nodes[name]["value"].shape, (shape, name)
        assert ours.nodes["z"]["value"].shape == shape + (2, 3)
        assert ours.nodes["w"]["value"].shape == (shape + (1, 3) if shape else (3,))


@pytest.mark.parametrize("structure,backend", VARIANTS)
def test_vectorized_and_sequential_elbo_agree_with_amvn(structure, backend):
    """Same parameters, same latent draws: the vectorised ELBO equals the mean of the sequential ones and
    AutoMultivariateNormal's (before the plate fix the vectorised one was off by orders of magnitude)."""
    guide = _ours(plated_model, structure, backend)
    amvn = _matching_amvn(guide, plated_model)
    num = 6
    latents = guide.get_posterior().sample((num,)).detach()         # [num, P]
    sequential = torch.tensor([Trace_ELBO().loss(plated_model, _conditioned(guide, x)) for x in latents],
                              dtype=torch.float64)
    reference = torch.tensor([Trace_ELBO().loss(plated_model, _conditioned(amvn, x)) for x in latents],
                             dtype=torch.float64)
    elbo = Trace_ELBO(num_particles=num, vectorize_particles=True, max_plate_nesting=2)
    vectorized = elbo.loss(plated_model, _conditioned(guide, latents[:, None, None]))
    vectorized_ref = elbo.loss(plated_model, _conditioned(amvn, latents[:, None, None]))
    torch.testing.assert_close(sequential, reference, rtol=1e-9, atol=1e-9)
    assert abs(vectorized - sequential.mean().item()) < 1e-9 * max(1.0, abs(vectorized))
    assert abs(vectorized - vectorized_ref) < 1e-9 * max(1.0, abs(vectorized))


def test_predictive_parallel_shapes_match_sequential():
    guide = _ours(plated_model)
    amvn = _matching_amvn(guide, plated_model)
    shapes = {}
    for key, g, parallel in [("ours_par", guide, True), ("ours_seq", guide, False), ("amvn", amvn, True)]:
        samples = Predictive(plated_model, guide=g, num_samples=5, parallel=parallel,
                             return_sites=["tau", "mu", "corr", "w", "z", "obs"])()
        shapes[key] = {k: v.shape for k, v in samples.items()}
    assert shapes["ours_par"] == shapes["ours_seq"] == shapes["amvn"]
    assert shapes["ours_par"]["z"] == (5, 2, 3)


@pytest.mark.parametrize("structure,backend", VARIANTS)
def test_median_quantiles_and_posterior_match_amvn(structure, backend):
    guide = _ours(plated_model, structure, backend)
    amvn = _matching_amvn(guide, plated_model)
    median, ref = guide.median(), amvn.median()
    assert set(median) == set(ref)
    for name in ref:
        assert median[name].shape == ref[name].shape == pyro.poutine.trace(plated_model).get_trace() \
            .nodes[name]["value"].shape
        torch.testing.assert_close(median[name], ref[name])
    assert (median["tau"] > 0) and ((median["w"] > 0) & (median["w"] < 1)).all()  # constrained
    levels = [0.1, 0.5, 0.9]
    q, q_ref = guide.quantiles(levels), amvn.quantiles(levels)
    for name in q_ref:
        assert q[name].shape == (3,) + median[name].shape
        torch.testing.assert_close(q[name], q_ref[name])
    post, post_ref = guide.get_posterior(), amvn.get_posterior()
    torch.testing.assert_close(post.mean, post_ref.mean)
    torch.testing.assert_close(post.variance, post_ref.variance)
    torch.testing.assert_close(post.covariance_matrix, post_ref.covariance_matrix)
    x = post_ref.sample((4,))
    torch.testing.assert_close(post.log_prob(x), post_ref.log_prob(x))
    assert post.rsample((3, 2)).shape == (3, 2, guide.latent_dim)
    loc, scale = guide._loc_scale()
    torch.testing.assert_close(scale, post_ref.variance.sqrt())


def test_lognormal_median_is_constrained_and_site_shaped():
    """The reported bug: a LogNormal site's median came back unconstrained with shape (1, 1)."""
    def model():
        pyro.sample("s", dist.LogNormal(0.0, 1.0))
        pyro.sample("v", dist.Normal(torch.zeros(3), 1.0).to_event(1))

    guide = AutoStructuredGuide(model, init_loc_fn=init_to_value(values={"s": torch.tensor(2.0),
                                                                          "v": torch.tensor([1.0, 2.0, 3.0])}))
    guide()
    median = guide.median()
    assert median["s"].shape == () and median["v"].shape == (3,)
    torch.testing.assert_close(median["s"], torch.tensor(2.0))
    torch.testing.assert_close(median["v"], torch.tensor([1.0, 2.0, 3.0]))


def test_init_loc_fn_and_init_scale_are_honoured():
    inits = {"x": torch.tensor(0.7), "y": torch.tensor([0.1, -0.4, 2.0]), "z": torch.full((4,), 3.0)}

    def model():
        pyro.sample("x", dist.Normal(0.0, 1.0))
        pyro.sample("y", dist.MultivariateNormal(torch.zeros(3), torch.eye(3)))
        with pyro.plate("p", 4):
            pyro.sample("z", dist.Exponential(1.0))

    guide = AutoStructuredGuide(model, init_loc_fn=init_to_value(values=inits), init_scale=0.03)
    guide()
    for name, value in guide.median().items():
        torch.testing.assert_close(value, inits[name])
    torch.testing.assert_close(guide._loc_scale()[1], torch.full((8,), 0.03))
    # default: init_to_median, as AutoMultivariateNormal (z's median under Exponential(1) is log 2)
    default = AutoStructuredGuide(model, name="default")
    default()
    assert abs(default.median()["z"].mean() - torch.tensor(2.0).log()) < 0.3
    with pytest.raises(TypeError):
        AutoStructuredGuide(model, "chordal")  # keyword-only, like Pyro's guides
    with pytest.raises(ValueError, match="init_scale"):
        AutoStructuredGuide(model, init_scale=-1.0)


def test_init_loc_fn_sets_the_inducing_means_of_a_dagdgp():
    model, inputs, data = chain_problem()
    guide = AutoStructuredGuide(model)
    guide(inputs, data)
    assert all(float(v.detach().abs().max()) == 0.0 for v in guide.inducing_posterior().mean_blocks().values())
    value = torch.arange(5, dtype=torch.float64).reshape(1, 5)
    init = init_to_value(values={"a.u": value}, fallback=init_to_feasible)
    guide = AutoStructuredGuide(model, init_loc_fn=init, name="valued")
    guide(inputs, data)
    means = guide.inducing_posterior().mean_blocks()
    torch.testing.assert_close(means["a"], value)
    assert float(means["b"].detach().abs().max()) == 0.0


def test_dagdgp_sites_under_an_outer_plate_and_vectorized_elbo():
    """The inducing sites of a DAGDGP under vectorised particles: shapes and the same ELBO as sequentially."""
    model, inputs, data = chain_problem()
    guide = AutoStructuredGuide(model)
    guide(inputs, data)
    with pyro.plate("particles", 4, dim=-2):
        trace = poutine.trace(guide).get_trace(inputs, data)
    assert trace.nodes["a.u"]["value"].shape == (4, 1, 1, 5)
    num = 3
    latents = guide.get_posterior().sample((num,))
    sequential = [Trace_ELBO().loss(model, _conditioned(guide, x), inputs, data) for x in latents]
    # the model's own sampling of F given U uses fresh noise: compare at the Monte Carlo level only through the
    # guide's part, which is deterministic given the latent
    guide_lp = [poutine.trace(_conditioned(guide, x)).get_trace(inputs, data).log_prob_sum() for x in latents]
    with pyro.plate("particles", num, dim=-2):
        vec = poutine.trace(_conditioned(guide, latents[:, None])).get_trace(inputs, data)
    vec.compute_log_prob()
    per_particle = sum(site["log_prob"] for site in vec.nodes.values() if site["type"] == "sample")
    torch.testing.assert_close(per_particle.reshape(-1), torch.stack(guide_lp))
    assert all(torch.isfinite(torch.as_tensor(v)) for v in sequential)


def test_create_plates_subsampling_uses_full_size_parameters_and_ragged_batches():
    full, data = 10, torch.linspace(-2, 2, 10)

    def model(batch, idx):
        loc = pyro.sample("loc", dist.Normal(0.0, 3.0))
        with pyro.plate("data", full, subsample=idx):
            z = pyro.sample("z", dist.Normal(loc, 1.0))
            pyro.sample("obs", dist.Normal(z, 0.5), obs=batch)

    def create_plates(batch, idx):
        return pyro.plate("data", full, subsample=idx)

    guide = AutoStructuredGuide(model, create_plates=create_plates)
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    batches = [torch.arange(0, 4), torch.arange(4, 8), torch.arange(8, 10)]  # ragged: 4, 4, 2
    for idx in batches:
        svi.step(data[idx], idx)
    assert guide.latent_dim == 1 + full
    assert guide.median()["z"].shape == (full,)
    # each minibatch reads the rows of its subsample from the full-size latent
    for idx in batches + [torch.tensor([7, 2, 9])]:
        latent = guide.get_posterior().sample()
        trace = poutine.trace(_conditioned(guide, latent)).get_trace(data[idx], idx)
        z_full = dict((s.name, u) for s, u in guide._unpack_latent(latent))["z"]
        torch.testing.assert_close(trace.nodes["z"]["value"], z_full[idx])
    # and the loss of a minibatch is finite for the ragged one
    assert torch.isfinite(torch.as_tensor(Trace_ELBO().loss(model, guide, data[8:], torch.arange(8, 10))))


def test_subsample_size_without_create_plates_replays_the_guides_indices():
    def model(batch_size=None):
        loc = pyro.sample("loc", dist.Normal(0.0, 3.0))
        with pyro.plate("data", 10, subsample_size=batch_size) as idx:
            pyro.sample("z", dist.Normal(loc, 1.0))
            pyro.sample("obs", dist.Normal(0.0, 1.0), obs=torch.zeros(10)[idx])

    guide = AutoStructuredGuide(model)
    guide(batch_size=3)
    assert guide.latent_dim == 11
    tr = poutine.trace(guide).get_trace(batch_size=3)
    model_tr = poutine.trace(poutine.replay(model, tr)).get_trace(batch_size=3)
    assert model_tr.nodes["z"]["value"].shape == (3,)
    torch.testing.assert_close(model_tr.nodes["data"]["value"], tr.nodes["data"]["value"])


def test_model_without_latent_sites_is_an_empty_guide():
    def model(x):
        scale = pyro.param("scale", torch.tensor(1.0), constraint=constraints.positive)
        with pyro.plate("data", len(x)):
            pyro.sample("obs", dist.Normal(0.0, scale), obs=x)

    x = torch.randn(5)
    guide = AutoStructuredGuide(model)
    assert guide(x) == {}
    assert guide.median(x) == {} and guide.quantiles([0.5], x) == {}
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.1}), Trace_ELBO())
    assert torch.isfinite(torch.as_tensor(svi.step(x)))
    with pytest.raises(RuntimeError, match="no continuous latent sites"):
        guide.get_posterior(x)


def test_discrete_and_sphere_sites_get_pyros_errors():
    def discrete():
        p = pyro.sample("p", dist.Beta(2.0, 2.0))
        pyro.sample("x", dist.Bernoulli(p))

    def sphere():
        x = pyro.sample("x", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        pyro.sample("y", dist.ProjectedNormal(x))

    with pytest.raises(ValueError, match="enumeration.html"):
        AutoStructuredGuide(discrete)()
    with pytest.raises(ValueError, match="ProjectedNormalReparam"):
        AutoStructuredGuide(sphere)()


def test_sites_are_emitted_in_model_order_so_trace_mean_field_does_not_warn():
    """A star: the hub is eliminated last, so the family's order differs from the model's."""
    def model():
        leaves = [pyro.sample(f"leaf{i}", dist.Normal(0.0, 1.0)) for i in range(3)]
        hub = pyro.sample("hub", dist.Normal(sum(leaves), 1.0))
        pyro.sample("obs", dist.Normal(hub, 1.0), obs=torch.tensor(0.5))

    guide = AutoStructuredGuide(model)
    guide()
    family_order = [guide._site_names[b.node] for b in guide.family.blocks]
    assert family_order != ["leaf0", "leaf1", "leaf2", "hub"]  # the reordering is real
    trace = poutine.trace(guide).get_trace()
    assert [n for n, s in trace.nodes.items() if s["type"] == "sample" and not s["infer"].get("is_auxiliary")] \
        == ["leaf0", "leaf1", "leaf2", "hub"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TraceMeanField_ELBO().loss(model, guide)


def test_dagdgp_median_quantiles_and_posterior_are_site_shaped():
    model, inputs, data = chain_problem()
    guide = AutoStructuredGuide(model, init_scale={"a": 0.5})
    guide(inputs, data)
    median, q = guide.median(), guide.quantiles([0.25, 0.75])
    for node in ("a", "b"):
        site = f"{node}.u"
        assert median[site].shape == (1, 5) and q[site].shape == (2, 1, 5)
    # the whitened inducing outputs start at N(0, s²): quantiles are ±0.674 s around 0
    torch.testing.assert_close(q["a.u"][1], torch.full((1, 5), 0.5 * 0.6744897501960817, dtype=torch.float64))
    torch.testing.assert_close(q["b.u"][0], torch.full((1, 5), -0.6744897501960817, dtype=torch.float64))
    post = guide.get_posterior()
    assert post.event_shape == (guide.latent_dim,) == (10,)
    torch.testing.assert_close(post.variance, torch.tensor([0.25] * 5 + [1.0] * 5, dtype=torch.float64))


def test_generic_init_scale_dict_names_sites():
    def model():
        pyro.sample("x", dist.Normal(0.0, 1.0))
        pyro.sample("y", dist.Normal(torch.zeros(2), 1.0).to_event(1))

    guide = AutoStructuredGuide(model, init_scale={"y": 0.5})
    guide()
    torch.testing.assert_close(guide._loc_scale()[1], torch.tensor([0.1, 0.5, 0.5]))
    with pytest.raises(ValueError, match="'z'"):
        AutoStructuredGuide(model, init_scale={"z": 0.5}, name="bad")()


def test_dagdgp_init_scale_dict_naming_an_unknown_node_is_refused_at_construction():
    """Earlier the unknown name was ignored without a word (the node kept its default scale)."""
    model, inputs, data = chain_problem()
    with pytest.raises(ValueError, match=r"init_scale names \['nope'\], which are not GP nodes.*\['a', 'b'\]"):
        AutoStructuredGuide(model, init_scale={"nope": 0.1, "b": 0.2})
    AutoStructuredGuide(model, init_scale={"b": 0.2})


def test_a_guide_that_never_ran_raises_not_fitted():
    """Earlier a RuntimeError (e.g. predicting after train was interrupted in its mean-field warm start)."""
    from pyro_dag.errors import NotFittedError

    model, inputs, data = chain_problem()
    guide = AutoStructuredGuide(model)
    with pytest.raises(NotFittedError, match="the guide has not been run yet.*train it"):
        guide.inducing_posterior()
