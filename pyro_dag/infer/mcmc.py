"""NUTS with a traced potential energy, for DAG deep GPs sampled by MCMC.

A ``DAGDGP(sample_f=True)`` potential is a few hundred small tensor operations (n ≈ 50 cases, M ≈ 10 inducing
points per node), so Pyro's NUTS spends most of each gradient in Python: the effect-handler trace of the model,
the distributions' construction and the per-op autograd bookkeeping. ``NUTS(model, jit_compile=True)`` removes the
Python part by tracing the potential once with :func:`torch.jit.trace`, but on these models TorchScript's optimising
graph executor fails (the default profiling executor raises ``Unsupported value kind: Tensor``; the legacy
executor's symbolic differentiation of ``matmul`` raises a shape error). :class:`TracedNUTS` runs the same trace
with the graph executor's optimisation off (:func:`torch.jit.optimized_execution`), so the traced graph is
interpreted in C++ and differentiated by ordinary autograd: the potential and its gradient are those of the eager
model (tested to 1e-10), at a fraction of the cost per gradient (``benchmarks/traced_nuts.py``; numbers in
``benchmarks/README.md``). :func:`torch.jit.trace` is deprecated in recent torch (it warns once per chain) but
still supported.

The NUTS sampler is that of Hoffman & Gelman (2014), "The No-U-Turn Sampler", JMLR 15; its use on DAG deep GPs
follows Perlino et al. (2026), "Deep Gaussian processes on directed acyclic graphs", arXiv:2607.09645.
"""
import time
import warnings

import torch
from pyro.infer.mcmc import NUTS

__all__ = ["CompiledNUTS", "TracedNUTS", "compile_potential"]


class TracedNUTS(NUTS):
    """:class:`pyro.infer.NUTS` whose potential energy is traced once per chain and run without TorchScript's graph
    optimisation.

    A drop-in replacement for ``NUTS(model, ...)``: the same keyword arguments (``jit_compile`` is always on and
    TorchScript's tracer warnings are off by default), the same step-size and mass-matrix adaptation, and the same
    draws as far as the traced potential equals the eager one (bit for bit on the models of
    ``benchmarks/traced_nuts.py``). Use it only on models whose structure and control flow do not depend on the
    sampled values (a ``DAGDGP`` with fixed data, as in ``MCMC(TracedNUTS(model), ...).run(inputs, data)``):

    * the trace is taken at the first potential evaluation and replayed with new values of the sample sites,
      so a Python branch on a sampled value is frozen at the branch it took then;
    * in particular :func:`pyro_dag.gp.conditional.cholesky_with_jitter` fixes its jitter rung at trace time; a
      later Gram matrix that is not positive definite with that jitter makes the step divergent (Pyro's
      singular-matrix handler) instead of moving up the jitter ladder;
    * checks that raise on NaN or inf in eager mode are frozen too, so a non-finite hyperparameter gives a NaN
      energy, which NUTS counts as a divergent transition.

    :param model: the Pyro model (e.g. a ``DAGDGP(sample_f=True)``); positional, as in Pyro.
    :param kwargs: keyword arguments of :class:`pyro.infer.NUTS` (``max_tree_depth``, ``target_accept_prob``,
        ``full_mass``, ``init_strategy``, ...).
    """

    def __init__(self, model=None, potential_fn=None, **kwargs):
        if potential_fn is not None:
            raise ValueError("TracedNUTS traces a model's potential: pass the model, not potential_fn (use "
                             "pyro.infer.NUTS(potential_fn=...) for a hand-written potential)")
        if kwargs.pop("jit_compile", True) is not True:
            raise ValueError("TracedNUTS always traces the potential (jit_compile=True); use pyro.infer.NUTS for "
                             "the eager potential")
        kwargs.setdefault("ignore_jit_warnings", True)
        super().__init__(model, jit_compile=True, **kwargs)

    # Every potential evaluation happens in setup (initial point, step-size search) or sample (leapfrog steps,
    # the step-size search after a mass-matrix update); the executor flag is global, so it is set around each
    # call and restored, never left off for the user's other TorchScript code.
    def setup(self, warmup_steps, *args, **kwargs):
        with torch.jit.optimized_execution(False):
            return super().setup(warmup_steps, *args, **kwargs)

    def sample(self, params):
        with torch.jit.optimized_execution(False):
            return super().sample(params)


class CompiledNUTS(NUTS):
    """:class:`pyro.infer.NUTS` whose potential energy is recorded once per chain and compiled by TorchInductor.

    The potential of the unconstrained sample sites (Pyro's, transforms and Jacobians included) is recorded as one
    graph of tensor operations on their concatenation (:func:`torch.fx.experimental.proxy_tensor.make_fx`, value
    checks skipped: :func:`pyro_dag.utils.is_tracing`) and compiled with :func:`torch.compile`, which fuses the
    hundreds of small operations of a ``DAGDGP(sample_f=True)`` potential and its gradient into a few kernels.
    Before the first step the compiled potential and gradient are compared with the eager ones at the initial point
    and at a perturbed one; where they differ by more than ``check_rtol`` (a compiler bug), the chain runs on the
    eager potential with a warning. The recording fixes what :class:`TracedNUTS` fixes (a Python branch on a
    sampled value, the Cholesky jitter rung: a later Gram matrix that is not positive definite with that jitter
    makes the step divergent) and needs a C++ compiler (CPU) or Triton (CUDA).

    Compiling takes seconds to a minute per distinct model and data (the first chain; TorchInductor's cache
    serves the later ones), so it pays for chains of thousands of gradients (``benchmarks/traced_nuts.py``).

    :param model: the Pyro model (e.g. a ``DAGDGP(sample_f=True)``); positional, as in Pyro.
    :param float check_rtol: relative tolerance of the check against the eager potential (default 1e-6 in float64,
        1e-3 in float32), relative to the largest gradient entry.
    :param kwargs: keyword arguments of :class:`pyro.infer.NUTS` (``max_tree_depth``, ``target_accept_prob``,
        ``full_mass``, ``init_strategy``, ...); ``jit_compile`` must stay False.

    :ivar float compile_seconds: wall-clock seconds of the last recording, compilation and check.
    :ivar bool compiled: whether the last chain runs on the compiled potential (False after a failed check).

    NUTS: Hoffman & Gelman (2014), JMLR 15; on DAG deep GPs: Perlino et al. (2026), arXiv:2607.09645.
    """

    def __init__(self, model=None, potential_fn=None, *, check_rtol=None, **kwargs):
        if potential_fn is not None:
            raise ValueError("CompiledNUTS compiles a model's potential: pass the model, not potential_fn")
        if kwargs.get("jit_compile"):
            raise ValueError("CompiledNUTS compiles the potential itself; leave jit_compile=False (or use TracedNUTS)")
        super().__init__(model, **kwargs)
        self.check_rtol = check_rtol
        self.compile_seconds = None
        self.compiled = False

    def _initialize_model_properties(self, model_args, model_kwargs):
        super()._initialize_model_properties(model_args, model_kwargs)
        start = time.perf_counter()
        self.potential_fn, self.compiled = compile_potential(self.potential_fn, self._initial_params,
                                                             check_rtol=self.check_rtol)
        self.compile_seconds = time.perf_counter() - start


def compile_potential(potential_fn, params, check_rtol=None):
    """Record ``potential_fn`` (a function of a dict of unconstrained values ``{site: tensor}``) at ``params`` as one
    graph on their concatenation, compile it with TorchInductor and check it against the eager potential.

    :returns: ``(fn, compiled)``: a potential of the same dict, and whether it is the compiled one (False, with a
        warning, when the check failed; ``fn`` is then ``potential_fn``).
    """
    import pyro
    from torch.fx.experimental.proxy_tensor import make_fx

    names = list(params)
    shapes = [params[k].shape for k in names]
    sizes = [params[k].numel() for k in names]
    flat0 = torch.cat([params[k].detach().reshape(-1) for k in names])

    def flat_potential(flat):
        return potential_fn({k: p.reshape(s) for k, p, s in zip(names, flat.split(sizes), shapes)})

    # value checks are skipped while recording (pyro_dag.utils.is_tracing) and Pyro's validation cannot be
    # recorded (it reads values); both ran in Pyro's eager initialisation of the model, just before
    with pyro.validation_enabled(False):
        graph = make_fx(torch.func.functionalize(flat_potential, remove="mutations"), tracing_mode="real")(flat0)
    # In-place buffer reuse miscompiles the gradient of these potentials on CPU (torch 2.13: wrong by orders of
    # magnitude, checked against the eager gradient); without it the compiled gradient matches to 1e-11.
    with torch._inductor.config.patch(inplace_buffers=False):
        compiled = torch.compile(graph, dynamic=False)

        def fn(z):
            return compiled(torch.cat([z[k].reshape(-1) for k in names]))

        # the backward is compiled at the first gradient: take it here, inside the configuration
        bad = _check_against_eager(fn, potential_fn, params, check_rtol)
    if bad is not None:
        warnings.warn(f"CompiledNUTS: the compiled potential differs from the eager one ({bad}); a compiler bug, "
                      "so this chain runs on the eager potential (use TracedNUTS for a cheaper exact one)",
                      RuntimeWarning, stacklevel=3)
        return potential_fn, False
    return fn, True


def _check_against_eager(fn, potential_fn, params, rtol):
    from pyro.ops.integrator import potential_grad

    dtype = next(iter(params.values())).dtype
    rtol = (1e-6 if dtype == torch.float64 else 1e-3) if rtol is None else rtol
    gen = torch.Generator().manual_seed(0)
    points = [params, {k: v.detach() + 0.05 * torch.randn(v.shape, generator=gen).to(v) for k, v in params.items()}]
    for z in points:
        g_c, e_c = potential_grad(fn, z)
        g_e, e_e = potential_grad(potential_fn, z)
        if not bool(torch.isfinite(e_e)):
            continue  # nothing to compare against at this point
        scale = max(1.0, max(float(g.abs().max()) for g in g_e.values()))
        err = max(float((g_c[k] - g_e[k]).abs().max()) for k in g_e) / scale
        err_e = abs(float(e_c) - float(e_e)) / max(1.0, abs(float(e_e)))
        if not (err <= rtol and err_e <= rtol):
            return f"gradient error {err:.1e}, energy error {err_e:.1e} relative, tolerance {rtol:.0e}"
    return None
