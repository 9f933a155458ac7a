"""Variational families of :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`: parameters -> posterior.

Each family is a :class:`~pyro.nn.PyroModule` holding the variational parameters, with a
``posterior()`` method that builds an :class:`~pyro_dag.infer.autoguide.gaussians.InducingPosterior`
from them (inside the guide's ``forward``, so Pyro's parameter capture sees every parameter).
"""
import contextlib

import torch
from pyro.nn import PyroModule, PyroParam
from torch.distributions import transform_to
from pyro.distributions import constraints

from ...graph import ChordalStructure
from .gaussians import CONDITIONINGS, Block, DenseGaussianPosterior, MeanFieldPosterior, SparseChordalPosterior

__all__ = ["MeanFieldFamily", "StructuredFamily", "make_family", "substituted_posterior", "STRUCTURES", "BACKENDS"]

STRUCTURES = ("mean_field", "chordal", "full")
BACKENDS = ("auto", "dense", "sparse")


def _assign(module, name, value):
    """Set a PyroParam in place (keeps the tensor shared with Pyro's param store)."""
    constraint = module.__dict__["_pyro_params"][name][0]
    unconstrained = getattr(module, name + "_unconstrained")
    with torch.no_grad():
        unconstrained.copy_(transform_to(constraint).inv(value.to(unconstrained)))


def _unconstrained(module, name):
    """The unconstrained tensor of the PyroParam ``name`` of ``module`` (shared with Pyro's param store)."""
    return getattr(module, name + "_unconstrained")


def _constrained(module, name):
    """The constrained value of the PyroParam ``name`` of ``module``, as Pyro's param store computes it (its
    constraint's transform of the unconstrained tensor), without a ``pyro.param`` statement."""
    return transform_to(module.__dict__["_pyro_params"][name][0])(_unconstrained(module, name))


def _scale_for(init_scale, node):
    if isinstance(init_scale, dict):
        return float(init_scale.get(node, 1.0))
    return float(init_scale)


@contextlib.contextmanager
def substituted_posterior(family, posterior):
    """Within the block, ``family.posterior()`` returns ``posterior`` (an
    :class:`~pyro_dag.infer.autoguide.gaussians.InducingPosterior` with the family's block layout) instead of
    building one from the parameters. Used by :class:`~pyro_dag.infer.natural.GaussianNaturalGradient` to
    differentiate the ELBO with respect to the moments ``(m, Σ)``.
    """
    family.__dict__["_substitute"] = posterior
    try:
        yield posterior
    finally:
        family.__dict__.pop("_substitute", None)


class MeanFieldFamily(PyroModule):
    """DAG-VI parameters: per node a mean ``m_w`` and a factor ``L_w = diag(s_w) T_w`` with ``T_w`` unit
    lower-triangular and ``s_w > 0`` (as in Pyro's ``AutoMultivariateNormal``), so ``S_w = L_w L_wᵀ``.

    :param list blocks: block layout. :param float init_scale: initial ``s_w``.
    """

    def __init__(self, blocks, init_scale=1.0, dtype=None, device=None):
        super().__init__()
        self.blocks = list(blocks)
        self.locs = PyroModule()
        self.scales = PyroModule()
        self.unit_trils = PyroModule()
        opts = {"dtype": dtype, "device": device}
        for b in self.blocks:
            setattr(self.locs, b.node, PyroParam(torch.zeros(b.size, **opts), constraints.real))
            setattr(self.scales, b.node, PyroParam(torch.full((b.size,), _scale_for(init_scale, b.node), **opts),
                                                   constraints.softplus_positive))
            setattr(self.unit_trils, b.node, PyroParam(torch.eye(b.size, **opts), constraints.unit_lower_cholesky))

    def scale_tril(self, node):
        return getattr(self.scales, node).unsqueeze(-1) * getattr(self.unit_trils, node)

    def set_node(self, node, loc, scale_tril):
        """Set ``m_w`` ``[P_w]`` and the covariance factor ``L_w`` ``[P_w, P_w]`` of one node."""
        s = scale_tril.diagonal()
        _assign(self.locs, node, loc)
        _assign(self.scales, node, s)
        _assign(self.unit_trils, node, scale_tril / s.unsqueeze(-1))

    def posterior(self):
        if "_substitute" in self.__dict__:
            return self.__dict__["_substitute"]
        return MeanFieldPosterior(self.blocks, [getattr(self.locs, b.node) for b in self.blocks],
                                  [self.scale_tril(b.node) for b in self.blocks])


class StructuredFamily(PyroModule):
    """DAG-SVI parameters: ``q(V) = N(m, Λ⁻¹)``, ``Λ = L Lᵀ`` with ``L`` block-lower-triangular in a perfect
    elimination order of the chordal graph ``H`` and nonzero blocks only on the diagonal and on the edges of
    ``H`` (so there is no fill-in; Perlino et al. 2026, arXiv:2607.09645, Eqs. (6), (75) and App. E.4).

    ``L = T diag(1/s)``: ``T`` is unit lower-triangular with the pattern of ``H`` and ``s > 0`` is a scale per
    coordinate (initialised at ``init_scale``). The off-diagonal entries of ``T`` are relative to the scale,
    which is what lets Adam find strongly correlated posteriors: a Cholesky factor of the precision
    parameterised directly has entries of order ``1/σ`` and, started at the identity, behaves like mean field
    for thousands of steps. The same parameters serve the dense and the sparse backend.

    :param list blocks: block layout (any order; re-laid-out in the elimination order).
    :param networkx.Graph pattern: undirected graph on the nodes (``H``); must be chordal with ``order``
        a perfect elimination order of it.
    :param list order: the elimination order.
    :param str backend: ``"dense"``, ``"sparse"`` or ``"auto"``.
    :param str conditioning: the sparse posterior's conditional state, ``"square_root"`` (default) or
        ``"factor"`` (:class:`~pyro_dag.infer.autoguide.gaussians.SparseChordalPosterior`).
    """

    def __init__(self, blocks, pattern, order, backend="auto", init_scale=1.0, dtype=None, device=None,
                 conditioning="square_root"):
        super().__init__()
        if conditioning not in CONDITIONINGS:
            raise ValueError(f"conditioning must be 'square_root' or 'factor', got {conditioning!r}")
        self.conditioning = conditioning
        by_node = {b.node: b for b in blocks}
        self.blocks, offset = [], 0
        for w in order:
            b = by_node[w]
            self.blocks.append(Block(w, b.dim, b.num_inducing, offset))
            offset += b.size
        self.block_of = {b.node: b for b in self.blocks}
        self.order = list(order)
        pos = {w: i for i, w in enumerate(self.order)}
        # Off-diagonal blocks (v, w) with v after w in the order and {v, w} an edge of H.
        self.edges = sorted(((v, w) if pos[v] > pos[w] else (w, v) for v, w in pattern.edges),
                            key=lambda e: (pos[e[0]], pos[e[1]]))
        self.pattern = pattern
        self.backend = backend
        opts = {"dtype": dtype, "device": device}
        self.locs = PyroModule()
        self.scales = PyroModule()
        self.unit_trils = PyroModule()
        self.offdiag = PyroModule()
        for b in self.blocks:
            setattr(self.locs, b.node, PyroParam(torch.zeros(b.size, **opts), constraints.real))
            setattr(self.scales, b.node, PyroParam(torch.full((b.size,), _scale_for(init_scale, b.node), **opts),
                                                   constraints.softplus_positive))
            setattr(self.unit_trils, b.node, PyroParam(torch.eye(b.size, **opts), constraints.unit_lower_cholesky))
        for k, (v, w) in enumerate(self.edges):
            setattr(self.offdiag, f"e{k}", PyroParam(torch.zeros(self.block_of[v].size, self.block_of[w].size,
                                                                 **opts), constraints.real))

    @property
    def size(self):
        return sum(b.size for b in self.blocks)

    def factor_blocks(self):
        """``{(v, w): L_vw}`` for the diagonal blocks and the edges of ``H`` (``v`` not before ``w``)."""
        inv_s = {b.node: getattr(self.scales, b.node).reciprocal() for b in self.blocks}
        out = {(b.node, b.node): getattr(self.unit_trils, b.node) * inv_s[b.node] for b in self.blocks}
        for k, (v, w) in enumerate(self.edges):
            out[(v, w)] = getattr(self.offdiag, f"e{k}") * inv_s[w]
        return out

    def loc(self):
        return torch.cat([getattr(self.locs, b.node) for b in self.blocks])

    def dense_tril(self, factor_blocks=None):
        """The materialised ``[P, P]`` factor ``L``."""
        if factor_blocks is None:
            return self._dense_tril_from(getattr)
        return self._assemble(factor_blocks)

    def _dense_tril_from(self, get):
        """``L = T diag(1/s)``: the unit-triangular ``T`` assembled from the parameters, then every column scaled at
        once (the entries of :meth:`factor_blocks`, in fewer operations forwards and backwards); ``get(module, name)``
        reads a parameter's constrained value."""
        inv_s = torch.cat([get(self.scales, b.node) for b in self.blocks]).reciprocal()
        fb = {(b.node, b.node): get(self.unit_trils, b.node) for b in self.blocks}
        fb.update({(v, w): get(self.offdiag, f"e{k}") for k, (v, w) in enumerate(self.edges)})
        return self._assemble(fb) * inv_s

    def factor_values(self):
        """``(m [P], L [P, P])``, the values of :meth:`loc` and :meth:`dense_tril` outside a guide run (bit for bit:
        the same constraint transforms of the same tensors), without PyroModule's attribute machinery, for
        computations outside a model or guide run (the natural-gradient steps read them at every step). Inside a
        guide run use :meth:`loc` and :meth:`dense_tril`, whose ``pyro.param`` statements Pyro's traces record."""
        return torch.cat([_constrained(self.locs, b.node) for b in self.blocks]), self._dense_tril_from(_constrained)

    def _assemble(self, fb):
        """``[P, P]`` from the blocks ``fb`` (zero where there is none)."""
        ref = next(iter(fb.values()))
        rows = []
        for bv in self.blocks:
            row = []
            for bw in self.blocks:
                blk = fb.get((bv.node, bw.node))
                row.append(blk if blk is not None else ref.new_zeros(bv.size, bw.size))
            rows.append(torch.cat(row, dim=-1))
        return torch.cat(rows, dim=-2)

    def set_node(self, node, loc, precision_tril):
        """Set one node's mean ``[P_w]`` and diagonal precision-factor block ``[P_w, P_w]``."""
        s = precision_tril.diagonal().reciprocal()
        _assign(self.locs, node, loc)
        _assign(self.scales, node, s)
        _assign(self.unit_trils, node, precision_tril * s)

    def set_offdiagonal_block(self, v, w, block):
        """Set the off-diagonal block ``L_vw`` ``[P_v, P_w]`` of the precision factor for the edge ``(v, w)`` of
        ``H`` (``v`` eliminated after ``w``, as in :attr:`edges`), relative to ``w``'s current diagonal block:
        set :meth:`set_node` of ``w`` first."""
        k = self.edges.index((v, w))
        _assign(self.offdiag, f"e{k}", block * getattr(self.scales, w))

    def zero_offdiagonal(self):
        """Remove all coupling between blocks (the mean-field special case)."""
        for k in range(len(self.edges)):
            p = getattr(self.offdiag, f"e{k}")
            _assign(self.offdiag, f"e{k}", torch.zeros_like(p))

    def set_precision_tril(self, loc, precision_tril):
        """Set ``m`` ``[P]`` and the precision factor ``L`` ``[P, P]`` (in this family's block order).

        Entries of ``L`` outside the pattern of ``H`` are ignored (they must be zero for an exact copy).
        """
        # s = 1 / diag(L) and T = L diag(s) (each block's columns scaled by the scales of its column node) for the
        # whole factor at once, the blocks' values read off T, the scales' inverse softplus per node and one
        # multi-tensor copy into the parameters: the same numbers as block by block, in a tenth of the operations
        # (the natural-gradient steps write the factor at every step)
        with torch.no_grad():
            s = precision_tril.diagonal().reciprocal()
            T = precision_tril * s
            dst, src, scale_dst, scale_src = [], [], [], []
            for b in self.blocks:
                dst += [_unconstrained(self.locs, b.node), _unconstrained(self.unit_trils, b.node)]
                src += [loc[b.slice], T[b.slice, b.slice]]
                scale_dst.append(_unconstrained(self.scales, b.node))
                scale_src.append(s[b.slice])
            for k, (v, w) in enumerate(self.edges):
                dst.append(_unconstrained(self.offdiag, f"e{k}"))
                src.append(T[self.block_of[v].slice, self.block_of[w].slice])
            # softplus⁻¹(y) = y + log(-expm1(-y)), pyro's SoftplusTransform inverse, one node's slice at a time as
            # _assign computes it
            neg = torch._foreach_neg(scale_src)
            torch._foreach_neg_(torch._foreach_expm1_(neg))
            scale_src = list(torch._foreach_add(scale_src, torch._foreach_log_(neg)))
            torch._foreach_copy_(dst + scale_dst, [t.to(d) for t, d in zip(src + scale_src, dst + scale_dst)])

    #: ``backend="auto"`` uses the sparse backend above this total inducing dimension.
    AUTO_SPARSE_SIZE = 1000

    def resolved_backend(self):
        if self.backend != "auto":
            return self.backend
        return "sparse" if self.size > self.AUTO_SPARSE_SIZE else "dense"

    def conditional_state_bytes(self, num_samples, num_cases):
        """Bytes of the sparse square-root state that the conditional sampler (:class:`~pyro_dag.infer.DAGELBO`'s
        default) builds in one ELBO evaluation: each node's site update rewrites the ``[S, B, P_j, P_j]`` block of
        every column ``j`` on its elimination-tree path, so the total is ``S B Σ_w Σ_{j ∈ path(w)} P_j²`` numbers,
        which grows with the square of a chain's depth (about a third of it is what autograd keeps per copy)."""
        from ...graph.chordal import elimination_tree

        later = {w: [] for w in self.order}
        for v, w in self.edges:
            later[w].append(v)
        parent = elimination_tree(self.order, later)
        size = {b.node: b.size for b in self.blocks}
        below = {}   # Σ P_j² over the path from a node to its root, from the root down (the order ends at roots)
        for w in reversed(self.order):
            below[w] = size[w] ** 2 + (below[parent[w]] if parent[w] is not None else 0)
        itemsize = torch.finfo(next(self.parameters()).dtype).bits // 8
        return int(num_samples) * int(num_cases) * sum(below.values()) * itemsize

    def posterior(self):
        if "_substitute" in self.__dict__:
            return self.__dict__["_substitute"]
        if self.resolved_backend() == "sparse":
            return SparseChordalPosterior(self.blocks, self.loc(), self.factor_blocks(), self.conditioning)
        return DenseGaussianPosterior(self.blocks, self.loc(), self.dense_tril())


    def prediction_posterior(self):
        """The posterior for prediction: :meth:`posterior`, or the same Gaussian with independent blocks when every
        off-diagonal block is zero (see :meth:`_block_diagonal_posterior`). Not for training steps or natural
        gradients, which need the chordal form's parameters and samplers."""
        if "_substitute" not in self.__dict__ and self._uncoupled():
            with torch.no_grad():
                return self._block_diagonal_posterior()
        return self.posterior()

    def _uncoupled(self):
        """Whether every off-diagonal block of the precision factor is exactly zero (as after
        :meth:`zero_offdiagonal`, e.g. when :func:`~pyro_dag.infer.training.fit_collapsed` fitted every node)."""
        return all(not bool(getattr(self.offdiag, f"e{k}").any()) for k in range(len(self.edges)))

    def _block_diagonal_posterior(self):
        """The same Gaussian as a :class:`MeanFieldPosterior` (independent blocks): without coupling, the chordal
        samplers' conditioning on each node's draws changes nothing but costs ``O(cases · P)`` per node, which with
        hundreds of inducing points per node (``num_inducing="auto"`` on observed inputs) dominated prediction.
        For prediction only (:meth:`prediction_posterior`): in training the zero blocks must keep their gradients."""
        locs, trils = [], []
        fb = self.factor_blocks()
        for b in self.blocks:
            L = fb[(b.node, b.node)]
            cov = torch.cholesky_inverse(L.double())
            trils.append(torch.linalg.cholesky(0.5 * (cov + cov.T)).to(L))
            locs.append(getattr(self.locs, b.node))
        return MeanFieldPosterior(self.blocks, locs, trils)


def make_family(precision, backend, blocks, graph, observed=None, init_scale=1.0, dtype=None, device=None,
                check_only=False, conditioning="square_root"):
    """Build the family for the ``precision`` pattern and ``backend`` (validates the names first)."""
    if precision not in STRUCTURES:
        raise ValueError(f"precision must be one of {STRUCTURES}, got {precision!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if conditioning not in CONDITIONINGS:
        raise ValueError(f"conditioning must be 'square_root' or 'factor', got {conditioning!r}")
    if check_only:
        return None
    if precision == "mean_field":
        return MeanFieldFamily(blocks, init_scale, dtype, device)
    nodes = [b.node for b in blocks]
    if precision == "full":
        import networkx as nx

        pattern = nx.complete_graph(nodes)
        order = nodes
    else:
        chordal = ChordalStructure(graph, observed or [])
        pattern = chordal.chordal.subgraph(nodes).copy()
        order = [w for w in chordal.order if w in set(nodes)]
    return StructuredFamily(blocks, pattern, order, backend, init_scale, dtype, device, conditioning)
