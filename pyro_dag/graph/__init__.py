"""Graph algorithms of pyro_dag, in one place.

* :mod:`~pyro_dag.graph.acyclic` -- the one acyclicity check (:func:`is_acyclic`, for networkx graphs and for
  batched adjacency matrices) and :func:`find_cycle`;
* :mod:`~pyro_dag.graph.dag` -- DAG validation, roles (root / non-root), parents, topological order, ancestral
  sets, antichain decomposition;
* :mod:`~pyro_dag.graph.chordal` -- moralisation, chordal completion (MCS-M), perfect elimination orders,
  maximal cliques, elimination trees and the :class:`ChordalStructure` of a DAG-SVI posterior;
* :mod:`~pyro_dag.graph.cpdag` -- Markov equivalence classes: :func:`dag_to_cpdag` (Meek's rules) and
  :func:`cpdag_to_dags` (Dor & Tarsi's extension); :mod:`~pyro_dag.graph.interventional` -- interventional
  Markov equivalence: :func:`dag_to_icpdag`, the I-essential graph (Hauser & Bühlmann 2012).

Conventions: DAG-DGP graphs are :class:`networkx.DiGraph` objects with string nodes ("declaration order" = the
order of ``graph.nodes``); adjacency matrices use ``A[i, j] = 1`` for the edge ``i -> j``.
"""
from .acyclic import find_cycle, format_cycle, is_acyclic
from .chordal import (
    ChordalStructure,
    chordal_completion,
    chordal_structure,
    elimination_tree,
    is_perfect_elimination_order,
    maximal_cliques,
    maximum_cardinality_search,
    moral_graph,
    perfect_elimination_order,
)
from .cpdag import cpdag_to_dags, dag_to_cpdag
from .interventional import dag_to_icpdag, target_sets
from .dag import (
    DAGStructureError,
    ancestral_set,
    antichain_decomposition,
    non_roots,
    parents,
    roots,
    topological_order,
    validate_dag,
)

__all__ = [
    "DAGStructureError",
    "validate_dag",
    "roots",
    "non_roots",
    "parents",
    "topological_order",
    "ancestral_set",
    "moral_graph",
    "chordal_completion",
    "maximum_cardinality_search",
    "perfect_elimination_order",
    "is_perfect_elimination_order",
    "maximal_cliques",
    "antichain_decomposition",
    "ChordalStructure",
    "chordal_structure",
    "elimination_tree",
    "is_acyclic",
    "find_cycle",
    "format_cycle",
    "dag_to_cpdag",
    "dag_to_icpdag",
    "target_sets",
    "cpdag_to_dags",
]
