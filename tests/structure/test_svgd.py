"""Tests of OrderSVGD and the order-mask kernel (SVI-DAG, Zinage 2026, arXiv:2608.04930, §3.6)."""
import pyro
import pyro.distributions as dist
import pytest
import torch

from pyro_dag.structure import OrderMaskKernel, OrderSVGD


def test_kernel_gradient_matches_autograd_and_gradcheck():
    torch.manual_seed(0)
    kern = OrderMaskKernel(temperature=0.5, sinkhorn_iters=20, bandwidth=3.0)
    r = torch.randn(4, 5, dtype=torch.float64)
    K, grad = kern.kernel_and_grad(r)
    # grad[n, m] = d k(r_n, r_m) / d r_m, through the Sinkhorn features
    y = r.clone().requires_grad_(True)
    ref = torch.autograd.functional.jacobian(lambda v: kern.kernel(r, v, 3.0), y)  # [n, m, m', d]
    ref = torch.stack([torch.stack([ref[n, m, m] for m in range(4)]) for n in range(4)])
    assert torch.allclose(K, kern.kernel(r, r, 3.0), atol=1e-12)
    assert torch.allclose(grad, ref, atol=1e-10)
    # the autograd path itself against finite differences (float64)
    assert torch.autograd.gradcheck(lambda v: kern.kernel(r[:2], v, 3.0), (y[:3].detach().requires_grad_(),))
    # pyro.infer.SVGD's multivariate kernel API: log-kernel summing to log k, gradient of log k
    logk, glog = kern.log_kernel_and_grad(r)
    assert torch.allclose(logk.sum(-1).exp(), K, atol=1e-12)
    assert torch.allclose(glog * K.unsqueeze(-1), grad, atol=1e-12)


def test_kernel_invariances_and_median_bandwidth():
    torch.manual_seed(1)
    kern = OrderMaskKernel(temperature=0.3, sinkhorn_iters=30)
    r = torch.randn(6, 4, dtype=torch.float64)
    f = kern.features(r)
    assert torch.allclose(kern.features(r + 3.0), f, atol=1e-10)
    assert torch.allclose(kern.features(2.5 * r), f, atol=1e-4)  # RMS normalisation (up to its 1e-6 floor)
    K, _ = kern.kernel_and_grad(r)
    d2 = (f.unsqueeze(1) - f.unsqueeze(0)).pow(2).sum(-1)
    h = d2.flatten().median() / torch.log(torch.tensor(7.0, dtype=torch.float64))
    assert torch.allclose(K, torch.exp(-d2 / h), atol=1e-12)


def _toy(p, target, prior_scale=1.0, weight=1.0):
    def model():
        r = pyro.sample("r", dist.Normal(target.new_zeros(p), prior_scale).to_event(1))
        pyro.factor("f", -weight * (r - target).pow(2).sum(-1))

    def guide():
        pyro.sample("r", dist.Normal(target.new_zeros(p), 1.0).to_event(1))

    return model, guide


@pytest.mark.parametrize("num_particles", [1, 3])
def test_without_repulsion_svgd_is_gradient_ascent(num_particles):
    pyro.clear_param_store()
    torch.manual_seed(2)
    p, lr = 4, 0.01
    target = torch.randn(p, dtype=torch.float64)
    model, guide = _toy(p, target)
    kern = OrderMaskKernel(bandwidth=1e-12)  # k(r_j, r_k) = 1{j = k} for distinct particles
    svgd = OrderSVGD(model, guide, pyro.optim.SGD({"lr": lr}), num_particles=num_particles, max_plate_nesting=0,
                     kernel=kern, repulsion_weight=0.0, particle_grad_clip=None, clamp=None)
    for _ in range(3):
        before = pyro.param(svgd.particle_name).detach().clone() if svgd.particle_name in pyro.get_param_store() else None
        svgd.step()
        after = svgd.particles
        if before is not None:
            score = -before - 2 * (before - target)  # grad of log N(r; 0, 1) - ||r - t||^2
            assert torch.allclose(after, before + lr * score / num_particles, atol=1e-12)


def test_repulsion_spreads_particles_and_cap_limits_it():
    torch.manual_seed(3)
    p = 4
    target = torch.zeros(p, dtype=torch.float64)
    spread = {}
    for cap in (None, 1.0):
        pyro.clear_param_store()
        torch.manual_seed(3)
        model, guide = _toy(p, target, prior_scale=1e6, weight=0.0)  # flat target: zero scores
        svgd = OrderSVGD(model, guide, pyro.optim.SGD({"lr": 0.5}), num_particles=6, max_plate_nesting=0,
                         kernel=OrderMaskKernel(temperature=0.3, sinkhorn_iters=30), repulsion_cap=cap, clamp=None)
        svgd.step()
        feats0 = svgd.kernel.features(svgd.particles)
        for _ in range(20):
            svgd.step()
        feats1 = svgd.kernel.features(svgd.particles)
        d = lambda f: (f.unsqueeze(0) - f.unsqueeze(1)).pow(2).sum(-1).mean()  # noqa: E731
        spread[cap] = (d(feats0).item(), d(feats1).item())
    assert spread[None][1] > spread[None][0]  # repulsion pushes the relaxed orders apart
    assert spread[1.0][1] == pytest.approx(spread[1.0][0], abs=1e-6)  # zero attraction caps the repulsion at 0


def test_svgd_direction_cap_and_errors():
    pyro.clear_param_store()
    model, guide = _toy(3, torch.zeros(3))
    svgd = OrderSVGD(model, guide, pyro.optim.Adam({"lr": 0.1}), num_particles=5, max_plate_nesting=0,
                     repulsion_cap=0.5)
    r = torch.randn(5, 3)
    scores = torch.randn(5, 3)
    phi, att, rep = svgd.svgd_direction(r, scores)
    assert (rep.norm(dim=-1) <= 0.5 * att.norm(dim=-1) + 1e-6).all()
    with pytest.raises(TypeError, match="PyroOptim"):
        OrderSVGD(model, guide, torch.optim.Adam, num_particles=2)
    with pytest.raises(ValueError, match="num_particles"):
        OrderSVGD(model, guide, pyro.optim.Adam({"lr": 0.1}), num_particles=0)

    def bad_guide():
        pass

    with pytest.raises(ValueError, match="never sampled the potential site"):
        OrderSVGD(model, bad_guide, pyro.optim.Adam({"lr": 0.1}), num_particles=2, max_plate_nesting=0).step()


def test_non_finite_steps_are_skipped():
    pyro.clear_param_store()
    calls = {"n": 0}

    def model():
        r = pyro.sample("r", dist.Normal(torch.zeros(3), 1.0).to_event(1))
        calls["n"] += 1
        pyro.factor("f", -r.pow(2).sum(-1) * (float("nan") if calls["n"] == 2 else 1.0))

    def guide():
        pyro.sample("r", dist.Normal(torch.zeros(3), 1.0).to_event(1))

    svgd = OrderSVGD(model, guide, pyro.optim.Adam({"lr": 0.1}), num_particles=2, max_plate_nesting=0)
    svgd.step()
    before = svgd.particles.clone()
    with pytest.warns(RuntimeWarning, match="non-finite"), pyro.validation_enabled(False):
        svgd.step()
    assert torch.equal(svgd.particles, before) and svgd.num_skipped == 1
    svgd.step()
    assert not torch.equal(svgd.particles, before)


def test_order_mask_kernel_in_pyro_svgd():
    pyro.clear_param_store()
    from pyro.infer import SVGD

    def model():
        pyro.sample("r", dist.Normal(torch.zeros(3), 1.0).to_event(1))

    svgd = SVGD(model, OrderMaskKernel(temperature=0.5, sinkhorn_iters=10), pyro.optim.Adam({"lr": 0.1}),
                num_particles=4, max_plate_nesting=0, mode="multivariate")
    svgd.step()
    assert svgd.get_named_particles()["r"].shape == (4, 3)


def test_swap_moves_find_the_best_order():
    # the target rewards one order (0 before 1 before 2) by 20 nats: Metropolis swaps move every particle there
    pyro.clear_param_store()
    torch.manual_seed(4)

    def model():
        r = pyro.sample("r", dist.Normal(torch.zeros(3), 1.0).to_event(1))
        good = (r[..., 0] > r[..., 1]) & (r[..., 1] > r[..., 2])
        pyro.factor("f", 20.0 * good.float())

    def guide():
        pyro.sample("r", dist.Normal(torch.zeros(3), 1.0).to_event(1))

    svgd = OrderSVGD(model, guide, pyro.optim.Adam({"lr": 1e-6}), num_particles=8, max_plate_nesting=0)
    svgd.step()
    for _ in range(40):
        svgd.swap_step()
    r = svgd.particles
    assert ((r[:, 0] > r[:, 1]) & (r[:, 1] > r[:, 2])).all()
    # per-particle ELBOs exclude log p(r) by default
    L = svgd.particle_elbos(num_samples=2)
    assert torch.allclose(L, torch.full((8,), 20.0))


def test_mixed_swap_moves_permute_potentials_and_find_the_best_order():
    # "mixed" moves also swap nodes at random positions: still a permutation of each particle's potentials,
    # and (a symmetric proposal) they reach the rewarded order of 5 nodes
    pyro.clear_param_store()
    torch.manual_seed(2)
    p = 5

    def model():
        r = pyro.sample("r", dist.Normal(torch.zeros(p), 1.0).to_event(1))
        good = torch.stack([r[..., k] > r[..., k + 1] for k in range(p - 1)], -1).all(-1)
        pyro.factor("f", 30.0 * good.float())

    def guide():
        pyro.sample("r", dist.Normal(torch.zeros(p), 1.0).to_event(1))

    svgd = OrderSVGD(model, guide, pyro.optim.Adam({"lr": 1e-6}), num_particles=8, max_plate_nesting=0)
    svgd.step()
    before = svgd.particles.sort(-1).values
    for _ in range(300):
        svgd.swap_step(moves="mixed")
    r = svgd.particles
    assert torch.equal(r.sort(-1).values, before)
    assert torch.stack([r[:, k] > r[:, k + 1] for k in range(p - 1)], -1).all()
    with pytest.raises(ValueError, match="moves"):
        svgd.swap_step(moves="random")
