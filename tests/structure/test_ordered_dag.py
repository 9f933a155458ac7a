"""Tests of OrderedDAG, RelaxedOrderedDAG, the dag constraint and the off-diagonal layout (SVI-DAG §3.2.1, §3.3)."""
import itertools

import pytest
import torch

from pyro_dag.structure import (
    OrderedDAG,
    RelaxedOrderedDAG,
    dag,
    fill_offdiag,
    hard_order_mask,
    is_acyclic,
    offdiag,
)


def _all_offdiag_binary(p):
    idx = [(i, j) for i in range(p) for j in range(p) if i != j]
    for bits in itertools.product([0.0, 1.0], repeat=len(idx)):
        A = torch.zeros(p, p, dtype=torch.float64)
        for (i, j), b in zip(idx, bits):
            A[i, j] = b
        yield A


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
