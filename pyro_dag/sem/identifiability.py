"""Build-time checks of a latent-variable SEM declaration: structure, measurement model and identifiability.

A latent-variable SEM (Silva & Gramacy 2010, "Gaussian Process Structural Equation Models with Latent
Variables", UAI, arXiv:1002.4802, Sec. 2.1) has a DAG over latents and a *measurement model*: observed
indicators that are linear-Gaussian children of the latents. The measurement model is identified, up to the
scale and sign of each latent, under these sufficient conditions:

* **three-indicator rule**: the latent has at least three *unique* indicators (indicators with no other latent
  parent); Silva & Gramacy (2010, Sec. 2.1) after Bollen (1989, "Structural Equations with Latent Variables",
  Wiley, Ch. 7);
* **two non-Gaussian indicators**: two unique indicators suffice when both error terms are non-Gaussian
  (Silva & Gramacy 2010, Sec. 2.1, footnote 3, by overcomplete ICA, Hoyer et al. 2008);
* **two-indicator rule** (Bollen 1989, Ch. 7): two unique indicators suffice for a latent that is correlated
  with another latent, here one with a structural edge to or from another latent. It relies on that
  correlation being non-zero, so a latent that meets only this rule gets an :class:`IdentifiabilityWarning`.

The scale and sign of each latent are fixed by exactly one *anchor* indicator per latent, ``Y = X + ε`` (loading
1, intercept 0; Silva & Gramacy 2010, Sec. 2.1).

:func:`check_sem_declaration` resolves the declaration into a :class:`MeasurementSpec` or raises
:class:`SEMSpecError` naming the latent, indicator or argument and the fix.
"""
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import networkx as nx

__all__ = ["SEMSpecError", "IdentifiabilityWarning", "MeasurementSpec", "check_sem_declaration",
           "identifiability_report"]


class SEMSpecError(ValueError):
    """A latent-variable SEM declaration is malformed or its measurement model is not identified."""


class IdentifiabilityWarning(UserWarning):
    """A latent is identified only under an extra assumption (Bollen's two-indicator rule)."""


@dataclass
class MeasurementSpec:
    """A resolved SEM declaration.

    :ivar list latents: latent names in a topological order of the structure.
    :ivar dict parents: ``{latent: [latent parents]}`` in declaration order.
    :ivar list indicators: indicator (column) names, in declaration order, each once.
    :ivar dict indicator_parents: ``{indicator: [latent parents]}``.
    :ivar dict anchors: ``{latent: anchor indicator}`` (loading 1, intercept 0); empty entries allowed only with
        ``check_identifiability=False``.
    :ivar set non_gaussian: indicators whose errors are declared non-Gaussian.
    :ivar dict rules: ``{latent: "three-indicator" | "two-non-gaussian" | "two-indicator" | "unchecked"}``.
    """

    latents: List[str]
    parents: Dict[str, List[str]]
    indicators: List[str]
    indicator_parents: Dict[str, List[str]]
    anchors: Dict[str, str]
    non_gaussian: set = field(default_factory=set)
    rules: Dict[str, str] = field(default_factory=dict)

    def loading_pattern(self):
        """``[(indicator, latent, fixed)]`` for every loading, ``fixed`` True for anchors."""
        anchor_of = {a: x for x, a in self.anchors.items()}
        return [(y, x, anchor_of.get(y) == x) for y in self.indicators for x in self.indicator_parents[y]]


def _as_list(value, what):
    if isinstance(value, str):
        return [value]
    try:
        return list(value)
    except TypeError:
        raise SEMSpecError(f"{what} must be a list of names, got {value!r}") from None


def identifiability_report(latents, structure, indicator_parents, non_gaussian):
    """Which rule identifies each latent.

    :param list latents: latent names. :param networkx.DiGraph structure: the latent DAG.
    :param dict indicator_parents: ``{indicator: [latent parents]}``.
    :param set non_gaussian: indicators with non-Gaussian errors.
    :returns: ``{latent: (rule or None, [unique indicators])}`` with rule ``"three-indicator"``,
        ``"two-non-gaussian"``, ``"two-indicator"`` or ``None`` (not identified by any of them).
    """
    out = {}
    for x in latents:
        unique = [y for y, ps in indicator_parents.items() if ps == [x]]
        neighbours = set(structure.predecessors(x)) | set(structure.successors(x))
        if len(unique) >= 3:
            rule = "three-indicator"
        elif len(unique) == 2 and all(y in non_gaussian for y in unique):
            rule = "two-non-gaussian"
        elif len(unique) == 2 and neighbours:
            rule = "two-indicator"
        else:
            rule = None
        out[x] = (rule, unique)
    return out


def check_sem_declaration(structure, indicators, anchors=None, non_gaussian=(), measurement="sparse",
                          check_identifiability=True, columns=None):
    """Validate a latent SEM declaration and resolve it.

    :param networkx.DiGraph structure: DAG over the latents (latents without edges may be omitted: every key
        of ``indicators`` is a latent).
    :param dict indicators: ``{latent: [indicator column names]}``; an indicator listed under two latents has
        two latent parents (a cross-loading), allowed only with ``check_identifiability=False``.
    :param dict anchors: ``{latent: indicator}``, the one scale constraint per latent (loading 1, intercept 0).
        ``None``: the first listed indicator of each latent.
    :param non_gaussian: indicators whose errors are non-Gaussian (Student-t in
        :class:`~pyro_dag.sem.LatentSEM`).
    :param str measurement: ``"sparse"`` (each indicator loads on the latents it is listed under) or
        ``"dense"`` (every indicator loads on every latent, the unidentified model Silva & Gramacy 2010, Sec. 5
        compare against; requires ``check_identifiability=False``).
    :param bool check_identifiability: apply the identifiability rules (module docstring); ``False`` is the
        explicit opt-out for unidentified measurement models.
    :param columns: optional column names of the data, to check that every indicator is present.
    :returns: :class:`MeasurementSpec`.
    :raises SEMSpecError: naming the latent / indicator / argument and the fix.
    :warns IdentifiabilityWarning: for a latent identified only by the two-indicator rule.
    """
    if not isinstance(structure, nx.DiGraph):
        raise SEMSpecError(f"structure must be a networkx.DiGraph over the latents, got {type(structure).__name__}")
    if not isinstance(indicators, dict) or not indicators:
        raise SEMSpecError("indicators must be a non-empty dict {latent: [indicator columns]}, got "
                           f"{indicators!r}")
    if measurement not in ("sparse", "dense"):
        raise SEMSpecError(f"measurement must be 'sparse' or 'dense', got {measurement!r}")
    graph = nx.DiGraph(structure)
    graph.add_nodes_from(indicators)
    for v in graph.nodes:
        if not isinstance(v, str) or not v or "." in v:
            raise SEMSpecError(f"latent names must be non-empty strings without '.', got {v!r}")
    try:
        cycle = nx.find_cycle(graph)
    except nx.NetworkXNoCycle:
        cycle = None
    if cycle:
        path = " -> ".join([u for u, _ in cycle] + [cycle[0][0]])
        raise SEMSpecError(f"the latent structure has a cycle: {path}; a structural equation model needs a DAG "
                           "over the latents: remove one of these edges")
    missing = [x for x in graph.nodes if x not in indicators or not _as_list(indicators[x], f"indicators[{x!r}]")]
    if missing:
        raise SEMSpecError(f"latent {missing[0]!r} has no indicators; give it observed indicators in "
                           f"indicators={{{missing[0]!r}: [...]}} or remove it from the structure")
    indicator_parents, order = {}, []
    for x, ys in indicators.items():
        ys = _as_list(ys, f"indicators[{x!r}]")
        if len(set(ys)) != len(ys):
            raise SEMSpecError(f"indicators[{x!r}] lists an indicator twice: {ys}")
        for y in ys:
            if not isinstance(y, str):
                raise SEMSpecError(f"indicator names must be strings (column names), got {y!r} under {x!r}")
            if y in graph.nodes:
                raise SEMSpecError(f"{y!r} is both a latent and an indicator; rename the column or the latent")
            if y not in indicator_parents:
                indicator_parents[y] = []
                order.append(y)
            indicator_parents[y].append(x)
    if columns is not None:
        cols = set(columns)
        absent = [y for y in order if y not in cols]
        if absent:
            raise SEMSpecError(f"indicator {absent[0]!r} is not a column of the data (columns: {sorted(cols)})")
    non_gaussian = set(_as_list(non_gaussian, "non_gaussian"))
    unknown = non_gaussian - set(order)
    if unknown:
        raise SEMSpecError(f"non_gaussian names {sorted(unknown)}, which are not indicators")
    latents = list(nx.topological_sort(graph))
    cross = [(y, ps) for y, ps in indicator_parents.items() if len(ps) > 1]
    if check_identifiability:
        if measurement == "dense":
            raise SEMSpecError("measurement='dense' (every indicator loads on every latent) is not identified; "
                               "pass check_identifiability=False to fit it anyway")
        if cross:
            y, ps = cross[0]
            raise SEMSpecError(f"indicator {y!r} has two latent parents {ps}; identification needs unique "
                               "indicators (one latent parent each). List it under one latent, or pass "
                               "check_identifiability=False for an unidentified measurement model")
    if measurement == "dense":
        indicator_parents = {y: list(latents) for y in order}
    # anchors
    if anchors is None:
        anchors = {} if measurement == "dense" else {x: _as_list(indicators[x], "")[0] for x in indicators}
    if not isinstance(anchors, dict):
        raise SEMSpecError(f"anchors must be a dict {{latent: indicator}}, got {anchors!r}")
    for x, a in anchors.items():
        if x not in graph.nodes:
            raise SEMSpecError(f"anchors names {x!r}, which is not a latent (latents: {latents})")
        if not isinstance(a, str):
            raise SEMSpecError(f"anchors[{x!r}] must be one indicator name (exactly one scale constraint per "
                               f"latent), got {a!r}")
        if a not in _as_list(indicators[x], ""):
            raise SEMSpecError(f"anchor {a!r} of latent {x!r} is not among its indicators "
                               f"{_as_list(indicators[x], '')}; choose one of them")
    dup = {}
    for x, a in anchors.items():
        if a in dup:
            raise SEMSpecError(f"indicator {a!r} anchors both {dup[a]!r} and {x!r}; each latent needs its own anchor")
        dup[a] = x
    rules = {x: "unchecked" for x in latents}
    if check_identifiability:
        no_anchor = [x for x in latents if x not in anchors]
        if no_anchor:
            raise SEMSpecError(f"latent {no_anchor[0]!r} has no scale constraint; name its anchor indicator in "
                               f"anchors={{{no_anchor[0]!r}: ...}} (exactly one per latent)")
        report = identifiability_report(latents, graph, indicator_parents, non_gaussian)
        for x in latents:
            rule, unique = report[x]
            if rule is None:
                if len(unique) <= 1:
                    why = f"has {len(unique)} indicator{'s' if len(unique) != 1 else ''}"
                else:
                    why = ("has only two indicators, with Gaussian errors, and no structural edge to another "
                           "latent")
                raise SEMSpecError(
                    f"latent {x!r} {why} ({unique}), so its measurement model is not identified: give it at "
                    "least three indicators (Silva & Gramacy 2010, Sec. 2.1), or two with non-Gaussian errors "
                    "(non_gaussian=[...]), or two and a structural edge to another latent (Bollen 1989); or pass "
                    "check_identifiability=False")
            if rule == "two-indicator":
                warnings.warn(f"latent {x!r} has only two indicators {unique}: it is identified by the "
                              "two-indicator rule (Bollen 1989), which needs its correlation with its structural "
                              "neighbours to be non-zero", IdentifiabilityWarning, stacklevel=3)
            rules[x] = rule
    parents = {x: list(graph.predecessors(x)) for x in latents}
    return MeasurementSpec(latents=latents, parents=parents, indicators=order,
                           indicator_parents={y: list(indicator_parents[y]) for y in order}, anchors=dict(anchors),
                           non_gaussian=non_gaussian, rules=rules)
