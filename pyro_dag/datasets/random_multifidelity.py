"""Random multi-fidelity problems drawn from a seed: pairs and triples of simulators on ``[0, 1]^d`` linked by random
fidelity maps, with random nested designs (the issue "A zoo that cannot be tuned to": judge the emulator on draws
whose seeds nobody looked at while tuning).

A draw (:func:`random_multifidelity`):

* the lowest fidelity ``f_1`` is a random smooth function: a sum of ``J = 12`` random cosines
  ``Σ_j a_j cos(ω_jᵀ x + b_j)`` with per-dimension frequencies ``ω_jd ~ N(0, (2π / ℓ_d)²)`` (length-scales
  ``ℓ_d ~ U(0.35, 1.2)``; a draw from a GP with an RBF kernel in the random-features sense of Rahimi & Recht 2007),
  plus a random linear trend;
* each higher fidelity is ``f_{k+1}(x) = T_k(f_k(x), x) + δ_k(x)``, ``δ_k`` another smooth random function of
  amplitude ``U(0.05, 0.4)`` of ``f_k``'s, and the map ``T_k`` one of

  - ``"linear"``: ``ρ f + c`` (the autoregressive model of Kennedy & O'Hagan 2000),
  - ``"scaled"``: ``ρ(x) f`` with a smooth positive random ``ρ(x)`` (space-dependent scaling),
  - ``"quadratic"``: ``(a + b x_1) f²`` (the nonlinear maps of Perdikaris et al. 2017, e.g. their
    ``(x - √2) f_l²``),
  - ``"sine"``: ``sin(c f)`` with ``c ~ U(1, 2.5)`` (per unit sd of ``f``);

* designs: a Latin hypercube of ``n_1`` points for ``f_1`` and, for each higher fidelity, a random subset of the one
  below (nested, as emukit's examples), sizes ``n_1 ~ U{15 d + 20, 40 d + 60}`` (at most 200), the highest
  ``n_K ~ U{4 d + 6, 8 d + 12}``; 500 Latin-hypercube test points of the highest fidelity.

Every function is deterministic unless ``noise`` (then each run gets Gaussian noise of sd ``noise`` times that
fidelity's sd over the box, test targets included).
"""
import math

import numpy as np

from .multifidelity import MultiFidelityProblem, sample_design

__all__ = ["random_multifidelity", "FIDELITY_MAPS", "RandomFunction"]

#: The fidelity maps a draw chooses from.
FIDELITY_MAPS = ("linear", "scaled", "quadratic", "sine")


class RandomFunction:
    """A random smooth function on ``[0, 1]^d``: ``Σ_j a_j cos(ω_jᵀ x + b_j) + βᵀ x`` (module docstring).

    :param int dim: ``d``. :param numpy.random.Generator rng: the draws. :param int num_features: ``J``.
    """

    def __init__(self, dim, rng, num_features=12):
        ls = rng.uniform(0.35, 1.2, size=dim)
        self.omega = rng.standard_normal((num_features, dim)) * (2 * math.pi / ls)
        self.phase = rng.uniform(0, 2 * math.pi, size=num_features)
        self.amp = rng.standard_normal(num_features) * math.sqrt(2.0 / num_features)
        self.trend = rng.standard_normal(dim) * 0.5

    def __call__(self, x):
        x = np.asarray(x, dtype=np.float64)
        return np.cos(x @ self.omega.T + self.phase) @ self.amp + x @ self.trend


def _level_map(kind, rng, dim, scale):
    """``T(f, x)`` of ``kind``; ``scale`` the sd of ``f`` over the box (the maps act on ``f / scale``)."""
    if kind == "linear":
        rho, c = rng.uniform(0.5, 2.0) * rng.choice([-1, 1]), rng.normal(0, 1)
        return lambda f, x: rho * f + c * scale
    if kind == "scaled":
        g = RandomFunction(dim, rng)
        return lambda f, x: (1.0 + 0.5 * np.tanh(g(x))) * f
    if kind == "quadratic":
        a, b = rng.uniform(0.5, 1.5), rng.uniform(-1.0, 1.0)
        return lambda f, x: (a + b * x[:, 0]) * (f / scale) ** 2 * scale
    c = rng.uniform(1.0, 2.5)
    return lambda f, x: np.sin(c * f / scale) * scale


def random_multifidelity(seed, *, num_fidelities=None, dim=None, num_test=500, noise=0.0, maps=None):
    """Draw a random multi-fidelity chain problem (module docstring).

    :param int seed: the draw. :param int num_fidelities: 2 or 3 (default: drawn, 2 with probability 0.6).
    :param int dim: input dimension (default: drawn from 1-4). :param int num_test: highest-fidelity test points.
    :param float noise: run-to-run noise sd as a fraction of each fidelity's sd (0: deterministic simulators).
    :param maps: the ``K - 1`` fidelity maps (names from :data:`FIDELITY_MAPS`; default drawn).
    :returns: :class:`~pyro_dag.datasets.multifidelity.MultiFidelityProblem` named ``"random-<seed>"`` with
        fidelities ``"f1"`` (lowest) ... ``"fK"``, nested designs, bounds ``[0, 1]^d``; its ``description``
        attribute says what was drawn.
    """
    rng = np.random.default_rng([int(seed), 41])
    K = int(num_fidelities) if num_fidelities is not None else (2 if rng.random() < 0.6 else 3)
    d = int(dim) if dim is not None else int(rng.integers(1, 5))
    if K not in (2, 3) or d < 1:
        raise ValueError(f"random_multifidelity: num_fidelities must be 2 or 3 and dim >= 1, got {K} and {d}")
    if maps is None:
        maps = [str(rng.choice(FIDELITY_MAPS)) for _ in range(K - 1)]
    if len(maps) != K - 1 or any(m not in FIDELITY_MAPS for m in maps):
        raise ValueError(f"random_multifidelity: give {K - 1} maps from {FIDELITY_MAPS}, got {maps}")
    probe = sample_design(2000, np.tile([0.0, 1.0], (d, 1)), np.random.default_rng([int(seed), 7]))
    levels = [RandomFunction(d, rng)]
    for kind in maps:
        below = levels[-1]
        scale = float(below(probe).std()) or 1.0
        T, delta = _level_map(kind, rng, d, scale), RandomFunction(d, rng)
        dscale = rng.uniform(0.05, 0.4) * scale / (float(delta(probe).std()) or 1.0)
        levels.append(lambda x, below=below, T=T, delta=delta, dscale=dscale: T(below(x), x) + dscale * delta(x))
    n1 = min(200, int(rng.integers(15 * d + 20, 40 * d + 61)))
    nK = int(rng.integers(4 * d + 6, 8 * d + 13))
    sizes = [n1] + ([int(rng.integers(nK, n1 + 1))] if K == 3 else []) + [nK]
    box = np.tile([0.0, 1.0], (d, 1))
    designs = [sample_design(n1, box, rng)]
    for n in sizes[1:]:
        designs.append(designs[-1][np.sort(rng.choice(designs[-1].shape[0], n, replace=False))])
    names = [f"f{k + 1}" for k in range(K)]
    sds = [float(fn(probe).std()) for fn in levels]
    noisy = lambda k, X: (levels[k](X) + noise * sds[k] * rng.standard_normal(X.shape[0]))[:, None]  # noqa: E731
    train = {f: (X, noisy(k, X)) for k, (f, X) in enumerate(zip(names, designs))}
    X_test = sample_design(int(num_test), box, rng)
    truth = {f: (lambda X, k=k: levels[k](np.asarray(X, dtype=np.float64))[:, None]) for k, f in enumerate(names)}
    problem = MultiFidelityProblem(f"random-{seed}", train, {f: ([names[k - 1]] if k else []) for k, f in
                                                             enumerate(names)},
                                   names[-1], (X_test, noisy(K - 1, X_test)), box, truth)
    problem.description = (f"random draw {seed}: {K} fidelities, d = {d}, maps {maps}, nested runs "
                           f"{' / '.join(map(str, sizes))}" + (f", noise sd {noise:.0%}" if noise else
                                                               ", deterministic"))
    problem.maps = list(maps)
    return problem
