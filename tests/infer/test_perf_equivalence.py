"""Speed-ups of the hot paths leave the numbers unchanged: each fast path against the code it replaces (kept here
as a dense reference), loss and gradients to 1e-10 in float64."""
import pytest
import torch

from pyro_dag import kernels
from pyro_dag.ops.rbf import rbf_cross


def _sqdist_reference(X, Z):
    x2 = X.pow(2).sum(-1, keepdim=True)
    z2 = Z.pow(2).sum(-1, keepdim=True)
    return (x2 - 2 * X @ Z.transpose(-1, -2) + z2.transpose(-1, -2)).clamp_min(0)


def _rbf_reference(X, Z, ls, var):
    """The autograd composition RBF used before the fused op (Stationary.forward with RBF.profile)."""
    return var * torch.exp(-0.5 * _sqdist_reference(X / ls, Z / ls))


@pytest.mark.parametrize("xshape,zshape,vshape", [
    ((7, 3), (5, 3), ()),                 # plain 2-D
    ((4, 7, 1), (5, 1), ()),              # samples in front of X only (a node with a drawn parent)
    ((2, 7, 2), (2, 5, 2), ()),           # batched on both sides
    ((7, 2), (3, 5, 2), ()),              # batched on Z's side only
    ((4, 7, 2), (5, 2), (4, 1, 1)),       # a batched variance (e.g. sampled hyperparameters)
])
def test_rbf_cross_matches_autograd_composition(xshape, zshape, vshape):
    g = torch.Generator().manual_seed(0)
    X = torch.randn(xshape, dtype=torch.float64, generator=g).requires_grad_()
    Z = torch.randn(zshape, dtype=torch.float64, generator=g).requires_grad_()
    ls = torch.rand(xshape[-1], dtype=torch.float64, generator=g).add(0.5).requires_grad_()
    var = torch.rand(vshape, dtype=torch.float64, generator=g).add(0.5).requires_grad_()
    ref = _rbf_reference(X, Z, ls, var)
    got = rbf_cross(X / ls, Z / ls, var)
    assert got.shape == ref.shape
    assert torch.allclose(got, ref, rtol=1e-12, atol=1e-14)
    w = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    g_ref = torch.autograd.grad((ref * w).sum(), [X, Z, ls, var])
    g_got = torch.autograd.grad((got * w).sum(), [X, Z, ls, var])
    for a, b in zip(g_got, g_ref):
        assert a.shape == b.shape
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_rbf_cross_gradcheck():
    g = torch.Generator().manual_seed(1)
    X = torch.randn(2, 4, 2, dtype=torch.float64, generator=g, requires_grad=True)
    Z = torch.randn(3, 2, dtype=torch.float64, generator=g, requires_grad=True)
    var = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(rbf_cross, (X, Z, var))


def test_rbf_kernel_uses_the_fused_path_with_the_same_values():
    k = kernels.RBF(variance=1.7, lengthscale=0.6).double()
    k.bind(2)
    X = torch.randn(3, 6, 2, dtype=torch.float64)
    Z = torch.randn(4, 2, dtype=torch.float64)
    ref = _rbf_reference(X, Z, k.lengthscale, k.variance)
    assert torch.allclose(k(X, Z), ref, rtol=1e-12)
    # the Gram matrix K(Z, Z) and the diagonal keep the generic path
    assert torch.allclose(k(Z), _rbf_reference(Z, Z, k.lengthscale, k.variance), rtol=1e-12)
    assert torch.allclose(k(X, diag=True), k.variance.expand(3, 6))


@pytest.mark.parametrize("shape", [(7, 5), (3, 7, 5), (2, 3, 4, 5)])
def test_mean_and_quadratic_matches_autograd_composition(shape):
    from pyro_dag.ops.quadratic import mean_and_quadratic, sum_squares

    g = torch.Generator().manual_seed(2)
    A = torch.randn(shape, dtype=torch.float64, generator=g).requires_grad_()
    m = torch.randn(shape[-1], dtype=torch.float64, generator=g).requires_grad_()
    T = torch.randn(shape[-1], shape[-1], dtype=torch.float64, generator=g).tril().requires_grad_()
    loc, q = mean_and_quadratic(A, m, T @ T.T)
    ss = sum_squares(A)
    AL = A @ T
    ref_loc, ref_q, ref_ss = A @ m, (AL * AL).sum(-1), (A * A).sum(-1)
    assert loc.shape == q.shape == ss.shape == shape[:-1]
    assert torch.allclose(loc, ref_loc, rtol=1e-12) and torch.allclose(q, ref_q, rtol=1e-12)
    assert torch.equal(ss, ref_ss)
    w1, w2, w3 = (torch.randn(shape[:-1], dtype=torch.float64, generator=g) for _ in range(3))
    got = torch.autograd.grad((loc * w1 + q * w2 + ss * w3).sum(), [A, m, T])
    ref = torch.autograd.grad((ref_loc * w1 + ref_q * w2 + ref_ss * w3).sum(), [A, m, T])
    for a, b in zip(got, ref):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)


def test_mean_and_quadratic_gradcheck():
    from pyro_dag.ops.quadratic import mean_and_quadratic, sum_squares

    g = torch.Generator().manual_seed(3)
    A = torch.randn(2, 4, 3, dtype=torch.float64, generator=g, requires_grad=True)
    m = torch.randn(3, dtype=torch.float64, generator=g, requires_grad=True)
    B = torch.randn(3, 3, dtype=torch.float64, generator=g)
    S = (B @ B.T).requires_grad_()
    assert torch.autograd.gradcheck(mean_and_quadratic, (A, m, S))
    assert torch.autograd.gradcheck(sum_squares, (A,))


@pytest.mark.parametrize("upper", [True, False])
def test_whitened_moments_match_autograd_composition(upper):
    """(μ, σ²) and the gradients of K_xz, L, k_xx, m and S equal the composition solve -> floor of r -> mean and
    quadratic form, also where the floor of r is active (cases on inducing inputs, no jitter)."""
    from pyro_dag.ops.predictive import whitened_moments

    g = torch.Generator().manual_seed(4)
    Z = torch.randn(5, 1, dtype=torch.float64, generator=g)
    X = torch.cat([torch.randn(9, 1, dtype=torch.float64, generator=g), Z[:2]])
    K = torch.exp(-0.5 * (Z - Z.T) ** 2)
    Kxz = torch.exp(-0.5 * (X - Z.T) ** 2).requires_grad_()
    L = (torch.linalg.cholesky(K.flip(-1, -2)).flip(-1, -2) if upper else torch.linalg.cholesky(K)).requires_grad_()
    kdiag = torch.ones(X.shape[0], dtype=torch.float64).requires_grad_()
    m = torch.randn(5, dtype=torch.float64, generator=g).requires_grad_()
    T = torch.randn(5, 5, dtype=torch.float64, generator=g).tril().requires_grad_()
    loc, var = whitened_moments(Kxz, L, kdiag, m, T @ T.T, upper)
    a = torch.linalg.solve_triangular(L, Kxz.T, upper=upper).T
    r_unclamped = kdiag - (a * a).sum(-1)
    assert bool((r_unclamped < torch.finfo(a.dtype).tiny).any())    # the floor is exercised
    ref_loc = a @ m
    ref_var = ((a @ T) ** 2).sum(-1) + r_unclamped.clamp_min(torch.finfo(a.dtype).tiny)
    assert torch.allclose(loc, ref_loc, rtol=1e-12) and torch.allclose(var, ref_var, rtol=1e-12)
    w1, w2 = (torch.randn(loc.shape, dtype=torch.float64, generator=g) for _ in range(2))
    wrt = [Kxz, L, kdiag, m, T]
    got = torch.autograd.grad((loc * w1 + var * w2).sum(), wrt)
    ref = torch.autograd.grad((ref_loc * w1 + ref_var * w2).sum(), wrt)
    for x, y in zip(got, ref):
        assert torch.allclose(x, y, rtol=1e-10, atol=1e-12)


def test_whitened_moments_gradcheck():
    from pyro_dag.ops.predictive import whitened_moments

    g = torch.Generator().manual_seed(5)
    B = torch.randn(4, 4, dtype=torch.float64, generator=g)
    L = (torch.linalg.cholesky(B @ B.T + 4 * torch.eye(4, dtype=torch.float64)).T).requires_grad_()
    Kxz = torch.randn(6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    kdiag = (10 + torch.rand(6, dtype=torch.float64, generator=g)).requires_grad_()
    m = torch.randn(4, dtype=torch.float64, generator=g, requires_grad=True)
    C = torch.randn(4, 4, dtype=torch.float64, generator=g)
    S = (C @ C.T).requires_grad_()
    assert torch.autograd.gradcheck(lambda k, l, d, mm, ss: whitened_moments(k, l, d, mm, ss, True),
                                    (Kxz, L, kdiag, m, S))


# ---------------------------------------------------------------------------------------------- end to end
def _reference_whitened_conditional(kernel, Z, L, X, upper=False, inverse=None):
    """whitened_conditional before the flattened solve: a batched right-sided triangular solve."""
    Kxz = kernel(X, Z)
    if inverse is not None:
        a = Kxz @ inverse
    else:
        a = torch.linalg.solve_triangular(L.transpose(-1, -2), Kxz, upper=not upper, left=False)
    r = (kernel(X, diag=True) - (a * a).sum(-1)).clamp_min(torch.finfo(a.dtype).tiny)
    return a, r


def _reference_rbf_forward(self, X, Z=None, diag=False):
    return kernels.Stationary.forward(self, X, Z, diag)


def _reference_mean_field_predict(self, node, a, r):
    """MeanFieldState.predict before the fused mean and quadratic form: A L and autograd's squares."""
    post = self.posterior
    b = post.block_of[node]
    m = post.locs[node].reshape(b.dim, b.num_inducing)
    L = post.scale_trils[node].reshape(b.dim, b.num_inducing, b.size)
    loc = a @ m.T
    if b.dim == 1:
        AL = a @ L[0]
        var = (AL * AL).sum(-1) + r
        return loc, var[..., None, None]
    AL = torch.stack([a @ L[j] for j in range(b.dim)], dim=-2)
    cov = torch.einsum("...jp,...kp->...jk", AL, AL)
    return loc, cov + r[..., None, None] * torch.eye(b.dim, dtype=a.dtype, device=a.device)


def _reference_paths(m):
    """Monkeypatch (context ``m``) every fast path of a DAGELBO step back to the code it replaced."""
    from pyro_dag.dgp import conditionals as dgp
    from pyro_dag.infer.autoguide import samplers

    m.setattr(dgp, "whitened_conditional", _reference_whitened_conditional)
    m.setattr(kernels.RBF, "forward", _reference_rbf_forward)
    m.setattr(samplers.MeanFieldState, "predict", _reference_mean_field_predict)
    m.setattr(samplers.MeanFieldState, "predict_node", lambda self, *args, **kwargs: None)  # no fused moments


def _assert_same(fast, ref):
    assert torch.allclose(fast[0], ref[0], rtol=1e-10, atol=0)
    assert len(fast[1]) == len(ref[1])
    for g, h in zip(fast[1], ref[1]):
        assert (g is None) == (h is None)
        if g is not None:
            assert torch.allclose(g, h, rtol=1e-10, atol=1e-10 * float(h.abs().max().clamp_min(1.0)))


def _loss_and_grads(make, structure, sampler, seed=3, fixed=False):
    import contextlib

    import pyro
    from helpers import randomize_guide
    from pyro_dag.infer import DAGELBO
    from pyro_dag.infer.autoguide import AutoStructuredGuide
    from pyro_dag.utils import freeze

    pyro.clear_param_store()
    model, inputs, data = make()
    guide = AutoStructuredGuide(model, precision=structure)
    guide(inputs, data)
    randomize_guide(guide, scale=0.2)
    if fixed:  # as fit_collider: frozen kernels and inducing inputs, factors reused inside fixed_kernels()
        freeze(model.kernels)
        freeze(model.inducing)
    params = [p for _, p in sorted(list(guide.named_parameters()) + list(model.named_parameters()))
              if p.requires_grad]
    pyro.set_rng_seed(seed)
    with model.fixed_kernels() if fixed else contextlib.nullcontext():
        loss = DAGELBO(num_particles=3, sampler=sampler).differentiable_loss(model, guide, inputs, data)
    return loss.detach(), [g for g in torch.autograd.grad(loss, params, allow_unused=True)]


def _problems():
    from helpers import chain_problem, collider_problem

    return {"chain": lambda: chain_problem(n=15, M=6), "collider": lambda: collider_problem(M=4)}


@pytest.mark.parametrize("fixed", [False, True])
@pytest.mark.parametrize("problem", ["chain", "collider"])
@pytest.mark.parametrize("structure,sampler", [("mean_field", "conditional"), ("chordal", "conditional"),
                                               ("chordal", "joint")])
def test_elbo_and_gradients_equal_the_previous_code_path(monkeypatch, problem, structure, sampler, fixed):
    """DAGELBO's loss and every parameter gradient, with the fast paths and with the code they replaced
    (same random stream), agree to 1e-10 in float64."""
    make = _problems()[problem]
    fast = _loss_and_grads(make, structure, sampler, fixed=fixed)
    with monkeypatch.context() as m:
        _reference_paths(m)
        ref = _loss_and_grads(make, structure, sampler, fixed=fixed)
    _assert_same(fast, ref)


def _benchmark_chain(n=60, M=12):
    """The two-layer chain of benchmarks/chain_dgp_vs_gpytorch.py (like for like), small: RBF kernels at
    softplus(0), inducing inputs on a grid, a mean-field guide at the prior's scale."""
    import math

    import networkx as nx

    from pyro_dag import DAGDGP
    from pyro_dag.gp.likelihoods import Gaussian

    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
    y = torch.where(x < 0, torch.sin(3 * x), 0.7 + 0.3 * torch.cos(5 * x)) + 0.1 * torch.randn(
        n, 1, generator=g, dtype=torch.float64)
    init = math.log(2.0)
    kern = {w: kernels.RBF(variance=init, lengthscale=init) for w in ("h", "y")}
    Z = {"h": torch.linspace(-2, 2, M, dtype=torch.float64).unsqueeze(-1),
         "y": torch.linspace(-2, 2, M, dtype=torch.float64).unsqueeze(-1)}
    model = DAGDGP(nx.DiGraph([("x", "h"), ("h", "y")]), kernels=kern, num_inducing=M,
                   likelihoods={"y": Gaussian(0.1)}, inducing_inputs=Z).double()
    return model, {"x": x}, {"y": y}


def test_chain_dgp_step_equals_the_previous_code_path(monkeypatch):
    """The benchmarked chain deep GP (x -> h -> y, mean field, 4 samples): the ELBO and the gradient of every
    parameter (kernels, inducing inputs, likelihood, guide) of the fast path equal the pre-change formulas
    (A L with autograd's squares, the autograd RBF, the batched solve) to 1e-10 in float64, for the same draws."""
    make = _benchmark_chain
    fast = _loss_and_grads(make, "mean_field", "conditional")
    with monkeypatch.context() as m:
        _reference_paths(m)
        ref = _loss_and_grads(make, "mean_field", "conditional")
    assert sum(g is not None for g in fast[1]) == len(fast[1]) - 1   # all but the hidden node's unused noise
    _assert_same(fast, ref)


def test_mean_field_step_uses_the_fused_moments(monkeypatch):
    """The comparisons above compare something: a mean-field DAGELBO step takes every one-output node's moments from
    the fused op (pyro_dag.ops.predictive), and the reference paths do not."""
    from pyro_dag.gp import conditional

    calls = []

    def counted(*args):
        calls.append(args[0].shape)
        return whitened_moments(*args)

    whitened_moments = conditional.whitened_moments
    monkeypatch.setattr(conditional, "whitened_moments", counted)
    _loss_and_grads(_benchmark_chain, "mean_field", "conditional")
    assert len(calls) == 2                     # h ([n, M]: its parent is a root) and y ([S n, M])
    with monkeypatch.context() as m:
        _reference_paths(m)
        _loss_and_grads(_benchmark_chain, "mean_field", "conditional")
    assert len(calls) == 2


def test_equivalence_test_has_teeth(monkeypatch):
    """The comparison above sees a wrong conditional (a residual variance off by 1e-8)."""
    from pyro_dag.dgp import conditionals as dgp
    from pyro_dag.infer.autoguide import samplers

    monkeypatch.setattr(samplers.MeanFieldState, "predict_node", lambda self, *args, **kwargs: None)
    make = _problems()["chain"]
    ref = _loss_and_grads(make, "mean_field", "conditional")

    def off(kernel, Z, L, X, upper=False, inverse=None):
        a, r = _reference_whitened_conditional(kernel, Z, L, X, upper, inverse)
        return a, r + 1e-8

    monkeypatch.setattr(dgp, "whitened_conditional", off)
    wrong = _loss_and_grads(make, "mean_field", "conditional")
    assert not torch.allclose(wrong[0], ref[0], rtol=1e-10, atol=0)


def test_broadcast_shapes_matches_torch():
    import itertools

    from pyro_dag.utils import broadcast_shapes

    dims = [(), (1,), (3,), (0,), (2, 1), (1, 3), (2, 3), (4, 1, 3), (4, 2, 1), (5, 2, 3)]
    for shapes in itertools.chain(itertools.product(dims, repeat=2), itertools.product(dims[:6], repeat=3)):
        try:
            ref = torch.broadcast_shapes(*shapes)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                broadcast_shapes(*shapes)
            continue
        assert broadcast_shapes(*shapes) == ref


def test_fused_ops_leave_no_python_function_in_a_jit_trace():
    """A torch.jit.trace that holds a Python autograd.Function cannot be saved (Pyro's autoguide test_serialization):
    under tracing the ops take their plain compositions."""
    import io

    from pyro_dag.ops.quadratic import sum_squares
    from pyro_dag.ops.triangular import tril_inverse

    L = torch.tril(torch.rand(4, 4, dtype=torch.float64)) + 2 * torch.eye(4, dtype=torch.float64)
    traced = torch.jit.trace(lambda A: tril_inverse(A) + sum_squares(A).unsqueeze(-1).unsqueeze(-1), (L,))
    torch.jit.save(traced, io.BytesIO())
    torch.testing.assert_close(traced(L), tril_inverse(L) + sum_squares(L).unsqueeze(-1).unsqueeze(-1))
