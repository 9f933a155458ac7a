"""The base of the structured Gaussian autoguides: :class:`StructuredGaussianGuide`, a Gaussian ``N(m, Λ⁻¹)`` over a
model's continuous latent sites with ``Λ = L Lᵀ`` on a chordal pattern (Vandenberghe & Andersen 2015, "Chordal graphs
and semidefinite optimization", §4; Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on
Directed Acyclic Graphs", arXiv:2607.09645, Eqs. (6) and (75)).

The base holds the state, the sampling and every query (``median``, ``quantiles``, ``get_posterior``,
``warm_start``); a subclass says what the blocks are by overriding :meth:`StructuredGaussianGuide._setup_layout`, as
Pyro's Gaussian guides override ``_setup_prototype``: :class:`~pyro_dag.infer.autoguide.AutoDAGGuide` (one block per
DAGDGP node), :class:`~pyro_dag.infer.autoguide.AutoGenericGuide` (one block per latent site of any Pyro model) and
:class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (whichever of the two the model's trace calls for).
"""
import uuid
import warnings
from contextlib import ExitStack

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.distributions.util import sum_rightmost
from pyro.infer.autoguide import AutoGuide
from pyro.infer.autoguide.initialization import InitMessenger, init_to_feasible
from torch.distributions import biject_to, constraints

from ...errors import NotFittedError
from ...param_store import check_param_store
from ...utils import renamed_argument
from ...dgp.handoff import current_estimator, suspended
from .families import _assign, make_family

__all__ = ["StructuredGaussianGuide", "InducingDistribution"]


#: The remedies the parameter-store collision warning names.
GUIDE_PARAM_STORE_FIXES = ("Call pyro.clear_param_store() before building a new model and guide, give each guide "
                           "its own name (AutoStructuredGuide(model, name='guide_b')), or call "
                           "pyro.settings.set(module_local_params=True) before building them.")


class InducingDistribution(TorchDistribution):
    """A Pyro distribution over the concatenated latent vector of an
    :class:`~pyro_dag.infer.autoguide.gaussians.InducingPosterior`: event shape ``[P]``, reparameterised.

    :param posterior: the Gaussian, whose coordinates are in its block order.
    :param torch.Tensor index: optional ``[P]`` permutation: coordinate ``i`` of this distribution is coordinate
        ``index[i]`` of ``posterior`` (the guide uses it to present the latent vector in the model's site order).
    """

    arg_constraints = {}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, posterior, index=None, validate_args=False):
        self.posterior = posterior
        self.index = index
        self._inverse = None if index is None else torch.argsort(index)
        super().__init__(torch.Size(), torch.Size([posterior.size]), validate_args=validate_args)

    def _reorder(self, x):
        return x if self.index is None else x[..., self.index]

    def rsample(self, sample_shape=torch.Size()):
        return self._reorder(self.posterior.rsample(sample_shape))

    def log_prob(self, value):
        if self._inverse is not None:
            value = value[..., self._inverse]
        return self.posterior.log_prob(value)

    @property
    def mean(self):
        """``[P]``."""
        return self._reorder(self.posterior.mean_vector())

    @property
    def variance(self):
        """The marginal variances ``[P]``."""
        return self._reorder(self.posterior.marginal_variance())

    @property
    def covariance_matrix(self):
        """The dense covariance ``[P, P]`` (forms ``P × P``)."""
        cov = self.posterior.covariance_matrix()
        return cov if self.index is None else cov[self.index][:, self.index]


class _SiteLayout:
    """Where one guided latent site lives in the guide's latent vector.

    :ivar str name: the model's site name. :ivar str node: its block in the family.
    :ivar torch.Size shape: unconstrained shape, at full plate sizes. :ivar int event_dim: unconstrained event dim.
    :ivar int offset: first coordinate in the model-order latent vector. :ivar tuple subsampled: ``(plate name,
        dim of the plate in the unconstrained value)`` for the plates that are subsampled.
    """

    __slots__ = ("name", "node", "shape", "event_dim", "offset", "subsampled", "support", "fn_event_dim",
                 "cond_indep_stack")

    def __init__(self, name, node, shape, event_dim, offset, subsampled, site):
        self.name, self.node, self.shape, self.event_dim = name, node, torch.Size(shape), int(event_dim)
        self.offset, self.subsampled = int(offset), tuple(subsampled)
        self.support = site["fn"].support
        self.fn_event_dim = site["fn"].event_dim
        self.cond_indep_stack = site["cond_indep_stack"]

    @property
    def size(self):
        return self.shape.numel()


class _DefaultInit:
    """The default ``init_loc_fn``: :func:`~pyro.infer.autoguide.initialization.init_to_feasible` while the guide
    traces its prototype; switched to :func:`~pyro.infer.autoguide.initialization.init_to_median` (and the
    prototype traced again) once the model turns out to have no DAGDGP in it."""

    def __init__(self):
        self.fn = init_to_feasible

    def __call__(self, site=None):
        return self.fn(site)


class StructuredGaussianGuide(AutoGuide):
    """A Gaussian autoguide with a chordal precision (see :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`
    for the arguments); subclasses implement :meth:`_setup_layout`."""

    def __init__(self, model, *, precision="chordal", backend="auto", init_loc_fn=None, init_scale=None,
                 create_plates=None, name=None, conditioning="square_root", structure=None):
        precision = renamed_argument("AutoStructuredGuide", "structure", "precision", structure, precision, "chordal")
        scales = [] if init_scale is None else init_scale.values() if isinstance(init_scale, dict) else [init_scale]
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in scales):
            raise ValueError(f"init_scale must be a positive number or a dict {{name: number}}, got {init_scale!r}")
        nodes = getattr(model, "gp_nodes", None)  # a DAGDGP: its blocks are its GP nodes, known now
        if isinstance(init_scale, dict) and nodes is not None and set(init_scale) - set(nodes):
            raise ValueError(f"init_scale names {sorted(set(init_scale) - set(nodes), key=str)}, which are not GP nodes "
                             f"of the model (GP nodes: {list(nodes)}); check the names")
        if init_loc_fn is not None and not callable(init_loc_fn):
            raise ValueError(f"init_loc_fn must be a callable site -> value (e.g. init_to_median), got "
                             f"{init_loc_fn!r}")
        if init_loc_fn is None:
            init_loc_fn = _DefaultInit()
        make_family(precision, backend, None, None, check_only=True, conditioning=conditioning)
        if create_plates is None and getattr(model, "latent_inputs", None) and callable(
                getattr(model, "create_plates", None)):
            # A DAGDGP with latent inputs has per-case (local) parameters: with Pyro's default the guide's plate
            # would keep the minibatch size of its first call, and a later full-batch call would silently be a
            # minibatch estimate. The model's own plate lets each call choose its cases.
            create_plates = model.create_plates
        self.precision = precision
        self.backend = backend
        self.conditioning = conditioning
        self.init_loc_fn = init_loc_fn
        self.init_scale = init_scale
        super().__init__(InitMessenger(init_loc_fn)(model), create_plates=create_plates)
        # the unwrapped model, for data-driven initial scales (a tuple, so that it is not registered as a submodule)
        self._user_model = (model,)
        if name is not None:  # parameter-store prefix; two guides with one name would share parameters
            self._pyro_name = name
        self.family = None
        self.other_guide = None
        self._others_first = False
        self._model_key = None
        self._store_key = uuid.uuid4().hex  # this guide's identity for the parameter-store check
        self._sites = []
        self._index = None

    # ------------------------------------------------------------------------------------------------ set-up
    def _trace_prototype(self, args, kwargs):
        with suspended():
            AutoGuide._setup_prototype(self, *args, **kwargs)

    def _setup_prototype(self, *args, **kwargs):
        self._trace_prototype(args, kwargs)
        dag_sites, others = [], []
        for name, site in self.prototype_trace.iter_stochastic_nodes():
            meta = site["infer"].get("dag")
            if meta is not None and meta["role"] == "inducing":
                dag_sites.append((name, site))
            else:
                others.append(name)
        self._setup_layout(dag_sites, others, args, kwargs)
        # the parameters exist and none has been read yet (a read ties a stored name's tensor to this guide)
        check_param_store(self, self._store_key, "AutoStructuredGuide", GUIDE_PARAM_STORE_FIXES)

    def _setup_layout(self, dag_sites, others, args, kwargs):
        """Build the family and the site layout from the prototype trace.

        :param list dag_sites: ``(name, site)`` of the DAGDGP inducing sites (role ``"inducing"``), in trace order.
        :param list others: the names of the other stochastic sites. :param tuple args: the model's arguments.
        :param dict kwargs: its keyword arguments.
        """
        raise NotImplementedError

    def _init_means(self, init):
        """Set the family's means from ``{site name: unconstrained value}`` (the prototype's: ``init_loc_fn``'s)."""
        with torch.no_grad():
            for s in self._sites:
                _assign(self.family.locs, s.node, init[s.name].reshape(-1))

    def _finish_layout(self):
        # latent coordinate i (model order) is coordinate index[i] of the family (its elimination order)
        offsets = {b.node: b.offset for b in self.family.blocks}
        index = torch.cat([torch.arange(s.size) + offsets[s.node] for s in self._sites])
        ref = next(iter(self.family.parameters()))
        self._index = None if torch.equal(index, torch.arange(len(index))) else index.to(ref.device)

    def _check_prototype(self, part_trace):
        # Called by the inner AutoNormal (as by AutoGuideList): it must not guide inducing sites.
        for name, site in part_trace.iter_stochastic_nodes():
            if site["infer"].get("dag", {}).get("role") == "inducing":
                raise RuntimeError(f"inducing site {name!r} is guided twice")

    # ------------------------------------------------------------------------------------------------- state
    @property
    def structure(self):
        """The old name of :attr:`precision`."""
        return self.precision

    @property
    def blocks(self):
        """The block layout (:class:`~pyro_dag.infer.autoguide.gaussians.Block` per node or site), in the
        family's (elimination) order."""
        self._require_setup()
        return self.family.blocks

    @property
    def latent_dim(self):
        """``P``, the length of the unconstrained latent vector (of the jointly guided sites)."""
        return sum(s.size for s in self._sites)

    def _require_setup(self):
        if self.prototype_trace is None:
            raise NotFittedError("the guide has not been run yet (never trained, or its training was interrupted "
                                 "before the guide's first step, e.g. during train's mean-field warm start): train it, "
                                 "or call it once (guide(inputs, data)) to set it up")
        if self.family is None:
            raise RuntimeError("AutoStructuredGuide found no continuous latent sites in the model: it is an empty "
                               "guide (it returns {})")

    def inducing_posterior(self):
        """The current Gaussian as an :class:`~pyro_dag.infer.autoguide.gaussians.InducingPosterior` (in the
        family's block order; for a DAGDGP, ``q(U)``)."""
        self._require_setup()
        return self.family.posterior()

    def get_posterior(self, *args, **kwargs):
        """The posterior over the unconstrained latent vector, in the model's site order (the value of the
        auxiliary site ``"_{name}_latent"``), as an :class:`InducingDistribution` with ``mean``, ``variance``,
        ``covariance_matrix``, ``rsample`` and ``log_prob``. For a DAGDGP it covers the inducing sites only."""
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        self._require_setup()
        return InducingDistribution(self.family.posterior(), self._index)

    def _loc_scale(self, *args, **kwargs):
        """``(loc [P], scale [P])``: the mean and marginal standard deviations of the unconstrained latent
        vector in the model's site order (as Pyro's ``AutoContinuous``)."""
        posterior = self.get_posterior(*args, **kwargs)
        return posterior.mean, posterior.variance.sqrt()

    # ---------------------------------------------------------------------------------------------- sampling
    def _unpack_latent(self, latent):
        """Yield ``(layout, unconstrained value)`` per site from a ``[..., P]`` latent in model order; the batch
        dims of ``latent`` (outer plates: vectorised particles, ``Predictive(parallel=True)``) are broadcast
        against the site's own plate dims, as in Pyro's ``AutoContinuous``."""
        batch_shape = latent.shape[:-1]
        for s in self._sites:
            shape = torch.broadcast_shapes(s.shape, batch_shape + (1,) * s.event_dim)
            yield s, latent[..., s.offset:s.offset + s.size].reshape(shape)

    def sample_latent(self, *args, **kwargs):
        """Sample the auxiliary latent vector ``[..., P]`` (model order) from :meth:`get_posterior`."""
        return pyro.sample(f"_{self._pyro_name}_latent", InducingDistribution(self.family.posterior(), self._index),
                           infer={"is_auxiliary": True})

    def _emit(self, latent, plates):
        result = {}
        for s, u in self._unpack_latent(latent):
            with ExitStack() as stack:
                indices = {}
                for frame in s.cond_indep_stack:
                    indices[frame.name] = stack.enter_context(plates[frame.name])
                for plate_name, dim in s.subsampled:
                    u = u.index_select(dim, indices[plate_name].to(u.device))
                transform = biject_to(s.support)
                value = transform(u)
                if poutine.get_mask() is False:
                    log_density = 0.0
                else:
                    log_density = transform.inv.log_abs_det_jacobian(value, u)
                    log_density = sum_rightmost(log_density, log_density.dim() - value.dim() + s.fn_event_dim)
                result[s.name] = pyro.sample(s.name, dist.Delta(value, log_density=log_density,
                                                                event_dim=s.fn_event_dim))
        return result

    def forward(self, *args, **kwargs):
        """Sample every guided latent site (under :class:`~pyro_dag.infer.DAGELBO`, publish ``q(U)`` instead of
        sampling the inducing sites), in the model's order.

        :returns: ``{site name: value}``.
        """
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        plates = self._create_plates(*args, **kwargs)  # shared with the inner AutoNormal, as in AutoGuideList
        result = {}
        if self.family is None:
            return result
        others_first = self.other_guide is not None and self._others_first
        if others_first:
            result.update(self.other_guide(*args, **kwargs))
        estimator = current_estimator() if self._model_key is not None else None
        if estimator is not None:
            estimator.publish(self._model_key, self.family.posterior())
        else:
            result.update(self._emit(self.sample_latent(*args, **kwargs), plates))
        if self.other_guide is not None and not others_first:
            result.update(self.other_guide(*args, **kwargs))
        return result

    # ---------------------------------------------------------------------------------------------- summaries
    @torch.no_grad()
    def median(self, *args, **kwargs):
        """The posterior median of each latent site, constrained and site-shaped (the Gaussian's mean mapped
        through each site's bijection, as ``AutoMultivariateNormal.median``); subsampled sites at full size.

        :returns: ``{site name: tensor}``.
        """
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        out = {}
        if self.family is not None:
            loc = self.get_posterior().mean.detach()
            out = {s.name: biject_to(s.support)(u).clone() for s, u in self._unpack_latent(loc)}
        if self.other_guide is not None:
            out.update(self.other_guide.median(*args, **kwargs))
        return out

    @torch.no_grad()
    def quantiles(self, quantiles, *args, **kwargs):
        """Marginal posterior quantiles of each latent site, constrained and site-shaped, as
        ``AutoMultivariateNormal.quantiles``: ``{site name: [len(quantiles), *site shape]}``.

        :param quantiles: a list or tensor of levels in (0, 1).
        """
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        result = {}
        if self.family is not None:
            loc, scale = self._loc_scale()
            q = torch.as_tensor(quantiles, dtype=loc.dtype, device=loc.device).unsqueeze(-1)
            latents = dist.Normal(loc, scale).icdf(q)
            for latent in latents:
                for s, u in self._unpack_latent(latent):
                    result.setdefault(s.name, []).append(biject_to(s.support)(u))
            result = {k: torch.stack(v) for k, v in result.items()}
        if self.other_guide is not None:
            result.update(self.other_guide.quantiles(quantiles, *args, **kwargs))
        return result

    @torch.no_grad()
    def warm_start(self, source, reset_latent_scale=1.0):
        """Initialise this guide from a trained guide of the same DAGDGP (mean field first, then structured).

        Means are copied for every node. Observed nodes keep the source's covariance (as the diagonal block of
        the precision, ``Λ_ww = S_w⁻¹``, with no coupling between blocks). Latent (never observed) nodes get
        their scale reset to ``reset_latent_scale`` (the prior's by default): a mean-field fit collapses the
        posterior variance of co-parents, and copying it would trap the structured guide in that collapsed
        solution. Pass ``reset_latent_scale=None`` to copy every covariance.

        The precision factor is computed from a Cholesky factor of ``S_w`` (no explicit inverse). A near-noiseless
        fit can leave ``S_w`` with a condition number beyond ``1/eps`` of the dtype, numerically not positive
        definite; it then gets the smallest jitter of a ladder starting at ``eps × mean(diag S_w)`` and a warning
        naming the node (its best-determined directions come out that much wider).

        :param source: a set-up :class:`AutoStructuredGuide` for the same model (any precision pattern).
        """
        if self.family is None or source.family is None:
            raise RuntimeError("run both guides once (e.g. one SVI step) before warm-starting")
        if self._model_key is None:
            raise RuntimeError("warm_start is for DAGDGP models (inducing sites); this guide guides a generic model")
        src = source.inducing_posterior()
        observed = set(self._observed)
        for b in self.family.blocks:
            loc = src.mean_blocks()[b.node].reshape(-1)
            if reset_latent_scale is not None and b.node not in observed:
                cov = torch.eye(b.size, dtype=loc.dtype, device=loc.device) * reset_latent_scale ** 2
            else:
                cov = src.covariance_block(b.node)
            factor = _covariance_factor(cov, b.node, upper=self.precision != "mean_field")
            if self.precision == "mean_field":
                self.family.set_node(b.node, loc, factor)
            else:  # S = U Uᵀ with U upper-triangular: Λ = S⁻¹ = U⁻ᵀ U⁻¹, and U⁻ᵀ is lower-triangular
                eye = torch.eye(b.size, dtype=factor.dtype, device=factor.device)
                self.family.set_node(b.node, loc, torch.linalg.solve_triangular(factor, eye, upper=True).mT)
        if self.precision != "mean_field":
            self.family.zero_offdiagonal()
        return self


def _covariance_factor(cov, node, upper=False, max_tries=8):
    """A triangular ``F`` with ``F Fᵀ = S + ε I`` for a covariance ``S`` ``[P, P]``: lower-triangular, or with
    ``upper`` upper-triangular (the Cholesky factor of the reversed matrix, reversed). ``ε = 0`` when ``S`` is
    numerically positive definite; otherwise the first of ``eps × mean(diag S) × 10^k``, ``k = 0 .. max_tries - 1``
    (``eps`` of the dtype) that is, with a warning naming ``node``.

    :raises ValueError: naming the node, if no rung of the ladder gives a factor (a non-finite covariance).
    """
    sym = (cov + cov.mT) / 2
    if upper:
        sym = sym.flip(-1, -2)
    eye = torch.eye(sym.shape[-1], dtype=sym.dtype, device=sym.device)
    scale = sym.diagonal().mean().clamp_min(torch.finfo(sym.dtype).tiny)
    factor, info = torch.linalg.cholesky_ex(sym)
    jitter = 0.0
    for k in range(max_tries):
        if int(info) == 0:
            break
        jitter = torch.finfo(sym.dtype).eps * 10.0 ** k
        factor, info = torch.linalg.cholesky_ex(sym + jitter * scale * eye)
    if int(info) != 0:
        raise ValueError(f"warm_start: the posterior covariance of node {node!r} in the source guide is not positive "
                         f"definite even with jitter {jitter:.1e} × its mean variance (is it finite?); train the "
                         "source guide with a smaller learning rate, or warm-start with reset_latent_scale")
    if jitter:
        warnings.warn(f"warm_start: the posterior covariance of node {node!r} in the source guide is not numerically "
                      f"positive definite in {sym.dtype} (a near-noiseless fit: condition number beyond 1/eps); "
                      f"added {jitter:.1e} × its mean variance {float(scale):.3g} to its diagonal, so its "
                      "best-determined directions start that much wider", stacklevel=3)
    return factor.flip(-1, -2) if upper else factor
