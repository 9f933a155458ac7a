"""The structured (DAG-SVI) guide: dense and sparse backends share parameters and must agree (float64)."""
import math

import networkx as nx
import pyro
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from helpers import collider_problem, linear_gaussian_chain, randomize_guide
from pyro_dag import DAGDGP
from pyro_dag import graph as G
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.autoguide.gaussians import DenseGaussianPosterior, SparseChordalPosterior


@st.composite
def random_problems(draw):
    p = draw(st.integers(2, 12))  # GP nodes
    g = nx.DiGraph()
    g.add_node("x0")
    names = [f"v{i}" for i in range(p)]
    for j, v in enumerate(names):
        candidates = ["x0"] + names[:j]
        k = draw(st.integers(1, min(3, len(candidates))))
        pa = draw(st.lists(st.sampled_from(candidates), min_size=1, max_size=k, unique=True))
        g.add_edges_from((u, v) for u in pa)
    obs = draw(st.lists(st.sampled_from(names), min_size=1, max_size=p, unique=True))
    dims = {v: draw(st.sampled_from([1, 1, 2])) for v in names}
    seed = draw(st.integers(0, 10_000))
    return g, obs, dims, seed


def build(g, obs, dims, seed, n=4, M=3):
    gen = torch.Generator().manual_seed(seed)
    model = DAGDGP(g, num_inducing=M, output_dims=dims, seed=seed).double()
    inputs = {"x0": torch.randn(n, 1, dtype=torch.float64, generator=gen)}
    data = {}
    for v in obs:
        y = torch.randn(n, dims[v], dtype=torch.float64, generator=gen)
        y[torch.rand(n, dims[v], generator=gen) < 0.3] = float("nan")
        y[0] = 0.5  # at least one observed entry
        data[v] = y
    guide = AutoStructuredGuide(model, precision="chordal", backend="dense")
    guide(inputs, data)
    randomize_guide(guide, scale=0.2, seed=seed)
    return model, guide, inputs, data


def loss_and_grads(model, guide, inputs, data, backend, seed):
    guide.family.backend = backend
    pyro.set_rng_seed(seed)
    loss = DAGELBO(num_particles=3).differentiable_loss(model, guide, inputs, data)
    grads = torch.autograd.grad(loss, list(guide.parameters()), allow_unused=True)
    return loss.detach(), [torch.zeros(()) if g is None else g for g in grads]


def _graph(parents):
    g = nx.DiGraph()
    g.add_node("x0")
    g.add_edges_from((u, v) for v, pa in parents.items() for u in pa)
    return g


def gradient_condition(model, guide, inputs, data, seed):
    """κ, the relative condition of the dense backend's ELBO gradient, estimated from the same computation in
    float32: ``max_p ||g64_p - g32_p|| / (eps32 ||g64_p||)``. Rounding errors of float64 are then about
    ``κ eps64`` relative; the marginal ancestral sampler conditions each node on values drawn at (or near) its
    inducing inputs, where the conditional variance ``k(x, x) - k_xZ K(Z, Z)⁻¹ k_Zx`` cancels to the jitter, and its
    backward pass amplifies rounding by up to ~1e7 on small random DAGs (issue 42's example)."""
    _, g64 = loss_and_grads(model, guide, inputs, data, "dense", seed)
    model.float()
    guide.float()
    try:
        _, g32 = loss_and_grads(model, guide, {k: v.float() for k, v in inputs.items()},
                                {k: v.float() for k, v in data.items()}, "dense", seed)
        eps32 = torch.finfo(torch.float32).eps
        kappa = max(((a - b.double()).norm() / (eps32 * a.norm())).item() for a, b in zip(g64, g32) if a.norm() > 0)
    except (RuntimeError, ValueError):  # float32 too coarse to run it at all: as ill-conditioned as float32 can see
        kappa = 1 / torch.finfo(torch.float32).eps
    finally:
        model.double()
        guide.double()
    return kappa if math.isfinite(kappa) else 1 / torch.finfo(torch.float32).eps


#: Issue 42: the example on which rtol=1e-6 failed on a fresh clone (dims and observed node as reported there; the
#: graph the chain x0 -> v0 -> v4 -> v5 that reproduces it: elementwise 1.9x beyond rtol 1e-6, κ ≈ 1.2e7).
ISSUE_42 = (_graph({"v0": ["x0"], "v1": ["x0"], "v2": ["x0"], "v3": ["x0"], "v4": ["v0"], "v5": ["v4"],
                    "v6": ["x0"]}), ["v5"], {"v0": 1, "v1": 1, "v2": 1, "v3": 1, "v4": 2, "v5": 2, "v6": 1}, 120)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_problems())
@example(ISSUE_42)
def test_dense_equals_sparse_on_random_dags(problem):
    g, obs, dims, seed = problem
    pyro.clear_param_store()
    model, guide, inputs, data = build(g, obs, dims, seed)
    fam = guide.family
    dense = DenseGaussianPosterior(fam.blocks, fam.loc(), fam.dense_tril())
    sparse = SparseChordalPosterior(fam.blocks, fam.loc(), fam.factor_blocks())
    assert abs(dense.kl().item() - sparse.kl().item()) < 1e-8 * max(1.0, abs(dense.kl().item()))
    x = dense.rsample((2,)).detach()
    assert torch.allclose(dense.log_prob(x), sparse.log_prob(x), atol=1e-8)
    l_dense, g_dense = loss_and_grads(model, guide, inputs, data, "dense", seed)
    l_sparse, g_sparse = loss_and_grads(model, guide, inputs, data, "sparse", seed)
    scale = max(1.0, abs(l_dense.item()))
    assert abs(l_dense.item() - l_sparse.item()) < 1e-8 * scale
    # The two backends round differently; their gradients agree to the rounding of float64 times the gradient's
    # condition (measured: up to ~4e4 κ eps64 over 30 random DAGs): a tolerance of 1e6 κ eps64, at least 1e-9
    # relative, per parameter, normwise. A wrong backend differs by O(1).
    tol = max(1e-9, 1e6 * gradient_condition(model, guide, inputs, data, seed) * torch.finfo(torch.float64).eps)
    for (name, _), a, b in zip(guide.named_parameters(), g_dense, g_sparse):
        assert (a - b).norm() <= tol * a.norm() + 1e-10 * scale, (name, (a - b).norm() / a.norm(), tol)


def test_sparse_samples_match_precision():
    model, inputs, data = collider_problem()
    guide = AutoStructuredGuide(model, precision="chordal", backend="sparse")
    guide(inputs, data)
    randomize_guide(guide)
    post = guide.inducing_posterior()
    assert isinstance(post, SparseChordalPosterior)
    with torch.no_grad():
        x = post.rsample((50000,))
    dense = DenseGaussianPosterior(guide.family.blocks, guide.family.loc(), guide.family.dense_tril())
    cov = dense.covariance.detach()
    emp = torch.cov(x.T)
    tol = 5 * (cov.diagonal().unsqueeze(0) * cov.diagonal().unsqueeze(1)).sqrt() / math.sqrt(len(x))
    assert ((emp - cov).abs() <= tol).all()
    for b in post.blocks:  # selected inversion = dense inverse on the diagonal blocks
        assert torch.allclose(post.covariance_block(b.node), cov[b.slice, b.slice], atol=1e-10)


def test_backend_auto_switches_by_size():
    model, inputs, data = collider_problem()
    guide = AutoStructuredGuide(model, precision="chordal")
    guide(inputs, data)
    assert guide.family.resolved_backend() == "dense"
    guide.family.AUTO_SPARSE_SIZE = 1
    assert isinstance(guide.inducing_posterior(), SparseChordalPosterior)


def test_chordal_pattern_follows_the_graph():
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("b", "c"), ("x", "d")])  # d is not an ancestor of observed c
    model = DAGDGP(g, num_inducing=2).double()
    inputs, data = {"x": torch.randn(4, 1, dtype=torch.float64)}, {"c": torch.randn(4, 1, dtype=torch.float64)}
    guide = AutoStructuredGuide(model, precision="chordal")
    guide(inputs, data)
    edges = {frozenset(e) for e in guide.family.edges}
    assert edges == {frozenset(("a", "b")), frozenset(("b", "c"))}
    assert G.is_perfect_elimination_order(guide.family.pattern, guide.family.order)
    full = AutoStructuredGuide(model, precision="full", name="full")
    full(inputs, data)
    assert len(full.family.edges) == 6


@pytest.mark.parametrize("backend", ["dense", "sparse"])
def test_generic_model_uses_dependency_structure_and_is_exact(backend):
    model, prec, mean, log_evidence = linear_gaussian_chain()
    guide = AutoStructuredGuide(model, precision="chordal", backend=backend)
    guide()
    fam = guide.family
    names = [guide._site_names[b.node] for b in fam.blocks]
    edges = {frozenset((guide._site_names[v], guide._site_names[w])) for v, w in fam.edges}
    assert edges == {frozenset((f"x_{t}", f"x_{t + 1}")) for t in range(4)}  # a path: no fill
    # the exact posterior lies in the family: set it and the ELBO equals the log evidence with zero variance
    idx = [int(n.split("_")[1]) for n in names]
    P = prec[idx][:, idx]
    fam.set_precision_tril(mean[idx], torch.linalg.cholesky(P))
    losses = torch.tensor([pyro.infer.Trace_ELBO().loss(model, guide) for _ in range(5)], dtype=torch.float64)
    assert torch.allclose(losses, -log_evidence.expand(5), atol=1e-8)


def test_generic_model_trains_with_trace_elbo():
    model, _, _, log_evidence = linear_gaussian_chain()
    guide = AutoStructuredGuide(model)
    svi = pyro.infer.SVI(model, guide, pyro.optim.ClippedAdam({"lr": 0.05, "lrd": 0.998}),
                         pyro.infer.Trace_ELBO(num_particles=4, vectorize_particles=True))
    for _ in range(1000):
        svi.step()
    loss = pyro.infer.Trace_ELBO(num_particles=4000, vectorize_particles=True).loss(model, guide)
    assert abs(loss + log_evidence.item()) < 0.05


def test_generic_model_rejects_discrete_sites():
    import pyro.distributions as dist

    def model():
        pyro.sample("z", dist.Bernoulli(0.5))

    with pytest.raises(ValueError, match="discrete"):
        AutoStructuredGuide(model)()


@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_default_initial_scales_are_data_driven(structure):
    """Observed Gaussian nodes start at the scale their data imply (a small-noise child far below the prior's 1,
    where Adam would stall); latent nodes at the prior's; ``init_scale=1.0`` restores the prior's everywhere."""
    from pyro_dag.infer import initial_scales

    model, inputs, data = collider_problem(noise=0.01)
    guide = AutoStructuredGuide(model, precision=structure)
    guide(inputs, data)
    expected = initial_scales(model, inputs, data)
    assert set(expected) == {"w3"} and expected["w3"] < 0.1
    scales = {b.node: getattr(guide.family.scales, b.node).detach() for b in guide.family.blocks}
    assert torch.allclose(scales["w3"], torch.full_like(scales["w3"], expected["w3"]))
    assert all(torch.equal(scales[w], torch.ones_like(scales[w])) for w in ("w1", "w2"))
    prior = AutoStructuredGuide(model, precision=structure, init_scale=1.0, name="prior")
    prior(inputs, data)
    assert all(torch.equal(getattr(prior.family.scales, b.node).detach(), torch.ones(b.size, dtype=torch.float64))
               for b in prior.family.blocks)
