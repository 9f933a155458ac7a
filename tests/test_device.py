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


def _cpu_reference(structure, backend):
    """A trained-looking CPU guide: its deterministic quantities and the model and guide states."""
    model, inputs, data = collider_problem()
    guide = AutoStructuredGuide(model, precision=structure, backend=backend, name="cpu")
    guide(inputs, data)
    randomize_guide(guide)
    q = guide.inducing_posterior()
    value = q.rsample(torch.Size([3])).detach()
    ref = {"kl": q.kl().detach(), "value": value, "log_prob": q.log_prob(value).detach(),
           "means": {k: v.detach() for k, v in q.mean_blocks().items()}}
    return ref, model.state_dict(), guide.state_dict()


@pytest.mark.parametrize("structure,backend", GUIDES)
def test_guide_quantities_agree_across_devices(device, structure, backend):
    ref, model_state, guide_state = _cpu_reference(structure, backend)
    # PyroModule parameters live in the global param store under their names: the device copy (same names)
    # must not pick up the CPU tensors
    pyro.clear_param_store()
    model, inputs, data = collider_problem()
    model = model.to(device)
    inputs, data = _to(inputs, device), _to(data, device)
    model.setup(inputs, data)
    model.load_state_dict(model_state)
    guide = AutoStructuredGuide(model, precision=structure, backend=backend, name="dev")
    guide(inputs, data)
    guide.load_state_dict(guide_state)
    q = guide.inducing_posterior()
    assert torch.allclose(q.kl().cpu(), ref["kl"], rtol=1e-9, atol=1e-9)
    assert torch.allclose(q.log_prob(ref["value"].to(device)).cpu(), ref["log_prob"], rtol=1e-9, atol=1e-8)
    for node, m in ref["means"].items():
        assert torch.allclose(q.mean_blocks()[node].cpu(), m, atol=1e-10)
    # Monte Carlo quantities: only device and finiteness (different random streams)
    loss = DAGELBO(num_particles=2).differentiable_loss(model, guide, inputs, data)
    assert loss.device.type == device.type and torch.isfinite(loss)
    grads = torch.autograd.grad(loss, list(guide.parameters()), allow_unused=True)
    assert all(g is None or (g.device.type == device.type and torch.isfinite(g).all()) for g in grads)


def test_minibatch_svi_on_device(device):
    model, inputs, data = collider_problem()
    model = model.to(device)
    inputs, data = _to(inputs, device), _to(data, device)
    guide = AutoStructuredGuide(model, precision="chordal", backend="sparse")
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), DAGELBO(num_particles=2))
    losses = [svi.step(inputs, data, subsample_size=5) for _ in range(5)]
    assert all(torch.isfinite(torch.tensor(losses)))


@pytest.mark.parametrize("structure,backend", [("mean_field", "dense"), ("chordal", "sparse")])
def test_svi_and_predict_stay_on_device(device, structure, backend):
    model, inputs, data = collider_problem()
    model = model.to(device)
    inputs, data = _to(inputs, device), _to(data, device)
    guide = AutoStructuredGuide(model, precision=structure, backend=backend)
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
