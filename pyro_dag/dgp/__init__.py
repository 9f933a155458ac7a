"""The DAG deep GP as a Pyro model (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on
Directed Acyclic Graphs", arXiv:2607.09645, Sec. 2).

* :mod:`~pyro_dag.dgp.model` -- :class:`DAGDGP`, the generative model;
* :mod:`~pyro_dag.dgp.inputs` -- its inputs and their checks (:class:`DAGInputError`);
* :mod:`~pyro_dag.dgp.conditionals` -- inducing inputs, Gram factors, whitened conditionals;
* :mod:`~pyro_dag.dgp.collapse` -- the collapse reparameterisation for MCMC;
* :mod:`~pyro_dag.dgp.prediction` -- :data:`NodePrediction` and the prediction methods;
* :mod:`~pyro_dag.dgp.handoff` -- the protocols through which estimators and prediction code (in
  :mod:`pyro_dag.infer`) reach the model; the model imports nothing from :mod:`pyro_dag.infer`.
"""
from .inputs import DAGInputError
from .model import DAGDGP
from .prediction import NodePrediction

__all__ = ["DAGDGP", "DAGInputError", "NodePrediction"]
