"""Parameter groups of a DAGDGP for freezing schedules and per-group learning rates.

The DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645) holds the inducing inputs and
the likelihood noise fixed for the first 40 % of the joint training steps on the Sachs data (Sec. 6, App. G.4) and
trains the likelihood with a tenth of the learning rate on the heavy-ion data (Sec. 7, App. G.5). Both act on
groups of the model's parameters, found here by identity with the model's modules (so they work whatever the
parameter-store names are).
"""
import pyro
import torch
from pyro.nn import PyroModule

from ...dgp import DAGDGP

__all__ = ["GROUPS", "find_dagdgp", "group_tensors", "group_param_names", "lr_multiplier_args"]

#: Parameter groups of a :class:`~pyro_dag.DAGDGP`: ``"inducing"`` (the inducing inputs ``Z_w``), ``"likelihood"``
#: (noise variances and other likelihood parameters) and ``"kernel"`` (kernel hyperparameters).
GROUPS = ("inducing", "likelihood", "kernel")

_MODULES = {"inducing": "inducing", "likelihood": "likelihoods", "kernel": "kernels"}


def find_dagdgp(model):
    """The :class:`~pyro_dag.DAGDGP` a model is or contains (as a submodule), or ``None``.

    :raises ValueError: if ``model`` holds more than one.
    """
    if isinstance(model, DAGDGP):
        return model
    if isinstance(model, torch.nn.Module):
        found = [m for m in model.modules() if isinstance(m, DAGDGP)]
        if len(found) > 1:
            raise ValueError(f"the model holds {len(found)} DAGDGP modules; parameter groups are defined for one")
        return found[0] if found else None
    return None


def _check_groups(groups, what="groups"):
    groups = (groups,) if isinstance(groups, str) else tuple(groups)
    for g in groups:
        if g not in GROUPS:
            raise ValueError(f"{what}: unknown parameter group {g!r}; choose from {GROUPS}")
    return groups


def _sync_with_param_store(module):
    """Register every :class:`~pyro.nn.PyroParam` of ``module`` in Pyro's parameter store, as its first use in a
    model run would (a name the store already holds replaces the module's tensor with the store's), so that the
    module's tensors are the ones training will update. Draws no random numbers."""
    for m in module.modules():
        if isinstance(m, PyroModule) and m.__dict__.get("_pyro_params"):
            with m._pyro_context:
                for name in list(m.__dict__["_pyro_params"]):
                    getattr(m, name)


def group_tensors(dgp, groups):
    """The unconstrained tensors (``nn.Parameter``) of ``dgp`` in ``groups``, as a dict ``{id: tensor}``.

    The parameters are registered in Pyro's parameter store first (as the model's first run would), so these are
    the tensors that training updates. The inducing inputs exist once the model is set up
    (:meth:`~pyro_dag.DAGDGP.setup`).

    :param dgp: a :class:`~pyro_dag.DAGDGP`. :param groups: names from :data:`GROUPS` (or one name).
    """
    out = {}
    for g in _check_groups(groups):
        module = getattr(dgp, _MODULES[g])
        _sync_with_param_store(module)
        for p in module.parameters():
            out[id(p)] = p
    return out


def group_param_names(dgp, groups):
    """Names in Pyro's parameter store of the parameters of ``dgp`` in ``groups`` (those registered so far: a
    module's parameters enter the store when the model first runs)."""
    ids = group_tensors(dgp, groups)
    return {name for name, p in pyro.get_param_store().named_parameters() if id(p) in ids}


def lr_multiplier_args(dgp, args, likelihood=1.0, kernel=1.0, inducing=1.0):
    """A ``pyro.optim`` per-parameter argument callable (``param_name -> dict``): ``args`` for every parameter,
    with ``lr`` multiplied by ``likelihood`` / ``kernel`` / ``inducing`` for the parameters of those groups of
    ``dgp``. Works with Pyro's optimisers (``pyro.optim.Adam(lr_multiplier_args(model, {"lr": 0.01},
    likelihood=0.1))``), which call it on each parameter's first step, once the model has run.

    :param dgp: a :class:`~pyro_dag.DAGDGP`. :param dict args: e.g. ``{"lr": 0.01}``.
    """
    factors = {"likelihood": likelihood, "kernel": kernel, "inducing": inducing}

    def per_param(param_name):
        store = pyro.get_param_store()
        p = dict(store.named_parameters()).get(param_name)
        for g, f in factors.items():
            if f != 1.0 and p is not None and id(p) in group_tensors(dgp, g):
                return dict(args, lr=args.get("lr", 1e-3) * f)
        return dict(args)

    return per_param


def same_shapes(saved, now):
    """Whether two state dicts hold the same names with the same shapes."""
    return saved.keys() == now.keys() and all(tuple(saved[k].shape) == tuple(now[k].shape) for k in saved)


def all_fixed(dgp):
    """Whether every kernel hyperparameter and inducing input of ``dgp`` is fixed (no gradient, no prior)."""
    for w in dgp.topo_nodes:
        kernel = dgp.kernels[w]
        if any(p.requires_grad for p in kernel.parameters()):
            return False
        if any(getattr(m, "_pyro_samples", None) for m in kernel.modules()):
            return False
        if dgp.inducing_inputs(w).requires_grad:
            return False
    return True
