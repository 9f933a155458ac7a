"""Latent-variable structural equation models with measurement nodes (GPSEM-LV).

Silva & Gramacy (2010), "Gaussian Process Structural Equation Models with Latent Variables", UAI,
arXiv:1002.4802:

* :class:`LatentSEM` -- the model (GP, linear or quadratic structural equations over latents; linear-Gaussian
  indicators; one anchor per latent), a Pyro model for SVI and NUTS (:mod:`pyro_dag.sem.model`);
* :func:`check_sem_declaration` -- the build-time identifiability check (:mod:`pyro_dag.sem.identifiability`);
* :class:`SpaceFillingPrior` -- the determinantal prior on pseudo-inputs (:mod:`pyro_dag.sem.pseudo_inputs`);
* :func:`sem_guide`, :class:`AutoCaseGaussian` -- the recommended SVI guide (:mod:`pyro_dag.sem.guides`);
* :func:`sem_inference_data` -- ArviZ ``InferenceData`` from NUTS runs, guides or draws
  (:mod:`pyro_dag.sem.inference_data`);
* :func:`latent_samples`, :func:`latent_means`, :func:`predictive_log_likelihood` -- posterior latent values
  and the test predictive log-likelihood of held-out cases (:mod:`pyro_dag.sem.predict`).
"""
from .data import IndicatorScaler, indicator_array
from .identifiability import (IdentifiabilityWarning, MeasurementSpec, SEMSpecError, check_sem_declaration,
                              identifiability_report)
from .model import LatentSEM, SEMPriors, quadratic_features
from .guides import AutoCaseGaussian, sem_guide
from .inference_data import sem_inference_data
from .predict import global_sites, guide_samples, latent_means, latent_samples, predictive_log_likelihood
from .pseudo_inputs import SpaceFillingPrior, gaussian_pseudo_input_prior

__all__ = ["LatentSEM", "SEMPriors", "SEMSpecError", "IdentifiabilityWarning", "MeasurementSpec",
           "check_sem_declaration", "identifiability_report", "SpaceFillingPrior", "gaussian_pseudo_input_prior",
           "IndicatorScaler", "indicator_array", "quadratic_features", "sem_guide", "AutoCaseGaussian", "sem_inference_data", "global_sites", "guide_samples",
           "latent_samples", "latent_means", "predictive_log_likelihood"]
