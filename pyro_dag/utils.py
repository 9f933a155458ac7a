"""Small utilities shared across pyro_dag."""
import torch
# imported by torch itself already; at module level because is_tracing sits on hot paths (kernels, checks)
from torch.fx.experimental.proxy_tensor import get_proxy_mode

__all__ = ["freeze", "is_fx_tracing", "is_tracing"]


def is_tracing():
    """True while the model is being recorded for replay: by :func:`torch.jit.trace` (Pyro's
    ``NUTS(jit_compile=True)``, :class:`pyro_dag.infer.TracedNUTS`) or by
    :func:`torch.fx.experimental.proxy_tensor.make_fx` (:class:`pyro_dag.infer.CompiledNUTS`).

    A recorded graph replays its tensor operations with new values and drops Python control flow, so value checks
    that raise (NaN in the inputs, a failed Cholesky rung) would be frozen at their first outcome, and the
    ``bool()`` they need cannot be recorded at all under ``make_fx``. The model skips them while this is True; the
    samplers that record run the model once eagerly first (Pyro's ``initialize_model``), where every check runs.
    """
    return torch.jit.is_tracing() or is_fx_tracing()


def is_fx_tracing():
    """True while :func:`torch.fx.experimental.proxy_tensor.make_fx` records (see :func:`is_tracing`)."""
    return get_proxy_mode() is not None


def freeze(module, names=None):
    """Turn learnable :class:`~pyro.nn.PyroParam` hyperparameters of ``module`` (recursively) into fixed buffers.

    Used to hold kernel hyperparameters, likelihood noise or inducing inputs fixed, as in the collider protocol
    of the DAG-DGP paper (Perlino et al. 2026, arXiv:2607.09645, App. G.3). A fixed value follows ``.to()`` /
    ``.double()`` like any buffer.

    :param torch.nn.Module module: e.g. ``model.kernels`` or ``model.likelihoods["w3"]``.
    :param names: optional collection of parameter names (e.g. ``{"lengthscale"}``); default all.
    :returns: the list of frozen ``"path.name"`` strings.
    """
    frozen = []
    for path, sub in module.named_modules():
        params = list(sub.__dict__.get("_pyro_params", {}))
        for name in params:
            if names is not None and name not in names:
                continue
            with torch.no_grad():
                value = getattr(sub, name).detach().clone()
            delattr(sub, name)
            sub.register_buffer(name, value)
            frozen.append(f"{path}.{name}" if path else name)
    return frozen


def broadcast_shapes(*shapes):
    """``torch.broadcast_shapes`` with a fast path for equal shapes (the common case inside the samplers, where
    the torch function's Python implementation costs tens of microseconds per call)."""
    first = shapes[0]
    if all(s == first for s in shapes[1:]):
        return torch.Size(first)
    # plain broadcasting of integer tuples (torch's Python reference costs ~0.3 ms per call on the collider)
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, d in enumerate(s, ndim - len(s)):
            if d != 1:
                if out[i] != 1 and out[i] != d:
                    return torch.broadcast_shapes(*shapes)  # raises torch's error naming the shapes
                out[i] = d
    return torch.Size(out)
