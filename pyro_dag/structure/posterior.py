"""The query interface every posterior over DAGs offers: :class:`DAGPosterior`.

Evidence is a dict of edges to presence, ``{(0, 1): True, ("PKC", "Raf"): False}`` (node indices or names; see
:func:`~pyro_dag.structure.evidence.parse_evidence`). The conditional queries are those of Wang, Wicker &
Kwiatkowska 2022 (*Tractable Uncertainty for Structure Learning*, ICML, §4.4): the probability of a conjunction of
edge presences and absences, conditional edge probabilities, the most probable DAG, conditional samples and
Bayesian-averaged causal effects. Posteriors represented by samples answer them from their samples (with the
estimate's standard error); :class:`~pyro_dag.structure.ExactStructurePosterior` and
:class:`~pyro_dag.structure.OrderSPN` answer them exactly.
"""
import abc
import math
import numbers
import warnings

import numpy as np
import torch

from .causal import bge_mean_weights, total_effects
from .evidence import parse_evidence
from .map_dag import MAPTieWarning
from .mechanisms import BGeSEM

__all__ = ["DAGPosterior"]


def _check_num_samples(num_samples):
    if not isinstance(num_samples, numbers.Integral) or isinstance(num_samples, bool) or num_samples < 1:
        raise ValueError(f"num_samples must be a positive integer; got {num_samples!r}")


class DAGPosterior(abc.ABC):
    """A posterior distribution over DAGs on ``p`` nodes (``A[i, j] = 1``: the edge ``i -> j``).

    Implemented by :class:`~pyro_dag.structure.StructurePosterior` (the variational fit of
    :func:`~pyro_dag.structure.fit`), :class:`~pyro_dag.structure.ExactStructurePosterior` (the exact posterior of
    :func:`~pyro_dag.structure.exact_posterior`) and :class:`~pyro_dag.structure.OrderSPN` (the order circuit of
    :func:`~pyro_dag.structure.order_spn`), so that code written against one runs on the others:

    * :meth:`edge_probs` ``(num_samples=1000, seed=None, *, given=None)`` -> ``[p, p]`` tensor,
      ``P[i, j] = P(i -> j | D, given)``;
    * :meth:`sample` ``(num_samples=1000, seed=None, *, given=None)`` -> ``[num_samples, p, p]`` 0/1 tensor, every
      sample acyclic (and satisfying ``given``);
    * :meth:`prob` ``(evidence)`` -> ``P(evidence | D)``; :meth:`map_dag` ``(given=None, *, return_ties=False)``
      -> the most probable DAG (an estimate, or for the exact posteriors the most probable DAG of the Markov
      equivalence class of the most probable (order, DAG) pair; a tie is reported, see each class);
      :meth:`causal_effects` ``(given=None)`` -> ``[p, p]`` expected total causal effects;
      :meth:`held_out_log_likelihood`; :meth:`to_networkx` ``(threshold=0.5, num_samples=1000, *, given=None)``.

    ``num_samples`` is the Monte Carlo budget where the posterior needs one (exact posteriors ignore it where the
    answer is exact); ``seed`` makes a call reproducible and independent of the global random state, ``None`` draws
    from torch's global generator. ``return_stderr=True`` also returns the standard error of the estimate (zero
    where the answer is exact). The defaults here answer every query from :meth:`sample`; exact posteriors override
    them.

    :ivar int num_nodes: ``p``.
    :ivar list node_names: column names, or ``None`` (then the nodes are called ``"0"``, ``"1"``, ...).
    """

    num_nodes = None
    node_names = None
    #: ``[N, p]`` boolean mask of the known perfect interventions in ``data`` (``None``: observational data)
    interventions = None

    @abc.abstractmethod
    def edge_probs(self, num_samples=1000, seed=None, *, given=None, return_stderr=False):
        """``[p, p]`` posterior edge probabilities ``P(i -> j | D, given)`` (a zero diagonal)."""

    @abc.abstractmethod
    def sample(self, num_samples=1000, seed=None, *, given=None):
        """``[num_samples, p, p]`` DAG samples (0/1 entries), every one acyclic and satisfying ``given``."""

    # ----------------------------------------------------------------------------------------- evidence helpers
    def parse_evidence(self, evidence, condition=False):
        """:func:`~pyro_dag.structure.evidence.parse_evidence` with this posterior's nodes and names.

        :param bool condition: the evidence is to be conditioned on: refuse it, naming the cycle, when its required
            edges form one (no DAG satisfies it), before any work is done.
        """
        ev = parse_evidence(evidence, self.num_nodes, self.node_names)
        cycle = ev.required_cycle() if condition else None
        if cycle is not None:
            names = self.node_names or [str(k) for k in range(self.num_nodes)]
            shown = " -> ".join(str(names[k]) for k in cycle)
            raise ValueError(f"the evidence requires the edges {shown}, which form a cycle: no DAG satisfies it, so "
                             "nothing can be conditioned on it (its probability is 0); drop one of these edges")
        return ev

    def _unconditional_samples(self, num_samples, seed):
        return self.sample(num_samples, seed)

    def _matching_samples(self, ev, num_samples, seed):
        S = self._unconditional_samples(num_samples, seed)
        keep = ev.holds(S)
        return S, keep

    # ----------------------------------------------------------------------------------- sample-based defaults
    def prob(self, evidence, num_samples=1000, seed=None, *, return_stderr=False):
        """``P(evidence | D)``: the probability that a DAG has every listed edge present or absent as given.

        Sample-based default: the fraction of ``num_samples`` posterior samples satisfying the evidence, standard
        error ``sqrt(P (1 - P) / num_samples)``.
        """
        _check_num_samples(num_samples)
        ev = self.parse_evidence(evidence)
        if not ev:
            return (1.0, 0.0) if return_stderr else 1.0
        if ev.required_cycle() is not None:  # no DAG satisfies it: exactly 0, without drawing a sample
            return (0.0, 0.0) if return_stderr else 0.0
        _, keep = self._matching_samples(ev, num_samples, seed)
        P = float(keep.double().mean())
        return (P, math.sqrt(P * (1 - P) / num_samples)) if return_stderr else P

    def _sample_conditional_edge_probs(self, ev, num_samples, seed, return_stderr):
        self.parse_evidence(ev, condition=True)
        S, keep = self._matching_samples(ev, num_samples, seed)
        n = int(keep.sum())
        if n == 0:
            raise ValueError(f"none of the {num_samples} posterior samples satisfies the evidence {ev.edges} (the "
                             "sample-based estimate has no coverage there): draw more samples or use an exact "
                             "posterior (exact_posterior, order_spn)")
        S = S[keep]
        P = (S if S.is_floating_point() else S.double()).mean(0)
        if return_stderr:
            return P, (P * (1 - P) / n).sqrt()
        return P

    def map_dag(self, given=None, num_samples=1000, seed=None, *, return_ties=False):
        """The most probable DAG (``[p, p]`` 0/1 float64 tensor) given the evidence ``given``.

        Sample-based default: the most frequent of ``num_samples`` posterior samples that satisfy ``given`` (an
        estimate of the most probable DAG). When several DAGs share the top count the estimate cannot tell them
        apart: a :class:`~pyro_dag.structure.map_dag.MAPTieWarning` says so and the first of them (in lexicographic
        order of the flattened matrices) is returned.

        :param bool return_ties: also return ``[k, p, p]``, the ``k`` DAGs sharing the top count (the returned one
            first).
        """
        _check_num_samples(num_samples)
        ev = self.parse_evidence(given, condition=True)
        S, keep = self._matching_samples(ev, num_samples, seed)
        if not bool(keep.any()):
            raise ValueError(f"none of the {num_samples} posterior samples satisfies the evidence {ev.edges}")
        S = S[keep]
        uniq, counts = torch.unique(S.reshape(S.shape[0], -1), dim=0, return_counts=True)
        ties = uniq[counts == counts.max()].reshape(-1, self.num_nodes, self.num_nodes).double()
        if len(ties) > 1:
            warnings.warn(f"map_dag: {len(ties)} DAGs are each the most frequent of the {S.shape[0]} samples that "
                          f"satisfy the evidence ({int(counts.max())} draws each), so the estimate cannot tell them "
                          "apart; the first is returned. Draw more samples (num_samples=...) or get them all with "
                          "map_dag(..., return_ties=True)", MAPTieWarning, stacklevel=2)
        return (ties[0], ties) if return_ties else ties[0]

    def _effect_interventions(self, data):
        """The interventions that go with the data of an effect query: the posterior's own mask for its own data
        (``data=None``), none for data a caller passes."""
        if getattr(self, "target_model", None) is not None:
            raise NotImplementedError("causal_effects with unknown intervention targets is not implemented: the "
                                      "weights would have to be averaged over the targets too; fit with known targets "
                                      "(or drop the environments with unknown ones) for effects")
        return self.interventions if data is None else None

    def _data_for_effects(self, data):
        X = data if data is not None else getattr(self, "data", None)
        if X is None:
            raise ValueError("causal_effects needs the data the posterior was fitted on: pass data=[N, p]")
        return self._complete_rows(X, "data", f"causal_effects needs the [N, {self.num_nodes}] data the posterior "
                                   "was fitted on")

    def _complete_rows(self, X, name, need):
        """``X`` as a float64 ``[M, p]`` tensor, checked before any DAG is drawn: ``p`` columns, every value finite.

        :param str name: the argument, as the message names it. :param str need: what the query needs.
        """
        if hasattr(X, "columns") and self.node_names is not None:  # a DataFrame: its columns by name
            cols = [str(c) for c in X.columns]
            names = [str(v) for v in self.node_names]
            if sorted(cols) != sorted(names):
                raise ValueError(f"{name} has the columns {cols}, the posterior's variables are {names}; pass a "
                                 "DataFrame with those columns")
            X = X[[X.columns[cols.index(v)] for v in names]]
        try:
            X = torch.as_tensor(np.array(X.to_numpy() if hasattr(X, "to_numpy") else X, dtype=np.float64)
                                if not torch.is_tensor(X) else X, dtype=torch.float64)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{name} must be a numeric [M, {self.num_nodes}] array ({need}); {e}") from None
        if X.dim() != 2 or X.shape[1] != self.num_nodes:
            raise ValueError(f"{name} must be [M, {self.num_nodes}] ({need}); got shape {tuple(X.shape)}")
        bad = (~torch.isfinite(X)).any(1).nonzero().flatten()
        if len(bad):
            raise ValueError(f"{name} has NaN or infinite values in {len(bad)} of its {X.shape[0]} rows (rows "
                             f"{bad[:5].tolist()}{' ...' if len(bad) > 5 else ''}): the BGe likelihood needs complete "
                             "rows; drop or impute them")
        return X

    def causal_effects(self, num_samples=1000, seed=None, *, given=None, data=None, return_stderr=False):
        """``[p, p]`` Bayesian-averaged total causal effects ``BCE(i, j) = E[(I - B)^{-1}]_ij`` (diagonal 1) of a
        linear-Gaussian model, ``B`` the BGe posterior-mean weights of each DAG (Wang, Wicker & Kwiatkowska 2022,
        §4.4, Prop. 4; :mod:`~pyro_dag.structure.causal`).

        Sample-based default: the average over ``num_samples`` DAG samples given ``given``; standard error of
        the mean per entry with ``return_stderr``. ``data``: ``[N, p]`` data (default: the posterior's ``data``).
        """
        _check_num_samples(num_samples)
        X = self._data_for_effects(data)
        S = self.sample(num_samples, seed, given=given)
        E = total_effects(bge_mean_weights(X, S, self._effect_interventions(data)))
        mean = E.mean(0)
        if return_stderr:
            return mean, E.std(0) / math.sqrt(num_samples)
        return mean

    def held_out_log_likelihood(self, X_test, num_samples=1000, seed=None, *, given=None, return_stderr=False):
        """``E_{G~q}[log p(X_test | G)]`` with the BGe marginal likelihood of the test data
        (:class:`~pyro_dag.structure.BGeSEM`, prior-predictive as in Wang, Wicker & Kwiatkowska 2022, §6), over
        ``num_samples`` DAG samples (given ``given``). ``X_test``: ``[M, p]``."""
        _check_num_samples(num_samples)
        X = self._complete_rows(X_test, "X_test", "test cases of the posterior's variables")
        S = self.sample(num_samples, seed, given=given).double()
        ll = torch.cat([BGeSEM(self.num_nodes).node_scores(X, c).sum(-1) for c in S.split(256)])
        if return_stderr:
            return float(ll.mean()), float(ll.std() / math.sqrt(num_samples))
        return float(ll.mean())

    def to_networkx(self, threshold=0.5, num_samples=1000, *, given=None):
        """The posterior-mean graph: a :class:`networkx.DiGraph` over the node names with the edges of
        ``P(i -> j | given) > threshold`` and their probability as the edge attribute ``prob`` (it may contain
        cycles)."""
        import networkx as nx

        P = self.edge_probs(num_samples, given=given).cpu()
        names = self.node_names or [str(i) for i in range(self.num_nodes)]
        g = nx.DiGraph()
        g.add_nodes_from(names)
        for i in range(self.num_nodes):
            for j in range(self.num_nodes):
                if i != j and P[i, j] > threshold:
                    g.add_edge(names[i], names[j], prob=float(P[i, j]))
        return g
