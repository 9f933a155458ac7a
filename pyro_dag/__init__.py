"""pyro_dag: deep Gaussian processes and Bayesian structure learning on DAGs, as Pyro primitives.

* :class:`pyro_dag.DAGDGP` -- the deep-GP-on-a-DAG model primitive (Perlino et al. 2026,
  arXiv:2607.09645, Sec. 2).
* :mod:`pyro_dag.kernels` -- batched base and fusion kernels (arXiv:2607.09645, Eq. (3)).
* :mod:`pyro_dag.infer` -- :class:`~pyro_dag.infer.DAGELBO` and
  :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`.
* :mod:`pyro_dag.graph`, :mod:`pyro_dag.metrics`, :mod:`pyro_dag.datasets`, :mod:`pyro_dag.diagnostics`,
  :mod:`pyro_dag.plot`, :mod:`pyro_dag.priors`.

The sub-packages and names are loaded on first use (PEP 562), so ``import pyro_dag`` does not import torch or Pyro.
"""
import importlib

__version__ = "0.1.0"

#: Public names of the top-level package and the sub-module each comes from.
_NAMES = {"DAGDGP": "dgp", "DAGInputError": "dgp", "NodePrediction": "dgp", "DAGStructureError": "graph",
          "NotFittedError": "errors", "to_inference_data": "diagnostics"}
#: Sub-packages reachable as attributes (``pyro_dag.kernels``), loaded on first access.
_SUBMODULES = ("cli", "datasets", "dgp", "diagnostics", "emulation", "errors", "experiments", "gp", "graph", "infer",
               "kernels", "metrics", "ops", "param_store", "persist", "plot", "priors", "sem", "structure", "threads",
               "utils")

__all__ = ["DAGDGP", "DAGInputError", "DAGStructureError", "NodePrediction", "NotFittedError", "diagnostics", "graph",
           "kernels", "plot", "priors", "to_inference_data"]


def __getattr__(name):
    if name in _NAMES:
        # DAGDGP.predict loads its implementation (pyro_dag.infer.prediction) at the first call
        value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f".{name}", __name__)
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_NAMES) | set(_SUBMODULES))
