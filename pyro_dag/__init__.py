"""pyro_dag: deep Gaussian processes and Bayesian structure learning on DAGs, as Pyro primitives.

* :class:`pyro_dag.DAGDGP` -- the deep-GP-on-a-DAG model primitive (Perlino et al. 2026,
  arXiv:2607.09645, Sec. 2).
* :mod:`pyro_dag.kernels` -- batched base and fusion kernels (arXiv:2607.09645, Eq. (3)).
* :mod:`pyro_dag.infer` -- :class:`~pyro_dag.infer.DAGELBO` and
  :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`.
* :mod:`pyro_dag.graph`, :mod:`pyro_dag.metrics`, :mod:`pyro_dag.datasets`, :mod:`pyro_dag.diagnostics`,
  :mod:`pyro_dag.plot`, :mod:`pyro_dag.priors`.
"""
from . import diagnostics, graph, kernels, plot, priors
from .dgp import DAGDGP, DAGInputError, NodePrediction
from .diagnostics import to_inference_data
from .graph import DAGStructureError

__version__ = "0.1.0"

__all__ = ["DAGDGP", "DAGInputError", "DAGStructureError", "NodePrediction", "diagnostics", "graph", "kernels", "plot",
           "priors", "to_inference_data"]
