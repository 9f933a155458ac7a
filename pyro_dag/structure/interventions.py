"""Interventional data for structure learning: which rows had which variables set by the experiment.

A *perfect* (surgical) intervention on node ``j`` in a row replaces ``x_j``'s mechanism by the experimenter's
choice, so that row says nothing about ``p(x_j | x_pa(j))`` and is left out of node ``j``'s local score, while it
still counts for every other node (Cooper & Yoo 1999, *Causal Discovery from a Mixture of Experimental and
Observational Data*, UAI; Eaton & Murphy 2007, *Exact Bayesian Structure Learning from Uncertain Interventions*,
AISTATS). With a collapsed likelihood the evidence then still factorises over nodes,
``p(X | G) = Π_j f_j(pa_j; rows where j is not intervened)``; for BGe both marginal likelihoods of its ratio,
``p(x_{pa ∪ j}) / p(x_pa)``, are taken on node ``j``'s rows. Every algorithm that consumes local scores (the exact
order DP, the candidate tables, the order circuit, order MCMC) is unchanged.

The targets are a boolean ``[N, p]`` mask, ``True`` where the row's node was set (DiBS's and DCDI's convention), or
GIES's form: an environment label per row and a target set per environment (Hauser & Bühlmann 2012).
:func:`intervention_mask` checks and converts either; :func:`interventional_local_scores` and
:func:`interventional_family_scorer` score on each node's rows.
"""
import numbers

import numpy as np
import torch

from .mechanisms import BGeSEM
from .scores import FamilyScorer, _scores_for_masks, collapsed_mechanism

__all__ = ["intervention_mask", "interventional_family_scorer", "interventional_local_scores", "node_row_groups",
           "target_family"]

#: rows a node needs outside its interventions for its mechanism to be scored
MIN_FREE_ROWS = 2


def _label(j, names):
    return repr(names[j]) if names is not None else str(j)


def _node_index(v, p, names, where):
    """A target given as an index or a name -> its column index, or an error naming it and ``where``."""
    if isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, bool):
        if 0 <= int(v) < p:
            return int(v)
        raise ValueError(f"{where}: target {int(v)} is not a column index (the data have {p} columns, 0..{p - 1})")
    if names is not None and str(v) in names:
        return names.index(str(v))
    known = f"the columns are {names}" if names is not None else "the data have no column names: give indices"
    raise ValueError(f"{where}: target {v!r} is not among the data's columns ({known})")


def _from_environments(labels, targets, N, p, names, unknown=None):
    """GIES's form (a label per row, a target set per environment) -> ``[N, p]`` mask; environments whose targets
    are ``"unknown"`` go into the dict ``unknown`` (label -> rows) when it is given, else are refused."""
    labels = np.asarray(labels.detach().cpu() if torch.is_tensor(labels) else labels)
    if hasattr(labels, "to_numpy"):
        labels = labels.to_numpy()
    if labels.ndim != 1 or len(labels) != N:
        raise ValueError(f"interventions=(environments, targets): environments must hold one label per data row "
                         f"({N}); got shape {tuple(labels.shape)}")
    if isinstance(targets, dict):
        table = dict(targets)
    else:
        table = dict(enumerate(targets))
    values, first, counts = np.unique(labels, return_index=True, return_counts=True)
    mask = np.zeros((N, p), dtype=bool)
    for v, r0, n in zip(values, first, counts):
        key = v.item() if hasattr(v, "item") else v
        if key not in table:
            raise ValueError(f"environment {key!r} (rows from {int(r0)}) has no target set: give one per environment, "
                             f"an empty set for observational rows (known environments: {sorted(table, key=str)}); "
                             "targets that are unknown or only suspected are not supported yet")
        if n < 2:
            raise ValueError(f"environment {key!r} has a single row (row {int(r0)}): an environment label per row "
                             "is expected (e.g. the condition each sample came from); merge that row into its "
                             "condition or drop it (a continuous column passed as labels gives one environment per "
                             "row)")
        tset = table[key]
        if isinstance(tset, str) and tset == "unknown":
            if unknown is None:
                raise ValueError(f"environment {key!r} has unknown targets: only exact_posterior(likelihood='bge') "
                                 "learns them (Eaton & Murphy 2007); give its targets here")
            unknown[key] = labels == v
            continue
        if isinstance(tset, (str, numbers.Integral)):
            tset = [tset]
        cols = [_node_index(t, p, names, f"targets of environment {key!r}") for t in tset]
        mask[np.ix_(labels == v, cols)] = True
    return mask


def intervention_mask(interventions, num_rows, num_nodes, node_names=None, return_unknown=False):
    """The interventions as a checked boolean ``[N, p]`` numpy mask (``True``: the row's node was set), or ``None``.

    :param interventions: ``None``; a boolean (or 0/1) ``[N, p]`` tensor, array or DataFrame (a DataFrame's
        columns are matched to the data's by name); or GIES's form, a pair ``(environments, targets)``:
        ``environments`` ``[N]`` labels (ints, strings), ``targets`` a list indexed by the integer label or a dict
        ``{label: targets}``, each an iterable of column indices or names (empty: observational).
        A target set may be the string ``"unknown"`` (an experiment whose targets are learned with the graph,
        :mod:`~pyro_dag.structure.uncertain_targets`; then ``return_unknown`` must be set).
    :param int num_rows, num_nodes: the data's ``N`` and ``p``. :param list node_names: the data's column names.
    :param bool return_unknown: return ``(mask, unknown)``, ``unknown`` a dict label -> ``[N]`` boolean rows of the
        environments with unknown targets (empty when none).
    :raises ValueError: naming the problem: wrong shape or type, a target that is not a column, an environment
        without a target set or of one row, a node intervened in every row (or all but one: its mechanism cannot
        be learned from these data).
    """
    unknown = {} if return_unknown else None
    if interventions is None:
        return (None, {}) if return_unknown else None
    N, p = int(num_rows), int(num_nodes)
    names = [str(v) for v in node_names] if node_names is not None else None
    if isinstance(interventions, tuple):
        if len(interventions) != 2:
            raise ValueError("interventions as a tuple must be (environments, targets): an environment label per "
                             f"row and a target set per environment; got a tuple of {len(interventions)}")
        mask = _from_environments(interventions[0], interventions[1], N, p, names, unknown)
    else:
        if hasattr(interventions, "columns") and hasattr(interventions, "to_numpy"):
            cols = [str(c) for c in interventions.columns]
            if names is None:
                raise ValueError("interventions is a DataFrame but the data have no column names: pass a [N, p] "
                                 "array in the data's column order")
            unknown = [c for c in cols if c not in names]
            if unknown:
                raise ValueError(f"interventions has column {unknown[0]!r}, which is not among the data's columns "
                                 f"{names}")
            frame = interventions
            arr = np.zeros((len(frame), p), dtype=object)
            arr[:] = False
            for c in cols:
                arr[:, names.index(c)] = frame[c].to_numpy()
        elif torch.is_tensor(interventions):
            arr = interventions.detach().cpu().numpy()
        else:
            arr = np.asarray(interventions)
        if arr.ndim != 2 or arr.shape != (N, p):
            raise ValueError(f"interventions must be a boolean [N, p] = [{N}, {p}] mask (one row per data row, one "
                             f"column per variable; True where the experiment set that variable), or "
                             f"(environments, targets); got shape {tuple(arr.shape)}")
        if arr.dtype == bool:
            mask = arr.copy()
        else:
            try:
                num = arr.astype(float)
            except (TypeError, ValueError):
                num = None
            if num is None or not np.isin(num, (0.0, 1.0)).all():
                bad = np.argwhere(~np.isin(num, (0.0, 1.0))) if num is not None else np.zeros((1, 2), int)
                r, c = (int(v) for v in bad[0])
                v = arr[r, c]
                raise ValueError(f"interventions must be boolean (or 0/1): column {_label(c, names)} row {r} holds "
                                 f"{v.item() if hasattr(v, 'item') else v!r}")
            mask = num > 0.5
    free = (~mask).sum(0)
    low = np.nonzero(free < MIN_FREE_ROWS)[0]
    if len(low):
        j = int(low[0])
        raise ValueError(f"node {_label(j, names)} is intervened in {N - int(free[j])} of the {N} rows, leaving "
                         f"{int(free[j])} row(s) where its own mechanism acts: its dependence on its parents cannot "
                         "be learned from these data; add observational rows (or rows of experiments on other "
                         "nodes), or drop that column")
    if return_unknown:
        return (mask if mask.any() or not unknown else None), unknown
    return mask


def target_family(mask):
    """The family of intervention target sets of a ``[N, p]`` mask: the distinct rows as sorted tuples (``()``
    for observational rows), in order of first appearance (Hauser & Bühlmann 2012's ``𝓘``)."""
    if mask is None:
        return [()]
    seen = {}
    for row in np.asarray(mask, dtype=bool):
        t = tuple(int(k) for k in np.nonzero(row)[0])
        seen.setdefault(t, None)
    return list(seen)


def node_row_groups(mask):
    """``[(rows [N] bool, nodes [list])]``: the nodes grouped by the rows where they are *not* intervened (nodes of
    one group are scored on the same rows)."""
    mask = np.asarray(mask, dtype=bool)
    groups = {}
    for j in range(mask.shape[1]):
        key = (~mask[:, j]).tobytes()
        groups.setdefault(key, (~mask[:, j], []))[1].append(j)
    return list(groups.values())


def _mechanism_factory(likelihood, num_nodes, config):
    return lambda num_rows: collapsed_mechanism(likelihood, num_nodes, num_rows, config)


def interventional_local_scores(likelihood, X, mask, config=None, masks=None):
    """``[p, len(masks)]`` local log evidence ``f_j(G)`` with node ``j`` scored on the rows where it is not
    intervened (``mask[:, j]`` False), for the collapsed likelihoods (:func:`~pyro_dag.structure.local_scores`'s
    layout; ``masks``: parent-set bitmasks, default all ``2^p``).

    :param str likelihood: ``"linear"`` or ``"bge"``. :param X: ``[N, p]`` float64 data as scored.
    :param mask: ``[N, p]`` boolean interventions, or ``None`` (then exactly :func:`local_scores`).
    :param config: :class:`~pyro_dag.structure.StructureConfig` (the ``"linear"`` score's priors; they are set for
        each node's number of rows).
    """
    X = torch.as_tensor(X, dtype=torch.float64)
    N, p = X.shape
    make = _mechanism_factory(likelihood, p, config)
    masks = np.arange(1 << p) if masks is None else np.asarray(masks, dtype=np.int64)
    if mask is None or not np.asarray(mask).any():
        return _scores_for_masks(make(N), X, masks)
    out = np.empty((p, len(masks)))
    every = len(masks) == 1 << p and np.array_equal(masks, np.arange(1 << p))
    for rows, nodes in node_row_groups(mask):
        sub = X[torch.as_tensor(rows)]
        mech = make(int(rows.sum()))
        if every and isinstance(mech, BGeSEM):
            out[nodes] = bge_table(mech, sub, nodes)
        else:
            out[nodes] = _scores_for_masks(mech, sub, masks)[nodes]
    return out


def _masked_logdets(R):
    """``[2^p]`` ``log|R_G|`` of every principal submatrix (bitmask ``G``; ``log|R_∅| = 0``), batched Cholesky."""
    p = R.shape[0]
    masks = np.arange(1 << p)
    out = np.empty(1 << p)
    chunk = max(256, 2 ** 22 // (p * p))
    eye = torch.eye(p, dtype=R.dtype)
    for s in range(0, 1 << p, chunk):
        a = torch.as_tensor(((masks[s:s + chunk, None] >> np.arange(p)) & 1).astype(float), dtype=R.dtype)
        M = a[:, :, None] * a[:, None, :] * R + torch.diag_embed(1 - a) * eye
        out[s:s + chunk] = (2 * torch.linalg.cholesky(M).diagonal(dim1=-2, dim2=-1).log().sum(-1)).numpy()
    return out


def bge_table(mech, X, nodes):
    """``[len(nodes), 2^p]`` BGe local scores of every parent set of the given nodes on the rows ``X``, from one
    table of ``log|R_G|`` over all ``2^p`` subsets shared by every node (the family formula needs ``log|R_G|`` and
    ``log|R_{G ∪ j}|``): ``2^p`` small Cholesky factors per group of rows instead of ``2 p 2^p``."""
    X = torch.as_tensor(X, dtype=torch.float64)
    N, p = X.shape
    R, t = mech._R(X)
    LD = _masked_logdets(R)
    masks = np.arange(1 << p, dtype=np.int64)
    size = torch.as_tensor(((masks[:, None] >> np.arange(p)) & 1).sum(1), dtype=torch.float64)
    out = np.full((len(nodes), 1 << p), -np.inf)
    for r, j in enumerate(nodes):
        free = masks[((masks >> j) & 1) == 0]
        out[r, free] = mech._family(N, t, size[free], torch.as_tensor(LD[free]),
                                    torch.as_tensor(LD[free | (1 << j)])).numpy()
    return out


def interventional_gp_local_scores(X, mask, max_parents, **scorer_kw):
    """``[p, 2^p]`` GP network scores (:class:`~pyro_dag.structure.GPFamilyScorer`, up to ``max_parents`` parents)
    with node ``j`` fitted on the rows where it is not intervened: one scorer per group of nodes sharing those rows,
    each fitting only its own nodes' families (``scorer_kw``: the scorer's settings)."""
    from .gp_scores import GPFamilyScorer

    X = torch.as_tensor(X, dtype=torch.float64)
    p = X.shape[1]
    out = np.full((p, 1 << p), -np.inf)
    loc = np.arange(1 << (p - 1))
    for rows, nodes in node_row_groups(mask):
        scorer = GPFamilyScorer(X[torch.as_tensor(rows)], **scorer_kw)
        for j in nodes:
            others = np.array([k for k in range(p) if k != j], dtype=np.int64)
            bits = (loc[:, None] >> np.arange(p - 1)) & 1
            out[j, (bits << others[None, :]).sum(1)] = scorer.subsets(j, others, max_parents)
    return out


class _InterventionalFamilyScorer:
    """:class:`~pyro_dag.structure.scores.FamilyScorer` on each node's rows (one scorer per group of nodes sharing
    them): ``scorer(j, sets)`` and ``scorer.subsets(j, cand, max_size)`` as FamilyScorer's."""

    def __init__(self, make, X, mask):
        self.N, self.p = X.shape
        self._by_node = {}
        for rows, nodes in node_row_groups(mask):
            scorer = FamilyScorer(make(int(rows.sum())), X[torch.as_tensor(rows)])
            for j in nodes:
                self._by_node[j] = scorer

    def __call__(self, j, sets):
        return self._by_node[int(j)](j, sets)

    def subsets(self, j, cand, max_size=None):
        return self._by_node[int(j)].subsets(j, cand, max_size)


def interventional_family_scorer(likelihood, X, mask, config=None):
    """A family scorer (``scorer(j, sets)``, ``scorer.subsets(j, cand, max_size)``, as
    :class:`~pyro_dag.structure.scores.FamilyScorer`) that scores node ``j`` on its non-intervened rows; a plain
    :class:`~pyro_dag.structure.scores.FamilyScorer` when ``mask`` is ``None`` or all False."""
    X = torch.as_tensor(X, dtype=torch.float64)
    make = _mechanism_factory(likelihood, X.shape[1], config)
    if mask is None or not np.asarray(mask).any():
        return FamilyScorer(make(X.shape[0]), X)
    return _InterventionalFamilyScorer(make, X, mask)


def refuse_interventions(interventions, what, instead):
    """Raise a :class:`ValueError` saying that ``what`` does not take interventions (never silently ignored)."""
    if interventions is not None:
        raise ValueError(f"{what} does not take interventions= yet: it would treat the interventional rows as "
                         f"observational; {instead}")

