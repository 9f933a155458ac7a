r"""The latent-MAP objective of LaMP-DGP on a DAG: exact-GP node densities with the output variance profiled out.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation", Sec. 3,
Eqs. (4)-(7), written for a DAG (the paper's two-layer model ``X -> {W_1..W_D} -> Y`` is the special case): every
non-root node ``v`` is ``d_v`` independent zero-mean exact GPs on its parents' values (roots' design columns,
observed parents' observations, hidden parents' per-case values ``W``), and

.. math::

    L_S = -\frac{1}{|S|}\Big[\sum_{v\ \text{hidden}} \sum_j \log N\big(W_{S,vj};\,0,\,K_{vj}(P_{S,v}) + εI\big)
          + \sum_{v\ \text{observed}} \sum_j \max_{τ^2}
            \log N\big(Y_{S,vj};\,0,\,τ^2 (K_{vj}(P_{S,v}) + g_{vj} I)\big)\Big]

over a set ``S`` of cases (all training cases for the full-batch objective ``L_n``, a mini-batch otherwise, Sec. 4.1).
Hidden nodes have process variance 1 (identifiability, Sec. 2) and a fixed jitter ``ε``; observed nodes' variance is
profiled, ``τ̂² = Y^T (K + gI)^{-1} Y / |S|`` (Eq. (5)). The profiled term is the maximised log-likelihood with its
constants, ``-(m/2)(log(2π τ̂²) + 1) - ½ log|K + gI|``, which differs from the paper's ``ℓ₂`` of Eq. (7) by a constant
only (same gradients, Sec. 3.1) and equals the unprofiled log-likelihood at ``τ² = τ̂²``.

Kernels (as in :class:`~pyro_dag.infer.lamp.FittedNode`), with ``u = (x - x') / ℓ`` elementwise: ``"rbf"``
``exp(-||u||²/2)`` (the paper's Eq. (1) ``exp(-||x - x'||²/θ)`` with ``θ = 2ℓ²``) and ``"matern52"``, the separable
Matérn-5/2 ``Π_d (1 + √5|u_d| + 5u_d²/3) exp(-√5|u_d|)``.
"""
import math

import torch

from .fitted import KERNELS

__all__ = ["LaMPNumericalError", "kernel_matrix", "gp_log_density", "profiled_log_likelihood",
           "gaussian_log_likelihood", "LaMPObjective"]

_SQRT5 = math.sqrt(5.0)


class LaMPNumericalError(ValueError):
    """A Gram matrix of a LaMP-DGP node is not positive definite; the message names the node and the fix."""


def _sq_dist(X1, X2):
    """``[n1, n2]`` squared Euclidean distances (clamped at 0 against round-off)."""
    d = (X1 * X1).sum(-1, keepdim=True) - 2 * X1 @ X2.transpose(-1, -2) + (X2 * X2).sum(-1).unsqueeze(-2)
    return d.clamp_min(0)


def kernel_matrix(X1, X2, lengthscale, kernel="rbf"):
    r"""Cross-covariances ``k(X1, X2)`` of a node's ``d_w`` outputs (unit process variance).

    :param torch.Tensor X1: ``[n1, D]``. :param torch.Tensor X2: ``[n2, D]``.
    :param torch.Tensor lengthscale: ``[d_w, 1]`` (isotropic: one ``ℓ`` per output) or ``[d_w, D]`` (ARD).
    :param str kernel: ``"rbf"`` or ``"matern52"`` (separable, see the module docstring).
    :returns: ``[d_w, n1, n2]``.
    """
    if kernel not in KERNELS:
        raise ValueError(f"kernel must be one of {KERNELS}, got {kernel!r}")
    d_w, L = lengthscale.shape
    D = X1.shape[-1]
    if L not in (1, D):
        raise ValueError(f"lengthscale must be [d_w, 1] or [d_w, D={D}], got {tuple(lengthscale.shape)}")
    if kernel == "rbf":
        if L == 1:
            return torch.exp(-0.5 * _sq_dist(X1, X2) / lengthscale.pow(2).view(d_w, 1, 1))
        Z1 = X1.unsqueeze(0) / lengthscale.unsqueeze(1)
        Z2 = X2.unsqueeze(0) / lengthscale.unsqueeze(1)
        return torch.exp(-0.5 * _sq_dist(Z1, Z2))
    log_k = 0.0
    for d in range(D):
        diff = (X1[:, d:d + 1] - X2[:, d].unsqueeze(0)).abs()
        r = diff / lengthscale[:, 0 if L == 1 else d].view(d_w, 1, 1)
        log_k = log_k + torch.log1p(_SQRT5 * r + (5.0 / 3.0) * r * r) - _SQRT5 * r
    return torch.exp(log_k)


def _cholesky(Sigma, node, what):
    L, info = torch.linalg.cholesky_ex(Sigma)
    if bool((info > 0).any()):
        j = int((info > 0).nonzero()[0])
        raise LaMPNumericalError(
            f"node {node!r}: the Gram matrix of output {j} ({what}) is not positive definite. Likely causes: "
            f"repeated or nearly repeated inputs of {node!r} (merge or drop repeated cases), or a length-scale that "
            f"grew very large; raise the jitter (LatentMAP(jitter=...)) or, for an observed node, the nugget")
    return L


def gp_log_density(y, Sigma, node="node"):
    r"""``Σ_j log N(y_j; 0, Σ_j)``, one term per output.

    :param torch.Tensor y: ``[m, d_w]``. :param torch.Tensor Sigma: ``[d_w, m, m]`` covariances.
    :returns: ``[d_w]``.
    """
    L = _cholesky(Sigma, node, "hidden-node prior")
    alpha = torch.linalg.solve_triangular(L, y.transpose(0, 1).unsqueeze(-1), upper=False).squeeze(-1)
    m = y.shape[0]
    logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return -0.5 * (alpha.pow(2).sum(-1) + logdet + m * math.log(2 * math.pi))


def profiled_log_likelihood(y, Sigma, node="node"):
    r"""The GP log-likelihood maximised over the process variance (Chang & Sung 2026, Eqs. (5) and (7)).

    ``max_{τ²} log N(y_j; 0, τ² Σ_j) = -(m/2)(log(2π τ̂_j²) + 1) - ½ log|Σ_j|`` with ``τ̂_j² = y_j^T Σ_j^{-1} y_j / m``.

    :param torch.Tensor y: ``[m, d_w]``. :param torch.Tensor Sigma: ``[d_w, m, m]`` (``K + gI``).
    :returns: ``(log_lik [d_w], tau2 [d_w])``.
    """
    L = _cholesky(Sigma, node, "observed-node likelihood")
    alpha = torch.linalg.solve_triangular(L, y.transpose(0, 1).unsqueeze(-1), upper=False).squeeze(-1)
    m = y.shape[0]
    tau2 = alpha.pow(2).sum(-1) / m
    logdet = 2 * torch.log(torch.diagonal(L, dim1=-2, dim2=-1)).sum(-1)
    return -0.5 * m * (torch.log(2 * math.pi * tau2) + 1) - 0.5 * logdet, tau2


def gaussian_log_likelihood(y, Sigma, tau2):
    r"""The unprofiled ``Σ``-scaled log-likelihood ``log N(y_j; 0, τ_j² Σ_j)`` (reference for the profiled one).

    :param torch.Tensor y: ``[m, d_w]``. :param torch.Tensor Sigma: ``[d_w, m, m]``. :param tau2: ``[d_w]``.
    :returns: ``[d_w]``.
    """
    tau2 = torch.as_tensor(tau2, dtype=y.dtype, device=y.device)
    return gp_log_density(y, tau2.view(-1, 1, 1) * Sigma)


class LaMPObjective:
    r"""``L_S`` of the module docstring for one DAG, evaluated on a subset of the training cases.

    :param list nodes: the non-root nodes in topological order.
    :param dict inputs: ``{node: tuple of input blocks}`` (root names and non-root parents, in column order).
    :param set hidden: the hidden (unobserved) nodes; the others are observed.
    :param dict fixed: ``{name: [n, d]}`` values known before fitting: root design matrices and observations of the
        observed nodes, on the training cases.
    :param dict observed_rows: ``{node: bool [n]}`` for an observed node observed at some cases only (a leaf);
        its likelihood uses those cases.
    :param str kernel: ``"rbf"`` or ``"matern52"``.
    :param float jitter: ``ε`` of the hidden nodes.
    """

    def __init__(self, *, nodes, inputs, hidden, fixed, observed_rows=None, kernel="rbf", jitter=1e-6):
        self.nodes = list(nodes)
        self.inputs = dict(inputs)
        self.hidden = set(hidden)
        self.fixed = dict(fixed)
        self.observed_rows = dict(observed_rows or {})
        self.kernel = kernel
        self.jitter = float(jitter)

    def node_inputs(self, v, rows, W):
        """``[m, D_v]``: node ``v``'s input columns at the cases ``rows`` (``W = {hidden: [m, d]}`` at those rows)."""
        blocks = [W[p] if p in self.hidden else self.fixed[p][rows] for p in self.inputs[v]]
        return blocks[0] if len(blocks) == 1 else torch.cat(blocks, -1)

    def node_terms(self, rows, W, lengthscales, nuggets):
        r"""Per-node log-density terms at the cases ``rows``.

        :param torch.Tensor rows: ``[m]`` indices of training cases.
        :param dict W: ``{hidden node: [m, d_v]}`` the per-case values at those cases.
        :param dict lengthscales: ``{node: [d_v, 1] or [d_v, D_v]}``. :param dict nuggets: ``{observed: [d_v]}``.
        :returns: ``{node: (log-density [d_v], number of cases used)}``, and ``{observed node: τ̂² [d_v]}``.
        """
        terms, tau2s = {}, {}
        for v in self.nodes:
            P = self.node_inputs(v, rows, W)
            if v in self.hidden:
                y = W[v]
            else:
                y = self.fixed[v][rows]
                if v in self.observed_rows:
                    keep = self.observed_rows[v][rows]
                    P, y = P[keep], y[keep]
                    if y.shape[0] == 0:
                        continue
            K = kernel_matrix(P, P, lengthscales[v], self.kernel)
            eye = torch.eye(y.shape[0], dtype=y.dtype, device=y.device)
            if v in self.hidden:
                terms[v] = (gp_log_density(y, K + self.jitter * eye, v), y.shape[0])
            else:
                ll, tau2 = profiled_log_likelihood(y, K + nuggets[v].view(-1, 1, 1) * eye, v)
                terms[v], tau2s[v] = (ll, y.shape[0]), tau2
        return terms, tau2s

    def __call__(self, rows, W, lengthscales, nuggets):
        """``L_S`` (a scalar): minus the summed node terms over ``|S| = len(rows)``."""
        terms, _ = self.node_terms(rows, W, lengthscales, nuggets)
        total = sum(t.sum() for t, _ in terms.values())
        return -total / rows.shape[0]
