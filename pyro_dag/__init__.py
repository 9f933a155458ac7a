"""pyro_dag: deep Gaussian processes and Bayesian structure learning on DAGs, as Pyro primitives.

The public API is re-exported here (see ``../shared/DESIGN.md``):

* :class:`pyro_dag.DAGDGP` -- the deep-GP-on-a-DAG model primitive (digest-000 §1).
* :mod:`pyro_dag.kernels` -- batched base and fusion kernels (digest-000 §1.4).
* :mod:`pyro_dag.infer` -- :class:`~pyro_dag.infer.DAGELBO` and the structured autoguide.
* :mod:`pyro_dag.structure` -- Bayesian DAG structure learning (digest-001).
* :mod:`pyro_dag.metrics`, :mod:`pyro_dag.datasets`.
"""

__version__ = "0.1.0"
