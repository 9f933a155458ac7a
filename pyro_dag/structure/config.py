"""Validated settings of structure learning: :class:`StructureConfig` (the model) and :class:`FitConfig` (its fit).

:class:`StructureConfig` holds what :func:`~pyro_dag.structure.fit` and :func:`~pyro_dag.structure.exact_posterior`
share: the likelihood, the edge prior and the preprocessing. :class:`FitConfig` adds the variational fit's settings.
Both are frozen dataclasses that validate themselves on construction; a bad value raises a :class:`ValueError`
that names the field. Fields left at ``None`` take a default that depends on the likelihood (and, for a few, on
the number of variables); :meth:`FitConfig.for_likelihood` fills the former, :meth:`FitConfig.resolve` all of
them. The per-likelihood defaults are :data:`LIKELIHOOD_DEFAULTS`.

Example::

    config = FitConfig.for_likelihood("bge", num_steps=500)     # validated; per-likelihood defaults filled in
    post = fit(X, config=config)                                 # same as fit(X, likelihood="bge", num_steps=500)
    exact = exact_posterior(X, config=config)                    # the same model, computed exactly
"""
import dataclasses
import math
import numbers
from typing import Optional, Tuple, Union

from .priors import edge_prior_parameters

__all__ = ["COLLAPSED_LIKELIHOODS", "EXACT_LIKELIHOODS", "FitConfig", "LIKELIHOODS", "LIKELIHOOD_DEFAULTS", "LINEAR_PRIORS",
           "StructureConfig"]

#: The likelihoods a :class:`StructureConfig` knows (``"gp"``: scored exactly, so :func:`~pyro_dag.structure.fit`
#: hands it to :func:`~pyro_dag.structure.exact_posterior` or :func:`~pyro_dag.structure.hybrid_posterior`).
LIKELIHOODS = ("linear", "bge", "linear-sites", "mlp", "gp")
#: The likelihoods with their parameters integrated out exactly (``exact_posterior`` and the exact order score).
COLLAPSED_LIKELIHOODS = ("linear", "bge")
#: The likelihoods the exact posterior and the candidate tables score: the collapsed ones and the GP network score
#: (:mod:`~pyro_dag.structure.gp_scores`).
EXACT_LIKELIHOODS = ("linear", "bge", "gp")
#: Order scores with their exact computation feasible without a parent-set cap up to this many variables.
EXACT_ORDER_SCORE_MAX_NODES = 14

#: Named priors of the ``"linear"`` score, ``StructureConfig(**LINEAR_PRIORS[name])``: ``"scale_free"`` (the
#: default since the measurement of ``benchmarks/structure_priors.py``: Jeffreys' noise prior and ``s² = N``) and
#: ``"unit"`` (the earlier default, ``σ² ~ InvGamma(1, 1)`` and ``s = 1``, whose cost on a nearly deterministic
#: child does not shrink with ``N``).
LINEAR_PRIORS = {
    "scale_free": dict(noise_prior="jeffreys", weight_scale="sqrt_n"),
    "unit": dict(noise_prior=(1.0, 1.0), weight_scale=1.0),
}

_COLLAPSED_DEFAULTS = dict(num_particles=40, swap_every=1, swap_until=1.0, swap_moves="mixed", edge_offset=True,
                           soft_warmup=0.0)
_SITES_DEFAULTS = dict(num_steps=2000, num_particles=20, swap_every=5, swap_until=0.9, swap_moves="adjacent",
                       edge_offset=False, soft_warmup=0.3)
#: Defaults of the :class:`FitConfig` fields left at ``None``, per likelihood. The collapsed likelihoods have cheap,
#: exact per-particle ELBOs: more particles, order moves every step for the whole run, half of them long jumps, and
#: the guide's edge offsets; the others have networks that must learn to use their inputs before the edges harden
#: (a soft warm-up) and noisy minibatch ELBOs (adjacent moves every 5 steps over the first 90 %).
LIKELIHOOD_DEFAULTS = {
    "linear": dict(num_steps=1000, **_COLLAPSED_DEFAULTS),
    "bge": dict(num_steps=2000, **_COLLAPSED_DEFAULTS),
    "linear-sites": dict(_SITES_DEFAULTS),
    "mlp": dict(_SITES_DEFAULTS),
}


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _fraction(name, v):
    if not (_is_real(v) and 0 <= v <= 1):
        raise ValueError(f"{name} must be a fraction in [0, 1]; got {v!r}")


def _positive(name, v, none_ok=False):
    if v is None and none_ok:
        return
    if not (_is_real(v) and v > 0):
        raise ValueError(f"{name} must be a positive number{' or None' if none_ok else ''}; got {v!r}")


def _widths(name, v):
    if not (isinstance(v, (tuple, list)) and all(_is_int(h) and h > 0 for h in v)):
        raise ValueError(f"{name} must be a tuple of positive integer widths; got {v!r}")


@dataclasses.dataclass(frozen=True)
class StructureConfig:
    r"""Settings of the structure model shared by :func:`~pyro_dag.structure.fit` and
    :func:`~pyro_dag.structure.exact_posterior`: the likelihood, the edge prior and the preprocessing.

    The edge prior (:func:`~pyro_dag.structure.priors.edge_prior_parameters`) is the Beta-Bernoulli prior of SVI-DAG
    (Zinage 2026, arXiv:2608.04930, §3.2.1): beliefs where the caller gives them, elsewhere the sparsity prior with
    edge probability ``p0 = expected_parents / (p - 1)``.

    :ivar str likelihood: ``"linear"`` (:class:`~pyro_dag.structure.LinearGaussianSEM`, parameters integrated out),
        ``"bge"`` (:class:`~pyro_dag.structure.BGeSEM`), ``"linear-sites"`` (linear-Gaussian with weight and noise
        sample sites), ``"mlp"`` (:class:`~pyro_dag.structure.MLPSEM`) or ``"gp"`` (the GP network score of
        :mod:`~pyro_dag.structure.gp_scores`; computed by the exact or hybrid posterior, also through ``fit``).
    :ivar float expected_parents: expected number of parents per node of the sparsity prior (``None``: no sparsity
        prior, a flat Beta).
    :ivar float prior_concentration: concentration ``nu`` of the sparsity prior.
    :ivar float belief_strength: ``kappa`` of :func:`~pyro_dag.structure.edge_belief_prior`.
    :ivar bool standardize: centre and scale every column before fitting (the SEMs assume centred data).
    :ivar float likelihood_scale: power of the likelihood, ``p(D | A)^s`` (1: the posterior; ``s < 1``: a tempered
        posterior).
    :ivar noise_prior: the ``"linear"`` score's prior on each node's noise variance ``σ_j²``: ``"jeffreys"``
        (default; ``p(σ²) ∝ 1 / σ²``, scale-free, so a child with a small residual variance costs nothing extra) or a
        pair ``(a0, b0)``, ``σ² ~ InvGamma(a0, b0)`` on the standardised scale (the earlier default was
        ``(1.0, 1.0)``, which costs about ``b0 / σ²`` nats per child whatever ``N``; see :data:`LINEAR_PRIORS`).
    :ivar weight_scale: the ``"linear"`` score's weight-prior scale ``s`` of ``W_.j | σ_j² ~ N(0, σ_j² s² I)``:
        ``"sqrt_n"`` (default; ``s² = N``, so the prior's pull on the weights of a nearly deterministic child,
        about ``|w|² / (2 s² σ²)`` nats, vanishes with ``N``) or a positive number (the earlier default was 1).
    """

    likelihood: str = "linear"
    expected_parents: Optional[float] = 1.5
    prior_concentration: float = 20.0
    belief_strength: float = 500.0
    standardize: bool = True
    likelihood_scale: float = 1.0
    noise_prior: Union[str, Tuple[float, float]] = "jeffreys"
    weight_scale: Union[str, float] = "sqrt_n"

    def __post_init__(self):
        self.validate()

    @property
    def collapsed(self):
        """Whether the likelihood integrates its parameters out (``"linear"``, ``"bge"``)."""
        return self.likelihood in COLLAPSED_LIKELIHOODS

    def validate(self):
        """Check every field; raise :class:`ValueError` naming the first bad one. Returns ``self``."""
        if self.likelihood not in LIKELIHOODS:
            raise ValueError(f"likelihood must be one of {LIKELIHOODS}; got {self.likelihood!r}")
        if self.expected_parents is not None and not (_is_real(self.expected_parents) and self.expected_parents > 0):
            raise ValueError(f"expected_parents must be a positive number or None; got {self.expected_parents!r}")
        for name in ("prior_concentration", "belief_strength"):
            v = getattr(self, name)
            if not (_is_real(v) and v >= 0):
                raise ValueError(f"{name} must be a non-negative number; got {v!r}")
        if not (_is_real(self.likelihood_scale) and self.likelihood_scale > 0):
            raise ValueError(f"likelihood_scale must be a positive number; got {self.likelihood_scale!r}")
        if not (self.noise_prior == "jeffreys" or (isinstance(self.noise_prior, (tuple, list))
                                                   and len(self.noise_prior) == 2
                                                   and all(_is_real(v) and v > 0 for v in self.noise_prior))):
            raise ValueError(f"noise_prior must be 'jeffreys' or a pair (a0, b0) of positive numbers (InvGamma); "
                             f"got {self.noise_prior!r}")
        if not (self.weight_scale == "sqrt_n" or (_is_real(self.weight_scale) and self.weight_scale > 0)):
            raise ValueError(f"weight_scale must be 'sqrt_n' or a positive number; got {self.weight_scale!r}")
        return self

    def linear_prior(self, num_rows):
        """``(a0, b0, s)`` of the ``"linear"`` score for ``num_rows`` rows: the noise prior ``InvGamma(a0, b0)``
        (``a0 = b0 = 0``: Jeffreys' prior) and the weight scale ``s``
        (:class:`~pyro_dag.structure.LinearGaussianSEM`'s ``noise_concentration``, ``noise_rate``, ``weight_scale``)."""
        a0, b0 = (0.0, 0.0) if self.noise_prior == "jeffreys" else (float(v) for v in self.noise_prior)
        s = math.sqrt(num_rows) if self.weight_scale == "sqrt_n" else float(self.weight_scale)
        return a0, b0, s

    def edge_prior(self, num_nodes, edge_beliefs=None, dtype=None, device=None):
        """``(alpha, beta)``, each ``[p, p]``: the Beta parameters of the edge prior for ``num_nodes`` variables."""
        return edge_prior_parameters(num_nodes, edge_beliefs, self.expected_parents, self.prior_concentration,
                                     self.belief_strength, dtype, device)

    def structure_config(self):
        """The :class:`StructureConfig` part of this configuration (itself for a plain :class:`StructureConfig`)."""
        names = [f.name for f in dataclasses.fields(StructureConfig)]
        return StructureConfig(**{n: getattr(self, n) for n in names})

    def replace(self, **changes):
        """A validated copy with ``changes`` applied; an unknown field raises :class:`TypeError` naming it."""
        fields = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - fields)
        if unknown:
            import difflib

            close = difflib.get_close_matches(unknown[0], fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"{type(self).__name__} has no setting {unknown[0]!r}{hint}; settings: {sorted(fields)}")
        return dataclasses.replace(self, **changes)


@dataclasses.dataclass(frozen=True)
class FitConfig(StructureConfig):
    r"""Settings of :func:`~pyro_dag.structure.fit`: the model's (:class:`StructureConfig`) and the fit's.

    SVI-DAG (Zinage 2026, arXiv:2608.04930): SVGD particles over node potentials (§3.6), a conditional flow over the
    edge logits (§3.5) and, here, Metropolis-Hastings order moves on the particles. ``None`` fields get the
    per-likelihood defaults of :data:`LIKELIHOOD_DEFAULTS` and the size-dependent defaults of :meth:`resolve`.

    :ivar int num_particles: SVGD particles ``K`` (``None``: 40 for the collapsed likelihoods, 20 otherwise).
    :ivar int num_steps: optimisation steps (``None``: 1000 for ``"linear"``, 2000 otherwise).
    :ivar int seed: seeds Pyro / torch.
    :ivar float lr: Adam learning rate of the guide parameters.
    :ivar float affine_lr: learning rate of the flow's final per-edge affine map.
    :ivar float particle_lr: learning rate of the particles.
    :ivar int batch_size: rows per step for ``"mlp"`` / ``"linear-sites"`` (``None`` or ``>= N``: all rows).
    :ivar order_temperature: Sinkhorn ``tau``, a float or ``(start, end)`` annealed linearly over the run.
    :ivar int sinkhorn_iters: Sinkhorn sweeps ``K_S``.
    :ivar float edge_temperature: Concrete temperature of the edges.
    :ivar str edge_relaxation: ``"mean"`` or ``"concrete"`` (:class:`~pyro_dag.structure.RelaxedOrderedDAG`).
    :ivar bool edge_offset: the guide's order-conditioned edge offsets (``None``: on for the collapsed likelihoods).
    :ivar float offset_gradient_cap: Fisher scaling cap of the offsets' gradients (``>= 1``; 1: plain gradients).
    :ivar tuple flow_hidden: flow conditioner widths.
    :ivar int flow_blocks: coupling blocks.
    :ivar tuple mlp_hidden: node MLP widths (``"mlp"``).
    :ivar float param_kl_weight: weight of ``KL(q(theta | A) || p(theta))`` (``"mlp"``).
    :ivar float repulsion_cap: SVGD repulsion cap (``None``: off).
    :ivar str weighting: ``"order"``, ``"elbo"`` or ``"uniform"`` (``None``: ``"order"`` with the exact order score,
        else ``"elbo"`` for the collapsed likelihoods, else ``"uniform"``).
    :ivar int swap_every: a Metropolis-Hastings order move of every particle each ``swap_every`` steps (0: none;
        ``None``: 1 for the collapsed likelihoods, 5 otherwise).
    :ivar float swap_until: the fraction of the run with order moves (``None``: 1 for the collapsed likelihoods, 0.9
        otherwise).
    :ivar str swap_moves: ``"adjacent"`` (swap two neighbours in the order) or ``"mixed"`` (half of the proposals
        swap two nodes at random positions; ``None``: ``"mixed"`` for the collapsed likelihoods).
    :ivar float warmup: fraction of the run over which the likelihood is tempered from ``1 / N`` up to 1.
    :ivar float soft_warmup: fraction of the run over which the mechanism sees a blend of the hard and the relaxed
        DAG (``None``: 0.3 for ``"mlp"`` / ``"linear-sites"``, 0 otherwise).
    :ivar str order_score: ``"exact"`` (collapsed likelihoods only) or ``"elbo"`` (``None``: ``"exact"`` for the
        collapsed likelihoods up to 14 variables).
    :ivar int max_parents: parent-set cap of the exact order score (``None``: none up to 14 variables, 4 above
        unless ``candidate_parents`` is given).
    :ivar int candidate_parents: candidate parents per node of the exact order score (``None``: all).
    :ivar float order_history: fraction of the run, at its end, whose visited orders the posterior keeps
        (``None``: 0.5 with ``weighting="order"``, else 0).
    """

    num_particles: Optional[int] = None
    num_steps: Optional[int] = None
    seed: int = 0
    lr: float = 1e-2
    affine_lr: float = 0.03
    particle_lr: float = 0.05
    batch_size: Optional[int] = 128
    order_temperature: Union[float, Tuple[float, float]] = (1.0, 0.1)
    sinkhorn_iters: int = 30
    edge_temperature: float = 0.3
    edge_relaxation: str = "mean"
    edge_offset: Optional[bool] = None
    offset_gradient_cap: float = 1000.0
    flow_hidden: Tuple[int, ...] = (64, 64)
    flow_blocks: int = 5
    mlp_hidden: Tuple[int, ...] = (32, 32)
    param_kl_weight: float = 0.01
    repulsion_cap: Optional[float] = 1.0
    weighting: Optional[str] = None
    swap_every: Optional[int] = None
    warmup: float = 0.3
    soft_warmup: Optional[float] = None
    swap_until: Optional[float] = None
    swap_moves: Optional[str] = None
    order_score: Optional[str] = None
    max_parents: Optional[int] = None
    candidate_parents: Optional[int] = None
    order_history: Optional[float] = None

    @classmethod
    def for_likelihood(cls, likelihood="linear", **settings):
        """A config with ``settings`` and every per-likelihood default (:data:`LIKELIHOOD_DEFAULTS`) filled in where a
        setting is absent or ``None``."""
        config = cls(likelihood=likelihood).replace(**settings)
        return config.replace(**{k: v for k, v in LIKELIHOOD_DEFAULTS[likelihood].items()
                                 if getattr(config, k) is None})

    @property
    def temperatures(self):
        """``(tau_start, tau_end)`` of the Sinkhorn annealing."""
        if _is_real(self.order_temperature):
            return float(self.order_temperature), float(self.order_temperature)
        return tuple(float(t) for t in self.order_temperature)

    def validate(self):
        """Check every field and the combinations that are set; raise :class:`ValueError` naming the bad field."""
        super().validate()
        if self.weighting not in (None, "uniform", "elbo", "order"):
            raise ValueError(f"weighting must be 'uniform', 'elbo', 'order' or None; got {self.weighting!r}")
        if self.order_score not in (None, "exact", "elbo"):
            raise ValueError(f"order_score must be 'exact', 'elbo' or None; got {self.order_score!r}")
        if self.swap_moves not in (None, "adjacent", "mixed"):
            raise ValueError(f"swap_moves must be 'adjacent' or 'mixed' (or None for the default); "
                             f"got {self.swap_moves!r}")
        if self.edge_relaxation not in ("concrete", "mean"):
            raise ValueError(f"edge_relaxation must be 'concrete' or 'mean'; got {self.edge_relaxation!r}")
        for name in ("num_particles", "num_steps"):
            v = getattr(self, name)
            if v is not None and not (_is_int(v) and v >= 1):
                raise ValueError(f"{name} must be a positive integer; got {v!r}")
        if not _is_int(self.seed) or self.seed < 0:
            raise ValueError(f"seed must be a non-negative integer; got {self.seed!r}")
        for name in ("lr", "affine_lr", "particle_lr", "edge_temperature", "param_kl_weight"):
            _positive(name, getattr(self, name))
        _positive("repulsion_cap", self.repulsion_cap, none_ok=True)
        if self.batch_size is not None and not (_is_int(self.batch_size) and self.batch_size >= 1):
            raise ValueError(f"batch_size must be a positive integer or None (all rows); got {self.batch_size!r}")
        try:
            tau0, tau1 = self.temperatures
        except (TypeError, ValueError):
            raise ValueError(f"order_temperature must be a positive number or a (start, end) pair; "
                             f"got {self.order_temperature!r}") from None
        if not (tau0 > 0 and tau1 > 0):
            raise ValueError(f"order_temperature must be positive; got {self.order_temperature!r}")
        if not (_is_int(self.sinkhorn_iters) and self.sinkhorn_iters >= 1):
            raise ValueError(f"sinkhorn_iters must be a positive integer; got {self.sinkhorn_iters!r}")
        if not (_is_real(self.offset_gradient_cap) and self.offset_gradient_cap >= 1):
            raise ValueError(f"offset_gradient_cap must be a number >= 1 (1: plain gradient); "
                             f"got {self.offset_gradient_cap!r}")
        _widths("flow_hidden", self.flow_hidden)
        _widths("mlp_hidden", self.mlp_hidden)
        if not self.mlp_hidden:
            raise ValueError("mlp_hidden must hold at least one width; got ()")
        if not (_is_int(self.flow_blocks) and self.flow_blocks >= 0):
            raise ValueError(f"flow_blocks must be a non-negative integer; got {self.flow_blocks!r}")
        if self.swap_every is not None and not (_is_int(self.swap_every) and self.swap_every >= 0):
            raise ValueError(f"swap_every must be a non-negative integer (0: no order moves); got {self.swap_every!r}")
        _fraction("warmup", self.warmup)
        for name in ("swap_until", "soft_warmup", "order_history"):
            if getattr(self, name) is not None:
                _fraction(name, getattr(self, name))
        if self.order_score == "exact" and not self.collapsed:
            raise ValueError(f"order_score='exact' needs a collapsed likelihood ('linear' or 'bge'); "
                             f"got {self.likelihood!r}")
        if self.candidate_parents is not None and not (_is_int(self.candidate_parents) and self.candidate_parents > 0):
            raise ValueError(f"candidate_parents must be a positive integer or None; got {self.candidate_parents!r}")
        if self.max_parents is not None and not (_is_int(self.max_parents) and self.max_parents >= 0):
            raise ValueError(f"max_parents must be a non-negative integer or None; got {self.max_parents!r}")
        if self.weighting == "order" and self.order_score is not None and self.order_score != "exact":
            raise ValueError("weighting='order' needs order_score='exact'")
        if (self.order_history is not None and self.order_history > 0 and self.weighting is not None
                and self.weighting != "order"):
            raise ValueError("order_history keeps visited orders for weighting='order' (exact order scores); "
                             f"got weighting={self.weighting!r}: set order_history=0 or weighting='order'")
        return self

    def resolve(self, num_nodes, num_rows=None):
        """The fully specified config for data with ``num_nodes`` columns and ``num_rows`` rows: every ``None`` field
        replaced by its per-likelihood or size-dependent default, ``order_temperature`` as a ``(start, end)`` pair,
        ``batch_size`` ``None`` when it covers all rows; validated."""
        c = type(self).for_likelihood(**dataclasses.asdict(self))
        p = num_nodes
        order_score = c.order_score
        if order_score is None:
            order_score = "exact" if (c.collapsed and p <= EXACT_ORDER_SCORE_MAX_NODES) else "elbo"
        max_parents = c.max_parents
        if max_parents is None and not (p <= EXACT_ORDER_SCORE_MAX_NODES or c.candidate_parents is not None):
            max_parents = 4
        weighting = c.weighting
        if weighting is None:
            weighting = "order" if order_score == "exact" else ("elbo" if c.collapsed else "uniform")
        order_history = c.order_history
        if order_history is None:
            order_history = 0.5 if weighting == "order" else 0.0
        batch_size = c.batch_size
        if batch_size is not None and num_rows is not None and batch_size >= num_rows:
            batch_size = None
        return c.replace(order_score=order_score, max_parents=max_parents, weighting=weighting,
                         order_history=order_history, batch_size=batch_size, order_temperature=c.temperatures)

    def settings(self):
        """The settings a fitted :class:`~pyro_dag.structure.StructurePosterior` records (``posterior.settings``)."""
        keys = ("likelihood", "num_particles", "num_steps", "seed", "expected_parents", "prior_concentration", "lr",
                "affine_lr", "particle_lr", "batch_size", "order_temperature", "sinkhorn_iters", "edge_temperature",
                "edge_relaxation", "edge_offset", "offset_gradient_cap", "swap_every", "swap_until", "swap_moves",
                "warmup", "soft_warmup", "param_kl_weight", "likelihood_scale", "weighting", "repulsion_cap",
                "standardize", "order_score", "max_parents", "candidate_parents", "order_history", "noise_prior",
                "weight_scale")
        return {k: getattr(self, k) for k in keys}
