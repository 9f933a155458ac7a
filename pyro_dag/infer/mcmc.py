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
    potential: its value bit for bit, its gradient to rounding (the trace replays the plain composition of the fused
    operations of :mod:`pyro_dag.ops`, whose hand-written backward passes eager mode runs: 1e-13 to 4e-10 apart), so
    a chain follows the eager one's draws for a while and then parts from it, sampling the same posterior. Use it
    only on models whose structure and control flow do not depend on the
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
    graph of tensor operations (:func:`torch.fx.experimental.proxy_tensor.make_fx`, value checks skipped:
    :func:`pyro_dag.utils.is_tracing`) and compiled with :func:`torch.compile`, which fuses the hundreds of small
    operations of a ``DAGDGP(sample_f=True)`` potential and its gradient into a few kernels. The sampler itself
    runs on one concatenated vector per block of the mass matrix (one per tuple of ``full_mass``, one for the
    diagonal rest) instead of one tensor per site, which removes most of NUTS's per-site Python work per leapfrog
    step; the vectors are laid out as Pyro's mass-matrix adapter concatenates the sites, and the momenta are drawn in
    the same order, so the sampler is Pyro's NUTS on the same blocks (``benchmarks/traced_nuts.py``). Draws, hooks
    and :meth:`~pyro.infer.MCMC.get_samples` see the model's sites as usual; ``inverse_mass_matrix`` is keyed by
    the blocks (``("_block0",)``, ..., ``("_diagonal",)``).

    Before the first step the compiled potential and gradient are compared with those of the uncompiled recording
    at the initial point and at a perturbed one; where they differ by more than ``check_rtol`` (a compiler bug), the
    chain runs on the uncompiled recording with a warning. The recording fixes what :class:`TracedNUTS` fixes (a
    Python branch on a sampled value, the Cholesky jitter rung: a later Gram matrix that is not positive definite
    with that jitter makes the step divergent). Compiling needs a C++ compiler (CPU; Triton on CUDA, untested here)
    and takes seconds to a minute per distinct model and data (TorchInductor's cache serves later chains), so it
    pays for chains of thousands of gradients; chains run in this process, one after the other (the compiled
    function does not pickle).

    :param model: the Pyro model (e.g. a ``DAGDGP(sample_f=True)``); positional, as in Pyro.
    :param float check_rtol: tolerance of the check of the compiled potential (default 1e-6 in float64, 1e-3 in
        float32), relative to the largest gradient entry and to the energy.
    :param str backend: ``"inductor"`` (default) or ``"eager"`` (the recording without compilation: for tests and
        for machines without a compiler).
    :param kwargs: keyword arguments of :class:`pyro.infer.NUTS` (``max_tree_depth``, ``target_accept_prob``,
        ``full_mass``, ``init_strategy``, ...); ``jit_compile`` must stay False.

    :ivar float compile_seconds: wall-clock seconds of the last recording, compilation and check.
    :ivar bool compiled: whether the last chain runs on the compiled potential (False after a failed check or with
        ``backend="eager"``).

    NUTS: Hoffman & Gelman (2014), JMLR 15; on DAG deep GPs: Perlino et al. (2026), arXiv:2607.09645.
    """

    def __init__(self, model=None, potential_fn=None, *, check_rtol=None, backend="inductor", **kwargs):
        if potential_fn is not None:
            raise ValueError("CompiledNUTS compiles a model's potential: pass the model, not potential_fn")
        if kwargs.get("jit_compile"):
            raise ValueError("CompiledNUTS compiles the potential itself; leave jit_compile=False (or use TracedNUTS)")
        if backend not in ("inductor", "eager"):
            raise ValueError(f"backend must be 'inductor' or 'eager', got {backend!r}")
        super().__init__(model, **kwargs)
        self.check_rtol, self.backend = check_rtol, backend
        self._site_full_mass = self._adapter.dense_mass  # the user's blocks, in site names
        self._layout = None
        self._in_blocks = False
        self.compile_seconds = None
        self.compiled = False

    # Pyro's HMC reads `initial_params` both for the sites (MCMC's bookkeeping, outside) and for the sampler's own
    # state (inside setup and sample): outside it is the model's sites, inside the block vectors.
    @property
    def initial_params(self):
        params = self._initial_params
        if self._in_blocks and self._layout is not None and params.keys() != self._layout.blocks.keys():
            return self._layout.to_blocks(params)
        return params

    @initial_params.setter
    def initial_params(self, params):
        self._initial_params = params

    def _initialize_model_properties(self, model_args, model_kwargs):
        super()._initialize_model_properties(model_args, model_kwargs)
        start = time.perf_counter()
        self._layout = _BlockLayout(self._initial_params, self._site_full_mass)
        self.potential_fn, self.compiled = compile_potential(self.potential_fn, self._initial_params, self._layout,
                                                             check_rtol=self.check_rtol, backend=self.backend)
        self._adapter.dense_mass = self._layout.block_full_mass
        self.compile_seconds = time.perf_counter() - start

    def _initialize_adapter(self):
        sites = self._initial_params
        self._initial_params = self._layout.to_blocks(sites)  # Pyro's adapter reads the attribute directly
        try:
            super()._initialize_adapter()
        finally:
            self._initial_params = sites

    def setup(self, warmup_steps, *args, **kwargs):
        self._in_blocks = True
        try:
            return super().setup(warmup_steps, *args, **kwargs)
        finally:
            self._in_blocks = False

    def sample(self, params):
        self._in_blocks = True
        try:
            return self._layout.to_sites(super().sample(self._layout.to_blocks(params)))
        finally:
            self._in_blocks = False


class _BlockLayout:
    """Sites ``{name: tensor}`` <-> one vector per mass-matrix block: each ``full_mass`` tuple in its order, then the
    other sites sorted (as :class:`pyro.infer.mcmc.adaptation.BlockMassMatrix` concatenates them)."""

    def __init__(self, params, full_mass):
        names = sorted(params)
        if full_mass is True:
            dense = [tuple(names)]
        elif not full_mass:
            dense = []
        else:
            dense = [tuple(b) for b in full_mass]
            unknown = sorted(set().union(*dense) - set(names))
            if unknown:
                raise ValueError(f"full_mass names sites the model does not have: {unknown}; its sites are {names}")
        taken = set().union(*dense) if dense else set()
        rest = tuple(n for n in names if n not in taken)
        self.blocks = {f"_block{i}": b for i, b in enumerate(dense)}
        if rest:
            self.blocks["_diagonal"] = rest
        self.block_full_mass = [(k,) for k in self.blocks if k != "_diagonal"]
        self.shapes = {n: params[n].shape for n in names}
        self.sizes = {n: params[n].numel() for n in names}

    def to_blocks(self, sites):
        return {k: torch.cat([sites[n].reshape(-1) for n in b]) for k, b in self.blocks.items()}

    def to_sites(self, blocks):
        out = {}
        for k, b in self.blocks.items():
            for n, part in zip(b, blocks[k].split([self.sizes[n] for n in b])):
                out[n] = part.reshape(self.shapes[n])
        return out


def compile_potential(potential_fn, params, layout=None, check_rtol=None, backend="inductor"):
    """Record ``potential_fn`` (a function of a dict of unconstrained values ``{site: tensor}``) at ``params`` as one
    graph, compile it with TorchInductor and check the compiled graph against the uncompiled one.

    :param layout: how the returned function takes its argument: a :class:`_BlockLayout` (a dict of block vectors)
        or None (the dict of sites, as ``potential_fn``).
    :returns: ``(fn, compiled)``: the potential, and whether it is the compiled one (False with
        ``backend="eager"``, and, with a warning, when the check failed: ``fn`` then runs the uncompiled recording).
    """
    import pyro
    from torch.fx.experimental.proxy_tensor import make_fx

    site_args = layout is None
    layout = _BlockLayout(params, False) if site_args else layout
    keys = list(layout.blocks)
    blocks0 = layout.to_blocks({k: v.detach() for k, v in params.items()})

    def block_potential(*vectors):
        return potential_fn(layout.to_sites(dict(zip(keys, vectors))))

    # value checks are skipped while recording (pyro_dag.utils.is_tracing) and Pyro's validation cannot be
    # recorded (it reads values); both ran in Pyro's eager initialisation of the model, just before
    with pyro.validation_enabled(False):
        graph = make_fx(torch.func.functionalize(block_potential, remove="mutations"),
                        tracing_mode="real")(*[blocks0[k] for k in keys])

    def wrap(g):
        return lambda blocks: g(*[blocks[k] for k in keys])

    recorded = wrap(graph)
    fn, bad = recorded, None
    if backend == "inductor":
        # In-place buffer reuse miscompiles the gradient of these potentials on CPU (torch 2.13: wrong by orders of
        # magnitude, checked against the eager gradient); without it the compiled gradient matches to 1e-11.
        with torch._inductor.config.patch(inplace_buffers=False):
            fn = wrap(torch.compile(graph, dynamic=False))
            # the backward is compiled at the first gradient: take it here, inside the configuration
            bad = _check_against_recording(fn, recorded, layout.to_blocks(params), check_rtol)
        if bad is not None:
            warnings.warn(f"CompiledNUTS: the compiled potential differs from the uncompiled recording ({bad}); a "
                          "compiler bug, so this chain runs on the uncompiled recording", RuntimeWarning,
                          stacklevel=3)
            fn = recorded
    if site_args:
        blocks_fn = fn
        fn = lambda z: blocks_fn(layout.to_blocks(z))  # noqa: E731
    return fn, backend == "inductor" and bad is None


def _check_against_recording(fn, recorded, blocks, rtol):
    """None if the compiled ``fn`` and the uncompiled ``recorded`` potential (both of the block vectors) agree in
    value and gradient at ``blocks`` and at a perturbed point, else what differs. Both freeze the same control flow
    (the jitter rung), so a difference is the compiler's."""
    from pyro.ops.integrator import potential_grad

    dtype = next(iter(blocks.values())).dtype
    rtol = (1e-6 if dtype == torch.float64 else 1e-3) if rtol is None else rtol
    gen = torch.Generator().manual_seed(0)
    blocks = {k: v.detach() for k, v in blocks.items()}
    points = [blocks, {k: v + 0.05 * torch.randn(v.shape, generator=gen).to(v) for k, v in blocks.items()}]
    for z in points:
        g_c, e_c = potential_grad(fn, {k: v.clone() for k, v in z.items()})
        g_e, e_e = potential_grad(recorded, {k: v.clone() for k, v in z.items()})
        if not bool(torch.isfinite(e_e)):
            continue  # nothing to compare against at this point
        scale = max(1.0, max(float(g.abs().max()) for g in g_e.values()))
        err = max(float((g_c[k] - g_e[k]).abs().max()) for k in g_e) / scale
        err_e = abs(float(e_c) - float(e_e)) / max(1.0, abs(float(e_e)))
        if not (err <= rtol and err_e <= rtol):
            return f"gradient error {err:.1e}, energy error {err_e:.1e} relative, tolerance {rtol:.0e}"
    return None
