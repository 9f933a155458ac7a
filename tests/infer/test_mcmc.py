"""TracedNUTS and CompiledNUTS: the traced / compiled potential equals the eager one far from the point where it
was recorded, a recorded Cholesky fails loudly, a failed compiler check falls back to the uncompiled recording,
CompiledNUTS's block layout is Pyro's NUTS draw for draw, chains run end to end."""
import shutil

import networkx as nx
import pyro
import pytest
import torch
from pyro.infer import MCMC, NUTS
from pyro.ops.integrator import potential_grad

from pyro_dag import DAGDGP, kernels
from pyro_dag.diagnostics import MCMCStats, to_inference_data
from pyro_dag.gp.conditional import cholesky_with_jitter
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import CompiledNUTS, TracedNUTS
from pyro_dag.infer.mcmc import compile_potential


pytestmark = pytest.mark.usefixtures("float64_default")
needs_cxx = pytest.mark.skipif(shutil.which("c++") is None and shutil.which("g++") is None,
                               reason="TorchInductor on CPU needs a C++ compiler")


def latent_chain(collapse):
    x = torch.linspace(-1.5, 1.5, 12).unsqueeze(-1)
    data = {"b": torch.sin(2 * x)}
    model = DAGDGP(nx.DiGraph([("x", "a"), ("a", "b")]), num_inducing=4, likelihoods={"b": Gaussian(0.01)},
                   sample_f=True, priors="weakly_informative", collapse=collapse).double()
    return model, {"x": x}, data


def observed_collider():
    g = torch.Generator().manual_seed(0)
    x1, x2 = torch.rand(10, 1, generator=g), torch.rand(10, 1, generator=g)
    w1, w2 = torch.sin(3 * x1), torch.cos(2 * x2)
    data = {"w1": w1, "w2": w2, "w3": w1 * w2 + 0.05 * torch.randn(10, 1, generator=g)}
    data["w1"][3] = float("nan")  # a missing entry: the mask is data, fixed in the trace
    model = DAGDGP(nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")]),
                   kernels={"w3": kernels.SumInput(kernels.RBF(lengthscale=0.6))}, num_inducing=4,
                   likelihoods={w: Gaussian(0.01) for w in ("w1", "w2", "w3")}, sample_f=True,
                   priors="weakly_informative", collapse="inducing").double()
    return model, {"x1": x1, "x2": x2}, data


PROBLEMS = {"latent chain, values": lambda: latent_chain("values"),
            "latent chain, inducing": lambda: latent_chain("inducing"),
            "observed collider, inducing": observed_collider}


def potentials(model, inputs, data, cls=TracedNUTS):
    """Pyro's NUTS and ``cls`` set up on the same model from the same seed (the same initial point)."""
    model.setup(inputs, data)
    pyro.set_rng_seed(0)
    eager, recorded = NUTS(model), cls(model)
    eager.setup(0, inputs, data)
    pyro.set_rng_seed(0)
    recorded.setup(0, inputs, data)
    return eager, recorded


@pytest.mark.parametrize("problem", list(PROBLEMS))
def test_traced_potential_and_gradient_equal_the_eager_ones(problem):
    model, inputs, data = PROBLEMS[problem]()
    eager, traced = potentials(model, inputs, data)
    z0 = eager.initial_params
    assert sorted(z0) == sorted(traced.initial_params)
    g = torch.Generator().manual_seed(1)
    for _ in range(4):  # the trace was taken at the initial point; replay it far from there
        z = {k: v + 0.5 * torch.randn(v.shape, generator=g) for k, v in z0.items()}
        grads_e, pe_e = potential_grad(eager.potential_fn, z)
        with torch.jit.optimized_execution(False):
            grads_t, pe_t = potential_grad(traced.potential_fn, z)
        assert torch.isfinite(pe_e)
        torch.testing.assert_close(pe_t, pe_e, rtol=1e-10, atol=1e-10)
        for k in z:
            torch.testing.assert_close(grads_t[k], grads_e[k], rtol=1e-9, atol=1e-9)


def test_traced_nuts_on_a_model_set_up_lazily_by_its_first_call():
    """The README path: no model.setup(...) before MCMC; the set-up happens in Pyro's first (eager) trace of the
    model, before the potential is traced, and the traced potential is that of the set-up model."""
    model, inputs, data = latent_chain("inducing")
    pyro.set_rng_seed(0)
    traced = TracedNUTS(model)
    traced.setup(0, inputs, data)
    eager = NUTS(model)
    eager.setup(0, inputs, data)
    z = {k: v + 0.3 for k, v in traced.initial_params.items()}
    grads_e, pe_e = potential_grad(eager.potential_fn, z)
    with torch.jit.optimized_execution(False):
        grads_t, pe_t = potential_grad(traced.potential_fn, z)
    torch.testing.assert_close(pe_t, pe_e, rtol=1e-10, atol=1e-10)
    for k in z:
        torch.testing.assert_close(grads_t[k], grads_e[k], rtol=1e-9, atol=1e-9)


def test_traced_cholesky_raises_where_the_eager_one_would_climb_the_jitter_ladder():
    K = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    traced = torch.jit.trace(lambda A: cholesky_with_jitter(A, node="w"), (K,), check_trace=False)
    with torch.jit.optimized_execution(False):
        torch.testing.assert_close(traced(K), cholesky_with_jitter(K))
        singular = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
        cholesky_with_jitter(singular)  # eager: a rung of the ladder succeeds
        with pytest.raises(RuntimeError, match="positive-definite"):
            traced(-singular)
        # ... which NUTS counts as a divergent step (Pyro's singular-matrix handler), not as a crash
        z = {"s": torch.tensor(1.0)}
        grads, pe = potential_grad(lambda p: traced(-singular * p["s"]).sum(), z)
    assert torch.isnan(pe) and grads["s"] == 0


def test_traced_nuts_runs_a_chain_into_inference_data_and_restores_the_executor():
    model, inputs, data = latent_chain("inducing")
    model.setup(inputs, data)
    check_chain_into_inference_data(TracedNUTS(model, max_tree_depth=4), inputs, data)
    assert torch._C._get_graph_executor_optimize()  # not left switched off for the user's other code


def check_chain_into_inference_data(kernel, inputs, data, site="a.u", observed=("b.y",), draws=15):
    """A short chain runs, its draws of ``site`` (and all others) are finite, and it reaches InferenceData with a
    log-likelihood for each ``observed`` node."""
    stats = MCMCStats()
    pyro.set_rng_seed(0)
    mcmc = MCMC(kernel, num_samples=draws, warmup_steps=draws, disable_progbar=True, hook_fn=stats)
    mcmc.run(inputs, data)
    samples = mcmc.get_samples()
    assert samples[site].shape[0] == draws and all(torch.isfinite(v).all() for v in samples.values())
    idata = to_inference_data(mcmc=mcmc, sample_stats=stats)
    assert idata.sample_stats["tree_depth"].shape == (1, draws)
    assert all(y in idata.log_likelihood for y in observed)


def test_traced_nuts_rejects_what_it_cannot_trace():
    model, _, _ = latent_chain("values")
    with pytest.raises(ValueError, match="pass the model"):
        TracedNUTS(potential_fn=lambda z: 0.0)
    with pytest.raises(ValueError, match="jit_compile=True"):
        TracedNUTS(model, jit_compile=False)


# one model for the compiled tests: compiling takes tens of seconds per distinct model, and the chain test below
# reuses this one's compilation from TorchInductor's cache
COMPILED_PROBLEMS = {"observed collider, inducing": observed_collider}


@pytest.mark.slow  # over 10 s on 2 cores: run by `pytest -m slow`
@needs_cxx
@pytest.mark.parametrize("problem", list(COMPILED_PROBLEMS))
def test_compiled_potential_and_gradient_equal_the_eager_ones(problem):
    model, inputs, data = COMPILED_PROBLEMS[problem]()
    eager, compiled = potentials(model, inputs, data, CompiledNUTS)
    assert compiled.compiled and compiled.compile_seconds > 0
    z0 = eager.initial_params
    assert sorted(compiled.initial_params) == sorted(z0)  # outside the sampler: the model's sites
    layout = compiled._layout
    g = torch.Generator().manual_seed(1)
    for _ in range(4):  # recorded at the initial point; evaluated far from there
        z = {k: v.detach() + 0.5 * torch.randn(v.shape, generator=g) for k, v in z0.items()}
        grads_e, pe_e = potential_grad(eager.potential_fn, z)
        grads_c, pe_c = potential_grad(compiled.potential_fn, layout.to_blocks(z))
        assert torch.isfinite(pe_e)
        torch.testing.assert_close(pe_c, pe_e, rtol=1e-9, atol=1e-9)
        grads_c = layout.to_sites(grads_c)
        for k in z:
            torch.testing.assert_close(grads_c[k], grads_e[k], rtol=1e-8, atol=1e-8)


@pytest.mark.parametrize("full_mass", [False, True, "block"])
def test_the_block_layout_runs_pyros_nuts(full_mass):
    """With the recording uncompiled (backend="eager"), CompiledNUTS on block vectors follows Pyro's NUTS on the
    sites draw for draw: the same mass-matrix blocks, momenta drawn in the same order, the same adaptation."""
    model, inputs, data = observed_collider()
    model.setup(inputs, data)
    if full_mass == "block":
        full_mass = [("w1.z", "kernels.w3.base.lengthscale", "w2.z")]  # not in sorted order
    runs = {}
    for name, cls in (("pyro", NUTS), ("blocks", lambda m, **kw: CompiledNUTS(m, backend="eager", **kw))):
        pyro.set_rng_seed(3)
        mcmc = MCMC(cls(model, max_tree_depth=4, full_mass=full_mass), num_samples=6, warmup_steps=6,
                    disable_progbar=True)
        mcmc.run(inputs, data)
        runs[name] = mcmc
    a, b = runs["pyro"].get_samples(), runs["blocks"].get_samples()
    assert sorted(a) == sorted(b)
    assert (a["w1.z"][1:] != a["w1.z"][:-1]).any()  # the chain moves
    for k in a:
        torch.testing.assert_close(b[k], a[k], rtol=1e-7, atol=1e-7)
    assert runs["blocks"].kernel.compiled is False
    assert runs["blocks"].kernel.step_size == pytest.approx(runs["pyro"].kernel.step_size, rel=1e-7)


@needs_cxx
def test_compiled_cholesky_raises_where_the_eager_one_would_climb_the_jitter_ladder():
    """The jitter rung found at recording is frozen; a matrix that needs another one raises at replay, which
    NUTS counts as a divergent step (Pyro's singular-matrix handler), not as a crash or a wrong factor."""
    K = torch.tensor([[2.0, 0.5], [0.5, 1.0]])
    fn, ok = compile_potential(lambda z: cholesky_with_jitter(K * z["s"], node="w").sum(), {"s": torch.tensor(1.0)})
    # (without a layout the compiled potential takes the sites, as the eager one)
    assert ok
    torch.testing.assert_close(fn({"s": torch.tensor(2.0)}), cholesky_with_jitter(2 * K).sum())
    with pytest.raises(RuntimeError, match="positive-definite"):
        fn({"s": torch.tensor(-1.0)})
    grads, pe = potential_grad(fn, {"s": torch.tensor(-1.0)})
    assert torch.isnan(pe) and grads["s"] == 0


@needs_cxx
def test_a_failed_check_falls_back_to_the_uncompiled_recording_with_a_warning(monkeypatch):
    import pyro_dag.infer.mcmc as mcmc_module

    monkeypatch.setattr(mcmc_module, "_check_against_recording", lambda *args: "gradient error 1e+07 relative")
    potential = lambda z: (z["s"] ** 2).sum()  # noqa: E731
    with pytest.warns(RuntimeWarning, match="differs from the uncompiled recording"):
        fn, ok = compile_potential(potential, {"s": torch.ones(3)})
    assert not ok
    z = {"s": torch.tensor([1.0, 2.0, -0.5])}
    grads, pe = potential_grad(fn, z)
    torch.testing.assert_close(pe, potential(z))
    torch.testing.assert_close(grads["s"], 2 * z["s"])


@pytest.mark.slow  # over 10 s on 2 cores: run by `pytest -m slow`
@needs_cxx
def test_compiled_nuts_runs_a_lazily_set_up_model_into_inference_data():
    """The README path: no model.setup(...) before MCMC."""
    model, inputs, data = observed_collider()
    kernel = CompiledNUTS(model, max_tree_depth=4)
    check_chain_into_inference_data(kernel, inputs, data, site="w1.z", observed=("w1.y", "w2.y", "w3.y"))
    assert kernel.compiled


def test_compiled_nuts_rejects_what_it_cannot_compile():
    model, _, _ = latent_chain("values")
    with pytest.raises(ValueError, match="pass the model"):
        CompiledNUTS(potential_fn=lambda z: 0.0)
    with pytest.raises(ValueError, match="jit_compile"):
        CompiledNUTS(model, jit_compile=True)
    with pytest.raises(ValueError, match="backend"):
        CompiledNUTS(model, backend="cuda")
