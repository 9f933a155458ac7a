"""Multi-fidelity graphical emulation with DAG-DGPs (Perlino et al. 2026, arXiv:2607.09645, Sec. 7 and Sec. 8.1).

* :func:`multifidelity_data` / :class:`MultiFidelityData` -- the graph and NaN-padded data from per-fidelity arrays;
* :class:`MultiFidelityEmulator` -- data-driven kernels, node-wise pretraining, ``predmean`` / ``free`` inducing
  inputs, DAG-VI / DAG-SVI training and prediction at every fidelity;
* :func:`shapley` -- exact Shapley shares of a node's prediction over its lower-fidelity parents (Fig. 7).
"""
from .attribution import ShapleyResult, shapley, shapley_values
from .data import MultiFidelityData, multifidelity_data
from .emulator import INDUCING_INITS, FidelityPrediction, MultiFidelityEmulator, initial_lengthscale

__all__ = ["multifidelity_data", "MultiFidelityData", "MultiFidelityEmulator", "FidelityPrediction",
           "initial_lengthscale", "INDUCING_INITS", "shapley", "shapley_values", "ShapleyResult"]
