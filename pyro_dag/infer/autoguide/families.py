"""Variational families of :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`: parameters -> posterior.

Each family is a :class:`~pyro.nn.PyroModule` holding the variational parameters, with a
``posterior()`` method that builds an :class:`~pyro_dag.infer.autoguide.posteriors.InducingPosterior`
from them (inside the guide's ``forward``, so Pyro's parameter capture sees every parameter).
"""
import torch
from pyro.nn import PyroModule, PyroParam
from pyro.distributions import constraints

from .posteriors import MeanFieldPosterior

__all__ = ["MeanFieldFamily", "make_family", "STRUCTURES", "BACKENDS"]

STRUCTURES = ("mean_field", "chordal", "full")
BACKENDS = ("auto", "dense", "sparse")


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
            setattr(self.scales, b.node, PyroParam(torch.full((b.size,), init_scale, **opts),
                                                   constraints.softplus_positive))
            setattr(self.unit_trils, b.node, PyroParam(torch.eye(b.size, **opts), constraints.unit_lower_cholesky))

    def scale_tril(self, node):
        return getattr(self.scales, node).unsqueeze(-1) * getattr(self.unit_trils, node)

    def posterior(self):
        return MeanFieldPosterior(self.blocks, [getattr(self.locs, b.node) for b in self.blocks],
                                  [self.scale_tril(b.node) for b in self.blocks])


def make_family(structure, backend, blocks, graph, observed=None, init_scale=1.0, dtype=None, device=None,
                check_only=False):
    """Build the family for ``structure`` and ``backend`` (validates the names first)."""
    if structure not in STRUCTURES:
        raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if check_only:
        return None
    if structure == "mean_field":
        return MeanFieldFamily(blocks, init_scale, dtype, device)
    raise NotImplementedError(f"structure={structure!r} is not available yet; use structure='mean_field'")
