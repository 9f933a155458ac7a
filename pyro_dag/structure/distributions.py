"""All distributions of structure learning in one namespace (as :mod:`pyro.distributions` collects its families).

Each lives in its own module:

* :mod:`~pyro_dag.structure.priors` -- :class:`LogisticBeta`, :func:`edge_belief_prior`, :func:`sparsity_prior`,
  :func:`edge_prior_parameters`;
* :mod:`~pyro_dag.structure.sinkhorn` -- :func:`hard_order_mask`, :func:`log_sinkhorn`, :func:`soft_order_mask`,
  :func:`soft_order_mask_jacobian`;
* :mod:`~pyro_dag.structure.ordered_dag` -- :class:`OrderedDAG`, :class:`RelaxedOrderedDAG`;
* :mod:`~pyro_dag.structure.constraints` -- the :data:`dag` constraint (acyclicity: :func:`pyro_dag.graph.is_acyclic`);
* :mod:`~pyro_dag.structure.adjacency` -- :func:`offdiag`, :func:`fill_offdiag`.
"""
from pyro_dag.graph import is_acyclic  # noqa: F401

from .adjacency import fill_offdiag, offdiag  # noqa: F401
from .constraints import dag  # noqa: F401
from .ordered_dag import OrderedDAG, RelaxedOrderedDAG  # noqa: F401
from .priors import LogisticBeta, edge_belief_prior, edge_prior_parameters, sparsity_prior  # noqa: F401
from .sinkhorn import hard_order_mask, log_sinkhorn, soft_order_mask, soft_order_mask_jacobian  # noqa: F401
