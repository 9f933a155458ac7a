"""Random regression problems from a seed: smooth functions and non-stationary ones, for judging regression
defaults on problems nobody tuned them to.

``random_regression(seed, kind="smooth")`` draws a function on ``[0, 1]^d`` and a noisy training design from it.
The draw depends on the seed only, so a benchmark can tune on some seeds and report on others it never looked at.

**Smooth** (``d`` uniform in 1..6): a draw from a zero-mean GP with an ARD squared-exponential kernel, realised with
``NUM_FEATURES`` random Fourier features (Rahimi & Recht 2007, "Random features for large-scale kernel machines"),
plus a random linear trend. Each input's length-scale is log-uniform in ``[0.25, 1.5]`` (on the unit cube), and one
input in four (never all) is irrelevant (length-scale infinite), as in the simulators a user fits.

**Non-stationary** (``d`` uniform in 1..3), one of:

* ``"crease"``: ``|wᵀx - c|`` (a ridge in a random direction) plus a smooth GP draw of small amplitude;
* ``"step"``: a jump ``a·1[wᵀx > c]`` plus a smooth GP draw;
* ``"warped"``: a GP draw composed with a per-input warping ``x ↦ x^{p}`` (``p`` log-uniform in ``[1/4, 4]``, away
  from 1), so the length-scale in ``x`` changes across the box (Snoek et al. 2014, "Input warping for Bayesian
  optimization of non-stationary functions");
* ``"chirp"``: ``sin(2π·m·s²)`` with ``s = wᵀx`` rescaled to [0, 1] and ``m`` in [3, 6] (the frequency grows
  along ``s``), plus a smooth GP draw;
* ``"bump"``: a smooth GP draw plus a narrow Gaussian bump (width 0.03-0.06) at a random point.

Outputs are standardised with the training function values' mean and sd (so an RMSE of 1 is the "predict the
mean" level); observation noise is ``noise_ratio`` times that sd (drawn from ``{0, 0.05}`` per problem when not
given). Training inputs are a Latin hypercube (:func:`~pyro_dag.datasets.latin_hypercube`), test inputs uniform.
"""
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .test_functions import latin_hypercube

__all__ = ["RegressionProblem", "random_regression", "KINDS", "NONSTATIONARY_FAMILIES", "NUM_FEATURES"]

#: The kinds of problem.
KINDS = ("smooth", "nonstationary")
#: The families of non-stationary functions.
NONSTATIONARY_FAMILIES = ("crease", "step", "warped", "chirp", "bump")
#: Random Fourier features per GP draw.
NUM_FEATURES = 500


@dataclass
class RegressionProblem:
    """One random regression problem.

    :ivar torch.Tensor X: ``[n, d]`` training inputs in ``[0, 1]^d``. :ivar torch.Tensor y: ``[n]`` noisy outputs.
    :ivar torch.Tensor f: ``[n]`` the noise-free function at ``X``.
    :ivar torch.Tensor X_test: ``[m, d]``. :ivar torch.Tensor y_test: ``[m]`` new noisy observations.
    :ivar torch.Tensor f_test: ``[m]`` the noise-free function at ``X_test``.
    :ivar float noise_sd: the observation noise's sd (in the standardised units).
    :ivar str kind: ``"smooth"`` or ``"nonstationary"``. :ivar str family: ``"gp"`` or the non-stationary family.
    :ivar int seed: the seed. :ivar str description: one line naming the draw. :ivar dict info: its parameters.
    """

    X: torch.Tensor
    y: torch.Tensor
    f: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    f_test: torch.Tensor
    noise_sd: float
    kind: str
    family: str
    seed: int
    description: str
    info: dict = field(default_factory=dict)

    @property
    def d(self):
        """The number of inputs."""
        return int(self.X.shape[1])


def _gp_draw(rng, d, lengthscales, num_features=NUM_FEATURES):
    """A function ``x [m, d] -> [m]`` drawn from GP(0, RBF(lengthscales)) by random Fourier features; an infinite
    length-scale makes its input irrelevant."""
    inv = np.where(np.isfinite(lengthscales), 1.0 / np.asarray(lengthscales, dtype=float), 0.0)
    W = rng.standard_normal((num_features, d)) * inv
    b = rng.uniform(0, 2 * math.pi, num_features)
    a = rng.standard_normal(num_features) * math.sqrt(2.0 / num_features)
    return lambda x: np.cos(x @ W.T + b) @ a


def _direction(rng, d):
    w = rng.standard_normal(d)
    return w / np.linalg.norm(w)


def _projection(x, w):
    """``wᵀx`` rescaled so that it covers [0, 1] over the unit cube."""
    lo, hi = np.minimum(w, 0).sum(), np.maximum(w, 0).sum()
    return (x @ w - lo) / (hi - lo)


def _smooth(rng, d):
    ls = np.exp(rng.uniform(math.log(0.25), math.log(1.5), d))
    if d > 1:
        drop = rng.random(d) < 0.25
        if drop.all():
            drop[rng.integers(d)] = False
        ls[drop] = np.inf
    g = _gp_draw(rng, d, ls)
    trend = rng.standard_normal(d) * 0.5 * np.isfinite(ls)
    info = {"lengthscales": [float(v) for v in ls], "trend": [float(v) for v in trend]}
    return (lambda x: g(x) + x @ trend), info, f"GP draw, length-scales {np.round(ls, 2).tolist()}"


def _nonstationary(rng, d, family):
    smooth = _gp_draw(rng, d, np.full(d, 0.5))
    w = _direction(rng, d)
    c = float(rng.uniform(0.35, 0.65))
    info = {"direction": [float(v) for v in w], "threshold": c}
    if family == "crease":
        amp = 0.15
        fn = lambda x: np.abs(_projection(x, w) - c) + amp * smooth(x)  # noqa: E731
        text = f"crease |w·x - {c:.2f}|, w = {np.round(w, 2).tolist()}"
    elif family == "step":
        jump = float(rng.uniform(1.0, 2.0))
        info["jump"] = jump
        fn = lambda x: jump * (_projection(x, w) > c) + 0.5 * smooth(x)  # noqa: E731
        text = f"step {jump:.2f}·1[w·x > {c:.2f}], w = {np.round(w, 2).tolist()}"
    elif family == "warped":
        logp = rng.uniform(math.log(2.0), math.log(4.0), d) * rng.choice([-1.0, 1.0], d)
        p = np.exp(logp)
        info["powers"] = [float(v) for v in p]
        g = _gp_draw(rng, d, np.full(d, 0.3))
        fn = lambda x: g(np.clip(x, 0, 1) ** p)  # noqa: E731
        text = f"GP draw of warped inputs x^p, p = {np.round(p, 2).tolist()}"
    elif family == "chirp":
        m = float(rng.uniform(3.0, 6.0))
        info["cycles"] = m
        fn = lambda x: np.sin(2 * math.pi * m * _projection(x, w) ** 2) + 0.2 * smooth(x)  # noqa: E731
        text = f"chirp sin(2π·{m:.1f}·s²), s along w = {np.round(w, 2).tolist()}"
    elif family == "bump":
        centre = rng.uniform(0.2, 0.8, d)
        width = float(rng.uniform(0.03, 0.06))
        info.update(centre=[float(v) for v in centre], width=width)
        fn = lambda x: 0.5 * smooth(x) + 2.0 * np.exp(-((x - centre) ** 2).sum(-1) / (2 * width ** 2))  # noqa: E731
        text = f"GP draw + bump of width {width:.3f} at {np.round(centre, 2).tolist()}"
    else:
        raise ValueError(f"random_regression: unknown non-stationary family {family!r}; choose from "
                         f"{NONSTATIONARY_FAMILIES}")
    return fn, info, text


def random_regression(seed, *, kind="smooth", n=None, n_test=1000, d=None, noise_ratio=None, family=None,
                      dtype=torch.float64):
    """Draw a random regression problem (module docstring).

    :param int seed: the draw's seed (non-negative); the same seed gives the same problem.
    :param str kind: ``"smooth"`` or ``"nonstationary"``.
    :param int n: training cases (default ``40·d`` for smooth problems, at least 60 and at most 200; 100 for
        non-stationary ones in 1-D, 150 in more).
    :param int n_test: test cases (uniform on the box).
    :param int d: the number of inputs (default drawn: 1-6 smooth, 1-3 non-stationary).
    :param float noise_ratio: the noise sd as a fraction of the function's sd (default drawn from {0, 0.05}).
    :param str family: a non-stationary family (default drawn from :data:`NONSTATIONARY_FAMILIES`).
    :returns: a :class:`RegressionProblem` (float64 tensors unless ``dtype`` says otherwise).
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"random_regression: seed must be a non-negative int, got {seed!r}")
    if kind not in KINDS:
        raise ValueError(f"random_regression: kind must be one of {KINDS}, got {kind!r}")
    rng = np.random.default_rng([int(seed), KINDS.index(kind)])
    d_max = 6 if kind == "smooth" else 3
    d_drawn = int(rng.integers(1, d_max + 1))
    d = d_drawn if d is None else int(d)
    if d < 1:
        raise ValueError(f"random_regression: d must be a positive int, got {d!r}")
    noise_drawn = float(rng.choice([0.0, 0.05]))
    noise_ratio = noise_drawn if noise_ratio is None else float(noise_ratio)
    if not noise_ratio >= 0:
        raise ValueError(f"random_regression: noise_ratio must be >= 0, got {noise_ratio!r}")
    if kind == "smooth":
        fn, info, text = _smooth(rng, d)
        family = "gp"
        n_default = min(max(40 * d, 60), 200)
    else:
        drawn = NONSTATIONARY_FAMILIES[int(rng.integers(len(NONSTATIONARY_FAMILIES)))]
        family = drawn if family is None else family
        fn, info, text = _nonstationary(rng, d, family)
        n_default = 100 if d == 1 else 150
    n = n_default if n is None else int(n)
    if n < 2 or n_test < 1:
        raise ValueError(f"random_regression: need n >= 2 and n_test >= 1, got n={n}, n_test={n_test}")
    gen = torch.Generator().manual_seed(int(rng.integers(2 ** 31)))
    X = latin_hypercube(n, [[0.0, 1.0]] * d, generator=gen).numpy()
    X_test = rng.random((int(n_test), d))
    f, f_test = fn(X), fn(X_test)
    loc, scale = float(f.mean()), float(f.std())
    scale = scale if scale > 0 else 1.0
    f, f_test = (f - loc) / scale, (f_test - loc) / scale
    y = f + noise_ratio * rng.standard_normal(n)
    y_test = f_test + noise_ratio * rng.standard_normal(int(n_test))
    t = lambda a: torch.as_tensor(np.asarray(a), dtype=dtype)  # noqa: E731
    info = dict(info, d=d, n=n, noise_ratio=noise_ratio, output_loc=loc, output_scale=scale)
    text = f"{kind} {d}-D, {text}, n = {n}, noise sd {noise_ratio:g}"
    return RegressionProblem(X=t(X), y=t(y), f=t(f), X_test=t(X_test), y_test=t(y_test), f_test=t(f_test),
                             noise_sd=noise_ratio, kind=kind, family=family, seed=int(seed), description=text,
                             info=info)
