"""Block-sparse Cholesky algebra for a precision supported on a chordal graph (Perlino et al. 2026,
*Deep Gaussian Processes on Directed Acyclic Graphs*, arXiv:2607.09645, App. E.3-E.4).

The precision is ``Λ = L Lᵀ`` with ``L`` block-lower-triangular in a perfect elimination order (PEO) of a
chordal graph ``H``: block ``(i, j)``, ``i`` after ``j``, is nonzero only on the diagonal and where
``{i, j}`` is an edge of ``H``. Because the order is perfect there is no fill-in: for every block column
``j`` the later neighbours ``N(j)`` form a clique, and they all lie on the path from ``j`` to the root in
the elimination tree (parent of ``j`` = the first later neighbour). Every routine below works block by
block and touches only the blocks of ``L``; nothing of size ``P × P`` is formed.

* :meth:`ChordalFactor.logdet` -- ``log|Λ| = 2 Σ log diag L``;
* :meth:`ChordalFactor.selected_inverse` -- the blocks of ``Σ = Λ⁻¹`` on the pattern (diagonal and
  edges of ``H``) by Takahashi's recursion in reverse PEO (Takahashi, Fagan & Chin 1973);
* :meth:`ChordalFactor.solve_lower`, :meth:`ChordalFactor.solve_upper` and :meth:`ChordalFactor.matvec_upper`
  -- block triangular solves / products with ``L`` and ``Lᵀ``;
* :class:`SparseConditioningState` -- Algorithm 2 of the paper: ancestral sampling with Gaussian sites on
  diagonal blocks, a rank-``d`` block update of the factor along the elimination-tree path,
  and readouts through forward solves along that path only.
"""
import torch

from ..graph import elimination_tree

__all__ = ["ChordalFactor", "SparseConditioningState"]


def _solve_tril(L, B):
    return torch.linalg.solve_triangular(L, B, upper=False)


class ChordalFactor:
    """A block-sparse lower-triangular factor ``L`` on a chordal pattern.

    :param list order: block names in the elimination order (PEO).
    :param dict sizes: ``{name: block size}``.
    :param dict blocks: ``{(i, j): L_ij}`` for ``i == j`` (lower-triangular, positive diagonal) and for
        edges of ``H`` with ``i`` after ``j`` (shape ``[P_i, P_j]``). Blocks may carry leading batch dims.
    """

    def __init__(self, order, sizes, blocks):
        self.order = list(order)
        self.pos = {v: k for k, v in enumerate(self.order)}
        self.sizes = dict(sizes)
        self.blocks = dict(blocks)
        later = {v: [] for v in self.order}
        earlier = {v: [] for v in self.order}
        for (i, j) in self.blocks:
            if i != j:
                if self.pos[i] <= self.pos[j]:
                    raise ValueError(f"block ({i!r}, {j!r}) is above the diagonal in the elimination order")
                later[j].append(i)
                earlier[i].append(j)
        self.later = {v: sorted(n, key=self.pos.__getitem__) for v, n in later.items()}      # N(j)
        self.earlier = {v: sorted(n, key=self.pos.__getitem__) for v, n in earlier.items()}  # row pattern
        self.parent = elimination_tree(self.order, self.later)
        self._paths = {}

    @classmethod
    def structure_of(cls, other, blocks):
        """A factor with ``other``'s structure and new blocks (skips re-deriving the pattern)."""
        new = cls.__new__(cls)
        new.__dict__.update(other.__dict__)
        new.blocks = blocks
        return new

    def path(self, v):
        """The elimination-tree path from ``v`` to its root (``v`` first)."""
        if v not in self._paths:
            out, u = [], v
            while u is not None:
                out.append(u)
                u = self.parent[u]
            self._paths[v] = out
        return self._paths[v]

    def diag(self, v):
        return self.blocks[(v, v)]

    def logdet(self):
        """``log|Λ| = 2 Σ_j Σ log diag L_jj``."""
        return 2 * sum(self.diag(v).diagonal(dim1=-2, dim2=-1).log().sum(-1) for v in self.order)

    def selected_inverse(self):
        """Blocks of ``Σ = Λ⁻¹`` on the pattern: ``{(i, j): Σ_ij}`` for ``i == j`` and edges (``i`` after ``j``).

        Reverse-PEO recursion, with ``B_j = L_{N(j), j} L_jj⁻¹``:
        ``Σ_{N(j), j} = -Σ_{N(j), N(j)} B_j`` and ``Σ_jj = L_jj⁻ᵀ L_jj⁻¹ + B_jᵀ Σ_{N(j), N(j)} B_j``.
        """
        sigma = {}
        for j in reversed(self.order):
            Ljj = self.diag(j)
            eye = torch.eye(self.sizes[j], dtype=Ljj.dtype, device=Ljj.device)
            Linv = _solve_tril(Ljj, eye.expand_as(Ljj))                           # L_jj⁻¹
            base = Linv.transpose(-1, -2) @ Linv
            nbrs = self.later[j]
            if not nbrs:
                sigma[(j, j)] = base
                continue
            # B_k = L_kj L_jj⁻¹ for k ∈ N(j); Σ_{k j} = -Σ_l Σ_{k l} B_l
            B = {k: self.blocks[(k, j)] @ Linv for k in nbrs}
            for k in nbrs:
                acc = 0
                for l in nbrs:
                    acc = acc + self._sigma_get(sigma, k, l) @ B[l]
                sigma[(k, j)] = -acc
            sigma[(j, j)] = base - sum(B[k].transpose(-1, -2) @ sigma[(k, j)] for k in nbrs)
        return sigma

    def _sigma_get(self, sigma, k, l):
        if k == l:
            return sigma[(k, k)]
        if self.pos[k] > self.pos[l]:
            return sigma[(k, l)]
        return sigma[(l, k)].transpose(-1, -2)

    def solve_lower(self, rhs):
        """``L⁻¹ b`` for ``b`` given as ``{name: [..., P_v, k]}`` (missing blocks are zero)."""
        out = {}
        for j in self.order:
            acc = rhs.get(j)
            for k in self.earlier[j]:
                if k in out:
                    term = self.blocks[(j, k)] @ out[k]
                    acc = -term if acc is None else acc - term
            if acc is not None:
                out[j] = _solve_tril(self.diag(j), acc)
        return out

    def solve_upper(self, rhs):
        """``L⁻ᵀ b`` for ``b`` given as ``{name: [..., P_v, k]}`` (all blocks present)."""
        out = {}
        for j in reversed(self.order):
            acc = rhs[j]
            for k in self.later[j]:
                acc = acc - self.blocks[(k, j)].transpose(-1, -2) @ out[k]
            out[j] = torch.linalg.solve_triangular(self.diag(j).transpose(-1, -2), acc, upper=True)
        return out

    def matvec_upper(self, x):
        """``Lᵀ x`` for ``x`` given as ``{name: [..., P_v, k]}``."""
        out = {}
        for j in self.order:
            acc = self.diag(j).transpose(-1, -2) @ x[j]
            for k in self.later[j]:
                acc = acc + self.blocks[(k, j)].transpose(-1, -2) @ x[k]
            out[j] = acc
        return out


class SparseConditioningState:
    """Marginal ancestral sampling with the sparse factor: Algorithm 2 of Perlino et al. (2026, arXiv:2607.09645,
    App. E.3).

    The drawn values act as Gaussian sites on diagonal blocks: after ``F̂_v`` is drawn, the precision
    becomes ``Λ̃ = Λ + G_vᵀ G_v / r_v`` (Eq. 86) and the canonical shift ``c = Δh - ΔΛ m`` gains
    ``G_vᵀ (F̂_v - G_v m_v) / r_v`` (Eqs. 87-88). With ``L̃`` the factor of ``Λ̃`` (updated along the
    elimination-tree path of ``v`` by a block rank-``d`` update) and ``y = L̃⁻¹ c`` (maintained along the same
    path), the readouts for node ``w`` need one forward solve along the path of ``w``:
    ``Ỹ = L̃⁻¹ G_wᵀ`` and ``μ_w = G_w m_w + Ỹᵀ y``, ``Σ_w = r_w I + Ỹᵀ Ỹ`` (Eqs. 89-91).

    :param ChordalFactor factor: the variational factor ``L`` (shared, unbatched).
    :param dict means: ``{name: [d, M]}`` posterior means.
    """

    def __init__(self, factor, means, dims):
        self.factor = factor
        self.blocks = dict(factor.blocks)   # L̃ blocks; become batched as sites are added
        self.means = means
        self.dims = dims
        self.y = {}                          # y = L̃⁻¹ c, blocks [..., P_v, 1]
        self.c = {}                          # c blocks [..., P_v, 1]
        self._products = {}                  # L̃_ij L̃_jjᵀ for updated columns
        self._pending = None

    def _gt(self, node, a):
        """``G_wᵀ = I_d ⊗ a`` as ``[..., P_w, d]`` for ``a`` of shape ``[..., M]``."""
        d = self.dims[node]
        if d == 1:
            return a.unsqueeze(-1)
        eye = torch.eye(d, dtype=a.dtype, device=a.device)
        return (eye.unsqueeze(-2) * a.unsqueeze(-2).unsqueeze(-1)).reshape(a.shape[:-1] + (d * a.shape[-1], d))

    def _forward_path(self, node, rhs):
        """``L̃⁻¹ g`` for ``g`` nonzero only at ``node``: nonzero only on the path; returns ``{v: block}``."""
        f = self.factor
        out = {}
        for j in f.path(node):
            acc = rhs if j == node else None
            for k in f.earlier[j]:
                if k in out:
                    term = self.blocks[(j, k)] @ out[k]
                    acc = -term if acc is None else acc - term
            out[j] = _solve_tril(self.blocks[(j, j)], acc)
        return out

    def predict(self, node, a, r):
        gt = self._gt(node, a)                                   # [..., P, d]
        Yt = self._forward_path(node, gt)
        cov = sum(Y.transpose(-1, -2) @ Y for Y in Yt.values())  # Ỹᵀ Ỹ
        m = self.means[node]                                     # [d, M]
        loc = a @ m.T                                            # G_w m_w
        shift = [Yt[j].transpose(-1, -2) @ self.y[j] for j in Yt if j in self.y]
        if shift:
            loc = loc + sum(shift).squeeze(-1)
        d = self.dims[node]
        cov = cov + r[..., None, None] * torch.eye(d, dtype=a.dtype, device=a.device)
        self._pending = (node, gt)
        return loc, cov

    def _product(self, i, j):
        """``L̃_ij L̃_jjᵀ`` (kept up to date, so each column update needs no re-multiplication)."""
        key = (i, j)
        if key not in self._products:
            self._products[key] = self.blocks[key] @ self.blocks[(j, j)].transpose(-1, -2)
        return self._products[key]

    def _update_column(self, j, W):
        """One block column of the rank-``d`` update ``L̃L̃ᵀ = LLᵀ + WWᵀ`` (differentiable).

        ``L̃_jj = chol(L_jj L_jjᵀ + W_j W_jᵀ)`` and ``L̃_ij = (L_ij L_jjᵀ + W_i W_jᵀ) L̃_jj⁻ᵀ``; the products
        ``L_ij L_jjᵀ`` are carried from update to update. The update left for the rows below is
        ``W̃_i = (W_i - L_ij V) C⁻ᵀ`` with ``V = L_jj⁻¹ W_j`` and ``C = chol(I + VᵀV)``: the columns
        ``[L_ij, W_i] Q₂`` for ``Q₂ = [-V; I] C⁻ᵀ``, an orthonormal basis of the null space of
        ``[L_jj, W_j]``, so that ``[L_ij, W_i][L_kj, W_k]ᵀ = L̃_ij L̃_kjᵀ + W̃_i W̃_kᵀ``.
        """
        fac = self.factor
        Wj = W.pop(j)
        d = Wj.shape[-1]
        Wt = Wj.transpose(-1, -2)
        outer = (lambda x, y: x * y) if d == 1 else (lambda x, y: x @ y)  # rank-1: broadcast, no matmul
        Ljj = self.blocks[(j, j)]
        D = self._product(j, j) + outer(Wj, Wt)
        Lnew = torch.linalg.cholesky(D)
        nbrs = fac.later[j]
        if nbrs:
            V = _solve_tril(Ljj, Wj)
            if d == 1:
                cinv = (1 + (V * V).sum((-1, -2), keepdim=True)).rsqrt()
            else:
                eye = torch.eye(d, dtype=V.dtype, device=V.device)
                C = torch.linalg.cholesky(eye + V.transpose(-1, -2) @ V)
            for i in nbrs:
                Wi = W.get(i)
                Lij = self.blocks[(i, j)]
                Mij = self._product(i, j)
                if Wi is not None:
                    Mij = Mij + outer(Wi, Wt)
                    resid = Wi - Lij @ V
                else:
                    resid = -(Lij @ V)
                self.blocks[(i, j)] = torch.linalg.solve_triangular(Lnew, Mij.transpose(-1, -2),
                                                                    upper=False).transpose(-1, -2)
                self._products[(i, j)] = Mij
                W[i] = resid * cinv if d == 1 else torch.linalg.solve_triangular(
                    C, resid.transpose(-1, -2), upper=False).transpose(-1, -2)
        self.blocks[(j, j)] = Lnew
        self._products[(j, j)] = D

    def update(self, node, a, r, f):
        pnode, gt = self._pending
        if pnode != node:
            raise RuntimeError(f"update({node!r}) must follow predict({node!r})")
        self._pending = None
        fac = self.factor
        inv_sqrt_r = r.clamp_min(torch.finfo(r.dtype).tiny).rsqrt()[..., None, None]
        W = {node: gt * inv_sqrt_r}                              # site factor: G_wᵀ / sqrt(r)
        resid = f - a @ self.means[node].T                       # F̂ - G_w m_w   [..., d]
        site = gt @ (resid / r.unsqueeze(-1)).unsqueeze(-1)      # G_wᵀ (F̂ - G m) / r   [..., P, 1]
        self.c[node] = site if node not in self.c else self.c[node] + site
        # Rank-d update of L̃ along the elimination-tree path of `node`.
        path = fac.path(node)
        for j in path:
            if j in W:
                self._update_column(j, W)
        # y = L̃⁻¹ c changes only on the path (columns off the path and c off `node` are unchanged).
        for j in path:
            acc = self.c.get(j)
            for k in fac.earlier[j]:
                if k in self.y:
                    term = self.blocks[(j, k)] @ self.y[k]
                    acc = -term if acc is None else acc - term
            if acc is not None:
                self.y[j] = _solve_tril(self.blocks[(j, j)], acc)
