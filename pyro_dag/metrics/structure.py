"""Structure-learning metrics on posteriors over DAGs.

The metrics of SVI-DAG (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to Bayesian Causal
Discovery*, arXiv:2608.04930, App. C: Brier score, expected SHD, expected F1, AUROC) plus AUPRC, as recommended for
posteriors over DAGs by Wang, Wicker & Kwiatkowska 2022 (*Tractable Uncertainty for Structure Learning*, ICML).
The graph algorithms they use (acyclicity, CPDAGs) live in :mod:`pyro_dag.graph`; :func:`is_dag`,
:func:`dag_to_cpdag` and :func:`cpdag_to_dags` are re-exported here.

Conventions
-----------
* **Adjacency**: ``A[i, j] = 1`` means the edge ``i -> j`` (row = parent, column = child). SVI-DAG's paper
  uses the transpose; transpose such matrices before scoring.
* **Posterior input**: either an edge-probability matrix ``P`` of shape ``[p, p]`` with
  ``P[i, j] = P(i -> j)``, or adjacency samples of shape ``[k, p, p]`` (0/1 entries; optional ``weights``
  ``[k]`` for weighted particles such as DiBS's mixture). Tensors, arrays and nested lists are accepted.
  Metrics return Python floats.
* **CPDAG matrices** (:func:`dag_to_cpdag`): ``C[i, j] = 1, C[j, i] = 0`` is a compelled edge ``i -> j``;
  ``C[i, j] = C[j, i] = 1`` is a reversible (undirected) edge ``i - j``.

Levels (keyword ``level``)
--------------------------
``"dag"``
    ordered pairs ``i != j`` of the adjacency matrices (``p (p - 1)`` entries).
``"cpdag"``
    every sample and the ground truth are first mapped to their CPDAG (v-structures plus Meek rules R1-R3,
    :func:`dag_to_cpdag`); scores are computed on the ``p (p - 1)`` off-diagonal entries of the CPDAG
    matrices (an undirected edge marks both entries). Probabilities are CPDAG-mark frequencies, so this
    level needs samples (the marks of one edge depend on the rest of the graph).
With ``targets=`` (a family of intervention target sets or a ``[N, p]`` intervention mask) the ``"cpdag"`` level
uses the interventional CPDAGs (I-essential graphs, Hauser & Bühlmann 2012, :func:`~pyro_dag.graph.dag_to_icpdag`):
the equivalence classes that data from those experiments can distinguish.
``"skeleton"``
    unordered pairs ``i < j``; a pair is positive when the two nodes are adjacent. ``P(adjacent) =
    P[i, j] + P[j, i]`` (exact for DAG posteriors, where the two directions exclude each other). SVI-DAG's
    code calls its skeleton scores "CPDAG-level" and uses ``max(P[i, j], P[j, i])`` instead
    (``symmetrize="max"``); use that option only to put numbers beside the paper's Table 2.

Structural Hamming distance (:func:`expected_shd`) is a sum over unordered pairs. Each pair is in one of the
states none, ``i -> j``, ``j -> i`` or both (an undirected CPDAG edge, or a 2-cycle of a cyclic graph). A pair
costs 0 when the states agree, 1 when exactly one graph has the pair (an addition or a deletion), and
``reversal_cost`` when both have the pair with different marks. ``reversal_cost=1`` is the textbook SHD used by
DiBS (Lorch et al. 2021) and by SVI-DAG's CPDAG code; ``reversal_cost=2`` equals ``FP + FN`` over directed
entries, SVI-DAG's DAG-level code.
"""
import numbers

import numpy as np
from scipy.stats import rankdata

from ..graph import cpdag_to_dags, dag_to_cpdag, is_acyclic
from ..graph._arrays import as_numpy as _as_numpy
from ..graph._arrays import check_binary as _check_binary
from ..graph._arrays import check_square as _check_square
from ..graph._arrays import check_zero_diag as _check_zero_diag
from ..graph.cpdag import _cpdag_one, _cpdags, _raise_cycle
from ..graph.interventional import _icpdag_one, dag_to_icpdag, target_sets

__all__ = [
    "is_dag",
    "dag_to_cpdag",
    "cpdag_to_dags",
    "edge_marginals",
    "brier",
    "expected_shd",
    "expected_f1",
    "auroc",
    "auprc",
    "structure_metrics",
]

_LEVELS = ("dag", "cpdag", "skeleton")
_PROB_TOL = 1e-6


# ----------------------------------------------------------------------------------------------------------
# input handling
# ----------------------------------------------------------------------------------------------------------
def _truth(true_adj, p=None):
    t = _as_numpy(true_adj, "true_adj")
    _check_square(t, "true_adj")
    _check_binary(t, "true_adj")
    _check_zero_diag(t, "true_adj")
    if p is not None and t.shape[0] != p:
        raise ValueError(f"true_adj has {t.shape[0]} nodes but the prediction has {p}; both must be [p, p] over the same nodes")
    return t.astype(np.int8)


def _samples(samples, name="samples"):
    s = _as_numpy(samples, name)
    if s.ndim == 2:
        raise ValueError(f"{name} must be a [k, p, p] stack of adjacency samples; got a [p, p] matrix. "
                         "For a single graph use graph[None]; for edge probabilities use a metric that accepts them.")
    _check_square(s, name, batched=True)
    if s.shape[0] == 0:
        raise ValueError(f"{name} is empty (k = 0); draw at least one sample")
    _check_binary(s, name)
    _check_zero_diag(s, name)
    return s.astype(np.int8)


def _weights(weights, k):
    if weights is None:
        return np.full(k, 1.0 / k)
    w = _as_numpy(weights, "weights")
    if w.shape != (k,):
        raise ValueError(f"weights must have shape [k] = [{k}] (one per sample); got {list(w.shape)}")
    if np.any(w < 0) or w.sum() <= 0:
        raise ValueError("weights must be non-negative with a positive sum")
    return w / w.sum()


def _essential(s, t, targets, name):
    """The samples' and the truth's essential graphs: CPDAGs, or with ``targets`` the I-essential graphs of that
    target family (Hauser & Bühlmann 2012, :func:`~pyro_dag.graph.dag_to_icpdag`)."""
    if targets is None:
        return _cpdags(s, name), _cpdag_one(t)
    return dag_to_icpdag(s.astype(np.int8), targets), _icpdag_one(t, target_sets(targets, t.shape[-1]))


def _check_level(level):
    if level not in _LEVELS:
        raise ValueError(f"level must be one of {_LEVELS}; got {level!r}")


def _split_pred(pred, weights):
    """Returns (probs [p,p] or None, samples [k,p,p] or None, weights)."""
    a = _as_numpy(pred, "pred")
    if a.ndim == 2:
        _check_square(a, "pred (edge probabilities)")
        if np.any(a < -_PROB_TOL) or np.any(a > 1 + _PROB_TOL):
            raise ValueError("edge probabilities must lie in [0, 1]")
        _check_zero_diag(a, "pred (edge probabilities)")
        if weights is not None:
            raise ValueError("weights apply to [k, p, p] samples only; got a [p, p] probability matrix")
        return np.clip(a, 0.0, 1.0), None, None
    s = _samples(a, "pred (adjacency samples)")
    w = _weights(weights, s.shape[0])
    return None, s, w


def _offdiag_mask(p):
    return ~np.eye(p, dtype=bool)


def _upper_mask(p):
    return np.triu(np.ones((p, p), dtype=bool), k=1)


def is_dag(adj):
    """Whether a 0/1 adjacency matrix (``A[i, j] = 1`` means ``i -> j``) is acyclic (:func:`pyro_dag.graph.is_acyclic`).

    :param adj: ``[p, p]`` adjacency, or ``[k, p, p]`` samples.
    :returns: a bool for ``[p, p]`` input, a ``[k]`` bool numpy array for samples.

    Example::

        >>> is_dag([[0, 1], [0, 0]]), is_dag([[0, 1], [1, 0]])
        (True, False)
    """
    a = _as_numpy(adj, "adj")
    _check_square(a, "adj", batched=a.ndim != 2)
    _check_binary(a, "adj")
    return is_acyclic(a)


def _topological_ok(a):
    return bool(is_acyclic(a))


def edge_marginals(samples, weights=None):
    """Edge-probability matrix ``P[i, j] = P(i -> j)`` from adjacency samples.

    :param samples: ``[k, p, p]`` 0/1 adjacency samples. :param weights: optional ``[k]`` non-negative weights.
    :returns: ``[p, p]`` numpy float64 array.
    """
    s = _samples(samples)
    w = _weights(weights, s.shape[0])
    return np.tensordot(w, s.astype(np.float64), axes=1)


# ----------------------------------------------------------------------------------------------------------
# scores and labels per level
# ----------------------------------------------------------------------------------------------------------
def _scores_labels(pred, true_adj, level, weights, symmetrize, targets=None):
    _check_level(level)
    if symmetrize not in ("sum", "max"):
        raise ValueError(f"symmetrize must be 'sum' or 'max'; got {symmetrize!r}")
    probs, s, w = _split_pred(pred, weights)
    p = (probs if probs is not None else s[0]).shape[-1]
    t = _truth(true_adj, p)
    if level == "dag":
        P = probs if probs is not None else np.tensordot(w, s.astype(np.float64), axes=1)
        m = _offdiag_mask(p)
        return P[m], t[m].astype(np.float64)
    if level == "cpdag":
        if s is None:
            raise ValueError("level='cpdag' needs adjacency samples [k, p, p]: a CPDAG mark depends on the whole graph, "
                             "so it cannot be read from edge probabilities. Pass posterior.sample(k).")
        if not _topological_ok(t):
            _raise_cycle(t, "true_adj")
        cs, ct = _essential(s, t, targets, "pred")
        Q = np.tensordot(w, cs.astype(np.float64), axes=1)
        m = _offdiag_mask(p)
        return Q[m], ct[m].astype(np.float64)
    # skeleton
    u = _upper_mask(p)
    labels = ((t + t.T) > 0)[u].astype(np.float64)
    if symmetrize == "max":
        P = probs if probs is not None else np.tensordot(w, s.astype(np.float64), axes=1)
        return np.maximum(P, P.T)[u], labels
    if probs is not None:
        adj = probs + probs.T
        if np.any(adj[u] > 1 + _PROB_TOL):
            i, j = np.argwhere((adj > 1 + _PROB_TOL) & u)[0]
            raise ValueError(f"P[{i}, {j}] + P[{j}, {i}] = {adj[i, j]:.4f} > 1, so the two directions cannot be exclusive "
                             "(as they are for DAG samples); pass samples, or use symmetrize='max'")
        return np.clip(adj[u], 0.0, 1.0), labels
    adj_s = ((s + s.transpose(0, 2, 1)) > 0).astype(np.float64)
    return np.tensordot(w, adj_s, axes=1)[u], labels


# ----------------------------------------------------------------------------------------------------------
# metrics
# ----------------------------------------------------------------------------------------------------------
def brier(pred, true_adj, level="dag", weights=None, symmetrize="sum", *, targets=None):
    """Brier score of edge probabilities: ``mean over pairs of (P_pair - 1[pair in truth])²`` (SVI-DAG, App. C).

    Lower is better; 0 is perfect. At ``level="dag"`` this is ``1/(p(p-1)) Σ_{i≠j} (P_ij - A_ij)²``.

    :param pred: ``[p, p]`` edge probabilities or ``[k, p, p]`` adjacency samples (``"cpdag"`` needs samples).
    :param true_adj: ``[p, p]`` ground-truth adjacency (``A[i, j] = 1`` means ``i -> j``).
    :param str level: ``"dag"``, ``"cpdag"`` or ``"skeleton"`` (see the module docstring).
    :param weights: optional ``[k]`` sample weights.
    :param str symmetrize: skeleton score, ``"sum"`` (``P_ij + P_ji``) or ``"max"`` (SVI-DAG code).
    :returns: float.

    Example::

        >>> brier([[0, .8], [.2, 0]], [[0, 1], [0, 0]])   # ((0.8-1)² + (0.2-0)²) / 2
        0.04000000000000001
    """
    scores, labels = _scores_labels(pred, true_adj, level, weights, symmetrize, targets)
    return float(np.mean((scores - labels) ** 2))


_STATE_DOC = "pair states: 0 none, 1 i->j, 2 j->i, 3 both"


def _pair_states(g, u):
    """States of the unordered pairs i<j for a [..., p, p] int matrix (see _STATE_DOC)."""
    st = g + 2 * np.swapaxes(g, -1, -2)
    return st[..., u]


def _cost_table(reversal_cost):
    c = np.full((4, 4), float(reversal_cost))
    c[0, :] = c[:, 0] = 1.0
    np.fill_diagonal(c, 0.0)
    return c


def expected_shd(pred, true_adj, level="dag", reversal_cost=1, weights=None, return_all=False, *, targets=None):
    """Expected structural Hamming distance ``E_q[SHD(G, G*)]`` (SVI-DAG, App. C).

    Per unordered pair: 0 if the two graphs agree, 1 for a missing or extra adjacency, ``reversal_cost`` for
    an adjacency present in both with different marks (reversed, or directed vs. undirected at CPDAG level).
    ``reversal_cost=1``: textbook SHD (DiBS; SVI-DAG's CPDAG code); ``reversal_cost=2``: ``FP + FN`` over
    directed entries (SVI-DAG's DAG-level code). At ``level="skeleton"`` marks are ignored.

    With ``[p, p]`` edge probabilities (``"dag"`` and ``"skeleton"`` only) the expectation is exact for any
    posterior over DAGs, because SHD is a sum over pairs and the state of a pair has probabilities
    ``(1 - P_ij - P_ji, P_ij, P_ji)``.

    :param pred: ``[k, p, p]`` adjacency samples, or ``[p, p]`` edge probabilities.
    :param true_adj: ``[p, p]`` ground-truth adjacency.
    :param str level: ``"dag"``, ``"cpdag"`` or ``"skeleton"``.
    :param float reversal_cost: cost of a mark mismatch, ``1`` or ``2`` (any value ``>= 0`` is accepted).
    :param weights: optional ``[k]`` sample weights.
    :param bool return_all: with samples, also return the ``[k]`` per-sample SHDs.
    :returns: float (and a ``[k]`` numpy array when ``return_all``).

    Example::

        >>> expected_shd([[[0, 0], [1, 0]]], [[0, 1], [0, 0]], reversal_cost=2)   # one reversed edge
        2.0
    """
    _check_level(level)
    if not isinstance(reversal_cost, numbers.Real) or reversal_cost < 0:
        raise ValueError(f"reversal_cost must be a non-negative number (1: DiBS, 2: SVI-DAG code); got {reversal_cost!r}")
    probs, s, w = _split_pred(pred, weights)
    p = (probs if probs is not None else s[0]).shape[-1]
    t = _truth(true_adj, p)
    u = _upper_mask(p)
    cost = _cost_table(1.0 if level == "skeleton" else reversal_cost)
    if level == "cpdag":
        if s is None:
            raise ValueError("level='cpdag' needs adjacency samples [k, p, p]; pass posterior.sample(k)")
        if not _topological_ok(t):
            _raise_cycle(t, "true_adj")
        s, t = _essential(s, t, targets, "pred")
    ts = _pair_states(t.astype(np.int64), u)
    if level == "skeleton":
        ts = np.where(ts > 0, 3, 0)
    if probs is not None:
        if return_all:
            raise ValueError("return_all needs samples [k, p, p]")
        pij, pji = probs[u], probs.T[u]
        p0 = 1.0 - pij - pji
        if np.any(p0 < -_PROB_TOL):
            i, j = np.argwhere((probs + probs.T > 1 + _PROB_TOL) & u)[0]
            raise ValueError(f"P[{i}, {j}] + P[{j}, {i}] > 1: the two directions of a pair must be exclusive "
                             "(as for DAG samples); pass samples instead")
        if level == "skeleton":
            pstate = np.stack([np.clip(p0, 0, 1), np.zeros_like(p0), np.zeros_like(p0), pij + pji])
        else:
            pstate = np.stack([np.clip(p0, 0, 1), pij, pji, np.zeros_like(p0)])
        return float((pstate * cost[:, ts]).sum())
    ss = _pair_states(s.astype(np.int64), u)  # [k, npairs]
    if level == "skeleton":
        ss = np.where(ss > 0, 3, 0)
    per = cost[ss, ts[None, :]].sum(-1)
    val = float(np.dot(w, per))
    return (val, per) if return_all else val


def _f1(pred_pos, true_pos):
    tp = (pred_pos & true_pos).sum(-1)
    fp = (pred_pos & ~true_pos).sum(-1)
    fn = (~pred_pos & true_pos).sum(-1)
    den = 2 * tp + fp + fn
    return np.where(den > 0, 2 * tp / np.maximum(den, 1), 1.0)


def expected_f1(samples, true_adj, level="dag", weights=None, return_all=False, *, targets=None):
    """Expected F1 score ``E_q[F1(G, G*)]`` of sampled graphs (SVI-DAG, App. C).

    Each sample is a binary classifier of the pairs (``"dag"``: ordered pairs; ``"cpdag"``: off-diagonal
    entries of the CPDAG matrices; ``"skeleton"``: adjacencies). ``F1 = 2TP / (2TP + FP + FN)``, which is the
    harmonic mean of precision and recall, is 0 when ``TP = 0`` (as in SVI-DAG's code) and is defined as 1 when
    both graphs are empty.

    :param samples: ``[k, p, p]`` adjacency samples (F1 is not linear in the edge probabilities).
    :param true_adj: ``[p, p]`` ground-truth adjacency.
    :param str level: ``"dag"``, ``"cpdag"`` or ``"skeleton"``.
    :param weights: optional ``[k]`` sample weights.
    :param bool return_all: also return the ``[k]`` per-sample F1 scores.
    :returns: float in [0, 1] (and a ``[k]`` array when ``return_all``).
    """
    _check_level(level)
    s = _samples(samples)
    w = _weights(weights, s.shape[0])
    p = s.shape[-1]
    t = _truth(true_adj, p)
    if level == "cpdag":
        if not _topological_ok(t):
            _raise_cycle(t, "true_adj")
        s, t = _essential(s, t, targets, "samples")
    if level == "skeleton":
        m = _upper_mask(p)
        s = (s + s.transpose(0, 2, 1)) > 0
        t = (t + t.T) > 0
    else:
        m = _offdiag_mask(p)
    per = _f1(s[:, m].astype(bool), t[m].astype(bool)[None, :])
    val = float(np.dot(w, per))
    return (val, per) if return_all else val


def _auroc(scores, labels):
    pos = labels > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(scores, method="average")
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def _auprc(scores, labels):
    pos = labels > 0.5
    n_pos = int(pos.sum())
    if n_pos == 0:
        return float("nan")
    order = np.argsort(-scores, kind="mergesort")
    s, y = scores[order], pos[order]
    # one threshold per distinct score: keep the last index of each tie block
    last = np.r_[np.nonzero(np.diff(s))[0], len(s) - 1]
    tp = np.cumsum(y)[last]
    n = last + 1
    precision = tp / n
    recall = tp / n_pos
    return float(np.sum(np.diff(np.r_[0.0, recall]) * precision))


def auroc(pred, true_adj, level="dag", weights=None, symmetrize="sum", *, targets=None):
    """Area under the ROC curve of the edge probabilities as scores for true vs. absent pairs (SVI-DAG, App. C).

    Computed as the Mann-Whitney statistic ``P(score_pos > score_neg) + ½ P(score_pos = score_neg)`` with
    average ranks for ties. 0.5 is chance. Returns ``nan`` when the truth has only one class of pairs.

    :param pred: ``[p, p]`` edge probabilities or ``[k, p, p]`` samples (``"cpdag"`` needs samples).
    :param true_adj: ``[p, p]`` ground-truth adjacency.
    :param str level: ``"dag"``, ``"cpdag"`` or ``"skeleton"``.
    :param weights: optional ``[k]`` sample weights. :param str symmetrize: ``"sum"`` or ``"max"`` (skeleton).
    :returns: float in [0, 1] or nan.
    """
    return _auroc(*_scores_labels(pred, true_adj, level, weights, symmetrize, targets))


def auprc(pred, true_adj, level="dag", weights=None, symmetrize="sum", *, targets=None):
    """Area under the precision-recall curve (average precision) of the edge probabilities.

    ``AP = Σ_t (R_t - R_{t-1}) P_t`` over the distinct score thresholds ``t`` in decreasing order (tied scores
    form one threshold), as scikit-learn's ``average_precision_score``. The chance level is the fraction of
    positive pairs. Returns ``nan`` when the truth has no positive pair. Not in SVI-DAG's paper (Wang et al. 2022 suggest it).

    :param pred: ``[p, p]`` edge probabilities or ``[k, p, p]`` samples (``"cpdag"`` needs samples).
    :param true_adj: ``[p, p]`` ground-truth adjacency.
    :param str level: ``"dag"``, ``"cpdag"`` or ``"skeleton"``.
    :param weights: optional ``[k]`` sample weights. :param str symmetrize: ``"sum"`` or ``"max"`` (skeleton).
    :returns: float in [0, 1] or nan.
    """
    return _auprc(*_scores_labels(pred, true_adj, level, weights, symmetrize, targets))


def structure_metrics(samples, true_adj, level="dag", reversal_cost=1, weights=None, symmetrize="sum", *,
                      targets=None):
    """All five metrics of one posterior at one level, as a dict (``brier``, ``e_shd``, ``e_f1``, ``auroc``,
    ``auprc``; plus ``edges``, the expected number of edges of the sampled graphs).

    :param samples: ``[k, p, p]`` adjacency samples. :param true_adj: ``[p, p]`` ground truth.
    :param str level: ``"dag"``, ``"cpdag"`` or ``"skeleton"``. :param reversal_cost: for E-SHD.
    :param weights: optional ``[k]`` sample weights. :param symmetrize: skeleton score (``"sum"``/``"max"``).
    :param targets: intervention targets for the interventional CPDAG level (see the module docstring).
    """
    s = _samples(samples)
    w = _weights(weights, s.shape[0])
    kw = dict(targets=targets)
    return {
        "brier": brier(s, true_adj, level, w, symmetrize, **kw),
        "e_shd": expected_shd(s, true_adj, level, reversal_cost, w, **kw),
        "e_f1": expected_f1(s, true_adj, level, w, **kw),
        "auroc": auroc(s, true_adj, level, w, symmetrize, **kw),
        "auprc": auprc(s, true_adj, level, w, symmetrize, **kw),
        "edges": float(np.dot(w, s.reshape(s.shape[0], -1).sum(-1))),
    }
