"""The ten LaMP-DGP benchmark simulators (Chang & Sung 2026, App. D): published values, hand-computed values at
given points, the input boxes, and the Latin-hypercube and noise helpers."""
import math

import numpy as np
import pytest
import torch

from pyro_dag.datasets import TEST_FUNCTIONS, add_noise, get_test_function, latin_hypercube
from pyro_dag.datasets import multifidelity as mf
from pyro_dag.datasets import test_functions as tf

DIMS = {"schaffer": 2, "park": 4, "g4": 4, "g6": 6, "otl_circuit": 6, "piston": 7, "borehole": 8,
        "wing_weight": 10, "turb": 12, "oakley_ohagan": 15}


def value(name, point):
    return float(get_test_function(name)(torch.tensor([point], dtype=torch.float64))[0, 0])


def test_the_ten_functions_and_their_boxes():
    assert list(TEST_FUNCTIONS) == list(DIMS)
    assert {k: f.dim for k, f in TEST_FUNCTIONS.items()} == DIMS
    assert TEST_FUNCTIONS["schaffer"].bounds == ((-2.0, 2.0),) * 2
    assert TEST_FUNCTIONS["oakley_ohagan"].bounds == ((-3.0, 3.0),) * 15
    assert TEST_FUNCTIONS["piston"].bounds[1] == (0.005, 0.020)
    assert TEST_FUNCTIONS["borehole"].bounds[1] == (100.0, 50000.0)
    assert TEST_FUNCTIONS["turb"].bounds[2] == (0.05, 10.0)
    assert TEST_FUNCTIONS["wing_weight"].bounds[3] == (-10.0, 10.0)


def test_schaffer_published_minimum():
    # Schaffer N.4: global minimum 0.292579 at (0, ±1.253115) (Mishra 2006); f(0, 0) = 0.5 + (1 - 0.5) / 1 = 1
    assert value("schaffer", [0.0, 1.253115]) == pytest.approx(0.292579, abs=1e-6)
    assert value("schaffer", [0.0, -1.253115]) == pytest.approx(0.292579, abs=1e-6)
    assert value("schaffer", [0.0, 0.0]) == pytest.approx(1.0)


def test_g_function_as_written_with_negative_first_factor():
    # a = (-0.5, 0, 0.5, 1): |4x - 2| = 1 (x = 0.25) makes every factor 1; x_2 = 0.5 gives a zero factor
    assert value("g4", [0.25] * 4) == pytest.approx(1.0)
    assert value("g6", [0.75] * 6) == pytest.approx(1.0)
    assert value("g4", [0.1, 0.5, 0.9, 0.3]) == 0.0
    # x_1 = 0.5: first factor (0 - 0.5) / 0.5 = -1; x_2 = 0: |−2| + 0 = 2; x_3 = 1: (2 + 0.5)/1.5; x_4 = 0: 3/2
    assert value("g4", [0.5, 0.0, 1.0, 0.0]) == pytest.approx(-1.0 * 2.0 * (2.5 / 1.5) * 1.5)
    # a_5 = 1.5, a_6 = 2: at x = 0 factors (2 + a)/(1 + a)
    expect = np.prod([(2 + a) / (1 + a) for a in (-0.5, 0.0, 0.5, 1.0, 1.5, 2.0)])
    assert value("g6", [0.0] * 6) == pytest.approx(expect)


def test_park_and_borehole_agree_with_the_multifidelity_versions():
    g = torch.Generator().manual_seed(3)
    for name, other in [("park", mf.park()), ("borehole", mf.borehole())]:
        f = get_test_function(name)
        x = f.design(64, g)
        np.testing.assert_allclose(f(x).numpy(), other(x.numpy()), rtol=1e-12)
    # the flow is proportional to the head difference H_u - H_l
    a = value("borehole", [0.10, 25050, 89335, 1050, 89.55, 760, 1400, 10950])
    b = value("borehole", [0.10, 25050, 89335, 1100, 89.55, 710, 1400, 10950])
    assert b / a == pytest.approx(390 / 290, rel=1e-14)


def test_park_at_a_point_by_hand():
    x1, x2, x3, x4 = 0.5, 0.2, 0.3, 0.7
    expect = x1 / 2 * (math.sqrt(1 + (x2 + x3 ** 2) * x4 / x1 ** 2) - 1) + (x1 + 3 * x4) * math.exp(1 + math.sin(x3))
    assert value("park", [x1, x2, x3, x4]) == pytest.approx(expect, rel=1e-14)


def test_otl_circuit_piston_wing_weight_by_hand():
    rb1, rb2, rf, rc1, rc2, beta = 100.0, 50.0, 1.5, 2.0, 0.5, 150.0
    vb1 = 12 * rb2 / (rb1 + rb2)
    den = beta * (rc2 + 9) + rf
    expect = ((vb1 + 0.74) * beta * (rc2 + 9) / den + 11.35 * rf / den + 0.74 * rf * beta * (rc2 + 9) / (den * rc1))
    assert value("otl_circuit", [rb1, rb2, rf, rc1, rc2, beta]) == pytest.approx(expect, rel=1e-14)
    assert 4.0 < expect < 8.0  # the midpoint voltage lies in its known range (about 4-8 V)
    m, s, v0, k, p0, ta, t0 = 45.0, 0.0125, 0.006, 3000.0, 100000.0, 293.0, 350.0
    a = p0 * s + 19.62 * m - k * v0 / s
    v = s / (2 * k) * (math.sqrt(a ** 2 + 4 * k * p0 * v0 / t0 * ta) - a)
    expect = 2 * math.pi * math.sqrt(m / (k + s ** 2 * p0 * v0 / t0 * ta / v ** 2))
    assert value("piston", [m, s, v0, k, p0, ta, t0]) == pytest.approx(expect, rel=1e-14)
    assert 0.2 < expect < 0.7  # a cycle time in seconds, in the function's known range
    # wing weight at the Cessna C172 baseline (Forrester et al. 2008, Table 1.1) with a 10 degree sweep
    p = [174.0, 252.0, 7.52, 10.0, 34.0, 0.672, 0.12, 3.8, 2000.0, 0.064]
    c = math.cos(math.radians(10.0))
    expect = (0.036 * 174 ** 0.758 * 252 ** 0.0035 * (7.52 / c ** 2) ** 0.6 * 34 ** 0.006 * 0.672 ** 0.04
              * (100 * 0.12 / c) ** -0.3 * (3.8 * 2000) ** 0.49 + 174 * 0.064)
    assert value("wing_weight", p) == pytest.approx(expect, rel=1e-14)
    # the sweep enters through cos: ±Λ give the same weight
    p[3] = -10.0
    assert value("wing_weight", p) == pytest.approx(expect, rel=1e-14)


def test_turb_by_hand():
    lr, yw, s_, ell, cmu, ap, beta, chi, cp, cd, alpha, s = 6.0, 0.1, 2.0, 0.3, 0.1, 10.0, -1.0, 0.5, 1.0, 0.8, 1.5, 2
    fw = (1 - math.exp(-ap * yw)) ** 2
    p = cp * abs(s_) ** 1.5 * ell * (1 + 0.25 * math.tanh(beta))
    d = cd * (1 + ell ** 2) * (1 + alpha ** 2)
    nut = cmu * ell ** 2 * abs(s_) * fw / (1 + abs(beta))
    expect = (p / ((1 + beta ** 2) * d) + nut / (2 * (1 + nut)) + 0.1 * math.tanh(chi) * math.log(1 + lr)
              + 0.2 * s ** 2 / (1 + s ** 2 + alpha ** 2) + 0.05 * alpha * fw)
    assert value("turb", [lr, yw, s_, ell, cmu, ap, beta, chi, cp, cd, alpha, s]) == pytest.approx(expect, rel=1e-14)


def test_oakley_ohagan_coefficients_and_structure():
    # at x = 0 only the cosine term is left: f(0) = Σ a3
    assert value("oakley_ohagan", [0.0] * 15) == pytest.approx(sum(tf._OO_A3), rel=1e-14)
    # at x = e_i: a1_i + a2_i sin 1 + a3_i cos 1 + Σ_{j≠i} a3_j + M_ii
    a1, a2, a3, m = (np.array(v) for v in (tf._OO_A1, tf._OO_A2, tf._OO_A3, tf._OO_M))
    assert m.shape == (15, 15) and a1.shape == a2.shape == a3.shape == (15,)
    assert (a1[0], a2[-1], a3[-1], m[0, 0], m[14, 4]) == (0.0118, 2.2621, 1.9845, -0.0225, -0.9498)
    for i in (0, 7, 14):
        e = [0.0] * 15
        e[i] = 1.0
        expect = a1[i] + a2[i] * math.sin(1) + a3[i] * math.cos(1) + a3.sum() - a3[i] + m[i, i]
        assert value("oakley_ohagan", e) == pytest.approx(expect, rel=1e-13)
    # the quadratic form uses M itself (not its symmetric part only through the diagonal): x = e_0 + e_1
    x = np.zeros(15)
    x[:2] = 1.0
    expect = a1 @ x + a2 @ np.sin(x) + a3 @ np.cos(x) + x @ m @ x
    assert value("oakley_ohagan", list(x)) == pytest.approx(expect, rel=1e-13)


@pytest.mark.parametrize("name", list(DIMS))
def test_shapes_and_wrong_dimension(name):
    f = get_test_function(name)
    x = f.design(37, torch.Generator().manual_seed(0))
    y = f(x)
    assert x.shape == (37, DIMS[name]) and y.shape == (37, 1) and y.dtype == torch.float64
    assert torch.isfinite(y).all() and y.std() > 0
    box = f.box()
    assert ((x >= box[:, 0]) & (x <= box[:, 1])).all()
    with pytest.raises(ValueError, match=rf"\[n, {DIMS[name]}\]"):
        f(torch.zeros(3, DIMS[name] + 1))


def test_latin_hypercube_stratification():
    g = torch.Generator().manual_seed(1)
    n, bounds = 50, [(-2.0, 2.0), (10.0, 20.0), (0.0, 1.0)]
    x = latin_hypercube(n, bounds, generator=g)
    lo = torch.tensor([b[0] for b in bounds])
    width = torch.tensor([b[1] - b[0] for b in bounds])
    strata = ((x - lo) / width * n).floor().long()
    for j in range(3):  # every stratum of every column holds exactly one point
        assert sorted(strata[:, j].tolist()) == list(range(n))
    # randomized: two draws differ, the same seed repeats
    assert not torch.equal(x, latin_hypercube(n, bounds, generator=g))
    assert torch.equal(latin_hypercube(n, bounds, torch.Generator().manual_seed(1)), x)
    # uniform inside the strata: the mean offset within a stratum is about 1/2
    offsets = (x - lo) / width * n - strata
    assert abs(float(offsets.mean()) - 0.5) < 0.1


def test_latin_hypercube_bad_input():
    with pytest.raises(ValueError, match="positive integer"):
        latin_hypercube(0, [(0, 1)])
    with pytest.raises(ValueError, match="lower < upper"):
        latin_hypercube(5, [(1, 0)])


def test_noise_ratio():
    f = get_test_function("park")
    sd = f.signal_sd(num_points=20000)
    x = f.design(20000, torch.Generator().manual_seed(4))
    y = f(x)
    noisy = add_noise(y, sd, ratio=0.01, generator=torch.Generator().manual_seed(5))
    ratio = float((noisy - y).std()) / float(y.std())
    assert ratio == pytest.approx(0.01, rel=0.05)
    with pytest.raises(ValueError, match="signal_sd"):
        add_noise(y, 0.0)


def test_unknown_name():
    with pytest.raises(KeyError, match="schaffer"):
        get_test_function("schafer")
