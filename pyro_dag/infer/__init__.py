"""Inference for DAG deep GPs: :class:`DAGELBO`, the structured autoguide (:mod:`pyro_dag.infer.autoguide`) and
natural-gradient steps (:class:`GaussianNaturalGradient`, :class:`SinkNaturalGradient`), the training loop
(:func:`train`, :mod:`pyro_dag.infer.training`) and latent-MAP fitting with linked-GP prediction
(:class:`LatentMAP`, :class:`LinkedGPPredictor`, :mod:`pyro_dag.infer.lamp`), and NUTS with a traced or compiled
potential (:class:`TracedNUTS`, :class:`CompiledNUTS`) and centred inducing outputs for hidden nodes
(:class:`CentredInducing`)."""
from . import autoguide
from .checks import NonFiniteLossError
from ..dgp.handoff import current_estimator, suspended
from .context import MarginalEstimator
from .elbo import DAGELBO
from .natural_gaussian import GaussianNaturalGradient
from .natural_sink import SinkNaturalGradient
from . import distributed, training
from .training import TrainConfig, TrainResult, initial_scales, train
from . import lamp
from .lamp import LatentMAP, LinkedGPPredictor
from .mcmc import CompiledNUTS, TracedNUTS
from .marginal import marginal_pass
from .prediction import infer_latent_inputs, predict
from .one_step import predict_one_step
from .reparam import CentredInducing, CentredInducingReparam
from .deep_regression import DeepRegression

__all__ = ["CentredInducing", "CentredInducingReparam", "CompiledNUTS", "DAGELBO", "DeepRegression", "GaussianNaturalGradient", "LatentMAP", "LinkedGPPredictor", "MarginalEstimator",
           "NonFiniteLossError", "SinkNaturalGradient", "TracedNUTS", "TrainConfig", "TrainResult", "autoguide", "current_estimator",
           "distributed", "infer_latent_inputs", "initial_scales", "lamp", "marginal_pass", "predict", "predict_one_step", "suspended", "train",
           "training"]
