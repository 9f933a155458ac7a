"""Tests of the conditional flow transforms over edge logits (SVI-DAG, Zinage 2026, arXiv:2608.04930, §3.5)."""
import pyro.distributions as dist
import pytest
import torch

from pyro_dag.structure import (
    ConditionalSplineCoupling,
    edge_flow,
)


def test_conditional_spline_coupling_identity_inverse_and_logdet():
    torch.manual_seed(0)
    t = ConditionalSplineCoupling(6, context_dim=3, hidden_dims=(8,), bound=5.0).double()
    x = torch.randn(4, 6, dtype=torch.float64)
    c = torch.randn(4, 3, dtype=torch.float64)
    assert torch.allclose(t.condition(c)(x), x, atol=1e-3)  # identity at initialisation (up to min derivatives)
    for prm in t.parameters():
        prm.data.add_(0.3 * torch.randn_like(prm))
    tc = t.condition(c)
    y = tc(x)
    assert not torch.allclose(y, x)
    assert torch.allclose(tc.inv(y.clone()), x, atol=1e-8)
    for b in range(4):
        cb = t.condition(c[b])
        J = torch.autograd.functional.jacobian(lambda v: cb(v), x[b])
        assert cb.log_abs_det_jacobian(x[b], cb(x[b])).item() == pytest.approx(torch.linalg.slogdet(J)[1].item(), abs=1e-8)
    # the context matters
    assert not torch.allclose(t.condition(c + 1)(x), y)


def test_edge_flow_density_is_normalised_in_2d():
    torch.manual_seed(1)
    flow = edge_flow(2, 2, num_blocks=2, hidden_dims=(4,), loc=torch.tensor([0.5, -1.0]), scale=torch.tensor([2.0, 0.5]))
    flow = flow.double()
    for prm in flow.parameters():
        prm.data.add_(0.2 * torch.randn_like(prm))
    ctx = torch.tensor([0.3, -0.3], dtype=torch.float64)
    base = dist.Normal(torch.zeros(2, dtype=torch.float64), 1.0).to_event(1)
    d = dist.ConditionalTransformedDistribution(base, flow.transforms()).condition(ctx)
    g = torch.linspace(-10, 10, 301, dtype=torch.float64)
    grid = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
    mass = d.log_prob(grid).exp().sum() * (g[1] - g[0]) ** 2
    assert mass.item() == pytest.approx(1.0, abs=2e-3)
