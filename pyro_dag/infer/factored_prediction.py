"""Prediction through a node with independent inducing outputs at ``O(M r)`` per (sample, case) instead of ``O(M²)``.

Under a posterior with independent blocks (mean field, or the chordal guide after exact fits of every node,
:meth:`~pyro_dag.infer.autoguide.families.ChordalFamily.prediction_posterior`) the predictive of a one-output node
``w`` at an input ``x`` is (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed
Acyclic Graphs", arXiv:2607.09645, Eqs. (80) and (93))

    μ(x) = aᵀ m,    σ²(x) = k(x, x) - aᵀ a + aᵀ S a = k(x, x) - aᵀ (I - S) a,    a = R⁻¹ k(Z, x),

with ``K(Z, Z) + εI = R Rᵀ``. The reference path solves for ``a`` (``O(M²)`` per row) and forms ``aᵀ S a``
(``O(M²)``); below a node whose parents are drawn, every (sample, case) pair has its own ``x``, so with
``M = 512`` inducing points and hundreds of draws this dominated ``pyro-dag fit --csv`` on many rows. Here both
are computed once per node: ``c = R⁻ᵀ m`` and, from the eigen-decomposition ``I - S = W Λ Wᵀ``, the factor
``B = R⁻ᵀ W_k |Λ_k|^½`` of the eigenvalues kept, so that ``μ(x) = k(Z, x)ᵀ c`` and
``σ²(x) = k(x, x) - Σ_j sign(λ_j) (Bᵀ k(Z, x))_j²``: ``O(M r)`` per row, ``r`` the eigenvalues kept.

**The dropped part is bounded.** The eigenvalues dropped, ``|λ_j| ≤ λ_drop``, change ``σ²(x)`` by at most
``λ_drop ‖a‖² ≤ λ_drop k(x, x)`` (``‖a‖² = k(Z, x)ᵀ (K + εI)⁻¹ k(Z, x) ≤ k(x, x)``: the Schur complement of the
Gram matrix of ``(Z, x)`` plus ``εI`` on ``Z``). The eigenvalues are dropped only below
``tolerance / max k(z, z)`` over the inducing inputs, and every chunk of rows checks ``λ_drop k(x, x) ≤
tolerance`` row by row (rows that fail take the reference path), where ``tolerance`` is
:attr:`DAGDGP.predict_factored_tolerance <pyro_dag.dgp.prediction.Prediction.predict_factored_tolerance>` times the
node's Gaussian noise variance (times ``max k(z, z)`` for other likelihoods).

**Rounding.** ``c`` and ``B`` are interpolation weights, larger than ``a`` by up to the conditioning of ``R``, so
the factored form is used in float64 only, and the first rows each node predicts are also computed on the
reference path: a node whose two answers differ by more than the tolerance (mean or variance) goes back to the
reference path for the whole prediction.
"""
import torch

from ..dgp.conditionals import _concat_values
from ..gp.conditional import whitened_predictive
from ..gp.likelihoods import Gaussian
from .autoguide.samplers import MeanFieldState

__all__ = ["NodeFactor", "FactoredMeanFieldState", "node_factors"]

#: Rows of the first chunk of each node checked against the reference path (see the module docstring).
CHECK_ROWS = 256


class NodeFactor:
    """The predictive of one one-output node in factored form (module docstring).

    :param kernel: the node's kernel. :param torch.Tensor Z: ``[M, D]`` inducing inputs.
    :param torch.Tensor R: ``[M, M]`` upper-triangular factor, ``K(Z, Z) + εI = R Rᵀ`` (the model's whitening).
    :param torch.Tensor m: ``[M]`` mean and :param torch.Tensor S: ``[M, M]`` covariance of the whitened
        inducing outputs. :param float tolerance: the largest change of a predictive variance allowed from the
        dropped eigenvalues (absolute, in the node's units).
    """

    @torch.no_grad()
    def __init__(self, kernel, Z, R, m, S, tolerance):
        self.kernel, self.Z, self.R, self.m, self.S = kernel, Z, R, m, S
        self.tolerance = float(tolerance)
        M = Z.shape[0]
        eye = torch.eye(M, dtype=S.dtype, device=S.device)
        lam, W = torch.linalg.eigh(eye - 0.5 * (S + S.T))
        kscale = float(kernel(Z, diag=True).max())
        keep = lam.abs() > self.tolerance / max(kscale, torch.finfo(S.dtype).tiny)
        #: ``max |λ|`` over the eigenvalues dropped (0 when none is).
        self.dropped = float(lam[~keep].abs().max()) if bool((~keep).any()) else 0.0
        #: Eigenvalues kept ``r``.
        self.rank = int(keep.sum())
        Rt = R.transpose(-1, -2)   # lower-triangular
        self.c = torch.linalg.solve_triangular(Rt, m.unsqueeze(-1), upper=False).squeeze(-1)
        self.B = torch.linalg.solve_triangular(Rt, W[:, keep] * lam[keep].abs().sqrt(), upper=False)
        self.sign = lam[keep].sign()
        self.checked = False

    @torch.no_grad()
    def reference(self, X):
        """``(loc, var)`` ``[..., B]`` at inputs ``X [..., B, D]`` on the reference path (triangular solve)."""
        return whitened_predictive(self.kernel, self.Z, self.R, X, self.m, self.S, upper=True)

    @torch.no_grad()
    def moments(self, X):
        """``(loc [..., B], var [..., B])`` at inputs ``X [..., B, D]``, or ``None`` where the factored form is not
        trusted (its first check against :meth:`reference` failed)."""
        if self.checked is None:
            return None
        Kxz = self.kernel(X, self.Z)   # [..., B, M]
        batch = Kxz.shape[:-1]
        kdiag = self.kernel(X, diag=True).expand(batch)
        loc = Kxz @ self.c
        P = Kxz @ self.B
        var = (kdiag - (P * P) @ self.sign).clamp_min(torch.finfo(Kxz.dtype).tiny)
        if self.dropped > 0:
            over = self.dropped * kdiag > self.tolerance   # the bound of the dropped part fails on these rows
            if bool(over.any()):
                ref_loc, ref_var = self.reference(X)
                loc, var = torch.where(over, ref_loc, loc), torch.where(over, ref_var, var)
        if not self.checked:
            rows = X.reshape(-1, X.shape[-1])[:CHECK_ROWS]
            ref_loc, ref_var = self.reference(rows)
            n = rows.shape[0]
            err = max(float((loc.reshape(-1)[:n] - ref_loc).abs().max()),
                      float((var.reshape(-1)[:n] - ref_var).abs().max()))
            # the dropped part may account for up to the tolerance; rounding for as much again
            if not err <= 2 * self.tolerance:
                self.checked = None
                return None
            self.checked = True
        return loc, var


class FactoredMeanFieldState(MeanFieldState):
    """:class:`~pyro_dag.infer.autoguide.samplers.MeanFieldState` whose one-output nodes are predicted through
    their :class:`NodeFactor` (prediction only: no gradients flow through the factors).

    :param posterior: a :class:`~pyro_dag.infer.autoguide.gaussians.MeanFieldPosterior`.
    :param dict factors: ``{node: NodeFactor}`` (:func:`node_factors`); other nodes take the mean-field path.
    """

    def __init__(self, posterior, factors):
        super().__init__(posterior)
        self.factors = factors

    def predict_node(self, model, node, values, cache=None):
        factor = self.factors.get(node)
        if factor is not None:
            out = factor.moments(_concat_values([values[p] for p in model.parents[node]]))
            if out is not None:
                return out[0].unsqueeze(-1), out[1][..., None, None]
        return super().predict_node(model, node, values, cache)


@torch.no_grad()
def node_factors(model, posterior, cache, tolerance):
    """:class:`NodeFactor` of every one-output GP node of ``model`` under ``posterior`` (a mean-field posterior;
    ``{}`` for any other posterior, outside float64, or with ``tolerance`` ``None``).

    :param cache: :meth:`~pyro_dag.DAGDGP.cholesky_cache`. :param float tolerance: the change of a predictive
        variance allowed from the dropped eigenvalues, as a fraction of the node's Gaussian noise variance (of
        ``max k(z, z)`` for another likelihood).
    """
    if tolerance is None or type(posterior.ancestral_state()) is not MeanFieldState or model.dtype != torch.float64:
        return {}
    out = {}
    for w in model.gp_nodes:
        if w not in posterior.block_of or posterior.block_of[w].dim != 1:
            continue
        Z, R = cache[w]
        if R.dim() != 2:   # a batch of hyperparameter draws
            continue
        kernel = model.kernels[w]
        likelihood = model.likelihoods[w]
        if isinstance(likelihood, Gaussian):
            scale = float(likelihood.variance.detach().reshape(-1).min())
        else:
            scale = float(kernel(Z, diag=True).max())
        L = posterior.scale_trils[w]
        out[w] = NodeFactor(kernel, Z.detach(), R.detach(), posterior.locs[w].detach(), (L @ L.T).detach(),
                            float(tolerance) * scale)
    return out
