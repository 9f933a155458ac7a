"""The multi-fidelity test functions against their published values and against emukit's implementations."""
import math

import numpy as np
import pytest

from pyro_dag.datasets import multifidelity as mf


def test_known_values():
    # Branin's global minimum 0.397887 at (π, 2.275); Hartmann 3-D's -3.86278 at (0.114614, 0.555649, 0.852547)
    assert mf.branin()(np.array([[math.pi, 2.275]]))[0, 0] == pytest.approx(0.397887, abs=1e-6)
    assert mf.hartmann3()(np.array([[0.114614, 0.555649, 0.852547]]))[0, 0] == pytest.approx(-3.86278, abs=1e-5)
    # Forrester: f(x) = (6x - 2)^2 sin(12x - 4); f(0.5) = sin(2); low level at 0.5: 0.5 sin(2) + 5
    f = mf.forrester()
    assert f(np.array([[0.5]]))[0, 0] == pytest.approx(math.sin(2.0))
    assert f(np.array([[0.5]]), level=0)[0, 0] == pytest.approx(0.5 * math.sin(2.0) + 5)
    # Currin at x2 = 0: the factor 1 - exp(-inf) = 1, so f = 60 / 20 at x1 = 0
    assert mf.currin()(np.array([[0.0, 0.0]]))[0, 0] == pytest.approx(3.0)
    # Borehole: the standard nominal point gives about 72.9 (m^3/yr)
    x = np.array([[0.10, 25050, 89335, 1050, 89.55, 760, 1400, 10950]])
    hi = mf.borehole()(x)[0, 0]
    ln = math.log(25050 / 0.10)
    expect = 2 * math.pi * 89335 * 290 / (ln * (1 + 2 * 1400 * 89335 / (ln * 0.01 * 10950) + 89335 / 89.55))
    assert hi == pytest.approx(expect)


EMUKIT = [("forrester", "forrester", 1.0), ("borehole", "borehole", 1.0), ("branin", "branin", 100.0),
          ("currin", "currin", 1.0), ("park", "park", 1.0), ("hartmann3", "hartmann", -1.0)]


@pytest.mark.parametrize("name,module,scale", EMUKIT)
def test_against_emukit(name, module, scale):
    pytest.importorskip("emukit")
    if name == "forrester":
        from emukit.test_functions.forrester import multi_fidelity_forrester_function as make
    else:
        from emukit.test_functions import multi_fidelity as emf
        make = {"borehole": emf.multi_fidelity_borehole_function, "branin": emf.multi_fidelity_branin_function,
                "currin": emf.multi_fidelity_currin_function, "park": emf.multi_fidelity_park_function,
                "hartmann": emf.multi_fidelity_hartmann_3d}[module]
    fn, _ = make()
    ours = mf.get_function(name)
    rng = np.random.default_rng(0)
    X = mf.sample_design(40, ours.bounds, rng)
    if name == "park":
        # emukit's code has x2 + x3 where the published formula has x2 + x3^2: compare where they agree
        X[:, 2] = rng.integers(0, 2, len(X))
    for k in range(ours.num_fidelities):
        theirs = fn.f[k](X) * scale
        np.testing.assert_allclose(ours.levels[k](X), theirs, rtol=1e-12, atol=1e-12)


def test_park_uses_the_published_x3_squared():
    x = np.array([[0.5, 0.3, 0.5, 0.7]])
    x1, x2, x3, x4 = x[0]
    expect = x1 / 2 * (math.sqrt(1 + (x2 + x3 ** 2) * x4 / x1 ** 2) - 1) + (x1 + 3 * x4) * math.exp(1 + math.sin(x3))
    assert mf.park()(x)[0, 0] == pytest.approx(expect)


def test_chain_problem_nested_designs():
    p = mf.chain_problem("branin", [40, 20, 8], num_test=10, seed=1)
    assert list(p.train) == ["f1", "f2", "f3"] and p.parents["f3"] == ["f2"] and p.target == "f3"
    rows = {tuple(r) for r in p.train["f1"][0]}
    assert all(tuple(r) in rows for r in p.train["f2"][0])
    assert p.train["f3"][0].shape == (8, 2) and p.test[0].shape == (10, 2)
    with pytest.raises(ValueError, match="3 fidelities"):
        mf.chain_problem("branin", [10, 5])


def test_graphical_problem_parts():
    p = mf.graphical_problem(n_low=60, n_high=10, num_test=200, seed=0)
    assert p.parents == {"L1": [], "L2": [], "H": ["L1", "L2"]}
    X, y = p.test
    c, b = mf._C_HIGH(X)[:, 0], mf._B_HIGH(X)[:, 0]
    np.testing.assert_allclose(y[:, 0], c + b + mf.GRAPHICAL_INTERACTION * c * b)
    # C depends on (u1, u2) only, B on u3 only
    X2 = X.copy()
    X2[:, 2] = 0.5
    np.testing.assert_allclose(mf._C_HIGH(X2)[:, 0], c)
    l1, l2 = mf.graphical_l1(X)[:, 0], mf.graphical_l2(X)[:, 0]
    # each low fidelity carries its own part and (nearly) nothing of the other
    assert np.corrcoef(l1, c)[0, 1] > 0.99 and abs(np.corrcoef(l1, b)[0, 1]) < 0.3
    assert np.corrcoef(l2, b)[0, 1] > 0.7 and abs(np.corrcoef(l2, c)[0, 1]) < 0.3
