"""JointAdam: the Adam step of ``pyro.infer.SVI`` with one ``torch.optim.Adam`` over every parameter.

Pyro's ``pyro.optim.Adam`` keeps one ``torch.optim.Adam`` per parameter; :class:`JointAdam` applies the same
update rule (Kingma & Ba 2015) to all parameters at once with torch's multi-tensor (``foreach``) kernels, at a
lower per-step overhead, following Pyro's "custom objectives" recipe (``elbo.differentiable_loss`` then
``backward``). It also holds chosen parameters fixed for a step (their gradients are dropped, so neither the
values nor the optimiser's moments move), which the freezing schedules and the natural-gradient steps of
:func:`~pyro_dag.infer.training.train` use. The update is :class:`~pyro_dag.infer.training.foreach_adam.ForeachAdam`
(torch's multi-tensor Adam, bit for bit, without ``torch.optim``'s per-step overhead) unless an option needs
``torch.optim.Adam``.
"""
import pyro
import pyro.poutine as poutine
import torch

from ..checks import check_finite_gradients
from .foreach_adam import ForeachAdam, supports

__all__ = ["JointAdam"]


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

    :ivar hold: a set of ``id(unconstrained tensor)`` of parameters held fixed by the next steps.
    :ivar list named_params: ``(param-store name, unconstrained tensor)`` of the trained parameters, once built.
    """

    def __init__(self, model, guide, elbo, optim_args, lr_scale=None):
        if not (isinstance(optim_args, dict) or callable(optim_args)):
            raise ValueError(f"optim_args must be a dict or a callable param_name -> dict, got {optim_args!r}")
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
        self.optim.step()
        self.optim.zero_grad(set_to_none=True)
        return value

    def state_dict(self):
        """``{"names": [...], "optim": torch state dict}`` (``None`` before the first step)."""
        if self.optim is None:
            return None
        return {"names": [n for n, _ in self.named_params], "optim": self.optim.state_dict()}

    def load_state_dict(self, state):
        """Rebuild from :meth:`state_dict` (names looked up in Pyro's parameter store) and load the moments."""
        if state is None:
            return
        self.build_from_names(state["names"])
        self.optim.load_state_dict(state["optim"])
