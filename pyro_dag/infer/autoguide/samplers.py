"""Samplers that push a Gaussian over the inducing outputs through the DAG, node by node.

A sampler state is created by a posterior (:meth:`~pyro_dag.infer.autoguide.gaussians.InducingPosterior.ancestral_state`
or :meth:`~pyro_dag.infer.autoguide.gaussians.InducingPosterior.joint_state`) for one pass of marginal ancestral
sampling (Perlino et al. 2026, "Deep Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645,
Prop. 9 and §2.6-2.9): for each node in topological order, ``predict(node, a, r)`` gives the Gaussian of the
node's values given the values already drawn for its predecessors (same sample, same case), where
``F_w = (I_d ⊗ aᵀ) vec(V_w) + √r ε`` is the whitened sparse-GP conditional, and ``update(node, a, r, f)``
conditions on the drawn values ``f``.

* :class:`MeanFieldState` -- DAG-VI, nothing to condition on (Algorithm 3);
* :class:`DenseAncestralState` -- exact Gaussian conditioning with a dense covariance (Algorithm 1); the sparse
  backend's Algorithm 2 is :class:`~pyro_dag.ops.chordal.SparseSquareRootConditioningState` (or, in factor form,
  :class:`~pyro_dag.ops.chordal.SparseConditioningState`);
* :class:`JointSampleState` -- one joint draw of ``V`` per (sample, case) pair, Rao-Blackwellised at the sinks
  (the ``"joint"`` sampler of :class:`~pyro_dag.infer.DAGELBO`).
"""
import torch

from ...dgp.handoff import standard_normal
from ...ops.quadratic import mean_and_quadratic
from ...utils import broadcast_shapes

__all__ = ["MeanFieldState", "DenseAncestralState", "JointSampleState"]


class MeanFieldState:
    """Algorithm 3 of Perlino et al. 2026 (arXiv:2607.09645, App. E.3.3): no conditioning between nodes, so the
    state is trivial.

    For node ``w`` with ``F_w = (I_d ⊗ a_bᵀ) vec(V_w) + noise``:
    ``μ = (I_d ⊗ aᵀ) m_w`` and ``Σ_F = (I_d ⊗ aᵀ) S_w (I_d ⊗ a) + r I_d`` (Eq. (93)).
    """

    def __init__(self, posterior):
        self.posterior = posterior

    def predict(self, node, a, r):
        """:param a: ``[..., B, M]``. :param r: ``[..., B]``.
        :returns: ``(loc [..., B, d], cov [..., B, d, d])``."""
        post = self.posterior
        b = post.block_of[node]
        if b.dim == 1:
            # aᵀ S a with S = L Lᵀ formed once ([M, M]): one [S B, M] x [M, M] product over all (sample, case)
            # pairs and none backwards (∂/∂a = 2 S a is kept from the forward), instead of A L and two products
            # backwards; the mean rides in the same fused op (pyro_dag.ops.quadratic).
            L = post.scale_trils[node]
            loc, q = mean_and_quadratic(a, post.locs[node], L @ L.T)
            return loc.unsqueeze(-1), (q + r)[..., None, None]
        m = post.locs[node].reshape(b.dim, b.num_inducing)
        L = post.scale_trils[node].reshape(b.dim, b.num_inducing, b.size)
        loc = a @ m.T
        AL = torch.stack([a @ L[j] for j in range(b.dim)], dim=-2)  # [..., d, P]
        cov = torch.einsum("...jp,...kp->...jk", AL, AL)
        cov = cov + r[..., None, None] * torch.eye(b.dim, dtype=a.dtype, device=a.device)
        return loc, cov

    def predict_node(self, model, node, values, cache=None):
        """:meth:`predict` of a one-output node straight from the model's GP pieces: the whitened conditional and
        the moments in one op (:meth:`~pyro_dag.DAGDGP.node_predictive`, whose backward reuses ``∂/∂S``).

        :returns: ``(loc [..., B, 1], cov [..., B, 1, 1])``, or ``None`` (then call
            :meth:`~pyro_dag.DAGDGP.node_conditional` and :meth:`predict`).
        """
        post = self.posterior
        if post.block_of[node].dim != 1:
            return None
        L = post.scale_trils[node]
        out = model.node_predictive(node, values, post.locs[node], L @ L.T, cache)
        if out is None:
            return None
        return out[0].unsqueeze(-1), out[1][..., None, None]

    def update(self, node, a, r, f):
        """Nothing to condition on under mean field."""


class DenseAncestralState:
    """Algorithm 1 of Perlino et al. 2026 (arXiv:2607.09645, App. E.3.1): exact Gaussian conditioning on the values
    already drawn.

    For node ``w`` with ``G_w = I_d ⊗ a_bᵀ`` (per sample and case ``b``), the base moments are
    ``v⁰_uv = G_u Σ_uv G_vᵀ + 1{u=v} r_u I`` and ``μ⁰_u = G_u m_u`` (Eqs. 81-82), and the conditional is
    ``μ_w = μ⁰_w + v⁰_{w,<w} (v⁰_{<w,<w})⁻¹ (F̂_{<w} - μ⁰_{<w})``, ``σ²_w = v⁰_ww - v⁰_{w,<w} (v⁰_{<w,<w})⁻¹ v⁰_{<w,w}``
    (Eqs. 83-84). The state keeps the interpolation vectors of every drawn node, a running Cholesky factor ``C``
    of ``v⁰_{<w,<w}`` and the whitened residuals ``e = C⁻¹ (F̂_{<w} - μ⁰_{<w})``, so that
    ``μ_w = μ⁰_w + cᵀ e`` and ``σ²_w = v⁰_ww - cᵀ c`` with ``c = C⁻¹ v⁰_{<w,w}``.
    """

    def __init__(self, posterior):
        self.posterior = posterior
        self.sigma = posterior.covariance
        self.drawn = []     # (node, a_u [..., B, M_u]) in drawing order
        self.chol = None    # C  [..., K, K]
        self.white = None   # e  [..., K]
        self._pending = None
        # While every node drawn so far has one output (d = 1), C and e are kept entry by entry instead:
        # rows[k] = [C_k0, ..., C_kk] and whites[k] = e_k, each [..., B] at the batch shape it has (a node whose
        # parents are roots varies by case only), so a node's conditional is a few elementwise products (forward
        # substitution) instead of a batched K x K triangular solve over every (sample, case) pair, and C grows
        # without concatenation. Same formulas, so the same numbers to rounding.
        self._scalar = all(b.dim == 1 for b in posterior.blocks)
        self._rows, self._whites = [], []

    def _cross(self, u, a_u, w, a_w):
        """``v⁰_uw = G_u Σ_uw G_wᵀ`` ``[..., d_u, d_w]`` for interpolation vectors ``a_u [..., M_u]``,
        ``a_w [..., M_w]``.

        Contracts ``Σ_uw`` with whichever side has fewer (sample, case) rows first: a node whose parents are
        roots has one row per case, a node downstream of a drawn node one per (sample, case) pair, so the
        product costs ``O(B M_u M_w)`` instead of ``O(S B M_u M_w)`` (and nothing of size ``P`` per pair is
        formed; measured on the collider in benchmarks/README.md, collider-timing).
        """
        post = self.posterior
        bu, bw = post.block_of[u], post.block_of[w]
        S = self.sigma[bu.slice, bw.slice]
        if bu.dim == 1 and bw.dim == 1:
            if a_u.shape[:-1].numel() <= a_w.shape[:-1].numel():
                v = ((a_u @ S) * a_w).sum(-1)
            else:
                v = ((a_w @ S.T) * a_u).sum(-1)
            return v[..., None, None]
        S = S.reshape(bu.dim, bu.num_inducing, bw.dim, bw.num_inducing)
        if a_u.shape[:-1].numel() <= a_w.shape[:-1].numel():
            t = torch.einsum("...m,imjn->...ijn", a_u, S)                      # [..., d_u, d_w, M_w]
            return (t * a_w[..., None, None, :]).sum(-1)
        t = torch.einsum("...n,imjn->...imj", a_w, S)                          # [..., d_u, M_u, d_w]
        return (t * a_u[..., None, :, None]).sum(-2)

    def _sigma_block(self, u, w):
        """``Σ_uw`` ``[P_u, P_w]``: the blocks are split off ``Σ`` once per pass (one split per block row), so that
        the backward assembles ``∂/∂Σ`` with one concatenation per row instead of a zero-padded ``[P, P]`` per block
        read."""
        blocks = self.__dict__.get("_sigma_blocks")
        if blocks is None:
            post = self.posterior
            sizes = [b.size for b in post.blocks]
            if [b.offset for b in post.blocks] != [sum(sizes[:i]) for i in range(len(sizes))] or \
                    sum(sizes) != self.sigma.shape[-1]:
                return self.sigma[post.block_of[u].slice, post.block_of[w].slice]
            index = {b.node: i for i, b in enumerate(post.blocks)}
            rows = [row.split(sizes, dim=-1) for row in self.sigma.split(sizes, dim=-2)]
            blocks = self._sigma_blocks = (index, rows)
        index, rows = blocks
        return rows[index[u]][index[w]]

    def _cross_scalar(self, u, a_u, w, a_w):
        """``v⁰_uw`` ``[...]`` of two one-output nodes (:meth:`_cross` without the trailing ``[1, 1]``)."""
        S = self._sigma_block(u, w)
        if a_u.shape[:-1].numel() <= a_w.shape[:-1].numel():
            return ((a_u @ S) * a_w).sum(-1)
        return ((a_w @ S.T) * a_u).sum(-1)

    def _predict_scalar(self, node, a, r):
        """:meth:`predict` when every node has one output: ``c = C⁻¹ v⁰_{<w,w}`` by forward substitution on the rows
        of ``C``, ``μ_w = μ⁰_w + cᵀe``, ``σ²_w = v⁰_ww - cᵀc``."""
        post = self.posterior
        b = post.block_of[node]
        # μ⁰_w = a m_w and aᵀ Σ_ww a in one op whose backward reuses the forward's a Σ_ww (pyro_dag.ops.quadratic)
        loc, v_ww = mean_and_quadratic(a, post.loc[b.slice], self._sigma_block(node, node))
        v_ww = v_ww + r
        c = []
        for k, (u, a_u) in enumerate(self.drawn):
            row = self._rows[k]
            v = self._cross_scalar(u, a_u, node, a)
            for j in range(k):
                v = v - row[j] * c[j]
            c.append(v / row[k])
        if c:
            loc = loc + _dot(c, self._whites)
            v_ww = v_ww - _dot(c, c)
        self._pending = (node, loc, v_ww, c)
        return loc.unsqueeze(-1), v_ww[..., None, None]

    def _update_scalar(self, node, f):
        _, loc, var, c = self._pending
        D = var.clamp_min(torch.finfo(var.dtype).tiny).sqrt()
        self._whites.append((f.squeeze(-1) - loc) / D)
        self._rows.append(c + [D])

    def predict(self, node, a, r):
        if self._scalar:
            return self._predict_scalar(node, a, r)
        post = self.posterior
        b = post.block_of[node]
        v_ww = self._cross(node, a, node, a)                         # G_w Σ_ww G_wᵀ
        v_ww = v_ww + r[..., None, None] * torch.eye(b.dim, dtype=a.dtype, device=a.device)
        loc = a @ post.loc[b.slice].reshape(b.dim, b.num_inducing).T  # μ⁰_w
        if self.drawn:
            # v⁰_{u,w} = G_u Σ_uw G_wᵀ, for every drawn node u, stacked: [..., K, d]
            parts = [self._cross(u, a_u, node, a) for u, a_u in self.drawn]
            pb = broadcast_shapes(*[t.shape[:-2] for t in parts])
            v_prev = torch.cat([t.expand(pb + t.shape[-2:]) for t in parts], dim=-2)
            batch = broadcast_shapes(self.chol.shape[:-2], v_prev.shape[:-2])
            c = torch.linalg.solve_triangular(self.chol.expand(batch + self.chol.shape[-2:]),
                                              v_prev.expand(batch + v_prev.shape[-2:]), upper=False)
            loc = loc + (c.transpose(-1, -2) @ self.white.unsqueeze(-1)).squeeze(-1)
            cov = v_ww - c.transpose(-1, -2) @ c
        else:
            c = None
            cov = v_ww
        self._pending = (node, loc, cov, c)
        return loc, cov

    def update(self, node, a, r, f):
        pnode, loc, cov, c = self._pending
        if pnode != node:
            raise RuntimeError(f"update({node!r}) must follow predict({node!r})")
        if self._scalar:
            self._update_scalar(node, f)
            self.drawn.append((node, a))
            self._pending = None
            return
        d = cov.shape[-1]
        if d == 1:
            D = cov.clamp_min(torch.finfo(cov.dtype).tiny).sqrt()
            e = (f - loc) / D[..., 0]
        else:
            D = torch.linalg.cholesky(cov)
            e = torch.linalg.solve_triangular(D, (f - loc).unsqueeze(-1), upper=False).squeeze(-1)
        batch = f.shape[:-1]
        if self.chol is None:
            self.chol = D.expand(batch + (d, d))
            self.white = e
        else:
            K = self.chol.shape[-1]
            top = torch.cat([self.chol.expand(batch + (K, K)), f.new_zeros(batch + (K, d))], dim=-1)
            bottom = torch.cat([c.transpose(-1, -2).expand(batch + (d, K)), D.expand(batch + (d, d))], dim=-1)
            self.chol = torch.cat([top, bottom], dim=-2)
            self.white = torch.cat([self.white.expand(batch + (K,)), e], dim=-1)
        self.drawn.append((node, a))
        self._pending = None


def _dot(xs, ys):
    """``Σ_k x_k y_k`` of two lists of broadcastable tensors."""
    out = xs[0] * ys[0]
    for x, y in zip(xs[1:], ys[1:]):
        out = out + x * y
    return out


class JointSampleState:
    """The ``"joint"`` sampler of :class:`~pyro_dag.infer.DAGELBO` for structured posteriors ``N(m, Λ⁻¹)``.

    Beyond the paper (its Algorithms 1-2 condition on the drawn node values, at a cost per node that grows with
    the node's elimination-tree path): every (sample, case) pair gets its own joint draw
    ``V = m + L⁻ᵀ ε`` (one block back-substitution for all pairs, ``O(nnz(L))``), non-sink nodes take
    ``F_w = G_w V_w + √r_w ε'`` and each sink ``w`` is Rao-Blackwellised over its own block,
    ``q(V_w | V_{-w}) = N(V_w - Λ_ww⁻¹ (L ε)_w, Λ_ww⁻¹)`` (using ``Lᵀ (V - m) = ε``), giving
    ``F_w ~ N(G_w μ_w, G_w Λ_ww⁻¹ G_wᵀ + r_w I)``. The node values have exactly the law of the marginal sampler,
    so the ELBO estimate is unbiased; the sinks' predictive conditions on ``V_{-w}`` rather than on the drawn
    ``F``, which adds variance (measured in ``benchmarks/``). Each sink's term conditions on the other sinks'
    draws, which is valid term by term; the sinks' draws are not a joint sample (use the default sampler for
    prediction).

    :param InducingPosterior posterior: a dense or sparse structured posterior.
    :param int num_samples: ``S``. :param sinks: nodes whose values feed no other node.
    :param bool antithetic: draw ``ε`` for the first ``S/2`` samples and ``-ε`` for the others.
    """

    def __init__(self, posterior, num_samples, sinks=(), antithetic=False):
        self.posterior = posterior
        self.num_samples = int(num_samples)
        self.sinks = set(sinks)
        self.antithetic = bool(antithetic)
        self._eps = None
        self._centred = None
        self._batch = None

    def _draw(self, num_cases, like):
        P = self.posterior.size
        self._means = self.posterior.mean_blocks()
        self._batch = (self.num_samples, num_cases)
        # columns are (sample, case) pairs, sample-major: the halves along dim 1 are the sample halves
        self._eps = standard_normal((P, self.num_samples * num_cases), like, self.antithetic, dim=1)
        self._centred = self.posterior._joint_centred(self._eps)

    def _block(self, node, x):
        """``[P_w, S B]`` -> ``[S, B, d, M]``."""
        b = self.posterior.block_of[node]
        return x.reshape(b.dim, b.num_inducing, *self._batch).permute(2, 3, 0, 1)

    def predict(self, node, a, r):
        """:param a: ``[..., B, M]``. :param r: ``[..., B]``. :returns: ``(loc [S, B, d], cov [..., B, d, d])``."""
        if self._eps is None:
            self._draw(a.shape[-2], a)
        post = self.posterior
        b = post.block_of[node]
        m = self._means[node]                                         # [d, M]
        centred = self._centred[node]                                 # (V - m)_w, [P_w, S B]
        eye = torch.eye(b.dim, dtype=a.dtype, device=a.device)
        if node not in self.sinks:
            v = m + self._block(node, centred)                        # [S, B, d, M]
            loc = (v * a.unsqueeze(-2)).sum(-1)
            return loc, r[..., None, None] * eye
        lam, leps = post._joint_precision_row(node, self._eps)
        chol = torch.linalg.cholesky(lam)
        mu = m + self._block(node, centred - torch.cholesky_solve(leps, chol))
        loc = (mu * a.unsqueeze(-2)).sum(-1)
        # G_w Λ_ww⁻¹ G_wᵀ with G_wᵀ = I_d ⊗ a: solve C Y = G_wᵀ with the cases as columns
        gt = a.unsqueeze(-1) if b.dim == 1 else (eye.unsqueeze(-2) * a.unsqueeze(-2).unsqueeze(-1)).reshape(
            a.shape[:-1] + (b.size, b.dim))                          # [..., B, P_w, d]
        cols = gt.movedim(-2, 0).reshape(b.size, -1)                  # [P_w, (...) B d]
        y = torch.linalg.solve_triangular(chol, cols, upper=False)
        y = y.reshape((b.size,) + gt.shape[:-2] + (b.dim,)).movedim(0, -2)   # [..., B, P_w, d]
        cov = y.transpose(-1, -2) @ y if b.dim > 1 else y.pow(2).sum(-2, keepdim=True)
        return loc, cov + r[..., None, None] * eye

    def update(self, node, a, r, f):
        """Nothing to do: the inducing outputs were drawn jointly up front."""

    def conditional_offset(self, node):
        """After a pass: the offset of the conditional mean of ``node``'s block given the other blocks' joint draw,
        ``c = E[V_w | V_{-w}] - m_w = (V - m)_w - Λ_ww⁻¹ (L ε)_w``, ``[S, B, d_w, M_w]``."""
        if self._eps is None:
            raise RuntimeError("conditional_offset: no joint draw yet; run a marginal pass with this state first")
        lam, leps = self.posterior._joint_precision_row(node, self._eps)
        chol = torch.linalg.cholesky(lam)
        return self._block(node, self._centred[node] - torch.cholesky_solve(leps, chol))
