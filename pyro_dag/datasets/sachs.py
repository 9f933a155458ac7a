"""The Sachs et al. (2005) protein-signalling data set, shipped with the package.

As used by SVI-DAG (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to Bayesian Causal
Discovery*, arXiv:2608.04930, §4.4, Tables 1-3) and by the DAG-DGP paper (Perlino et al. 2026, *Deep Gaussian
Processes on Directed Acyclic Graphs*, arXiv:2607.09645, Sec. 6, App. G.4).

**Data.** Flow-cytometry measurements of 11 phosphorylated proteins and phospholipids in human T cells:
K. Sachs, O. Perez, D. Pe'er, D. A. Lauffenburger, G. P. Nolan, "Causal protein-signaling networks derived from
multiparameter single-cell data", *Science* 308(5721):523-529, 2005. The pooled 7466 x 11 file and cdt's
consensus graph are copied byte for byte from the ``cdt`` 0.6.0 wheel on PyPI (Causal Discovery Toolbox, MIT
License, Copyright (c) 2018 Diviyan Kalainathan); the publication attaches no licence to the measurements, which
are redistributed for research by cdt and bnlearn. Cite Sachs et al. (2005). Provenance, checksums and cdt's
licence text: ``pyro_dag/datasets/data/SACHS_SOURCE.md``.

**Subsets.** The pooled file concatenates nine stimulation/intervention conditions, treated as observational
data by SVI-DAG (arXiv:2608.04930, §4.4; the fold protocol is the authors' code's):

* ``"full"``: all 7466 rows (SVI-DAG's Sachs benchmark);
* ``"cd3cd28"``: rows 0-852 (853 rows), the purely observational general stimulation;
* ``"cd3cd28icam2"``: rows 853-1754 (0-based data rows, 902 rows), the condition "2. CD3, CD28, ICAM-2" used by
  the DAG-DGP paper (arXiv:2607.09645, Sec. 6, App. G.4), which log-transforms it.

**Graphs** (``A[i, j] = 1`` means ``i -> j``):

* ``"consensus"`` (default, 17 edges, acyclic): cdt's target without the edge PIP2 -> PIP3. cdt's 18-edge list
  contains the directed 3-cycle Plcg -> PIP2 -> PIP3 -> Plcg; Sachs et al. (2005, Fig. 2) draw the PIP2/PIP3
  link the other way (PIP3 -> PIP2), so this is the edge that closes the cycle in cdt's version, and dropping it gives the acyclic consensus DAG used as ground truth here.
* ``"cdt"`` (18 edges, cyclic): cdt's ``cyto_full_target.csv`` as shipped, the ground truth SVI-DAG scores
  against (no DAG can reach SHD 0 on it and CPDAG metrics are undefined for it).
* ``"bnlearn"`` (17 edges, acyclic): the network that Sachs et al. reconstructed from the data, as distributed in
  bnlearn (``[PKC][PKA|PKC][Raf|PKC:PKA][Mek|PKC:PKA:Raf][Erk|Mek:PKA][Akt|Erk:PKA][P38|PKC:PKA][Jnk|PKC:PKA]
  [Plcg][PIP3|Plcg][PIP2|Plcg:PIP3]``), used by the DAG-DGP paper (arXiv:2607.09645, App. G.4).
"""
from dataclasses import dataclass
from importlib import resources
from typing import List

import numpy as np
import torch

__all__ = ["SachsData", "SachsExperiments", "sachs", "sachs_experiments", "sachs_graph", "SACHS_CONDITIONS",
           "SACHS_NODES", "SACHS_COLUMNS"]

#: Column names of the CSV, in order.
SACHS_COLUMNS = ["praf", "pmek", "plcg", "PIP2", "PIP3", "p44/42", "pakts473", "PKA", "PKC", "P38", "pjnk"]
#: Protein names used for the graph, in the same order as the columns.
SACHS_NODES = ["Raf", "Mek", "Plcg", "PIP2", "PIP3", "Erk", "Akt", "PKA", "PKC", "P38", "Jnk"]
_COLUMN_TO_NODE = dict(zip(SACHS_COLUMNS, SACHS_NODES))

_SUBSETS = {"full": (0, 7466), "cd3cd28": (0, 853), "cd3cd28icam2": (853, 1755)}
#: The nine conditions of the pooled file, in its row order: ``(name, rows, targets)``. The targets are the
#: published ones (Sachs et al. 2005, Table 1; as modelled by Eaton & Murphy 2007 and by DCDI, Brouillard et al.
#: 2020): the five inhibitors AKT inhibitor (Akt), G0076 (PKC), psitectorigenin (PIP2), U0126 (Mek) and
#: LY294002 (a PI3K inhibitor: PIP3) added to the general CD3/CD28 stimulation, and the two activators PMA (PKC)
#: and beta2cAMP (PKA) given instead of it. CD3/CD28 and CD3/CD28 + ICAM-2 act upstream of every measured node
#: (no target: observational for structure learning).
SACHS_CONDITIONS = [
    ("cd3cd28", 853, ()),
    ("cd3cd28icam2", 902, ()),
    ("cd3cd28+aktinhib", 911, ("Akt",)),
    ("cd3cd28+g0076", 723, ("PKC",)),
    ("cd3cd28+psitect", 810, ("PIP2",)),
    ("cd3cd28+u0126", 799, ("Mek",)),
    ("cd3cd28+ly", 848, ("PIP3",)),
    ("pma", 913, ("PKC",)),
    ("b2camp", 707, ("PKA",)),
]
_DROPPED_FOR_CONSENSUS = ("PIP2", "PIP3")
_BNLEARN_EDGES = [
    ("PKC", "PKA"), ("PKC", "Raf"), ("PKA", "Raf"), ("PKC", "Mek"), ("PKA", "Mek"), ("Raf", "Mek"),
    ("Mek", "Erk"), ("PKA", "Erk"), ("Erk", "Akt"), ("PKA", "Akt"), ("PKC", "P38"), ("PKA", "P38"),
    ("PKC", "Jnk"), ("PKA", "Jnk"), ("Plcg", "PIP3"), ("Plcg", "PIP2"), ("PIP3", "PIP2"),
]


@dataclass
class SachsData:
    """The Sachs data and a ground-truth graph.

    :ivar torch.Tensor data: ``[n, 11]`` measurements (raw, log or standardised as requested).
    :ivar torch.Tensor adjacency: ``[11, 11]`` long tensor, ``A[i, j] = 1`` means ``nodes[i] -> nodes[j]``.
    :ivar list nodes: protein names (``SACHS_NODES``). :ivar list columns: CSV column names (``SACHS_COLUMNS``).
    :ivar str subset: ``"full"``, ``"cd3cd28"`` or ``"cd3cd28icam2"``. :ivar str graph: which ground truth.
    """

    data: torch.Tensor
    adjacency: torch.Tensor
    nodes: List[str]
    columns: List[str]
    subset: str
    graph: str


def _read(name):
    return resources.files("pyro_dag.datasets").joinpath("data", name).read_text()


def _cdt_edges():
    lines = [ln.strip() for ln in _read("cyto_full_target.csv").splitlines() if ln.strip()]
    if lines[0].replace('"', "") != "Cause,Effect":
        raise RuntimeError("cyto_full_target.csv has an unexpected header; the shipped file is damaged")
    edges = []
    for ln in lines[1:]:
        cause, effect = (s.strip('"') for s in ln.split(","))
        edges.append((_COLUMN_TO_NODE.get(cause, cause), _COLUMN_TO_NODE.get(effect, effect)))
    return edges


def sachs_graph(graph="consensus"):
    """A ground-truth graph for the Sachs data (see the module docstring for the three choices).

    :param str graph: ``"consensus"`` (17 edges, acyclic; default), ``"cdt"`` (18 edges, contains the cycle
        Plcg -> PIP2 -> PIP3 -> Plcg) or ``"bnlearn"`` (17 edges, acyclic).
    :returns: ``[11, 11]`` long tensor with ``A[i, j] = 1`` for ``SACHS_NODES[i] -> SACHS_NODES[j]``.
    """
    if graph == "cdt":
        edges = _cdt_edges()
    elif graph == "consensus":
        edges = [e for e in _cdt_edges() if e != _DROPPED_FOR_CONSENSUS]
    elif graph == "bnlearn":
        edges = _BNLEARN_EDGES
    else:
        raise ValueError(f"graph must be 'consensus', 'cdt' or 'bnlearn'; got {graph!r}")
    idx = {n: i for i, n in enumerate(SACHS_NODES)}
    a = torch.zeros(11, 11, dtype=torch.long)
    for u, v in edges:
        a[idx[u], idx[v]] = 1
    return a


def sachs(subset="full", graph="consensus", log=False, standardize=False, dtype=None):
    """Load the Sachs et al. (2005) flow-cytometry data shipped with pyro_dag (SVI-DAG, arXiv:2608.04930, §4.4).

    :param str subset: ``"full"`` (7466 rows, all nine conditions pooled, SVI-DAG's protocol), ``"cd3cd28"``
        (rows 0-852) or ``"cd3cd28icam2"`` (rows 853-1754, 902 rows; the DAG-DGP paper's subset).
    :param str graph: ground truth, ``"consensus"`` (17 edges, acyclic), ``"cdt"`` (18, cyclic) or ``"bnlearn"``.
    :param bool log: return ``log(x)`` (all raw values are >= 1; the DAG-DGP paper works in log space).
    :param bool standardize: centre and scale each column to unit variance (after ``log``). For
        cross-validation, standardise with training-fold statistics instead (as SVI-DAG does).
    :param torch.dtype dtype: defaults to ``torch.get_default_dtype()``.
    :returns: :class:`SachsData` with ``data`` ``[n, 11]`` and ``adjacency`` ``[11, 11]``.

    Example::

        >>> d = sachs(subset="cd3cd28icam2", log=True)
        >>> d.data.shape, int(d.adjacency.sum())
        (torch.Size([902, 11]), 17)
    """
    if subset not in _SUBSETS:
        raise ValueError(f"subset must be one of {sorted(_SUBSETS)}; got {subset!r}")
    text = _read("cyto_full_data.csv")
    header, _, body = text.partition("\n")
    columns = header.strip().split(",")
    if columns != SACHS_COLUMNS:
        raise RuntimeError(f"cyto_full_data.csv has columns {columns}, expected {SACHS_COLUMNS}; the shipped file is damaged")
    values = np.loadtxt(body.splitlines(), delimiter=",", dtype=np.float64)
    if values.shape != (7466, 11):
        raise RuntimeError(f"cyto_full_data.csv has shape {values.shape}, expected (7466, 11); the shipped file is damaged")
    lo, hi = _SUBSETS[subset]
    x = values[lo:hi]
    if log:
        x = np.log(x)
    if standardize:
        x = (x - x.mean(0)) / x.std(0)
    return SachsData(
        data=torch.as_tensor(x, dtype=dtype or torch.get_default_dtype()),
        adjacency=sachs_graph(graph),
        nodes=list(SACHS_NODES),
        columns=list(SACHS_COLUMNS),
        subset=subset,
        graph=graph,
    )


@dataclass
class SachsExperiments:
    """The Sachs data with its nine conditions and their published intervention targets
    (:data:`SACHS_CONDITIONS`), in both forms the structure learners take (``interventions=``).

    :ivar torch.Tensor data: ``[7466, 11]`` measurements (raw or ``log``). :ivar torch.Tensor adjacency: the graph.
    :ivar list nodes: :data:`SACHS_NODES`. :ivar list environments: ``[7466]`` condition name of each row.
    :ivar dict targets: condition name -> tuple of target node names (GIES's form:
        ``interventions=(environments, targets)``).
    :ivar numpy.ndarray mask: ``[7466, 11]`` boolean, True where the row's node was the condition's target.
    """

    data: torch.Tensor
    adjacency: torch.Tensor
    nodes: List[str]
    environments: List[str]
    targets: dict
    mask: np.ndarray
    graph: str


def sachs_experiments(graph="consensus", log=True, dtype=None):
    """The pooled Sachs data with its conditions and their published targets (:data:`SACHS_CONDITIONS`), for
    structure learning from interventional data (Cooper & Yoo 1999; Eaton & Murphy 2007)::

        d = sachs_experiments()
        post = pyro_dag.structure.exact_posterior(d.data, "bge", node_names=d.nodes, interventions=d.mask)

    :param str graph: ground truth (as :func:`sachs`). :param bool log: ``log(x)`` (default; the raw intensities
        are heavy-tailed). :param torch.dtype dtype: defaults to ``torch.get_default_dtype()``.
    :returns: :class:`SachsExperiments`.
    """
    d = sachs("full", graph=graph, log=log, dtype=dtype)
    environments, targets = [], {}
    for name, n, tset in SACHS_CONDITIONS:
        environments += [name] * n
        targets[name] = tuple(tset)
    if len(environments) != d.data.shape[0]:
        raise RuntimeError("SACHS_CONDITIONS does not cover the pooled file's rows; the shipped data are damaged")
    mask = np.zeros(tuple(d.data.shape), dtype=bool)
    env = np.array(environments)
    for name, tset in targets.items():
        for t in tset:
            mask[env == name, SACHS_NODES.index(t)] = True
    return SachsExperiments(d.data, d.adjacency, list(SACHS_NODES), environments, targets, mask, graph)
