"""The sparse backend's conditional sampler in square-root form (SparseSquareRootConditioningState, the default)
against the factor-update form it replaced (SparseConditioningState, AutoStructuredGuide(..., conditioning="factor")) and
against dense Gaussian conditioning (Algorithm 1): the same moments, the same draws given the same noise, the same
ELBO and the same gradients, to 1e-10 in float64."""
import networkx as nx
import pyro
import pytest
import torch
from helpers import chain_problem, collider_problem, randomize_guide

from pyro_dag import DAGDGP, kernels
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO, marginal_pass
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.autoguide.gaussians import DenseGaussianPosterior
from pyro_dag.ops.chordal import SparseConditioningState, SparseSquareRootConditioningState


def _tree_problem(depth=3, n=10, M=4, seed=0):
    g = nx.DiGraph()
    frontier = ["x"]
    for _ in range(depth):
        nxt = []
        for p in frontier:
            for k in range(2):
                child = ("n" if p == "x" else p) + str(k)
                g.add_edge(p, child)
                nxt.append(child)
        frontier = nxt
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 2, dtype=torch.float64, generator=gen) * 4 - 2
    data = {v: torch.randn(n, 1, dtype=torch.float64, generator=gen) for v in frontier}
    # short length-scales keep the cases' conditional variances r away from the jitter floor (see _sparse_guide)
    model = DAGDGP(g, num_inducing=M, kernels={v: kernels.RBF(lengthscale=0.3) for v in g if v != "x"},
                   likelihoods={v: Gaussian(0.1) for v in frontier}).double()
    return model, {"x": x}, data


def _random_dag_problem(n=9, M=3, seed=4):
    """Seven GP nodes with two or three parents each (so the chordal completion has fill-in and the elimination
    paths are not chains), one of them with a 2-dimensional output."""
    gen = torch.Generator().manual_seed(seed)
    nodes = ["x"] + [f"w{i}" for i in range(7)]
    g = nx.DiGraph()
    g.add_nodes_from(nodes)
    for i in range(1, len(nodes)):
        k = min(i, 2 + int(torch.randint(2, (1,), generator=gen)))
        for j in torch.randperm(i, generator=gen)[:k].tolist():
            g.add_edge(nodes[j], nodes[i])
    sinks = [v for v in nodes[1:] if g.out_degree(v) == 0]
    x = torch.randn(n, 1, dtype=torch.float64, generator=gen)
    data = {v: torch.randn(n, 1, dtype=torch.float64, generator=gen) for v in sinks}
    model = DAGDGP(g, num_inducing=M, output_dims={"w2": 2},
                   likelihoods={v: Gaussian(0.1) for v in sinks}).double()
    return model, {"x": x}, data


SHIFT = 0.6

PROBLEMS = {"tree": _tree_problem, "chain": lambda: chain_problem(M=4), "collider": collider_problem,
            "random_dag": _random_dag_problem}


def _sparse_guide(name):
    """A set-up sparse chordal guide with randomised parameters. The inducing inputs are moved off the cases: a case
    on an inducing input has the conditional variance ``r`` at the jitter floor (1e-8), a site of precision 1e8 that
    costs every form of the conditioning (factor, square root, dense) about eight digits, so that none of them can be
    compared with another to 1e-10."""
    model, inputs, data = PROBLEMS[name]()
    pyro.clear_param_store()
    guide = AutoStructuredGuide(model, precision="chordal", backend="sparse", name=f"eq_{name}")
    guide(inputs, data)
    randomize_guide(guide, scale=0.3, seed=2)
    gen = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for p in model.inducing.parameters():
            p.add_(SHIFT)
    return model, inputs, data, guide


def _paths_are_chains(post):
    f = post.factor
    return all(len(f.later[j]) <= 1 for j in f.order)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_square_root_form_matches_factor_form_and_dense_conditioning(name):
    """Moments of every node, step by step, with two leading batch dims (an outer plate and the samples) on the
    interpolation vectors, against the factor form and the dense Algorithm 1 of the same posterior."""
    model, inputs, data, guide = _sparse_guide(name)
    post = guide.inducing_posterior()
    if name == "random_dag":
        assert not _paths_are_chains(post)   # the general column update is exercised, not only the chain update
    dense = DenseGaussianPosterior(guide.family.blocks, guide.family.loc(), guide.family.dense_tril())
    dims = {b.node: b.dim for b in post.blocks}
    states = [SparseSquareRootConditioningState(post.factor, post.mean_blocks(), dims),
              SparseConditioningState(post.factor, post.mean_blocks(), dims), dense.ancestral_state()]
    gen = torch.Generator().manual_seed(5)
    batch = (2, 3, 4)                         # outer plate, samples, cases
    for node in model.topo_nodes:
        M = model.num_inducing[node]
        a = torch.randn(batch + (M,), dtype=torch.float64, generator=gen)
        r = torch.rand(batch, dtype=torch.float64, generator=gen) + 0.05
        moments = [s.predict(node, a, r) for s in states]
        loc, cov = moments[0]
        for other_loc, other_cov in moments[1:]:
            assert torch.allclose(loc, other_loc, rtol=1e-10, atol=1e-10)
            assert torch.allclose(cov, other_cov, rtol=1e-10, atol=1e-10)
        f = loc + (torch.linalg.cholesky(cov) @ torch.randn(loc.shape + (1,), dtype=torch.float64,
                                                            generator=gen)).squeeze(-1)
        for s in states:
            s.update(node, a, r, f)


@pytest.mark.parametrize("name", sorted(PROBLEMS))
def test_same_draws_elbo_and_gradients_as_factor_form(name, monkeypatch):
    """One DAGELBO evaluation with three vectorised particles (and the draws of a marginal pass with given noise)
    under both forms: same draws, same loss, same gradients."""
    model, inputs, data, guide = _sparse_guide(name)
    params = [p for p in guide.parameters()] + [p for p in model.parameters() if p.requires_grad]
    results = {}
    for form in ("square_root", "factor"):
        monkeypatch.setattr(guide.family, "conditioning", form)
        pyro.set_rng_seed(11)
        loss = DAGELBO(num_particles=3).differentiable_loss(model, guide, inputs, data)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        post = guide.inducing_posterior()
        assert isinstance(post.ancestral_state(), SparseSquareRootConditioningState if form == "square_root"
                          else SparseConditioningState)
        n = next(iter(inputs.values())).shape[0]
        gen = torch.Generator().manual_seed(3)
        noise = {w: torch.randn(4, n, model.output_dims[w], dtype=torch.float64, generator=gen)
                 for w in model.topo_nodes}
        with torch.no_grad():
            X = {r: inputs[r] for r in model.root_nodes}
            draws = marginal_pass(model, post, X, 4, noise=noise)
        results[form] = (loss, grads, draws)
    loss, grads, draws = results["square_root"]
    loss_f, grads_f, draws_f = results["factor"]
    assert torch.allclose(loss, loss_f, rtol=1e-10, atol=1e-10)
    for g, g_f in zip(grads, grads_f):
        assert (g is None) == (g_f is None)
        if g is not None:
            assert torch.allclose(g, g_f, rtol=1e-10, atol=1e-10 * (1 + g_f.abs().max().item()))
    for w in model.topo_nodes:
        for t, t_f in zip(draws[w], draws_f[w]):
            assert torch.allclose(t, t_f, rtol=1e-10, atol=1e-10)


def test_square_root_form_is_the_default():
    model, inputs, data, guide = _sparse_guide("chain")
    assert isinstance(guide.inducing_posterior().ancestral_state(), SparseSquareRootConditioningState)


def test_unknown_conditioning_form_is_refused():
    model, inputs, data, guide = _sparse_guide("chain")
    with pytest.raises(ValueError, match="'square_root' or 'factor'"):
        AutoStructuredGuide(model, backend="sparse", conditioning="cholesky")


def test_conditioning_is_a_constructor_option():
    model, inputs, data = PROBLEMS["chain"]()
    pyro.clear_param_store()
    guide = AutoStructuredGuide(model, backend="sparse", conditioning="factor")
    guide(inputs, data)
    assert isinstance(guide.inducing_posterior().ancestral_state(), SparseConditioningState)


def test_update_must_follow_predict_of_the_same_node():
    model, inputs, data, guide = _sparse_guide("chain")
    post = guide.inducing_posterior()
    state = post.ancestral_state()
    a = torch.randn(3, model.num_inducing["a"], dtype=torch.float64)
    r = torch.ones(3, dtype=torch.float64)
    state.predict("a", a, r)
    with pytest.raises(RuntimeError, match="must follow predict"):
        state.update("b", a, r, torch.zeros(3, 1, dtype=torch.float64))


@pytest.mark.parametrize("name", ["tree", "chain", "collider"])
def test_chain_update_of_psi_matches_forward_substitution(name, monkeypatch):
    """On chain paths (trees, chains, the collider's parents) the square-root state moves ``ψ`` along the readout
    vectors, ``ψ_j ← ψ_j + κ_j φ_j`` (:meth:`SparseSquareRootConditioningState._update_psi_chain`); the same ``ψ``
    as the forward substitution along the path it replaced (``_recompute_psi``), block by block, so the same moments
    and draws, to 1e-10 in float64."""
    model, inputs, data, guide = _sparse_guide(name)
    post = guide.inducing_posterior()
    dims = {b.node: b.dim for b in post.blocks}
    fast = SparseSquareRootConditioningState(post.factor, post.mean_blocks(), dims)
    slow = SparseSquareRootConditioningState(post.factor, post.mean_blocks(), dims)
    monkeypatch.setattr(slow, "_update_psi_chain", lambda r, e, readout: slow._recompute_psi(readout[0]))
    gen = torch.Generator().manual_seed(9)
    batch = (3, 4)
    chained = 0
    for node in model.topo_nodes:
        M = model.num_inducing[node]
        a = torch.randn(batch + (M,), dtype=torch.float64, generator=gen)
        r = torch.rand(batch, dtype=torch.float64, generator=gen) + 0.05
        loc, cov = fast.predict(node, a, r)
        loc_s, cov_s = slow.predict(node, a, r)
        assert torch.allclose(loc, loc_s, rtol=1e-10, atol=1e-10)
        assert torch.allclose(cov, cov_s, rtol=1e-10, atol=1e-10)
        chained += fast._pending[2] is not None
        f = loc + cov[..., 0].sqrt() * torch.randn(loc.shape, dtype=torch.float64, generator=gen)
        fast.update(node, a, r, f)
        slow.update(node, a, r, f)
        assert fast.psi.keys() == slow.psi.keys()
        for j in slow.psi:
            assert torch.allclose(fast.psi[j], slow.psi[j], rtol=1e-10, atol=1e-10), (node, j)
    # every update took the chain path, except the collider's child (its parents' blocks are both later neighbours)
    assert chained == len(model.topo_nodes) - (name == "collider")
