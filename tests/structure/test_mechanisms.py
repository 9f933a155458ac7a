"""Tests of the SEM mechanisms (SVI-DAG §3.2, §3.7)."""
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine

from pyro_dag.structure import LinearGaussianSEM, MLPSEM, NodeHyperNet


def _dag(p, seed, prob=0.5):
    g = torch.Generator().manual_seed(seed)
    return torch.triu(torch.bernoulli(torch.full((p, p), prob), generator=g), 1).double()


def test_collapsed_evidence_matches_multivariate_t():
    # W_.j | s2 ~ N(0, s2 w^2 I), s2 ~ InvGamma(a0, b0)  =>  x_j ~ St(2 a0, 0, (b0 / a0)(I + w^2 X_pa X_pa^T))
    torch.manual_seed(0)
    p, N = 5, 30
    X = torch.randn(N, p, dtype=torch.float64)
    A = _dag(p, 1)
    m = LinearGaussianSEM(p, marginalize=True, weight_scale=0.7, noise_concentration=2.0, noise_rate=1.5)
    ev = m.node_evidence(X.T @ X, N, A)
    for j in range(p):
        pa = A[:, j].nonzero().flatten()
        Xp = X[:, pa]
        cov = (1.5 / 2.0) * (torch.eye(N, dtype=torch.float64) + 0.49 * Xp @ Xp.T)
        ref = dist.MultivariateStudentT(4.0, torch.zeros(N, dtype=torch.float64), torch.linalg.cholesky(cov))
        assert ev[j].item() == pytest.approx(ref.log_prob(X[:, j]).item(), abs=1e-8)
    assert m.log_likelihood(X, A).item() == pytest.approx(ev.sum().item(), abs=1e-8)


def test_collapsed_flips_and_straight_through_gradient():
    torch.manual_seed(1)
    p, N = 5, 40
    X = torch.randn(N, p, dtype=torch.float64)
    G = X.T @ X
    m = LinearGaussianSEM(p, marginalize=True)
    A = torch.bernoulli(torch.full((3, p, p), 0.4, dtype=torch.float64)) * (1 - torch.eye(p, dtype=torch.float64))
    base, flipped = m.node_evidence(G, N, A, flips=True)
    for b in range(3):
        for j in range(p):
            for v in range(p):
                B = A[b].clone()
                if v != j:
                    B[v, j] = 1 - B[v, j]
                assert flipped[b, j, v].item() == pytest.approx(m.node_evidence(G, N, B)[j].item(), abs=1e-8)
    # the straight-through gradient of the evidence is the exact edge-flip difference
    soft = torch.rand(p, p, dtype=torch.float64, requires_grad=True)
    hard = A[0]
    st = hard + (soft - soft.detach())
    val = m.collapsed_log_likelihood(G, N, st)
    assert val.item() == pytest.approx(m.node_evidence(G, N, hard).sum().item(), abs=1e-9)
    (grad,) = torch.autograd.grad(val, soft)
    for i in range(p):
        for j in range(p):
            if i == j:
                assert grad[i, j] == 0
                continue
            on, off = hard.clone(), hard.clone()
            on[i, j], off[i, j] = 1.0, 0.0
            ref = m.node_evidence(G, N, on).sum() - m.node_evidence(G, N, off).sum()
            assert grad[i, j].item() == pytest.approx(ref.item(), abs=1e-8)


def test_linear_sites_log_likelihood_and_vectorised_shapes():
    torch.manual_seed(2)
    p, N, K = 4, 7, 3
    m = LinearGaussianSEM(p, noise=0.5)
    X = torch.randn(N, p)
    A = _dag(p, 3).float().expand(K, 1, p, p)
    W = torch.randn(K, 1, p, p)
    ll = m.log_likelihood(X, A, {"weights": W})
    assert ll.shape == (K, N)
    k, n = 1, 4
    mean = X[n] @ (A[k, 0] * W[k, 0])
    ref = dist.Normal(mean, 0.5).log_prob(X[n]).sum()
    assert ll[k, n].item() == pytest.approx(ref.item(), abs=1e-5)


def test_mlp_predict_matches_a_per_node_loop_and_ignores_non_parents():
    torch.manual_seed(3)
    p, N, K = 4, 6, 2
    m = MLPSEM(p, hidden=(5, 3))
    X = torch.randn(N, p)
    A = _dag(p, 4).float()
    A[0, 3] = 1.0
    W = torch.randn(K, 1, p, m.num_weights)
    out = m.predict(X, A.expand(K, 1, p, p), W)
    assert out.shape == (K, N, p)
    for k in range(K):
        for j in range(p):
            w = W[k, 0, j]
            i0 = 0
            h = X * A[:, j]
            for li, (di, do) in enumerate(m._layer_dims):
                Wl = w[i0: i0 + do * di].reshape(do, di)
                i0 += do * di
                bl = w[i0: i0 + do]
                i0 += do
                h = h @ Wl.T + bl
                if li < len(m._layer_dims) - 1:
                    h = torch.tanh(h)
            assert torch.allclose(out[k, :, j], h[:, 0], atol=1e-5)
    # perturbing a non-parent of node 3 leaves its prediction unchanged (input masking, U-3)
    non_parent = [i for i in range(p) if A[i, 3] == 0 and i != 3][0]
    X2 = X.clone()
    X2[:, non_parent] += 10.0
    out2 = m.predict(X2, A, W[0, 0])
    assert torch.allclose(out2[:, 3], m.predict(X, A, W[0, 0])[:, 3])


def test_mechanism_sites_guide_and_subsampling():
    pyro.clear_param_store()
    torch.manual_seed(4)
    p, N = 3, 50
    X = torch.randn(N, p)
    A = _dag(p, 5).float()
    m = MLPSEM(p, hidden=(4,), subsample_size=10, name="mlp")
    tr = poutine.trace(m).get_trace(X, A)
    assert {"mlp.weights", "mlp.log_noise", "mlp.x", "mlp.data"} <= set(tr.nodes)
    assert tr.nodes["mlp.x"]["value"].shape == (10, p)
    tr.compute_log_prob()
    assert tr.nodes["mlp.x"]["scale"] == pytest.approx(N / 10)
    gtr = poutine.trace(m.guide).get_trace(A)
    assert set(m.latent_sites) == {n for n, s in gtr.nodes.items() if s["type"] == "sample"}
    # the linear SEM with sites and the collapsed one
    lin = LinearGaussianSEM(p, name="lin")
    assert set(poutine.trace(lin.guide).get_trace(A).stochastic_nodes) == {"lin.weights", "lin.log_noise"}
    col = LinearGaussianSEM(p, marginalize=True, name="col")
    tr = poutine.trace(col).get_trace(X, A)
    assert col.latent_sites == [] and "col.loglik" in tr.nodes
    with pytest.raises(ValueError, match="sufficient statistics"):
        LinearGaussianSEM(p, marginalize=True, subsample_size=5)
    with pytest.raises(ValueError, match="columns"):
        m(torch.randn(N, p + 1), A)
    with pytest.raises(ValueError, match="NaN"):
        m(torch.full((N, p), float("nan")), A)


def test_node_hypernet_shapes_and_init():
    net = NodeHyperNet(4, 4, 7, hidden=(8,), loc_init=torch.ones(4, 7))
    a = torch.rand(2, 3, 4, 4)
    loc, scale = net(a)
    assert loc.shape == (2, 3, 4, 7) and scale.shape == (2, 3, 4, 7)
    assert torch.allclose(scale, torch.full_like(scale, torch.nn.functional.softplus(torch.tensor(-2.0)).item() + 1e-6))
    # each node's network sees only its own input row
    a2 = a.clone()
    a2[..., 1, :] = 0.0
    loc2, _ = net(a2)
    assert torch.allclose(loc2[..., 0, :], loc[..., 0, :]) and not torch.allclose(loc2[..., 1, :], loc[..., 1, :])


def test_bge_matches_dibs_and_is_score_equivalent():
    import numpy as np

    from pyro_dag.structure import BGeSEM

    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    X[:, 1] += X[:, 0]
    X[:, 3] += X[:, 1] - X[:, 2]
    X = torch.tensor(X)
    m = BGeSEM(4)

    def score(edges):
        A = torch.zeros(4, 4, dtype=torch.float64)
        for i, j in edges:
            A[i, j] = 1.0
        return m.node_scores(X, A).sum().item()

    # reference: dibs-lib 1.3 BGe(n_vars=4).interventional_log_marginal_prob on the same data (float32)
    assert score([(0, 1), (1, 3), (2, 3)]) == pytest.approx(-245.99142, abs=2e-3)
    # Markov-equivalent DAGs score the same; a different equivalence class does not
    assert score([(1, 0), (1, 3), (2, 3)]) == pytest.approx(score([(0, 1), (1, 3), (2, 3)]), abs=1e-9)
    assert score([(0, 1)]) == pytest.approx(score([(1, 0)]), abs=1e-9)
    assert abs(score([(0, 1), (3, 1), (2, 3)]) - score([(0, 1), (1, 3), (2, 3)])) > 1.0
    # edge flips and the straight-through gradient
    A = torch.bernoulli(torch.full((2, 4, 4), 0.5, dtype=torch.float64)) * (1 - torch.eye(4, dtype=torch.float64))
    base, flipped = m.node_scores(X, A, flips=True)
    for b in range(2):
        for j in range(4):
            for v in range(4):
                B = A[b].clone()
                if v != j:
                    B[v, j] = 1 - B[v, j]
                assert flipped[b, j, v].item() == pytest.approx(m.node_scores(X, B)[j].item(), abs=1e-8)
    soft = torch.rand(4, 4, dtype=torch.float64, requires_grad=True)
    (grad,) = torch.autograd.grad(m.log_likelihood(X, A[0] + (soft - soft.detach())), soft)
    on, off = A[0].clone(), A[0].clone()
    on[0, 2], off[0, 2] = 1.0, 0.0
    assert grad[0, 2].item() == pytest.approx(score_diff := (m.node_scores(X, on).sum() - m.node_scores(X, off).sum()).item(), abs=1e-8)
    assert score_diff != 0


def test_mlp_kl_weight_scales_only_the_parameter_kl():
    """kl_weight multiplies KL(q(theta | A) || p(theta)) (model and guide sites alike), not the likelihood."""
    torch.manual_seed(7)
    p, N = 3, 40
    X = torch.randn(N, p)
    A = _dag(p, 2).float()
    terms = {}
    for w in (1.0, 0.01):
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        m = MLPSEM(p, hidden=(4,), name="mlp", kl_weight=w)
        m.hypernet.load_state_dict(terms.get("state", m.hypernet.state_dict()))
        terms["state"] = m.hypernet.state_dict()
        gtr = poutine.trace(m.guide).get_trace(A)
        mtr = poutine.trace(poutine.replay(m, trace=gtr)).get_trace(X, A)
        kl = sum(
            torch.distributions.kl_divergence(gtr.nodes[s]["fn"], mtr.nodes[s]["fn"]).sum() * gtr.nodes[s]["scale"]
            for s in m.latent_sites
        )
        mtr.compute_log_prob()
        assert all(mtr.nodes[s]["scale"] == w and gtr.nodes[s]["scale"] == w for s in m.latent_sites)
        terms[w] = (kl, mtr.nodes["mlp.x"]["log_prob_sum"])
    assert torch.allclose(terms[0.01][0], 0.01 * terms[1.0][0], rtol=1e-5)
    assert torch.allclose(terms[0.01][1], terms[1.0][1])
    with pytest.raises(ValueError, match="kl_weight"):
        MLPSEM(p, kl_weight=0.0)
