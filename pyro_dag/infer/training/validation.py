"""Held-out losses of a training run: :func:`validation_loss` (common random numbers across evaluations), and
:func:`structured_part`, the :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` inside a guide."""
import torch
from pyro.infer.autoguide import AutoGuideList

from ..autoguide import AutoStructuredGuide

__all__ = ["validation_loss", "structured_part"]


def validation_loss(model, guide, elbo, inputs, data, seed=0, model_kwargs=None):
    """The ELBO estimator's loss on held-out ``(inputs, data)``, drawn with the fixed ``seed`` inside a forked
    random-number state: the training stream is untouched, and every evaluation of a run uses the same draws
    (common random numbers), so that successive values differ by the change of the parameters, not by noise.

    :returns: a float.
    """
    devices = []
    args = (inputs,) if data is None else (inputs, data)
    ref = next(iter(inputs.values())) if isinstance(inputs, dict) and inputs else inputs
    if torch.is_tensor(ref) and ref.is_cuda:
        devices = [ref.device.index or 0]
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(seed)
        with torch.no_grad():
            return float(elbo.loss(model, guide, *args, **(model_kwargs or {})))


def structured_part(guide):
    """``guide`` if it is an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`, else the first one among the
    parts of an ``AutoGuideList`` (e.g. :class:`~pyro_dag.infer.autoguide.AutoEncodedStructuredGuide`), else
    ``None``."""
    if isinstance(guide, AutoStructuredGuide):
        return guide
    if isinstance(guide, AutoGuideList):
        for part in guide:
            if isinstance(part, AutoStructuredGuide):
                return part
    return None
