"""The GPU paths without a GPU: the main workflows must keep every tensor on the parameters' device and dtype.

* dtype: a float32 model under a float64 default dtype stays float32 end to end, and a float64 model gives the
  same numbers whatever the default dtype (a tensor made without ``dtype=`` would be float32 there and round).
* device: :class:`device_trace.HostTrace` marks the tensors that a GPU run would leave on the host (made without
  ``device=``) and records every op that mixes them with the model's (see its docstring for what it can and cannot
  tell). With a GPU, ``pytest --device cuda tests/test_device.py`` runs the same workflows on CUDA for real.
* persist: a fit saved in one dtype loads into the other (``dtype=``) and onto a named device (``map_location=``),
  with a clear error where it cannot.
"""
import networkx as nx
import pyro
import pytest
import torch

from device_trace import HostTrace
from pyro_dag import DAGDGP, persist
from pyro_dag.infer import DAGELBO, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.persist import SavedFileError


def _problem(dtype=torch.float64, n=24):
    """x -> h -> y with h hidden (stochastic steps run) and x -> z observed (fitted exactly)."""
    g = torch.Generator().manual_seed(0)
    x = torch.rand(n, 1, dtype=torch.float64, generator=g)
    y = torch.sin(3 * x) ** 2 + 0.05 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    z = torch.cos(2 * x) + 0.05 * torch.randn(n, 1, dtype=torch.float64, generator=g)
    graph = nx.DiGraph([("x", "h"), ("h", "y"), ("x", "z")])
    return graph, {"x": x.to(dtype)}, {"y": y.to(dtype), "z": z.to(dtype)}


def _fit(dtype, precision, steps=3):
    graph, inputs, data = _problem(dtype)
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    model = DAGDGP(graph).to(dtype)
    guide = AutoStructuredGuide(model, precision=precision)
    result = train(model, guide, inputs, data, num_steps=steps, progress=False)
    return model, guide, inputs, data, result


def _predict(model, guide, inputs):
    pyro.set_rng_seed(1)
    pred = model.predict(guide, {"x": inputs["x"][:6]}, num_samples=8)
    return {w: (p.mean.detach(), p.variance.detach()) for w, p in pred.items()}


@pytest.fixture
def default_dtype():
    old = torch.get_default_dtype()
    yield torch.set_default_dtype
    torch.set_default_dtype(old)


@pytest.mark.parametrize("precision", ["mean_field", "chordal"])
def test_a_float32_model_stays_float32_under_a_float64_default(default_dtype, precision, tmp_path):
    default_dtype(torch.float64)
    model, guide, inputs, data, result = _fit(torch.float32, precision)
    assert all(torch.isfinite(torch.as_tensor(result.losses)))
    assert {p.dtype for p in model.parameters()} | {p.dtype for p in guide.parameters()} == {torch.float32}
    loss = DAGELBO(num_particles=2, sampler="joint").differentiable_loss(model, guide, inputs, data)
    assert loss.dtype == torch.float32
    for mean, var in _predict(model, guide, inputs).values():
        assert mean.dtype == var.dtype == torch.float32
    persist.save(tmp_path / "f.pt", model, guide, inputs, data)
    pyro.clear_param_store()
    model2 = DAGDGP(model.graph)
    guide2 = AutoStructuredGuide(model2, precision=precision)
    persist.load(tmp_path / "f.pt", model2, guide2)
    assert {p.dtype for p in guide2.parameters()} == {torch.float32}


@pytest.mark.parametrize("precision", ["mean_field", "chordal"])
def test_float64_numbers_do_not_depend_on_the_default_dtype(default_dtype, precision):
    runs = []
    for default in (torch.float64, torch.float32):
        default_dtype(default)
        model, guide, inputs, _, result = _fit(torch.float64, precision)
        runs.append((result.losses, _predict(model, guide, inputs)))
    (losses64, pred64), (losses32, pred32) = runs
    assert losses32 == pytest.approx(losses64, rel=1e-12, abs=1e-12)
    for w in pred64:
        assert torch.allclose(pred32[w][0], pred64[w][0], rtol=1e-12, atol=1e-12), w
        assert torch.allclose(pred32[w][1], pred64[w][1], rtol=1e-12, atol=1e-12), w


def test_the_host_trace_sees_a_tensor_made_without_device():
    """The check can fail: a factory without device= meeting a parameter is recorded; with device= it is not."""
    p = torch.randn(3, requires_grad=True)
    with HostTrace() as trace:
        p + torch.ones(3, device=p.device)
        p * torch.tensor(2.0)                      # a 0-dim host tensor: CUDA accepts it
        _ = torch.zeros(3).to(p) + p
    assert trace.violations == {}
    with HostTrace() as trace:
        p + torch.ones(3)
    assert list(trace.violations.values()) == ["add"]


@pytest.mark.parametrize("precision,backend", [("mean_field", None), ("chordal", "sparse"), ("chordal", "dense")])
def test_no_host_tensor_meets_the_model_on_the_main_paths(precision, backend, tmp_path):
    graph, inputs, data = _problem()
    model = DAGDGP(graph).double()
    guide = AutoStructuredGuide(model, precision=precision, **({"backend": backend} if backend else {}))
    with HostTrace() as trace:
        train(model, guide, inputs, data, num_steps=3, progress=False)
        for sampler in ("conditional", "joint"):
            loss = DAGELBO(num_particles=2, sampler=sampler).differentiable_loss(model, guide, inputs, data)
            torch.autograd.grad(loss, list(guide.parameters()), allow_unused=True)
        _predict(model, guide, inputs)
        persist.save(tmp_path / "f.pt", model, guide, inputs, data)
    assert trace.violations == {}
    pyro.clear_param_store()
    model2 = DAGDGP(graph).double()
    guide2 = AutoStructuredGuide(model2, precision=precision, **({"backend": backend} if backend else {}))
    with HostTrace() as trace:
        persist.load(tmp_path / "f.pt", model2, guide2)
        _predict(model2, guide2, inputs)
    assert trace.violations == {}


@pytest.mark.parametrize("kw", [dict(method="svi", likelihood="linear", num_steps=20, num_particles=4),
                                dict(method="exact", likelihood="bge"), dict(method="hybrid")])
def test_no_host_tensor_meets_the_data_in_structure_fit(kw):
    """The exact posterior's scores (numpy) move the data to the host themselves: on a GPU the data's device would
    otherwise meet the host's parent-set masks."""
    from pyro_dag.structure import fit

    g = torch.Generator().manual_seed(0)
    X = torch.randn(150, 6, generator=g, dtype=torch.float64)
    for j in range(1, 6):
        X[:, j] += 0.8 * X[:, j - 1]
    with HostTrace() as trace:
        post = fit(X, progress=False, **kw)
        post.edge_probs()
        post.sample(5)
    assert trace.violations == {}


# ------------------------------------------------------------------------------------ persist across dtype/device
@pytest.mark.parametrize("saved,loaded", [(torch.float64, torch.float32), (torch.float32, torch.float64)])
def test_persist_round_trips_across_dtype(saved, loaded, tmp_path):
    """The loaded model and guide hold the saved values in the new dtype (to float32's precision), and their
    deterministic outputs (the posterior's means and KL) agree to it; the sampled predictions are in the new dtype
    (their draws differ: torch draws float32 and float64 normals differently)."""
    model, guide, inputs, data, _ = _fit(saved, "chordal")
    q = guide.inducing_posterior()
    before = {"kl": float(q.kl()), "means": {k: v.detach().double() for k, v in q.mean_blocks().items()}}
    persist.save(tmp_path / "f.pt", model, guide, inputs, data)
    pyro.clear_param_store()
    model2 = DAGDGP(model.graph)
    guide2 = AutoStructuredGuide(model2, precision="chordal")
    if loaded == torch.float32:   # a float64 fit in float32: the warning says its predictions may move
        with pytest.warns(persist.LoadPrecisionWarning, match="dtype=torch.float32 computes this float64 fit"):
            persist.load(tmp_path / "f.pt", model2, guide2, dtype=loaded, map_location="cpu")
    else:
        persist.load(tmp_path / "f.pt", model2, guide2, dtype=loaded, map_location="cpu")
    assert model2.dtype == loaded and {p.dtype for p in guide2.parameters()} == {loaded}
    for (k, a), (k2, b) in zip(model.state_dict().items(), model2.state_dict().items()):
        assert k == k2 and b.dtype == (loaded if a.is_floating_point() else a.dtype), k
        assert torch.allclose(b.double(), a.double(), rtol=1e-6, atol=1e-7), k
    q2 = guide2.inducing_posterior()
    assert float(q2.kl()) == pytest.approx(before["kl"], rel=1e-4, abs=1e-4)
    for k, m in before["means"].items():
        assert torch.allclose(q2.mean_blocks()[k].double(), m, rtol=1e-5, atol=1e-5), k
    for mean, var in _predict(model2, guide2, {"x": inputs["x"].to(loaded)}).values():
        assert mean.dtype == var.dtype == loaded and torch.isfinite(mean).all()


def test_persist_refuses_what_it_cannot_load_onto(tmp_path):
    model, guide, inputs, data, _ = _fit(torch.float64, "mean_field", steps=1)
    persist.save(tmp_path / "f.pt", model, guide, inputs, data)
    for kwargs, match in [({"dtype": torch.float16}, "float32 or torch.float64"),
                          ({"map_location": "meta"}, "meta device holds no values"),
                          ({"map_location": "no-such-device"}, "is not a device")] + (
            [] if torch.cuda.is_available() else [({"map_location": "cuda"}, "CUDA is not available")]) + (
            [] if torch.backends.mps.is_available() else [({"map_location": "mps"}, "'mps' is not available")]):
        pyro.clear_param_store()
        model2 = DAGDGP(model.graph).double()
        with pytest.raises(SavedFileError, match=match):
            persist.load(tmp_path / "f.pt", model2, AutoStructuredGuide(model2, precision="mean_field"), **kwargs)
