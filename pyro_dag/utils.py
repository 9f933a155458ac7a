"""Small utilities shared across pyro_dag."""
import warnings

import torch
# imported by torch itself already; at module level because is_tracing sits on hot paths (kernels, checks)
from torch.fx.experimental.proxy_tensor import get_proxy_mode

__all__ = ["batched_hyperparameter", "freeze", "hyperparameter_shape", "is_fx_tracing", "is_tracing", "renamed_argument"]


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


def hyperparameter_shape(module, name):
    """The shape of one draw of the :class:`~pyro.nn.PyroSample` hyperparameter ``name`` of ``module``, i.e. its
    prior's ``batch_shape + event_shape`` (``None`` when ``name`` is not a ``PyroSample``: a ``PyroParam`` or buffer,
    which is never batched).

    :returns: ``torch.Size`` or ``None``.
    """
    samples = module.__dict__.get("_pyro_samples")
    if not samples or name not in samples:
        return None
    prior = samples[name]
    shape = getattr(prior, "shape", None)  # pyro_dag.priors._LogNormalPrior knows its shape without building it
    if isinstance(shape, tuple) and not torch.is_tensor(prior):  # (a Distribution's .shape is a method)
        return torch.Size(shape)
    if not hasattr(prior, "sample"):  # a callable of the module, as PyroSample allows
        prior = prior(module)
    if torch.is_tensor(prior):
        return prior.shape
    return torch.Size(prior.batch_shape + prior.event_shape)


def batched_hyperparameter(module, name, event_dims):
    """The value of the hyperparameter ``name`` of ``module``, shaped to broadcast against tensors whose batch dims
    are those of a vectorised particle / predictive plate.

    A :class:`~pyro.nn.PyroSample` hyperparameter (``DAGDGP(..., priors=...)``) read under a vectorised plate
    (``Trace_ELBO(vectorize_particles=True)``, ``Predictive(parallel=True)``) has the value shape
    ``raw_batch + param_shape``, with ``raw_batch`` aligned to the plate dims (dim -1 is the model's ``"data"``
    plate, of size 1 since hyperparameters sit outside it, or absent, as in ``Predictive``'s reshaped
    ``posterior_samples``). As for the inducing outputs ``"{w}.u"`` (whose size-1 data-plate dim
    :class:`~pyro_dag.DAGDGP` drops), the size-1 last dim of ``raw_batch`` is dropped, giving the particle batch
    shape ``batch`` of the node values ``[*batch, B, d]`` and kernel matrices ``[*batch, N, M]``. The result has
    the shape ``batch + (1,) * (event_dims - len(param_shape)) + param_shape``, so it broadcasts against
    ``batch + (event_dims trailing dims)``; an unbatched value (a ``PyroParam``, a buffer, or a ``PyroSample``
    drawn outside any vectorised plate, as under NUTS) is returned unchanged.

    :param torch.nn.Module module: a kernel or likelihood. :param str name: e.g. ``"lengthscale"``.
    :param int event_dims: the number of trailing (non-batch) dims of the tensors the value acts on, e.g. 2 for
        inputs ``[..., N, D]`` and Gram matrices ``[..., N, M]``, 1 for a diagonal ``[..., N]``.
    :returns: the value, ``[*batch, *ones, *param_shape]``.
    :raises ValueError: if the value's trailing dims are not the prior's shape.
    """
    value = getattr(module, name)
    shape = hyperparameter_shape(module, name)
    if shape is None or not torch.is_tensor(value) or value.dim() == len(shape):
        return value
    nb = value.dim() - len(shape)
    if nb < 0 or value.shape[nb:] != shape:
        raise ValueError(f"hyperparameter {name!r} of {type(module).__name__} has a value of shape "
                         f"{tuple(value.shape)}, which does not end in the shape {tuple(shape)} of its prior; batch "
                         "dims of hyperparameter draws go in front")
    batch = value.shape[:nb]
    if batch[-1] == 1:
        batch = batch[:-1]
    return value.reshape(batch + (1,) * max(0, event_dims - len(shape)) + shape)


def renamed_argument(where, old, new, old_value, new_value, default):
    """The value of an argument renamed from ``old`` to ``new``: ``new_value``, or ``old_value`` (with a
    :class:`FutureWarning` naming the new name) when only the old name was given.

    :param str where: the callable, for the messages. :param default: ``new``'s default (to tell whether it was
        given).
    :raises TypeError: if both names were given different values.
    """
    if old_value is None:
        return new_value
    if new_value != default and new_value != old_value:
        raise TypeError(f"{where}: {old}= is the old name of {new}=; pass only {new}=")
    warnings.warn(f"{where}: {old}= is renamed {new}= (the old name will be removed); pass {new}={old_value!r}",
                  FutureWarning, stacklevel=3)
    return old_value
