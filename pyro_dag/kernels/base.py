"""Kernel base class, the ``+`` / ``*`` combinators and the parent description used by fusion rules.

Unlike :mod:`pyro.contrib.gp.kernels`, every kernel here takes inputs with arbitrary leading sample
dimensions: ``X`` has shape ``[..., N, D]`` and ``Z`` has shape ``[..., M, D]`` (broadcastable batch
dimensions). This is what ancestral sampling through a DAG needs: a node's inputs are its parents'
sampled values, of shape ``[S, B, D]`` (Perlino et al. 2026, "Deep Gaussian Processes on Directed Acyclic
Graphs", arXiv:2607.09645, Sec. 2, Eq. (2)).

Hyperparameters are :class:`pyro.nn.PyroParam` with positivity constraints, so they are trained by SVI
and can be replaced by priors for MCMC::

    k = RBF()
    k.lengthscale = pyro.nn.PyroSample(dist.LogNormal(0.0, 1.0))

A hyperparameter with a prior may hold a batch of draws, ``[*batch, *param_shape]`` (one per particle, under
``Trace_ELBO(vectorize_particles=True)`` or ``Predictive(parallel=True)``); the Gram matrices are then
``[*batch, N, M]``, one per draw (:meth:`Kernel.hyper`).
"""
import copy

import torch
from pyro.nn import PyroModule, PyroParam
from pyro.nn.module import _Context
from torch.distributions import constraints, transform_to

from ..utils import batched_hyperparameter

__all__ = ["Kernel", "ParentSpec", "Sum", "Prod", "positive_param", "detached_copy"]


def positive_param(value, name="value"):
    """A positive :class:`~pyro.nn.PyroParam` from a float or tensor (default dtype)."""
    value = torch.as_tensor(value, dtype=torch.get_default_dtype())
    if not bool((value > 0).all()):
        raise ValueError(f"kernel hyperparameter {name} must be positive, got {value}")
    return PyroParam(value.clone(), constraints.positive)


def detached_copy(module):
    """A deep copy of a :class:`~pyro.nn.PyroModule` that is detached from the module tree it was copied from.

    ``copy.deepcopy`` of a sub-module of a :class:`~pyro.nn.PyroModule` keeps its parameter-store name
    (``"kernels.c._template"``) and a copy of the tree's shared call context. When the copy is made inside
    the tree's ``__call__`` (e.g. when a :class:`~pyro_dag.DAGDGP` sets itself up at the first
    ``svi.step``), that context is active, so every copy reads and writes ``pyro.param`` statements under
    the *template's* name, and all copies end up holding one shared tensor. The copy returned here has
    names relative to itself and a fresh, inactive context of its own: its hyperparameters are its own
    tensors until it is attached to a module tree, which then names it (``"kernels.c.parent_kernels.a"``).

    :param torch.nn.Module module: the module to copy.
    :returns: the copy.
    """
    memo = {}
    fresh = _Context()
    for m in module.modules():
        ctx = m.__dict__.get("_pyro_context")
        if ctx is not None:
            memo[id(ctx)] = fresh
    new = copy.deepcopy(module, memo)
    for name, m in new.named_modules():
        if isinstance(m, PyroModule):
            m._pyro_name = name
    return new


class ParentSpec:
    """What a fusion kernel needs to know about one parent of its node.

    :param str name: parent node name. :param int dim: the parent's output dimension ``d_p``.
    :param bool is_root: whether the parent is a root (a deterministic input).
    """

    __slots__ = ("name", "dim", "is_root")

    def __init__(self, name, dim, is_root):
        self.name, self.dim, self.is_root = name, int(dim), bool(is_root)

    def __repr__(self):
        return f"ParentSpec({self.name!r}, dim={self.dim}, is_root={self.is_root})"


class Kernel(PyroModule):
    """Base class of batched kernels.

    Subclasses implement :meth:`forward`. A kernel is *bound* to its input dimension by :meth:`bind`
    (the :class:`~pyro_dag.DAGDGP` does this from the node's parents); ARD kernels create one
    length-scale per input dimension there. ``k1 + k2`` and ``k1 * k2`` give :class:`Sum` and :class:`Prod`.
    """

    def __init__(self):
        super().__init__()
        self.input_dim = None

    def bind(self, input_dim):
        """Fix the input dimension ``D``. Returns ``self``."""
        if self.input_dim is not None and self.input_dim != input_dim:
            raise ValueError(f"{type(self).__name__} is already bound to input dimension {self.input_dim}, "
                             f"cannot rebind to {input_dim}; use a fresh kernel (copy.deepcopy) per node")
        self.input_dim = int(input_dim)
        return self

    def forward(self, X, Z=None, diag=False):
        """Evaluate the kernel.

        :param torch.Tensor X: ``[..., N, D]`` inputs.
        :param torch.Tensor Z: ``[..., M, D]`` inputs, or ``None`` for ``Z = X``.
        :param bool diag: return only ``k(x_n, x_n)``.
        :returns: ``[..., N, M]`` Gram matrix, or ``[..., N]`` when ``diag``.
        """
        raise NotImplementedError

    def __add__(self, other):
        return Sum(self, other)

    def __mul__(self, other):
        return Prod(self, other)

    def _check_dim(self, X):
        if self.input_dim is not None and X.shape[-1] != self.input_dim:
            raise ValueError(f"{type(self).__name__} expects inputs with {self.input_dim} columns, "
                             f"got shape {tuple(X.shape)}")

    def hyper(self, name, event_dims=2):
        """The hyperparameter ``name``, shaped to broadcast against ``[*batch, N, M]`` Gram matrices and
        ``[*batch, N, D]`` inputs (``event_dims=2``) or ``[*batch, N]`` diagonals (``event_dims=1``).

        ``batch`` is empty for a ``PyroParam`` (the value is returned as is); a ``PyroSample`` drawn under a
        vectorised plate has one draw per particle, ``[*batch, *param_shape]`` (see
        :func:`pyro_dag.utils.batched_hyperparameter`), and the kernel's output then has the batch dims
        ``broadcast(batch, inputs' batch)``.

        :returns: ``[*batch, *ones, *param_shape]`` with ``event_dims`` dims after ``batch``.
        """
        return batched_hyperparameter(self, name, event_dims)

    def _own_value(self, name):
        """The constrained value of the :class:`~pyro.nn.PyroParam` ``name`` held by this module.

        Unlike ``getattr(self, name)`` this never issues a ``pyro.param`` statement, so binding a kernel
        inside a running model neither registers nor reads a parameter-store entry.
        """
        constraint, _ = self._pyro_params[name]
        return transform_to(constraint)(getattr(self, name + "_unconstrained"))


class _Composition(Kernel):
    """Two kernels on the same inputs, combined elementwise by :meth:`combine`."""

    def __init__(self, k1, k2):
        super().__init__()
        self.k1, self.k2 = k1, k2

    def bind(self, input_dim):
        super().bind(input_dim)
        self.k1.bind(input_dim)
        self.k2.bind(input_dim)
        return self

    def forward(self, X, Z=None, diag=False):
        return self.combine(self.k1(X, Z, diag), self.k2(X, Z, diag))


class Sum(_Composition):
    """``k1 + k2`` on the same inputs (also written ``k1 + k2``).

    :param Kernel k1: first summand. :param Kernel k2: second summand. Shapes as :meth:`Kernel.forward`.
    """

    @staticmethod
    def combine(a, b):
        return a + b


class Prod(_Composition):
    """``k1 · k2`` on the same inputs (also written ``k1 * k2``).

    :param Kernel k1: first factor. :param Kernel k2: second factor. Shapes as :meth:`Kernel.forward`.
    """

    @staticmethod
    def combine(a, b):
        return a * b
