"""Diagnostics of DAG-DGP posteriors and priors.

* :func:`to_inference_data`, :class:`MCMCStats` -- ArviZ ``InferenceData`` from MCMC runs and guides
  (posterior, posterior predictive, pointwise log-likelihood, observed data, sample stats).
* Prior-collapse diagnostics of Perlino et al. 2026 (arXiv:2607.09645, Sec. 4): antichain decomposition
  (Prop. 1), contrast covariance and separation constant, the Theorem 1 bound, root retention (Remark 2),
  the product-fusion contraction check (Prop. 4, Cor. 4), the branching survival bound (Prop. 6), Gaussian
  refresh (Eq. (9)) with the Theorem 2 route bound (Eq. (8)), and a build-time warning.
* Simulation-based calibration (Talts et al. 2018): ranks, histograms, a chi-square test of uniformity.
* Chain stacking (Yao, Vehtari & Gelman 2022): weights of chains that settle in different modes by their
  leave-one-out predictive performance, and the stacked posterior's draws.
"""
from .collapse import (PriorCollapseWarning, antichain_decomposition, branching_survival_bound,
                       branching_threshold_probability, check_prior_collapse, contrast_covariance,
                       gaussian_exceedance, gaussian_refresh, is_root_retaining, p_eps,
                       product_fusion_contraction_check, product_fusion_recursion, route_retention_factor,
                       separation_constant, theorem1_bound, theorem2_bound)
from .inference_data import MCMCStats, to_inference_data
from .sbc import sbc_ranks, sbc_uniformity_test, simulation_based_calibration
from .stacking import ChainStacking, chain_stacking, stacked_posterior, stacking_weights

__all__ = ["ChainStacking", "MCMCStats", "chain_stacking", "stacked_posterior", "stacking_weights",
           "PriorCollapseWarning", "antichain_decomposition", "check_prior_collapse",
           "contrast_covariance", "gaussian_refresh", "is_root_retaining", "p_eps",
           "product_fusion_contraction_check", "sbc_ranks", "sbc_uniformity_test", "separation_constant",
           "simulation_based_calibration", "theorem1_bound",
           "product_fusion_recursion", "to_inference_data", "branching_survival_bound",
           "branching_threshold_probability", "gaussian_exceedance", "route_retention_factor", "theorem2_bound"]
