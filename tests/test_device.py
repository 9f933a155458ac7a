"""The main workflows on every available device (CPU always, CUDA when present).

Each test builds the same problem on the CPU and on ``device`` (same parameters through ``load_state_dict``) and
checks that the deterministic quantities agree (float64) and that training keeps every tensor on the device.
On a machine without CUDA these tests run on the CPU only, where they check the same-device round trip.
"""
import networkx as nx
import pyro
import pytest
import torch

from helpers import collider_problem, randomize_guide
from pyro_dag import DAGDGP
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide

GUIDES = [("mean_field", "dense"), ("chordal", "dense"), ("chordal", "sparse"), ("full", "dense")]


def _to(tree, device):
    return {k: v.to(device) for k, v in tree.items()}


def _pair(device, structure, backend):
    """A trained-looking CPU guide and its copy on ``device`` (model and guide parameters copied)."""
    model, inputs, data = collider_problem()
    pyro.set_rng_seed(0)
    guide = AutoStructuredGuide(model, structure=structure, backend=backend, name="cpu")
    guide(inputs, data)
    randomize_guide(guide)
    model_d, _, _ = collider_problem()
    model_d = model_d.to(device)
    inputs_d, data_d = _to(inputs, device), _to(data, device)
    model_d.setup(inputs_d, data_d)
    model_d.load_state_dict(model.state_dict())
    guide_d = AutoStructuredGuide(model_d, structure=structure, backend=backend, name="dev")
    guide_d(inputs_d, data_d)
    guide_d.load_state_dict(guide.state_dict())
    return (model, guide, inputs, data), (model_d, guide_d, inputs_d, data_d)


@pytest.mark.parametrize("structure,backend", GUIDES)
def test_guide_quantities_agree_across_devices(device, structure, backend):
    (model, guide, inputs, data), (model_d, guide_d, inputs_d, data_d) = _pair(device, structure, backend)
    q, q_d = guide.inducing_posterior(), guide_d.inducing_posterior()
    assert torch.allclose(q_d.kl().cpu(), q.kl(), rtol=1e-9, atol=1e-9)
    value = q.rsample(torch.Size([3]))
    assert torch.allclose(q_d.log_prob(value.to(device)).cpu(), q.log_prob(value), rtol=1e-9, atol=1e-8)
    for node, m in q.mean_blocks().items():
        assert torch.allclose(q_d.mean_blocks()[node].cpu(), m, atol=1e-10)
    # Monte Carlo quantities: only device and finiteness (different random streams)
    loss = DAGELBO(num_particles=2).differentiable_loss(model_d, guide_d, inputs_d, data_d)
    assert loss.device.type == device.type and torch.isfinite(loss)
    grads = torch.autograd.grad(loss, list(guide_d.parameters()), allow_unused=True)
    assert all(g is None or (g.device.type == device.type and torch.isfinite(g).all()) for g in grads)


@pytest.mark.parametrize("structure,backend", [("mean_field", "dense"), ("chordal", "sparse")])
def test_svi_and_predict_stay_on_device(device, structure, backend):
    model, inputs, data = collider_problem()
    model = model.to(device)
    inputs, data = _to(inputs, device), _to(data, device)
    guide = AutoStructuredGuide(model, structure=structure, backend=backend)
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), DAGELBO(num_particles=2))
    losses = [svi.step(inputs, data) for _ in range(15)]
    assert all(torch.isfinite(torch.tensor(losses)))
    for name, p in list(model.named_parameters()) + list(guide.named_parameters()):
        assert p.device.type == device.type, name
    pred = model.predict(guide, inputs, num_samples=8)
    assert pred["w3"].loc.device.type == device.type and pred["w3"].samples.shape == (8, 12, 1)


def test_float32_model_on_device_trains(device):
    graph = nx.DiGraph([("x", "a"), ("a", "b")])
    x = torch.linspace(-1, 1, 30).unsqueeze(-1)
    y = torch.sin(3 * x)
    model = DAGDGP(graph, num_inducing=6).float().to(device)
    guide = AutoStructuredGuide(model)
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), DAGELBO())
    for _ in range(10):
        loss = svi.step({"x": x}, {"b": y})  # CPU float64 inputs are converted to the module's dtype/device
    assert torch.isfinite(torch.tensor(loss))
    assert all(p.dtype == torch.float32 and p.device.type == device.type for p in guide.parameters())


@pytest.mark.parametrize("likelihood", ["linear", "mlp"])
def test_structure_fit_on_device(device, likelihood):
    from pyro_dag.structure import fit

    g = torch.Generator().manual_seed(0)
    a = torch.randn(200, 1, generator=g)
    b = 1.5 * a + 0.3 * torch.randn(200, 1, generator=g)
    c = -b + 0.3 * torch.randn(200, 1, generator=g)
    post = fit(torch.cat([a, b, c], 1), likelihood=likelihood, num_steps=30, num_particles=4, progress=False,
               device=device)
    probs = post.edge_probs()
    assert probs.shape == (3, 3) and torch.isfinite(probs).all()
    assert torch.all(probs.diagonal() == 0)
    samples = post.sample(5)
    assert samples.shape[-2:] == (3, 3)
