"""Prior-collapse diagnostics for deep GPs on DAGs (Perlino et al. 2026, arXiv:2607.09645, Sec. 4).

Fix two cases ``a ≠ b``; the contrast at node ``w`` is ``Δ_w = F_w^{(a)} - F_w^{(b)}``. Along a deep DAG the
prior may *collapse*: ``max_{w ∈ A_ℓ} ||Δ_w|| → 0`` over the slices ``A_ℓ`` of the progressive antichain
decomposition, so that deep nodes forget the inputs. The paper's sufficient conditions against it are exposed
here as functions of the graph and the kernels:

* :func:`antichain_decomposition` -- the slices ``A_0, ..., A_{h-1}`` (Prop. 1);
* :func:`contrast_covariance`, :func:`separation_constant` -- ``Γ_w(a, b)`` and a separation constant ``v⋆``
  (Sec. 4, definition of a ``v⋆``-separating node);
* :func:`p_eps`, :func:`theorem1_bound` -- ``p_ε = 2Φ(-ε/√v⋆)`` (Eq. (12)) and the Theorem 1 frequency bound
  ``1 - (1 - p_ε)^s``;
* :func:`is_root_retaining` -- does a node's kernel keep an additive root-only component (Remark 2, Prop. 3,
  Prop. 5), which makes it separating whatever its latent parents do;
* :func:`product_fusion_contraction_check` -- the sufficient contraction condition ``d τ² k̄ / λ² < 1`` of
  product (SE) fusion (Prop. 4, Cor. 4);
* :func:`branching_threshold_probability`, :func:`branching_survival_bound` -- the one-step threshold
  probability ``p_t`` and the Galton-Watson survival bound of ``b``-ary branching (Prop. 6, Cor. 5);
* :func:`gaussian_refresh` -- the posterior contrast of an observed internal node, Eq. (9) (Cor. 6);
* :func:`gaussian_exceedance`, :func:`route_retention_factor`, :func:`theorem2_bound` -- the exact source
  strength ``q_j``, the additive-route factor ``ρ_γ(ε)`` (Def. 6, Prop. 7) and the bound of Theorem 2, Eq. (8);
* :func:`check_prior_collapse` -- warns (:class:`PriorCollapseWarning`) when a deep DAG has a long stretch of
  slices without a root-retaining node, recommending :class:`~pyro_dag.kernels.InputConnected`.
"""
import warnings
from collections import namedtuple

import networkx as nx
import torch

__all__ = ["PriorCollapseWarning", "antichain_decomposition", "branching_survival_bound",
           "branching_threshold_probability", "check_prior_collapse", "contrast_covariance", "gaussian_exceedance",
           "gaussian_refresh", "is_root_retaining", "p_eps", "product_fusion_contraction_check",
           "product_fusion_recursion", "route_retention_factor",
           "separation_constant", "theorem1_bound", "theorem2_bound"]


class PriorCollapseWarning(UserWarning):
    """A deep DAG whose prior may collapse (Perlino et al. 2026, Sec. 4, Theorem 1 and Prop. 2)."""


def antichain_decomposition(graph, nodes=None):
    """The progressive antichain decomposition ``V = A_0 ⊔ ... ⊔ A_{h-1}`` (Perlino et al. 2026, Prop. 1).

    ``d(v)`` is the length of the longest directed path starting at ``v``, ``h = 1 + max_v d(v)`` and
    ``A_ℓ = {v : d(v) = h - 1 - ℓ}``: every ``A_ℓ`` is an antichain, every node of ``A_ℓ`` reaches ``A_{ℓ+1}``,
    and the sinks that end a longest path land in the last slice.

    :param networkx.DiGraph graph: a DAG.
    :param nodes: optional subset of nodes to keep in the slices (e.g. the GP nodes); the slices are computed
        on the whole graph, then restricted (empty slices are kept, so the depth is the graph's).
    :returns: list of ``h`` lists of nodes (declaration order within a slice).
    """
    if not nx.is_directed_acyclic_graph(graph):
        cycle = nx.find_cycle(graph)
        raise ValueError(f"antichain_decomposition needs a DAG; the graph has the cycle {cycle}")
    depth = {}
    for v in reversed(list(nx.topological_sort(graph))):
        depth[v] = 1 + max((depth[c] for c in graph.successors(v)), default=-1)
    h = 1 + max(depth.values(), default=-1)
    keep = set(graph.nodes if nodes is None else nodes)
    return [[v for v in graph.nodes if depth[v] == h - 1 - level and v in keep] for level in range(h)]


def contrast_covariance(kernel, u_a, u_b):
    """Two-point contrast covariance ``Γ_w(a, b) = K(u_a, u_a) + K(u_b, u_b) - K(u_a, u_b) - K(u_b, u_a)``.

    Perlino et al. 2026, Sec. 4: given the parent states ``u_a``, ``u_b`` of two cases, the contrast
    ``Δ_w = F_w^{(a)} - F_w^{(b)}`` of a node whose outputs are independent GPs with kernel ``K`` is
    ``N(0, Γ_w I_{d_w})``.

    :param kernel: a kernel taking ``[..., N, D]`` inputs (a fusion kernel must be bound, e.g. a model's
        ``model.kernels[w]`` after set-up).
    :param torch.Tensor u_a: ``[..., D]`` parent state of case ``a`` (parents concatenated in declaration order).
    :param torch.Tensor u_b: ``[..., D]`` parent state of case ``b``.
    :returns: ``[...]`` tensor of ``Γ_w``.
    """
    x = torch.stack([torch.as_tensor(u_a), torch.as_tensor(u_b)], dim=-2)
    K = kernel(x)
    return K[..., 0, 0] + K[..., 1, 1] - K[..., 0, 1] - K[..., 1, 0]


def separation_constant(kernel, u_a, u_b):
    """A separation constant ``v⋆`` of a node over a set of parent-state pairs: ``min Γ_w(a, b)``.

    A node is ``v⋆``-separating if ``Γ_w(a, b) ⪰ v⋆ I`` almost surely (Perlino et al. 2026, Sec. 4); the
    minimum over sampled (or worst-case) parent states ``[S, D]`` is an estimate of the largest such ``v⋆``.
    For an additive root-only component ``σ0² k̄(x, x')`` it is at least ``2σ0² (1 - k̄(x_a, x_b))``
    whatever the latent parents are (Remark 2).

    :returns: a 0-d tensor.
    """
    return contrast_covariance(kernel, u_a, u_b).min()


def p_eps(eps, v_star):
    """``p_ε = 2 Φ(-ε / √v⋆)`` (Perlino et al. 2026, Eq. (12)): a lower bound on ``P(|Δ_w| > ε)`` for a
    ``v⋆``-separating scalar node."""
    v_star = torch.as_tensor(v_star, dtype=torch.get_default_dtype())
    if bool((v_star < 0).any()):
        raise ValueError(f"v_star must be >= 0 (a variance), got {v_star}")
    normal = torch.distributions.Normal(0.0, 1.0)
    return torch.where(v_star > 0, 2 * normal.cdf(-eps / v_star.clamp_min(1e-300).sqrt()), torch.zeros_like(v_star))


def theorem1_bound(eps, v_star, s):
    """Theorem 1 of Perlino et al. 2026: if every slice has at least ``s`` ``v⋆``-separating nodes, the long-run
    fraction of slices with ``M_ℓ > ε`` is at least ``1 - (1 - p_ε)^s`` almost surely."""
    return 1 - (1 - p_eps(eps, v_star)) ** s


def _root_only(kernel_parents, names):
    return bool(names) and all(p.is_root for p in kernel_parents if p.name in set(names))


def is_root_retaining(model, node):
    """Whether ``node``'s kernel keeps an additive component on root parents only (so the node is separating
    whatever its latent parents are, Perlino et al. 2026, Remark 2, Prop. 3, Prop. 5).

    True for :class:`~pyro_dag.kernels.InputConnected`; for :class:`~pyro_dag.kernels.Additive` and
    :class:`~pyro_dag.kernels.ANOVA` with a root parent (its main effect); for
    :class:`~pyro_dag.kernels.SubsetAdditive` with a subset of roots only; and for any kernel of a node whose
    parents are all roots. False otherwise (product, concatenation, :class:`~pyro_dag.kernels.SumInput` with a
    latent parent).

    :param model: a :class:`~pyro_dag.DAGDGP`.
    :param str node: a GP node of the model.
    """
    from ..kernels.fusion import ANOVA, Additive, InputConnected, SubsetAdditive

    if node not in model.parents:
        raise ValueError(f"is_root_retaining: {node!r} is not a GP node of the model (GP nodes: {model.gp_nodes})")
    parents = model.parents[node]
    roots = [p for p in parents if p not in model.graph or model.graph.in_degree(p) == 0]
    if len(roots) == len(parents):
        return True
    if not roots:
        return False
    kernel = model.kernels[node]
    if isinstance(kernel, InputConnected):
        return True
    if isinstance(kernel, (Additive, ANOVA)):
        return True
    if isinstance(kernel, SubsetAdditive):
        return any(set(s) <= set(roots) for s in kernel.subsets)
    return False


def check_prior_collapse(model, max_gap=3, warn=True):
    """Slices of the model's DAG without a root-retaining node; warn if a stretch is longer than ``max_gap``.

    The GP nodes are sliced by :func:`antichain_decomposition`; a slice counts as retaining if one of its nodes
    is :func:`is_root_retaining` (Remark 2). By Theorem 1 and Prop. 2 of Perlino et al. 2026 slices with
    separating nodes keep ``ε``-contrasts; a long run without any is where the prior may collapse (Sec. 4,
    Prop. 4: product fusion with in-degree ``k`` contracts when ``d τ² k / λ² < 1``).

    :param model: a :class:`~pyro_dag.DAGDGP`.
    :param int max_gap: longest tolerated run of consecutive non-retaining slices.
    :param bool warn: emit a :class:`PriorCollapseWarning`.
    :returns: ``(slices, retaining, longest_gap)``: the GP-node slices, a bool per slice, and the length of the
        longest run of non-retaining slices.
    """
    slices = [s for s in antichain_decomposition(model.graph, model.gp_nodes) if s]
    retaining = [any(is_root_retaining(model, w) for w in s) for s in slices]
    longest, run, worst = 0, 0, None
    for s, r in zip(slices, retaining):
        run = 0 if r else run + 1
        if run > longest:
            longest, worst = run, s
    if warn and longest > max_gap:
        warnings.warn(f"the DAG has {longest} consecutive depth slices of GP nodes without a root-retaining kernel "
                      f"(ending at {worst}); its prior may collapse there (deep nodes forget the inputs, Perlino et "
                      "al. 2026, Sec. 4, Theorem 1): give some of these nodes an edge from an input root and the "
                      "kernel pyro_dag.kernels.InputConnected(), or an Additive kernel with a root parent",
                      PriorCollapseWarning, stacklevel=2)
    return slices, retaining, longest


ContractionCheck = namedtuple("ContractionCheck", ["rate", "contracts"])


def product_fusion_contraction_check(d, tau2, lengthscale, max_indegree):
    """Sufficient local contraction condition of product (SE) fusion: ``d τ² k̄ / λ² < 1``.

    Perlino et al. 2026, Prop. 4 and Cor. 4: with ``C_ℓ = max_{w ∈ A_ℓ} E||Δ_w||²`` and SE product fusion,
    ``C_ℓ ≤ 2dτ² [1 - (1 + C_{ℓ-1}/(dλ²))^{-d k_ℓ/2}]``, whose slope at 0 is ``d τ² k̄ / λ²``; below one the
    contrasts contract to zero (collapse), above it the sufficient condition for collapse fails.

    :param int d: output dimension of the nodes. :param float tau2: kernel variance.
    :param float lengthscale: SE length-scale. :param int max_indegree: ``k̄``.
    :returns: ``ContractionCheck(rate, contracts)``.
    """
    if d < 1 or max_indegree < 1 or tau2 <= 0 or lengthscale <= 0:
        raise ValueError("product_fusion_contraction_check needs d >= 1, max_indegree >= 1, tau2 > 0 and "
                         f"lengthscale > 0; got d={d}, tau2={tau2}, lengthscale={lengthscale}, "
                         f"max_indegree={max_indegree}")
    rate = d * tau2 * max_indegree / lengthscale ** 2
    return ContractionCheck(rate, rate < 1)


def product_fusion_recursion(c_prev, d, tau2, lengthscale, indegree):
    """One step of the Prop. 4 bound, ``Ψ_k(C) = 2dτ² [1 - (1 + C/(dλ²))^{-dk/2}]`` (SE product fusion)."""
    return 2 * d * tau2 * (1 - (1 + c_prev / (d * lengthscale ** 2)) ** (-d * indegree / 2))


def gaussian_refresh(gamma, noise_var, d_y, eps=None):
    """Posterior contrast at an observed internal node (Perlino et al. 2026, Eq. (9), Cor. 6).

    With ``Y_u = F_u + ξ``, ``ξ ~ N(0, σ_u²)``, prior contrast variance ``Γ`` and observed gap ``D_Y``:
    ``Δ_u | Y ~ N(Γ/(Γ + 2σ_u²) · D_Y, 2σ_u² Γ/(Γ + 2σ_u²))``, and ``P(|Δ_u| > ε | Y) ≥ 1 - Φ((ε - |m|)/√v)``.

    :returns: ``(mean, var)``, or ``(mean, var, q)`` with the lower bound ``q`` if ``eps`` is given.
    """
    gamma, noise_var, d_y = (torch.as_tensor(t, dtype=torch.get_default_dtype()) for t in (gamma, noise_var, d_y))
    mean = gamma / (gamma + 2 * noise_var) * d_y
    var = 2 * noise_var * gamma / (gamma + 2 * noise_var)
    if eps is None:
        return mean, var
    q = 1 - torch.distributions.Normal(0.0, 1.0).cdf((eps - mean.abs()) / var.sqrt())
    return mean, var, q



def _as_float(x):
    """A floating tensor: a floating tensor keeps its dtype, anything else gets torch's default dtype."""
    x = torch.as_tensor(x)
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def gaussian_exceedance(mean, var, eps):
    """``P(|Δ| > ε)`` for a scalar ``Δ ~ N(mean, var)``: ``Φ((mean - ε)/√var) + Φ((-mean - ε)/√var)``.

    With the filtered law of :func:`gaussian_refresh` this is the exact source strength ``q_j`` of Theorem 2 of
    Perlino et al. 2026 (Eq. (8)); Cor. 6 bounds it from below by ``1 - Φ((ε - |m|)/√v)`` (the one-sided tail
    that :func:`gaussian_refresh` returns as ``q``). ``var = 0`` gives the indicator ``|mean| > ε``.

    :param mean: ``[...]`` mean(s). :param var: ``[...]`` variance(s), ``>= 0``. :param float eps: ``ε > 0``.
    :returns: ``[...]`` tensor of probabilities.
    """
    mean, var = torch.broadcast_tensors(_as_float(mean), _as_float(var))
    if bool((var < 0).any()):
        raise ValueError(f"gaussian_exceedance: var must be >= 0 (a variance), got {var}")
    if eps <= 0:
        raise ValueError(f"gaussian_exceedance: eps must be > 0, got {eps}")
    normal = torch.distributions.Normal(0.0, 1.0)
    sd = var.clamp_min(1e-300).sqrt()
    tails = normal.cdf((mean - eps) / sd) + normal.cdf((-mean - eps) / sd)
    return torch.where(var > 0, tails, (mean.abs() > eps).to(tails.dtype))


def route_retention_factor(eps, variances, lengthscales):
    """Retention factor ``ρ_γ(ε) = ∏_r β_r(ε)`` of an additive SE route (Perlino et al. 2026, Def. 6, Prop. 7).

    Route node ``v_r`` has an additive component ``ς_r² k̄_r`` on its route parent ``v_{r-1}``; for an SE
    correlation ``k̄_r(u, u') = exp(-|u - u'|²/(2λ_r²))``, ``r̄_r(ε) = sup_{|u-u'|>ε} k̄_r = exp(-ε²/(2λ_r²))``
    and ``β_r(ε) = 2Φ(-ε / √(2ς_r²(1 - r̄_r(ε))))``: the probability that an ``ε``-contrast at ``v_{r-1}`` is
    passed on to ``v_r`` is at least ``β_r`` whatever the other (admissible) parents do. A route of length 0
    (the source is the target) has ``ρ = 1``.

    :param float eps: ``ε > 0``.
    :param variances: ``[L]`` route-component variances ``ς_r²`` (a scalar with ``lengthscales`` scalar too
        is one step; use sequences for a route).
    :param lengthscales: ``[L]`` SE length-scales ``λ_r`` (broadcast against ``variances``).
    :returns: a 0-d tensor ``ρ_γ(ε)``.
    """
    variances, lengthscales = (_as_float(x) for x in (variances, lengthscales))
    variances, lengthscales = torch.broadcast_tensors(variances.reshape(-1), lengthscales.reshape(-1))
    if eps <= 0:
        raise ValueError(f"route_retention_factor: eps must be > 0, got {eps}")
    if bool((variances <= 0).any()) or bool((lengthscales <= 0).any()):
        raise ValueError("route_retention_factor: every route variance and length-scale must be > 0; got "
                         f"variances={variances.tolist()}, lengthscales={lengthscales.tolist()}")
    r_bar = torch.exp(-eps ** 2 / (2 * lengthscales ** 2))
    beta = 2 * torch.distributions.Normal(0.0, 1.0).cdf(-eps / (2 * variances * (1 - r_bar)).sqrt())
    return beta.prod()


def theorem2_bound(q, rho):
    """Theorem 2 of Perlino et al. 2026, Eq. (8), for given source strengths: ``1 - ∏_j (1 - ρ_j q_j)``.

    ``s`` observed sources ``u_j`` with posterior probabilities ``q_j`` of an ``ε``-contrast reach ``s`` targets
    through interior-disjoint admissible routes, each ``ε``-retaining with factor ``ρ_j`` (e.g.
    :func:`route_retention_factor`); the forward-predictive probability that the target antichain carries an
    ``ε``-contrast is at least the expectation of this quantity over the filtering law (here it is evaluated
    at given ``q_j``; when they are deterministic, as in Cor. 6 with fixed parent states, it is the bound).

    :param q: ``[..., s]`` source strengths in ``[0, 1]`` (e.g. :func:`gaussian_exceedance` of the
        :func:`gaussian_refresh` law). :param rho: ``[..., s]`` route factors in ``[0, 1]`` (broadcast).
    :returns: ``[...]`` tensor.
    """
    q, rho = (_as_float(x) for x in (q, rho))
    for name, x in (("q", q), ("rho", rho)):
        if bool(((x < 0) | (x > 1)).any()):
            raise ValueError(f"theorem2_bound: {name} must lie in [0, 1] (a probability), got {x}")
    q, rho = torch.broadcast_tensors(q.reshape(q.shape or (1,)), rho.reshape(rho.shape or (1,)))
    return 1 - (1 - rho * q).prod(-1)


def branching_threshold_probability(t, variance, lengthscale, d=1):
    """One-step threshold probability ``p_t`` of a designated branching edge (Perlino et al. 2026, App. C.3).

    For an SE module on the parent state (``κ(r) = exp(-r/(2λ²))``, Assumption 1), a child whose designated
    parent has ``||Δ_w|| ≥ t`` has contrast variance at least ``σ_t² = 2τ²(1 - κ(t²))``, hence
    ``P(||Δ_v|| ≥ t) ≥ p_t = P(χ²_d ≥ t²/σ_t²)``; for ``d = 1``, ``p_t = 2Φ(-t/σ_t)`` (Cor. 5).

    :param float t: threshold ``t > 0``. :param float variance: ``τ² > 0``.
    :param float lengthscale: ``λ > 0``. :param int d: output dimension.
    :returns: a 0-d tensor ``p_t``.
    """
    if t <= 0 or variance <= 0 or lengthscale <= 0 or d < 1:
        raise ValueError("branching_threshold_probability needs t > 0, variance > 0, lengthscale > 0 and d >= 1; "
                         f"got t={t}, variance={variance}, lengthscale={lengthscale}, d={d}")
    t = torch.as_tensor(t, dtype=torch.get_default_dtype())
    sigma2 = 2 * variance * (1 - torch.exp(-t ** 2 / (2 * lengthscale ** 2)))
    # P(χ²_d ≥ x) = Q(d/2, x/2), the regularised upper incomplete gamma function
    return torch.special.gammaincc(torch.as_tensor(d / 2, dtype=t.dtype), t ** 2 / sigma2 / 2)


def branching_survival_bound(p_t, b, depth=None, seed_prob=1.0, tol=1e-14, max_iter=100_000):
    """Prop. 6 of Perlino et al. 2026 (App. C.3): a lower bound on ``P(M_ℓ ≥ t for ℓ = 0, ..., depth)``.

    Along a designated ``b``-ary branching subgraph, the children of a node with ``||Δ|| ≥ t`` exceed ``t``
    independently with probability at least ``p_t`` (:func:`branching_threshold_probability`); thinning to
    exactly ``p_t`` embeds a Galton-Watson process with ``Bin(b, p_t)`` offspring, generating function
    ``g(s) = (1 - p_t + p_t s)^b``, started from ``Z_0 = 1{||Δ_{w0}|| ≥ t}``. Its survival to generation ``L``
    has probability ``1 - g^{∘L}(0)``, so

    ``P(M_ℓ ≥ t, ℓ = 0..L) ≥ P(||Δ_{w0}|| ≥ t) · (1 - g^{∘L}(0))``;

    with ``depth=None`` the limit ``L → ∞``, ``P(||Δ_{w0}|| ≥ t) · (1 - ξ_t)`` with ``ξ_t`` the smallest fixed
    point of ``g`` in ``[0, 1]``: positive exactly when ``b p_t > 1`` (supercritical; Prop. 6), zero otherwise.

    :param p_t: one-step threshold probability in ``[0, 1]``. :param int b: branching factor ``>= 1``.
    :param depth: ``L >= 0`` (generations after the seed), or ``None`` for all depths.
    :param seed_prob: ``P(||Δ_{w0}|| ≥ t)`` (1 gives the Galton-Watson survival alone).
    :returns: a 0-d tensor.
    """
    p_t = _as_float(p_t)
    if b < 1 or int(b) != b:
        raise ValueError(f"branching_survival_bound: b must be an integer >= 1, got {b}")
    if not 0 <= float(p_t) <= 1 or not 0 <= float(seed_prob) <= 1:
        raise ValueError(f"branching_survival_bound: p_t and seed_prob must lie in [0, 1], got {float(p_t)}, "
                         f"{float(seed_prob)}")
    if depth is not None and (depth < 0 or int(depth) != depth):
        raise ValueError(f"branching_survival_bound: depth must be an integer >= 0 or None, got {depth}")

    def g(s):
        return (1 - p_t + p_t * s) ** b

    s = torch.zeros_like(p_t)  # P(Z_l = 0 | Z_0 = 1), l = 0
    if depth is not None:
        for _ in range(int(depth)):
            s = g(s)
    elif b == 1 and float(p_t) == 1:  # one child that always exceeds t: the line never dies
        pass
    elif b * float(p_t) <= 1:  # (sub)critical, not degenerate: extinction is certain (Athreya and Ney 1972)
        s = torch.ones_like(p_t)
    else:  # g^{∘n}(0) increases to ξ_t geometrically (rate g'(ξ_t) < 1)
        for _ in range(max_iter):
            s_new = g(s)
            if float(s_new - s) < tol:
                s = s_new
                break
            s = s_new
    return seed_prob * (1 - s)
