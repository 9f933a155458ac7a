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
* :func:`gaussian_refresh` -- the posterior contrast of an observed internal node, Eq. (9) (Cor. 6);
* :func:`check_prior_collapse` -- warns (:class:`PriorCollapseWarning`) when a deep DAG has a long stretch of
  slices without a root-retaining node, recommending :class:`~pyro_dag.kernels.InputConnected`.
"""
import warnings
from collections import namedtuple

import networkx as nx
import torch

__all__ = ["PriorCollapseWarning", "antichain_decomposition", "check_prior_collapse", "contrast_covariance",
           "gaussian_refresh", "is_root_retaining", "p_eps", "product_fusion_contraction_check",
           "product_fusion_recursion",
           "separation_constant", "theorem1_bound"]


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

