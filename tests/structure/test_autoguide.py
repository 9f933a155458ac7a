"""Tests of AutoEdgeFlowGuide (SVI-DAG, Zinage 2026, arXiv:2608.04930, §3.5, Derivation A.3)."""
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI, Trace_ELBO

from pyro_dag.structure import (
    AutoEdgeFlowGuide,
    LinearGaussianSEM,
    LogisticBeta,
    OrderedDAG,
    fill_offdiag,
    is_acyclic,
    offdiag,
    sparsity_prior,
)


def _model_factory(p, mech):
    a, b = sparsity_prior(p, 0.3)

    def model(X):
        r = pyro.sample("r", dist.Normal(X.new_zeros(p), 1.0).to_event(1))
        gamma = pyro.sample("gamma", LogisticBeta(offdiag(a), offdiag(b)).to_event(1))
        A = pyro.sample("A", OrderedDAG(r, fill_offdiag(gamma, p)))
        mech(X, A)

    return model


def test_auto_edge_flow_guide_under_plain_svi():
    pyro.clear_param_store()
    torch.manual_seed(2)
    p = 3
    mech = LinearGaussianSEM(p, noise=0.7, subsample_size=16)
    model = _model_factory(p, mech)
    guide = AutoEdgeFlowGuide(model, mechanism=mech, hidden_dims=(8,), num_blocks=2, sinkhorn_iters=10,
                              edge_offset=False)
    X = torch.randn(40, p)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), Trace_ELBO())
    losses = [svi.step(X) for _ in range(5)]
    assert all(torch.isfinite(torch.tensor(losses)))
    tr = poutine.trace(guide).get_trace(X)
    assert tr.nodes["gamma"]["value"].shape == (p * (p - 1),)
    A = tr.nodes["A"]["value"]
    assert is_acyclic(A) and "sem.weights" in tr.stochastic_nodes and "sem.log_noise" not in tr.stochastic_nodes
    # without the edge offset (the paper's guide) the A sites cancel exactly: log p(A | r, gamma) == log q(A | ...)
    mtr = poutine.trace(poutine.replay(model, trace=tr)).get_trace(X)
    assert mtr.nodes["A"]["fn"].log_prob(A).item() == pytest.approx(tr.nodes["A"]["fn"].log_prob(A).item())
    dags = guide.sample_dags(torch.randn(5, p), 7)
    assert dags.shape == (7, 5, p, p) and is_acyclic(dags).all()
    P = guide.edge_probs(torch.randn(5, p), 3)
    assert P.shape == (5, p, p) and (P >= 0).all() and (P <= 1).all()


def test_auto_edge_flow_guide_errors():
    pyro.clear_param_store()
    p = 3
    mech = LinearGaussianSEM(p, noise=0.7)
    model = _model_factory(p, mech)
    X = torch.randn(10, p)
    with pytest.raises(ValueError, match="other latent sites"):
        AutoEdgeFlowGuide(model)(X)
    with pytest.raises(ValueError, match="no latent sample site 'potentials'"):
        AutoEdgeFlowGuide(model, mechanism=mech, potential_site="potentials")(X)
    with pytest.raises(TypeError, match="Mechanism"):
        AutoEdgeFlowGuide(model, mechanism=object())


def test_edge_offset_gradient_is_fisher_scaled_and_the_logits_unchanged():
    """offset_gradient_cap: the logits gamma + delta(r) are the same; the gradient reaching delta is the plain one
    divided by sigmoid'(gamma + delta), clipped at the cap (cap 1: the plain gradient)."""
    p = 4
    mech = LinearGaussianSEM(p, marginalize=True)
    model = _model_factory(p, mech)
    X = torch.randn(30, p)
    r = torch.randn(3, p)
    grads, logits = {}, {}
    for cap in (1.0, 50.0):
        pyro.clear_param_store()
        torch.manual_seed(0)
        guide = AutoEdgeFlowGuide(model, mechanism=mech, hidden_dims=(8,), num_blocks=2, sinkhorn_iters=10,
                                  offset_gradient_cap=cap)
        guide(X)  # set up the networks
        with torch.no_grad():  # a non-trivial offset, some of it saturated
            guide.offset_net.layers[-1].bias.copy_(torch.linspace(-8.0, 8.0, p * (p - 1)))
        gamma = torch.linspace(-2.0, 2.0, p * (p - 1)).expand(3, -1)
        delta = None

        def keep(d):
            nonlocal delta
            delta = d
            d.retain_grad()
            return d

        handle = guide.offset_net.register_forward_hook(lambda mod, inp, out: keep(out))
        ell = guide.guide_edge_logits(r, gamma)
        handle.remove()
        weights = torch.linspace(-1.0, 1.0, ell.numel()).reshape(ell.shape)
        (weights * torch.sigmoid(ell)).sum().backward()
        grads[cap], logits[cap] = delta.grad.clone(), ell.detach()
    torch.testing.assert_close(logits[50.0], logits[1.0])
    s = torch.sigmoid(logits[1.0])
    torch.testing.assert_close(grads[50.0], grads[1.0] / (s * (1 - s)).clamp(min=1 / 50.0))
    torch.testing.assert_close(grads[1.0], weights * s * (1 - s))  # d/d(ell) of sum(w * sigmoid(ell))
    with pytest.raises(ValueError, match="offset_gradient_cap"):
        AutoEdgeFlowGuide(model, mechanism=mech, offset_gradient_cap=0.5)
