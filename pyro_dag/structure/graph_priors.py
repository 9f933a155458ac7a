"""Graph priors of the exact posterior and the candidate tables, over each node's parent set.

``"edge"`` is the library's edge prior (:mod:`~pyro_dag.structure.priors`: given the order, each allowed edge is
present independently); ``"fair"`` is the prior of Eggeling et al. 2019, ``p(G_i) ∝ 1 / C(p - 1, |G_i|)`` (every
parent-set size equally likely), the prior of Wang, Wicker & Kwiatkowska 2022 (*Tractable Uncertainty for Structure
Learning*, ICML, App. F): :func:`fair_prior_log`.
"""
import math

import numpy as np

__all__ = ["GRAPH_PRIORS", "fair_prior_log"]

GRAPH_PRIORS = ("edge", "fair")


def fair_prior_log(p, sizes):
    """``log p(G_i)`` of the fair prior (Eggeling et al. 2019): ``-log(p · C(p - 1, |G_i|))``, normalised over
    the ``2^{p-1}`` parent sets of a node (every size equally likely). ``sizes``: array of ``|G_i|``."""
    sizes = np.asarray(sizes)
    lc = np.array([math.lgamma(p) - math.lgamma(k + 1) - math.lgamma(p - k) for k in range(p)])
    return -math.log(p) - lc[np.clip(sizes, 0, p - 1)]
