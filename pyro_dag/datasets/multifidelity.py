"""Standard multi-fidelity test functions and a graphical multi-fidelity problem (data only).

The test functions are implemented from their published formulas (the definitions collected in Surjanovic & Bingham,
"Virtual Library of Simulation Experiments", https://www.sfu.ca/~ssurjano/, and in the papers cited per function),
with the fidelity hierarchies that emukit ships (``emukit.test_functions.multi_fidelity`` and
``emukit.test_functions.forrester``; Paleyes et al. 2019, "Emulation of physical processes with Emukit"):

=================  ======  =============================  =====================================================
function           dim     fidelities (low → high)        reference
=================  ======  =============================  =====================================================
``forrester``      1       2                              Forrester, Sóbester & Keane 2007, Proc. R. Soc. A
``borehole``       8       2                              Xiong, Qian & Wu 2013, J. Mech. Des.
``branin``         2       3                              Perdikaris et al. 2017, Proc. R. Soc. A (NARGP)
``currin``         2       2                              Xiong, Qian & Wu 2013 (Currin et al. 1988)
``park``           4       2                              Xiong, Qian & Wu 2013 (Park 1991)
``hartmann3``      3       3                              Kandasamy et al. 2016 / emukit
=================  ======  =============================  =====================================================

Two deliberate differences from emukit's code (both follow the published formulas): emukit's Hartmann 3-D returns
``+Σ α_i exp(...)`` (the published function is its negative) and emukit's multi-fidelity Branin divides every level
by 100; emukit's Park code uses ``x2 + x3`` where the formula (and emukit's own docstring) has ``x2 + x3²``. The
tests check every function against emukit up to these differences.

:func:`graphical_problem` builds the two-low-fidelity graph ``X → L1, X → L2, L1 → H, L2 → H, X → H`` (the
shape of the heavy-ion simulator graph of Perlino et al. 2026, arXiv:2607.09645, Sec. 7, Fig. 6) from the Currin
and Forrester functions so that each low fidelity carries a different part of the high fidelity (see its
docstring).
"""
import math
from dataclasses import dataclass, field

import numpy as np

__all__ = ["MultiFidelityFunction", "FUNCTIONS", "get_function", "forrester", "borehole", "branin", "currin", "park",
           "hartmann3", "graphical_problem", "MultiFidelityProblem", "chain_problem", "sample_design"]


@dataclass
class MultiFidelityFunction:
    """A multi-fidelity test function.

    :ivar str name: the function's name. :ivar list levels: callables ``[n, d] -> [n, 1]``, lowest fidelity first.
    :ivar numpy.ndarray bounds: ``[d, 2]`` box of the inputs (lower, upper).
    """

    name: str
    levels: list
    bounds: np.ndarray

    @property
    def dim(self):
        """Input dimension ``d``."""
        return self.bounds.shape[0]

    @property
    def num_fidelities(self):
        return len(self.levels)

    def __call__(self, x, level=-1):
        """Values of fidelity ``level`` (default: the highest) at ``x`` ``[n, d]`` (in the box): ``[n, 1]``."""
        x = _check_x(x, self.dim, self.name)
        return self.levels[level](x)


def _check_x(x, d, name):
    x = np.asarray(x, dtype=np.float64)
    if x.ndim == 1 and d == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[1] != d:
        raise ValueError(f"{name}: x must have shape [n, {d}], got {x.shape}")
    return x


# ---------------------------------------------------------------------------------------------------- Forrester
def _forrester_high(x):
    x = x[:, :1]
    return (6 * x - 2) ** 2 * np.sin(12 * x - 4)


def _forrester_low(x):
    return 0.5 * _forrester_high(x) + 10 * (x[:, :1] - 0.5) + 5


# ---------------------------------------------------------------------------------------------------- Borehole
def _borehole(x, a, b):
    rw, r, tu, hu, tl, hl, L, kw = (x[:, i] for i in range(8))
    ln = np.log(r / rw)
    return (a * tu * (hu - hl) / (ln * (b + 2 * L * tu / (ln * rw ** 2 * kw) + tu / tl)))[:, None]


def _borehole_high(x):
    return _borehole(x, 2 * math.pi, 1.0)


def _borehole_low(x):
    return _borehole(x, 5.0, 1.5)


# ---------------------------------------------------------------------------------------------------- Branin
def _branin_high(x):
    x1, x2 = x[:, 0], x[:, 1]
    b, c, r, s, t = 5.1 / (4 * math.pi ** 2), 5 / math.pi, 6.0, 10.0, 1 / (8 * math.pi)
    return ((x2 - b * x1 ** 2 + c * x1 - r) ** 2 + s * (1 - t) * np.cos(x1) + s)[:, None]


def _branin_medium(x):
    x1, x2 = x[:, 0], x[:, 1]
    return (10 * np.sqrt(_branin_high(x - 2)[:, 0]) + 2 * (x1 - 0.5) - 3 * (3 * x2 - 1) - 1)[:, None]


def _branin_low(x):
    return (_branin_medium(1.2 * (x + 2))[:, 0] - 3 * x[:, 1] + 1)[:, None]


# ---------------------------------------------------------------------------------------------------- Currin
def _currin_high(x):
    x1, x2 = x[:, 0], x[:, 1]
    with np.errstate(divide="ignore"):
        factor = 1 - np.exp(-0.5 / x2)        # x2 = 0: exp(-inf) = 0
    return (factor * (2300 * x1 ** 3 + 1900 * x1 ** 2 + 2092 * x1 + 60)
            / (100 * x1 ** 3 + 500 * x1 ** 2 + 4 * x1 + 20))[:, None]


def _currin_low(x):
    x1, x2 = x[:, 0], x[:, 1]
    out = 0.0
    for dx in (0.05, -0.05):
        for x2s in (x2 + 0.05, np.maximum(0.0, x2 - 0.05)):
            out = out + 0.25 * _currin_high(np.stack([x1 + dx, x2s], axis=1))
    return out


# ---------------------------------------------------------------------------------------------------- Park
def _park_high(x):
    x1, x2, x3, x4 = (x[:, i] for i in range(4))
    return (x1 / 2 * (np.sqrt(1 + (x2 + x3 ** 2) * x4 / x1 ** 2) - 1) + (x1 + 3 * x4) * np.exp(1 + np.sin(x3)))[:, None]


def _park_low(x):
    x1, x2, x3 = x[:, 0], x[:, 1], x[:, 2]
    return ((1 + np.sin(x1) / 10) * _park_high(x)[:, 0] - 2 * x1 + x2 ** 2 + x3 ** 2 + 0.5)[:, None]


# ---------------------------------------------------------------------------------------------------- Hartmann 3-D
_H_A = np.array([[3, 10, 30], [0.1, 10, 35], [3, 10, 30], [0.1, 10, 35]], dtype=np.float64)
_H_P = 1e-4 * np.array([[3689, 1170, 2673], [4699, 4387, 7470], [1091, 8732, 5547], [381, 5743, 8828]],
                       dtype=np.float64)
_H_ALPHA = np.array([1.0, 1.2, 3.0, 3.2])
_H_DELTA = np.array([0.01, -0.01, -0.1, 0.1])


def _hartmann(x, alpha):
    inner = -((x[:, None, :] - _H_P[None]) ** 2 * _H_A[None]).sum(-1)      # [n, 4]
    return -(np.exp(inner) @ alpha)[:, None]


def _hartmann_level(m):
    """Fidelity ``m`` of 3 (1 lowest): ``α_m = α + (3 - m) δ``."""
    alpha = _H_ALPHA + (3 - m) * _H_DELTA
    return lambda x: _hartmann(x, alpha)


def _box(*pairs):
    return np.array(pairs, dtype=np.float64)


def forrester():
    """Forrester et al. (2007) two-level function on [0, 1]: ``f_H = (6x - 2)² sin(12x - 4)``,
    ``f_L = 0.5 f_H + 10 (x - 0.5) + 5``."""
    return MultiFidelityFunction("forrester", [_forrester_low, _forrester_high], _box((0.0, 1.0)))


def borehole():
    """Borehole function (8-D water flow; Xiong et al. 2013), two levels. Inputs in the order
    ``(r_w, r, T_u, H_u, T_l, H_l, L, K_w)``:
    ``f_H = 2π T_u (H_u - H_l) / (ln(r/r_w) [1 + 2 L T_u / (ln(r/r_w) r_w² K_w) + T_u / T_l])``; ``f_L`` has ``5``
    for ``2π`` and ``1.5`` for ``1``."""
    return MultiFidelityFunction("borehole", [_borehole_low, _borehole_high],
                                 _box((0.05, 0.15), (100, 50000), (63070, 115600), (990, 1110), (63.1, 116),
                                      (700, 820), (1120, 1680), (9855, 12045)))


def branin():
    """Three-level Branin (Perdikaris et al. 2017) on ``[-5, 10] × [0, 15]``: ``f_3`` the Branin function,
    ``f_2(x) = 10 √f_3(x - 2) + 2 (x_1 - 0.5) - 3 (3 x_2 - 1) - 1``, ``f_1(x) = f_2(1.2 (x + 2)) - 3 x_2 + 1``."""
    return MultiFidelityFunction("branin", [_branin_low, _branin_medium, _branin_high], _box((-5, 10), (0, 15)))


def currin():
    """Currin exponential function (2-D on [0, 1]²; Xiong et al. 2013), two levels; the low level averages the
    high level at the four points ``(x_1 ± 0.05, x_2 + 0.05)``, ``(x_1 ± 0.05, max(0, x_2 - 0.05))``."""
    return MultiFidelityFunction("currin", [_currin_low, _currin_high], _box((0, 1), (0, 1)))


def park():
    """Park (1991) function (4-D on (0, 1]⁴; Xiong et al. 2013), two levels:
    ``f_H = x_1/2 [√(1 + (x_2 + x_3²) x_4 / x_1²) - 1] + (x_1 + 3 x_4) exp(1 + sin x_3)``,
    ``f_L = (1 + sin(x_1)/10) f_H - 2 x_1 + x_2² + x_3² + 0.5``."""
    return MultiFidelityFunction("park", [_park_low, _park_high], _box((1e-3, 1), (0, 1), (0, 1), (0, 1)))


def hartmann3():
    """Hartmann 3-D with three fidelities (as emukit): ``f_m(x) = -Σ_i α_{m,i} exp(-Σ_j A_ij (x_j - P_ij)²)``,
    ``α_m = α + (3 - m) δ``, ``δ = (0.01, -0.01, -0.1, 0.1)``, on [0, 1]³."""
    return MultiFidelityFunction("hartmann3", [_hartmann_level(1), _hartmann_level(2), _hartmann_level(3)],
                                 _box((0, 1), (0, 1), (0, 1)))


#: The test functions by name.
FUNCTIONS = {"forrester": forrester, "borehole": borehole, "branin": branin, "currin": currin, "park": park,
             "hartmann3": hartmann3}


def get_function(name):
    """The :class:`MultiFidelityFunction` called ``name`` (one of :data:`FUNCTIONS`)."""
    if name not in FUNCTIONS:
        raise ValueError(f"unknown multi-fidelity function {name!r}; choose from {sorted(FUNCTIONS)}")
    return FUNCTIONS[name]()


def sample_design(n, bounds, rng):
    """``n`` points in the box ``bounds`` ``[d, 2]``: a Latin hypercube drawn with ``rng``
    (a ``numpy.random.Generator``)."""
    bounds = np.asarray(bounds, dtype=np.float64)
    d = bounds.shape[0]
    u = (np.stack([rng.permutation(n) for _ in range(d)], axis=1) + rng.random((n, d))) / n
    return bounds[:, 0] + u * (bounds[:, 1] - bounds[:, 0])


@dataclass
class MultiFidelityProblem:
    """Training designs and test sets of a multi-fidelity problem.

    :ivar str name: the problem. :ivar dict train: ``{fidelity: (X [n_f, d], y [n_f, 1])}``, lowest first.
    :ivar dict parents: ``{fidelity: [lower fidelities it refines]}`` (the input ``X`` is a parent of every fidelity).
    :ivar str target: the highest fidelity. :ivar tuple test: ``(X_test [n_t, d], y_test [n_t, 1])`` at ``target``.
    :ivar numpy.ndarray bounds: ``[d, 2]``. :ivar dict truth: ``{fidelity: callable}``.
    """

    name: str
    train: dict
    parents: dict
    target: str
    test: tuple
    bounds: np.ndarray
    truth: dict = field(default_factory=dict)


def chain_problem(name, sizes, num_test=75, seed=0, nested=True):
    """A fidelity chain ``f_1 → f_2 → ... → f_K`` (each refines the one below) of the test function ``name``.

    :param list sizes: training points per fidelity, lowest first (e.g. ``[50, 14]`` for the usual Forrester set).
    :param int num_test: high-fidelity test points (a separate Latin hypercube).
    :param bool nested: each fidelity's design is a random subset of the one below (as emukit's examples), else
        independent designs.
    :returns: :class:`MultiFidelityProblem` with fidelities named ``"f1"`` (lowest) ... ``"fK"``.
    """
    fn = get_function(name)
    if len(sizes) != fn.num_fidelities:
        raise ValueError(f"{name} has {fn.num_fidelities} fidelities, got {len(sizes)} sizes {sizes}")
    rng = np.random.default_rng(seed)
    names = [f"f{k + 1}" for k in range(fn.num_fidelities)]
    designs = [sample_design(sizes[0], fn.bounds, rng)]
    for n in sizes[1:]:
        if nested:
            if n > designs[-1].shape[0]:
                raise ValueError(f"nested designs need non-increasing sizes, got {sizes}")
            designs.append(designs[-1][np.sort(rng.choice(designs[-1].shape[0], n, replace=False))])
        else:
            designs.append(sample_design(n, fn.bounds, rng))
    train = {f: (X, fn.levels[k](X)) for k, (f, X) in enumerate(zip(names, designs))}
    X_test = sample_design(num_test, fn.bounds, rng)
    parents = {f: ([names[k - 1]] if k else []) for k, f in enumerate(names)}
    return MultiFidelityProblem(name, train, parents, names[-1], (X_test, fn.levels[-1](X_test)), fn.bounds,
                                {f: fn.levels[k] for k, f in enumerate(names)})


# ---------------------------------------------------------------------------------------------------- graphical
_STANDARDISE = {}


def _standardiser(key, fn):
    """Mean and standard deviation of ``fn`` over [0, 1]³ (a fixed 32³ grid), cached."""
    if key not in _STANDARDISE:
        g = (np.arange(32) + 0.5) / 32
        u = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, 3)
        v = fn(u)
        _STANDARDISE[key] = (float(v.mean()), float(v.std()))
    return _STANDARDISE[key]


def _part(key, fn):
    def f(u):
        m, s = _standardiser(key, fn)
        return (fn(u) - m) / s
    return f


_C_HIGH = _part("currin_high", lambda u: _currin_high(u[:, :2]))
_C_LOW = _part("currin_high", lambda u: _currin_low(u[:, :2]))    # with the high level's constants
_B_HIGH = _part("forrester_high", lambda u: _forrester_high(u[:, 2:3]))

#: Coupling of the two parts in the graphical high fidelity.
GRAPHICAL_INTERACTION = 0.3


def graphical_high(u):
    """High fidelity of the graphical problem on [0, 1]³: ``H(u) = C(u_1, u_2) + B(u_3) + 0.3 C B`` with ``C`` the
    standardised Currin function and ``B`` the standardised Forrester function."""
    c, b = _C_HIGH(u), _B_HIGH(u)
    return c + b + GRAPHICAL_INTERACTION * c * b


def graphical_l1(u):
    """Low fidelity ``L1``: Currin's low level (standardised with the high level's constants) -- it carries ``C``."""
    return _C_LOW(u)


def graphical_l2(u):
    """Low fidelity ``L2``: Forrester's low level of ``u_3``, standardised -- it carries ``B``."""
    m, s = _standardiser("forrester_low", lambda v: _forrester_low(v[:, 2:3]))
    return (_forrester_low(u[:, 2:3]) - m) / s


def graphical_problem(n_low=200, n_high=25, num_test=75, seed=0, nested=True):
    """The graphical multi-fidelity problem ``X → L1, X → L2, L1 → H, L2 → H, X → H`` on ``u ∈ [0, 1]³``.

    Construction (from two of the standard functions, so that each low fidelity carries a different part of the
    high fidelity, as the two complementary low-fidelity simulators of the heavy-ion graph of Perlino et al. 2026,
    Sec. 7, Fig. 6): with ``C`` the Currin function of ``(u_1, u_2)`` and ``B`` the Forrester function of ``u_3``,
    each standardised over [0, 1]³,

    * ``H(u) = C(u_1, u_2) + B(u_3) + 0.3 C B`` (both parts and an interaction);
    * ``L1(u) = C_low(u_1, u_2)``: Currin's low level (a local average of ``C``), on ``C``'s scale; it knows nothing
      of ``B``;
    * ``L2(u) = F_low(u_3)``: Forrester's low level (``0.5 F + 10 (u_2 - 0.5) + 5``), standardised; it knows
      nothing of ``C``.

    Neither low fidelity alone explains ``H``: a chain on either one leaves the other part to the ``X → H``
    discrepancy, learned from the few high-fidelity points.

    :param int n_low: training points of each low fidelity (independent Latin hypercubes unless ``nested``: then
        ``L2`` shares ``L1``'s design). :param int n_high: high-fidelity training points (a subset of ``L1``'s
        design when ``nested``). :param int num_test: high-fidelity test points. :param int seed: the designs' seed.
    :returns: :class:`MultiFidelityProblem` with fidelities ``"L1"``, ``"L2"``, ``"H"``.
    """
    rng = np.random.default_rng(seed)
    box = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0]])
    X1 = sample_design(n_low, box, rng)
    X2 = X1.copy() if nested else sample_design(n_low, box, rng)
    XH = X1[np.sort(rng.choice(n_low, n_high, replace=False))] if nested else sample_design(n_high, box, rng)
    truth = {"L1": graphical_l1, "L2": graphical_l2, "H": graphical_high}
    train = {"L1": (X1, graphical_l1(X1)), "L2": (X2, graphical_l2(X2)), "H": (XH, graphical_high(XH))}
    X_test = sample_design(num_test, box, rng)
    return MultiFidelityProblem("graphical", train, {"L1": [], "L2": [], "H": ["L1", "L2"]}, "H",
                                (X_test, graphical_high(X_test)), box, truth)
