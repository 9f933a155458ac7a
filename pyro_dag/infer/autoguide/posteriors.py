"""Gaussian posteriors over the whitened inducing outputs of all GP nodes (digest-000 §2.2).

The inducing outputs of node ``w`` form a block ``V_w`` of shape ``[d_w, M_w]``, flattened row-major
into ``P_w = d_w M_w`` coordinates; the blocks of all nodes are concatenated in the guide's block order
into one vector of length ``P = Σ_w P_w``. The prior is ``N(0, I_P)``.

A posterior offers

* :meth:`InducingPosterior.kl` -- the analytic ``KL(q(V) || N(0, I))`` (digest-000 Eq. 92);
* :meth:`InducingPosterior.rsample` / :meth:`InducingPosterior.log_prob` -- joint samples, used by the
  guide under ``Trace_ELBO`` and ``Predictive``;
* :meth:`InducingPosterior.ancestral_state` -- a sampler state for marginal ancestral sampling
  (digest-000 §2.6-2.9): for each node in topological order, ``predict`` gives the Gaussian of the
  node's values given the values already drawn for its predecessors (same sample, same case) and
  ``update`` conditions on the drawn values;
* :meth:`InducingPosterior.joint_state` -- the same interface for the ``"joint"`` sampler of
  :class:`~pyro_dag.infer.DAGELBO` (:class:`JointSampleState`): one joint draw of ``U`` per (sample, case)
  pair, Rao-Blackwellised at the sinks.

:class:`MeanFieldPosterior` is DAG-VI (Algorithm 3). The structured (chordal/full) posteriors follow
the same interface.
"""
import math

import torch

from ..context import standard_normal
from ...utils import broadcast_shapes

__all__ = ["Block", "InducingPosterior", "MeanFieldPosterior", "MeanFieldState", "DenseGaussianPosterior",
           "SparseChordalPosterior", "JointSampleState", "gaussian_kl_standard"]


class Block:
    """Layout of one node's inducing block: node name, output dim ``d``, inducing count ``M``, offset."""

    __slots__ = ("node", "dim", "num_inducing", "offset")

    def __init__(self, node, dim, num_inducing, offset):
        self.node, self.dim, self.num_inducing, self.offset = node, int(dim), int(num_inducing), int(offset)

    @property
    def size(self):
        return self.dim * self.num_inducing

    @property
    def slice(self):
        return slice(self.offset, self.offset + self.size)

    def __repr__(self):
        return f"Block({self.node!r}, d={self.dim}, M={self.num_inducing}, offset={self.offset})"


def gaussian_kl_standard(loc, scale_tril):
    """``KL(N(loc, L Lᵀ) || N(0, I))`` for a lower-triangular ``L`` with positive diagonal.

    ``½ (tr(LLᵀ) + locᵀloc - P) - Σ log diag L``.
    """
    p = loc.shape[-1]
    return 0.5 * (scale_tril.pow(2).sum((-1, -2)) + loc.pow(2).sum(-1) - p) - \
        scale_tril.diagonal(dim1=-2, dim2=-1).log().sum(-1)


class InducingPosterior:
    """Base class: a Gaussian over the concatenated whitened inducing outputs.

    :param list blocks: :class:`Block` layout, in the guide's block order.
    """

    def __init__(self, blocks):
        self.blocks = list(blocks)
        self.block_of = {b.node: b for b in self.blocks}
        self.size = sum(b.size for b in self.blocks)

    def kl(self):
        """Analytic ``KL(q || N(0, I))``: a scalar tensor."""
        raise NotImplementedError

    def rsample(self, sample_shape=torch.Size()):
        """Reparameterised joint samples ``[*sample_shape, P]``."""
        raise NotImplementedError

    def log_prob(self, value):
        """Log density of ``[..., P]`` values."""
        raise NotImplementedError

    def ancestral_state(self):
        """A fresh sampler state for one marginal ancestral pass."""
        raise NotImplementedError

    def joint_state(self, num_samples, sinks=(), antithetic=False):
        """A fresh state for the ``"joint"`` sampler (:class:`JointSampleState`); ``sinks``: the nodes whose
        values feed no other node (their predictive is Rao-Blackwellised over their own block)."""
        return JointSampleState(self, num_samples, sinks, antithetic)

    # Hooks of the joint sampler (structured posteriors): ``q(V) = N(m, Λ⁻¹)``, ``Λ = L Lᵀ``.
    def _joint_centred(self, eps):
        """``{node: (L⁻ᵀ ε)_w [P_w, N]}`` for ``ε`` ``[P, N]`` (so that ``m + L⁻ᵀ ε ~ q``)."""
        raise NotImplementedError

    def _joint_precision_row(self, node, eps):
        """``(Λ_ww [P_w, P_w], (L ε)_w [P_w, N])``."""
        raise NotImplementedError

    def split(self, value):
        """Split ``[..., P]`` into ``{node: [..., d_w, M_w]}``."""
        return {b.node: value[..., b.slice].reshape(value.shape[:-1] + (b.dim, b.num_inducing))
                for b in self.blocks}

    def mean_blocks(self):
        """``{node: [d_w, M_w]}`` posterior means."""
        raise NotImplementedError

    def mean_vector(self):
        """The mean ``m`` ``[P]``, in block order."""
        means = self.mean_blocks()
        return torch.cat([means[b.node].reshape(-1) for b in self.blocks])

    def marginal_variance(self):
        """The diagonal of the covariance ``diag Σ`` ``[P]``, in block order."""
        return torch.cat([self.covariance_block(b.node).diagonal() for b in self.blocks])

    def covariance_matrix(self):
        """The dense covariance ``Σ`` ``[P, P]``, in block order (forms ``P × P``: for small ``P``)."""
        rows = [torch.cat([self.covariance_block(b.node, c.node) for c in self.blocks], dim=-1) for b in self.blocks]
        return torch.cat(rows, dim=-2)


class MeanFieldPosterior(InducingPosterior):
    """DAG-VI: independent full-covariance Gaussians per node, ``q(V) = Π_w N(m_w, L_w L_wᵀ)`` (digest-000 Eq. 77).

    :param list blocks: layout. :param list locs: ``[P_w]`` means. :param list scale_trils: ``[P_w, P_w]``
        lower-triangular factors with positive diagonals.
    """

    def __init__(self, blocks, locs, scale_trils):
        super().__init__(blocks)
        self.locs = {b.node: m for b, m in zip(self.blocks, locs)}
        self.scale_trils = {b.node: L for b, L in zip(self.blocks, scale_trils)}

    def kl(self):
        return sum(gaussian_kl_standard(self.locs[b.node], self.scale_trils[b.node]) for b in self.blocks)

    def rsample(self, sample_shape=torch.Size()):
        parts = []
        for b in self.blocks:
            m, L = self.locs[b.node], self.scale_trils[b.node]
            eps = torch.randn(tuple(sample_shape) + (b.size,), dtype=m.dtype, device=m.device)
            parts.append(m + (L @ eps.unsqueeze(-1)).squeeze(-1))
        return torch.cat(parts, -1)

    def log_prob(self, value):
        out = 0.0
        for b in self.blocks:
            m, L = self.locs[b.node], self.scale_trils[b.node]
            diff = (value[..., b.slice] - m).unsqueeze(-1)
            z = torch.linalg.solve_triangular(L, diff, upper=False).squeeze(-1)
            out = out - 0.5 * z.pow(2).sum(-1) - L.diagonal().log().sum() - 0.5 * b.size * math.log(2 * math.pi)
        return out

    def mean_blocks(self):
        return {b.node: self.locs[b.node].reshape(b.dim, b.num_inducing) for b in self.blocks}

    def covariance_block(self, node, other=None):
        """``Σ_ww`` ``[P_w, P_w]`` (and zero blocks between distinct nodes)."""
        L = self.scale_trils[node]
        if other is not None and other != node:
            return L.new_zeros(L.shape[0], self.scale_trils[other].shape[0])
        return L @ L.T

    def ancestral_state(self):
        return MeanFieldState(self)

    def joint_state(self, num_samples, sinks=(), antithetic=False):
        # Under mean field the blocks are independent: the marginal state is already exact and O(1) per node.
        return MeanFieldState(self)


class MeanFieldState:
    """Algorithm 3 of digest-000 (§2.9): no conditioning between nodes, so the state is trivial.

    For node ``w`` with ``F_w = (I_d ⊗ a_bᵀ) vec(V_w) + noise``:
    ``μ = (I_d ⊗ aᵀ) m_w`` and ``Σ_F = (I_d ⊗ aᵀ) S_w (I_d ⊗ a) + r I_d`` (digest-000 Eq. 93).
    """

    def __init__(self, posterior):
        self.posterior = posterior

    def predict(self, node, a, r):
        """:param a: ``[..., B, M]``. :param r: ``[..., B]``.
        :returns: ``(loc [..., B, d], cov [..., B, d, d])``."""
        post = self.posterior
        b = post.block_of[node]
        m = post.locs[node].reshape(b.dim, b.num_inducing)
        L = post.scale_trils[node].reshape(b.dim, b.num_inducing, b.size)
        loc = a @ m.T
        if b.dim == 1:
            # One matmul over all (sample, case) pairs; avoids a batched [1, P] @ [P, 1] product per case.
            AL = a @ L[0]
            var = (AL * AL).sum(-1) + r
            return loc, var[..., None, None]
        AL = torch.stack([a @ L[j] for j in range(b.dim)], dim=-2)  # [..., d, P]
        cov = torch.einsum("...jp,...kp->...jk", AL, AL)
        cov = cov + r[..., None, None] * torch.eye(b.dim, dtype=a.dtype, device=a.device)
        return loc, cov

    def update(self, node, a, r, f):
        """Nothing to condition on under mean field."""


class DenseGaussianPosterior(InducingPosterior):
    """DAG-SVI, dense backend: ``q(V) = N(m, Λ⁻¹)`` with ``Λ = L Lᵀ`` materialised (digest-000 §2.2, §2.7).

    :param list blocks: layout; the order of the blocks is the order of rows/columns of ``L``.
    :param torch.Tensor loc: ``[P]`` mean ``m``.
    :param torch.Tensor precision_tril: ``[P, P]`` lower-triangular ``L`` with positive diagonal.
    """

    def __init__(self, blocks, loc, precision_tril):
        super().__init__(blocks)
        self.loc = loc
        self.precision_tril = precision_tril
        eye = torch.eye(self.size, dtype=loc.dtype, device=loc.device)
        self._tril_inv = torch.linalg.solve_triangular(precision_tril, eye, upper=False)  # L⁻¹

    @property
    def covariance(self):
        """``Σ = Λ⁻¹ = L⁻ᵀ L⁻¹`` ``[P, P]``."""
        if not hasattr(self, "_cov"):
            self._cov = self._tril_inv.T @ self._tril_inv
        return self._cov

    def log_det_precision(self):
        return 2 * self.precision_tril.diagonal().log().sum()

    def kl(self):
        # ½ (tr Σ + mᵀm - P + log|Λ|)   (digest-000 Eq. 92)
        return 0.5 * (self._tril_inv.pow(2).sum() + self.loc.pow(2).sum() - self.size + self.log_det_precision())

    def rsample(self, sample_shape=torch.Size()):
        eps = torch.randn(tuple(sample_shape) + (self.size,), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + eps @ self._tril_inv  # (L⁻ᵀ ε)ᵀ = εᵀ L⁻¹

    def log_prob(self, value):
        z = (value - self.loc) @ self.precision_tril  # (Lᵀ (x - m))ᵀ
        return (-0.5 * z.pow(2).sum(-1) + 0.5 * self.log_det_precision()
                - 0.5 * self.size * math.log(2 * math.pi))

    def mean_blocks(self):
        return {b.node: self.loc[b.slice].reshape(b.dim, b.num_inducing) for b in self.blocks}

    def mean_vector(self):
        return self.loc

    def marginal_variance(self):
        return self._tril_inv.pow(2).sum(-2)                         # diag(L⁻ᵀ L⁻¹): column norms of L⁻¹

    def covariance_matrix(self):
        return self.covariance

    def covariance_block(self, node, other=None):
        b = self.block_of[node]
        c = self.block_of[other or node]
        return self.covariance[b.slice, c.slice]

    def ancestral_state(self):
        return DenseAncestralState(self)

    def _joint_centred(self, eps):
        z = self._tril_inv.T @ eps                                   # L⁻ᵀ ε
        return {b.node: z[b.slice] for b in self.blocks}

    def _joint_precision_row(self, node, eps):
        rows = self.precision_tril[self.block_of[node].slice]       # L_{w,:}
        return rows @ rows.T, rows @ eps


class DenseAncestralState:
    """Algorithm 1 of digest-000 (§2.7): exact Gaussian conditioning on the values already drawn.

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

    def predict(self, node, a, r):
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


class SparseChordalPosterior(InducingPosterior):
    """DAG-SVI, sparse backend: ``q(V) = N(m, Λ⁻¹)`` with ``Λ = L Lᵀ`` kept as blocks on the chordal
    pattern (digest-000 §2.5, §2.8). Nothing of size ``P × P`` is formed.

    * KL: ``log|Λ|`` from the diagonal of ``L``, ``tr Σ`` from the diagonal blocks of the selected inverse
      (Takahashi recursion), Eq. 92;
    * samples: ``m + L⁻ᵀ ε`` by block back-substitution in reverse elimination order;
    * ancestral sampling: Algorithm 2 (:class:`~pyro_dag.ops.chordal.SparseConditioningState`).

    :param list blocks: layout in elimination order. :param torch.Tensor loc: ``[P]``.
    :param dict factor_blocks: ``{(v, w): L_vw}`` on the diagonal and the edges of ``H`` (``v`` after ``w``).
    """

    def __init__(self, blocks, loc, factor_blocks):
        from ...ops.chordal import ChordalFactor

        super().__init__(blocks)
        self.loc = loc
        self.factor = ChordalFactor([b.node for b in self.blocks], {b.node: b.size for b in self.blocks},
                                    factor_blocks)

    def _selected(self):
        if not hasattr(self, "_sel"):
            self._sel = self.factor.selected_inverse()
        return self._sel

    def kl(self):
        sel = self._selected()
        trace = sum(sel[(b.node, b.node)].diagonal().sum() for b in self.blocks)
        return 0.5 * (trace + self.loc.pow(2).sum() - self.size + self.factor.logdet())

    def _to_blocks(self, x):
        return {b.node: x[..., b.slice].unsqueeze(-1) for b in self.blocks}

    def _from_blocks(self, blocks):
        return torch.cat([blocks[b.node].squeeze(-1) for b in self.blocks], dim=-1)

    def rsample(self, sample_shape=torch.Size()):
        eps = torch.randn(tuple(sample_shape) + (self.size,), dtype=self.loc.dtype, device=self.loc.device)
        return self.loc + self._from_blocks(self.factor.solve_upper(self._to_blocks(eps)))

    def log_prob(self, value):
        z = self._from_blocks(self.factor.matvec_upper(self._to_blocks(value - self.loc)))
        return -0.5 * z.pow(2).sum(-1) + 0.5 * self.factor.logdet() - 0.5 * self.size * math.log(2 * math.pi)

    def mean_blocks(self):
        return {b.node: self.loc[b.slice].reshape(b.dim, b.num_inducing) for b in self.blocks}

    def mean_vector(self):
        return self.loc

    def covariance_matrix(self):
        eye = torch.eye(self.size, dtype=self.loc.dtype, device=self.loc.device)
        x = self._from_blocks(self.factor.solve_upper(self._to_blocks(eye)))  # rows of (L⁻ᵀ)ᵀ = L⁻¹
        return x.T @ x

    def covariance_block(self, node, other=None):
        other = other or node
        return self.factor._sigma_get(self._selected(), node, other)

    def _joint_centred(self, eps):
        # one block back-substitution for all N columns: O(nnz(L) N), independent of path lengths
        return self.factor.solve_upper({b.node: eps[b.slice] for b in self.blocks})

    def _joint_precision_row(self, node, eps):
        f, b = self.factor, self.block_of[node]
        Lww = f.diag(node)
        lam, leps = Lww @ Lww.T, Lww @ eps[b.slice]
        for k in f.earlier[node]:                                    # row w of L: its earlier neighbours
            Lwk = f.blocks[(node, k)]
            lam = lam + Lwk @ Lwk.T
            leps = leps + Lwk @ eps[self.block_of[k].slice]
        return lam, leps

    def ancestral_state(self):
        from ...ops.chordal import SparseConditioningState

        return SparseConditioningState(self.factor, self.mean_blocks(), {b.node: b.dim for b in self.blocks})


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
