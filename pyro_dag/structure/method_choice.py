"""Which posterior :func:`~pyro_dag.structure.fit` computes when it is given no method-specific option: by the
number of variables ``p`` and rows ``n``.

* ``p ≤`` :data:`EXACT_AUTO_NODES` with a collapsed likelihood (``"linear"``, ``"bge"``): the exact posterior
  (:func:`~pyro_dag.structure.exact_posterior`, the order dynamic programme of Koivisto & Sood 2004): no
  approximation, seconds at this size.
* ``p ≤`` :data:`HYBRID_AUTO_NODES` with a collapsed likelihood and enough rows for the skeleton's Fisher-z tests
  (``n ≥ p +`` :data:`HYBRID_MIN_EXTRA_ROWS`): the hybrid posterior (:func:`~pyro_dag.structure.hybrid_posterior`,
  Kuipers, Suter & Moffa 2022): on ALARM (``p = 37``) at ``n = 500`` and ``2000`` its MAP CPDAG was 0 edges off in
  23-27 CPU s where SVI-DAG's defaults were 58 off in 931 CPU s (``benchmarks/structure_networks.py``).
* otherwise SVI-DAG (Zinage 2026, arXiv:2608.04930), which also carries the likelihoods the others do not score
  (``"linear-sites"``, ``"mlp"``).

Any SVI-DAG setting (a :class:`~pyro_dag.structure.FitConfig` field that is not a model setting) chooses SVI-DAG.
"""
from typing import NamedTuple

__all__ = ["EXACT_AUTO_NODES", "HYBRID_AUTO_NODES", "HYBRID_MIN_EXTRA_ROWS", "MethodChoice", "choose_method"]

#: Largest ``p`` for which ``fit`` computes the exact posterior by default.
EXACT_AUTO_NODES = 12
#: Largest ``p`` for which ``fit`` computes the hybrid posterior by default (candidate tables of ``2^16`` parent
#: sets per node).
HYBRID_AUTO_NODES = 200
#: Rows beyond ``p`` that the hybrid's skeleton tests need (a Fisher-z test conditioning on ``k`` variables has
#: ``n - k - 3`` degrees of freedom).
HYBRID_MIN_EXTRA_ROWS = 10
#: Likelihoods the exact and the hybrid posteriors score (with the parameters integrated out).
COLLAPSED = ("linear", "bge")


class MethodChoice(NamedTuple):
    """``method``: ``"exact"``, ``"hybrid"`` or ``"svi"``; ``reason``: one line saying why."""

    method: str
    reason: str


def choose_method(p, n, likelihood, svi_settings=()):
    """The method of :func:`~pyro_dag.structure.fit` for ``p`` variables, ``n`` rows and ``likelihood``
    (module docstring); ``svi_settings``: the SVI-DAG settings the caller gave (any makes it SVI-DAG).

    :returns: a :class:`MethodChoice`.
    """
    if svi_settings:
        return MethodChoice("svi", f"SVI-DAG settings given ({', '.join(sorted(svi_settings))})")
    if likelihood not in COLLAPSED:
        return MethodChoice("svi", f"likelihood {likelihood!r} is scored by SVI-DAG only")
    if p <= EXACT_AUTO_NODES:
        return MethodChoice("exact", f"p = {p} <= {EXACT_AUTO_NODES}: the exact posterior")
    if p <= HYBRID_AUTO_NODES and n >= p + HYBRID_MIN_EXTRA_ROWS:
        return MethodChoice("hybrid", f"p = {p} <= {HYBRID_AUTO_NODES} with n = {n} rows: the hybrid posterior "
                                      "(PC skeleton, candidate parents, exact DP or order MCMC)")
    why = f"p = {p} > {HYBRID_AUTO_NODES}" if p > HYBRID_AUTO_NODES else f"n = {n} < p + {HYBRID_MIN_EXTRA_ROWS}"
    return MethodChoice("svi", f"{why}: SVI-DAG")
