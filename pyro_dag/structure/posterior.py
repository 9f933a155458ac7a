"""The query interface every posterior over DAGs offers: :class:`DAGPosterior`."""
import abc

__all__ = ["DAGPosterior"]


class DAGPosterior(abc.ABC):
    """A posterior distribution over DAGs on ``p`` nodes (``A[i, j] = 1``: the edge ``i -> j``).

    Implemented by :class:`~pyro_dag.structure.StructurePosterior` (the variational fit of
    :func:`~pyro_dag.structure.fit`) and :class:`~pyro_dag.structure.ExactStructurePosterior` (the exact posterior of
    :func:`~pyro_dag.structure.exact_posterior`), so that code written against one runs on the other:

    * :meth:`edge_probs` ``(num_samples=1000, seed=None)`` -> ``[p, p]`` tensor, ``P[i, j] = P(i -> j | D)``;
    * :meth:`sample` ``(num_samples=1000, seed=None)`` -> ``[num_samples, p, p]`` 0/1 tensor, every sample acyclic;
    * :meth:`to_networkx` ``(threshold=0.5, num_samples=1000)`` -> the posterior-mean graph.

    ``num_samples`` is the Monte Carlo budget where the posterior needs one (exact posteriors ignore it in
    :meth:`edge_probs`); ``seed`` makes a call reproducible and independent of the global random state, ``None``
    draws from torch's global generator. Subclasses may add keyword-only options after these.

    :ivar int num_nodes: ``p``.
    :ivar list node_names: column names, or ``None`` (then the nodes are called ``"0"``, ``"1"``, ...).
    """

    num_nodes = None
    node_names = None

    @abc.abstractmethod
    def edge_probs(self, num_samples=1000, seed=None):
        """``[p, p]`` posterior edge probabilities ``P(i -> j | D)`` (a zero diagonal)."""

    @abc.abstractmethod
    def sample(self, num_samples=1000, seed=None):
        """``[num_samples, p, p]`` DAG samples (0/1 entries), every one acyclic."""

    def to_networkx(self, threshold=0.5, num_samples=1000):
        """The posterior-mean graph: a :class:`networkx.DiGraph` over the node names with the edges of
        ``P(i -> j) > threshold`` and their probability as the edge attribute ``prob`` (it may contain cycles)."""
        import networkx as nx

        P = self.edge_probs(num_samples).cpu()
        names = self.node_names or [str(i) for i in range(self.num_nodes)]
        g = nx.DiGraph()
        g.add_nodes_from(names)
        for i in range(self.num_nodes):
            for j in range(self.num_nodes):
                if i != j and P[i, j] > threshold:
                    g.add_edge(names[i], names[j], prob=float(P[i, j]))
        return g
