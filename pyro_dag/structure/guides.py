"""The guide pieces of structure learning in one namespace.

* :mod:`~pyro_dag.structure.flows` -- flow transforms over edge logits: :class:`ConditionalSplineCoupling`,
  :class:`OrderMaskAffine`, :class:`EdgeFlow`, :func:`edge_flow`;
* :mod:`~pyro_dag.structure.autoguide` -- the autoguide :class:`AutoEdgeFlowGuide` and its :class:`EdgeOffsetNet`.
"""
from .autoguide import AutoEdgeFlowGuide, EdgeOffsetNet  # noqa: F401
from .flows import ConditionalSplineCoupling, EdgeFlow, OrderMaskAffine, edge_flow  # noqa: F401
