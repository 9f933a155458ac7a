r"""Scalable approximate prediction for large ``n``: Nyström first layer + nearest-neighbour local GP.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation",
Sec. 4.4, used there when ``n > 1000``:

* **first layer** (nodes whose inputs are all roots): the Gram matrix is replaced by its Nyström approximation
  ``K(X) ≈ K(X, X_Q) K(X_Q)⁻¹ K(X_Q, X)`` on a random subset ``Q`` of ``n_Q`` training rows (seeded). The
  predictive mean is then the subset-of-regressors mean
  ``μ(x) = k(x, X_Q) (g K(X_Q) + K(X_Q, X) K(X, X_Q))⁻¹ K(X_Q, X) y``; the reported variance is the matching
  DTC variance ``τ² [1 - q(x, x) + g k(x, X_Q) (g K(X_Q) + K(X_Q, X) K(X, X_Q))⁻¹ k(X_Q, x)]``
  (Quiñonero-Candela & Rasmussen 2005). Both are computed through a QR factorisation of
  ``[Aᵀ; √g I]``, ``A = L_Q⁻¹ K(X_Q, X)``, which avoids squaring the condition number of ``A``.
* **later layers**: the parents' approximate *means* are plugged in as inputs (no uncertainty propagation);
  among the node's training inputs the ``k`` nearest neighbours of the plug-in input (Euclidean distance on
  inputs divided by the output's lengthscales, which is the paper's Euclidean distance for its isotropic
  kernels) carry an exact local GP, ``O(k³)`` per test point. The variance is the local GP's conditional
  variance only.

With ``n_Q = n`` and ``k = n`` this is the exact GP prediction at the plug-in inputs. Uncertainty of the
parents is dropped, so the variances are smaller than the exact linked GP's.
"""
import torch

from ...gp.conditional import NotPositiveDefiniteError, cholesky_with_jitter, default_jitter
from .expectations import kernel_matrix

__all__ = ["NystromLocalGP", "nystrom_state", "nystrom_moments", "local_gp_moments"]

_LOCAL_BUDGET = 2 ** 21  # elements of one [chunk, k, k] block of local Gram matrices


def _cholesky(K, node, what):
    try:
        return cholesky_with_jitter(K, node=node.name)
    except NotPositiveDefiniteError as e:
        raise NotPositiveDefiniteError(
            f"node {node.name!r}: the {what} is not positive definite even with jitter; the node's training "
            "inputs probably contain repeated rows (drop duplicates)") from e


def nystrom_state(node, subset):
    r"""Precomputed Nyström (subset-of-regressors) factors of a first-layer node.

    :param FittedNode node: the node. :param torch.Tensor subset: ``[n_Q]`` row indices of the subset ``Q``.
    :returns: list over outputs ``j`` of ``(L_Q, R, w, g)`` with ``K(X_Q) + εI = L_Q L_Qᵀ``, ``R`` the triangular
        factor of ``g I + A Aᵀ = RᵀR``, ``w = L_Q⁻ᵀ R⁻¹ Q_Rᵀ [y; 0]`` (so ``μ(x) = k(x, X_Q) w``) and the
        effective nugget ``g`` (the node's nugget plus the exact path's first jitter rung).
    """
    XQ = node.X[subset]
    states = []
    for j in range(node.output_dim):
        ell = node.lengthscale[j]
        LQ = _cholesky(kernel_matrix(node.kernel, XQ, XQ, ell), node, "Nyström subset Gram matrix K(X_Q, X_Q)")
        A = torch.linalg.solve_triangular(LQ, kernel_matrix(node.kernel, XQ, node.X, ell), upper=False)
        g = node.nugget[j] + default_jitter(node.X.dtype) * (1 + node.nugget[j])
        nq = XQ.shape[0]
        M = torch.cat([A.T, g.sqrt() * torch.eye(nq, dtype=A.dtype, device=A.device)], 0)  # [n + n_Q, n_Q]
        Qf, R = torch.linalg.qr(M)
        rhs = Qf[: node.X.shape[0]].T @ node.y[:, j]  # Q_Rᵀ [y; 0]
        beta = torch.linalg.solve_triangular(R, rhs.unsqueeze(-1), upper=True)
        w = torch.linalg.solve_triangular(LQ.T, beta, upper=True).squeeze(-1)
        states.append((LQ, R, w, g))
    return states


def nystrom_moments(node, state, subset, x):
    r"""Nyström mean and DTC variance of a first-layer node at fixed inputs.

    :param FittedNode node: the node. :param state: :func:`nystrom_state` of it. :param subset: ``[n_Q]``.
    :param torch.Tensor x: ``[m, D]`` test inputs.
    :returns: ``(mean [m, d_w], var [m, d_w])``.
    """
    XQ = node.X[subset]
    means, variances = [], []
    for j, (LQ, R, w, g) in enumerate(state):
        k = kernel_matrix(node.kernel, x, XQ, node.lengthscale[j])  # [m, n_Q]
        v = torch.linalg.solve_triangular(LQ, k.T, upper=False)  # L_Q⁻¹ k_Q*
        u = torch.linalg.solve_triangular(R.T, v, upper=False)  # R⁻ᵀ L_Q⁻¹ k_Q*
        means.append(k @ w)
        variances.append((node.variance[j] * (1 - v.pow(2).sum(0) + g * u.pow(2).sum(0))).clamp_min(0))
    return torch.stack(means, -1), torch.stack(variances, -1)


def local_gp_moments(node, x, num_neighbours, chunk_size=None):
    r"""Nearest-neighbour local exact GP of one node at fixed (plug-in) inputs (Chang & Sung 2026, Sec. 4.4).

    For each test input and output ``j``, the ``k`` training rows nearest in ``||(x - x_i)/ℓ_j||`` carry an exact
    GP (kernel, variance and nugget of the node): mean ``k_*ᵀ (K_kk + gI)⁻¹ y_k``, variance
    ``τ² (1 - k_*ᵀ (K_kk + gI)⁻¹ k_*)``.

    :param FittedNode node: the node. :param torch.Tensor x: ``[m, D]``. :param int num_neighbours: ``k``
        (``k ≥ n`` uses every training row: the exact GP).
    :param int chunk_size: test points per batch of local Gram matrices (default about ``2²¹ / k²``).
    :returns: ``(mean [m, d_w], var [m, d_w])``.
    """
    n = node.X.shape[0]
    k = min(int(num_neighbours), n)
    chunk = chunk_size or max(1, _LOCAL_BUDGET // (k * k))
    eye = torch.eye(k, dtype=node.X.dtype, device=node.X.device)
    means, variances = [], []
    for j in range(node.output_dim):
        ell = node.lengthscale[j]
        U = node.X / ell
        mu, var = [], []
        for start in range(0, x.shape[0], chunk):
            xc = x[start:start + chunk]
            idx = torch.cdist(xc / ell, U).topk(k, dim=-1, largest=False).indices  # [c, k]
            Xn, yn = node.X[idx], node.y[idx, j]  # [c, k, D], [c, k]
            K = kernel_matrix(node.kernel, Xn, Xn, ell) + node.nugget[j] * eye
            L = _cholesky(K, node, "local Gram matrix of the nearest neighbours")
            ks = kernel_matrix(node.kernel, xc.unsqueeze(-2), Xn, ell).transpose(-1, -2)  # [c, k, 1]
            v = torch.linalg.solve_triangular(L, ks, upper=False)
            alpha = torch.linalg.solve_triangular(L, yn.unsqueeze(-1), upper=False)
            mu.append((v * alpha).sum((-2, -1)))
            var.append(node.variance[j] * (1 - v.pow(2).sum((-2, -1))))
        means.append(torch.cat(mu))
        variances.append(torch.cat(var).clamp_min(0))
    return torch.stack(means, -1), torch.stack(variances, -1)


class NystromLocalGP:
    r"""The ``method="nystrom_local"`` engine of :class:`~pyro_dag.infer.lamp.LinkedGPPredictor`.

    First-layer nodes: :func:`nystrom_moments` on a seeded random subset of ``min(n_Q, n)`` rows. Other nodes:
    :func:`local_gp_moments` at the parents' plug-in means (Chang & Sung 2026, Sec. 4.4).

    :param predictor: the :class:`~pyro_dag.infer.lamp.LinkedGPPredictor` (its nodes and order).
    :param int num_nystrom: ``n_Q``. :param int num_neighbours: ``k``. :param int seed: seed of the subsets
        (drawn per node in topological order). :param int chunk_size: test points per local-GP batch.
    """

    def __init__(self, predictor, *, num_nystrom, num_neighbours, seed=0, chunk_size=None):
        self.predictor = predictor
        self.num_nystrom, self.num_neighbours, self.chunk_size = num_nystrom, num_neighbours, chunk_size
        generator = torch.Generator().manual_seed(int(seed))
        self.subsets, self.states = {}, {}
        for name in predictor.order:
            if predictor.is_first_layer(name):
                node = predictor.nodes[name]
                n = node.X.shape[0]
                subset = torch.randperm(n, generator=generator)[: min(num_nystrom, n)].sort().values
                self.subsets[name] = subset.to(node.X.device)
                self.states[name] = None  # factorised on first use

    def moments(self, roots, order):
        """``{node: (mean [m, d_w], var [m, d_w])}`` for the nodes in ``order`` (topological)."""
        nodes, values = self.predictor.nodes, {}
        with torch.no_grad():
            for name in order:
                node = nodes[name]
                x = torch.cat([values[p][0] if p in nodes else roots[p] for p in node.inputs], -1)
                if name in self.subsets:
                    if self.states[name] is None:
                        self.states[name] = nystrom_state(node, self.subsets[name])
                    values[name] = nystrom_moments(node, self.states[name], self.subsets[name], x)
                else:
                    values[name] = local_gp_moments(node, x, self.num_neighbours, self.chunk_size)
        return values
