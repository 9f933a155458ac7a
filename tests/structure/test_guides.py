"""Tests of the flow guide over edge logits (SVI-DAG §3.5)."""
import pyro
import pyro.distributions as dist
import pytest
import torch
from pyro import poutine
from pyro.infer import SVI, Trace_ELBO

from pyro_dag.structure import (
    AutoEdgeFlowGuide,
    ConditionalSplineCoupling,
    LinearGaussianSEM,
    LogisticBeta,
    OrderedDAG,
    edge_flow,
    fill_offdiag,
    is_acyclic,
    offdiag,
    sparsity_prior,
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
