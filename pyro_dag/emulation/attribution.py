"""Shapley attribution of a node's prediction to its non-root parents (the normalised Shapley shares of the
lower fidelities in Perlino et al. 2026, arXiv:2607.09645, Sec. 7, Fig. 7).

The players are the node's non-root parents (the lower fidelities); the root parents (the design input ``x``) are
held at the test case. For a coalition ``S`` of parents the value is a moment of the node's predictive at the case
when the parents in ``S`` take their posterior draws at the case and the others are replaced by a reference; the
Shapley value of parent ``p`` is exact over all ``2^k`` coalitions (Shapley 1953)::

    φ_p = Σ_{S ⊆ P \\ {p}} |S|! (k - |S| - 1)! / k! · [v(S ∪ {p}) - v(S)],

and satisfies efficiency, ``Σ_p φ_p = v(P) - v(∅)``. The paper does not define its value function; here:

* **mean** (``v_mean(S)`` = the node's predictive mean): excluded parents are **marginalised over a background**
  (interventional Shapley, Janzing, Minorics & Blöbaum 2020; the baseline of SHAP): in each posterior sample an
  excluded parent takes its own draw at a background case chosen at random (default background: the given cases).
  ``φ_p`` is then how far parent ``p``'s value at the case moves the node's mean away from its average.
* **variance** (``v_var(S)`` = the node's predictive variance, law of total variance over the samples): excluded
  parents are **held at their posterior mean at the case**, so only the uncertainty of the parents in ``S`` is
  propagated; ``v_var(∅)`` is the node's own variance given mean parents and ``φ_p`` is the part of the predictive
  variance due to the uncertainty of parent ``p``.

Both references are options (``mean_reference``, ``variance_reference``: ``"marginal"`` or ``"mean"``). Every
coalition uses the same posterior draws (common random numbers), so the efficiency identity holds exactly.
"""
import itertools
import math
from dataclasses import dataclass

import torch

from ..dgp.handoff import standard_normal, suspended

__all__ = ["shapley", "shapley_values", "ShapleyResult"]

REFERENCES = ("marginal", "mean")


def shapley_values(value, players):
    """Exact Shapley values of a cooperative game (Shapley 1953).

    :param callable value: ``value(frozenset of players) -> tensor`` (any shape, the same for every coalition).
    :param list players: the ``k`` players.
    :returns: ``(phi [..., k] tensor, values {frozenset: tensor})``: the players' values along the last dimension,
        and the value of every coalition.
    """
    players = list(players)
    k = len(players)
    if k == 0:
        raise ValueError("shapley_values needs at least one player")
    values = {}
    for size in range(k + 1):
        for c in itertools.combinations(players, size):
            values[frozenset(c)] = torch.as_tensor(value(frozenset(c)))
    phi = []
    for p in players:
        others = [q for q in players if q != p]
        total = 0.0
        for size in range(k):
            weight = math.factorial(size) * math.factorial(k - size - 1) / math.factorial(k)
            for c in itertools.combinations(others, size):
                S = frozenset(c)
                total = total + weight * (values[S | {p}] - values[S])
        phi.append(total)
    return torch.stack([torch.as_tensor(v) for v in phi], dim=-1), values


def normalised_shares(phi):
    """``|φ_p| / Σ_q |φ_q|`` along the last dimension (``1/k`` each where every ``φ`` is 0)."""
    a = phi.abs()
    s = a.sum(-1, keepdim=True)
    return torch.where(s > 0, a / s.clamp_min(torch.finfo(a.dtype).tiny), torch.full_like(a, 1.0 / a.shape[-1]))


@dataclass
class ShapleyResult:
    """Shapley attribution of ``node`` to its non-root parents ``players`` at ``n`` cases.

    :ivar list players: the parents (order of the last dimension).
    :ivar mean: ``[n, k]`` Shapley values of the predictive mean. :ivar variance: ``[n, k]`` of the predictive variance.
    :ivar mean_share: ``[n, k]`` normalised shares ``|φ_p| / Σ_q |φ_q|`` of the mean (rows sum to 1).
    :ivar variance_share: ``[n, k]`` of the variance.
    :ivar dict mean_values: ``{frozenset: [n]}`` coalition values of the mean. :ivar dict variance_values: of the
        variance. :ivar dict settings: the references and the number of samples.
    """

    players: list
    mean: torch.Tensor
    variance: torch.Tensor
    mean_share: torch.Tensor
    variance_share: torch.Tensor
    mean_values: dict
    variance_values: dict
    settings: dict


def _structured_part(guide):
    from ..infer.autoguide import AutoStructuredGuide

    if isinstance(guide, AutoStructuredGuide):
        return guide
    for part in getattr(guide, "__iter__", lambda: iter(()))():
        if isinstance(part, AutoStructuredGuide):
            return part
    raise ValueError(f"shapley needs an AutoStructuredGuide (alone or in an AutoGuideList), got {type(guide).__name__}")


@torch.no_grad()
def shapley(model, guide, node, inputs, num_samples=256, background=None, mean_reference="marginal",
            variance_reference="mean", seed=0):
    """Exact Shapley attribution of ``node``'s predictive mean and variance to its non-root parents (see the module
    docstring for the value functions and the treatment of excluded parents).

    :param model: a trained :class:`~pyro_dag.DAGDGP` without latent inputs.
    :param guide: its :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (DAG-VI or DAG-SVI).
    :param str node: the node to explain (e.g. the high fidelity).
    :param dict inputs: ``{root: [n, d_r]}`` the cases to explain (in the model's input units).
    :param int num_samples: posterior draws ``S`` per case.
    :param dict background: ``{root: [m, d_r]}`` background cases of the ``"marginal"`` reference (default:
        ``inputs``).
    :param str mean_reference: ``"marginal"`` (default) or ``"mean"``. :param str variance_reference: ``"mean"``
        (default) or ``"marginal"``.
    :param int seed: seed of the draws (the global RNG state is restored afterwards).
    :returns: :class:`ShapleyResult` with ``[n, k]`` tensors.
    :raises ValueError: for an unknown node, a node without non-root parents, or an unknown reference.
    """
    if node not in getattr(model, "gp_nodes", ()):
        raise ValueError(f"shapley: {node!r} is not a GP node of the model (GP nodes: {list(model.gp_nodes)})")
    if model.latent_inputs:
        raise ValueError("shapley: models with latent inputs are not supported")
    players = [p for p in model.parents[node] if p in model.gp_nodes]
    if not players:
        raise ValueError(f"shapley: node {node!r} has no non-root parent to attribute to (its parents are "
                         f"{model.parents[node]}); the players are the lower fidelities it refines")
    for name, ref in (("mean_reference", mean_reference), ("variance_reference", variance_reference)):
        if ref not in REFERENCES:
            raise ValueError(f"shapley: {name} must be one of {REFERENCES}, got {ref!r}")
    if not model.is_setup:
        raise RuntimeError("shapley: the model is not set up yet: train it first")
    structured = _structured_part(guide)
    X, n, _ = model.checked_arguments(inputs)
    if background is None:
        Xb, m = X, n
    else:
        Xb, m, _ = model.checked_arguments(background)
    Xall = {r: torch.cat([X[r], Xb[r]], 0) for r in model.root_nodes}
    S = int(num_samples)
    with torch.random.fork_rng(), suspended():
        torch.manual_seed(seed)
        posterior = structured.inducing_posterior()
        state = posterior.ancestral_state()
        cache = model.cholesky_cache()
        values = dict(Xall)
        for w in model.topo_nodes:
            if w == node:
                break
            a, r = model.node_conditional(w, values, cache)
            loc, cov = state.predict(w, a, r)
            var = cov[..., 0, 0] if cov.shape[-1] == 1 else cov.diagonal(dim1=-2, dim2=-1)
            eps = standard_normal((S,) + loc.shape[-2:], loc)
            if cov.shape[-1] == 1:
                f = loc + var[..., None].clamp_min(0).sqrt() * eps
            else:
                f = loc + (torch.linalg.cholesky(cov) @ eps.unsqueeze(-1)).squeeze(-1)
            state.update(w, a, r, f)
            values[w] = f.expand((S,) + f.shape[-2:])
        pick = torch.randint(n, n + m, (S, n + m), device=model.device)    # background case per sample and case
        refs = {"mean": {p: values[p].mean(0, keepdim=True).expand_as(values[p]) for p in players},
                "marginal": {p: torch.gather(values[p], 1, pick[..., None].expand(-1, -1, values[p].shape[-1]))
                             for p in players}}

        def moments(coalition, ref):
            vals = dict(values)
            for p in players:
                if p not in coalition:
                    vals[p] = refs[ref][p]
            a, r = model.node_conditional(node, vals, cache)
            loc, cov = state.predict(node, a, r)
            loc = loc[..., 0].expand(S, n + m)[:, :n]                            # [S, n]
            var = cov[..., 0, 0].expand(S, n + m)[:, :n]
            return loc.mean(0), loc.var(0, unbiased=False) + var.mean(0)

        phi_mean, v_mean = shapley_values(lambda c: moments(c, mean_reference)[0], players)
        phi_var, v_var = shapley_values(lambda c: moments(c, variance_reference)[1], players)
    return ShapleyResult(players, phi_mean, phi_var, normalised_shares(phi_mean), normalised_shares(phi_var),
                         v_mean, v_var, {"num_samples": S, "mean_reference": mean_reference,
                                         "variance_reference": variance_reference, "seed": seed})
