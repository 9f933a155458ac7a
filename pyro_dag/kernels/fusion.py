"""Fusion rules: kernels on a node's concatenated parent state built from per-parent kernels.

A node ``w`` with parents ``Pa(w)`` receives the concatenation ``u = (u_p)_{p ∈ Pa(w)}`` (parents in
declaration order, see :func:`pyro_dag.graph.parents`). A fusion rule ``Φ_w`` builds ``K_w`` from
per-parent kernels ``K_w^{(p)}`` (Perlino et al. 2026, "Deep Gaussian Processes on Directed Acyclic
Graphs", arXiv:2607.09645, Sec. 2, Eq. (3)). :class:`~pyro_dag.DAGDGP` binds each fusion kernel to its
node's parents with :meth:`FusionKernel.bind_parents`; a plain base kernel given for a node is wrapped in
:class:`Concat`. Per-parent kernels made from one template are independent copies
(:func:`~pyro_dag.kernels.base.detached_copy`), each with its own hyperparameters.

Rules: :class:`Additive`, :class:`Product`, :class:`Concat` (the default, an ARD RBF on the
concatenation), :class:`ANOVA`, :class:`SubsetAdditive` (Prop. 5), :class:`InputConnected` (root-retaining,
Remark 2), :class:`SumInput` (the latent-collider kernel, App. G.3); the multi-fidelity rules are in
:mod:`pyro_dag.kernels.multifidelity`.
"""
import itertools

import torch
from pyro.nn import PyroModule
from torch import nn

from .base import Kernel, ParentSpec, detached_copy
from .stationary import RBF

__all__ = ["FusionKernel", "Concat", "Additive", "Product", "ANOVA", "SubsetAdditive",
           "InputConnected", "SumInput", "as_fusion_kernel"]


def _block(X, slices):
    """Columns of ``X`` selected by a list of ``(start, length)`` pairs, concatenated."""
    if len(slices) == 1:
        return X.narrow(-1, *slices[0])
    return torch.cat([X.narrow(-1, s, n) for s, n in slices], dim=-1)


class FusionKernel(Kernel):
    """Base class of fusion rules over a node's parents (Perlino et al. 2026, Eq. (3)).

    Subclasses implement :meth:`_build` (create per-parent kernels once the parents are known) and
    :meth:`forward` on the concatenated parent state ``[..., N, Σ_p d_p]``, using :meth:`columns`.
    """

    def __init__(self):
        super().__init__()
        self.parents = None
        self.node = None

    def bind_parents(self, parents, node="?"):
        """Bind to the node's parents.

        :param list parents: :class:`~pyro_dag.kernels.ParentSpec` in concatenation order.
        :param str node: the node's name, used in error messages.
        """
        parents = [p if isinstance(p, ParentSpec) else ParentSpec(*p) for p in parents]
        if self.parents is not None:
            if [(p.name, p.dim, p.is_root) for p in parents] != [(p.name, p.dim, p.is_root) for p in self.parents]:
                raise ValueError(f"the kernel of node {node!r} is already bound to other parents; "
                                 "use a separate kernel instance for each node")
            return self
        self.node = node
        self.parents = parents
        offsets = list(itertools.accumulate([0] + [p.dim for p in parents]))
        self._slices = {p.name: (offsets[i], p.dim) for i, p in enumerate(parents)}
        super().bind(offsets[-1])
        ref = next(iter(self.parameters()), None)
        self._build()
        if ref is not None:  # kernels created while binding follow the existing dtype and device
            self.to(dtype=ref.dtype, device=ref.device)
        return self

    def bind(self, input_dim):
        if self.parents is None:
            raise ValueError(f"{type(self).__name__} is a fusion rule: bind it with bind_parents([...]) "
                             "(DAGDGP does this for you)")
        return super().bind(input_dim)

    def _build(self):
        pass

    def columns(self, X, names):
        """The columns of ``X`` belonging to the parents ``names``."""
        return _block(X, [self._slices[n] for n in names])

    def _per_parent(self, base, names=None):
        """One kernel per parent: independent copies of ``base`` (:func:`~pyro_dag.kernels.base.detached_copy`),
        or ``base[name]`` when a dict is given."""
        names = [p.name for p in self.parents] if names is None else names
        dims = {p.name: p.dim for p in self.parents}
        if isinstance(base, dict):
            missing = [n for n in names if n not in base]
            extra = [n for n in base if n not in names]
            if missing or extra:
                raise ValueError(f"{type(self).__name__} at node {self.node!r}: per-parent kernels must be given "
                                 f"for exactly the parents {names}; missing {missing}, unknown {extra}")
            kernels = {n: base[n] for n in names}
            shared = [n for i, n in enumerate(names) if any(kernels[n] is kernels[m] for m in names[:i])]
            if shared:
                raise ValueError(f"{type(self).__name__} at node {self.node!r}: the kernels of parents {shared} are "
                                 "the same instance as another parent's, which would tie their hyperparameters; "
                                 "give each parent its own kernel instance")
        else:
            base = RBF() if base is None else base
            kernels = {n: detached_copy(base) for n in names}
        for n, k in kernels.items():
            _bind_any(k, [ParentSpec(n, dims[n], self._is_root(n))], self.node)
        return PyroModule[nn.ModuleDict](kernels)

    def _is_root(self, name):
        return next(p.is_root for p in self.parents if p.name == name)

    @property
    def root_parents(self):
        return [p.name for p in self.parents if p.is_root]

    @property
    def latent_parents(self):
        return [p.name for p in self.parents if not p.is_root]


def _bind_any(kernel, parents, node):
    if isinstance(kernel, FusionKernel):
        kernel.bind_parents(parents, node)
    else:
        kernel.bind(sum(p.dim for p in parents))
    return kernel


def as_fusion_kernel(kernel):
    """Wrap a plain base kernel in :class:`Concat`; fusion kernels are returned unchanged."""
    return kernel if isinstance(kernel, FusionKernel) else Concat(kernel)


class Concat(FusionKernel):
    """One kernel on the concatenated parent state (concatenation fusion; the default rule).

    With an ARD RBF this *is* product fusion of per-parent RBFs.

    :param Kernel base: the kernel, default ``RBF(ard=True)``.
    """

    def __init__(self, base=None):
        super().__init__()
        self.base = RBF(ard=True) if base is None else base

    def _build(self):
        self.base.bind(self.input_dim)

    def forward(self, X, Z=None, diag=False):
        return self.base(X, Z, diag)


class _PerParent(FusionKernel):
    def __init__(self, base=None):
        super().__init__()
        self._template = RBF() if base is None else base

    def _build(self):
        self.parent_kernels = self._per_parent(self._template)
        del self._template

    def _components(self, X, Z, diag):
        for p in self.parents:
            xs = self.columns(X, [p.name])
            zs = None if Z is None else self.columns(Z, [p.name])
            yield self.parent_kernels[p.name](xs, zs, diag)


class Additive(_PerParent):
    """Additive fusion ``K_w(u, u') = Σ_p K^{(p)}(u_p, u'_p)`` (Perlino et al. 2026, Sec. 2; Duvenaud et al. 2011).

    :param base: a kernel copied for every parent (default RBF) or a dict ``{parent: kernel}``.
    """

    def forward(self, X, Z=None, diag=False):
        return sum(self._components(X, Z, diag))


class Product(_PerParent):
    """Product fusion ``K_w(u, u') = Π_p K^{(p)}(u_p, u'_p)`` (Perlino et al. 2026, Sec. 2).

    Each per-parent kernel carries its own variance; their product's variance is the product of them.
    """

    def forward(self, X, Z=None, diag=False):
        out = None
        for k in self._components(X, Z, diag):
            out = k if out is None else out * k
        return out


class ANOVA(_PerParent):
    """ANOVA fusion: main effects plus pairwise interactions (Perlino et al. 2026, Sec. 2; Álvarez et al. 2012).

    ``K_w = Σ_p K^{(p)} + Σ_{p<q} K^{(p)} K^{(q)}``.
    """

    def forward(self, X, Z=None, diag=False):
        comps = list(self._components(X, Z, diag))
        out = sum(comps)
        for i, j in itertools.combinations(range(len(comps)), 2):
            out = out + comps[i] * comps[j]
        return out


class SubsetAdditive(FusionKernel):
    """General additive-subset decomposition ``K_w = Σ_{S ∈ 𝒮_w} K^{(S)}`` (Perlino et al. 2026, Prop. 5).

    :param list subsets: tuples of parent names; each gets a copy of ``base`` on its concatenated columns.
    :param Kernel base: default ``RBF(ard=True)``.
    """

    def __init__(self, subsets, base=None):
        super().__init__()
        self.subsets = [tuple(s) for s in subsets]
        if not self.subsets or any(len(s) == 0 for s in self.subsets):
            raise ValueError("SubsetAdditive needs a non-empty list of non-empty parent subsets")
        self._template = RBF(ard=True) if base is None else base

    def _build(self):
        names = [p.name for p in self.parents]
        for s in self.subsets:
            bad = [n for n in s if n not in names]
            if bad:
                raise ValueError(f"SubsetAdditive at node {self.node!r}: {bad} are not parents of the node "
                                 f"(parents: {names})")
        kernels = []
        for s in self.subsets:
            k = detached_copy(self._template)
            _bind_any(k, [p for p in self.parents if p.name in s], self.node)
            kernels.append(k)
        self.subset_kernels = PyroModule[nn.ModuleList](kernels)
        del self._template

    def forward(self, X, Z=None, diag=False):
        out = 0
        for s, k in zip(self.subsets, self.subset_kernels):
            names = [p.name for p in self.parents if p.name in s]
            out = out + k(self.columns(X, names), None if Z is None else self.columns(Z, names), diag)
        return out


class InputConnected(FusionKernel):
    """Root-retaining (input-connected) fusion ``K_w = K^{int}(u, u') + K^{(0)}(x, x')``.

    Perlino et al. 2026, Remark 2.

    ``x`` collects the root-parent coordinates; the additive root-only component makes the node
    separating, which prevents prior collapse in deep DAGs (Perlino et al. 2026, Sec. 4, Remark 2).

    :param Kernel interaction: kernel on all parents (default ``RBF(ard=True)``).
    :param Kernel root: kernel on the root coordinates (default ``RBF(ard=True)``).
    """

    def __init__(self, interaction=None, root=None):
        super().__init__()
        self.interaction = RBF(ard=True) if interaction is None else interaction
        self.root = RBF(ard=True) if root is None else root

    def _build(self):
        if not self.root_parents:
            raise ValueError(f"InputConnected at node {self.node!r} needs a root parent; add an edge from the "
                             "input root to the node, or use another fusion rule")
        _bind_any(self.interaction, self.parents, self.node)
        _bind_any(self.root, [p for p in self.parents if p.is_root], self.node)

    def forward(self, X, Z=None, diag=False):
        roots = self.root_parents
        xr = self.columns(X, roots)
        zr = None if Z is None else self.columns(Z, roots)
        return self.interaction(X, Z, diag) + self.root(xr, zr, diag)


class SumInput(FusionKernel):
    """A kernel on the sum of the parents' values, ``K((a, b), (a', b')) = k(a + b, a' + b')``.

    This is the "additive RBF fusion" of the latent-collider experiment (Perlino et al. 2026, App. G.3):
    many parent pairs with the same sum give the same child value, which creates explaining-away. All
    parents must have the same dimension.

    :param Kernel base: default ``RBF()``.
    """

    def __init__(self, base=None):
        super().__init__()
        self.base = RBF() if base is None else base

    def _build(self):
        dims = {p.dim for p in self.parents}
        if len(dims) != 1:
            raise ValueError(f"SumInput at node {self.node!r} needs parents of equal dimension, got "
                             f"{[(p.name, p.dim) for p in self.parents]}")
        self.base.bind(dims.pop())

    def _sum(self, X):
        d = self.parents[0].dim
        return X.reshape(X.shape[:-1] + (len(self.parents), d)).sum(-2)

    def forward(self, X, Z=None, diag=False):
        return self.base(self._sum(X), None if Z is None else self._sum(Z), diag)
