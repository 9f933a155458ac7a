"""``train``: the recommended way to fit a DAGDGP, as plain Pyro pieces (in the spirit of
``pyro.contrib.gp.util.train``): a :class:`~pyro_dag.infer.training.TrainConfig` and a named recipe
(:mod:`~pyro_dag.infer.training.recipes`)."""
import dataclasses

from .config import SVI_RECIPES, TrainConfig
from .pairing import check_model_and_guide
from .recipes import RECIPES

__all__ = ["train"]


def train(model, guide, inputs, data=None, *, config=None, **options):
    r"""Fit ``guide`` (and the model's learnable parameters) to ``(inputs, data)`` by stochastic variational
    inference; the library's recommended recipe by default.

    Plain Pyro underneath: each step is ``elbo.differentiable_loss(model, guide, inputs, data)`` and an Adam
    update (:class:`~pyro_dag.infer.training.JointAdam`, Pyro's "custom objectives" recipe), or a
    :class:`~pyro_dag.infer.GaussianNaturalGradient` step; every piece is usable on its own
    (:func:`~pyro_dag.infer.training.pretrain_nodes`, :func:`~pyro_dag.infer.training.lr_multiplier_args`,
    :func:`~pyro_dag.infer.training.initial_scales`, :func:`~pyro_dag.infer.training.save_checkpoint`).

    **Recipes.** ``"adam"``: Adam on every parameter for all steps with the DAGELBO estimator (Perlino,
    Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645, Algorithm 4), plain Monte Carlo samples: the paper's
    protocol. ``"recommended"`` (beyond the paper): antithetic sample pairs, and for structured (chordal / full)
    guides, after ``natural_gradient_after`` Adam steps, damped natural-gradient steps of size
    ``natural_gradient`` (default 0.01) on the whole Gaussian inducing posterior (Salimbeni, Eleftheriadis &
    Hensman 2018), with Adam on every other learnable parameter (kernel hyperparameters, noise, inducing inputs,
    other guide parameters) evaluated after the natural-gradient step; mean-field guides keep Adam. Every option
    below overrides the recipe's default.

    **Schedule** of one call: node-wise pretraining (``pretrain_steps``), then ``num_steps`` joint steps, of which
    the first ``warm_start`` train a mean-field guide that then initialises ``guide``
    (:meth:`~pyro_dag.infer.autoguide.AutoStructuredGuide.warm_start`); the parameter groups in ``freeze`` are
    held fixed (bitwise) during the first ``floor(freeze_fraction · num_steps)`` joint steps, as the paper's Sachs
    protocol holds the inducing inputs and noise for 40 % of them (Sec. 6, App. G.4).

    :param model: a :class:`~pyro_dag.DAGDGP` (or a Pyro model; freezing, pretraining, lr multipliers and the
        natural-gradient steps need a DAGDGP, as the model or a submodule of it).
    :param guide: an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` or an ``AutoGuideList`` holding one
        (e.g. :class:`~pyro_dag.infer.autoguide.AutoEncodedStructuredGuide`; DAGELBO is then the default
        estimator; the natural-gradient, sink and warm-start steps need the AutoStructuredGuide itself), or any
        Pyro guide (default estimator ``Trace_ELBO``).
    :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d_w]}``, NaN = missing.
    :param config: a :class:`~pyro_dag.infer.training.TrainConfig` (default: built from ``options``).
    :param options: the options of :class:`~pyro_dag.infer.training.TrainConfig` as keywords (``num_steps`` is
        required unless ``config`` is given); with ``config``, they override its fields.
    :returns: a :class:`~pyro_dag.infer.training.TrainResult` (``.losses`` is the loss history).
    :raises ValueError: for a bad argument, naming it, before any training (also a guide built for another model,
        or the model and the guide swapped: :func:`~pyro_dag.infer.training.pairing.check_model_and_guide`).
    :raises NonFiniteLossError: naming the step, if a loss or a gradient is not finite.

    Example::

        model = DAGDGP(g, kernels={"w3": kernels.SumInput(kernels.RBF())}, num_inducing=16).double()
        guide = AutoStructuredGuide(model, init_scale=initial_scales(model, inputs, data))
        result = train(model, guide, inputs, data, num_steps=3000)
        posterior = model.predict(guide, inputs_test, num_samples=500)
    """
    check_model_and_guide(model, guide)
    config = TrainConfig(**options) if config is None else dataclasses.replace(config, **options)
    recipe = RECIPES.get(config.recipe)
    if recipe is None:
        others = sorted(set(RECIPES) - set(SVI_RECIPES))
        raise ValueError(f"train: recipe must be one of {SVI_RECIPES}" + (f" or {others}" if others else "") +
                         f", got {config.recipe!r}")
    return recipe.run(model, guide, inputs, data, config)
