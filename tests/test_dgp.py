import networkx as nx
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro.infer import MCMC, NUTS, SVI, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoMultivariateNormal, AutoNormal

from helpers import chain_problem, collider_problem, setup_guide
from pyro_dag import DAGDGP, DAGInputError, DAGStructureError, kernels
from pyro_dag.gp import NotPositiveDefiniteError
from pyro_dag.gp.likelihoods import Bernoulli, Gaussian, Poisson, StudentT
from pyro_dag.infer import DAGELBO, marginal_pass, train
from pyro_dag.infer.autoguide import AutoStructuredGuide

COLLIDER = nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])


def collider_inputs(n=6):
    return {"x1": torch.randn(n, 1), "x2": torch.randn(n, 1)}


# ----------------------------------------------------------------------------- bad input
def test_cyclic_graph():
    with pytest.raises(DAGStructureError, match="cycle"):
        DAGDGP(nx.DiGraph([("x", "a"), ("a", "b"), ("b", "a")]))


def test_root_without_design_matrix():
    model = DAGDGP(COLLIDER)
    with pytest.raises(DAGInputError, match=r"root 'x2' has no design matrix.*inputs\['x2'\]"):
        model({"x1": torch.randn(5, 1)}, {"w3": torch.randn(5, 1)})


def test_rows_mismatch():
    model = DAGDGP(COLLIDER)
    with pytest.raises(DAGInputError, match=r"inputs\['x2'\] has 4 rows.*one row per case"):
        model({"x1": torch.randn(5, 1), "x2": torch.randn(4, 1)})
    with pytest.raises(DAGInputError, match=r"data\['w3'\].*5 cases"):
        model(collider_inputs(5), {"w3": torch.randn(7, 1)})


def test_columns_mismatch():
    model = DAGDGP(COLLIDER)
    with pytest.raises(DAGInputError, match=r"data\['w3'\] has 2 columns.*output_dims=\{'w3': 2\}"):
        model(collider_inputs(5), {"w3": torch.randn(5, 2)})
    model(collider_inputs(5), {"w3": torch.randn(5, 1)})
    with pytest.raises(DAGInputError, match=r"inputs\['x1'\] has 3 columns.*set up with 1"):
        model({"x1": torch.randn(5, 3), "x2": torch.randn(5, 1)})


def test_nan_or_inf_in_root_input():
    model = DAGDGP(COLLIDER)
    x = collider_inputs(5)
    x["x1"][2, 0] = float("nan")
    with pytest.raises(DAGInputError, match=r"inputs\['x1'\] contains NaN or inf \(first at row 2\)"):
        model(x)
    x["x1"][2, 0] = float("inf")
    with pytest.raises(DAGInputError, match="'x1'"):
        model(x)


def test_unknown_node_names():
    model = DAGDGP(COLLIDER)
    with pytest.raises(DAGInputError, match="'zz'.*not in the graph"):
        model({**collider_inputs(5), "zz": torch.randn(5, 1)})
    with pytest.raises(DAGInputError, match="'zz'.*not in the graph"):
        model(collider_inputs(5), {"zz": torch.randn(5, 1)})
    with pytest.raises(DAGInputError, match="'zz'"):
        DAGDGP(COLLIDER, kernels={"zz": kernels.RBF()})


def test_non_root_in_inputs():
    model = DAGDGP(COLLIDER)
    with pytest.raises(DAGInputError, match="node 'w1' is not a root.*remove it from inputs"):
        model({**collider_inputs(5), "w1": torch.randn(5, 1)})


def test_root_in_data_and_kernel_for_root():
    model = DAGDGP(COLLIDER)
    with pytest.raises(DAGInputError, match="'x1' is a root"):
        model(collider_inputs(5), {"x1": torch.randn(5, 1)})
    with pytest.raises(DAGInputError, match="root 'x1'"):
        DAGDGP(COLLIDER, likelihoods={"x1": "gaussian"})


def test_inf_in_data_and_empty_observations():
    model = DAGDGP(COLLIDER)
    y = torch.randn(5, 1)
    y[1] = float("inf")
    with pytest.raises(DAGInputError, match=r"data\['w3'\] contains inf"):
        model(collider_inputs(5), {"w3": y})
    with pytest.raises(DAGInputError, match=r"data\['w3'\] has no observed entries"):
        model(collider_inputs(5), {"w3": torch.full((5, 1), float("nan"))})


def test_mask_inconsistent_with_data():
    model = DAGDGP(COLLIDER)
    y = torch.randn(5, 1)
    y[0] = float("nan")
    with pytest.raises(DAGInputError, match=r"mask\['w3'\]"):
        model(collider_inputs(5), {"w3": y}, mask={"w3": torch.ones(5, 1, dtype=torch.bool)})


class NegatedRBF(kernels.RBF):
    """Not a valid kernel: its Gram matrices are negative definite."""

    def forward(self, X, Z=None, diag=False):
        return -super().forward(X, Z, diag)


def test_gram_not_positive_definite_after_jitter_ladder():
    model = DAGDGP(nx.DiGraph([("x", "a")]), kernels={"a": NegatedRBF()}, num_inducing=4).double()
    with pytest.raises(NotPositiveDefiniteError, match="node 'a'.*inducing"):
        model({"x": torch.randn(5, 1)}, {"a": torch.randn(5, 1)})


def test_bad_inducing_shape():
    model = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=4, inducing_inputs={"a": torch.zeros(3, 1)})
    with pytest.raises(DAGInputError, match=r"node 'a'.*\[4, 1\]"):
        model({"x": torch.randn(5, 1)})


def test_one_kernel_instance_for_two_nodes_is_refused():
    rbf = kernels.RBF()
    with pytest.raises(DAGInputError, match="nodes 'w1' and 'w2' share the kernel instance RBF"):
        DAGDGP(COLLIDER, kernels={"w1": rbf, "w2": rbf})
    with pytest.raises(DAGInputError, match="nodes 'w1' and 'w3' share"):
        DAGDGP(COLLIDER, kernels={"w1": rbf, "w3": kernels.Additive(rbf)})
    DAGDGP(COLLIDER, kernels={"w1": rbf, "w2": kernels.RBF()})


def test_pandas_inputs_and_data_match_tensors():
    pd = pytest.importorskip("pandas")
    n = 6
    x = torch.linspace(-1, 1, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(x)
    y[2] = float("nan")
    graph = nx.DiGraph([("x", "a")])
    ref = DAGDGP(graph, num_inducing=3).double()
    ref.setup({"x": x}, {"a": y})
    frame = pd.DataFrame({"x": x[:, 0].numpy(), "a": y[:, 0].numpy()})
    forms = [({"x": frame[["x"]]}, {"a": frame["a"]}),            # dict of DataFrame / Series
             (frame[["x"]], frame[["a"]]),                        # DataFrames whose columns are nodes
             ({"x": frame["x"].astype("float32")}, {"a": frame["a"].astype("Float64")})]  # other numeric dtypes
    for i, (inputs, data) in enumerate(forms):
        pyro.clear_param_store()  # each form's model runs: without this, it would take the previous one's parameters
        model = DAGDGP(graph, num_inducing=3).double()
        model.setup(inputs, data)
        X, _ = model._check_inputs(inputs)
        assert X["x"].dtype == torch.float64 and torch.allclose(X["x"], x, atol=1e-7)
        if i < 2:  # float64 frames give the very same model as the tensors
            assert torch.equal(X["x"], x)
            assert torch.equal(model.inducing_inputs("a"), ref.inducing_inputs("a"))
        (yy, m), = model._check_data(data, None, n).values()
        assert torch.equal(m, ~torch.isnan(y)) and torch.allclose(yy[m], y[m])
        model(inputs, data)  # runs
    bad = frame.assign(colour=list("rgbrgb"))
    with pytest.raises(DAGInputError, match=r"inputs\['x'\] column 'colour' has dtype .*not numeric.*get_dummies"):
        DAGDGP(graph)({"x": bad[["x", "colour"]]})
    with pytest.raises(DAGInputError, match=r"data\['a'\] column 'a'"):
        DAGDGP(graph)({"x": x}, {"a": frame["a"].astype("category")})
    with pytest.raises(DAGInputError, match="'colour', which is not in the graph"):
        DAGDGP(graph)(bad[["x", "colour"]])


@pytest.mark.parametrize("size", [0, -1, 7, 2.5])
def test_bad_subsample_size(size):
    model = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=3)
    with pytest.raises(DAGInputError, match=r"subsample_size must be an integer between 1 and .*n = 6, got "
                                            + str(size)):
        model({"x": torch.randn(6, 1)}, {"a": torch.randn(6, 1)}, subsample_size=size)
    assert not model.is_setup  # checked before anything is set up


def test_bad_subsample_indices():
    model = DAGDGP(nx.DiGraph([("x", "a")]), num_inducing=3)
    inputs, data = {"x": torch.randn(6, 1)}, {"a": torch.randn(6, 1)}
    with pytest.raises(DAGInputError, match=r"subsample must .*\[0, n = 6\).* from 2 to 6"):
        model(inputs, data, subsample=torch.tensor([2, 6]))
    with pytest.raises(DAGInputError, match="1-d tensor of case indices"):
        model(inputs, data, subsample=torch.tensor([0.5]))
    with pytest.raises(DAGInputError, match="subsample_size = 3 but subsample has 2"):
        model(inputs, data, subsample_size=3, subsample=torch.tensor([0, 1]))
    model(inputs, data, subsample_size=2, subsample=torch.tensor([0, 5]))


@pytest.mark.parametrize("num_inducing, match", [(0, "num_inducing must .*node 'a'.*got 0"),
                                                 ({"b": -2}, r"num_inducing\['b'\] must .*node 'b'.*got -2"),
                                                 (2.5, "num_inducing must .*got 2.5")])
def test_bad_num_inducing_at_construction(num_inducing, match):
    with pytest.raises(DAGInputError, match=match):
        DAGDGP(nx.DiGraph([("x", "a"), ("a", "b")]), num_inducing=num_inducing)


def test_nan_inducing_inputs_name_the_node_and_the_cause():
    graph = nx.DiGraph([("x", "a"), ("a", "b")])
    inputs, data = {"x": torch.randn(6, 1)}, {"b": torch.randn(6, 1)}
    Z = torch.randn(3, 1)
    Z[1] = float("nan")
    with pytest.raises(DAGInputError, match=r"inducing inputs of node 'a' are NaN.*inducing_inputs\['a'\].*row 1"):
        DAGDGP(graph, num_inducing=3, inducing_inputs={"a": Z})(inputs, data)
    # inducing inputs that become NaN while training (learned ones), and NaN kernel hyperparameters
    model = DAGDGP(graph, num_inducing=3)
    model.setup(inputs, data)
    with torch.no_grad():
        model.inducing.a_unconstrained[1] = float("nan")
    with pytest.raises(NotPositiveDefiniteError, match="inducing inputs of node 'a' are NaN.*inputs or parents"):
        model(inputs, data)
    pyro.clear_param_store()
    model = DAGDGP(graph, num_inducing=3)
    model.setup(inputs, data)
    with torch.no_grad():
        model.kernels["b"].base.lengthscale_unconstrained.fill_(float("nan"))
    with pytest.raises(NotPositiveDefiniteError, match=r"kernel of node 'b' has non-finite .*base.lengthscale"):
        model(inputs, data)


def test_cholesky_of_a_non_finite_gram_names_the_node():
    from pyro_dag.gp import NonFiniteGramError, cholesky_with_jitter

    K = torch.eye(3, dtype=torch.float64)
    K[2, 2] = float("nan")
    with pytest.raises(NonFiniteGramError, match="node 'w'.*NaN or inf"):
        cholesky_with_jitter(K, node="w", upper=True)


# ----------------------------------------------------------------------------- forward & Pyro interop
def test_sites_shapes_and_metadata():
    model, inputs, data = collider_problem()
    tr = pyro.poutine.trace(model).get_trace(inputs, data)
    for w in ["w1", "w2", "w3"]:
        site = tr.nodes[f"{w}.u"]
        assert site["value"].shape == (1, 4)
        assert site["infer"]["dag"]["node"] == w and site["infer"]["dag"]["role"] == "inducing"
        assert tr.nodes[f"{w}.f"]["value"].shape == (12, 1)
    assert tr.nodes["w3.y"]["is_observed"]
    assert model.observed_nodes == ["w3"]
    assert model.inducing_inputs("w3").shape == (4, 2)


def test_inducing_initialisation_spans_latent_parent_range():
    model, inputs, data = collider_problem(M=8)
    model.setup(inputs, data)
    Z = model.inducing_inputs("w3")
    # latent parents with prior variance 1: spread over several standard deviations, few duplicates of sums
    assert Z.std(0).min() > 0.5
    assert torch.unique(Z.sum(-1).round(decimals=6)).numel() == 8
    # root-only parents use the data
    Zw1 = model.inducing_inputs("w1")
    assert Zw1.min() >= inputs["x1"].min() - 1e-9 and Zw1.max() <= inputs["x1"].max() + 1e-9


def test_dtype_and_device_follow_the_module(device):
    model, inputs, data = chain_problem()
    model = model.float().to(device)
    out = model(inputs, data)  # float64 CPU inputs are converted
    assert out["b"].dtype == torch.float32 and out["b"].device.type == device.type
    model.double()
    assert model(inputs, data)["b"].dtype == torch.float64


def test_trace_elbo_with_pyro_autoguides():
    for guide_cls in [AutoNormal, AutoMultivariateNormal]:
        pyro.clear_param_store()
        model, inputs, data = collider_problem()
        guide = guide_cls(model)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), Trace_ELBO(num_particles=4,
                                                                          vectorize_particles=True))
        losses = [svi.step(inputs, data) for _ in range(60)]
        assert losses[-1] < losses[0]
        pred = model.predict(guide, inputs, num_samples=20)
        assert pred["w3"].samples.shape == (20, 12, 1)


def test_predictive_returns_node_values_and_observations():
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data)
    pred = Predictive(model, guide=guide, num_samples=7)(inputs)
    assert pred["w3.y"].shape == (7, 12, 1)
    assert pred["w1.f"].shape == (7, 12, 1)
    vec = Predictive(model, guide=guide, num_samples=7, parallel=True)(inputs)
    assert vec["w3.y"].shape[-2:] == (12, 1) and vec["w3.y"].shape[0] == 7


def test_predict_unobserved_nodes_and_moments():
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data)
    new = {"x1": torch.linspace(-1, 1, 5).unsqueeze(-1), "x2": torch.zeros(5, 1)}
    pred = model.predict(guide, new, num_samples=400)
    assert set(pred) == {"w1", "w2", "w3"}
    p = pred["w1"]
    assert p.samples.shape == (400, 5, 1) and p.mean.shape == (5, 1)
    assert torch.allclose(p.mean, p.samples.mean(0), atol=4 * p.variance.max().sqrt() / 20)
    assert pred["w3"].y_variance is not None and bool((pred["w3"].y_variance > pred["w3"].variance).all())
    with pytest.raises(DAGInputError, match="'x1'"):
        model.predict(guide, new, nodes=["x1"])


def _reference_predict(model, guide, inputs, num_samples):
    """The one-pass prediction (all cases and samples at once) that predict() chunks."""
    from pyro_dag.dgp.handoff import suspended

    X, _ = model._check_inputs(inputs)
    with suspended(), torch.no_grad():
        if hasattr(guide, "inducing_posterior"):
            return marginal_pass(model, guide.inducing_posterior(), X, num_samples)
        draws = {w: ([], [], []) for w in model.topo_nodes}
        for _ in range(num_samples):
            tr = pyro.poutine.trace(guide).get_trace(inputs)
            values, cache = dict(X), model.cholesky_cache()
            for w in model.topo_nodes:
                a, r = model.node_conditional(w, values, cache)
                loc = a @ tr.nodes[f"{w}.u"]["value"].transpose(-1, -2)
                var = r.unsqueeze(-1).expand_as(loc)
                values[w] = f = loc + var.sqrt() * torch.randn_like(loc)
                for store, v in zip(draws[w], (f, loc, var)):
                    store.append(v)
        return {w: tuple(torch.stack(v) for v in draws[w]) for w in model.topo_nodes}


@pytest.mark.parametrize("guide_kind", ["mean_field", "chordal-dense", "chordal-sparse", "AutoNormal"])
def test_predict_in_chunks_equals_one_pass(guide_kind):
    model, inputs, data = collider_problem()  # n = 12 cases, 3 GP nodes, float64
    if guide_kind == "AutoNormal":
        guide = AutoNormal(model)
        guide(inputs, data)
    else:
        structure, _, backend = guide_kind.partition("-")
        guide = setup_guide(model, inputs, data, structure=structure, **({"backend": backend} if backend else {}))
    S = 6
    pyro.set_rng_seed(3)
    ref = _reference_predict(model, guide, inputs, S)
    # chunks of 5 and 7 cases (ragged last chunk), one chunk, the default; single cases agree to rounding only.
    # Every case of this problem sits on the inducing inputs (r = 1e-8, the jitter floor), and the sparse
    # backend conditions u on each draw by rank updates of size 1/r: a BLAS path that changes with the chunk's
    # shape moves its draws by up to ~1e-16/r (3e-8 measured with single cases; the dense backend's function-space
    # Algorithm 1 stays at 1e-14), so its chunks agree to 1e-7, not 1e-10 (a chunking bug moves draws by O(1))
    tol = 1e-7 if guide_kind == "chordal-sparse" else 1e-10
    for batch_size, atol in [(5, tol), (7, tol), (12, tol), (None, tol), (1, 1e-6)]:
        pyro.set_rng_seed(3)
        pred = model.predict(guide, inputs, num_samples=S, batch_size=batch_size)
        for w in model.gp_nodes:
            p = pred[w]
            f, loc, var = ref[w]
            assert p.samples.shape == (S, 12, 1)
            assert torch.allclose(p.samples, f, rtol=0, atol=atol)
            assert torch.allclose(p.loc, loc.expand_as(p.loc), rtol=0, atol=atol)
            assert torch.allclose(p.var, var.expand_as(p.var), rtol=0, atol=atol)
            assert torch.allclose(p.mean, loc.mean(0), rtol=0, atol=atol)
            assert torch.allclose(p.variance, var.mean(0) + loc.var(0, unbiased=False), rtol=0, atol=atol)
            ym, yv = model.likelihoods[w].predictive_moments(loc, var) if w == "w3" else (None, None)
            if ym is not None:
                assert torch.allclose(p.y_mean, ym.mean(0), rtol=0, atol=atol)
                assert torch.allclose(p.y_variance, yv.mean(0) + ym.var(0, unbiased=False), rtol=0, atol=atol)
    # a subset of nodes gives the same draws for those nodes
    pyro.set_rng_seed(3)
    sub = model.predict(guide, inputs, nodes=["w3"], num_samples=S, batch_size=4)
    assert set(sub) == {"w3"} and torch.allclose(sub["w3"].samples, ref["w3"][0], rtol=0, atol=1e-10)


@pytest.mark.parametrize("kwargs", [{"batch_size": 0}, {"batch_size": 2.5}, {"num_samples": 0}])
def test_predict_bad_chunk_arguments(kwargs):
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data)
    name = next(iter(kwargs))
    with pytest.raises(DAGInputError, match=f"{name} must be a positive integer"):
        model.predict(guide, inputs, **kwargs)


def test_vector_valued_nodes_and_masks():
    g = nx.DiGraph([("x", "h"), ("h", "y")])
    model = DAGDGP(g, output_dims={"h": 2, "y": 3}, num_inducing=5).double()
    n = 10
    y = torch.randn(n, 3, dtype=torch.float64)
    y[0, 1] = float("nan")
    mask = {"y": ~torch.isnan(y)}
    inputs = {"x": torch.randn(n, 1, dtype=torch.float64)}
    for structure in ["mean_field", "full"]:
        pyro.clear_param_store()
        guide = AutoStructuredGuide(model, precision=structure)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=3))
        assert torch.isfinite(torch.tensor(svi.step(inputs, {"y": y}, mask)))
        pred = model.predict(guide, inputs, num_samples=5)
        assert pred["h"].samples.shape == (5, n, 2) and pred["y"].samples.shape == (5, n, 3)
    assert model.inducing_inputs("y").shape == (5, 2)


@pytest.mark.parametrize("likelihood,ydata", [
    (Bernoulli(), lambda f: (f > 0).double()),
    (Poisson(), lambda f: torch.poisson(f.exp())),
    (StudentT(), lambda f: f + 0.1 * torch.randn_like(f)),
])
def test_non_gaussian_likelihoods_train(likelihood, ydata):
    g = nx.DiGraph([("x", "a"), ("a", "b")])
    model = DAGDGP(g, likelihoods={"b": likelihood}, num_inducing=6).double()
    x = torch.linspace(-2, 2, 30, dtype=torch.float64).unsqueeze(-1)
    y = ydata(torch.sin(2 * x))
    guide = AutoStructuredGuide(model, precision="mean_field")
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.03}), DAGELBO(num_particles=4))
    losses = [svi.step({"x": x}, {"b": y}) for _ in range(150)]
    assert sum(losses[-10:]) < sum(losses[:10])
    # Trace_ELBO also runs on the same model (the likelihood's own distribution)
    assert torch.isfinite(torch.tensor(Trace_ELBO().loss(model, guide, {"x": x}, {"b": y})))


def test_observation_at_internal_node():
    g = nx.DiGraph([("x", "a"), ("a", "b")])
    model = DAGDGP(g, num_inducing=5).double()
    x = torch.randn(8, 1, dtype=torch.float64)
    data = {"a": torch.randn(8, 1, dtype=torch.float64), "b": torch.randn(8, 1, dtype=torch.float64)}
    data["a"][:4] = float("nan")
    guide = AutoStructuredGuide(model)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=2))
    svi.step({"x": x}, data)
    tr = pyro.poutine.trace(model).get_trace({"x": x}, data)
    assert tr.nodes["a.y"]["is_observed"] and tr.nodes["b.y"]["is_observed"]
    # the internal observed node's data initialise the child's inducing inputs
    assert model.inducing_inputs("b").abs().max() <= data["a"][4:].abs().max() + 1e-9


def test_mcmc_with_sample_f_sites():
    g = nx.DiGraph([("x", "a")])
    x = torch.linspace(-1, 1, 6, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(3 * x)
    model = DAGDGP(g, num_inducing=3, sample_f=True, likelihoods={"a": Gaussian(0.05)}).double()
    model.setup({"x": x}, {"a": y})
    kernel = NUTS(model, max_tree_depth=4)
    mcmc = MCMC(kernel, num_samples=30, warmup_steps=30, disable_progbar=True)
    mcmc.run({"x": x}, {"a": y})
    samples = mcmc.get_samples()
    assert samples["a.u"].shape == (30, 1, 3)
    assert torch.isfinite(samples["a.u"]).all()


def test_hyperparameter_priors_are_guided():
    model, inputs, data = chain_problem()
    model.setup(inputs, data)
    model.kernels["b"].base.variance = pyro.nn.PyroSample(
        dist.LogNormal(torch.tensor(0.0, dtype=torch.float64), 0.5))
    guide = AutoStructuredGuide(model, precision="mean_field")
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=2))
    svi.step(inputs, data)
    assert guide.other_guide is not None
    assert any("variance" in k for k in pyro.get_param_store().keys() if "locs" in k)


def test_arviz_conversion_from_guide_and_mcmc():
    pytest.importorskip("arviz")
    from pyro_dag.diagnostics import to_inference_data

    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data)
    idata = to_inference_data(model, guide, inputs, num_samples=30, data=data)
    assert idata.posterior["w3.f"].shape[:2] == (1, 30)
    assert "w3.y" in idata.observed_data
    g = nx.DiGraph([("x", "a")])
    x = torch.linspace(-1, 1, 5, dtype=torch.float64).unsqueeze(-1)
    m2 = DAGDGP(g, num_inducing=3, sample_f=True, likelihoods={"a": Gaussian(0.05)}).double()
    m2.setup({"x": x}, {"a": torch.sin(3 * x)})
    mcmc = MCMC(NUTS(m2, max_tree_depth=3), num_samples=10, warmup_steps=10, disable_progbar=True)
    mcmc.run({"x": x}, {"a": torch.sin(3 * x)})
    idata = to_inference_data(mcmc=mcmc)
    assert idata.posterior["a.u"].shape[:2] == (1, 10)
    with pytest.raises(ValueError, match="mcmc"):
        to_inference_data(model)


def test_fixed_kernels_reuses_the_factors_and_gives_the_same_elbo():
    """Inside model.fixed_kernels() the ELBO and its gradients are those computed without it (same random
    numbers; to rounding, since a node downstream of a latent node interpolates with the cached ``L⁻ᵀ``
    instead of a triangular solve); learnable hyperparameters or inducing inputs are refused with the
    node's name."""
    import pyro

    from helpers import collider_problem, fixed, setup_guide
    from pyro_dag.infer import DAGELBO

    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data, structure="chordal")
    with pytest.raises(ValueError, match="node 'w1'.*learnable hyperparameters"):
        with model.fixed_kernels():
            pass
    fixed(model)
    elbo = DAGELBO(num_particles=3)
    params = [p for _, p in pyro.get_param_store().named_parameters() if p.requires_grad]

    def loss_and_grads():
        pyro.set_rng_seed(7)
        loss = elbo.differentiable_loss(model, guide, inputs, data)
        return loss, torch.autograd.grad(loss, params, allow_unused=True)

    ref_loss, ref_grads = loss_and_grads()
    with model.fixed_kernels():
        assert model.cholesky_cache()["w3"][1] is model.cholesky_cache()["w3"][1]  # computed once
        results = [loss_and_grads() for _ in range(2)]  # the second reuses the root-parent conditionals
        assert set(model.__dict__["_fixed_conditionals"]) == {"w1", "w2"}
    for loss, grads in results:
        torch.testing.assert_close(loss, ref_loss, rtol=1e-12, atol=0)
        for g, r in zip(grads, ref_grads):
            if r is not None:
                torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)
    assert not {"_fixed_cholesky", "_fixed_conditionals", "_fixed_inverses"} & set(model.__dict__)
    # a new design matrix (another object) is not served from the cache
    with model.fixed_kernels():
        pyro.set_rng_seed(7)
        shifted = {k: v + 0.1 for k, v in inputs.items()}
        other = elbo.differentiable_loss(model, guide, shifted, data)
        again = elbo.differentiable_loss(model, guide, shifted, data)
    pyro.set_rng_seed(7)
    torch.testing.assert_close(other, elbo.differentiable_loss(model, guide, shifted, data), rtol=0, atol=0)
    assert again.item() != ref_loss.item()


def test_data_beyond_float32_is_not_called_nan_or_inf():
    """Finite in float64 but beyond float32's range: say so and name the fix, not "NaN or inf"."""
    model, inputs, data = collider_problem()
    model = model.float()
    huge = {k: v.clone() for k, v in inputs.items()}
    huge["x1"][2, 0] = 1e39
    with pytest.raises(DAGInputError, match=r"inputs\['x1'\] holds 1e\+39, which is finite but overflows "
                                            r"torch.float32.*model.double\(\)"):
        model(huge, data)
    big = {"w3": data["w3"].clone()}
    big["w3"][0, 0] = -1e40
    with pytest.raises(DAGInputError, match=r"data\['w3'\] holds 1e\+40, which is finite but overflows"):
        model(inputs, big)


def test_overflow_message_offers_float64_only_to_a_float32_model():
    model, inputs, data = collider_problem()                      # float64
    with pytest.raises(DAGInputError, match="whose square overflows torch.float64") as exc:
        model(inputs, {"w3": data["w3"] * 1e200})
    assert "float64 model" not in str(exc.value) and "use float64" not in str(exc.value)
    model = model.float()
    with pytest.raises(DAGInputError, match=r"whose square overflows torch.float32.*float64 model \(model.double"):
        model({k: v.float() for k, v in inputs.items()}, {"w3": data["w3"].float() * 1e20})


@pytest.mark.parametrize("convert", ["half", "bfloat16"])
def test_a_half_precision_model_is_refused_naming_the_fix(convert):
    """model.half(): earlier, set-up passed and the first step failed inside torch ("cholesky_cpu" not implemented
    for 'Half')."""
    pyro.clear_param_store()
    X = torch.rand(10, 1)
    model = getattr(DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=4), convert)()
    for call in (lambda: model.setup({"x": X}, {"y": X}), lambda: model({"x": X}, {"y": X}),
                 lambda: train(model, AutoStructuredGuide(model), {"x": X}, {"y": X}, num_steps=2, progress=False)):
        with pytest.raises(DAGInputError, match=r"model.float\(\) \(or model.double\(\)\)"):
            call()
    model.float()
    model({"x": X}, {"y": X})


# ----------------------------------------------------------------------------- bad input (issue 35, round three)
CHAIN = nx.DiGraph([("x", "a"), ("a", "b")])


def test_a_transposed_input_is_named_as_such():
    """[1, n] inputs: earlier the error blamed data['a'] for not matching the inputs' 1 case."""
    model = DAGDGP(CHAIN).double()
    x = torch.rand(12, 1, dtype=torch.float64)
    with pytest.raises(DAGInputError, match=r"inputs\['x'\] has shape \(1, 12\), which looks transposed"):
        model.setup({"x": x.T}, {"a": x, "b": x})


def test_zero_rows_are_refused_as_zero_cases():
    """Earlier: "data['a'] has no observed entries; drop it from data"."""
    model = DAGDGP(CHAIN).double()
    x = torch.rand(0, 1, dtype=torch.float64)
    with pytest.raises(DAGInputError, match=r"inputs\['x'\] has zero rows \(zero cases\)"):
        train(model, AutoStructuredGuide(model), {"x": x}, {"b": x}, num_steps=2, progress=False)


@pytest.mark.parametrize("dtype", [torch.complex128, "numpy"])
def test_complex_data_is_refused(dtype):
    """Earlier torch dropped the imaginary part with a UserWarning and the model trained on the real part."""
    import numpy as np

    model = DAGDGP(CHAIN).double()
    x = torch.rand(6, 1, dtype=torch.float64)
    y = x.to(torch.complex128) if dtype != "numpy" else np.asarray(x) * (1 + 1j)
    with pytest.raises(DAGInputError, match=r"data\['b'\] is complex"):
        model.setup({"x": x}, {"b": y})


def test_bool_data_for_a_gaussian_node_is_refused_and_taken_by_a_bernoulli_node():
    """Earlier: train failed after the run in the noise check (RuntimeError: std and var only support floating point)."""
    x = torch.rand(8, 1, dtype=torch.float64)
    model = DAGDGP(CHAIN).double()
    with pytest.raises(DAGInputError, match=r"data\['b'\] is boolean.*likelihoods=\{'b': 'bernoulli'\}"):
        model.setup({"x": x}, {"b": x > 0.5})
    pyro.clear_param_store()
    model = DAGDGP(CHAIN, likelihoods={"b": "bernoulli"}, num_inducing=4).double()
    train(model, AutoStructuredGuide(model), {"x": x}, {"b": x > 0.5}, num_steps=2, progress=False)


@pytest.mark.parametrize("likelihood,values,match", [
    ("bernoulli", [0.0, 1.0, 3.0], r"holds 3 \(row 2\), outside the support of the Bernoulli likelihood of node 'b' "
                                   r"\(0 or 1\): pass 0/1"),
    ("poisson", [0.0, 2.0, -1.0], r"holds -1 \(row 2\).*Poisson likelihood of node 'b' \(counts"),
    ("poisson", [0.0, 2.5, 1.0], r"holds 2.5 \(row 1\).*Poisson likelihood"),
])
def test_data_outside_the_likelihood_support_is_refused_before_any_step(likelihood, values, match):
    """Earlier: Pyro's support error naming no node (Bernoulli), an infinite loss at step 1 (negative counts), or
    training on fractional counts without a word."""
    x = torch.rand(3, 1, dtype=torch.float64)
    y = torch.tensor(values, dtype=torch.float64)[:, None]
    model = DAGDGP(CHAIN, likelihoods={"b": likelihood}).double()
    with pytest.raises(DAGInputError, match=match):
        train(model, AutoStructuredGuide(model), {"x": x}, {"b": y}, num_steps=2, progress=False)
    bad = ~torch.isin(y, torch.tensor([0.0, 1.0, 2.0], dtype=y.dtype))
    model.setup({"x": x}, {"b": torch.where(bad, torch.nan, y)})   # a missing value (NaN) is not checked


@pytest.mark.parametrize("jitter", [-1.0, 0.0, float("nan"), "1e-6", True])
def test_jitter_must_be_a_positive_number(jitter):
    with pytest.raises(DAGInputError, match=r"jitter must be a positive finite number"):
        DAGDGP(CHAIN, jitter=jitter)
    assert DAGDGP(CHAIN, jitter=1e-6).jitter == 1e-6


def test_predict_takes_one_node_name_as_that_node():
    """nodes='b' was read letter by letter (cannot predict node 'b'... for 'l' of 'leaf_c')."""
    model, inputs, data = chain_problem()
    guide = AutoStructuredGuide(model)
    train(model, guide, inputs, data, num_steps=2, progress=False)
    pred = model.predict(guide, inputs, nodes="b", num_samples=3)
    assert list(pred) == ["b"]


@pytest.mark.parametrize("data", [None, {}])
def test_zero_rows_without_data_are_named_before_the_inducing_set_up(data):
    """Issue 42: zero rows and no data gave a raw error from gp/inducing.py."""
    import networkx as nx

    from pyro_dag import DAGDGP, DAGInputError

    model = DAGDGP(nx.DiGraph([("root_a", "node_b")])).double()
    with pytest.raises(DAGInputError, match=r"inputs\['root_a'\] has zero rows"):
        model.setup({"root_a": torch.zeros(0, 1, dtype=torch.float64)}, data)
