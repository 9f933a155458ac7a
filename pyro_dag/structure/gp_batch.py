"""Many exact-GP type-II maximum-likelihood fits at once: the engine of the GP network score.

The GP network score (Friedman & Nachman 2000, *Gaussian process networks*, UAI) fits one GP regression per
``(node, parent set)``: hundreds of small problems with 3-4 hyperparameters each. Fitted one by one
(:class:`pyro_dag.baselines.ExactGP`, L-BFGS with a strong-Wolfe line search) each costs about a hundred
evaluations whose Python overhead is comparable to their arithmetic. Here the families with the same number of
parents are stacked into one batch and fitted together by BFGS with a per-problem inverse-Hessian approximation
(``[B, D + 2, D + 2]``) and a per-problem backtracking (Armijo) line search; the log marginal likelihood and its
gradient are analytic (Rasmussen & Williams 2006, *Gaussian Processes for Machine Learning*, eq. 5.9):

    ∂/∂θ_i log p(y | θ) = ½ tr((α αᵀ - K⁻¹) ∂K/∂θ_i),   α = K⁻¹ y.

The parametrisation is :class:`~pyro_dag.baselines.ExactGP`'s (inputs scaled to the unit cube, targets standardised,
log length-scales, log signal variance, log noise variance above a floor of ``1e-8`` of the targets' variance) and
so are the starts (the same generator draws), so a batched fit finds the optimum a one-by-one fit finds, to the
optimisers' tolerance.
"""
import math

import torch

__all__ = ["batched_gp_fit"]

#: Floor of the learned noise variance, as a fraction of the targets' variance (ExactGP's ``min_noise``).
MIN_NOISE = 1e-8
#: Box of the log-hyperparameters: beyond it the evidence is flat to rounding (an irrelevant input's length-scale
#: grows without bound), and the box keeps the Gram matrix factorisable.
LOG_BOUNDS = (-9.0, 9.0)
#: Scale of a broad Gaussian on each log-hyperparameter, added to the objective while fitting. Flat directions (an
#: irrelevant input's length-scale) otherwise take hundreds of quasi-Newton steps for a change in the evidence below
#: rounding; at the box's edge the term is 0.1 nats. The evidence reported is the likelihood's, without it.
RIDGE_SCALE = 20.0


def _nll_and_grad(kernel, D2, y, params):
    """Negative log marginal likelihood ``[B]`` (``inf`` where ``K`` is not positive definite) and its gradient
    ``[B, D + 2]`` with respect to ``(log ls, log sf², log sn²)``. ``D2 [B, D, n, n]``: squared input differences per
    dimension; ``y [B, n]``.

    The gradient is contracted without forming ``∂K/∂θ`` (``[B, D + 2, n, n]``): the evaluation is memory-bound, and
    each length-scale's term is ``½ ls⁻² Σ (W ∘ k'(r)) ∘ D2_k`` with ``W = K⁻¹ - α αᵀ``.
    """
    B, D, n, _ = D2.shape
    log_ls, log_sf2, log_sn2 = params[:, :D], params[:, D], params[:, D + 1]
    inv_ls2 = torch.exp(-2.0 * log_ls)                                          # [B, D]
    # (in-place where a [B, n, n] temporary would otherwise be allocated: the evaluation is memory-bound)
    if kernel == "rbf":
        Kf = torch.einsum("bkij,bk->bij", D2, -0.5 * inv_ls2)
        Kf.add_(log_sf2[:, None, None]).exp_()                                 # σ_f² exp(-r²/2)
        dKdS = Kf                                               # ∂K/∂log ls_k = dKdS ∘ D2_k ls_k⁻²
    else:  # Matérn-5/2
        sf2 = log_sf2.exp()[:, None, None]
        r2 = torch.einsum("bkij,bk->bij", D2, inv_ls2)
        r = (r2 + 1e-30).sqrt()
        s5 = math.sqrt(5.0)
        e = torch.exp(-s5 * r)
        Kf = sf2 * (1 + s5 * r + 5.0 / 3.0 * r2) * e
        dKdS = sf2 * 5.0 / 3.0 * (1 + s5 * r) * e
    sn2 = log_sn2.exp()
    K = Kf.clone()
    K.diagonal(dim1=-2, dim2=-1).add_((sn2 + MIN_NOISE)[:, None])
    L, info = torch.linalg.cholesky_ex(K)
    bad = info != 0
    if bool(bad.any()):  # factorise something harmless in their place; their value is inf
        L = torch.where(bad[:, None, None], torch.eye(n, dtype=K.dtype, device=K.device).expand_as(K), L)
    alpha = torch.cholesky_solve(y.unsqueeze(-1), L)                           # [B, n, 1]
    W = torch.cholesky_inverse(L)
    W.baddbmm_(alpha, alpha.transpose(-1, -2), alpha=-1.0)                       # K⁻¹ - α αᵀ
    alpha = alpha.squeeze(-1)
    nll = 0.5 * (y * alpha).sum(-1) + L.diagonal(dim1=-2, dim2=-1).log().sum(-1) + 0.5 * n * math.log(2 * math.pi)
    g_sn = 0.5 * sn2 * W.diagonal(dim1=-2, dim2=-1).sum(-1)
    if dKdS is Kf:
        WdK = W.mul_(Kf)                                                         # W is not needed after this
        g_sf = 0.5 * WdK.sum((-2, -1))
    else:
        g_sf = 0.5 * (W * Kf).sum((-2, -1))
        WdK = W.mul_(dKdS)
    g_ls = 0.5 * torch.einsum("bij,bkij->bk", WdK, D2) * inv_ls2
    nll = torch.where(bad, torch.full_like(nll, math.inf), nll)
    return nll, torch.cat([g_ls, g_sf[:, None], g_sn[:, None]], -1)


def _with_ridge(f, g, x):
    """The fitted objective: ``(f, g)`` plus the broad ridge (:data:`RIDGE_SCALE`) on the log-hyperparameters."""
    return f + 0.5 * (x / RIDGE_SCALE).pow(2).sum(-1), g + x / RIDGE_SCALE ** 2


def _kernel(kernel, X1, X2, log_ls, log_sf2):
    """``[B, m, k]`` kernel matrices of ``X1 [B, m, D]`` and ``X2 [B, k, D]``: ExactGP's kernels with per-problem
    hyperparameters ``log_ls [B, D]``, ``log_sf2 [B]``."""
    from pyro_dag.baselines.exact_gp import _kernel as exact_kernel

    return exact_kernel(kernel, X1, X2, log_ls[:, None, None, :], log_sf2[:, None, None])


def _sparse_nll_and_grad(kernel, X, Z, y, params):
    """The negative collapsed bound of Titsias 2009 (*Variational learning of inducing variables in sparse Gaussian
    processes*, AISTATS), ``-[log N(y | 0, Q + σ² I) - tr(K - Q) / (2σ²)]`` with ``Q = K_fu K_uu⁻¹ K_uf``, ``[B]``,
    and its gradient ``[B, D + 2]`` (autograd): ``X [B, n, D]``, inducing inputs ``Z [B, M, D]``, ``y [B, n]``."""
    with torch.enable_grad():
        x = params.detach().requires_grad_()
        D = X.shape[-1]
        n, M = X.shape[1], Z.shape[1]
        log_ls, log_sf2, log_sn2 = x[:, :D], x[:, D], x[:, D + 1]
        sn2 = log_sn2.exp() + MIN_NOISE
        Kuu = _kernel(kernel, Z, Z, log_ls, log_sf2)
        Kuu = Kuu + 1e-6 * log_sf2.exp()[:, None, None] * torch.eye(M, dtype=X.dtype)
        Lu, info = torch.linalg.cholesky_ex(Kuu)
        bad = info != 0
        Lu = torch.where(bad[:, None, None], torch.eye(M, dtype=X.dtype).expand_as(Lu), Lu)
        A = torch.linalg.solve_triangular(Lu, _kernel(kernel, Z, X, log_ls, log_sf2), upper=False)
        A = A / sn2.sqrt()[:, None, None]                                        # [B, M, n]
        Bm = A @ A.transpose(-1, -2) + torch.eye(M, dtype=X.dtype)
        LB, info_b = torch.linalg.cholesky_ex(Bm)
        bad = bad | (info_b != 0)
        LB = torch.where(bad[:, None, None], torch.eye(M, dtype=X.dtype).expand_as(LB), LB)
        c = torch.linalg.solve_triangular(LB, (A @ y.unsqueeze(-1)), upper=False).squeeze(-1) / sn2.sqrt()[:, None]
        bound = (-0.5 * n * math.log(2 * math.pi) - LB.diagonal(dim1=-2, dim2=-1).log().sum(-1)
                 - 0.5 * n * sn2.log() - 0.5 * (y * y).sum(-1) / sn2 + 0.5 * (c * c).sum(-1)
                 - 0.5 * n * log_sf2.exp() / sn2 + 0.5 * A.pow(2).sum((-2, -1)))
        nll = -bound
        (g,) = torch.autograd.grad(nll.sum(), x)
    nll = torch.where(bad, torch.full_like(nll, math.inf), nll.detach())
    return nll, g


def _bfgs(objective, x0, max_iter=200, gtol=1e-5, ftol=1e-12, bounds=LOG_BOUNDS):
    """Batched BFGS from ``x0 [B, d]`` in the box ``bounds``; ``objective(x, rows)`` returns ``(f [b], g [b, d])`` of
    the problems ``rows`` (an index tensor) at ``x [b, d]``. Returns ``(x, f)``."""
    lo, hi = bounds
    x = x0.clamp(lo, hi)
    f, g = objective(x, torch.arange(len(x)))
    B, d = x.shape
    # the first step: steepest descent scaled to a unit move in log-parameter space (the gradient is O(n))
    H = torch.eye(d, dtype=x.dtype).expand(B, d, d) / g.norm(dim=-1).clamp_min(1.0)[:, None, None]
    H = H.clone()
    active = torch.isfinite(f)
    evals = [0]
    its = 0
    for _ in range(max_iter):
        its += 1
        idx = active.nonzero().squeeze(-1)
        if idx.numel() == 0:
            break
        xa, fa, ga, Ha = x[idx], f[idx], g[idx], H[idx]
        step = -(Ha @ ga.unsqueeze(-1)).squeeze(-1)
        slope = (step * ga).sum(-1)
        uphill = slope >= 0  # a stale curvature estimate: restart it from steepest descent
        if bool(uphill.any()):
            scale = ga[uphill].norm(dim=-1).clamp_min(1.0)
            Ha[uphill] = torch.eye(d, dtype=x.dtype) / scale[:, None, None]
            step[uphill] = -ga[uphill] / scale[:, None]
            slope[uphill] = (step[uphill] * ga[uphill]).sum(-1)
        t = torch.ones(len(idx), dtype=x.dtype)
        accepted = torch.zeros(len(idx), dtype=torch.bool)
        xn, fn, gn = xa.clone(), fa.clone(), ga.clone()
        for _ in range(30):  # backtracking: only the problems not yet accepted are evaluated again
            todo = (~accepted).nonzero().squeeze(-1)
            if todo.numel() == 0:
                break
            cand = (xa[todo] + t[todo, None] * step[todo]).clamp(lo, hi)
            fc, gc = objective(cand, idx[todo])
            evals[0] += 1
            ok = torch.isfinite(fc) & (fc <= fa[todo] + 1e-4 * t[todo] * slope[todo])
            xn[todo[ok]], fn[todo[ok]], gn[todo[ok]] = cand[ok], fc[ok], gc[ok]
            accepted[todo[ok]] = True
            t[todo[~ok]] *= 0.5
        s, yv = xn - xa, gn - ga
        sy = (s * yv).sum(-1)
        upd = accepted & (sy > 1e-12)
        if bool(upd.any()):
            rho = 1.0 / sy[upd]
            I = torch.eye(d, dtype=x.dtype)
            V = I - rho[:, None, None] * s[upd].unsqueeze(-1) * yv[upd].unsqueeze(-2)
            Ha[upd] = V @ Ha[upd] @ V.transpose(-1, -2) + rho[:, None, None] * s[upd].unsqueeze(-1) * s[upd].unsqueeze(-2)
        # a box face the step pushed against: the gradient there points outward, which is not a descent direction
        pg = torch.where(((xn <= lo) & (gn > 0)) | ((xn >= hi) & (gn < 0)), torch.zeros_like(gn), gn)
        # converged: a small projected gradient, no descent left, or a full step that changed nothing (a tiny
        # decrease after backtracking is not convergence: the curvature estimate was off)
        stalled = (t == 1) & ((fa - fn).abs() <= ftol * (1 + fn.abs()))
        done = (~accepted) | (pg.abs().amax(-1) < gtol) | stalled
        x[idx], f[idx], g[idx], H[idx] = xn, fn, gn, Ha
        active[idx[done]] = False
    _bfgs.evals = (evals[0], its)
    return x, f


def _starts(D, restarts, seed, dtype):
    """ExactGP's starts for ``D`` inputs: ``[restarts, D + 2]`` (the first fixed, the others from its generator;
    drawn in float32 whatever torch's default dtype, so that the starts, and the fits, do not depend on it)."""
    gen = torch.Generator().manual_seed(seed)
    f32 = torch.float32
    out = [torch.cat([torch.full((D,), math.log(0.5), dtype=f32), torch.tensor([0.0, math.log(0.01)], dtype=f32)])]
    for _ in range(1, max(1, restarts)):
        ls = torch.empty(D, dtype=f32).uniform_(math.log(0.05), math.log(2.0), generator=gen)
        sf = torch.empty((), dtype=f32).uniform_(-1.0, 1.0, generator=gen)
        sn = torch.empty((), dtype=f32).uniform_(math.log(1e-6), math.log(0.1), generator=gen)
        out.append(torch.cat([ls, sf.view(1), sn.view(1)]))
    return torch.stack(out).to(dtype)


def batched_gp_fit(X, y, *, kernel="rbf", restarts=2, seed=0, inducing=None, prior=None, chunk=None,
                   bounds=LOG_BOUNDS, center=True, start=None):
    """Type-II maximum-likelihood fits of ``B`` independent GP regressions with ``D`` inputs each.

    :param X: ``[B, n, D]`` inputs (float64); each problem's columns are scaled to the unit cube here.
    :param y: ``[B, n]`` targets; standardised here.
    :param str kernel: ``"rbf"`` or ``"matern52"``.
    :param int restarts: starts per problem (ExactGP's starts); the best is kept.
    :param int seed: seed of the random starts and of the inducing rows.
    :param int inducing: ``M``: fit and report the collapsed bound of Titsias 2009 with the inputs of ``M`` rows
        (the same rows for every problem, drawn without replacement) as inducing inputs, ``O(n M²)`` per evaluation
        instead of ``O(n³)``; a lower bound on the evidence. ``None`` (or ``M ≥ n``): the exact evidence.
    :param prior: ``None`` (type-II maximum likelihood) or ``(mean, sd)``, each ``[D + 2]``: independent Gaussians
        on ``(log ls, log σ_f², log σ_n²)`` of the scaled problem. The hyperparameters are then integrated out by
        Laplace's method at the posterior mode: ``log p(y) ≈ log p(y | θ̂) + log p(θ̂) + (D + 2)/2 log 2π
        - ½ log det H``, ``H`` the Hessian of ``-log p(y, θ)`` at the mode (central differences of the analytic
        gradient, eigenvalues floored at the prior's precision).
    :param int chunk: problems per batch (default: about 64 MB of ``n × n`` (or ``n × M``) matrices per batch).
    :param bounds: ``(low, high)`` box of every log-hyperparameter (default :data:`LOG_BOUNDS`; a noise fraction
        below ``e⁻⁹ ≈ 1.2e-4`` needs a wider one).
    :param bool center: subtract each problem's mean from ``y`` (the GP models the residual, as
        :class:`~pyro_dag.baselines.ExactGP` does); ``False``: a zero-mean GP on ``y`` itself (``y`` only scaled by
        its standard deviation, an exact reparametrisation), the model of a :class:`~pyro_dag.DAGDGP` node.
    :param start: ``None`` (ExactGP's starts, ``restarts`` of them) or ``[B, D + 2]``: one start per problem on the
        scaled problem (``restarts`` is then ignored).
    :returns: ``(log_evidence [B], params [B, D + 2])``: the evidence (or its bound; with ``prior``, its Laplace
        approximation) in the targets' units at the best start and its ``(log ls, log σ_f², log σ_n²)`` on the
        scaled problem.
    """
    X = torch.as_tensor(X, dtype=torch.float64)
    y = torch.as_tensor(y, dtype=torch.float64)
    B, n, D = X.shape
    lo, span = X.amin(1, keepdim=True), X.amax(1, keepdim=True) - X.amin(1, keepdim=True)
    Xs = (X - lo) / torch.where(span > 0, span, torch.ones_like(span))
    mean, sd = y.mean(-1, keepdim=True), y.std(-1, keepdim=True)
    sd = torch.where(sd > 0, sd, torch.ones_like(sd))
    ys = (y - mean) / sd if center else y / sd
    if start is None:
        starts = _starts(D, restarts, seed, X.dtype)[:, None].expand(-1, B, -1)   # [R, B, D + 2]
    else:
        starts = torch.as_tensor(start, dtype=X.dtype).reshape(1, B, D + 2)
    R = starts.shape[0]
    sparse = inducing is not None and int(inducing) < n
    if sparse:
        rows = torch.randperm(n, generator=torch.Generator().manual_seed(seed))[: int(inducing)]
    if chunk is None:
        chunk = max(1, int(8e6 // ((n * int(inducing) * 4) if sparse else (n * n * (D + 3)))))
    best_f = torch.full((B,), math.inf, dtype=X.dtype)
    best_x = starts[0].clone()
    for b0 in range(0, B, chunk):
        sl = slice(b0, min(B, b0 + chunk))
        Xc, yc = Xs[sl], ys[sl]
        b = Xc.shape[0]
        if sparse:
            Zc = Xc[:, rows]

            def nll(x, r, Xc=Xc, Zc=Zc, yc=yc):
                return _sparse_nll_and_grad(kernel, Xc[r], Zc[r], yc[r], x)
        else:
            D2 = (Xc.unsqueeze(2) - Xc.unsqueeze(1)).pow(2).permute(0, 3, 1, 2).contiguous()  # [b, D, n, n]

            def nll(x, r, D2=D2, yc=yc):
                return _nll_and_grad(kernel, D2[r], yc[r], x)

        if prior is None:
            def objective(x, r):
                return _with_ridge(*nll(x, r), x)
        else:
            def objective(x, r):
                return _with_prior(*nll(x, r), x, prior)
        for k in range(R):
            x, _ = _bfgs(objective, starts[k, sl].clone(), bounds=bounds)
            if prior is None:
                f = nll(x, torch.arange(b))[0]
            else:
                f = _laplace_neg_log_evidence(objective, x, prior)
            better = f < best_f[sl]
            best_f[sl] = torch.where(better, f, best_f[sl])
            best_x[sl] = torch.where(better[:, None], x, best_x[sl])
    return -best_f - n * sd.squeeze(-1).log(), best_x


def _with_prior(f, g, x, prior):
    """``(f, g)`` plus the negative log density of the Gaussian ``prior = (mean, sd)`` on the log-hyperparameters."""
    mean, sd = (torch.as_tensor(t, dtype=x.dtype) for t in prior)
    z = (x - mean) / sd
    const = (sd.log() + 0.5 * math.log(2 * math.pi)).sum()
    return f + 0.5 * z.pow(2).sum(-1) + const, g + z / sd


def _laplace_neg_log_evidence(objective, x, prior, step=1e-4):
    """``-log p(y)`` by Laplace's method at the mode ``x [B, d]`` of ``objective`` (``-log p(y, θ)``): ``f(x̂) - d/2
    log 2π + ½ log det H``, the Hessian by central differences of the gradient, symmetrised, its eigenvalues
    floored at the prior precision (a flat likelihood direction is integrated by the prior alone)."""
    B, d = x.shape
    rows = torch.arange(B)
    f, _ = objective(x, rows)
    H = torch.empty(B, d, d, dtype=x.dtype)
    for i in range(d):
        e = torch.zeros(d, dtype=x.dtype)
        e[i] = step
        H[:, i] = (objective(x + e, rows)[1] - objective(x - e, rows)[1]) / (2 * step)
    H = 0.5 * (H + H.transpose(-1, -2))
    floor = (1.0 / torch.as_tensor(prior[1], dtype=x.dtype).pow(2)).min()
    logdet = torch.linalg.eigvalsh(H).clamp_min(floor).log().sum(-1)
    return f - 0.5 * d * math.log(2 * math.pi) + 0.5 * logdet
