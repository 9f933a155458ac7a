"""LinkedGPPredictor: linked-GP moments against Monte Carlo through the same fitted GPs, dense GP regression,
chunking, ancestral samples and bad input."""
import pytest
import torch

from pyro_dag.infer.lamp.expectations import kernel_matrix
from pyro_dag.infer.lamp.fitted import FittedNode
from pyro_dag.infer.lamp.linked import LinkedGPPredictor

KERNELS = ["rbf", "matern52"]
F64 = torch.float64


def _node(name, inputs, dims, X, y, kernel, lengthscale, variance, nugget, observed=False):
    t = lambda v: torch.as_tensor(v, dtype=X.dtype, device=X.device)  # noqa: E731
    return FittedNode(name=name, inputs=tuple(inputs), input_dims=tuple(dims), X=X, y=y, kernel=kernel,
                      lengthscale=t(lengthscale), variance=t(variance), nugget=t(nugget), observed=observed)


def chain_nodes(kernel, n=30, seed=0, dtype=F64, device="cpu", nugget_w=(1e-6, 1e-4)):
    """x (1-D) -> w (2 outputs) -> y, hand-built with reasonable hyperparameters."""
    g = torch.Generator().manual_seed(seed)
    x = 4 * torch.rand(n, 1, dtype=F64, generator=g) - 2
    W = torch.cat([torch.sin(2 * x), torch.cos(x)], -1)
    Y = W[:, :1] * W[:, 1:] + 0.05 * torch.randn(n, 1, dtype=F64, generator=g)
    x, W, Y = (v.to(dtype=dtype, device=device) for v in (x, W, Y))
    w = _node("w", ["x"], [1], x, W, kernel, [[0.6], [0.9]], [1.0, 1.0], list(nugget_w))
    y = _node("y", ["w"], [2], W, Y, kernel, [[0.5, 0.7]], [0.8], [0.01], observed=True)
    return {"w": w, "y": y}


def collider_nodes(kernel, n=40, seed=1):
    """x1 -> w1, x2 -> w2, (w1, w2, x1) -> y: two stochastic parents and a root input."""
    g = torch.Generator().manual_seed(seed)
    x1 = 4 * torch.rand(n, 1, dtype=F64, generator=g) - 2
    x2 = 4 * torch.rand(n, 2, dtype=F64, generator=g) - 2
    w1 = torch.tanh(x1)
    w2 = torch.sin(x2[:, :1] - x2[:, 1:])
    y = w1 * w2 + 0.3 * x1 + 0.05 * torch.randn(n, 1, dtype=F64, generator=g)
    return {"w1": _node("w1", ["x1"], [1], x1, w1, kernel, [[0.8]], [1.0], [1e-4]),
            "w2": _node("w2", ["x2"], [2], x2, w2, kernel, [[0.7, 1.1]], [1.0], [1e-4]),
            "y": _node("y", ["w1", "w2", "x1"], [1, 1, 1], torch.cat([w1, w2, x1], -1), y, kernel,
                       [[0.6, 0.5, 1.5]], [1.2], [0.02], observed=True)}


def dense_gp(node, x, j):
    """GP posterior of output ``j`` at fixed inputs from a dense solve (the same first jitter rung)."""
    n = node.X.shape[0]
    K = kernel_matrix(node.kernel, node.X, node.X, node.lengthscale[j])
    K = K + (node.nugget[j] + 1e-8 * (1 + node.nugget[j])) * torch.eye(n, dtype=K.dtype)
    Kinv = torch.linalg.inv(K)
    means, variances = [], []
    for start in range(0, x.shape[0], 20_000):
        k = kernel_matrix(node.kernel, x[start:start + 20_000], node.X, node.lengthscale[j])
        means.append(k @ (Kinv @ node.y[:, j]))
        variances.append(node.variance[j] * (1 - ((k @ Kinv) * k).sum(-1)))
    return torch.cat(means), torch.cat(variances).clamp_min(0)


def dense_gp_all(node, x):
    out = [dense_gp(node, x, j) for j in range(node.output_dim)]
    return torch.stack([m for m, _ in out], -1), torch.stack([v for _, v in out], -1)


def _check_total_variance(node, draws_in, mean, var, z=5.0):
    """``draws_in [S, m, D]``: MC law of total variance of ``node`` at random inputs vs ``(mean, var) [m]``."""
    S, m, D = draws_in.shape
    mu, v = dense_gp(node, draws_in.reshape(S * m, D), 0)
    mu, v = mu.reshape(S, m), v.reshape(S, m)
    mc_mean = mu.mean(0)
    mc_var = v.mean(0) + mu.var(0)
    se_mean = mu.std(0) / S ** 0.5
    se_var = (v + (mu - mc_mean) ** 2).std(0) / S ** 0.5
    assert ((mc_mean - mean).abs() <= z * se_mean + 1e-10).all(), ((mc_mean - mean) / se_mean).abs().max()
    assert ((mc_var - var).abs() <= z * se_var + 1e-10).all(), ((mc_var - var) / se_var).abs().max()
    return ((mc_mean - mean) / se_mean).abs().max(), ((mc_var - var) / se_var).abs().max()


@pytest.mark.parametrize("kernel", KERNELS)
def test_two_layer_moments_match_monte_carlo(kernel):
    nodes = chain_nodes(kernel)
    pred = LinkedGPPredictor(nodes)
    assert pred.method == "exact"
    xt = torch.linspace(-2.5, 2.5, 7, dtype=F64).unsqueeze(-1)
    mom = pred.moments({"x": xt})
    # the first layer is plain GP regression
    mw, vw = dense_gp_all(nodes["w"], xt)
    assert torch.allclose(mom["w"][0], mw, atol=1e-9) and torch.allclose(mom["w"][1], vw, atol=1e-9)
    # w* drawn from its own GP conditional, then f* mean/var given w*: law of total variance
    S = 100_000
    w_draws = mw + vw.sqrt() * torch.randn(S, 7, 2, dtype=F64, generator=torch.Generator().manual_seed(2))
    _check_total_variance(nodes["y"], w_draws, mom["y"][0][:, 0], mom["y"][1][:, 0])
    # the input uncertainty matters here (so the check has teeth): plug-in moments are far off
    plug_mean, plug_var = dense_gp(nodes["y"], mw, 0)
    assert ((mom["y"][1][:, 0] - plug_var).abs() > 0.2 * plug_var).any()
    assert ((mom["y"][0][:, 0] - plug_mean).abs() > 0.01).any()


@pytest.mark.parametrize("kernel", KERNELS)
def test_collider_moments_match_monte_carlo(kernel):
    nodes = collider_nodes(kernel)
    pred = LinkedGPPredictor(nodes)
    g = torch.Generator().manual_seed(3)
    x1 = 5 * torch.rand(6, 1, dtype=F64, generator=g) - 2.5
    x2 = 5 * torch.rand(6, 2, dtype=F64, generator=g) - 2.5
    mom = pred.moments({"x1": x1, "x2": x2})
    S = 50_000
    m1, v1 = dense_gp_all(nodes["w1"], x1)
    m2, v2 = dense_gp_all(nodes["w2"], x2)
    d1 = m1 + v1.sqrt() * torch.randn(S, 6, 1, dtype=F64, generator=g)
    d2 = m2 + v2.sqrt() * torch.randn(S, 6, 1, dtype=F64, generator=g)
    draws = torch.cat([d1, d2, x1.expand(S, -1, -1)], -1)
    _check_total_variance(nodes["y"], draws, mom["y"][0][:, 0], mom["y"][1][:, 0])


@pytest.mark.parametrize("kernel", KERNELS)
def test_third_layer_uses_the_moment_matched_parent(kernel):
    # x -> w -> y -> z: z's moments are the linked moments at y ~ N(moment-matched mean, var)
    nodes = chain_nodes(kernel)
    y = nodes["y"]
    Z = torch.sin(3 * y.y)
    nodes["z"] = _node("z", ["y"], [1], y.y, Z, kernel, [[0.4]], [1.0], [1e-3])
    pred = LinkedGPPredictor(nodes)
    xt = torch.linspace(-2, 2, 5, dtype=F64).unsqueeze(-1)
    mom = pred.moments({"x": xt})
    S = 100_000
    draws = mom["y"][0] + mom["y"][1].sqrt() * torch.randn(S, 5, 1, dtype=F64,
                                                           generator=torch.Generator().manual_seed(4))
    _check_total_variance(nodes["z"], draws, mom["z"][0][:, 0], mom["z"][1][:, 0])
    # nodes= returns only what was asked, computing the ancestors
    only = pred.moments({"x": xt}, nodes="z")
    assert list(only) == ["z"] and torch.allclose(only["z"][0], mom["z"][0])


@pytest.mark.parametrize("kernel", KERNELS)
def test_one_node_dag_is_gp_regression(kernel):
    g = torch.Generator().manual_seed(5)
    X = 4 * torch.rand(25, 3, dtype=F64, generator=g) - 2
    y = torch.stack([X.sin().sum(-1), X[:, 0] * X[:, 1]], -1) + 0.1 * torch.randn(25, 2, dtype=F64, generator=g)
    node = _node("y", ["x"], [3], X, y, kernel, [[0.8, 1.2, 2.0], [1.5, 1.5, 1.5]], [1.3, 0.7], [0.05, 0.2],
                 observed=True)
    pred = LinkedGPPredictor({"y": node})
    xt = 5 * torch.rand(11, 3, dtype=F64, generator=g) - 2.5
    mean, var = pred.moments({"x": xt})["y"]
    ref_mean, ref_var = dense_gp_all(node, xt)
    assert torch.allclose(mean, ref_mean, rtol=1e-9, atol=1e-10)
    assert torch.allclose(var, ref_var, rtol=1e-9, atol=1e-10)
    _, noisy = pred.moments({"x": xt}, include_noise=True)["y"]
    assert torch.allclose(noisy, var + node.variance * node.nugget)


@pytest.mark.parametrize("kernel", KERNELS)
def test_chunked_equals_unchunked(kernel):
    nodes = collider_nodes(kernel)
    g = torch.Generator().manual_seed(6)
    inputs = {"x1": torch.randn(9, 1, dtype=F64, generator=g), "x2": torch.randn(9, 2, dtype=F64, generator=g)}
    one = LinkedGPPredictor(nodes, chunk_size=1).moments(inputs)
    three = LinkedGPPredictor(nodes, chunk_size=4).moments(inputs)
    whole = LinkedGPPredictor(nodes, chunk_size=1000).moments(inputs)
    for name in nodes:
        for a, b, c in zip(one[name], three[name], whole[name]):
            assert torch.allclose(a, c, rtol=1e-12, atol=1e-13) and torch.allclose(b, c, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("kernel", KERNELS)
def test_samples_match_moments(kernel):
    nodes = collider_nodes(kernel)
    pred = LinkedGPPredictor(nodes)
    g = torch.Generator().manual_seed(7)
    inputs = {"x1": 4 * torch.rand(5, 1, dtype=F64, generator=g) - 2,
              "x2": 4 * torch.rand(5, 2, dtype=F64, generator=g) - 2}
    mom = pred.moments(inputs, include_noise=True)
    S = 40_000
    draws = pred.sample(inputs, S, include_noise=True, generator=torch.Generator().manual_seed(8))
    assert set(draws) == set(nodes)
    for name, f in draws.items():
        assert f.shape == (S, 5, 1)
        mean, var = mom[name]
        se_mean = (var / S).sqrt()
        se_var = ((f - f.mean(0)) ** 2).std(0) / S ** 0.5
        assert ((f.mean(0) - mean).abs() <= 5 * se_mean).all(), name
        assert ((f.var(0) - var).abs() <= 5 * se_var).all(), name
    # the same generator seed gives the same draws; nodes= restricts the output
    again = pred.sample(inputs, S, include_noise=True, nodes=["y"], generator=torch.Generator().manual_seed(8))
    assert list(again) == ["y"] and torch.equal(again["y"], draws["y"])


def test_observed_noise_only_in_returned_values():
    nodes = chain_nodes("rbf")
    pred = LinkedGPPredictor(nodes)
    xt = torch.zeros(3, 1, dtype=F64)
    plain = pred.moments({"x": xt})
    noisy = pred.moments({"x": xt}, include_noise=True)
    assert torch.equal(plain["w"][1], noisy["w"][1])  # hidden node: no noise added
    assert torch.allclose(noisy["y"][1] - plain["y"][1], nodes["y"].variance * nodes["y"].nugget)


def test_float32_and_device(device):
    # nuggets above float32's jitter (1e-5 relative), so both precisions fit the same GPs
    nodes64 = chain_nodes("matern52", nugget_w=(1e-3, 1e-3))
    nodes32 = chain_nodes("matern52", dtype=torch.float32, device=device, nugget_w=(1e-3, 1e-3))
    xt = torch.linspace(-2, 2, 6, dtype=F64).unsqueeze(-1)
    ref = LinkedGPPredictor(nodes64).moments({"x": xt})
    pred = LinkedGPPredictor(nodes32)
    out = pred.moments({"x": xt})  # float64 CPU inputs are moved to the nodes' dtype and device
    for name in ref:
        for a, b in zip(out[name], ref[name]):
            assert a.dtype == torch.float32 and a.device.type == torch.device(device).type
            assert torch.allclose(a.double().cpu(), b, atol=2e-3)
    draws = pred.sample({"x": xt}, 10)
    assert draws["y"].dtype == torch.float32 and draws["y"].shape == (10, 6, 1)


def test_auto_method_by_size():
    nodes = chain_nodes("rbf")
    assert LinkedGPPredictor(nodes).method == "exact"
    big = torch.linspace(-2, 2, 1001, dtype=F64).unsqueeze(-1)
    w = nodes["w"]
    nodes["w"] = _node("w", ["x"], [1], big, torch.cat([big.sin(), big.cos()], -1), "rbf", w.lengthscale,
                       w.variance, w.nugget)
    assert LinkedGPPredictor(nodes).method == "nystrom_local"
    assert LinkedGPPredictor(nodes, method="exact").method == "exact"


def test_bad_input_messages():
    nodes = collider_nodes("rbf")
    pred = LinkedGPPredictor(nodes)
    x1, x2 = torch.zeros(4, 1, dtype=F64), torch.zeros(4, 2, dtype=F64)
    with pytest.raises(ValueError, match=r"no root 'x2'.*shape \[m, 2\]"):
        pred.moments({"x1": x1})
    with pytest.raises(ValueError, match=r"inputs\['x2'\] must have shape \[m, 2\]"):
        pred.moments({"x1": x1, "x2": torch.zeros(4, 3, dtype=F64)})
    with pytest.raises(ValueError, match=r"inputs\['x2'\] has 3 rows"):
        pred.sample({"x1": x1, "x2": x2[:3]}, 5)
    with pytest.raises(ValueError, match="NaN"):
        pred.moments({"x1": x1, "x2": torch.full_like(x2, float("nan"))})
    with pytest.raises(ValueError, match="unknown node 'v'"):
        pred.moments({"x1": x1, "x2": x2}, nodes=["v"])
    # only the roots of the requested nodes are needed
    assert set(pred.moments({"x1": x1}, nodes="w1")) == {"w1"}
    with pytest.raises(ValueError, match="method must be"):
        LinkedGPPredictor(nodes, method="mc")
    with pytest.raises(ValueError, match="use its name as the key"):
        LinkedGPPredictor({"v": nodes["w1"]})
    bad = dict(nodes)
    w2 = nodes["w2"]
    bad["w2"] = _node("w2", ["x2"], [2], w2.X, torch.cat([w2.y, w2.y], -1), "rbf", w2.lengthscale.repeat(2, 1),
                      [1.0, 1.0], [1e-4, 1e-4])
    with pytest.raises(ValueError, match="takes 1 columns from 'w2', which has 2 outputs"):
        LinkedGPPredictor(bad)
    cyc = chain_nodes("rbf")
    w = cyc["w"]
    cyc["w"] = _node("w", ["y"], [1], w.X, w.y, "rbf", w.lengthscale, w.variance, w.nugget)
    with pytest.raises(ValueError, match="cycle"):
        LinkedGPPredictor(cyc)
    for field, value, message in [("lengthscale", [[float("nan")], [1.0]], "lengthscale must be finite and > 0"),
                                  ("variance", [1.0, 0.0], "variance must be finite and > 0"),
                                  ("nugget", [-1e-3, 0.0], "nugget must be finite and >= 0")]:
        broken = chain_nodes("rbf")
        w = broken["w"]
        hyper = {"lengthscale": w.lengthscale, "variance": w.variance, "nugget": w.nugget, field: value}
        broken["w"] = _node("w", ["x"], [1], w.X, w.y, "rbf", **hyper)
        with pytest.raises(ValueError, match=f"node 'w': {message}"):
            LinkedGPPredictor(broken)
    broken = chain_nodes("rbf")
    w = broken["w"]
    broken["w"] = _node("w", ["x"], [1], w.X, w.y * float("nan"), "rbf", w.lengthscale, w.variance, w.nugget)
    with pytest.raises(ValueError, match="node 'w': X and y must be finite"):
        LinkedGPPredictor(broken)


def test_repeated_calls_reuse_moments_only_for_the_same_tensors(monkeypatch):
    nodes = chain_nodes("rbf")
    pred = LinkedGPPredictor(nodes)
    calls = []
    original = pred._node_moments
    monkeypatch.setattr(pred, "_node_moments", lambda *args: calls.append(args[0]) or original(*args))
    xt = torch.linspace(-1, 1, 4, dtype=F64).unsqueeze(-1)
    first = pred.moments({"x": xt})
    first["y"][0].add_(100.0)  # returned tensors are copies: the cache is not affected
    again = pred.moments({"x": xt}, include_noise=True)
    assert calls == ["w", "y"]  # reused, not recomputed
    assert torch.allclose(again["y"][0] + 100.0, first["y"][0])
    xt.add_(0.5)  # in place: the version counter changes, so it is recomputed
    moved = pred.moments({"x": xt})
    assert calls == ["w", "y", "w", "y"]
    fresh = LinkedGPPredictor(nodes).moments({"x": xt.clone()})
    assert torch.allclose(moved["y"][0], fresh["y"][0]) and torch.allclose(moved["y"][1], fresh["y"][1])


def test_samples_keep_the_shared_ancestor():
    # diamond x -> w -> (v1, v2) -> y: v1 and v2 are correlated through w. sample() draws w once per sample,
    # so y's draws follow the true linked predictive; compare with a brute-force ancestral Monte Carlo
    g = torch.Generator().manual_seed(11)
    n = 30
    x = 4 * torch.rand(n, 1, dtype=F64, generator=g) - 2
    w = torch.sin(1.5 * x)
    v1, v2 = torch.tanh(2 * w), w ** 2
    y = v1 + v2 + 0.05 * torch.randn(n, 1, dtype=F64, generator=g)
    nodes = {"w": _node("w", ["x"], [1], x, w, "rbf", [[0.5]], [1.0], [1e-3]),
             "v1": _node("v1", ["w"], [1], w, v1, "rbf", [[0.6]], [1.0], [1e-3]),
             "v2": _node("v2", ["w"], [1], w, v2, "rbf", [[0.6]], [1.0], [1e-3]),
             "y": _node("y", ["v1", "v2"], [1, 1], torch.cat([v1, v2], -1), y, "rbf", [[0.7, 0.7]], [1.0], [0.01])}
    pred = LinkedGPPredictor(nodes)
    xt = torch.tensor([[-2.6], [-1.0], [0.3], [2.4]], dtype=F64)
    S = 40_000
    draws = pred.sample({"x": xt}, S, generator=torch.Generator().manual_seed(12))["y"][..., 0]
    # brute force: w, then v1 and v2 given the same w, then y's conditional moments (law of total variance)
    mw, vw = dense_gp(nodes["w"], xt, 0)
    wd = (mw + vw.sqrt() * torch.randn(S, 4, dtype=F64, generator=g)).reshape(-1, 1)
    vd = []
    for name in ("v1", "v2"):
        m, v = dense_gp(nodes[name], wd, 0)
        vd.append(m + v.sqrt() * torch.randn(m.shape, dtype=F64, generator=g))
    my, vy = dense_gp(nodes["y"], torch.stack(vd, -1), 0)
    my, vy = my.reshape(S, 4), vy.reshape(S, 4)
    ref_mean, ref_var = my.mean(0), vy.mean(0) + my.var(0)
    se_mean = (2 * ref_var / S).sqrt()  # two independent MC estimates
    se_var = ref_var * (4 / S) ** 0.5 * 1.5  # ~ sqrt(2 (2σ⁴/S)), with room for non-Gaussian tails
    assert ((draws.mean(0) - ref_mean).abs() <= 5 * se_mean).all()
    assert ((draws.var(0) - ref_var).abs() <= 5 * se_var).all()
