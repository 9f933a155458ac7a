"""The :data:`dag` constraint: binary ``[..., p, p]`` adjacency matrices without a directed cycle."""
from pyro.distributions import constraints

from pyro_dag.graph import is_acyclic

__all__ = ["dag"]


class _DAG(constraints.Constraint):
    """Binary ``[..., p, p]`` matrices (``A[i, j] = 1``: ``i -> j``) without directed cycles."""

    event_dim = 2
    is_discrete = True

    def check(self, value):
        binary = ((value == 0) | (value == 1)).all(-1).all(-1)
        return binary & is_acyclic(value)

    def __repr__(self):
        return "dag"


dag = _DAG()
