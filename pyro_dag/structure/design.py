"""Which experiment next: the expected information gain of candidate interventions, from the exact posterior.

For a candidate experiment ``ξ`` (setting the nodes ``T`` in ``n`` new rows) the expected information gain about
the graph is the mutual information between the DAG and the new data given the data so far (Murphy 2001, *Active
Learning of Causal Bayes Net Structure*; Tong & Koller 2001, *Active Learning for Structure in Bayesian Networks*,
IJCAI; Agrawal et al. 2019, *ABCD-Strategy: Budgeted Experimental Design for Targeted Causal Structure Discovery*,
AISTATS)::

    EIG(ξ) = E_{G ~ p(G | D), D' ~ p(D' | G, D, ξ)} [ log p(D' | G, D, ξ) - log p(D' | D, ξ) ].

With a collapsed likelihood both terms are exact for each simulated data set: ``log p(D' | G, D) = Σ_j f'_j(pa_j)
- f_j(pa_j)`` (local scores on all the data minus on the old data; each node on its non-intervened rows) and
``log p(D' | D) = log Z' - log Z``, the exact order DP's normalisers before and after. Only the outer expectation
is Monte Carlo: ``num_samples`` exact DAG samples, each with one simulated data set, so the estimate comes with its
standard error. The data are simulated from each sampled DAG with its least-squares (posterior-mean) weights,
intercepts and noise variances on the data as scored (a plug-in for the posterior predictive), and the targets set to
``N(0, intervention_scale²)`` on that (standardised) scale; the same DAG samples and noise serve every candidate
(common random numbers), so differences between candidates are estimated more precisely than the values.

A query narrower than the graph, the presence of one edge ``(i, j)``, uses ``log p(D' | E, D) - log p(D' | D)``
with the posterior restricted to ``E`` (its normaliser from the same DP given the evidence).
"""
import math
import numbers
from typing import NamedTuple, Tuple

import numpy as np
import torch

from .evidence import parse_evidence
from .exact import ExactStructurePosterior
from .interventions import interventional_local_scores
from .subsets import mask_bits

__all__ = ["ExperimentValue", "next_experiment"]


class ExperimentValue(NamedTuple):
    """One candidate experiment: ``targets`` (node names, or indices without names), the expected information gain
    ``eig`` (nats) and its Monte Carlo standard error ``stderr``."""

    targets: Tuple
    eig: float
    stderr: float


def _candidate_sets(candidates, p, names):
    if candidates is None:
        return [(j,) for j in range(p)]
    out = []
    for c in candidates:
        items = [c] if isinstance(c, (str, numbers.Integral)) else list(c)
        idx = []
        for v in items:
            if isinstance(v, numbers.Integral) and not isinstance(v, bool) and 0 <= int(v) < p:
                idx.append(int(v))
            elif names is not None and str(v) in names:
                idx.append(names.index(str(v)))
            else:
                raise ValueError(f"candidate {c!r}: {v!r} is not a node of the posterior "
                                 f"({names if names is not None else f'indices 0..{p - 1}'})")
        out.append(tuple(sorted(set(idx))))
    if not out:
        raise ValueError("candidates is empty; give at least one experiment (a node, a set of nodes, or () for more "
                         "observational rows)")
    return out


def _simulator(X, mask, A, rng_seed):
    """A function ``(targets, n, scale, rng) -> [n, p]`` simulating from the DAG ``A`` with each node's
    least-squares intercept, weights and residual variance on its non-intervened rows of ``X``."""
    p = X.shape[1]
    order = []
    indeg = A.sum(0).astype(int)
    ready = [j for j in range(p) if indeg[j] == 0]
    while ready:
        j = ready.pop()
        order.append(j)
        for k in np.nonzero(A[j])[0]:
            indeg[k] -= 1
            if indeg[k] == 0:
                ready.append(int(k))
    params = {}
    for j in range(p):
        rows = np.ones(len(X), dtype=bool) if mask is None else ~mask[:, j]
        pa = np.nonzero(A[:, j])[0]
        Z = np.concatenate([np.ones((rows.sum(), 1)), X[rows][:, pa]], 1)
        coef, *_ = np.linalg.lstsq(Z, X[rows, j], rcond=None)
        resid = X[rows, j] - Z @ coef
        params[j] = (pa, coef, math.sqrt(max(resid.var(), 1e-12)))

    def simulate(targets, n, scale, rng):
        D = np.zeros((n, p))
        for j in order:
            if j in targets:
                D[:, j] = scale * rng.normal(size=n)
            else:
                pa, coef, sd = params[j]
                D[:, j] = coef[0] + D[:, pa] @ coef[1:] + sd * rng.normal(size=n)
        return D

    return simulate


def next_experiment(posterior, candidates=None, *, num_rows=50, query="graph", num_samples=32, seed=0,
                    intervention_scale=1.0):
    """Rank candidate experiments by their expected information gain (see the module docstring).

    :param posterior: an :class:`~pyro_dag.structure.ExactStructurePosterior` from
        :func:`~pyro_dag.structure.exact_posterior` with ``likelihood="bge"`` or ``"linear"`` (observational or
        interventional; its ``data`` and ``interventions`` are the data so far).
    :param candidates: the experiments to compare: a list whose items are a node (index or name), a set of nodes
        set together, or ``()`` (more observational rows). Default: every single node.
    :param int num_rows: rows each experiment would add.
    :param query: ``"graph"`` (the DAG) or an edge ``(i, j)`` (indices or names): what the information is about.
    :param int num_samples: Monte Carlo draws (DAG samples, one simulated data set each).
    :param int seed: seeds the DAG samples and the simulated data.
    :param float intervention_scale: standard deviation of the values the experiment sets, on the scale of
        ``posterior.data`` (standardised by default).
    :returns: list of :class:`ExperimentValue`, the highest expected information gain first.
    """
    if not isinstance(posterior, ExactStructurePosterior) or getattr(posterior, "_scoring", None) is None:
        raise TypeError("next_experiment needs an exact posterior from exact_posterior(..., likelihood='bge' or "
                        f"'linear'); got {type(posterior).__name__}")
    scoring = posterior._scoring
    if getattr(posterior, "target_model", None) is not None:
        raise ValueError("next_experiment does not handle environments with unknown targets yet (the simulated data "
                         "would be scored without them); fit the posterior with known targets")
    if scoring["likelihood"] not in ("bge", "linear") or scoring["graph_prior"] != "edge":
        raise ValueError(f"next_experiment computes the information gain for the 'bge' and 'linear' likelihoods under "
                         f"the edge prior; this posterior has likelihood={scoring['likelihood']!r}, "
                         f"graph_prior={scoring['graph_prior']!r}")
    if not (isinstance(num_rows, numbers.Integral) and num_rows >= 1):
        raise ValueError(f"num_rows must be a positive integer; got {num_rows!r}")
    if not (isinstance(num_samples, numbers.Integral) and num_samples >= 2):
        raise ValueError(f"num_samples must be an integer >= 2 (the standard error needs two); got {num_samples!r}")
    p, names = posterior.num_nodes, posterior.node_names
    sets = _candidate_sets(candidates, p, names)
    edge = None
    if query != "graph":
        if not (isinstance(query, tuple) and len(query) == 2):
            raise ValueError(f"query must be 'graph' or an edge (i, j) of indices or names; got {query!r}")
        ev = parse_evidence({query: True}, p, names)
        edge = next(iter(ev.edges))
    X = np.asarray(posterior.data, dtype=np.float64)
    mask = posterior.interventions
    config = posterior.config
    dags = posterior.sample(num_samples, seed).numpy().astype(np.int64)
    weights = np.int64(1) << np.arange(p, dtype=np.int64)
    pa_masks = (dags.transpose(0, 2, 1) @ weights)                          # [M, p] parent bitmasks
    rng_seeds = np.random.default_rng(seed).integers(2 ** 62, size=num_samples)
    sims = {}
    base = {True: None, False: None}
    if edge is not None:
        for present in (True, False):
            base[present] = posterior._conditioned(parse_evidence({edge: present}, p))._log_Z
    out = []
    old_mask = np.zeros(X.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
    for T in sets:
        gains = np.empty(num_samples)
        new_mask = np.zeros((num_rows, p), dtype=bool)
        new_mask[:, list(T)] = True
        all_mask = np.concatenate([old_mask, new_mask])
        for m in range(num_samples):
            key = dags[m].tobytes()
            if key not in sims:
                sims[key] = _simulator(X, mask, dags[m], None)
            D = sims[key](set(T), num_rows, float(intervention_scale), np.random.default_rng(rng_seeds[m]))
            Xn = torch.as_tensor(np.concatenate([X, D]))
            log_f = config.likelihood_scale * interventional_local_scores(scoring["likelihood"], Xn, all_mask,
                                                                          config)
            if scoring["max_parents"] is not None:
                log_f[:, mask_bits(np.arange(1 << p), p).sum(1) > scoring["max_parents"]] = -np.inf
            new = ExactStructurePosterior(log_f, posterior._q)
            if edge is None:
                rows = np.arange(p)
                ll_given = float((new._g[rows, pa_masks[m]] - posterior._g[rows, pa_masks[m]]).sum())
                gains[m] = ll_given - (new._log_Z - posterior._log_Z)
            else:
                present = bool(dags[m][edge])
                ll_given = new._conditioned(parse_evidence({edge: present}, p))._log_Z - base[present]
                gains[m] = ll_given - (new._log_Z - posterior._log_Z)
        label = tuple(names[k] for k in T) if names is not None else T
        out.append(ExperimentValue(label, float(gains.mean()), float(gains.std(ddof=1) / math.sqrt(num_samples))))
    return sorted(out, key=lambda v: -v.eig)
