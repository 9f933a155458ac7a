"""Data-driven initialisation of inducing inputs.

A node's input space is the product of its parents' spaces. Each parent block of the inducing inputs
``Z_w`` is initialised from what is known about that parent:

* a root, or an observed non-root parent: its data (design matrix, or observations with missing rows
  dropped). The known blocks are initialised jointly, by k-means++ / Lloyd on the rows where all of them
  are known, so that joint structure (e.g. a product grid) is kept;
* a latent (never observed) parent: scrambled-Sobol quantiles of its prior marginal ``N(0, v_p)``, with
  ``v_p`` the mean prior variance of the parent, clipped to the central 96%. This spreads the inducing
  inputs over the range the parent's values take a priori (a regular symmetric grid is avoided on
  purpose: under :class:`~pyro_dag.kernels.SumInput` it is degenerate).

Everything is seeded and deterministic.
"""
import math

import torch

__all__ = ["kmeans", "sobol_normal", "init_inducing_inputs", "KMEANS_MAX_CASES"]

#: :func:`kmeans` clusters a random subset of this many rows when there are more (each Lloyd iteration
#: costs ``O(n M)``; 512 centres on 2·10⁵ rows took tens of seconds, and the centres of a 2·10⁴-row subset are
#: as good a start for the inducing inputs, which the fits then move or hold).
KMEANS_MAX_CASES = 20000


def kmeans(X, num_centers, num_iters=25, seed=0, max_cases=KMEANS_MAX_CASES):
    """k-means++ seeding followed by Lloyd iterations.

    :param torch.Tensor X: ``[n, D]`` points (finite).
    :param int num_centers: ``M``. If there are at most ``M`` distinct rows, all of them are returned first
        and the remaining centres are scrambled-Sobol points in the data's bounding box.
    :param int max_cases: above this many rows, a seeded random subset of this many is clustered (at least
        ``4 * num_centers``).
    :returns: ``[M, D]`` centres.
    """
    g = torch.Generator().manual_seed(seed)
    Xc = X.detach().cpu().double()
    limit = max(int(max_cases), 4 * int(num_centers))
    if Xc.shape[0] > limit:
        Xc = Xc[torch.randperm(Xc.shape[0], generator=g)[:limit]]
    uniq = torch.unique(Xc, dim=0)
    if uniq.shape[0] <= num_centers:
        extra = num_centers - uniq.shape[0]
        if extra == 0:
            return uniq.to(X)
        # Fewer distinct rows than centres: keep them all and fill the rest with scrambled-Sobol points in
        # the data's bounding box (duplicates would make K(Z, Z) singular).
        lo, hi = Xc.min(0).values, Xc.max(0).values
        hi = torch.where(hi > lo, hi, lo + 1.0)
        u = torch.quasirandom.SobolEngine(Xc.shape[1], scramble=True, seed=seed).draw(extra, dtype=torch.float64)
        return torch.cat([uniq, lo + u * (hi - lo)]).to(X)
    centers = [uniq[torch.randint(uniq.shape[0], (1,), generator=g)].squeeze(0)]
    d2 = (uniq - centers[0]).pow(2).sum(-1)
    for _ in range(1, num_centers):
        probs = d2 / d2.sum()
        nxt = uniq[torch.multinomial(probs, 1, generator=g)].squeeze(0)
        centers.append(nxt)
        d2 = torch.minimum(d2, (uniq - nxt).pow(2).sum(-1))
    C = torch.stack(centers)
    for _ in range(num_iters):
        assign = torch.cdist(Xc, C).argmin(-1)
        newC = C.clone()
        for k in range(num_centers):
            members = Xc[assign == k]
            if members.shape[0] > 0:
                newC[k] = members.mean(0)
        if torch.allclose(newC, C):
            break
        C = newC
    return C.to(X)


def sobol_normal(num_points, dim, scale, seed=0, dtype=None, device=None):
    """Scrambled-Sobol quantiles of ``N(0, scale²)`` in ``dim`` dimensions, clipped to the central 96%.

    :returns: ``[num_points, dim]``.
    """
    # torch's engine computes its first point in the default dtype: build it under float32 (torch's own default, so
    # the points fitted models have always had), so that the points do not depend on the default dtype
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float32)
    try:
        engine = torch.quasirandom.SobolEngine(dim, scramble=True, seed=seed)
        u = engine.draw(num_points, dtype=torch.float64).clamp(0.02, 0.98)
    finally:
        torch.set_default_dtype(default)
    z = math.sqrt(2) * torch.erfinv(2 * u - 1)
    return (z * torch.as_tensor(scale, dtype=torch.float64)).to(dtype=dtype, device=device)


def init_inducing_inputs(blocks, num_inducing, seed=0):
    """Initial inducing inputs for one node.

    :param list blocks: per parent, in concatenation order, either a ``[n, d_p]`` tensor of known values
        (NaN rows are dropped) or a ``(d_p, prior_scale)`` tuple for a latent parent.
    :param int num_inducing: ``M``.
    :returns: ``[M, Σ d_p]`` tensor.
    """
    known = [i for i, b in enumerate(blocks) if torch.is_tensor(b)]
    ref = next((blocks[i] for i in known), None)
    # without known parents: float32 (torch's default dtype, as always) whatever the default dtype, so that a model
    # gets the same inducing inputs in every process; the caller casts them to the model's dtype
    dtype = ref.dtype if ref is not None else torch.float32
    device = ref.device if ref is not None else None
    parts = [None] * len(blocks)
    if known:
        joint = torch.cat([blocks[i] for i in known], dim=-1)
        joint = joint[torch.isfinite(joint).all(-1)]
        if joint.shape[0] == 0:
            raise ValueError("no case has all of the node's known parents observed; cannot initialise its "
                             "inducing inputs from data: pass inducing_inputs for this node")
        centers = kmeans(joint, num_inducing, seed=seed)
        start = 0
        for i in known:
            d = blocks[i].shape[-1]
            parts[i] = centers[:, start:start + d]
            start += d
    latent = [i for i, b in enumerate(blocks) if not torch.is_tensor(b)]
    if latent:
        dims = [blocks[i][0] for i in latent]
        scales = torch.cat([torch.full((d,), float(blocks[i][1]), dtype=torch.float64) for i, d in zip(latent, dims)])
        pts = sobol_normal(num_inducing, sum(dims), scales, seed=seed, dtype=dtype, device=device)
        start = 0
        for i, d in zip(latent, dims):
            parts[i] = pts[:, start:start + d]
            start += d
    return torch.cat(parts, dim=-1)
