"""``train(model, lamp, inputs, data, num_steps=..., recipe="lamp")``: latent-MAP fitting (Chang & Sung 2026,
"Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation") as a named recipe of
:func:`~pyro_dag.infer.train`, registered in :data:`pyro_dag.infer.training.RECIPES` when this module is imported.
"""
import dataclasses

from ...threads import limit_threads
from ..training import TrainResult, register_recipe
from .latent_map import LatentMAP

__all__ = ["LaMPRecipe", "train_lamp"]


def train_lamp(model, lamp, inputs, data=None, *, num_steps, optim_args=None, model_kwargs=None):
    """:func:`pyro_dag.infer.train` with ``recipe="lamp"``: :meth:`LatentMAP.fit` for ``num_steps`` epochs (other
    settings from ``optim_args``, a dict of :class:`LaMPSettings` fields), its history as a
    :class:`~pyro_dag.infer.TrainResult` (``losses`` per epoch, ``validation`` ``(epoch, score)``, ``best_step``)."""
    if not isinstance(lamp, LatentMAP):
        raise TypeError(f"train(recipe='lamp') takes a LatentMAP as the guide, got {type(lamp).__name__}; build it "
                        "with pyro_dag.infer.LatentMAP(model)")
    if lamp.model is not model:
        raise ValueError("train(recipe='lamp'): the LatentMAP was built on another model; pass its own model")
    if optim_args is not None and not isinstance(optim_args, dict):
        raise ValueError("train(recipe='lamp'): optim_args must be a dict of LaMPSettings fields, e.g. "
                         "{'lr': {'W': 0.05}, 'validation_fraction': 0.2}")
    kwargs = dict(model_kwargs or {})
    unknown = sorted(set(kwargs) - {"mask"})
    if unknown:
        raise ValueError(f"train(recipe='lamp'): model_kwargs {unknown} are not LaMP arguments (only 'mask')")
    history = lamp.fit(inputs, data, mask=kwargs.get("mask"), num_epochs=num_steps, **dict(optim_args or {}))
    settings = {"recipe": "lamp", **dataclasses.asdict(history.settings)}
    return TrainResult(losses=list(history.losses), validation=list(history.validation),
                       best_step=history.best_epoch, best_validation_loss=history.best_validation,
                       settings=settings, seconds=history.seconds)


#: The options of :class:`~pyro_dag.infer.training.TrainConfig` that the ``"lamp"`` recipe takes (the others are
#: the SVI recipes' own: a LaMP fit refuses them rather than ignore them).
LAMP_OPTIONS = ("num_steps", "recipe", "optim_args", "model_kwargs", "num_threads", "progress", "name", "checkpoint",
                "resume")


def svi_options_set(config):
    """The fields of ``config`` outside :data:`LAMP_OPTIONS` that differ from their defaults, in field order."""
    out = []
    for f in dataclasses.fields(config):
        if f.name in LAMP_OPTIONS:
            continue
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        value = getattr(config, f.name)
        try:
            same = value is default or bool(value == default)
        except (TypeError, RuntimeError, ValueError):   # e.g. tensors in a validation pair
            same = False
        if not same:
            out.append(f.name)
    return out


class LaMPRecipe:
    """The ``"lamp"`` recipe: :func:`train_lamp` with ``config.num_steps`` epochs, ``config.optim_args`` as
    :class:`~pyro_dag.infer.lamp.LaMPSettings` fields and ``config.model_kwargs`` (only ``mask``); the other
    options of :class:`~pyro_dag.infer.training.TrainConfig` do not apply and are refused when set (e.g.
    ``noise_step=True``: a silently ignored option would look applied), and ``checkpoint`` / ``resume`` are
    refused: a LaMP fit (row-wise Adam on the per-case values, its own validation and batch schedule) keeps no
    resumable state, and a ``checkpoint=`` that wrote nothing would lose a killed run without a word."""

    def run(self, model, guide, inputs, data, config):
        if config.checkpoint is not None or config.resume:
            save = " and save the fitted LatentMAP afterwards with lamp.save(path)" if hasattr(guide, "save") else ""
            raise ValueError("train(recipe='lamp') writes no checkpoints and cannot resume (a LaMP fit keeps no "
                             f"resumable state): drop checkpoint= and resume={save}")
        ignored = svi_options_set(config)
        if ignored:
            also = f" (also set: {ignored[1:]})" if len(ignored) > 1 else ""
            raise ValueError(f"train(recipe='lamp'): {ignored[0]}={getattr(config, ignored[0])!r} is an option of the "
                             f"SVI recipes, which a LaMP fit does not take{also}; drop it, or pass LaMP's own "
                             "settings in optim_args (a dict of LaMPSettings fields)")
        with limit_threads(config.num_threads):
            return train_lamp(model, guide, inputs, data, num_steps=config.num_steps, optim_args=config.optim_args,
                              model_kwargs=config.model_kwargs)


register_recipe("lamp", LaMPRecipe())
