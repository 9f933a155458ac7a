"""JointAdam: the Adam step of ``pyro.infer.SVI`` with one ``torch.optim.Adam`` over every parameter.

Pyro's ``pyro.optim.Adam`` keeps one ``torch.optim.Adam`` per parameter; :class:`JointAdam` applies the same
update rule (Kingma & Ba 2015) to all parameters at once with torch's multi-tensor (``foreach``) kernels, at a
lower per-step overhead, following Pyro's "custom objectives" recipe (``elbo.differentiable_loss`` then
``backward``). It also holds chosen parameters fixed for a step (their gradients are dropped, so neither the
values nor the optimiser's moments move), which the freezing schedules and the natural-gradient steps of
:func:`~pyro_dag.infer.training.train` use. The update is :class:`~pyro_dag.infer.training.foreach_adam.ForeachAdam`
(torch's multi-tensor Adam, bit for bit, without ``torch.optim``'s per-step overhead) unless an option needs
``torch.optim.Adam``.

Gradient spikes are clipped (``spike_factor``): a Monte Carlo gradient whose norm exceeds ``spike_factor`` times the
median norm of the last :data:`SPIKE_WINDOW` steps is scaled down to that bound. Adam normalises each coordinate by
the root of its running second moment, so one gradient far above the usual scale moves *every* parameter by about
``lr / sqrt(1 - β₂)`` along the spike's signs over the following steps (with ``β₁ = 0.9``, ``β₂ = 0.999``: about
30 learning rates): on the latent collider of Perlino et al. (2026, arXiv:2607.09645) with learned kernels, once the
noise had fallen near the truth, one such spike moved every kernel's log length-scale by ~0.3 within 25 steps and
the loss rose from -48 to +1800, never to come back (3000-step runs at lr 0.01 and 0.02, with and without the
natural-gradient phase).
"""
import collections
import statistics

import pyro
import pyro.poutine as poutine
import torch

from ..checks import check_finite_gradients
from .foreach_adam import ForeachAdam, supports

__all__ = ["JointAdam", "SPIKE_WINDOW", "SPIKE_WARMUP"]

#: Steps whose gradient norms set the median a spike is measured against.
SPIKE_WINDOW = 100
#: Steps before spikes are clipped (the median needs a few norms first).
SPIKE_WARMUP = 20


def _group_key(args):
    return tuple(sorted(args.items()))


class JointAdam:
    """``SVI(model, guide, pyro.optim.Adam(optim_args), elbo).step`` with a single ``torch.optim.Adam``.

    The parameters are collected on the first :meth:`step` from a trace of the loss (as in Pyro's "custom
    objectives" recipe), so the model and guide must create all their parameters there (DAGDGP and
    AutoStructuredGuide do). Per-parameter arguments work as in ``pyro.optim``: ``optim_args`` may be a callable
    ``param_name -> dict``; parameters with equal arguments share a ``torch.optim.Adam`` parameter group, and
    ``lr_scale`` multiplies the learning rate of chosen parameters (e.g. a likelihood lr multiplier).

    A non-finite gradient raises :class:`~pyro_dag.infer.checks.NonFiniteLossError` naming the parameter before
    the update.

    :param model: the Pyro model. :param guide: its guide. :param elbo: an ELBO with ``differentiable_loss``.
    :param optim_args: a dict (e.g. ``{"lr": 0.01}``) or a callable ``param_name -> dict`` of
        ``torch.optim.Adam`` arguments.
    :param dict lr_scale: optional ``{id(unconstrained tensor): factor}`` multiplying those parameters' ``lr``.
    :param float spike_factor: clip a gradient whose norm (over the parameters updated) exceeds this multiple of the
        median norm of the last :data:`SPIKE_WINDOW` steps to that bound (module docstring); ``None``: never clip.

    :ivar int clipped: the number of steps whose gradient was clipped.
    :ivar hold: a set of ``id(unconstrained tensor)`` of parameters held fixed by the next steps.
    :ivar list named_params: ``(param-store name, unconstrained tensor)`` of the trained parameters, once built.
    """

    def __init__(self, model, guide, elbo, optim_args, lr_scale=None, spike_factor=None):
        if not (isinstance(optim_args, dict) or callable(optim_args)):
            raise ValueError(f"optim_args must be a dict or a callable param_name -> dict, got {optim_args!r}")
        if spike_factor is not None and not float(spike_factor) > 1:
            raise ValueError(f"spike_factor must be a number > 1 or None, got {spike_factor!r}")
        self.spike_factor = None if spike_factor is None else float(spike_factor)
        self.norms = collections.deque(maxlen=SPIKE_WINDOW)
        self.clipped = 0
        self.model, self.guide, self.elbo = model, guide, elbo
        self.optim_args = optim_args
        self.lr_scale = dict(lr_scale or {})
        self.optim = None
        self.named_params = []
        self.hold = set()
        #: optional ``loss tensor -> float`` called right after ``backward`` (e.g.
        #: :meth:`pyro_dag.infer.distributed.DataParallel.reduce_gradients`); its value is the step's loss.
        self.reduce = None

    @property
    def is_built(self):
        return self.optim is not None

    def _args_for(self, name, param):
        args = dict(self.optim_args(name) if callable(self.optim_args) else self.optim_args)
        factor = self.lr_scale.get(id(param))
        if factor is not None:
            args["lr"] = args.get("lr", 1e-3) * factor
        return args

    def build(self, named_params):
        """Create the optimiser over ``named_params`` (``(name, unconstrained tensor)``; those that do not require
        gradients are skipped), one parameter group per distinct argument dict, in first-appearance order."""
        self.named_params = [(name, p) for name, p in named_params if p.requires_grad]
        groups = {}
        for name, p in self.named_params:
            args = self._args_for(name, p)
            groups.setdefault(_group_key(args), (args, []))[1].append(p)
        if not groups:
            raise ValueError("JointAdam: the model and guide have no trainable parameter (all are fixed or none "
                             "requires gradients); there is nothing for Adam to train")
        groups = [dict(args, params=params) for args, params in groups.values()]
        if all(supports({k: v for k, v in g.items() if k != "params"}) for g in groups):
            self.optim = ForeachAdam(groups)
        else:
            self.optim = torch.optim.Adam(groups, foreach=True)

    def build_from_names(self, names):
        """Create the optimiser over the parameters of Pyro's parameter store called ``names`` (in this order), as
        :meth:`step` would have from its first trace; used to resume from a checkpoint.

        :raises ValueError: naming a parameter the store does not hold.
        """
        store = dict(pyro.get_param_store().named_parameters())
        missing = [n for n in names if n not in store]
        if missing:
            raise ValueError(f"JointAdam: the parameter store has no parameter {missing[0]!r} (of {len(missing)} "
                             "missing); build the model and guide as in the run that was saved")
        self.build([(n, store[n]) for n in names])

    def trainable(self):
        """The ``(name, tensor)`` pairs the next step would update (built parameters not in :attr:`hold`)."""
        return [(n, p) for n, p in self.named_params if id(p) not in self.hold]

    def step(self, *args, **kwargs):
        """One Adam step on the negative ELBO (the model's arguments). :returns: the loss (float) before the step."""
        if self.optim is None:
            with poutine.trace(param_only=True) as capture:
                loss = self.elbo.differentiable_loss(self.model, self.guide, *args, **kwargs)
            self.build([(name, site["value"].unconstrained()) for name, site in capture.trace.nodes.items()])
        else:
            loss = self.elbo.differentiable_loss(self.model, self.guide, *args, **kwargs)
        loss.backward()
        value = loss.item() if self.reduce is None else self.reduce(loss.detach())
        if self.hold:
            for _, p in self.named_params:
                if id(p) in self.hold:
                    p.grad = None
        check_finite_gradients(self.named_params, type(self.elbo).__name__, loss=value)
        if self.spike_factor is not None:
            self._clip_spike()
        self.optim.step()
        self.optim.zero_grad(set_to_none=True)
        return value

    def _clip_spike(self):
        grads = [p.grad for _, p in self.named_params if p.grad is not None]
        if not grads:
            return
        norm = float(torch.linalg.vector_norm(torch.stack([n.double() for n in torch._foreach_norm(grads)])))
        bound = None
        if len(self.norms) >= SPIKE_WARMUP:
            bound = self.spike_factor * statistics.median(self.norms)
        self.norms.append(norm)
        if bound is not None and norm > bound > 0:
            torch._foreach_mul_(grads, bound / norm)
            self.clipped += 1

    def state_dict(self):
        """``{"names": [...], "optim": torch state dict, "norms": [...], "clipped": int}`` (``None`` before the
        first step)."""
        if self.optim is None:
            return None
        return {"names": [n for n, _ in self.named_params], "optim": self.optim.state_dict(),
                "norms": list(self.norms), "clipped": self.clipped}

    def load_state_dict(self, state):
        """Rebuild from :meth:`state_dict` (names looked up in Pyro's parameter store) and load the moments."""
        if state is None:
            return
        self.build_from_names(state["names"])
        self.optim.load_state_dict(state["optim"])
        self.norms = collections.deque(state.get("norms", ()), maxlen=SPIKE_WINDOW)
        self.clipped = int(state.get("clipped", 0))
