"""Published Bayesian-network structures and linear-Gaussian data on them: ASIA, CHILD and ALARM.

The graphs are the structures of three discrete Bayesian networks of the bnlearn repository
(https://www.bnlearn.com/bnrepository/; Scutari 2010, *Learning Bayesian networks with the bnlearn R package*,
J. Stat. Softw. 35(3)), with bnlearn's node names; only the DAG is used here, not the conditional probability
tables:

* ``"asia"`` (8 nodes, 8 arcs): Lauritzen & Spiegelhalter 1988, *Local computations with probabilities on graphical
  structures and their application to expert systems*, JRSS B 50(2);
* ``"child"`` (20 nodes, 25 arcs): Spiegelhalter & Cowell 1992, *Learning in probabilistic expert systems*,
  Bayesian Statistics 4;
* ``"alarm"`` (37 nodes, 46 arcs): Beinlich, Suermondt, Chavez & Cooper 1989, *The ALARM monitoring system*,
  Proc. 2nd European Conference on Artificial Intelligence in Medicine.

Each is written as bnlearn's model string (``[child|parent1:parent2]``) and parsed by :func:`network`. As in the
structure-learning literature that uses these graphs with continuous data (e.g. Kuipers, Suter & Moffa 2022,
*Efficient sampling and structure learning of Bayesian networks*, JCGS), :func:`linear_gaussian_data` draws a
linear-Gaussian SEM on the graph: weights with ``|w|`` uniform in ``[0.5, 2]`` and a random sign, ``N(0, 1)``
noise, then standardised columns. Down long chains such weights make some children nearly deterministic given
their parents (an ``R²`` close to 1), the case that separates the noise priors of the linear score.
"""
import re

import numpy as np

__all__ = ["NETWORKS", "linear_gaussian_data", "network"]

#: bnlearn model strings of the networks (node order: as listed).
NETWORKS = {
    "asia": "[asia][tub|asia][smoke][lung|smoke][bronc|smoke][either|tub:lung][xray|either][dysp|bronc:either]",
    "child": (
        "[BirthAsphyxia][Disease|BirthAsphyxia][Age|Disease:Sick][LVH|Disease][DuctFlow|Disease]"
        "[CardiacMixing|Disease][LungParench|Disease][LungFlow|Disease][Sick|Disease]"
        "[HypDistrib|DuctFlow:CardiacMixing][HypoxiaInO2|CardiacMixing:LungParench][CO2|LungParench]"
        "[ChestXray|LungParench:LungFlow][Grunting|LungParench:Sick][LVHreport|LVH]"
        "[LowerBodyO2|HypDistrib:HypoxiaInO2][RUQO2|HypoxiaInO2][CO2Report|CO2][XrayReport|ChestXray]"
        "[GruntingReport|Grunting]"
    ),
    "alarm": (
        "[HIST|LVF][CVP|LVV][PCWP|LVV][HYP][LVV|HYP:LVF][LVF][STKV|HYP:LVF][ERLO][HRBP|ERLO:HR][HREK|ERCA:HR][ERCA]"
        "[HRSA|ERCA:HR][ANES][APL][TPR|APL][ECO2|ACO2:VLNG][KINK][MINV|INT:VLNG][FIO2][PVS|FIO2:VALV]"
        "[SAO2|PVS:SHNT][PAP|PMB][PMB][SHNT|INT:PMB][INT][PRSS|INT:KINK:VTUB][DISC][MVS][VMCH|MVS]"
        "[VTUB|DISC:VMCH][VLNG|INT:KINK:VTUB][VALV|INT:VLNG][ACO2|VALV][CCHL|ACO2:ANES:SAO2:TPR][HR|CCHL]"
        "[CO|HR:STKV][BP|CO:TPR]"
    ),
}
_SIZES = {"asia": (8, 8), "child": (20, 25), "alarm": (37, 46)}


def _parse(model):
    nodes, parents = [], {}
    for child, pa in re.findall(r"\[([^|\]]+)(?:\|([^\]]*))?\]", model):
        nodes.append(child)
        parents[child] = [p for p in (pa or "").split(":") if p]
    return nodes, parents


def network(name):
    """The DAG of a published network.

    :param str name: ``"asia"``, ``"child"`` or ``"alarm"`` (case-insensitive).
    :returns: ``(A, names)``: ``A`` ``[p, p]`` int64 numpy adjacency (``A[i, j] = 1``: ``i -> j``) and the ``p`` node
        names (bnlearn's).
    """
    key = str(name).lower()
    if key not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; known: {sorted(NETWORKS)}")
    nodes, parents = _parse(NETWORKS[key])
    index = {v: k for k, v in enumerate(nodes)}
    A = np.zeros((len(nodes), len(nodes)), dtype=np.int64)
    for child, pa in parents.items():
        for v in pa:
            A[index[v], index[child]] = 1
    assert (len(nodes), int(A.sum())) == _SIZES[key], key
    return A, nodes


def _topological_order(A):
    A = np.asarray(A)
    indeg = A.sum(0).astype(int)
    order, ready = [], [k for k in range(A.shape[0]) if indeg[k] == 0]
    while ready:
        k = ready.pop(0)
        order.append(k)
        for j in np.nonzero(A[k])[0]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(int(j))
    if len(order) != A.shape[0]:
        raise ValueError("the adjacency matrix has a directed cycle")
    return order


def linear_gaussian_data(adjacency, num_samples, seed=0, weight_range=(0.5, 2.0), noise_scale=1.0,
                         standardize=True):
    """Data from a linear-Gaussian SEM on a DAG: ``x_j = Σ_i W_ij x_i + ε_j``, ``ε_j ~ N(0, noise_scale²)``,
    ``|W_ij|`` uniform in ``weight_range`` with a random sign on the edges of ``adjacency``.

    :param adjacency: ``[p, p]`` 0/1 DAG (``A[i, j] = 1``: ``i -> j``), e.g. ``network("alarm")[0]``.
    :param int num_samples: ``N``.
    :param int seed: seeds one ``numpy`` generator, which draws the weights first and then the data (the same seed
        gives the same weights whatever ``N``).
    :param bool standardize: centre and scale every column to unit variance.
    :returns: ``(X, W)``: ``X`` ``[N, p]`` float64 data, ``W`` ``[p, p]`` float64 weights (zero off the edges).
    """
    A = np.asarray(adjacency)
    p = A.shape[0]
    rng = np.random.default_rng(seed)
    lo, hi = weight_range
    W = A * rng.uniform(lo, hi, size=(p, p)) * rng.choice([-1.0, 1.0], size=(p, p))
    noise = noise_scale * rng.standard_normal((num_samples, p))
    X = np.zeros((num_samples, p))
    for j in _topological_order(A):
        X[:, j] = X @ W[:, j] + noise[:, j]
    if standardize:
        X = (X - X.mean(0)) / X.std(0)
    return X, W
