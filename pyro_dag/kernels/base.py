"""Kernel base class for batched kernels (digest-000 §1.4).

Unlike :mod:`pyro.contrib.gp.kernels`, every kernel here takes inputs with arbitrary leading sample
dimensions: ``X`` has shape ``[..., N, D]`` and ``Z`` has shape ``[..., M, D]`` (broadcastable batch
dimensions). This is what ancestral sampling through a DAG needs: a node's inputs are its parents'
sampled values, of shape ``[S, B, D]``.

Hyperparameters are :class:`pyro.nn.PyroParam` with positivity constraints, so they are trained by SVI
and can be replaced by priors for MCMC::

    k = RBF()
    k.lengthscale = pyro.nn.PyroSample(dist.LogNormal(0.0, 1.0))
"""
import torch
from pyro.nn import PyroModule, PyroParam
from torch.distributions import constraints

__all__ = ["Kernel", "ParentSpec", "positive_param"]


def positive_param(value, name="value"):
    """A positive :class:`~pyro.nn.PyroParam` from a float or tensor (default dtype)."""
    value = torch.as_tensor(value, dtype=torch.get_default_dtype())
    if not bool((value > 0).all()):
        raise ValueError(f"kernel hyperparameter {name} must be positive, got {value}")
    return PyroParam(value.clone(), constraints.positive)


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
    length-scale per input dimension there.
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
        from .fusion import Sum

        return Sum(self, other)

    def __mul__(self, other):
        from .fusion import Prod

        return Prod(self, other)

    def _check_dim(self, X):
        if self.input_dim is not None and X.shape[-1] != self.input_dim:
            raise ValueError(f"{type(self).__name__} expects inputs with {self.input_dim} columns, "
                             f"got shape {tuple(X.shape)}")
