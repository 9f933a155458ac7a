"""Latent per-case inputs of DAGDGP (hidden confounders): ``DAGDGP(graph, latent_inputs={"h": d})``.

The per-case latent layer of Salimbeni, Dutordoir, Hensman & Deisenroth (2019), "Deep Gaussian processes with
importance-weighted variational inference", used as a confounder by Perlino et al. (2026), arXiv:2607.09645,
Sec. 6 (KL added as in App. E.3.4).
"""
import logging

import networkx as nx
import pandas as pd
import pyro
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from pyro_dag import DAGDGP, DAGInputError
from pyro_dag.infer import DAGELBO, marginal_pass
from pyro_dag.infer.autoguide import AutoStructuredGuide

CONFOUNDED = [("h", "a"), ("h", "b"), ("x", "b")]


def confounded_data(n, seed):
    """``h ~ N(0, 1)`` confounds ``a = h + sin(h) / 2`` and ``b = h + sin(2 x)`` (noise sd 0.05); ``x ~ N(0, 1)``."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    x = torch.randn(n, 1, generator=gen, dtype=torch.float64)
    a = h + 0.5 * torch.sin(h) + 0.05 * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    b = h + torch.sin(2 * x) + 0.05 * torch.randn(n, 1, generator=gen, dtype=torch.float64)
    return h, x, a, b


def corr(u, v):
    return float(torch.corrcoef(torch.cat([u.reshape(1, -1), v.reshape(1, -1)]))[0, 1])


def rmse(u, v):
    return float((u - v).pow(2).mean().sqrt())


def fit(model, guide, inputs, data, steps, elbo, lr=0.03, **kwargs):
    svi = SVI(model, guide, pyro.optim.Adam({"lr": lr}), elbo)
    for _ in range(steps):
        loss = svi.step(inputs, data, **kwargs)
    return loss


def fit_confounded(n, steps, elbo, structure="mean_field", seed=0):
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    h, x, a, b = confounded_data(n, 0)
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}, num_inducing=12).double()
    guide = AutoStructuredGuide(model, precision=structure)
    fit(model, guide, {"x": x}, {"a": a, "b": b}, steps, elbo)
    return model, guide, h


def no_latent_rmse(n, steps, xt, bt):
    """The model without the confounder (``x -> b``): RMSE of its predictive mean of ``b``."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    _, x, _, b = confounded_data(n, 0)
    model = DAGDGP(nx.DiGraph([("x", "b")]), num_inducing=12).double()
    guide = AutoStructuredGuide(model, precision="mean_field")
    fit(model, guide, {"x": x}, {"b": b}, steps, DAGELBO(num_particles=4))
    return rmse(model.predict(guide, {"x": xt}, num_samples=100)["b"].mean, bt)


@pytest.fixture(scope="module")
def no_latent_baseline():
    """``no_latent_rmse(150, 400, ...)`` on the held-out cases ``confounded_data(100, 1)``: the baseline of both
    recovery tests below (the DAGELBO and the encoder one), fitted once (it seeds itself, so it is the same fit)."""
    _, xt, _, bt = confounded_data(100, 1)
    return no_latent_rmse(150, 400, xt, bt)


# ---------------------------------------------------------------------------------------------- recovery
def test_dagelbo_recovers_confounder_and_predicts_better_than_without_it(no_latent_baseline):
    model, guide, h = fit_confounded(150, 400, DAGELBO(num_particles=4))
    # training cases: the guide's per-case posterior means
    assert abs(corr(guide.median()["h.x"], h)) >= 0.9
    # held-out cases: h inferred from their observed a, then b predicted from x and h
    ht, xt, at, bt = confounded_data(100, 1)
    pyro.set_rng_seed(1)
    pred = model.predict(guide, {"x": xt}, {"a": at}, nodes=["b", "h"], num_samples=100, latent_steps=200)
    assert pred["h"].samples.shape == (100, 100, 1)
    assert abs(corr(pred["h"].mean, ht)) >= 0.9
    with_latent = rmse(pred["b"].mean, bt)
    assert with_latent < 0.6 * no_latent_baseline  # measured 0.32 vs 1.10


def test_trace_elbo_recovers_confounder():
    model, guide, h = fit_confounded(150, 400, Trace_ELBO())
    assert abs(corr(guide.median()["h.x"], h)) >= 0.9  # measured 0.95


@pytest.mark.slow
@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
@pytest.mark.parametrize("estimator", ["dagelbo", "trace"])
def test_recovers_confounder_long(structure, estimator):
    elbo = DAGELBO(num_particles=8) if estimator == "dagelbo" else Trace_ELBO(num_particles=4, vectorize_particles=True)
    model, guide, h = fit_confounded(300, 1500, elbo, structure=structure)
    assert abs(corr(guide.median()["h.x"], h)) >= 0.95
    ht, xt, at, bt = confounded_data(200, 1)
    pred = model.predict(guide, {"x": xt}, {"a": at}, nodes=["b", "h"], num_samples=200, latent_steps=500)
    assert abs(corr(pred["h"].mean, ht)) >= 0.95
    assert rmse(pred["b"].mean, bt) < 0.5 * no_latent_rmse(300, 1500, xt, bt)


# ---------------------------------------------------------------------------------------------- estimators
@pytest.fixture(scope="module")
def small():
    """A briefly trained 12-case confounded model (chordal guide with the model's create_plates, so that the
    subsample can be chosen per call)."""
    n = 12
    gen = torch.Generator().manual_seed(0)
    h, x = torch.randn(n, 1, generator=gen, dtype=torch.float64), torch.randn(n, 1, generator=gen, dtype=torch.float64)
    a, b = h + 0.1 * torch.randn(n, 1, generator=gen, dtype=torch.float64), h + x
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    # noise 0.1, learned (not the noise rule): a 12-case, 100-step fit whose ELBO estimates are precise enough for
    # the teeth of the estimator tests below
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}, num_inducing=4, noise="learned").double()
    guide = AutoStructuredGuide(model, precision="chordal", create_plates=model.create_plates)
    fit(model, guide, {"x": x}, {"a": a, "b": b}, 100, DAGELBO(num_particles=2), lr=0.05)
    return model, guide, {"x": x}, {"a": a, "b": b}


def q_h(guide):
    """``(loc, scale)`` ``[n, 1]`` of the guide's per-case Gaussian on ``"h.x"`` (its inner AutoNormal)."""
    loc, scale = guide.other_guide._get_loc_and_scale("h.x")
    return loc.detach(), scale.detach()


def mean_and_se(values):
    values = torch.tensor(values)
    return float(values.mean()), float(values.std() / len(values) ** 0.5)


@pytest.mark.parametrize("sampler", ["conditional", "joint"])
def test_trace_elbo_and_dagelbo_estimate_the_same_elbo(small, sampler):
    model, guide, inputs, data = small
    pyro.set_rng_seed(0)
    dagelbo = DAGELBO(num_particles=8, sampler=sampler)
    dag_mean, dag_se = mean_and_se([dagelbo.loss(model, guide, inputs, data) for _ in range(800)])
    trace = Trace_ELBO(num_particles=100, vectorize_particles=True, max_plate_nesting=1)
    tr_mean, tr_se = mean_and_se([trace.loss(model, guide, inputs, data) for _ in range(40)])
    assert abs(dag_mean - tr_mean) < 4 * (dag_se ** 2 + tr_se ** 2) ** 0.5
    # teeth: the latent inputs' KL is of the order of the difference a wrong estimator would make
    locs, scales = q_h(guide)
    h_kl = float((0.5 * (locs ** 2 + scales ** 2 - 1) - torch.log(scales)).sum())
    assert h_kl > 20 * (dag_se ** 2 + tr_se ** 2) ** 0.5


def test_latent_log_density_scaled_by_n_over_B(small):
    model, guide, inputs, data = small
    idx = torch.tensor([0, 5, 7])
    guide_trace = poutine.trace(guide).get_trace(inputs, data, subsample=idx)
    model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(inputs, data, subsample=idx)
    for trace in (guide_trace, model_trace):
        site = trace.nodes["h.x"]
        assert site["value"].shape == (3, 1)
        assert site["scale"] == pytest.approx(12 / 3)
    meta = poutine.trace(model).get_trace(inputs, data).nodes["h.x"]["infer"]["dag"]
    assert meta["role"] == "latent_input" and meta["node"] == "h" and meta["shape"] == (1,)


def test_create_plates_lets_each_call_choose_its_minibatch(small):
    model, guide, inputs, data = small
    for kwargs, size in [({}, 12), ({"subsample_size": 5}, 5), ({"subsample": torch.tensor([1, 2])}, 2)]:
        trace = poutine.trace(guide).get_trace(inputs, data, **kwargs)
        assert trace.nodes["h.x"]["value"].shape == (size, 1)
    # the default for a model with latent inputs is the model's plate: a full-batch call after a minibatch one
    # covers every case (with Pyro's default it would silently keep the first call's size)
    default = AutoStructuredGuide(model, precision="mean_field", name="default")
    default(inputs, data, subsample_size=4)
    assert poutine.trace(default).get_trace(inputs, data).nodes["h.x"]["value"].shape == (12, 1)
    plain = AutoStructuredGuide(model, precision="mean_field", name="plain", create_plates=lambda *a, **k: [])
    plain(inputs, data, subsample_size=4)
    assert poutine.trace(plain).get_trace(inputs, data).nodes["h.x"]["value"].shape == (4, 1)
    frame = {"x": pd.DataFrame({"x": inputs["x"][:, 0].numpy()})["x"]}
    assert model.create_plates(frame).size == 12


def test_subsampled_elbo_averages_to_full_batch_elbo(small):
    """Over a partition of the 12 cases into batches of 3, the mean of the minibatch ELBOs is the full-batch ELBO
    (each case enters once with weight n/B): the likelihood and the latents' KL are scaled by n/B."""
    model, guide, inputs, data = small
    pyro.set_rng_seed(0)
    elbo = DAGELBO(num_particles=8)
    full_mean, full_se = mean_and_se([elbo.loss(model, guide, inputs, data) for _ in range(400)])
    batches = torch.arange(12).reshape(4, 3)
    sub = [sum(elbo.loss(model, guide, inputs, data, subsample=idx) for idx in batches) / 4 for _ in range(400)]
    sub_mean, sub_se = mean_and_se(sub)
    assert abs(full_mean - sub_mean) < 4 * (full_se ** 2 + sub_se ** 2) ** 0.5
    # teeth: the latents' KL of the cases is much larger than the tolerance (unscaled, it would be off by 3/4 of it)
    locs, scales = q_h(guide)
    h_kl = float((0.5 * (locs ** 2 + scales ** 2 - 1) - torch.log(scales)).sum())
    assert 0.75 * h_kl > 10 * (full_se ** 2 + sub_se ** 2) ** 0.5


@pytest.mark.parametrize("parallel", [False, True])
def test_predictive_samples_latent_inputs_from_the_guide(small, parallel):
    model, guide, inputs, _ = small
    logging.getLogger("pyro").setLevel(logging.WARNING)
    pyro.set_rng_seed(0)
    samples = Predictive(model, guide=guide, num_samples=400, parallel=parallel)(inputs)
    assert samples["h.x"].shape == (400, 12, 1)
    assert samples["a.y"].shape == (400, 12, 1) and samples["b.y"].shape == (400, 12, 1)
    locs, scales = q_h(guide)
    assert torch.allclose(samples["h.x"].mean(0), locs, atol=4 * float(scales.max()) / 20)
    # the observations follow the latent: b's predictive mean tracks h's
    assert corr(samples["b.f"].mean(0), locs + inputs["x"]) > 0.9


# ---------------------------------------------------------------------------------------------- sampler shapes
@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_marginal_pass_per_sample_latents_equal_separate_passes(small, structure):
    """``latent={h: [S, B, d]}`` gives, sample by sample, the pass with ``latent={h: [B, d]}`` (same noise)."""
    model, guide, inputs, _ = small
    if structure == "chordal":
        posterior = guide.inducing_posterior()
    else:
        posterior = AutoStructuredGuide(model, precision="mean_field", name="mf")
        posterior(inputs, {"a": torch.zeros(12, 1, dtype=torch.float64)})
        posterior = posterior.inducing_posterior()
    S = 3
    gen = torch.Generator().manual_seed(0)
    hs = torch.randn(S, 12, 1, generator=gen, dtype=torch.float64)
    noise = {w: torch.randn(S, 12, 1, generator=gen, dtype=torch.float64) for w in model.topo_nodes}
    with torch.no_grad():
        joint = marginal_pass(model, posterior, inputs, S, noise=noise, latent={"h": hs})
        for s in range(S):
            one = marginal_pass(model, posterior, inputs, 1, noise={w: v[s:s + 1] for w, v in noise.items()},
                                      latent={"h": hs[s]})
            for w in model.topo_nodes:
                for j in range(3):
                    assert torch.allclose(joint[w][j][s], one[w][j][0], atol=1e-10)
    with pytest.raises(ValueError, match="latent inputs"):
        marginal_pass(model, posterior, inputs, S)


# ---------------------------------------------------------------------------------------------- new cases
def test_new_cases_with_nothing_observed_keep_the_prior(small):
    model, guide, inputs, _ = small
    a = torch.linspace(-2, 2, 12, dtype=torch.float64).unsqueeze(-1)
    a[[2, 9]] = float("nan")
    q = model.infer_latent_inputs(guide, inputs, {"a": a}, num_steps=50)
    loc, scale = q["h"]
    assert loc.shape == scale.shape == (12, 1)
    assert torch.equal(loc[[2, 9]], torch.zeros(2, 1, dtype=torch.float64))
    assert torch.equal(scale[[2, 9]], torch.ones(2, 1, dtype=torch.float64))
    seen = [i for i in range(12) if i not in (2, 9)]
    assert bool((scale[seen] < 0.9).all())                        # the observation of a informs h
    assert corr(loc[seen], a[seen]) > 0.9                         # a = h + noise in this model
    # the fit leaves the model's and the guide's gradients alone
    assert all(p.grad is None or not bool(p.grad.any()) for p in list(model.parameters()) + list(guide.parameters()))
    # without data, the prior for every case, and the result does not depend on batch_size
    pyro.set_rng_seed(3)
    pred = model.predict(guide, inputs, nodes=["h", "b"], num_samples=2000)
    assert torch.equal(pred["h"].loc[0], torch.zeros(12, 1, dtype=torch.float64))
    assert abs(float(pred["h"].samples.std()) - 1.0) < 0.03
    pyro.set_rng_seed(3)
    chunked = model.predict(guide, inputs, nodes=["h", "b"], num_samples=2000, batch_size=5)
    for w in ("h", "b"):
        assert torch.allclose(chunked[w].samples, pred[w].samples, atol=1e-12)


def test_predict_with_a_non_structured_guide():
    """AutoNormal over every site (Trace_ELBO): predict draws U from the guide, and still infers h from a."""
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    h, x, a, b = confounded_data(100, 0)
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}, num_inducing=8).double()
    guide = AutoNormal(model)
    fit(model, guide, {"x": x}, {"a": a, "b": b}, 300, Trace_ELBO())
    ht, xt, at, bt = confounded_data(50, 1)
    pred = model.predict(guide, {"x": xt}, {"a": at}, nodes=["h", "a"], num_samples=50, latent_steps=100)
    assert pred["h"].samples.shape == (50, 50, 1)
    assert abs(corr(pred["h"].mean, ht)) > 0.9               # measured 0.99
    assert corr(pred["a"].mean, at) > 0.9                    # a propagated from the inferred h


def test_model_whose_roots_are_all_latent_counts_cases_from_the_data():
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(30, 1, generator=gen, dtype=torch.float64)
    data = {"a": h + 0.1 * torch.randn(30, 1, generator=gen, dtype=torch.float64), "b": -h}
    pyro.clear_param_store()
    model = DAGDGP(nx.DiGraph([("h", "a"), ("h", "b")]), latent_inputs={"h": 1}, num_inducing=4).double()
    guide = AutoStructuredGuide(model)
    fit(model, guide, {}, data, 5, DAGELBO(num_particles=2), subsample_size=10)
    assert guide.median()["h.x"].shape == (30, 1)
    pred = model.predict(guide, {}, {"a": data["a"][:7]}, num_samples=4, latent_steps=5)
    assert pred["b"].samples.shape == (4, 7, 1)
    with pytest.raises(DAGInputError, match="every root of the graph is a latent input"):
        model.predict(guide, {}, num_samples=4)


# ---------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("edges, latent, match", [
    (CONFOUNDED, {"x": 1, "h": 1}, None),  # fine: two latent roots
    (CONFOUNDED, {"z": 1}, "'z', which is not in the graph"),
    (CONFOUNDED + [("c", "h")], {"h": 1}, "latent input 'h' has parents \\['c'\\].*remove its incoming edges"),
    (CONFOUNDED, {"a": 1}, "latent input 'a' has parents"),
    (CONFOUNDED, {"h": 0}, "latent_inputs\\['h'\\] must be a positive integer"),
    (CONFOUNDED, {"h": -2}, "must be a positive integer"),
    (CONFOUNDED, {"h": 1.5}, "must be a positive integer"),
    (CONFOUNDED, {"h": True}, "must be a positive integer"),
    (CONFOUNDED, ["h"], "latent_inputs must be a dict"),
])
def test_bad_latent_inputs_at_construction(edges, latent, match):
    if match is None:
        assert DAGDGP(nx.DiGraph(edges), latent_inputs=latent).latent_inputs == {"h": 1, "x": 1}
        return
    with pytest.raises(DAGInputError, match=match):
        DAGDGP(nx.DiGraph(edges), latent_inputs=latent)


def test_latent_input_without_children():
    g = nx.DiGraph(CONFOUNDED)
    g.add_node("z")
    with pytest.raises(DAGInputError, match="latent input 'z' has no children.*add edges from 'z'"):
        DAGDGP(g, latent_inputs={"z": 1})


def test_latent_input_given_in_inputs_or_data():
    _, x, a, b = confounded_data(10, 0)
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}).double()
    with pytest.raises(DAGInputError, match="inputs has 'h', which is a latent input.*Remove it from inputs"):
        model({"x": x, "h": a}, {"a": a, "b": b})
    with pytest.raises(DAGInputError, match="'h' is a latent input.*Remove it from data"):
        model({"x": x}, {"a": a, "b": b, "h": a})
    with pytest.raises(DAGInputError, match="root 'x' has no design matrix"):
        model({}, {"a": a, "b": b})
    with pytest.raises(DAGInputError, match="kernels names root 'h'"):
        DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}, kernels={"h": None})


def test_case_with_a_missing_root_value():
    _, x, a, b = confounded_data(10, 0)
    x[4] = float("nan")
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}).double()
    with pytest.raises(DAGInputError, match=r"inputs\['x'\] contains NaN or inf \(first at row 4\).*impute or drop"):
        model({"x": x}, {"a": a, "b": b})


def test_predict_data_needs_latent_inputs_and_bad_fit_settings(small):
    model, guide, inputs, data = small
    with pytest.raises(DAGInputError, match="latent_lr"):
        model.predict(guide, inputs, {"a": data["a"]}, latent_lr=0.0)
    with pytest.raises(DAGInputError, match="latent_particles"):
        model.predict(guide, inputs, {"a": data["a"]}, latent_particles=0)
    with pytest.raises(DAGInputError, match="cannot predict node 'q'.*latent inputs: \\['h'\\]"):
        model.predict(guide, inputs, nodes=["q"])
    pyro.clear_param_store()
    _, x, _, b = confounded_data(10, 0)
    plain = DAGDGP(nx.DiGraph([("x", "b")]), num_inducing=4).double()
    g = AutoStructuredGuide(plain)
    g({"x": x}, {"b": b})
    with pytest.raises(DAGInputError, match="data is used only to infer latent inputs.*drop data"):
        plain.predict(g, {"x": x}, {"b": b})


# ---------------------------------------------------------------------------------------------- amortised encoder
def test_encoder_recovers_confounder_and_predicts_better_than_without_it(no_latent_baseline):
    from pyro_dag.infer.autoguide import AutoEncodedStructuredGuide

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    h, x, a, b = confounded_data(150, 0)
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}, num_inducing=12).double()
    guide = AutoEncodedStructuredGuide(model, precision="mean_field", nodes=["a"])
    fit(model, guide, {"x": x}, {"a": a, "b": b}, 400, DAGELBO(num_particles=4))
    assert abs(corr(guide[1].median({"x": x}, {"a": a, "b": b})["h.x"], h)) >= 0.9     # measured 0.99
    ht, xt, at, bt = confounded_data(100, 1)
    pred = model.predict(guide, {"x": xt}, {"a": at}, nodes=["b", "h"], num_samples=100)
    assert abs(corr(pred["h"].mean, ht)) >= 0.9                                        # measured 0.98
    assert rmse(pred["b"].mean, bt) < 0.6 * no_latent_baseline                         # measured 0.30 vs 1.10


def test_encoder_parameters_train_and_follow_the_subsample():
    from pyro_dag.infer.autoguide import AutoEncodedStructuredGuide, AutoLatentEncoder

    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    h, x, a, b = confounded_data(40, 0)
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1}, num_inducing=4).double()
    guide = AutoEncodedStructuredGuide(model, create_plates=model.create_plates)
    inputs, data = {"x": x}, {"a": a, "b": b}
    fit(model, guide, inputs, data, 1, Trace_ELBO(), subsample_size=8)
    encoder = guide[1]
    assert isinstance(encoder, AutoLatentEncoder)
    names = [n for n in pyro.get_param_store() if ".net." in n]
    assert len(names) == 6                                   # 3 layers x (weight, bias), all in the param store
    before = {n: pyro.param(n).detach().clone() for n in names}
    fit(model, guide, inputs, data, 3, DAGELBO(num_particles=2), subsample_size=8)
    assert all(not torch.equal(before[n], pyro.param(n).detach()) for n in names)
    trace = poutine.trace(guide).get_trace(inputs, data, subsample_size=5)
    site = trace.nodes["h.x"]
    assert site["value"].shape == (5, 1) and site["scale"] == pytest.approx(40 / 5)
    # the encoder's q(h) for new cases, the prior where nothing is observed
    a_new = a[:6].clone()
    a_new[2] = float("nan")
    pred = model.predict(guide, {"x": x[:6]}, {"a": a_new}, nodes=["h"], num_samples=3)
    with torch.no_grad():
        _, _, obs = model.checked_arguments({"x": x[:6]}, {"a": a_new})
        loc, scale = encoder.encode({"x": x[:6]}, obs, 6)["h"]
    keep = [0, 1, 3, 4, 5]
    assert torch.allclose(pred["h"].loc[0, keep], loc[keep])
    assert torch.allclose(pred["h"].var[0, keep], scale[keep] ** 2)
    assert float(pred["h"].loc[0, 2]) == 0.0 and float(pred["h"].var[0, 2]) == 1.0


def test_encoder_bad_input():
    from pyro_dag.infer.autoguide import AutoLatentEncoder

    with pytest.raises(ValueError, match="needs the DAGDGP itself"):
        AutoLatentEncoder(lambda: None)
    with pytest.raises(ValueError, match="the model has no latent inputs"):
        AutoLatentEncoder(DAGDGP(nx.DiGraph([("x", "b")])))
    model = DAGDGP(nx.DiGraph(CONFOUNDED), latent_inputs={"h": 1})
    with pytest.raises(ValueError, match="node 'q' is not a GP node"):
        AutoLatentEncoder(model, nodes=["q"])
    with pytest.raises(ValueError, match="hidden widths"):
        AutoLatentEncoder(model, hidden=(0,))
