"""Is this guide the guide of this model? :func:`check_model_and_guide`, run by :func:`~pyro_dag.infer.train` before
any step: a guide built for another model (or the two arguments swapped) otherwise fails steps later, inside the
model, with an error about the other model's nodes or a NaN loss."""
from functools import partial

from pyro.infer.autoguide import AutoGuide
from pyro.poutine.messenger import Messenger
from torch.nn import Module

from .groups import find_dagdgp

__all__ = ["check_model_and_guide", "guide_model"]


def _unwrap(fn):
    """The model inside Pyro's handlers (``poutine.block(model)``, ``poutine.condition(model, ...)``, ...)."""
    for _ in range(100):
        if isinstance(fn, partial) and not fn.args and isinstance(fn.func, partial):  # Pyro's _bound_partial
            fn = fn.func
        elif isinstance(fn, partial) and len(fn.args) >= 2 and isinstance(fn.args[0], Messenger):
            fn = fn.args[1]
        else:
            return fn
    return fn


def guide_model(guide):
    """The model ``guide`` was built for, out of Pyro's handlers, or ``None`` when the guide does not say (a plain
    function). :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` keeps the model it was given; Pyro's autoguides
    and :class:`~pyro_dag.infer.LatentMAP` have ``.model``."""
    user = getattr(guide, "_user_model", None)
    model = user[0] if isinstance(user, tuple) and user else getattr(guide, "model", None)
    return None if model is None else _unwrap(model)


def _structure(dgp):
    """What a guide of a DAGDGP depends on: its sites' names and shapes (the graph, the output dimensions, the latent
    inputs)."""
    return (set(dgp.graph.nodes), set(dgp.graph.edges), dict(dgp.output_dims), dict(dgp.latent_inputs))


def check_model_and_guide(model, guide, name="train"):
    """Refuse ``guide`` when it was built for another model than ``model`` (out of Pyro's handlers): a plain function,
    or a DAGDGP of another graph (a DAGDGP of the same graph and output dimensions has the same sites, and its guide
    guides ``model`` as well); and the two arguments in the wrong order.

    :raises ValueError: naming the fix.
    """
    if isinstance(model, AutoGuide) or find_dagdgp(guide) is guide:
        raise ValueError(f"{name}: the first argument (the model) is {type(model).__name__} and the second (the guide) "
                         f"{type(guide).__name__}: the model and the guide look swapped; call "
                         f"{name}(model, guide, inputs, data)")
    built_for = guide_model(guide)
    if built_for is None or built_for is model or built_for is _unwrap(model):
        return
    dgp = find_dagdgp(model)
    other = find_dagdgp(built_for) if isinstance(built_for, Module) else None
    if dgp is None or other is dgp or (other is not None and _structure(other) == _structure(dgp)):
        return
    if other is None:
        what = f"the function {getattr(built_for, '__qualname__', None) or type(built_for).__name__}"
    else:
        what = (f"another {type(other).__name__}, whose graph differs: GP nodes {other.gp_nodes} and edges "
                f"{sorted(other.graph.edges)}, against {dgp.gp_nodes} and {sorted(dgp.graph.edges)} here")
    raise ValueError(f"{name}: the guide ({type(guide).__name__}) was built for another model ({what}), not for the "
                     f"{type(model).__name__} being trained: build the guide on this model, e.g. "
                     "AutoStructuredGuide(model), or train the model the guide was built for")
