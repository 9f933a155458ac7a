"""Tests of the order masks and their Sinkhorn relaxation (SVI-DAG, Zinage 2026, arXiv:2608.04930, §3.3)."""

import pytest
import torch

from pyro_dag.structure import (
    hard_order_mask,
    is_acyclic,
    log_sinkhorn,
    soft_order_mask,
    soft_order_mask_jacobian,
)


def test_hard_order_mask_equals_permutation_form_and_is_acyclic():
    torch.manual_seed(2)
    r = torch.randn(50, 6)
    M = hard_order_mask(r)
    order = torch.argsort(-r, -1)  # position k holds node order[k]
    P = torch.zeros(50, 6, 6)
    P.scatter_(-1, torch.argsort(order, -1).unsqueeze(-1), 1.0)  # P[i, pos(i)] = 1
    U = torch.triu(torch.ones(6, 6), 1)
    assert torch.equal(M, P @ U @ P.transpose(-1, -2))  # P U P^T, SVI-DAG's P L P^T in our orientation
    assert is_acyclic(M).all()
    ties = hard_order_mask(torch.tensor([1.0, 1.0, 0.0]))
    assert ties[0, 1] == 0 and ties[1, 0] == 0 and ties[0, 2] == 1


@pytest.mark.parametrize("eps_scaling", [1.0, 30.0])
def test_log_sinkhorn_doubly_stochastic(eps_scaling):
    torch.manual_seed(3)
    la = 3 * torch.randn(7, 6, 6, dtype=torch.float64)
    P = log_sinkhorn(la, 300, eps_scaling=eps_scaling).exp()
    assert torch.allclose(P.sum(-2), torch.ones(7, 6, dtype=torch.float64), atol=1e-12)  # columns exact
    assert torch.allclose(P.sum(-1), torch.ones(7, 6, dtype=torch.float64), atol=1e-8)
    # the Sinkhorn limit has the form diag(u) exp(la) diag(v): log P - la is a sum of a row and a column term
    R = P.log() - la
    assert torch.allclose(R - R[..., :1] - R[..., :1, :] + R[..., :1, :1], torch.zeros_like(R), atol=1e-8)


def test_eps_scaling_reaches_the_same_fixed_point():
    torch.manual_seed(4)
    r = torch.randn(20, 8, dtype=torch.float64)
    plain = soft_order_mask(r, 0.3, 3000, eps_scaling=False)
    fast = soft_order_mask(r, 0.3, 3000, eps_scaling=True)
    assert torch.allclose(plain, fast, atol=1e-8)


def test_soft_order_mask_properties():
    torch.manual_seed(5)
    r = torch.randn(10, 5, dtype=torch.float64)
    M, P = soft_order_mask(r, 0.5, 400, return_perm=True)
    assert torch.allclose(P.sum(-1), torch.ones(10, 5, dtype=torch.float64), atol=1e-8)
    assert torch.allclose(P.sum(-2), torch.ones(10, 5, dtype=torch.float64), atol=1e-8)
    # M_ij + M_ji + sum_l P_il P_jl = 1 (i before j, j before i, or the same position)
    same = P @ P.transpose(-1, -2)
    assert torch.allclose(M + M.transpose(-1, -2) + same, torch.ones_like(M), atol=1e-8)
    # shift and scale invariance with RMS normalisation
    assert torch.allclose(soft_order_mask(3 * r + 7, 0.5, 400), M, atol=1e-8)
    # tau -> 0 recovers the hard mask off the diagonal (well-separated potentials)
    sep = torch.stack([torch.randperm(5) for _ in range(10)]).to(torch.float64)
    cold = soft_order_mask(sep, 0.01, 2000)
    off = 1 - torch.eye(5, dtype=torch.float64)
    assert torch.allclose(cold * off, hard_order_mask(sep), atol=1e-6)


@pytest.mark.parametrize("backward", ["jacobian", "autograd"])
def test_soft_order_mask_gradcheck(backward):
    torch.manual_seed(6)
    r = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x: soft_order_mask(x, 0.4, 15, backward=backward), (r,))


def test_soft_order_mask_jacobian_matches_autograd():
    torch.manual_seed(7)
    r = torch.randn(3, 5, dtype=torch.float64)
    for scale in (True, False):
        M, J = soft_order_mask_jacobian(r, 0.3, 25, scale)
        ref = torch.autograd.functional.jacobian(
            lambda x: soft_order_mask(x, 0.3, 25, scale, backward="autograd"), r
        )
        ref = torch.stack([ref[b, :, :, b, :] for b in range(3)])
        assert torch.allclose(M, soft_order_mask(r, 0.3, 25, scale), atol=1e-12)
        assert torch.allclose(J, ref, atol=1e-10)


@pytest.mark.parametrize("backward", ["jacobian", "autograd"])
def test_two_node_soft_order_mask_keeps_a_gradient(backward):
    """With p = 2 RMS normalisation would map every r to +-1 (a constant mask); it is skipped there, so the order
    gradient survives and points the right way (raising r_0 makes 0 -> 1 more likely)."""
    r = torch.tensor([[0.3, -0.2], [-0.1, 0.4]], dtype=torch.float64, requires_grad=True)
    M = soft_order_mask(r, 0.5, 30, backward=backward)
    (g,) = torch.autograd.grad(M[:, 0, 1].sum(), r)
    assert (g[:, 0] > 1e-3).all() and torch.allclose(g.sum(-1), torch.zeros(2, dtype=torch.float64), atol=1e-12)
    assert torch.autograd.gradcheck(lambda x: soft_order_mask(x, 0.5, 15, backward=backward), (r,))
