"""The ten deterministic simulators of the LaMP-DGP benchmarks, with their input boxes, randomized Latin-hypercube
designs and the noisy variant.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation", Sec. 5.1
and App. D (definitions), App. E (noise). Each function is written exactly as that appendix states it (which in two
places differs from other common versions: the G-function's ``a_i = (i - 2)/2``, so that ``a_1 = -0.5`` and the
first factor can be negative, and Oakley-O'Hagan on the box ``[-3, 3]^15`` with four-digit coefficients).

=================  ===  ==============================================================
name               d    original source
=================  ===  ==============================================================
``schaffer``       2    Schaffer N.4 (Mishra 2006, MPRA paper 2718), on ``[-2, 2]^2``
``park``           4    Park (1991), PhD thesis, Stanford; Cox, Park & Singer (2001)
``g4``, ``g6``     4/6  Marrel, Iooss, Van Dorpe & Volkova (2008/2009), CSDA 52
``otl_circuit``    6    Ben-Ari & Steinberg (2007), Qual. Eng. 19(4)
``piston``         7    Ben-Ari & Steinberg (2007), Qual. Eng. 19(4)
``borehole``       8    Morris, Mitchell & Ylvisaker (1993), Technometrics 35(3)
``wing_weight``    10   Forrester, Sóbester & Keane (2008), *Engineering Design via Surrogate Modelling*
``turb``           12   Rumsey et al. (2025), turbulence-inspired closure (as in Chang & Sung 2026, App. D)
``oakley_ohagan``  15   Oakley & O'Hagan (2004), JRSS-B 66(3)
=================  ===  ==============================================================

Every function takes inputs in its *natural units* ``x [n, d]`` (inside :attr:`TestFunction.bounds`) and returns
``[n, 1]`` (the ``[n, d_w]`` layout of a :class:`pyro_dag.DAGDGP` data node), as a float64 tensor.

    >>> f = get_test_function("borehole")
    >>> x = f.design(100, generator=torch.Generator().manual_seed(0))   # [100, 8], a randomized LHS in the box
    >>> y = f(x)                                                        # [100, 1]
"""
import math
from dataclasses import dataclass
from typing import Callable, Tuple

import torch

__all__ = ["TestFunction", "TEST_FUNCTIONS", "get_test_function", "latin_hypercube", "add_noise",
           "schaffer", "park", "g_function", "otl_circuit", "piston", "borehole", "wing_weight", "turb",
           "oakley_ohagan"]


def _as_x(x, d, name):
    x = torch.as_tensor(x, dtype=torch.float64) if not torch.is_tensor(x) else x
    if not x.is_floating_point():
        x = x.to(torch.float64)
    if x.dim() != 2 or x.shape[-1] != d:
        raise ValueError(f"{name}: x must have shape [n, {d}] (one row per input point, {d} columns), "
                         f"got {tuple(x.shape)}")
    return x


def _cols(x):
    return x.unbind(-1)


# ---------------------------------------------------------------------------------------------------- the functions
def schaffer(x):
    """Schaffer N.4 on ``[-2, 2]^2`` (Chang & Sung 2026, App. D; Mishra 2006):
    ``0.5 + (cos²(sin|x1² - x2²|) - 0.5) / [1 + 0.001 (x1² + x2²)]²``. ``[n, 2] -> [n, 1]``."""
    x1, x2 = _cols(_as_x(x, 2, "schaffer"))
    r = x1 ** 2 + x2 ** 2
    return (0.5 + (torch.cos(torch.sin((x1 ** 2 - x2 ** 2).abs())) ** 2 - 0.5) / (1 + 0.001 * r) ** 2)[:, None]


def park(x):
    """Park (1991) on ``[0, 1]^4``:
    ``(x1/2)(sqrt(1 + (x2 + x3²) x4 / x1²) - 1) + (x1 + 3 x4) exp(1 + sin x3)``. ``[n, 4] -> [n, 1]``."""
    x1, x2, x3, x4 = _cols(_as_x(x, 4, "park"))
    return (x1 / 2 * (torch.sqrt(1 + (x2 + x3 ** 2) * x4 / x1 ** 2) - 1)
            + (x1 + 3 * x4) * torch.exp(1 + torch.sin(x3)))[:, None]


def g_function(x):
    """The G-function (Marrel et al. 2009) on ``[0, 1]^d`` as Chang & Sung (2026, App. D) define it:
    ``Π_i (|4 x_i - 2| + a_i) / (1 + a_i)`` with ``a_i = (i - 2)/2`` (``a_1 = -0.5``: the first factor is
    negative where ``|4 x_1 - 2| < 0.5``, and ``a_2 = 0`` makes the function vanish on ``x_2 = 0.5``).
    ``[n, d] -> [n, 1]`` for any ``d >= 1``."""
    x = torch.as_tensor(x, dtype=torch.float64) if not torch.is_tensor(x) else x
    if x.dim() != 2:
        raise ValueError(f"g_function: x must have shape [n, d], got {tuple(x.shape)}")
    x = _as_x(x, x.shape[-1], "g_function")
    a = (torch.arange(1, x.shape[-1] + 1, dtype=x.dtype, device=x.device) - 2) / 2
    return ((((4 * x - 2).abs() + a) / (1 + a)).prod(-1))[:, None]


def otl_circuit(x):
    """OTL circuit midpoint voltage (Ben-Ari & Steinberg 2007), ``x = (R_b1, R_b2, R_f, R_c1, R_c2, β)``:
    ``V_b1 = 12 R_b2 / (R_b1 + R_b2)``, ``B = β (R_c2 + 9)``,
    ``f = (V_b1 + 0.74) B / (B + R_f) + 11.35 R_f / (B + R_f) + 0.74 R_f B / ((B + R_f) R_c1)``.
    ``[n, 6] -> [n, 1]``."""
    rb1, rb2, rf, rc1, rc2, beta = _cols(_as_x(x, 6, "otl_circuit"))
    vb1 = 12 * rb2 / (rb1 + rb2)
    b = beta * (rc2 + 9)
    return ((vb1 + 0.74) * b / (b + rf) + 11.35 * rf / (b + rf) + 0.74 * rf * b / ((b + rf) * rc1))[:, None]


def piston(x):
    """Piston cycle time in seconds (Ben-Ari & Steinberg 2007), ``x = (M, S, V0, k, P0, Ta, T0)``:
    ``A = P0 S + 19.62 M - k V0 / S``, ``V = S/(2k) (sqrt(A² + 4k P0 V0 Ta / T0) - A)``,
    ``f = 2π sqrt(M / (k + S² P0 V0 Ta / (T0 V²)))``. ``[n, 7] -> [n, 1]``."""
    m, s, v0, k, p0, ta, t0 = _cols(_as_x(x, 7, "piston"))
    a = p0 * s + 19.62 * m - k * v0 / s
    v = s / (2 * k) * (torch.sqrt(a ** 2 + 4 * k * p0 * v0 / t0 * ta) - a)
    return (2 * math.pi * torch.sqrt(m / (k + s ** 2 * p0 * v0 / t0 * ta / v ** 2)))[:, None]


def borehole(x):
    """Water flow through a borehole in m³/yr (Morris et al. 1993), ``x = (r_w, r, T_u, H_u, T_l, H_l, L, K_w)``:
    ``2π T_u (H_u - H_l) / (ln(r/r_w) [1 + 2 L T_u / (ln(r/r_w) r_w² K_w) + T_u / T_l])``.
    (The high level of :func:`pyro_dag.datasets.multifidelity.borehole` is the same function.)
    ``[n, 8] -> [n, 1]``."""
    rw, r, tu, hu, tl, hl, length, kw = _cols(_as_x(x, 8, "borehole"))
    ln = torch.log(r / rw)
    return (2 * math.pi * tu * (hu - hl) / (ln * (1 + 2 * length * tu / (ln * rw ** 2 * kw) + tu / tl)))[:, None]


def wing_weight(x):
    """Light-aircraft wing weight in lb (Forrester, Sóbester & Keane 2008),
    ``x = (S_w, W_fw, A, Λ, q, λ, t_c, N_z, W_dg, W_p)`` with the sweep ``Λ`` in degrees:
    ``0.036 S_w^0.758 W_fw^0.0035 (A / cos²Λ)^0.6 q^0.006 λ^0.04 (100 t_c / cos Λ)^-0.3 (N_z W_dg)^0.49
    + S_w W_p``. ``[n, 10] -> [n, 1]``."""
    sw, wfw, a, lam_deg, q, taper, tc, nz, wdg, wp = _cols(_as_x(x, 10, "wing_weight"))
    c = torch.cos(lam_deg * math.pi / 180)
    return (0.036 * sw ** 0.758 * wfw ** 0.0035 * (a / c ** 2) ** 0.6 * q ** 0.006 * taper ** 0.04
            * (100 * tc / c) ** (-0.3) * (nz * wdg) ** 0.49 + sw * wp)[:, None]


def turb(x):
    """The turbulence-inspired 12-D function of Chang & Sung (2026, App. D; after Rumsey et al. 2025),
    ``x = (l_r, y_wall, S, ℓ, C_μ, A⁺, β, χ, C_p, C_d, α, s)``:
    ``f_w = (1 - exp(-A⁺ y_wall))²``, ``P = C_p |S|^{3/2} ℓ (1 + tanh(β)/4)``, ``D = C_d (1 + ℓ²)(1 + α²)``,
    ``ν_t = C_μ ℓ² |S| f_w / (1 + |β|)``, and
    ``f = P / ((1 + β²) D) + ν_t / (2 (1 + ν_t)) + 0.1 tanh(χ) log(1 + l_r) + 0.2 s² / (1 + s² + α²)
    + 0.05 α f_w``. ``[n, 12] -> [n, 1]``."""
    lr, yw, s_, ell, cmu, aplus, beta, chi, cp, cd, alpha, s = _cols(_as_x(x, 12, "turb"))
    fw = (1 - torch.exp(-aplus * yw)) ** 2
    p = cp * s_.abs() ** 1.5 * ell * (1 + 0.25 * torch.tanh(beta))
    d = cd * (1 + ell ** 2) * (1 + alpha ** 2)
    nut = cmu * ell ** 2 * s_.abs() * fw / (1 + beta.abs())
    return (p / ((1 + beta ** 2) * d) + nut / (2 * (1 + nut)) + 0.1 * torch.tanh(chi) * torch.log(1 + lr)
            + 0.2 * s ** 2 / (1 + s ** 2 + alpha ** 2) + 0.05 * alpha * fw)[:, None]


# Oakley & O'Hagan (2004), the 15-input function's coefficients, to the four digits Chang & Sung (2026) state.
_OO_A1 = [0.0118, 0.0456, 0.2297, 0.0393, 0.1177, 0.3865, 0.3897, 0.6061,
          0.6159, 0.4005, 1.0741, 1.1474, 0.7880, 1.1242, 1.1982]
_OO_A2 = [0.4341, 0.0887, 0.0512, 0.3233, 0.1489, 1.0360, 0.9892, 0.9672,
          0.8977, 0.8083, 1.8426, 2.4712, 2.3946, 2.0045, 2.2621]
_OO_A3 = [0.1044, 0.2057, 0.0774, 0.2730, 0.1253, 0.7526, 0.8570, 1.0331,
          0.8388, 0.7970, 2.2145, 2.0382, 2.4004, 2.0541, 1.9845]
_OO_M = [
    [-0.0225, -0.1850, 0.1342, 0.3687, 0.1717, 0.1365, -0.4403, -0.0814,
     0.7132, -0.4436, 0.5038, -0.0241, -0.0459, 0.2167, 0.0559],
    [0.2566, 0.0538, 0.2580, 0.2380, -0.5913, -0.0816, -0.2875, 0.4158,
     0.4975, 0.0839, -0.1106, 0.0332, -0.1398, -0.0310, -0.2232],
    [-0.0560, 0.1954, 0.0955, -0.2863, -0.1444, 0.2237, 0.1453, 0.2900,
     0.2311, -0.3193, -0.2904, -0.2096, 0.4314, 0.0244, 0.0449],
    [0.6645, 0.4307, 0.2992, -0.1620, -0.3148, -0.3903, 0.1768, 0.0580,
     0.1723, 0.1347, -0.3528, 0.2515, -0.0188, 0.3648, -0.3250],
    [-0.1213, 0.1246, 0.1066, 0.0466, -0.2168, 0.1949, -0.0655, 0.0244,
     -0.0968, 0.1937, 0.3335, 0.3130, -0.0836, -0.2534, 0.3733],
    [-0.2838, -0.3282, -0.1050, -0.2207, -0.1371, -0.1443, -0.1150, 0.2242,
     -0.0304, -0.5151, 0.0173, 0.0390, 0.3607, 0.3090, 0.0500],
    [-0.0779, 0.0037, 0.8869, -0.2659, -0.0793, -0.0427, -0.1865, -0.3560,
     -0.1750, 0.0887, 0.4003, -0.0560, 0.1372, 0.2149, -0.0113],
    [-0.0923, 0.5921, 0.0313, -0.0331, -0.2431, -0.0998, 0.0345, 0.0951,
     -0.3380, 0.0064, -0.6121, 0.0813, 0.8868, 0.1425, 0.1478],
    [-0.1319, 0.5288, 0.1265, 0.0451, 0.5837, 0.3729, 0.1140, -0.2948,
     -0.5701, 0.4629, -0.0941, 0.1396, -0.3861, -0.4490, -0.1460],
    [0.0581, -0.3229, 0.0931, 0.0724, -0.5692, 0.5255, 0.2366, -0.0118,
     0.0718, 0.0783, -0.1336, 0.2272, 0.1437, -0.4520, -0.5557],
    [0.6615, 0.3463, 0.1410, 0.5188, -0.2802, -0.1603, -0.0684, -0.2043,
     0.0697, 0.2311, -0.0444, -0.1646, 0.2162, 0.0043, -0.0874],
    [0.3160, -0.0276, 0.1343, 0.1350, 0.0540, -0.1737, 0.1753, 0.0603,
     -0.1791, -0.3106, -0.2536, 0.0258, -0.4301, -0.6227, -0.0340],
    [-0.2904, 0.0341, 0.0349, -0.1212, 0.0260, -0.3355, -0.4142, 0.0532,
     -0.2710, -0.0263, 0.4102, 0.2664, 0.1558, -0.1867, 0.0199],
    [-0.2439, -0.4410, 0.0126, 0.2495, 0.0711, 0.2462, 0.1748, 0.0085,
     0.2515, -0.1466, -0.0846, 0.3693, -0.2996, 0.1104, -0.7569],
    [0.0415, -0.2598, 0.4640, -0.3611, -0.9498, -0.1650, 0.0031, 0.0528,
     0.2252, 0.3839, 0.4556, -0.1863, 0.0082, 0.1667, 0.1605],
]


def oakley_ohagan(x):
    """Oakley & O'Hagan (2004)'s 15-input function on ``[-3, 3]^15`` (the box Chang & Sung 2026 use):
    ``a1ᵀx + a2ᵀ sin(x) + a3ᵀ cos(x) + xᵀ M x`` (coefficients to four digits). ``[n, 15] -> [n, 1]``."""
    x = _as_x(x, 15, "oakley_ohagan")
    kw = {"dtype": x.dtype, "device": x.device}
    a1, a2, a3 = (torch.tensor(a, **kw) for a in (_OO_A1, _OO_A2, _OO_A3))
    m = torch.tensor(_OO_M, **kw)
    return (x @ a1 + torch.sin(x) @ a2 + torch.cos(x) @ a3 + ((x @ m) * x).sum(-1))[:, None]


# ---------------------------------------------------------------------------------------------------- designs, noise
def latin_hypercube(n, bounds, generator=None):
    """A randomized Latin hypercube (McKay, Beckman & Conover 1979) of ``n`` points in a box.

    Every column is cut into ``n`` equal strata and each stratum holds exactly one point, placed uniformly inside
    it; the strata are matched across columns by independent random permutations.

    :param int n: number of points (``>= 1``).
    :param bounds: ``[d, 2]`` lower and upper bounds per input (lower < upper).
    :param torch.Generator generator: the random stream (default: torch's global one).
    :returns: ``[n, d]`` float64 tensor.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"latin_hypercube: n must be a positive integer, got {n!r}")
    bounds = torch.as_tensor(bounds, dtype=torch.float64)
    if bounds.dim() != 2 or bounds.shape[-1] != 2 or not bool((bounds[:, 1] > bounds[:, 0]).all()):
        raise ValueError(f"latin_hypercube: bounds must be [d, 2] with lower < upper in every row, got {bounds}")
    d = bounds.shape[0]
    perm = torch.stack([torch.randperm(n, generator=generator) for _ in range(d)], -1).to(torch.float64)
    u = (perm + torch.rand(n, d, generator=generator, dtype=torch.float64)) / n
    return bounds[:, 0] + u * (bounds[:, 1] - bounds[:, 0])


def add_noise(y, signal_sd, ratio=0.01, generator=None):
    """The noisy variant of Chang & Sung (2026, App. E): Gaussian noise with sd ``ratio · signal_sd``.

    The paper standardises the noise-free responses to unit variance and adds ``N(0, 0.01²)`` noise, i.e. a
    noise-to-signal ratio (noise sd / signal sd) of ``0.01``; on the original scale that is noise with sd
    ``0.01 · signal_sd``, which is what this function adds (so it commutes with the standardisation).

    :param torch.Tensor y: ``[n, 1]`` noise-free responses.
    :param float signal_sd: the sd of the noise-free response (e.g. :meth:`TestFunction.signal_sd`).
    :param float ratio: noise sd / signal sd (default 0.01).
    :returns: ``[n, 1]`` noisy responses.
    """
    if not (signal_sd > 0 and ratio >= 0):
        raise ValueError(f"add_noise: need signal_sd > 0 and ratio >= 0, got signal_sd={signal_sd}, ratio={ratio}")
    y = torch.as_tensor(y, dtype=torch.float64)
    return y + ratio * float(signal_sd) * torch.randn(y.shape, generator=generator, dtype=y.dtype)


@dataclass(frozen=True)
class TestFunction:
    """One benchmark simulator: a name, its input box and the function.

    :param str name: the key in :data:`TEST_FUNCTIONS`.
    :param tuple bounds: ``d`` pairs ``(lower, upper)`` in the function's natural units.
    :param callable fn: ``x [n, d] -> [n, 1]``.
    :param tuple inputs: the input names, in column order.
    """

    __test__ = False  # not a pytest test class, despite the name

    name: str
    bounds: Tuple[Tuple[float, float], ...]
    fn: Callable
    inputs: Tuple[str, ...]

    @property
    def dim(self):
        """The input dimension ``d``."""
        return len(self.bounds)

    def box(self):
        """``[d, 2]`` float64 tensor of the bounds."""
        return torch.tensor(self.bounds, dtype=torch.float64)

    def __call__(self, x):
        """``f(x)``: ``x [n, d]`` in natural units -> ``[n, 1]``."""
        return self.fn(_as_x(x, self.dim, self.name))

    def design(self, n, generator=None):
        """A randomized Latin hypercube of ``n`` points in the box (:func:`latin_hypercube`): ``[n, d]``."""
        return latin_hypercube(n, self.bounds, generator=generator)

    def signal_sd(self, num_points=100_000, seed=12345):
        """Monte Carlo estimate of the sd of ``f`` under uniform inputs on the box (an LHS of ``num_points``)."""
        return float(self(self.design(num_points, torch.Generator().manual_seed(seed))).std())


def _f(name, fn, inputs, bounds):
    return TestFunction(name, tuple(tuple(float(v) for v in b) for b in bounds), fn, tuple(inputs))


TEST_FUNCTIONS = {
    f.name: f for f in [
        _f("schaffer", schaffer, ("x1", "x2"), [(-2, 2)] * 2),
        _f("park", park, ("x1", "x2", "x3", "x4"), [(0, 1)] * 4),
        _f("g4", g_function, [f"x{i}" for i in range(1, 5)], [(0, 1)] * 4),
        _f("g6", g_function, [f"x{i}" for i in range(1, 7)], [(0, 1)] * 6),
        _f("otl_circuit", otl_circuit, ("R_b1", "R_b2", "R_f", "R_c1", "R_c2", "beta"),
           [(50, 150), (25, 70), (0.5, 3), (1.2, 2.5), (0.25, 1.2), (50, 300)]),
        _f("piston", piston, ("M", "S", "V0", "k", "P0", "Ta", "T0"),
           [(30, 60), (0.005, 0.020), (0.002, 0.010), (1000, 5000), (90000, 110000), (290, 296), (340, 360)]),
        _f("borehole", borehole, ("r_w", "r", "T_u", "H_u", "T_l", "H_l", "L", "K_w"),
           [(0.05, 0.15), (100, 50000), (63070, 115600), (990, 1110), (63.1, 116), (700, 820), (1120, 1680),
            (9855, 12045)]),
        _f("wing_weight", wing_weight, ("S_w", "W_fw", "A", "Lambda", "q", "lambda", "t_c", "N_z", "W_dg", "W_p"),
           [(150, 200), (220, 300), (6, 10), (-10, 10), (16, 45), (0.5, 1), (0.08, 0.18), (2.5, 6), (1700, 2500),
            (0.025, 0.08)]),
        _f("turb", turb, ("l_r", "y_wall", "S", "ell", "C_mu", "A_plus", "beta", "chi", "C_p", "C_d", "alpha", "s"),
           [(4, 8), (0.001, 0.2), (0.05, 10), (0.01, 0.5), (0.05, 0.3), (2, 25), (-2, 2), (-3, 3), (0.2, 2),
            (0.2, 2), (0, 2), (0.1, 5)]),
        _f("oakley_ohagan", oakley_ohagan, [f"x{i}" for i in range(1, 16)], [(-3, 3)] * 15),
    ]
}
"""The ten benchmarks of Chang & Sung (2026, Sec. 5.1), in the paper's order, by name."""


def get_test_function(name):
    """The :class:`TestFunction` called ``name`` (a key of :data:`TEST_FUNCTIONS`)."""
    if name not in TEST_FUNCTIONS:
        raise KeyError(f"unknown test function {name!r}; choose one of {sorted(TEST_FUNCTIONS)}")
    return TEST_FUNCTIONS[name]
