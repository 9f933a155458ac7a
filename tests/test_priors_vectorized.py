"""Hyperpriors (``DAGDGP(..., priors=...)``) under Pyro's vectorised paths: a batch of hyperparameter draws, one per
particle (``Trace_ELBO(vectorize_particles=True)``) or per posterior draw (``Predictive(parallel=True)``), must give
per particle exactly what the same draw gives alone."""
import networkx as nx
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine
import pyro.poutine.util  # noqa: F401
from pyro.infer import SVI, Predictive, Trace_ELBO
from pyro.infer.autoguide import AutoNormal
from pyro.nn import PyroSample

from pyro_dag import DAGDGP, DAGInputError, kernels
from pyro_dag.gp import Gaussian, StudentT

pytestmark = pytest.mark.usefixtures("float64_default")

P = 4  # particles / posterior draws
GRAPHS = {"one": [("x", "a")], "chain": [("x", "a"), ("a", "b")]}
MODES = [(False, "values"), (True, "values"), (True, "inducing"), (True, None), ("centred", "values")]


def _problem(graph, sample_f, collapse, priors="weakly_informative", n=6):
    torch.manual_seed(0)
    x = torch.linspace(-1, 1, n).unsqueeze(-1)
    leaf = GRAPHS[graph][-1][1]
    y = torch.sin(3 * x) + 0.1 * torch.randn(n, 1)
    y[1] = float("nan")  # a missing entry: masks must broadcast with the particles too
    model = DAGDGP(nx.DiGraph(GRAPHS[graph]), num_inducing=4, sample_f=sample_f, collapse=collapse,
                   priors=priors).double()
    inputs, data = {"x": x}, {leaf: y}
    model.setup(inputs, data)
    guide = AutoNormal(model, init_scale=0.3)
    guide(inputs, data)
    # move the guide away from its initialisation so that the particles differ in every coordinate
    with torch.no_grad():
        for name, value in pyro.get_param_store().items():
            if name.startswith("AutoNormal.locs"):
                value.add_(0.2 * torch.randn_like(value))
    return model, guide, inputs, data


@pytest.fixture
def constant_noise(monkeypatch):
    """``sample_f=False`` draws the node values with ``torch.randn_like`` (no sample site), so that a vectorised and
    a sequential run see different noise: make it a constant, the same in both."""
    monkeypatch.setattr(torch, "randn_like", lambda t, **kw: torch.full_like(t, 0.7, **kw))


def _per_particle(trace):
    """``[P]`` log-density of each particle of a trace made under a particle plate at dim -2."""
    trace = poutine.util.prune_subsample_sites(trace)
    trace.compute_log_prob()
    total = torch.zeros(P, dtype=torch.float64)
    for name, site in trace.nodes.items():
        if site["type"] != "sample" or site["infer"].get("_deterministic"):
            continue
        lp = site["log_prob"]
        # every site's batch dims are (particles, data plate): anything else sums the wrong terms together
        assert lp.dim() == 2 and lp.shape[0] == P, (name, tuple(lp.shape))
        total = total + lp.sum(-1)
    return total


def _vectorised_log_weights(model, guide, inputs, data):
    with pyro.plate("particles", P, dim=-2):
        guide_trace = poutine.trace(guide).get_trace(inputs, data)
        model_trace = poutine.trace(poutine.replay(model, trace=guide_trace)).get_trace(inputs, data)
    return guide_trace, model_trace, _per_particle(model_trace) - _per_particle(guide_trace)


def _unbatched(trace, reference):
    """``[P]`` lists of the values of the sample sites of ``reference`` taken from the batched ``trace``."""
    out = [{} for _ in range(P)]
    for name, site in poutine.util.prune_subsample_sites(reference).nodes.items():
        if site["type"] != "sample" or site["is_observed"] or name not in trace.nodes:
            continue
        value = trace.nodes[name]["value"]
        for i in range(P):
            out[i][name] = value[i].reshape(site["value"].shape)
    return out


def _latent_sites(trace):
    trace = poutine.util.prune_subsample_sites(trace)
    return [n for n, s in trace.nodes.items() if s["type"] == "sample" and not s["is_observed"]]


@pytest.mark.parametrize("priors", ["weakly_informative", None])
@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("sample_f,collapse", MODES)
def test_vectorised_elbo_is_sequential_elbo(graph, sample_f, collapse, priors, constant_noise):
    """Per particle, log p(y, z) - log q(z) of a vectorised trace equals that of the same guide draw alone (with
    priors=None too: the collapsed leaf of the chain had its particles at the data plate's dim)."""
    model, guide, inputs, data = _problem(graph, sample_f, collapse, priors=priors)
    guide_trace, model_trace, log_w = _vectorised_log_weights(model, guide, inputs, data)
    ref_guide = poutine.trace(guide).get_trace(inputs, data)
    aux = [n for n, s in ref_guide.nodes.items() if s["type"] == "sample" and s["infer"].get("is_auxiliary")]
    if not aux:
        assert priors is None and graph == "one" and collapse == "inducing"
        pytest.skip("no latent site: the leaf's inducing outputs are integrated out and there are no hyperpriors")
    draws = _unbatched(guide_trace, ref_guide)
    for i in range(P):
        g = poutine.trace(poutine.condition(guide, {n: draws[i][n] for n in aux})).get_trace(inputs, data)
        latent = {n: g.nodes[n]["value"] for n in _latent_sites(poutine.trace(model).get_trace(inputs, data))}
        m = poutine.trace(poutine.condition(model, latent)).get_trace(inputs, data)
        expected = (m.log_prob_sum() - g.log_prob_sum()).detach()
        # 1e-8, or a few ulps of the weight (the centred chain's weights reach -1e8: the guide's draws of f are far
        # from μ(U) on the scale √r of the model's conditional)
        tol = max(1e-8, 1e-14 * abs(float(expected)))
        got = float(log_w[i].detach())
        assert abs(got - float(expected)) < tol, (i, got, float(expected))
    assert log_w.detach().std() > 1e-3  # the particles differ (a broadcast of one particle would pass the check above)


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("sample_f,collapse", MODES)
def test_vectorised_svi_step(graph, sample_f, collapse):
    """The user-facing calls of the defect report: SVI with vectorised particles, Predictive(parallel=True)."""
    model, guide, inputs, data = _problem(graph, sample_f, collapse)
    one_collapsed = graph == "one" and collapse == "inducing" and sample_f is True
    elbo = Trace_ELBO(num_particles=3, vectorize_particles=True, **({"max_plate_nesting": 1} if one_collapsed else {}))
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), elbo)
    assert torch.isfinite(torch.tensor(svi.step(inputs, data)))
    if one_collapsed:
        # no site of this model is in the data plate: Pyro's guess puts its plate at dim -1, refused with the fix
        with pytest.raises(DAGInputError, match="parallel=False"):
            Predictive(model, guide=guide, num_samples=3, parallel=True)(inputs, data)
        with pytest.raises(DAGInputError, match="max_plate_nesting=1"):
            SVI(model, guide, pyro.optim.Adam({"lr": 0.01}),
                Trace_ELBO(num_particles=3, vectorize_particles=True)).step(inputs, data)
        return
    par = Predictive(model, guide=guide, num_samples=3, parallel=True)(inputs, data)
    seq = Predictive(model, guide=guide, num_samples=3, parallel=False)(inputs, data)
    assert {k: v.shape for k, v in par.items()} == {k: v.shape for k, v in seq.items()}
    assert all(bool(torch.isfinite(v).all()) for v in par.values())


@pytest.mark.parametrize("graph", sorted(GRAPHS))
@pytest.mark.parametrize("sample_f,collapse", MODES)
@pytest.mark.parametrize("generate", [False, True])
def test_parallel_predictive_is_sequential(graph, sample_f, collapse, generate, constant_noise):
    model, guide, inputs, data = _problem(graph, sample_f, collapse)
    if generate and collapse == "inducing":
        pytest.skip("generating new data needs the leaves' inducing outputs (DAGDGP.full_model_draws)")
    # posterior draws of every latent site, as mcmc.get_samples() gives them: [P, *site shape]
    _, model_trace, _ = _vectorised_log_weights(model, guide, inputs, data)
    reference = poutine.trace(model).get_trace(inputs, data)
    draws = _unbatched(model_trace, reference)
    samples = {n: torch.stack([d[n] for d in draws]) for n in _latent_sites(reference)}
    assert any(n.startswith("kernels.") for n in samples) and any(n.startswith("likelihoods.") for n in samples)
    data_arg = None if generate else data
    if graph == "one" and collapse == "inducing" and sample_f is True:
        with pytest.raises(DAGInputError, match="parallel=False"):
            Predictive(model, posterior_samples=samples, parallel=True)(inputs, data_arg)
        return
    par = Predictive(model, posterior_samples=samples, parallel=True)(inputs, data_arg)
    seq = Predictive(model, posterior_samples=samples, parallel=False)(inputs, data_arg)
    assert set(par) == set(seq) and par
    for name in seq:
        assert par[name].shape == seq[name].shape, name
        if generate and name.endswith(".y"):
            continue  # fresh observation noise
        assert torch.allclose(par[name], seq[name], rtol=0, atol=1e-8), name
    # the log-likelihood of the data under each draw, vectorised and alone
    if not generate:
        with pyro.plate("draws", P, dim=-2):
            vec = poutine.trace(poutine.condition(model, {n: v.unsqueeze(1) if v.dim() == 1 else v
                                                         for n, v in samples.items()})).get_trace(inputs, data)
        vec.compute_log_prob()
        for i in range(P):
            alone = poutine.trace(poutine.condition(model, {n: v[i] for n, v in samples.items()})).get_trace(inputs,
                                                                                                          data)
            alone.compute_log_prob()
            for name, site in alone.nodes.items():
                if site["type"] == "sample" and name.endswith(".y"):
                    lp = vec.nodes[name]["log_prob"]
                    assert lp.shape[0] == P
                    assert torch.allclose(lp[i].sum(), site["log_prob"].sum(), rtol=0, atol=1e-8), (name, i)


def _kernels():
    """A kernel of every class with hyperparameters, bound to parents ("x", root, 2 columns) and ("z", latent, 1)."""
    K = kernels
    base = {
        "RBF": K.RBF(ard=True), "RBF-iso": K.RBF(), "Matern12": K.Matern12(ard=True), "Matern32": K.Matern32(),
        "Matern52": K.Matern52(ard=True), "RationalQuadratic": K.RationalQuadratic(ard=True),
        "Linear": K.Linear(), "White": K.White(), "Constant": K.Constant(),
        "Sum": K.RBF() + K.Linear(), "Prod": K.Matern32(ard=True) * K.Constant(),
    }
    out = {name: K.Concat(k) for name, k in base.items()}
    out.update({
        "Additive": K.Additive(K.Matern52()), "Product": K.Product(), "ANOVA": K.ANOVA(),
        "SubsetAdditive": K.SubsetAdditive([("x",), ("x", "z")]), "InputConnected": K.InputConnected(),
        "MultiFidelity": K.MultiFidelity(), "MultiFidelity-literal": K.MultiFidelity(form="literal"),
        "NARGP": K.NARGP(),
    })
    parents = [kernels.ParentSpec("x", 2, True), kernels.ParentSpec("z", 1, False)]
    for k in out.values():
        k.bind_parents(parents, "w").double()
    out["SumInput"] = K.SumInput(K.RBF()).bind_parents([kernels.ParentSpec("x", 1, True),
                                                        kernels.ParentSpec("z", 1, False)], "w").double()
    return out


def _with_priors(kernel):
    """Every learnable hyperparameter of ``kernel`` as a LogNormal ``PyroSample`` of its own shape."""
    count = 0
    for module in kernel.modules():
        for name in list(module.__dict__.get("_pyro_params", {})):
            shape = getattr(module, name).shape
            delattr(module, name)
            setattr(module, name, PyroSample(dist.LogNormal(torch.zeros(shape), 0.5).to_event(len(shape))))
            count += 1
    return count


@pytest.mark.parametrize("name", sorted(_kernels()))
@pytest.mark.parametrize("layout", ["plate", "flat"])
def test_kernel_with_batched_hyperparameters(name, layout):
    torch.manual_seed(1)
    kernel = _kernels()[name]
    assert _with_priors(kernel) > 0
    D = kernel.input_dim
    trace = poutine.trace(kernel).get_trace(torch.zeros(3, D))
    sites = {n: s["value"].shape for n, s in trace.nodes.items() if s["type"] == "sample"}
    # a batch of P draws: [P, 1, *shape] as under a particle plate at dim -2 (the data plate's dim -1 of size 1),
    # or [P, *shape] as in Predictive's reshaped posterior samples of non-scalar sites
    draws = {n: torch.exp(0.5 * torch.randn((P,) + shape)) for n, shape in sites.items()}
    batched = {n: v.unsqueeze(1) if layout == "plate" else v for n, v in draws.items()}
    X, Z = torch.randn(5, D), torch.randn(3, D)
    Xb = torch.randn(P, 5, D)  # inputs with the particles' batch dim, as a latent parent's values

    def evaluate(values, *args, **kw):
        return poutine.condition(kernel, values)(*args, **kw)

    for args, kw in [((X, Z), {}), ((X,), {}), ((X,), {"diag": True}), ((Xb, Z), {}), ((Xb,), {"diag": True})]:
        got = evaluate(batched, *args, **kw)
        alone = []
        for i in range(P):
            args_i = tuple(a[i] if a.dim() == 3 else a for a in args)
            alone.append(evaluate({n: v[i] for n, v in draws.items()}, *args_i, **kw))
        want = torch.stack(alone)
        assert got.shape == want.shape, (args[0].shape, kw, got.shape, want.shape)
        assert torch.allclose(got, want, rtol=0, atol=1e-12), (args[0].shape, kw)


@pytest.mark.parametrize("likelihood", [Gaussian(torch.tensor([0.1, 0.2])), StudentT(scale=0.3)])
def test_likelihood_with_batched_hyperparameters(likelihood):
    likelihood = likelihood.double()
    name = "variance" if isinstance(likelihood, Gaussian) else "scale"
    shape = getattr(likelihood, name).shape
    delattr(likelihood, name)
    setattr(likelihood, name, PyroSample(dist.LogNormal(torch.zeros(shape), 0.5).to_event(len(shape))))
    draws = torch.exp(0.5 * torch.randn((P,) + shape))
    f, y = torch.randn(P, 5, 2), torch.randn(5, 2)

    def log_prob(value, f):
        # dist() is called by the model inside the module tree's active context, which reads the conditioned value
        with poutine.condition(data={name: value}), likelihood._pyro_context:
            return likelihood.dist(f).log_prob(y)

    got = log_prob(draws.unsqueeze(1), f)
    want = torch.stack([log_prob(draws[i], f[i]) for i in range(P)])
    assert got.shape == want.shape and torch.allclose(got, want, rtol=0, atol=1e-12)


def test_batched_hyperparameter_rejects_a_wrong_shape():
    k = kernels.RBF(ard=True).bind(2).double()
    _with_priors(k)
    with pytest.raises(ValueError, match="does not end in the shape"):
        poutine.condition(k, {"lengthscale": torch.ones(4, 3)})(torch.zeros(3, 2), torch.zeros(2, 2))
