import math

import networkx as nx
import numpy as np
import pandas as pd
import pyro
import pytest
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.infer import MCMC, NUTS, SVI, Trace_ELBO

from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.sem import LatentSEM, SEMSpecError, SpaceFillingPrior, quadratic_features
from pyro_dag.sem.guides import sem_guide
from pyro_dag.sem.predict import guide_samples, latent_means, predictive_log_likelihood

IND = {"A": ["a1", "a2", "a3"], "B": ["b1", "b2", "b3"]}


def frame(n=40, seed=0, f=lambda a: 2 * a):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = f(a) + 0.3 * rng.normal(size=n)
    cols = {}
    for i, c in enumerate(IND["A"]):
        cols[c] = (1.0 + 0.3 * i) * a + 0.5 * rng.normal(size=n) + i
    for i, c in enumerate(IND["B"]):
        cols[c] = (1.0 - 0.2 * i) * b + 0.3 * rng.normal(size=n) - i
    return pd.DataFrame(cols), a, b


def test_sites_shapes_and_anchor_constants():
    df, _, _ = frame()
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, anchors={"A": "a1", "B": "b2"}, num_inducing=7)
    tr = poutine.trace(model).get_trace(df)
    shapes = {k: tuple(s["value"].shape) for k, s in tr.nodes.items() if s["type"] == "sample"}
    assert shapes["B.xbar"] == (7, 1) and shapes["B.u"] == (7,)
    assert shapes["A.x"] == (40,) and shapes["B.x"] == (40,)
    assert shapes["indicators.intercept"] == (4,) and shapes["indicators.loading"] == (4,)
    assert shapes["indicators.noise"] == (6,) and shapes["indicators.y"] == (40, 6)
    g = {k: s["value"] for k, s in tr.nodes.items() if s["type"] == "sample"}
    with poutine.block(), poutine.condition(data=g):
        icpt, load, _ = model.measurement_params(model.sample_globals())
    # anchors: loading exactly 1, intercept exactly 0; non-anchors carry the sampled values
    assert load[0, 0] == 1 and icpt[0] == 0 and load[4, 1] == 1 and icpt[4] == 0
    assert torch.equal(load[[1, 2, 3, 5], [0, 0, 1, 1]], g["indicators.loading"])
    assert torch.equal(icpt[[1, 2, 3, 5]], g["indicators.intercept"])
    assert load[0, 1] == 0 and load[3, 0] == 0  # sparse measurement model


def test_gp_equation_is_the_pseudo_input_conditional():
    """X_B | X_A, x̄, f̄ ~ N(K_xz K_zz⁻¹ f̄, k_xx - K_xz K_zz⁻¹ K_zx + υ_ζ) (Silva & Gramacy 2010, Eq. (3)), dense."""
    df, _, _ = frame()
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=6, jitter=1e-10)
    tr = poutine.trace(model).get_trace(df)
    g = {k: s["value"] for k, s in tr.nodes.items() if s["type"] == "sample"}
    Z, u = g["B.xbar"], g["B.u"]
    var, ls, zeta = g["kernels.B.variance"], g["kernels.B.lengthscale"], g["B.zeta_var"]
    xa = g["A.x"].unsqueeze(-1)
    k = lambda p, q: var * torch.exp(-0.5 * ((p / ls).unsqueeze(-2) - (q / ls).unsqueeze(-3)).pow(2).sum(-1))
    Kzz = k(Z, Z)
    fbar = torch.linalg.cholesky(Kzz) @ u
    mean = k(xa, Z) @ torch.linalg.solve(Kzz, fbar)
    v = var - (k(xa, Z) * torch.linalg.solve(Kzz, k(Z, xa)).T).sum(-1) + zeta
    site = tr.nodes["B.x"]["fn"]
    # (tolerance: the model factorises K(Z, Z) + jitter, the reference solves with K(Z, Z))
    torch.testing.assert_close(site.loc, mean, rtol=1e-3, atol=1e-5)
    torch.testing.assert_close(site.variance, v, rtol=1e-3, atol=1e-5)


def test_quadratic_features():
    x = torch.tensor([[2.0, 3.0]])
    torch.testing.assert_close(quadratic_features(x), torch.tensor([[2.0, 3.0, 4.0, 6.0, 9.0]]))


def test_mixture_exogenous_and_missing_values():
    df, _, _ = frame()
    df.iloc[3, 1] = np.nan
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, exogenous="mixture", num_components=2, num_inducing=5)
    tr = poutine.trace(model).get_trace(df)
    assert isinstance(tr.nodes["A.x"]["fn"], dist.MixtureSameFamily)
    assert tr.nodes["A.weights"]["value"].shape == (2,)
    y = tr.nodes["indicators.y"]
    assert bool(torch.isfinite(y["fn"].log_prob(y["value"])).all())
    tr.compute_log_prob()
    full = tr.nodes["indicators.y"]["log_prob"][3]
    # the missing entry's factor is dropped: the case's density is the other five Gaussians
    mu = y["fn"].base_dist.base_dist.loc[3]
    sd = y["fn"].base_dist.base_dist.scale[3]
    obs = y["value"][3]
    keep = [0, 2, 3, 4, 5]
    torch.testing.assert_close(full, dist.Normal(mu[keep], sd[keep]).log_prob(obs[keep]).sum())


def test_space_filling_prior():
    p = SpaceFillingPrior(5, 2, bound=2.0)
    z = p.sample()
    assert z.shape == (5, 2) and bool((z.abs() <= 2).all())
    r2 = (z.unsqueeze(-2) - z.unsqueeze(-3)).pow(2).sum(-1)
    D = torch.exp(-r2 / (2 * 0.01)) + 1e-4 * torch.eye(5)
    torch.testing.assert_close(p.log_prob(z), torch.logdet(D))
    assert p.log_prob(z + 10.0) == -math.inf
    # spreading out raises the density
    close = torch.zeros(5, 2) + torch.linspace(0, 0.05, 5).unsqueeze(-1)
    far = torch.zeros(5, 2) + torch.linspace(-1.5, 1.5, 5).unsqueeze(-1)
    assert p.log_prob(far) > p.log_prob(close)


def test_predictive_log_likelihood_matches_the_gaussian_marginal():
    """Linear SEM with Gaussian exogenous latents: p(y) is Gaussian in closed form; the Monte Carlo / exact-sink
    estimator must match it (one posterior draw)."""
    df, _, _ = frame(n=30)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, equations="linear")
    tr = poutine.trace(model).get_trace(df)
    names = [k for k, s in tr.nodes.items() if s["type"] == "sample" and not s["is_observed"] and not k.endswith(".x")]
    g = {k: tr.nodes[k]["value"] for k in names}
    g["indicators.noise"] = torch.full((6,), 0.4)  # a moderate noise keeps the Monte Carlo error small
    samples = {k: v.unsqueeze(0) for k, v in g.items()}
    with poutine.block(), poutine.condition(data=g):
        icpt, load, noise = model.measurement_params(model.sample_globals())
    mA, vA = g["A.loc"], g["A.var"]
    c, b0, z = g["B.coef"][0], g["B.bias"], g["B.zeta_var"]
    m = torch.stack([mA, b0 + c * mA])
    C = torch.stack([torch.stack([vA, c * vA]), torch.stack([c * vA, c * c * vA + z])])
    y, mask = model.prepare(df)
    ref = dist.MultivariateNormal(icpt + load @ m, load @ C @ load.T + torch.diag(noise)).log_prob(y)
    ref = ref.numpy() - np.log(model.scaler.scale).sum()
    est = predictive_log_likelihood(model, samples, df, num_latent_samples=50000)
    np.testing.assert_allclose(est, ref, atol=0.08)  # Monte Carlo over A: error s.d. about 0.02
    # plain Monte Carlo over both latents agrees too (looser: it is noisier)
    est_mc = predictive_log_likelihood(model, samples, df, num_latent_samples=20000, exact_sinks=False)
    np.testing.assert_allclose(est_mc, ref, atol=0.3)


@pytest.mark.slow  # 12.5 s on two workers (over the suite's 10 s bound)
def test_svi_with_subsampling_and_recovery():
    """Small synthetic problem (B = 2 A): posterior latent means track the truth, loadings are recovered."""
    df, a, b = frame(n=120, seed=1)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=8)
    guide = sem_guide(model)
    svi = SVI(model, guide, pyro.optim.ClippedAdam({"lr": 0.03}), Trace_ELBO())
    for _ in range(600):
        loss = svi.step(df, subsample_size=60)
        assert math.isfinite(loss)
    samples = guide_samples(model, guide, df, num_samples=50)
    means = latent_means(model, samples)
    assert np.corrcoef(means["A"], a)[0, 1] > 0.95
    assert np.corrcoef(means["B"], b)[0, 1] > 0.98
    # loading of a2 on A: (1.3 / 1.0) in raw units -> (1.3 s_a1 / s_a2) standardised
    s = model.scaler.scale
    lam = samples["indicators.loading"].mean(0)
    np.testing.assert_allclose(lam[0].item(), 1.3 * s[0] / s[1], rtol=0.15)
    np.testing.assert_allclose(lam[2].item(), 0.8 * s[3] / s[4], rtol=0.15)  # b2 on B (b1 is the anchor)
    np.testing.assert_allclose(lam[3].item(), 0.6 * s[3] / s[5], rtol=0.15)
    # the anchor fixes the scale: posterior-mean latents in anchor units match the truth's scale
    np.testing.assert_allclose(np.std(means["A"]), np.std(a), rtol=0.15)
    lp = predictive_log_likelihood(model, samples, df.iloc[:20], num_latent_samples=200, max_draws=10)
    assert lp.shape == (20,) and np.isfinite(lp).all()


def test_structured_guide_over_the_whole_model_runs():
    df, _, _ = frame(n=30)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=5)
    guide = AutoStructuredGuide(model, init_loc_fn=model.init_loc_fn)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    losses = [svi.step(df, subsample_size=10) for _ in range(20)]
    assert all(math.isfinite(v) for v in losses)
    assert guide.median(df)["A.x"].shape == (30,)


def test_nuts_runs_from_init():
    df, _, _ = frame(n=25)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=4, pseudo_input_prior="space_filling")
    model(df)
    mcmc = MCMC(NUTS(model, init_strategy=model.init_loc_fn, max_tree_depth=4), warmup_steps=15, num_samples=10,
                disable_progbar=True)
    mcmc.run(df)
    s = mcmc.get_samples()
    assert s["A.x"].shape == (10, 25) and s["B.xbar"].shape == (10, 4, 1)
    assert bool((s["B.xbar"].abs() <= model.bound).all())


def test_generate_new_cases():
    df, _, _ = frame(n=20)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=4, non_gaussian=["a2"])
    model(df)
    tr = poutine.trace(model).get_trace(None, num_cases=7)
    assert tr.nodes["indicators.y"]["value"].shape == (7, 5)
    assert tr.nodes["indicators.y_t"]["value"].shape == (7, 1)
    assert isinstance(tr.nodes["indicators.y_t"]["fn"].base_dist, dist.StudentT)


def test_dense_unidentified_measurement_model():
    df, _, _ = frame(n=20)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, measurement="dense", check_identifiability=False,
                      num_inducing=4)
    tr = poutine.trace(model).get_trace(df)
    assert tr.nodes["indicators.loading"]["value"].shape == (12,)  # every indicator on both latents, none fixed
    assert tr.nodes["indicators.intercept"]["value"].shape == (6,)
    g = {k: s["value"] for k, s in tr.nodes.items() if s["type"] == "sample"}
    with poutine.block(), poutine.condition(data=g):
        _, load, _ = model.measurement_params(model.sample_globals())
    torch.testing.assert_close(load.reshape(-1), g["indicators.loading"])
    assert model.init_loc_fn(tr.nodes["A.x"]).shape == (20,)  # no anchor: started from the prior


@pytest.mark.parametrize("scale", [1e300, 1e160])
def test_data_whose_standard_deviation_overflows_is_refused(scale):
    """Standardised with an infinite s.d., every value of the column became 0 and the fit trained to NaN."""
    from pyro_dag.sem import SEMSpecError

    df, _, _ = frame()
    df["a2"] = df["a2"] * scale
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=5)
    with pytest.raises(SEMSpecError, match="indicator 'a2' reaches .* overflows float64.*rescale the column"):
        model.prepare(df)


@pytest.mark.parametrize("size", [0, -3, 50, 2.5, True])
def test_subsample_size_outside_one_to_n_is_refused(size):
    """subsample_size above n (Pyro silently used n) or below 1 (a raw Pyro error): a clear error naming n."""
    df, _, _ = frame(n=20)
    model = LatentSEM(nx.DiGraph([("A", "B")]), IND, num_inducing=5)
    with pytest.raises(SEMSpecError, match=r"subsample_size must be an integer between 1 and the number of cases "
                                           r"n = 20"):
        model(df, subsample_size=size)
    with pytest.raises(SEMSpecError, match="subsample_size"):
        model.create_plates(df, subsample_size=size)
    assert model(df, subsample_size=20) is not None


def test_a_duplicated_column_and_a_single_row_are_named_for_what_they_are():
    """A duplicated indicator column was reported as columns of different lengths, one row as a constant indicator."""
    import numpy as np
    import pandas as pd

    from pyro_dag.sem.data import indicator_array
    from pyro_dag.sem.identifiability import SEMSpecError

    frame = pd.DataFrame(np.arange(12.0).reshape(4, 3), columns=["a", "b", "b"])
    with pytest.raises(SEMSpecError, match="column 'b' twice"):
        indicator_array(frame, ["a", "b"])
    with pytest.raises(SEMSpecError, match="one row"):
        indicator_array(pd.DataFrame({"a": [1.0], "b": [2.0]}), ["a", "b"])
