"""Tests of the structure-learning distributions (SVI-DAG, Zinage 2026, arXiv:2608.04930, §3.2-3.3)."""
import itertools
import math

import pytest
import torch
from torch.distributions import Beta

from pyro_dag.structure import (
    LogisticBeta,
    OrderedDAG,
    RelaxedOrderedDAG,
    dag,
    edge_belief_prior,
    fill_offdiag,
    hard_order_mask,
    is_acyclic,
    log_sinkhorn,
    offdiag,
    soft_order_mask,
    sparsity_prior,
)
from pyro_dag.structure.distributions import soft_order_mask_jacobian


# ---------------------------------------------------------------------------------------------- LogisticBeta
def test_logistic_beta_log_prob_matches_change_of_variables():
    torch.manual_seed(0)
    alpha = torch.tensor([0.7, 1.5, 4.0, 120.84], dtype=torch.float64)
    beta = torch.tensor([2.0, 1.5, 18.0, 2.21], dtype=torch.float64)
    x = torch.linspace(-6, 6, 25, dtype=torch.float64).unsqueeze(-1)
    d = LogisticBeta(alpha, beta)
    s = torch.sigmoid(x)
    ref = Beta(alpha, beta).log_prob(s) + torch.log(s * (1 - s))
    assert torch.allclose(d.log_prob(x), ref, atol=1e-10)


def test_logistic_beta_normalised_and_moments():
    alpha = torch.tensor(4.0, dtype=torch.float64)
    beta = torch.tensor(18.0, dtype=torch.float64)
    d = LogisticBeta(alpha, beta)
    x = torch.linspace(-30, 20, 200001, dtype=torch.float64)
    dens = d.log_prob(x).exp()
    dx = x[1] - x[0]
    assert abs(float(dens.sum() * dx) - 1) < 1e-6
    assert abs(float((x * dens).sum() * dx) - float(d.mean)) < 1e-6
    assert abs(float(((x - d.mean) ** 2 * dens).sum() * dx) - float(d.variance)) < 1e-5
    assert abs(float(x[dens.argmax()]) - float(d.mode)) < 1e-3  # mode log(alpha / beta)


def test_logistic_beta_rsample_moments_and_pathwise_gradient():
    torch.manual_seed(1)
    alpha = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    beta = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)
    n = 200_000
    x = LogisticBeta(alpha, beta).rsample((n,))
    m = x.mean()
    se = x.std() / math.sqrt(n)
    ref = torch.digamma(alpha) - torch.digamma(beta)
    assert abs(float(m - ref)) < 5 * float(se)
    # E[d x / d alpha] = d E[x] / d alpha = trigamma(alpha), E[d x / d beta] = -trigamma(beta)
    ga, gb = torch.autograd.grad(m, (alpha, beta))
    assert abs(float(ga) - float(torch.polygamma(1, alpha))) < 0.02
    assert abs(float(gb) + float(torch.polygamma(1, beta))) < 0.02


def test_edge_belief_prior_values_from_the_paper():
    p = torch.tensor([[0.0, 0.99], [0.5, 0.0]])
    alpha, beta = edge_belief_prior(p)
    # SVI-DAG §3.2.1: p = 0.99 -> nu = 121.05, alpha = 120.84, beta = 2.21; p = 0.5 -> alpha = beta = 1.5
    assert abs(alpha[0, 1].item() - 120.8395) < 1e-3 and abs(beta[0, 1].item() - 2.2105) < 1e-3
    assert alpha[1, 0].item() == pytest.approx(1.5) and beta[1, 0].item() == pytest.approx(1.5)
    # Figure 1 legend: p -> nu
    for b, nu in [(0.05, 102.25), (0.1, 81.0), (0.3, 21.0), (0.7, 21.0), (0.9, 81.0)]:
        a_, b_ = edge_belief_prior(torch.tensor([[0.5, b], [0.5, 0.5]]))
        assert (a_[0, 1] + b_[0, 1] - 2).item() == pytest.approx(nu, rel=1e-5)
        assert ((a_[0, 1] - 1) / (a_[0, 1] + b_[0, 1] - 2)).item() == pytest.approx(b, rel=1e-5)  # Beta mode = p


def test_edge_belief_prior_and_sparsity_prior_errors_and_values():
    with pytest.raises(ValueError, match="strictly inside"):
        edge_belief_prior(torch.tensor([[0.0, 1.0], [0.5, 0.0]]))
    with pytest.raises(ValueError, match="square"):
        edge_belief_prior(torch.full((2, 3), 0.5))
    a, b = sparsity_prior(11, 0.15, 20.0)
    assert a[0, 1].item() == pytest.approx(4.0) and b[0, 1].item() == pytest.approx(18.0)  # Sachs profile
    with pytest.raises(ValueError, match="edge_prob"):
        sparsity_prior(3, 1.5)


def test_offdiag_roundtrip_row_major():
    M = torch.arange(9.0).reshape(3, 3)
    v = offdiag(M)
    assert v.tolist() == [1.0, 2.0, 3.0, 5.0, 6.0, 7.0]
    back = fill_offdiag(v, 3)
    assert torch.equal(back, M * (1 - torch.eye(3)))
    batch = torch.randn(4, 2, 5, 5)
    assert torch.equal(fill_offdiag(offdiag(batch)), batch * (1 - torch.eye(5)))
    with pytest.raises(ValueError, match="p \\(p - 1\\)"):
        fill_offdiag(torch.zeros(5), 3)


# ---------------------------------------------------------------------------------------------- order masks
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


# ---------------------------------------------------------------------------------------------- DAG distributions
def _all_offdiag_binary(p):
    idx = [(i, j) for i in range(p) for j in range(p) if i != j]
    for bits in itertools.product([0.0, 1.0], repeat=len(idx)):
        A = torch.zeros(p, p, dtype=torch.float64)
        for (i, j), b in zip(idx, bits):
            A[i, j] = b
        yield A


def test_ordered_dag_log_prob_normalised_by_enumeration():
    torch.manual_seed(8)
    r = torch.randn(3, dtype=torch.float64)
    g = torch.randn(3, 3, dtype=torch.float64)
    d = OrderedDAG(r, g, validate_args=False)  # the enumeration includes cyclic graphs
    values = torch.stack(list(_all_offdiag_binary(3)))
    lp = d.log_prob(values)
    assert abs(float(lp.exp().sum()) - 1.0) < 1e-12
    allowed = (values * (1 - hard_order_mask(r))).sum((-1, -2)) == 0
    assert torch.isinf(lp[~allowed]).all() and torch.isfinite(lp[allowed]).all()
    # the DAG support check accepts every allowed value
    assert dag.check(values[allowed]).all()


def test_ordered_dag_samples_are_dags_with_the_right_frequencies():
    torch.manual_seed(9)
    r = torch.randn(4, 6)
    g = 2 * torch.randn(4, 6, 6)
    d = OrderedDAG(r, g)
    s = d.sample((5000,))
    assert s.shape == (5000, 4, 6, 6)
    assert is_acyclic(s).all() and dag.check(s).all()
    se = (d.edge_probs * (1 - d.edge_probs) / 5000).sqrt()
    assert ((s.mean(0) - d.edge_probs).abs() <= 5 * se + 1e-6).all()


@pytest.mark.parametrize("edge_relaxation", ["concrete", "mean"])
def test_relaxed_ordered_dag_straight_through(edge_relaxation):
    torch.manual_seed(10)
    r = torch.randn(8, 5, requires_grad=True)
    g = torch.randn(8, 5, 5, requires_grad=True)
    d = RelaxedOrderedDAG(r, g, order_temperature=0.3, sinkhorn_iters=30, edge_relaxation=edge_relaxation)
    A = d.rsample((3,))
    assert A.shape == (3, 8, 5, 5)
    # forward value is exactly a hard DAG consistent with the order: every sample is acyclic
    assert ((A == 0) | (A == 1)).all() and is_acyclic(A).all()
    assert (A * (1 - hard_order_mask(r.detach()))).sum() == 0
    assert d.support.check(A).all()
    assert torch.equal(d.log_prob(A), OrderedDAG(r, g).log_prob(A))
    # gradients reach the edge logits and the potentials through the relaxation
    w = torch.randn(5, 5)
    gr, gg = torch.autograd.grad((A * w).sum(), (r, g))
    assert gr.abs().sum() > 0 and gg.abs().sum() > 0
    hard, soft = d.rsample_with_parts()
    assert ((soft >= 0) & (soft <= 1)).all() and torch.equal(hard, (hard > 0.5).float())


def test_relaxed_hard_part_has_the_exact_law():
    torch.manual_seed(11)
    r = torch.randn(6)
    g = torch.randn(6, 6)
    d = RelaxedOrderedDAG(r, g, sinkhorn_iters=10)
    with torch.no_grad():
        A = d.rsample((20000,))
    p = OrderedDAG(r, g).edge_probs
    se = (p * (1 - p) / 20000).sqrt()
    assert ((A.mean(0) - p).abs() <= 5 * se + 1e-6).all()


def test_relaxed_soft_mode_and_errors():
    r = torch.randn(4)
    g = torch.randn(4, 4)
    d = RelaxedOrderedDAG(r, g, straight_through=False, sinkhorn_iters=10)
    A = d.rsample()
    assert ((A >= 0) & (A <= 1)).all() and not ((A == 0) | (A == 1)).all()
    with pytest.raises(NotImplementedError, match="straight_through=True"):
        d.log_prob(A)
    with pytest.raises(ValueError, match="edge_logits must be"):
        OrderedDAG(torch.randn(4), torch.randn(3, 3))
    with pytest.raises(ValueError, match="temperature"):
        RelaxedOrderedDAG(r, g, temperature=0.0)
    with pytest.raises(ValueError, match="edge_relaxation"):
        RelaxedOrderedDAG(r, g, edge_relaxation="gumbel")


def test_dag_constraint_and_is_acyclic():
    cyc = torch.tensor([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=torch.float32)
    chain = torch.tensor([[0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=torch.float32)
    two = torch.tensor([[0, 1], [1, 0]], dtype=torch.float32)
    assert not is_acyclic(cyc) and is_acyclic(chain) and not is_acyclic(two)
    assert not dag.check(cyc) and dag.check(chain) and not dag.check(0.5 * chain)
    # a 6-cycle needs closure beyond paths of length 4
    six = torch.roll(torch.eye(6), 1, 1)
    assert not is_acyclic(six)


def test_registered_kl_matches_enumeration():
    torch.manual_seed(12)
    r = torch.randn(3, dtype=torch.float64)
    gq = torch.randn(3, 3, dtype=torch.float64)
    gp = torch.randn(3, 3, dtype=torch.float64)
    q = RelaxedOrderedDAG(r, gq, sinkhorn_iters=5)
    p = OrderedDAG(r, gp, validate_args=False)
    qd = OrderedDAG(r, gq, validate_args=False)
    values = torch.stack(list(_all_offdiag_binary(3)))
    lq, lp = qd.log_prob(values), p.log_prob(values)
    ok = torch.isfinite(lq)
    ref = (lq[ok].exp() * (lq[ok] - lp[ok])).sum()
    kl = torch.distributions.kl_divergence(q, p)
    assert kl.item() == pytest.approx(ref.item(), abs=1e-10)
    assert torch.distributions.kl_divergence(OrderedDAG(r, gp), p).item() == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("backward", ["jacobian", "autograd"])
def test_two_node_soft_order_mask_keeps_a_gradient(backward):
    """With p = 2 RMS normalisation would map every r to +-1 (a constant mask); it is skipped there, so the order
    gradient survives and points the right way (raising r_0 makes 0 -> 1 more likely)."""
    r = torch.tensor([[0.3, -0.2], [-0.1, 0.4]], dtype=torch.float64, requires_grad=True)
    M = soft_order_mask(r, 0.5, 30, backward=backward)
    (g,) = torch.autograd.grad(M[:, 0, 1].sum(), r)
    assert (g[:, 0] > 1e-3).all() and torch.allclose(g.sum(-1), torch.zeros(2, dtype=torch.float64), atol=1e-12)
    assert torch.autograd.gradcheck(lambda x: soft_order_mask(x, 0.5, 15, backward=backward), (r,))
