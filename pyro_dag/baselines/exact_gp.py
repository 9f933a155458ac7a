"""A plain exact GP regression with an ARD kernel, fitted by type-II maximum likelihood: the baseline a user already
has (Rasmussen & Williams 2006, *Gaussian Processes for Machine Learning*, Ch. 2 and Sec. 5.4.1), and the pilot
GP of the noise rule (:mod:`pyro_dag.baselines.noise`).

The inputs are scaled to the unit cube and the targets standardised on the training set; the log length-scales,
the log signal variance and the log noise variance are fitted with L-BFGS from a few starts, and the start with
the highest log marginal likelihood is kept. Above ``max_exact`` cases a random subset of that size is used
(subset of data, Rasmussen & Williams 2006, Sec. 8.3.2), and :attr:`ExactGP.subset` says so.
"""
import math

import torch

from ..scaling import column_moments
from .linear import training_data

__all__ = ["ExactGP"]

#: Kernels of :class:`ExactGP`: the squared exponential and the Matérn-5/2, both with one length-scale per input.
KERNELS = ("rbf", "matern52")

#: :meth:`ExactGP.predict` works through the rows in chunks of at most this many ``rows × training cases × inputs``
#: elements (32 MiB per intermediate in float64), so that its memory does not grow with the rows predicted.
PREDICT_CHUNK_ELEMENTS = 2 ** 22


def _kernel(name, X1, X2, log_ls, log_sf2):
    d = (X1.unsqueeze(-2) - X2.unsqueeze(-3)) / log_ls.exp()
    r2 = d.pow(2).sum(-1)
    if name == "rbf":
        return log_sf2.exp() * torch.exp(-0.5 * r2)
    if name != "matern52":   # never a silent Matérn for a misspelt name
        raise ValueError(f"kernel must be one of {list(KERNELS)} (lower case), got {name!r}")
    r = (r2 + 1e-30).sqrt()
    s5 = math.sqrt(5.0)
    return log_sf2.exp() * (1 + s5 * r + 5.0 / 3.0 * r2) * torch.exp(-s5 * r)


@torch.no_grad()
def _nlml_and_gradient(kernel, X, y, log_ls, log_sf2, log_sn2, noise, min_noise, gradient=True):
    """``(nlml, ∂/∂ log ls [D], ∂/∂ log sf2, ∂/∂ log sn2)`` of an exact GP on ``X [n, D]``, ``y [n]`` (``noise``:
    a fixed noise variance, or ``None`` for ``exp(log sn2) + min_noise``); ``None`` where ``K`` does not factorise.
    The gradient is ``½ Σ (K⁻¹ - α αᵀ) ⊙ ∂K/∂θ`` (Rasmussen & Williams 2006, Eq. (5.9)); one ``[n, n]`` term per
    input dimension at a time."""
    n, D = X.shape
    ls, sf2 = log_ls.detach().exp(), log_sf2.detach().exp()
    r2 = torch.zeros(n, n, dtype=X.dtype, device=X.device)
    for d in range(D):
        r2 += ((X[:, d, None] - X[None, :, d]) / ls[d]).pow(2)
    if kernel == "rbf":
        Kf = sf2 * torch.exp(-0.5 * r2)
    elif kernel == "matern52":
        r = (r2 + 1e-30).sqrt()
        s5 = math.sqrt(5.0)
        e = torch.exp(-s5 * r)
        Kf = sf2 * (1 + s5 * r + 5.0 / 3.0 * r2) * e
    else:
        raise ValueError(f"kernel must be one of {list(KERNELS)} (lower case), got {kernel!r}")
    var_n = (log_sn2.detach().exp() + min_noise) if noise is None else torch.as_tensor(noise).to(X)
    K = Kf + var_n * torch.eye(n, dtype=X.dtype, device=X.device)
    L, info = torch.linalg.cholesky_ex(K)
    if int(info) != 0:
        return None
    alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
    value = 0.5 * (y @ alpha) + L.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)
    if not gradient:
        return (value,)
    W = torch.cholesky_inverse(L)
    W -= alpha.unsqueeze(-1) * alpha.unsqueeze(-2)            # ∂nlml/∂K = ½ W
    g_sf2 = 0.5 * (W * Kf).sum()                               # ∂K/∂ log sf2 = K_f
    g_sn2 = 0.5 * W.diagonal().sum() * log_sn2.detach().exp() if noise is None else torch.zeros_like(value)
    # ∂K/∂ log ls_d = ∂k/∂r² · (-2 (x_d - x_d')² / ls_d²), with ∂k/∂r² = -½ K_f (RBF) or -5/6 sf2 e (1 + √5 r)
    W *= (-0.5 * Kf) if kernel == "rbf" else (-5.0 / 6.0 * sf2) * e * (1 + math.sqrt(5.0) * r)
    g_ls = torch.stack([-(W * ((X[:, d, None] - X[None, :, d]) / ls[d]).pow(2)).sum() for d in range(D)])
    return value, g_ls.to(log_ls), g_sf2.to(log_sf2), g_sn2.to(log_sn2)


class _ClosedFormGradient(torch.autograd.Function):
    """``value`` with the gradient computed with it (:func:`_nlml_and_gradient`) for the parameters."""

    @staticmethod
    def forward(ctx, value, g_ls, g_sf2, g_sn2, log_ls, log_sf2, log_sn2):
        ctx.save_for_backward(g_ls, g_sf2, g_sn2)
        return value.clone()

    @staticmethod
    def backward(ctx, grad):
        g_ls, g_sf2, g_sn2 = ctx.saved_tensors
        return None, None, None, None, grad * g_ls, grad * g_sf2, grad * g_sn2


def lbfgs_minimise(objective, params, max_iter):
    """Minimise ``objective(params)`` by L-BFGS (strong-Wolfe line search, ``lr`` 0.5) from ``params`` (leaf tensors
    that require gradients, updated in place). An undefined (``None``) or non-finite value counts as 1e10, so that
    the line search backs off an ill-conditioned point, and a failed line search keeps what it reached.

    :returns: the final value as a float (``inf`` where it is undefined or non-finite).
    """
    opt = torch.optim.LBFGS(params, lr=0.5, max_iter=max_iter, line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = objective(params)
        if loss is None or not torch.isfinite(loss):
            loss = sum(p.sum() * 0 for p in params) + 1e10
        loss.backward()
        return loss

    try:
        opt.step(closure)
    except RuntimeError:   # a failed line search on an ill-conditioned start: keep what it reached
        pass
    with torch.no_grad():
        value = objective(params)
    return float(value) if value is not None and torch.isfinite(value) else math.inf


class ExactGP:
    """Exact GP regression ``y = f(x) + ε``, ``f ~ GP(0, σ_f² k(x, x'))`` with ARD length-scales,
    ``ε ~ N(0, σ_n²)``, hyperparameters by type-II maximum likelihood.

    :param str kernel: ``"rbf"`` (default) or ``"matern52"``.
    :param float noise: fix the noise variance at this fraction of the targets' variance (e.g. ``1e-6`` for a
        deterministic simulator); ``None`` (default) learns it, bounded below by ``min_noise``.
    :param float min_noise: lower bound of the learned noise variance, as a fraction of the targets' variance.
    :param int restarts: L-BFGS starts (the first from length-scales of 0.5 on the unit cube, the others random).
    :param int max_exact: the largest number of training cases used (a random subset above it).
    :param int seed: seed of the random starts and the subset.

    Example::

        gp = ExactGP().fit(X_train, y_train)          # X [n, D], y [n] or [n, 1]
        mean, var = gp.predict(X_test)                # [m], [m] (var of a new observation: include_noise=True)
    """

    def __init__(self, *, kernel="rbf", noise=None, min_noise=1e-8, restarts=3, max_exact=2000, seed=0):
        if kernel not in KERNELS:
            raise ValueError(f"ExactGP: kernel must be one of {KERNELS}, got {kernel!r}")
        if noise is not None and not (float(noise) > 0):
            raise ValueError(f"ExactGP: noise must be a positive fraction of the targets' variance or None, got "
                             f"{noise!r}")
        self.kernel, self.noise, self.min_noise = kernel, noise, float(min_noise)
        self.restarts, self.max_exact, self.seed = int(restarts), int(max_exact), int(seed)
        self.subset = False

    # ---------------------------------------------------------------------------------------------- fitting
    def _nlml(self, params, X, y):
        """The negative log marginal likelihood of the scaled problem at ``params = [log ls [D], log sf2, log sn2]``
        (``None`` where the Gram matrix does not factorise), differentiable in ``params``: its gradient is the
        closed form ``½ tr((K⁻¹ - α αᵀ) ∂K/∂θ)`` (Rasmussen & Williams 2006, Eq. (5.9)), computed here with one
        ``cholesky_inverse``; autograd through the Cholesky factor and the solve costs about 5x more on 2000 cases
        (measured: 1.3 s against 0.3 s per evaluation), and the baselines of ``pyro-dag fit --csv`` are hundreds
        of these."""
        log_ls, log_sf2, log_sn2 = params
        if not torch.is_grad_enabled() or not any(p.requires_grad for p in params):
            out = _nlml_and_gradient(self.kernel, X, y, log_ls, log_sf2, log_sn2, self.noise, self.min_noise,
                                     gradient=False)
            return None if out is None else out[0]
        out = _nlml_and_gradient(self.kernel, X, y, log_ls, log_sf2, log_sn2, self.noise, self.min_noise)
        if out is None:
            return None
        return _ClosedFormGradient.apply(out[0], *out[1:], log_ls, log_sf2, log_sn2)

    def fit(self, X, y):
        """Fit to ``X [n, D]``, ``y [n]`` (or ``[n, 1]``); rows with a non-finite value are refused.

        :returns: ``self``.
        """
        with torch.enable_grad():  # the fit needs gradients even when called under torch.no_grad()
            return self._fit(X, y)

    def _prepare(self, X, y, where="ExactGP.fit"):
        """Checked training data, subset above ``max_exact`` (the generator then goes on to draw the starts),
        and the scaling: ``(X, y, Xs, ys, generator)``."""
        X, y = training_data(X, y, where)
        gen = torch.Generator().manual_seed(self.seed)
        if X.shape[0] > self.max_exact:
            idx = torch.randperm(X.shape[0], generator=gen)[: self.max_exact]
            X, y = X[idx], y[idx]
            self.subset = True
        self._lo, span = X.min(0).values, X.max(0).values - X.min(0).values
        self._span = torch.where(span > 0, span, torch.ones_like(span))
        column_moments(y, f"{where}: y")  # refuses outputs whose standard deviation overflows float64
        self._y_mean, y_sd = y.mean(), y.std()
        self._y_sd = y_sd if float(y_sd) > 0 else torch.ones_like(y_sd)
        return X, y, (X - self._lo) / self._span, (y - self._y_mean) / self._y_sd, gen

    def _fit(self, X, y):
        X, y, Xs, ys, gen = self._prepare(X, y)
        best, best_val = None, math.inf
        D = X.shape[1]
        for k in range(max(1, self.restarts)):
            f32 = torch.float32  # the starts in float32 whatever the default dtype: the fit does not depend on it
            if k == 0:
                start = [torch.full((D,), math.log(0.5), dtype=f32), torch.tensor(0.0, dtype=f32),
                         torch.tensor(math.log(0.01), dtype=f32)]
            else:
                start = [torch.empty(D, dtype=f32).uniform_(math.log(0.05), math.log(2.0), generator=gen),
                         torch.empty((), dtype=f32).uniform_(-1.0, 1.0, generator=gen),
                         torch.empty((), dtype=f32).uniform_(math.log(1e-6), math.log(0.1), generator=gen)]
            params = [p.to(torch.float64).clone().requires_grad_() for p in start]
            value = lbfgs_minimise(lambda q: self._nlml(q, Xs, ys), params, 200)
            if value < best_val:
                best, best_val = [p.detach().clone() for p in params], value
        if best is None:
            raise RuntimeError("ExactGP.fit: every start gave a non-positive-definite Gram matrix")
        return self._finish(Xs, ys, best, best_val)

    def _finish(self, Xs, ys, best, best_val):
        """Keep the fitted ``best = [log ls [D], log sf2, log sn2]`` (negative log marginal likelihood ``best_val`` on
        the scaled problem ``Xs, ys``) and factorise the Gram matrix for :meth:`predict`."""
        self.log_lengthscale, self.log_signal, self.log_noise = best
        self.log_marginal_likelihood = -best_val - ys.shape[0] * math.log(float(self._y_sd))
        self._Xs, self._ys = Xs, ys
        noise = self.noise_fraction
        K = _kernel(self.kernel, Xs, Xs, self.log_lengthscale, self.log_signal)
        K = K + noise * torch.eye(Xs.shape[0], dtype=Xs.dtype)
        self._L = torch.linalg.cholesky(K)
        self._alpha = torch.cholesky_solve(ys.unsqueeze(-1), self._L).squeeze(-1)
        return self

    # -------------------------------------------------------------------------------------------- results
    @property
    def noise_fraction(self):
        """The fitted noise variance as a fraction of the training targets' variance."""
        if self.noise is not None:
            return float(self.noise)
        return float(self.log_noise.exp()) + self.min_noise

    @property
    def noise_variance(self):
        """The fitted noise variance in the targets' units."""
        return self.noise_fraction * float(self._y_sd) ** 2

    @property
    def signal_variance(self):
        """The fitted signal variance ``σ_f²`` in the targets' units."""
        return float(self.log_signal.exp()) * float(self._y_sd) ** 2

    @property
    def lengthscales(self):
        """ARD length-scales in the inputs' units ``[D]``."""
        return self.log_lengthscale.exp() * self._span

    @torch.no_grad()
    def predict(self, X, include_noise=False):
        """Predictive mean and variance at ``X [m, D]``: of ``f``, or of a new observation with
        ``include_noise``.

        :returns: ``(mean [m], var [m])`` in the targets' units (float64).
        """
        X = torch.as_tensor(X, dtype=torch.float64)
        if X.dim() == 1:
            X = X.unsqueeze(-1)
        Xs = (X - self._lo) / self._span
        mean = torch.empty(Xs.shape[0], dtype=torch.float64)
        var = torch.empty(Xs.shape[0], dtype=torch.float64)
        # rows in chunks: the cross-covariances of all rows at once are [m, n, D] (3 GiB for the 2·10⁵ rows the
        # hidden-node start predicts from a 2000-case pilot); a chunk's are at most PREDICT_CHUNK_ELEMENTS
        n, D = self._Xs.shape
        step = max(1, PREDICT_CHUNK_ELEMENTS // (n * max(D, 1)))
        for lo in range(0, Xs.shape[0], step):
            Ks = _kernel(self.kernel, Xs[lo:lo + step], self._Xs, self.log_lengthscale, self.log_signal)
            mean[lo:lo + step] = Ks @ self._alpha
            v = torch.linalg.solve_triangular(self._L, Ks.T, upper=False)
            var[lo:lo + step] = (self.log_signal.exp() - v.pow(2).sum(0)).clamp_min(1e-12)
        if include_noise:
            var = var + self.noise_fraction
        return self._y_mean + self._y_sd * mean, self._y_sd ** 2 * var
