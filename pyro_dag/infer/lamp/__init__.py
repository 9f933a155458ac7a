"""LaMP-DGP: latent-MAP fitting and linked-GP prediction of DAG deep GPs (Chang & Sung 2026, "Efficient Deep
Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation").

* :class:`LatentMAP` -- MAP per-case values of the hidden nodes and kernel hyperparameters, exact-GP nodes, the
  output variance profiled out (Sec. 3), full batch or mini-batch with row-wise Adam and the growing batch schedule
  (Sec. 4, Algorithm 1);
* :class:`LinkedGPPredictor` -- closed-form linked-GP predictive moments and samples (Sec. 3.2), Nyström + local GP
  for large ``n`` (Sec. 4.4);
* :class:`LaMPFit` -- the fitting algorithm as an object; :class:`LaMPHistory` -- what a fit returns (a
  :class:`~pyro_dag.infer.training.TrainResult`); :class:`LaMPRecipe` -- ``train(..., recipe="lamp")``;
* :class:`FittedNode` -- one node's exact GP, what fitting hands to prediction;
* :class:`LaMPSettings`, :func:`batch_size_schedule`, :class:`RowwiseAdam`, :class:`LaMPObjective` -- the pieces.
"""
from .algorithm import LaMPFit, LaMPHistory
from .latent_map import LatentMAP
from .fitted import FittedNode
from .linked import LinkedGPPredictor
from .objective import LaMPNumericalError, LaMPObjective
from .recipe import LaMPRecipe
from .row_adam import RowwiseAdam
from .schedule import LaMPSettings, batch_size_schedule

__all__ = ["FittedNode", "LaMPFit", "LaMPHistory", "LaMPRecipe", "LaMPNumericalError", "LaMPObjective", "LaMPSettings", "LatentMAP",
           "LinkedGPPredictor", "RowwiseAdam", "batch_size_schedule"]
