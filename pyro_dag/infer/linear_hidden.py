"""The deep GP ``x → h → y`` with ``x → y`` whose hidden layer is linear, ``h = xA``, fitted exactly.

Salimbeni & Deisenroth (2017, "Doubly stochastic variational inference for deep Gaussian processes", NeurIPS) give
each hidden layer the mean function ``h = xA`` (a linear projection of its input) plus a GP warp; with the warp
switched off the hidden layer is deterministic and the two-layer model with the input connection of Duvenaud,
Rippel, Adams & Ghahramani (2014, "Avoiding pathologies in very deep networks") is an exact GP of ``y`` with the
kernel

    ``k((x, h), (x', h')) = σ_x² k_ARD(x, x') + σ_h² exp(-|xA - x'A|² / 2)``,   ``A`` ``[D, k]``,

which is the exact GP of ``y`` on ``x`` at ``σ_h² = 0`` (the deep model nests the shallow one). ``A`` carries the
hidden layer's length-scales (its columns' norms) and directions. It pays where the function varies along a few
directions that are not the coordinate axes (a crease or a step across the box), where an axis-aligned ARD kernel
must shorten every length-scale the direction touches.

:class:`LinearHiddenGP` fits ``A``, ``σ_h²``, ``σ_x²``, the ARD length-scales and the noise by type-II maximum
likelihood (L-BFGS), started from the shallow fit: its hyperparameters, its signal variance split in half between the
two parts, and ``A`` along the **active subspace** of its posterior mean (the top eigenvectors of
``mean_i ∇m(x_i) ∇m(x_i)ᵀ``; Constantine, Dow & Wang 2014, "Active subspace methods in theory and practice", SIAM J.
Sci. Comput. 36(4)), at a few scales. The fit has ``kD - k(k-1)/2 + 1`` more hyperparameters than the shallow one, so
its log marginal likelihood is compared after Schwarz's (1978, "Estimating the dimension of a model") penalty
``½ (extra) log n`` (:attr:`LinearHiddenGP.bic_gain`).

Why not the stochastic variational deep GP by default: started at the exact GP (:class:`~pyro_dag.infer.DeepRegression`
with ``method="svi"``), its ELBO ended below the exact GP's evidence on every one of 48 runs (e.g. on a 2-D crease,
seed 4 of the non-stationary tuning draws, 25 against 115 nats after 500 steps; on a 2-D step the interaction
variance stayed at its start, ``ELBO − evidence`` = −0.02), so the depth was never kept; this fit has no bound's slack
and no Monte Carlo noise in the comparison.
"""
import math

import torch

from ..baselines import ExactGP
from ..baselines.exact_gp import _kernel, lbfgs_minimise

__all__ = ["LinearHiddenGP", "active_subspace"]

#: Scales of ``A`` at the starts (``A = s·V``, ``V`` the active subspace: the hidden length-scale ``1/s`` on the
#: unit cube).
START_SCALES = (1.0, 3.0, 10.0)


def active_subspace(gp, k):
    """The top-``k`` eigenvectors ``[D, k]`` of ``mean_i ∇m(x_i) ∇m(x_i)ᵀ`` (``m`` the posterior mean of the fitted
    :class:`~pyro_dag.baselines.ExactGP` ``gp`` on its scaled inputs) and all the eigenvalues, largest first."""
    X = gp._Xs.detach().clone().requires_grad_()
    with torch.enable_grad():
        mean = _kernel(gp.kernel, X, gp._Xs, gp.log_lengthscale, gp.log_signal) @ gp._alpha
        grad = torch.autograd.grad(mean.sum(), X)[0]
    values, vectors = torch.linalg.eigh(grad.T @ grad / X.shape[0])
    return vectors.flip(-1)[:, :k], values.flip(-1)


class LinearHiddenGP:
    """Exact GP of ``y`` on ``(x, h = xA)`` (module docstring): the deep GP with a linear hidden layer of width
    ``width`` and the input connection, nesting the exact GP ``shallow``.

    :param int width: ``k``, the hidden layer's width (default 1; at most the number of inputs).
    :param tuple start_scales: scales of ``A`` at the L-BFGS starts (:data:`START_SCALES`).
    :param int max_iter: L-BFGS iterations per start.

    Example::

        shallow = ExactGP().fit(X, y)                       # X [n, D], y [n]
        deep = LinearHiddenGP().fit(X, y, shallow)
        deep.bic_gain > 0                                   # the depth pays by Schwarz's criterion
        mean, var = deep.predict(X_test)                    # [m], [m], y's units
    """

    def __init__(self, *, width=1, start_scales=START_SCALES, max_iter=300):
        if isinstance(width, bool) or not isinstance(width, int) or width < 1:
            raise ValueError(f"LinearHiddenGP: width must be an int >= 1, got {width!r}")
        if not start_scales or not all(float(s) > 0 for s in start_scales):
            raise ValueError(f"LinearHiddenGP: start_scales must be positive numbers, got {start_scales!r}")
        self.width, self.start_scales, self.max_iter = width, tuple(float(s) for s in start_scales), int(max_iter)

    # ------------------------------------------------------------------------------------------- the model
    def _gram(self, params, X1, X2):
        log_ls, log_sx, A, log_sh = params[:4]
        H1, H2 = X1 @ A, X2 @ A
        hidden = log_sh.exp() * torch.exp(-0.5 * (H1.unsqueeze(-2) - H2.unsqueeze(-3)).pow(2).sum(-1))
        return _kernel(self.shallow.kernel, X1, X2, log_ls, log_sx) + hidden

    def _noise(self, params):
        return params[4].exp() + self.shallow.min_noise

    def _nlml(self, params, X, y):
        n = X.shape[0]
        K = self._gram(params, X, X) + self._noise(params) * torch.eye(n, dtype=X.dtype, device=X.device)
        L, info = torch.linalg.cholesky_ex(K)
        if int(info) != 0:
            return None
        alpha = torch.cholesky_solve(y.unsqueeze(-1), L).squeeze(-1)
        return 0.5 * (y @ alpha) + L.diagonal().log().sum() + 0.5 * n * math.log(2 * math.pi)

    # ------------------------------------------------------------------------------------------- fitting
    def fit(self, X, y, shallow=None):
        """Fit to ``X [n, D]``, ``y [n]``, starting from ``shallow`` (an :class:`~pyro_dag.baselines.ExactGP` with
        the RBF or Matérn-5/2 kernel and a learned noise, fitted to the same ``X, y``; fitted here when ``None``).

        :returns: ``self``. :raises RuntimeError: when no start gives a positive-definite Gram matrix.
        """
        shallow = ExactGP().fit(X, y) if shallow is None else shallow
        if shallow.noise is not None:
            raise ValueError("LinearHiddenGP.fit: the shallow ExactGP must learn its noise (noise=None)")
        if not hasattr(shallow, "_Xs"):
            raise ValueError("LinearHiddenGP.fit: fit the shallow ExactGP first")
        self.shallow = shallow
        Xs, ys = shallow._Xs, shallow._ys
        if Xs.shape[0] != torch.as_tensor(X).shape[0]:
            raise ValueError(f"LinearHiddenGP.fit: the shallow fit has {Xs.shape[0]} cases, X has "
                             f"{torch.as_tensor(X).shape[0]}; fit both to the same data")
        n, D = Xs.shape
        k = min(self.width, D)
        V, self.eigenvalues = active_subspace(shallow, k)
        best, best_val = None, math.inf
        with torch.enable_grad():
            for scale in self.start_scales:
                start = [shallow.log_lengthscale, shallow.log_signal + math.log(0.5), V * scale,
                         shallow.log_signal + math.log(0.5), shallow.log_noise]
                params = [p.detach().to(torch.float64).clone().requires_grad_() for p in start]
                value = lbfgs_minimise(lambda q: self._nlml(q, Xs, ys), params, self.max_iter)
                if value < best_val:
                    best, best_val = [p.detach().clone() for p in params], value
        if best is None:
            raise RuntimeError("LinearHiddenGP.fit: every start gave a non-positive-definite Gram matrix")
        self.params = best
        self.log_marginal_likelihood = -best_val - n * math.log(float(shallow._y_sd))
        self.extra_parameters = k * D - k * (k - 1) // 2 + 1
        #: the log marginal likelihood gained over the shallow fit, less Schwarz's ½ (extra parameters) log n
        self.bic_gain = (self.log_marginal_likelihood - shallow.log_marginal_likelihood
                         - 0.5 * self.extra_parameters * math.log(n))
        K = self._gram(best, Xs, Xs) + self._noise(best) * torch.eye(n, dtype=Xs.dtype)
        self._L = torch.linalg.cholesky(K)
        self._alpha = torch.cholesky_solve(ys.unsqueeze(-1), self._L).squeeze(-1)
        return self

    # ------------------------------------------------------------------------------------------- results
    @property
    def projection(self):
        """``A`` ``[D, k]`` on the unit-cube-scaled inputs (``h = x_scaled A``)."""
        return self.params[2]

    @property
    def hidden_fraction(self):
        """``σ_h² / (σ_h² + σ_x²)``: the share of the signal variance that goes through ``h``."""
        sh, sx = float(self.params[3].exp()), float(self.params[1].exp())
        return sh / (sh + sx)

    @property
    def noise_variance(self):
        """The fitted noise variance in ``y``'s units."""
        return float(self._noise(self.params)) * float(self.shallow._y_sd) ** 2

    @torch.no_grad()
    def predict(self, X, include_noise=False):
        """Predictive mean and variance at ``X [m, D]``: of the latent function, or of a new observation with
        ``include_noise``. :returns: ``(mean [m], var [m])`` in ``y``'s units (float64)."""
        gp = self.shallow
        X = torch.as_tensor(X, dtype=torch.float64)
        X = X.unsqueeze(-1) if X.dim() == 1 else X
        Xs = (X - gp._lo) / gp._span
        Ks = self._gram(self.params, Xs, gp._Xs)
        mean = Ks @ self._alpha
        v = torch.linalg.solve_triangular(self._L, Ks.T, upper=False)
        prior = self.params[1].exp() + self.params[3].exp()
        var = (prior - v.pow(2).sum(0)).clamp_min(1e-12)
        if include_noise:
            var = var + self._noise(self.params)
        return gp._y_mean + gp._y_sd * mean, gp._y_sd ** 2 * var
