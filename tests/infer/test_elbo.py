"""Correctness of DAGELBO and the inducing posteriors against dense / brute-force references (float64)."""
import math

import networkx as nx
import pyro
import pytest
import torch
from pyro.infer import Trace_ELBO

from helpers import chain_problem, collider_problem, fixed, setup_guide
from pyro_dag import DAGDGP, kernels
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO, marginal_pass
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.utils import freeze

STRUCTURES = ["mean_field", "chordal", "full"]


def exact_gp_problem(n=8, noise=0.05):
    x = torch.linspace(-1, 1, n, dtype=torch.float64).unsqueeze(-1)
    y = torch.sin(3 * x) + 0.1 * torch.cos(7 * x)
    model = DAGDGP(nx.DiGraph([("x", "f")]), kernels={"f": kernels.RBF(lengthscale=0.5, variance=1.3)},
                   num_inducing=n, inducing_inputs={"f": x.clone()}, likelihoods={"f": Gaussian(noise)},
                   learn_inducing=False).double()
    freeze(model.kernels)
    freeze(model.likelihoods)
    return model, {"x": x}, {"f": y}, noise


@pytest.mark.parametrize("structure", STRUCTURES)
def test_one_node_reproduces_exact_gp_regression(structure):
    model, inputs, data, noise = exact_gp_problem()
    x, y = inputs["x"], data["f"]
    guide = AutoStructuredGuide(model, precision=structure)
    guide(inputs, data)
    k = model.kernels["f"]
    K = k(x)
    # Optimal whitened posterior (Titsias): Λ = I + AᵀA/σ², m = Λ⁻¹ Aᵀ y/σ². With Z = X and the model's
    # whitening factor R (K = R Rᵀ), the rows of A are a_i = R⁻¹ k(Z, x_i), i.e. A = (R⁻¹ K)ᵀ = R.
    _, A = model._node_cholesky("f")
    A = A.detach()
    prec = torch.eye(len(x), dtype=torch.float64) + A.T @ A / noise
    cov = torch.linalg.inv(prec)
    m = cov @ A.T @ y.squeeze(-1) / noise
    fam = guide.family
    if structure == "mean_field":
        fam.set_node("f", m, torch.linalg.cholesky(cov))
    else:
        fam.set_precision_tril(m, torch.linalg.cholesky(prec))
    # 1) the optimum of DAGELBO: zero gradient, and the bound equals the exact log evidence (Z = X)
    loss = DAGELBO(num_particles=1).differentiable_loss(model, guide, inputs, data)
    grads = torch.autograd.grad(loss, list(guide.parameters()))
    assert max(g.abs().max().item() for g in grads) < 1e-6
    evidence = torch.distributions.MultivariateNormal(
        torch.zeros(len(x), dtype=torch.float64), K + noise * torch.eye(len(x), dtype=torch.float64))
    assert abs(-loss.item() - evidence.log_prob(y.squeeze(-1)).item()) < 1e-5
    # 2) prediction equals exact GP regression
    xs = torch.linspace(-1.3, 1.3, 11, dtype=torch.float64).unsqueeze(-1)
    pred = model.predict(guide, {"x": xs}, num_samples=3)["f"]
    Ks = k(xs, x)
    G = K + noise * torch.eye(len(x), dtype=torch.float64)
    mean = Ks @ torch.linalg.solve(G, y)
    var = k(xs, diag=True) - (Ks * torch.linalg.solve(G, Ks.T).T).sum(-1)
    assert torch.allclose(pred.mean, mean, atol=1e-6)
    assert torch.allclose(pred.variance.squeeze(-1), var, atol=1e-6)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_analytic_kl_equals_monte_carlo(structure):
    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data, structure=structure)
    post = guide.inducing_posterior()
    with torch.no_grad():
        x = post.rsample((40000,))
        log_q = post.log_prob(x)
        log_p = -0.5 * x.pow(2).sum(-1) - 0.5 * post.size * math.log(2 * math.pi)
        ratio = log_q - log_p
    se = ratio.std() / math.sqrt(len(ratio))
    assert abs(ratio.mean() - post.kl()) < 4 * se


@pytest.mark.parametrize("structure", STRUCTURES)
def test_sample_covariance_matches_posterior(structure):
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data, structure=structure)
    post = guide.inducing_posterior()
    with torch.no_grad():
        x = post.rsample((60000,))
    emp = torch.cov(x.T)
    if structure == "mean_field":
        cov = torch.block_diag(*[post.covariance_block(b.node) for b in post.blocks])
        mean = torch.cat([post.locs[b.node] for b in post.blocks])
    else:
        cov, mean = post.covariance, post.loc
    tol = 5 * (cov.diagonal().unsqueeze(0) * cov.diagonal().unsqueeze(1)).sqrt() / math.sqrt(len(x))
    assert ((emp - cov).abs() <= tol + 1e-12).all()
    assert ((x.mean(0) - mean).abs() <= 5 * cov.diagonal().sqrt() / math.sqrt(len(x))).all()


def brute_force_conditional(post, blocks_a, values):
    """Gaussian of G_w U + r noise given earlier draws, with one dense joint computation (Prop. 9)."""
    cov = post.covariance if hasattr(post, "covariance") else torch.block_diag(
        *[post.covariance_block(b.node) for b in post.blocks])
    mean = post.loc if hasattr(post, "loc") else torch.cat([post.locs[b.node] for b in post.blocks])
    rows = []
    for node, a, r in blocks_a:
        b = post.block_of[node]
        G = torch.zeros(b.dim, post.size, dtype=torch.float64)
        for j in range(b.dim):
            G[j, b.offset + j * b.num_inducing: b.offset + (j + 1) * b.num_inducing] = a
        rows.append((G, r * torch.eye(b.dim, dtype=torch.float64)))
    A = torch.cat([g for g, _ in rows])
    R = torch.block_diag(*[r for _, r in rows])
    C = A @ cov @ A.T + R
    mu = A @ mean
    k = sum(g.shape[0] for g, _ in rows[:-1])
    c11, c12, c22 = C[:k, :k], C[:k, k:], C[k:, k:]
    if k == 0:
        return mu[k:], c22
    f_prev = torch.cat(values)
    sol = torch.linalg.solve(c11, c12)
    return mu[k:] + sol.T @ (f_prev - mu[:k]), c22 - c12.T @ sol


@pytest.mark.parametrize("structure", STRUCTURES)
def test_ancestral_state_matches_brute_force_conditioning(structure):
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    model = DAGDGP(g, output_dims={"c": 2}, num_inducing=3).double()
    inputs = {"x": torch.randn(5, 1, dtype=torch.float64)}
    data = {"d": torch.randn(5, 1, dtype=torch.float64)}
    guide = setup_guide(model, inputs, data, structure=structure)
    post = guide.inducing_posterior()
    state = post.ancestral_state()
    gen = torch.Generator().manual_seed(3)
    drawn, values = [], []
    for node in model.topo_nodes:
        M = model.num_inducing[node]
        a = torch.randn(M, dtype=torch.float64, generator=gen)
        r = torch.rand((), dtype=torch.float64, generator=gen) + 0.1
        loc, cov = state.predict(node, a.view(1, 1, M), r.view(1, 1))
        drawn.append((node, a, r))
        ref_loc, ref_cov = brute_force_conditional(post, drawn, values)
        assert torch.allclose(loc.reshape(-1), ref_loc, atol=1e-10)
        assert torch.allclose(cov.reshape(ref_cov.shape), ref_cov, atol=1e-10)
        f = loc + torch.randn(loc.shape, dtype=torch.float64, generator=gen)
        state.update(node, a.view(1, 1, M), r.view(1, 1), f)
        values.append(f.reshape(-1))


def test_structured_with_zero_offdiagonal_equals_mean_field():
    model, inputs, data = collider_problem()
    mf = setup_guide(model, inputs, data, structure="mean_field", name="mf")
    st = AutoStructuredGuide(model, precision="chordal", name="st")
    st(inputs, data)
    post_mf = mf.inducing_posterior()
    P = post_mf.size
    prec_blocks = {}
    for b in st.family.blocks:
        cov = post_mf.covariance_block(b.node)
        prec_blocks[b.node] = torch.linalg.cholesky(torch.linalg.inv(cov))
    loc = torch.cat([post_mf.locs[b.node] for b in st.family.blocks])
    L = torch.block_diag(*[prec_blocks[b.node] for b in st.family.blocks])
    st.family.set_precision_tril(loc, L)
    assert abs(st.inducing_posterior().kl().item() - post_mf.kl().item()) < 1e-8
    for guide in (mf, st):
        pyro.set_rng_seed(7)
        val = DAGELBO(num_particles=3).loss(model, guide, inputs, data)
        if guide is mf:
            ref = val
    assert abs(val - ref) < 1e-8 * max(1.0, abs(ref))


def test_chordal_on_complete_graph_equals_full():
    model, inputs, data = collider_problem()  # H is the triangle: complete
    full = setup_guide(model, inputs, data, structure="full", name="full")
    chordal = AutoStructuredGuide(model, precision="chordal", name="chordal")
    chordal(inputs, data)
    pf = full.inducing_posterior()
    # copy full's Λ into chordal's block order: permute, re-factorise (exact on a complete pattern)
    perm = torch.cat([torch.arange(pf.block_of[b.node].offset, pf.block_of[b.node].offset + b.size)
                      for b in chordal.family.blocks])
    prec = torch.linalg.inv(pf.covariance)[perm][:, perm]
    chordal.family.set_precision_tril(pf.loc[perm], torch.linalg.cholesky(prec))
    pc = chordal.inducing_posterior()
    assert abs(pc.kl().item() - pf.kl().item()) < 1e-8
    losses = []
    for guide in (full, chordal):
        pyro.set_rng_seed(11)
        losses.append(DAGELBO(num_particles=2).loss(model, guide, inputs, data))
    # the ancestral sampler only reads Σ, which is identical up to the permutation
    assert abs(losses[0] - losses[1]) < 1e-8 * max(1.0, abs(losses[0]))


def elbo_samples(elbo, model, guide, inputs, data, n):
    return torch.tensor([elbo.loss(model, guide, inputs, data) for _ in range(n)])


@pytest.mark.parametrize("structure", ["mean_field", "chordal"])
def test_dagelbo_agrees_with_trace_elbo_in_expectation(structure):
    model, inputs, data = collider_problem(noise=0.3)
    guide = setup_guide(model, inputs, data, structure=structure)
    ours = elbo_samples(DAGELBO(num_particles=8), model, guide, inputs, data, 150)
    theirs = elbo_samples(Trace_ELBO(num_particles=8, vectorize_particles=True), model, guide, inputs, data, 400)
    se = math.sqrt(ours.var() / len(ours) + theirs.var() / len(theirs))
    assert abs(ours.mean() - theirs.mean()) < 4 * se
    assert ours.var() < theirs.var()


def test_dagelbo_gradient_variance_is_lower():
    model, inputs, data = collider_problem(noise=0.3)
    guide = setup_guide(model, inputs, data, structure="mean_field")
    params = list(guide.parameters())

    def grads(elbo, n):
        out = []
        for _ in range(n):
            loss = elbo.differentiable_loss(model, guide, inputs, data)
            out.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]))
        return torch.stack(out)

    g_ours = grads(DAGELBO(num_particles=1), 60)
    g_trace = grads(Trace_ELBO(num_particles=1), 60)
    # same expectation (within MC error) and a lower total variance
    se = (g_ours.var(0) / 60 + g_trace.var(0) / 60).sqrt()
    assert ((g_ours.mean(0) - g_trace.mean(0)).abs() < 5 * se + 1e-8).float().mean() > 0.97
    assert g_ours.var(0).sum() < g_trace.var(0).sum()


def diamond_problem(n=10, seed=0):
    """x -> a -> {b, c} -> d with d and b observed: a 2-d sink (d), an observed internal node (b), a latent
    2-d one (c)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.linspace(-1, 1, n, dtype=torch.float64).unsqueeze(-1)
    g = nx.DiGraph([("x", "a"), ("a", "b"), ("a", "c"), ("b", "d"), ("c", "d")])
    model = DAGDGP(g, num_inducing=4, output_dims={"c": 2, "d": 2}, likelihoods={"d": Gaussian(0.09), "b": Gaussian(0.09)},
                   seed=seed).double()
    data = {"d": torch.cat([torch.sin(2 * x), x], -1) + 0.3 * torch.randn(n, 2, dtype=torch.float64, generator=gen),
            "b": torch.cos(x) + 0.3 * torch.randn(n, 1, dtype=torch.float64, generator=gen)}
    return model, {"x": x}, data


@pytest.mark.parametrize("problem", ["collider", "diamond"])
def test_joint_sampler_is_unbiased(problem):
    """DAGELBO(sampler="joint") estimates the same ELBO as the paper's conditional sampler."""
    model, inputs, data = collider_problem(noise=0.3) if problem == "collider" else diamond_problem()
    guide = setup_guide(model, inputs, data, structure="chordal", backend="sparse")
    cond = elbo_samples(DAGELBO(num_particles=64), model, guide, inputs, data, 150)
    joint = elbo_samples(DAGELBO(num_particles=64, sampler="joint"), model, guide, inputs, data, 150)
    se = math.sqrt(cond.var() / len(cond) + joint.var() / len(joint))
    assert abs(cond.mean() - joint.mean()) < 4 * se
    assert joint.var() > 0 and cond.var() > 0


@pytest.mark.parametrize("problem", ["collider", "diamond"])
def test_joint_sampler_dense_equals_sparse(problem):
    model, inputs, data = collider_problem() if problem == "collider" else diamond_problem()
    guide = setup_guide(model, inputs, data, structure="chordal", backend="sparse")
    params = list(guide.parameters())
    out = {}
    for backend in ["dense", "sparse"]:
        guide.family.backend = backend
        pyro.set_rng_seed(3)
        loss = DAGELBO(num_particles=3, sampler="joint").differentiable_loss(model, guide, inputs, data)
        out[backend] = (loss, torch.autograd.grad(loss, params, allow_unused=True))
    assert abs(out["dense"][0].item() - out["sparse"][0].item()) < 1e-8 * abs(out["dense"][0].item())
    for a, b in zip(out["dense"][1], out["sparse"][1]):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.allclose(a, b, atol=1e-8, rtol=1e-6)


def test_joint_sampler_sink_predictive_matches_brute_force():
    """The sink's Gaussian given the other blocks equals conditioning the dense joint covariance."""
    from pyro_dag.infer.autoguide.samplers import JointSampleState

    model, inputs, data = collider_problem()
    guide = setup_guide(model, inputs, data, structure="chordal", backend="dense")
    q = guide.inducing_posterior()
    state = JointSampleState(q, num_samples=2, sinks=["w3"])
    a = torch.randn(5, q.block_of["w3"].num_inducing, dtype=torch.float64)
    r = torch.rand(5, dtype=torch.float64)
    loc, cov = state.predict("w3", a, r)
    # brute force: V = m + L^{-T} eps from the state's own eps, then condition V_w3 on the rest with Σ = Λ⁻¹
    v = q.loc.unsqueeze(-1) + q._tril_inv.T @ state._eps                  # [P, S B]
    sig, sl = q.covariance, q.block_of["w3"].slice
    rest = torch.ones(q.size, dtype=torch.bool)
    rest[sl] = False
    k = sig[sl][:, rest] @ torch.linalg.inv(sig[rest][:, rest])
    mu = q.loc[sl].unsqueeze(-1) + k @ (v[rest] - q.loc[rest].unsqueeze(-1))   # [M, S B]
    cond_cov = sig[sl][:, sl] - k @ sig[rest][:, sl]
    mu = mu.reshape(-1, 2, 5).permute(1, 2, 0)                               # [S, B, M]
    assert torch.allclose(loc[..., 0], (mu * a).sum(-1), atol=1e-8)
    assert torch.allclose(cov[..., 0, 0], torch.einsum("bm,mk,bk->b", a, cond_cov, a) + r, atol=1e-8)


def test_joint_sampler_leaves_mean_field_unchanged():
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data, structure="mean_field")
    losses = []
    for sampler in DAGELBO.SAMPLERS:
        pyro.set_rng_seed(5)
        losses.append(DAGELBO(num_particles=2, sampler=sampler).loss(model, guide, inputs, data))
    assert losses[0] == losses[1]
    with pytest.raises(ValueError, match="sampler must be one of"):
        DAGELBO(sampler="exact")


def test_minibatch_estimator_is_unbiased_over_a_partition():
    model, inputs, data, _ = exact_gp_problem(n=8)
    model.likelihoods["f"]  # one layer, Gaussian: every per-case term is deterministic given q(U)
    guide = setup_guide(model, inputs, data, structure="mean_field")
    elbo = DAGELBO(num_particles=1)
    full = elbo.loss(model, guide, inputs, data)
    perm = torch.randperm(8)
    batches = [perm[i:i + 2] for i in range(0, 8, 2)]
    mean_batch = sum(elbo.loss(model, guide, inputs, data, subsample=b) for b in batches) / len(batches)
    assert abs(mean_batch - full) < 1e-8 * max(1.0, abs(full))
    assert abs(elbo.loss(model, guide, inputs, data, subsample=batches[0]) - full) > 1e-6  # really a minibatch


def test_minibatch_estimator_is_unbiased_for_a_deep_model():
    model, inputs, data = chain_problem(n=10)
    guide = setup_guide(model, inputs, data, structure="chordal")
    elbo = DAGELBO(num_particles=4)
    full = elbo_samples(elbo, model, guide, inputs, data, 200)
    mini = torch.tensor([elbo.loss(model, guide, inputs, data, subsample_size=3) for _ in range(1500)])
    se = math.sqrt(full.var() / len(full) + mini.var() / len(mini))
    assert abs(full.mean() - mini.mean()) < 4 * se


def test_svi_reduces_loss_for_every_structure():
    for structure in STRUCTURES:
        pyro.clear_param_store()
        model, inputs, data = chain_problem()
        guide = AutoStructuredGuide(model, precision=structure)
        svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), DAGELBO(num_particles=2))
        losses = [svi.step(inputs, data) for _ in range(80)]
        assert sum(losses[-5:]) < sum(losses[:5]), structure


def test_dagelbo_rejects_other_guides():
    model, inputs, data = chain_problem()
    guide = pyro.infer.autoguide.AutoNormal(model)
    with pytest.raises(ValueError, match="AutoStructuredGuide"):
        DAGELBO().loss(model, guide, inputs, data)


def test_fixed_helper_freezes_everything():
    model, inputs, data = chain_problem()
    model.setup(inputs, data)
    fixed(model)
    assert len(list(model.parameters())) == 0


@pytest.mark.parametrize("structure,sampler", [("mean_field", "conditional"), ("chordal", "conditional"),
                                               ("chordal", "joint")])
def test_antithetic_pairs_are_unbiased(structure, sampler):
    """DAGELBO(antithetic=True) estimates the same ELBO (each draw keeps its law)."""
    model, inputs, data = diamond_problem()
    guide = setup_guide(model, inputs, data, structure=structure, backend="dense")
    plain = elbo_samples(DAGELBO(num_particles=16, sampler=sampler), model, guide, inputs, data, 150)
    anti = elbo_samples(DAGELBO(num_particles=16, sampler=sampler, antithetic=True), model, guide, inputs, data, 150)
    se = math.sqrt(plain.var() / len(plain) + anti.var() / len(anti))
    assert abs(plain.mean() - anti.mean()) < 4 * se
    assert anti.var() > 0


@pytest.mark.parametrize("sampler", ["conditional", "joint"])
def test_antithetic_draws_are_mirrored(sampler):
    """With antithetic pairs the second half of the draws of a node with root parents mirrors the first about
    its mean, for every (sample, case) pair (checked on the first GP node of the chain)."""
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data, structure="chordal", backend="dense")
    q = guide.inducing_posterior()
    X, _ = model._check_inputs(inputs)
    out = marginal_pass(model, q, X, 6, sampler=sampler, antithetic=True)
    f, loc, _ = out["a"]
    torch.testing.assert_close(f[:3] - loc[:3], -(f[3:] - loc[3:]), rtol=1e-9, atol=1e-12)
    with pytest.raises(ValueError, match="even"):
        marginal_pass(model, q, X, 5, sampler=sampler, antithetic=True)
    with pytest.raises(ValueError, match="num_particles must be even"):
        DAGELBO(num_particles=3, antithetic=True)
