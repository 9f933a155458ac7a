"""The optimisation schedule of LaMP-DGP: the growing mini-batch size and the paper's optimiser settings.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation": the capped
batch-size schedule is Eq. (13) (Sec. 4.3, motivated by Theorem 4.1 and Corollary 4.2); the learning rates and Adam
moment decays are Tables 1 and 2; the epoch counts, hyperparameter cadence, splits and validation cadence are
Sec. 5.1 and App. C.1.
"""
import dataclasses
import math
import numbers
from dataclasses import dataclass

__all__ = ["LaMPSettings", "batch_size_schedule"]


def _check_int(value, name, minimum):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def batch_size_schedule(t, n, *, c=15.0, m_min=150, m_max=500):
    r"""The mini-batch size of epoch ``t``: ``m_t = min{n, m_max, max(m_min, ⌈c √t⌉)}``.

    Chang & Sung (2026), Eq. (13): the batch grows like ``√t``, which keeps the bias of the mini-batch gradient
    (GP log-likelihoods do not decompose over cases) at ``O(T^{-1/2})`` (Corollary 4.2 with ``γ = 1/2``), capped
    at ``m_max`` and at the number of training cases ``n``. With the paper's ``c = 15, m_min = 150, m_max = 500``:
    ``m_t = 150`` for ``t ≤ 100``, ``m_400 = 300``, ``m_1000 = 475``; the cap 500 is reached at ``t = 1112``.
    When ``n < m_min`` every epoch is one full batch of the ``n`` cases.

    :param int t: the epoch, ``t >= 1``. :param int n: the number of training cases, ``n >= 1``.
    :param float c: the growth constant. :param int m_min: the floor. :param int m_max: the cap.
    :returns: ``m_t`` (an int).
    """
    t = _check_int(t, "t (the epoch)", 1)
    n = _check_int(n, "n (the number of training cases)", 1)
    m_min = _check_int(m_min, "m_min", 1)
    m_max = _check_int(m_max, "m_max", 1)
    if not (isinstance(c, numbers.Real) and math.isfinite(c) and c > 0):
        raise ValueError(f"c must be a finite positive number, got {c!r}")
    return min(n, m_max, max(m_min, math.ceil(c * math.sqrt(t))))


def _blocks(W, theta_hidden, theta_observed, nugget):
    return {"W": W, "theta_hidden": theta_hidden, "theta_observed": theta_observed, "nugget": nugget}


#: the parameter blocks, each with its own Adam (Chang & Sung 2026, Eq. (9)): the hidden nodes' per-case values,
#: the hidden nodes' length-scales (the paper's θ₁), the observed nodes' length-scales (θ₂), the observed nodes'
#: nuggets (g, when estimated).
BLOCKS = ("W", "theta_hidden", "theta_observed", "nugget")


@dataclass(frozen=True)
class LaMPSettings:
    r"""Settings of a LaMP-DGP fit (Chang & Sung 2026, Sec. 5.1, App. C.1, Tables 1 and 2).

    Use :meth:`full_batch` or :meth:`mini_batch` for the paper's two protocols and :meth:`replace` to change a
    field (e.g. fewer epochs): ``LaMPSettings.mini_batch().replace(num_epochs=200)``.

    :ivar bool minibatch: mini-batch updates of the per-case values (Algorithm 1) or full batch.
    :ivar int num_epochs: ``T`` (paper: 5000 full batch, 1000 mini-batch).
    :ivar dict lr: Adam step sizes ``α_ψ`` per block (Table 1): ``"W"``, ``"theta_hidden"`` (θ₁),
        ``"theta_observed"`` (θ₂), ``"nugget"`` (g).
    :ivar dict betas: ``(β₁, β₂)`` per block (Table 2).
    :ivar float eps: Adam's ``ε_ψ``, shared by the blocks (Table 2: 1e-4), outside the square root.
    :ivar int hyper_every: ``q_φ``: one Adam step of the hyperparameters (W held fixed) every ``q_φ`` epochs
        (paper: 25 full batch, 50 mini-batch).
    :ivar int hyper_batch: ``m_φ``: cases drawn for that step (paper: 500 in mini-batch mode; full batch uses all).
    :ivar int validate_every: ``q_val``: epochs between validations (paper: 10).
    :ivar float validation_fraction: share of the cases held out for validation (paper: 0.1 full batch, 0.2
        mini-batch); ``0`` disables validation (the last iterate is kept).
    :ivar int prediction_subset: ``m_pred``: training cases the validation predictor conditions on (paper: 500).
    :ivar float lr_decay: ``α_W`` is multiplied by this every ``lr_decay_every`` epochs (paper: 0.8 every 250 in
        mini-batch mode; 1.0 = none in full batch).
    :ivar int lr_decay_every: see ``lr_decay``.
    :ivar float batch_growth: ``c`` of :func:`batch_size_schedule` (paper: 15).
    :ivar int batch_min: ``m_min`` (paper: 150). :ivar int batch_max: ``m_max`` (paper: 500).
    :ivar bool condition_on_validation: after the best iterate is selected, the fitted GPs condition on all cases,
        the validation cases included (:meth:`LatentMAP.fit <pyro_dag.infer.lamp.LatentMAP.fit>`); ``False``: on the
        training cases only. The paper keeps the selected ``(Ŵ, φ̂)`` and does not say whether prediction uses the
        held-out cases; dropping them wastes 10-20% of the data. Measured at ``n = 500`` (LHS, 1000 test points,
        standardised RMSE): G ``d = 4`` 0.280 -> 0.247, Park 0.0105 -> 0.0093 (length-scales of the first layer
        held fixed).
    """

    minibatch: bool
    num_epochs: int
    lr: dict
    betas: dict
    eps: float = 1e-4
    hyper_every: int = 25
    hyper_batch: int = 500
    validate_every: int = 10
    validation_fraction: float = 0.1
    prediction_subset: int = 500
    lr_decay: float = 1.0
    lr_decay_every: int = 250
    batch_growth: float = 15.0
    batch_min: int = 150
    batch_max: int = 500
    condition_on_validation: bool = True

    def __post_init__(self):
        for name, minimum in [("num_epochs", 1), ("hyper_every", 1), ("hyper_batch", 1), ("validate_every", 1),
                              ("prediction_subset", 1), ("lr_decay_every", 1), ("batch_min", 1), ("batch_max", 1)]:
            _check_int(getattr(self, name), name, minimum)
        for name in ("lr", "betas"):
            value = getattr(self, name)
            if not isinstance(value, dict) or set(value) != set(BLOCKS):
                raise ValueError(f"{name} must be a dict with the keys {BLOCKS}, got {value!r}")
        for block, a in self.lr.items():
            if not (isinstance(a, numbers.Real) and math.isfinite(a) and a >= 0):
                raise ValueError(f"lr[{block!r}] must be a finite number >= 0, got {a!r}")
        for block, b in self.betas.items():
            if len(b) != 2 or not all(isinstance(x, numbers.Real) and 0 <= x < 1 for x in b):
                raise ValueError(f"betas[{block!r}] must be a pair (β₁, β₂) in [0, 1), got {b!r}")
        if not (isinstance(self.eps, numbers.Real) and self.eps > 0):
            raise ValueError(f"eps must be a positive number, got {self.eps!r}")
        if not (isinstance(self.validation_fraction, numbers.Real) and 0 <= self.validation_fraction < 1):
            raise ValueError(f"validation_fraction must be in [0, 1), got {self.validation_fraction!r}")
        if not (isinstance(self.lr_decay, numbers.Real) and 0 < self.lr_decay <= 1):
            raise ValueError(f"lr_decay must be in (0, 1], got {self.lr_decay!r}")
        if not isinstance(self.condition_on_validation, bool):
            raise ValueError(f"condition_on_validation must be True or False, got {self.condition_on_validation!r}")
        if self.batch_min > self.batch_max:
            raise ValueError(f"batch_min ({self.batch_min}) must not exceed batch_max ({self.batch_max})")

    @classmethod
    def full_batch(cls):
        """The paper's full-batch protocol (used at ``n = 100``): 5000 epochs, ``q_φ = 25``, a 90/10 split,
        Tables 1-2's full-batch rates (α_W 0.1, α_θ 0.05, α_g 0.01; β_W (0.9, 0.99))."""
        return cls(minibatch=False, num_epochs=5000,
                   lr=_blocks(0.1, 0.05, 0.05, 0.01),
                   betas=_blocks((0.9, 0.99), (0.5, 0.999), (0.5, 0.999), (0.9, 0.999)),
                   hyper_every=25, validation_fraction=0.1, lr_decay=1.0)

    @classmethod
    def mini_batch(cls):
        """The paper's mini-batch protocol (Algorithm 1, used for ``n > 100``): 1000 epochs, the schedule of
        :func:`batch_size_schedule`, ``m_φ = 500``, ``q_φ = 50``, an 80/20 split, ``α_W × 0.8`` every 250 epochs,
        Tables 1-2's mini-batch rates (α_W 0.05, α_θ 0.1, α_g 0.05; β_W (0.9, 0.9))."""
        return cls(minibatch=True, num_epochs=1000,
                   lr=_blocks(0.05, 0.1, 0.1, 0.05),
                   betas=_blocks((0.9, 0.9), (0.5, 0.999), (0.5, 0.999), (0.9, 0.999)),
                   hyper_every=50, hyper_batch=500, validation_fraction=0.2, lr_decay=0.8, lr_decay_every=250)

    @classmethod
    def paper(cls, n):
        """The paper's protocol for ``n`` cases: :meth:`full_batch` for ``n <= 100``, else :meth:`mini_batch`."""
        return cls.full_batch() if n <= 100 else cls.mini_batch()

    def replace(self, **changes):
        """A copy with some fields changed; ``lr`` and ``betas`` may be partial dicts (merged into the defaults)."""
        names = {f.name for f in dataclasses.fields(self)}
        unknown = sorted(set(changes) - names)
        if unknown:
            raise ValueError(f"unknown LaMP setting(s) {unknown}; the settings are {sorted(names)}")
        for key in ("lr", "betas"):
            if key in changes and isinstance(changes[key], dict):
                unknown = sorted(set(changes[key]) - set(BLOCKS))
                if unknown:
                    raise ValueError(f"{key} has unknown block(s) {unknown}; the blocks are {BLOCKS}")
                changes[key] = {**getattr(self, key), **changes[key]}
        return dataclasses.replace(self, **changes)

    def batch_size(self, t, n):
        """The batch size of epoch ``t`` for ``n`` training cases: ``n`` in full batch, else
        :func:`batch_size_schedule`."""
        if not self.minibatch:
            return n
        return batch_size_schedule(t, n, c=self.batch_growth, m_min=self.batch_min, m_max=self.batch_max)

    def lr_W(self, t):
        """``α_W`` at epoch ``t`` (1-based): ``lr["W"] · lr_decay^⌊(t-1)/lr_decay_every⌋``."""
        return self.lr["W"] * self.lr_decay ** ((t - 1) // self.lr_decay_every)
