"""Conditional flow transforms over edge logits: the building blocks of SVI-DAG's ``q_phi(gamma | r)``.

* :class:`ConditionalSplineCoupling` -- a rational-quadratic spline coupling layer whose conditioner also sees a
  context vector (Pyro ships ``SplineCoupling`` and ``ConditionalAffineCoupling`` but no conditional spline
  coupling). Built on Pyro's ``ConditionalDenseNN`` and its monotonic rational spline.
* :class:`OrderMaskAffine` -- an elementwise affine map conditioned on the relaxed order mask.
* :func:`edge_flow` / :class:`EdgeFlow` -- the SVI-DAG flow: ``num_blocks`` x (fixed random permutation,
  conditional spline coupling), then the order-mask affine map, conditioned on the centred potentials
  (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to Bayesian Causal Discovery*,
  arXiv:2608.04930, §3.5 and Table E.1).
"""
import math
import numbers

import torch
import torch.nn as nn
import torch.nn.functional as F
from pyro.distributions.conditional import ConditionalTransformModule
from pyro.distributions.transforms import Permute
from pyro.distributions.transforms.spline import _monotonic_rational_spline
from pyro.nn import ConditionalDenseNN
from torch.distributions import constraints
from torch.distributions.transforms import Transform

from .adjacency import offdiag
from .sinkhorn import soft_order_mask

__all__ = ["ConditionalSplineCoupling", "EdgeFlow", "OrderMaskAffine", "edge_flow"]


_MIN_DERIVATIVE = 1e-3
# softplus(x) + 1e-3 = 1 - 1e-3 (Pyro pads the boundary knots with 1 - 1e-3): an identity spline at init.
_IDENTITY_DERIVATIVE = math.log(math.expm1(1.0 - 2 * _MIN_DERIVATIVE))
_LOGIT_BOUND = 4.0


def _soft_clamp(x, bound=_LOGIT_BOUND):
    return bound * torch.tanh(x / bound)


class _ConditionedSplineCoupling(Transform):
    domain = constraints.real_vector
    codomain = constraints.real_vector
    bijective = True

    def __init__(self, parent, context):
        super().__init__(cache_size=1)
        self.parent = parent
        self.context = context
        self._cache_log_detJ = None

    @property
    def event_dim(self):
        return 1

    def _params(self, x1):
        par = self.parent
        ctx = self.context
        shape = torch.broadcast_shapes(x1.shape[:-1], ctx.shape[:-1])
        x1 = x1.expand(shape + x1.shape[-1:])
        ctx = ctx.expand(shape + ctx.shape[-1:])
        w, h, d = par.nn(x1, ctx)
        m, K = par.input_dim - par.split_dim, par.count_bins
        # soft-clamp the raw bin logits: bin ratios stay below exp(2 * _LOGIT_BOUND), which keeps the slopes and the
        # float32 log-determinants finite (unbounded conditioners produce near-vertical bins and NaN log-dets)
        w = F.softmax(_soft_clamp(w.reshape(shape + (m, K))), -1)
        h = F.softmax(_soft_clamp(h.reshape(shape + (m, K))), -1)
        d = F.softplus(_soft_clamp(d.reshape(shape + (m, K - 1))))
        return shape, w, h, d

    def _call(self, x):
        s = self.parent.split_dim
        x1, x2 = x[..., :s], x[..., s:]
        shape, w, h, d = self._params(x1)
        x1 = x1.expand(shape + x1.shape[-1:])
        x2 = x2.expand(shape + x2.shape[-1:])
        y2, ld = _monotonic_rational_spline(x2, w, h, d, None, bound=self.parent.bound)
        self._cache_log_detJ = ld.sum(-1)
        return torch.cat([x1, y2], -1)

    def _inverse(self, y):
        s = self.parent.split_dim
        y1, y2 = y[..., :s], y[..., s:]
        shape, w, h, d = self._params(y1)
        y1 = y1.expand(shape + y1.shape[-1:])
        y2 = y2.expand(shape + y2.shape[-1:])
        x2, ld = _monotonic_rational_spline(y2, w, h, d, None, inverse=True, bound=self.parent.bound)
        self._cache_log_detJ = -ld.sum(-1)
        return torch.cat([y1, x2], -1)

    def log_abs_det_jacobian(self, x, y):
        x_old, y_old = self._cached_x_y
        if x is not x_old or y is not y_old:
            self(x)
        return self._cache_log_detJ


class ConditionalSplineCoupling(ConditionalTransformModule):
    r"""Conditional rational-quadratic spline coupling layer (Durkan et al. 2019; SVI-DAG Table E.1).

    .. math:: y_{1:s} = x_{1:s}, \qquad y_{s+1:D} = g_{\theta(x_{1:s}, c)}(x_{s+1:D}),

    where ``g`` is an elementwise monotonic rational-quadratic spline on ``[-bound, bound]`` (identity outside) whose
    bin widths, heights and interior knot derivatives come from a :class:`~pyro.nn.ConditionalDenseNN` of the
    untouched half ``x_{1:s}`` and the context ``c``; the raw bin and derivative logits are soft-clamped to
    ``+-4`` so that no bin becomes near-vertical (which overflows float32 log-determinants). The conditioner's last
    layer starts at zero weights with
    biases that make every knot derivative 1 - 1e-3 (the value Pyro pads the boundary knots with), so the layer
    is the identity map up to ~1e-4 at initialisation.

    :param int input_dim: ``D``.
    :param int context_dim: length of the context vector.
    :param int split_dim: ``s`` (default ``D // 2``).
    :param tuple hidden_dims: conditioner widths (paper: (64, 64)).
    :param int count_bins: spline bins (paper: 8).
    :param float bound: spline domain ``[-bound, bound]`` (paper: 5).

    Example::

        t = ConditionalSplineCoupling(6, context_dim=3)
        flow = dist.ConditionalTransformedDistribution(dist.Normal(torch.zeros(6), 1.).to_event(1), [t])
        y = flow.condition(torch.randn(3)).rsample()
    """

    domain = constraints.real_vector
    codomain = constraints.real_vector
    bijective = True
    event_dim = 1

    def __init__(self, input_dim, context_dim, split_dim=None, hidden_dims=(64, 64), count_bins=8, bound=5.0):
        super().__init__()
        if not isinstance(input_dim, numbers.Integral) or input_dim < 2:
            raise ValueError(f"input_dim must be an integer >= 2; got {input_dim!r}")
        if not isinstance(context_dim, numbers.Integral) or context_dim < 1:
            raise ValueError(f"context_dim must be a positive integer; got {context_dim!r}")
        split_dim = input_dim // 2 if split_dim is None else split_dim
        if not 1 <= split_dim < input_dim:
            raise ValueError(f"split_dim must be in [1, input_dim); got {split_dim}")
        if not isinstance(count_bins, numbers.Integral) or count_bins < 2:
            raise ValueError(f"count_bins must be an integer >= 2; got {count_bins!r}")
        if not bound > 0:
            raise ValueError(f"bound must be positive; got {bound!r}")
        self.input_dim, self.split_dim, self.count_bins, self.bound = input_dim, split_dim, count_bins, float(bound)
        m = input_dim - split_dim
        self.nn = ConditionalDenseNN(
            split_dim, context_dim, list(hidden_dims), param_dims=[m * count_bins, m * count_bins, m * (count_bins - 1)]
        )
        last = self.nn.layers[-1]
        with torch.no_grad():
            last.weight.zero_()
            last.bias.zero_()
            last.bias[2 * m * count_bins:] = _IDENTITY_DERIVATIVE

    def condition(self, context):
        return _ConditionedSplineCoupling(self, context)


class _ConditionedMaskAffine(Transform):
    domain = constraints.real_vector
    codomain = constraints.real_vector
    bijective = True

    def __init__(self, loc, log_scale):
        super().__init__(cache_size=1)
        self.loc, self.log_scale = loc, log_scale

    @property
    def event_dim(self):
        return 1

    def _call(self, x):
        return self.loc + self.log_scale.exp() * x

    def _inverse(self, y):
        return (y - self.loc) * torch.exp(-self.log_scale)

    def log_abs_det_jacobian(self, x, y):
        return self.log_scale.expand(torch.broadcast_shapes(x.shape, self.log_scale.shape)).sum(-1)


class OrderMaskAffine(ConditionalTransformModule):
    r"""Elementwise affine map of the edge logits conditioned on the relaxed order mask (SVI-DAG §3.5).

    .. math:: \gamma_{ij} = u_{ij} + v_{ij} m_{ij} + \exp(s_{ij} + t_{ij} m_{ij})\, x_{ij}, \qquad
        m = \mathrm{offdiag}(M_	au(r)),

    so that every edge has one location/scale where the order allows it (``m = 1``) and another where it does not
    (``m = 0``): only allowed edges meet the likelihood, and the optimal ``q(gamma_ij | r)`` of a forbidden edge is
    its prior. A plain MLP conditioner on the potentials has to learn this switch (a comparison of two potentials)
    from scratch. The context is the (centred) potential vector ``[..., p]``; ``temperature``, ``sinkhorn_iters``
    and ``scale_normalize`` are attributes (the guide keeps them equal to its own). Initialised at
    ``(u, s) = (loc, log scale)``, ``v = t = 0``.

    :param int num_nodes: ``p``.
    :param torch.Tensor loc: ``[p (p - 1)]`` initial location (default 0).
    :param torch.Tensor scale: ``[p (p - 1)]`` initial scale (default 1).
    """

    domain = constraints.real_vector
    codomain = constraints.real_vector
    bijective = True
    event_dim = 1

    def __init__(self, num_nodes, loc=None, scale=None, temperature=0.1, sinkhorn_iters=100, scale_normalize=True):
        super().__init__()
        d = num_nodes * (num_nodes - 1)
        self.num_nodes = num_nodes
        self.u = nn.Parameter(torch.zeros(d) if loc is None else loc.detach().clone())
        self.s = nn.Parameter(torch.zeros(d) if scale is None else scale.detach().log().clone())
        self.v = nn.Parameter(torch.zeros(d))
        self.t = nn.Parameter(torch.zeros(d))
        self.temperature, self.sinkhorn_iters, self.scale_normalize = temperature, sinkhorn_iters, scale_normalize

    def mask(self, context):
        """``offdiag(M_tau(r))`` ``[..., p (p - 1)]`` from potentials ``[..., p]``."""
        M = soft_order_mask(context, self.temperature, self.sinkhorn_iters, self.scale_normalize)
        return offdiag(M)

    def condition(self, context):
        m = self.mask(context)
        return _ConditionedMaskAffine(self.u + self.v * m, self.s + self.t * m)


class EdgeFlow(nn.Module):
    """Container of the edge-logit flow; :meth:`transforms` lists them for ``ConditionalTransformedDistribution``.

    Blocks of (fixed permutation, :class:`ConditionalSplineCoupling`) and a final :class:`OrderMaskAffine`; see
    :func:`edge_flow`. Permutations are buffers, so ``.to(device)`` moves them.
    """

    def __init__(self, num_edges, context_dim, num_blocks=5, hidden_dims=(64, 64), count_bins=8, bound=5.0,
                 loc=None, scale=None, seed=42):
        super().__init__()
        if num_edges != context_dim * (context_dim - 1):
            raise ValueError(f"an edge flow of {context_dim} potentials has p (p - 1) = {context_dim * (context_dim - 1)} "
                             f"edges; got num_edges={num_edges}")
        if not isinstance(num_blocks, numbers.Integral) or num_blocks < 0:
            raise ValueError(f"num_blocks must be a non-negative integer; got {num_blocks!r}")
        g = torch.Generator().manual_seed(seed)
        self.num_blocks = num_blocks
        for k in range(num_blocks):
            self.register_buffer(f"perm{k}", torch.randperm(num_edges, generator=g))
        self.couplings = nn.ModuleList(
            ConditionalSplineCoupling(num_edges, context_dim, None, hidden_dims, count_bins, bound)
            for _ in range(num_blocks)
        )
        self.affine = OrderMaskAffine(context_dim, loc, scale)

    def transforms(self):
        """``[Permute, ConditionalSplineCoupling] * num_blocks + [affine]``."""
        out = []
        for k in range(self.num_blocks):
            out.append(Permute(getattr(self, f"perm{k}")))
            out.append(self.couplings[k])
        out.append(self.affine)
        return out


def edge_flow(num_edges, context_dim, num_blocks=5, hidden_dims=(64, 64), count_bins=8, bound=5.0, loc=None, scale=None,
              seed=42):
    """The SVI-DAG edge-logit flow ``gamma = T_phi(z; c)`` (SVI-DAG §3.5, Table E.1) as an :class:`EdgeFlow`.

    ``num_blocks`` times: a fixed random :class:`~pyro.distributions.transforms.Permute` (generator ``seed``) then a
    :class:`ConditionalSplineCoupling` (conditioner input: the untouched half and the centred potentials); finally an
    :class:`OrderMaskAffine` map (a location and scale per edge for "allowed" and for "forbidden" by the order)
    initialised at ``(loc, scale)`` (e.g. the prior's mean and standard deviation), so that at initialisation
    ``gamma = loc + scale * z``.

    :param int num_edges: ``d = p (p - 1)``.
    :param int context_dim: context length (``p``).
    :returns: :class:`EdgeFlow`; use ``ConditionalTransformedDistribution(base, flow.transforms())``.
    """
    return EdgeFlow(num_edges, context_dim, num_blocks, hidden_dims, count_bins, bound, loc, scale, seed)
