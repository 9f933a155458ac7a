"""Gaussians over the whitened inducing outputs of all GP nodes: ``q(V) = N(m, Σ)`` with the prior ``N(0, I)``.

The inducing outputs of node ``w`` form a block ``V_w`` of shape ``[d_w, M_w]``, flattened row-major into
``P_w = d_w M_w`` coordinates; the blocks of all nodes are concatenated in the guide's block order into one
vector of length ``P = Σ_w P_w``. (For a model without a DAGDGP a block is one latent site in unconstrained
space, with ``d = 1``.) Every posterior offers

* :meth:`InducingPosterior.kl` -- the analytic ``KL(q(V) || N(0, I))`` (Perlino et al. 2026, "Deep Gaussian
  Processes on Directed Acyclic Graphs", arXiv:2607.09645, Eq. 92);
* :meth:`InducingPosterior.rsample` / :meth:`InducingPosterior.log_prob` -- joint samples, used by the guide
  under ``Trace_ELBO`` and ``Predictive``;
* moments: :meth:`~InducingPosterior.mean_blocks`, :meth:`~InducingPosterior.mean_vector`,
  :meth:`~InducingPosterior.marginal_variance`, :meth:`~InducingPosterior.covariance_matrix`;
* :meth:`InducingPosterior.ancestral_state` and :meth:`InducingPosterior.joint_state` -- the samplers that push
  ``q(V)`` through the DAG (:mod:`pyro_dag.infer.autoguide.samplers`).

:class:`MeanFieldPosterior` is DAG-VI; :class:`DenseGaussianPosterior` and :class:`SparseChordalPosterior` are
DAG-SVI's ``N(m, Λ⁻¹)`` with a materialised or a clique-by-clique precision factor (arXiv:2607.09645, §2.2).
"""
import math

import torch

from ...ops.triangular import tril_inverse
from .samplers import DenseAncestralState, JointSampleState, MeanFieldState

__all__ = ["Block", "InducingPosterior", "MeanFieldPosterior", "DenseGaussianPosterior", "SparseChordalPosterior",
           "gaussian_kl_standard", "CONDITIONINGS"]

#: The forms of the sparse posterior's conditional state (:class:`SparseChordalPosterior`'s ``conditioning``).
CONDITIONINGS = ("square_root", "factor")


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
    """DAG-VI: independent full-covariance Gaussians per node, ``q(V) = Π_w N(m_w, L_w L_wᵀ)``
    (arXiv:2607.09645, Eq. (77)).

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


class DenseGaussianPosterior(InducingPosterior):
    """DAG-SVI, dense backend: ``q(V) = N(m, Λ⁻¹)`` with ``Λ = L Lᵀ`` materialised (arXiv:2607.09645, Eqs. (6),
    (75); App. E.3.1).

    :param list blocks: layout; the order of the blocks is the order of rows/columns of ``L``.
    :param torch.Tensor loc: ``[P]`` mean ``m``.
    :param torch.Tensor precision_tril: ``[P, P]`` lower-triangular ``L`` with positive diagonal.
    """

    def __init__(self, blocks, loc, precision_tril):
        super().__init__(blocks)
        self.loc = loc
        self.precision_tril = precision_tril
        self._tril_inv = tril_inverse(precision_tril)  # L⁻¹ (a two-product backward: pyro_dag.ops.triangular)

    @property
    def covariance(self):
        """``Σ = Λ⁻¹ = L⁻ᵀ L⁻¹`` ``[P, P]``."""
        if not hasattr(self, "_cov"):
            self._cov = self._tril_inv.T @ self._tril_inv
        return self._cov

    def log_det_precision(self):
        return 2 * self.precision_tril.diagonal().log().sum()

    def kl(self):
        # ½ (tr Σ + mᵀm - P + log|Λ|)   (arXiv:2607.09645, Eq. (92))
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


class SparseChordalPosterior(InducingPosterior):
    """DAG-SVI, sparse backend: ``q(V) = N(m, Λ⁻¹)`` with ``Λ = L Lᵀ`` kept as blocks on the chordal
    pattern (arXiv:2607.09645, Eq. (92); App. E.3.2). Nothing of size ``P × P`` is formed.

    * KL: ``log|Λ|`` from the diagonal of ``L``, ``tr Σ`` from the diagonal blocks of the selected inverse
      (Takahashi recursion), Eq. 92;
    * samples: ``m + L⁻ᵀ ε`` by block back-substitution in reverse elimination order;
    * ancestral sampling: Algorithm 2 in square-root form
      (:class:`~pyro_dag.ops.chordal.SparseSquareRootConditioningState`; the factor form
      :class:`~pyro_dag.ops.chordal.SparseConditioningState` with ``conditioning="factor"``).

    :param list blocks: layout in elimination order. :param torch.Tensor loc: ``[P]``.
    :param dict factor_blocks: ``{(v, w): L_vw}`` on the diagonal and the edges of ``H`` (``v`` after ``w``).
    :param str conditioning: the state of :meth:`ancestral_state`: ``"square_root"`` (default;
        :class:`~pyro_dag.ops.chordal.SparseSquareRootConditioningState`, Potter's square-root update, matrix-vector
        products only) or ``"factor"`` (:class:`~pyro_dag.ops.chordal.SparseConditioningState`, block Cholesky
        updates, ``O(M³)`` per case and block). Both compute Algorithm 2's moments and agree to rounding (1e-10
        where the cases' conditional variances ``r`` are well above the jitter floor; where cases sit on inducing
        inputs, ``r`` is at the floor and both, updating ``u``'s precision by ``a aᵀ/r``, amplify rounding by about
        ``1/r``: draws move by ~1e-8 for ``r = 1e-8``, where the dense backend's function-space Algorithm 1 stays
        near 1e-14).
    """

    def __init__(self, blocks, loc, factor_blocks, conditioning="square_root"):
        from ...ops.chordal import ChordalFactor

        if conditioning not in CONDITIONINGS:
            raise ValueError(f"conditioning must be 'square_root' or 'factor', got {conditioning!r}")
        super().__init__(blocks)
        self.conditioning = conditioning
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
        from ...ops.chordal import SparseConditioningState, SparseSquareRootConditioningState

        cls = SparseSquareRootConditioningState if self.conditioning == "square_root" else SparseConditioningState
        return cls(self.factor, self.mean_blocks(), {b.node: b.dim for b in self.blocks})
