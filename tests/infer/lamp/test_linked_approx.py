"""Nyström first layer + nearest-neighbour local GP against dense formulas and the exact plug-in prediction."""
import pytest
import torch

from pyro_dag.infer.lamp.approx import local_gp_moments, nystrom_moments, nystrom_state
from pyro_dag.infer.lamp.expectations import kernel_matrix
from pyro_dag.infer.lamp.fitted import FittedNode
from pyro_dag.infer.lamp.linked import LinkedGPPredictor

KERNELS = ["rbf", "matern52"]
F64 = torch.float64
JITTER = 1e-8  # first rung of the float64 jitter ladder, relative to the diagonal 1 + g


def _node(name, inputs, dims, X, y, kernel, lengthscale, variance, nugget, observed=False):
    t = lambda v: torch.as_tensor(v, dtype=X.dtype)  # noqa: E731
    return FittedNode(name=name, inputs=tuple(inputs), input_dims=tuple(dims), X=X, y=y, kernel=kernel,
                      lengthscale=t(lengthscale), variance=t(variance), nugget=t(nugget), observed=observed)


def two_layer(kernel, n=40, seed=0):
    """x (2-D) -> w -> y, where y also takes x: a plug-in input that mixes a parent and a root."""
    g = torch.Generator().manual_seed(seed)
    x = 4 * torch.rand(n, 2, dtype=F64, generator=g) - 2
    W = torch.sin(x[:, :1] + x[:, 1:])
    Y = W ** 2 + 0.2 * x[:, :1] + 0.05 * torch.randn(n, 1, dtype=F64, generator=g)
    w = _node("w", ["x"], [2], x, W, kernel, [[0.9, 1.1]], [1.0], [1e-4])
    y = _node("y", ["w", "x"], [1, 2], torch.cat([W, x], -1), Y, kernel, [[0.5, 1.0, 1.5]], [0.8], [0.01],
              observed=True)
    return {"w": w, "y": y}


def dense_gp(node, x, j=0):
    K = kernel_matrix(node.kernel, node.X, node.X, node.lengthscale[j])
    K = K + (node.nugget[j] + JITTER * (1 + node.nugget[j])) * torch.eye(node.X.shape[0], dtype=F64)
    k = kernel_matrix(node.kernel, x, node.X, node.lengthscale[j])
    return k @ torch.linalg.solve(K, node.y[:, j]), node.variance[j] * (1 - (k * torch.linalg.solve(K, k.T).T).sum(-1))


def _test_inputs(m=9, d=2, seed=1):
    return 4 * torch.rand(m, d, dtype=F64, generator=torch.Generator().manual_seed(seed)) - 2


@pytest.mark.parametrize("kernel", KERNELS)
def test_nystrom_subset_matches_dense_subset_of_regressors(kernel):
    node = two_layer(kernel)["w"]
    subset = torch.randperm(40, generator=torch.Generator().manual_seed(2))[:15]
    xt = _test_inputs()
    mean, var = nystrom_moments(node, nystrom_state(node, subset), subset, xt)
    # subset of regressors / DTC (Quiñonero-Candela & Rasmussen 2005) with explicit inverses
    g = node.nugget[0] + JITTER * (1 + node.nugget[0])
    ell = node.lengthscale[0]
    KQQ = kernel_matrix(kernel, node.X[subset], node.X[subset], ell)
    KQX = kernel_matrix(kernel, node.X[subset], node.X, ell)
    ks = kernel_matrix(kernel, xt, node.X[subset], ell)
    Minv = torch.linalg.inv(g * KQQ + KQX @ KQX.T)
    ref_mean = ks @ Minv @ KQX @ node.y[:, 0]
    ref_var = 1 - (ks * torch.linalg.solve(KQQ, ks.T).T).sum(-1) + g * (ks * (Minv @ ks.T).T).sum(-1)
    assert torch.allclose(mean[:, 0], ref_mean, atol=1e-6)
    assert torch.allclose(var[:, 0], ref_var, atol=1e-5)
    # a 15-point subset is a real approximation here (the check is not vacuous)
    exact_mean, _ = dense_gp(node, xt)
    assert (mean[:, 0] - exact_mean).abs().max() > 1e-3


@pytest.mark.parametrize("kernel", KERNELS)
def test_nystrom_with_all_rows_is_the_exact_gp(kernel):
    node = two_layer(kernel)["w"]
    xt = _test_inputs()
    subset = torch.arange(40)
    mean, var = nystrom_moments(node, nystrom_state(node, subset), subset, xt)
    ref_mean, ref_var = dense_gp(node, xt)
    # equal up to the 1e-8 jitter on K(X_Q, X_Q), which the exact GP does not have
    assert torch.allclose(mean[:, 0], ref_mean, atol=1e-5)
    assert torch.allclose(var[:, 0], ref_var, atol=1e-5)


@pytest.mark.parametrize("kernel", KERNELS)
def test_local_gp_with_all_rows_is_the_exact_gp(kernel):
    node = two_layer(kernel)["y"]
    xt = _test_inputs(d=3)
    mean, var = local_gp_moments(node, xt, num_neighbours=40)
    ref_mean, ref_var = dense_gp(node, xt)
    assert torch.allclose(mean[:, 0], ref_mean, atol=1e-9)
    assert torch.allclose(var[:, 0], ref_var, atol=1e-9)
    # more neighbours than rows means all rows
    assert torch.allclose(local_gp_moments(node, xt, num_neighbours=500)[0], mean)


@pytest.mark.parametrize("kernel", KERNELS)
def test_local_gp_matches_brute_force_neighbours(kernel):
    node = two_layer(kernel)["y"]
    xt = _test_inputs(m=6, d=3, seed=3)
    k = 12
    mean, var = local_gp_moments(node, xt, num_neighbours=k, chunk_size=4)
    ell = node.lengthscale[0]
    for i in range(xt.shape[0]):
        dist = (((node.X - xt[i]) / ell) ** 2).sum(-1)
        idx = dist.argsort()[:k]
        local = _node("y", node.inputs, node.input_dims, node.X[idx], node.y[idx], kernel, node.lengthscale,
                      node.variance, node.nugget)
        m_ref, v_ref = dense_gp(local, xt[i:i + 1])
        assert torch.allclose(mean[i, 0], m_ref[0], atol=1e-9) and torch.allclose(var[i, 0], v_ref[0], atol=1e-9)


@pytest.mark.parametrize("kernel", KERNELS)
def test_full_rows_equal_the_exact_plug_in_prediction(kernel):
    nodes = two_layer(kernel)
    xt = _test_inputs()
    approx = LinkedGPPredictor(nodes, method="nystrom_local", num_nystrom=40, num_neighbours=40)
    out = approx.moments({"x": xt}, include_noise=True)
    mw, vw = dense_gp(nodes["w"], xt)
    my, vy = dense_gp(nodes["y"], torch.cat([mw.unsqueeze(-1), xt], -1))  # plug-in mean of w
    assert torch.allclose(out["w"][0][:, 0], mw, atol=1e-5) and torch.allclose(out["w"][1][:, 0], vw, atol=1e-5)
    assert torch.allclose(out["y"][0][:, 0], my, atol=1e-5)
    assert torch.allclose(out["y"][1][:, 0], vy + nodes["y"].variance * nodes["y"].nugget, atol=1e-5)
    # and it differs from the exact linked GP, which propagates w's uncertainty
    linked = LinkedGPPredictor(nodes, method="exact").moments({"x": xt}, include_noise=True)
    assert (linked["y"][1] - out["y"][1]).abs().max() > 1e-3


def test_subsets_are_seeded_and_samples_follow_the_moments():
    nodes = two_layer("rbf")
    a = LinkedGPPredictor(nodes, method="nystrom_local", num_nystrom=20, num_neighbours=15, seed=5)
    b = LinkedGPPredictor(nodes, method="nystrom_local", num_nystrom=20, num_neighbours=15, seed=5)
    c = LinkedGPPredictor(nodes, method="nystrom_local", num_nystrom=20, num_neighbours=15, seed=6)
    xt = _test_inputs()
    ma, mb, mc = (p.moments({"x": xt})["y"][0] for p in (a, b, c))
    assert torch.equal(ma, mb) and not torch.equal(ma, mc)
    assert len(a._approximation().subsets["w"]) == 20
    mean, var = a.moments({"x": xt})["y"]
    S = 40_000
    draws = a.sample({"x": xt}, S, generator=torch.Generator().manual_seed(0))["y"]
    assert draws.shape == (S, 9, 1)
    assert ((draws.mean(0) - mean).abs() <= 5 * (var / S).sqrt()).all()
    assert ((draws.var(0) / var - 1).abs() <= 5 * (2 / S) ** 0.5).all()
