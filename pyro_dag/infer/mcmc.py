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
import torch
from pyro.infer.mcmc import NUTS

__all__ = ["TracedNUTS"]


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
