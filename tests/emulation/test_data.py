"""multifidelity_data: graph, cases and NaN padding from per-fidelity arrays; clear errors for bad input."""
import numpy as np
import pytest

from pyro_dag import DAGInputError
from pyro_dag.emulation import multifidelity_data


def _arrays(nested=True):
    rng = np.random.default_rng(0)
    X_low = rng.random((6, 2))
    X_high = X_low[[1, 4]] if nested else rng.random((2, 2))
    return (X_low, X_low.sum(1)), (X_high, 10 * X_high.sum(1))


@pytest.mark.parametrize("nested", [True, False])
def test_chain_cases_and_padding(nested):
    low, high = _arrays(nested)
    mf = multifidelity_data({"low": low, "high": high}, parents={"high": ["low"]})
    assert set(mf.graph.edges) == {("x", "low"), ("x", "high"), ("low", "high")}
    assert mf.fidelities == ["low", "high"] and mf.parents == {"low": [], "high": ["low"]}
    assert mf.num_cases == (6 if nested else 8)
    assert mf.nested("high") is nested
    # each fidelity's values sit at its own cases, NaN elsewhere
    for f, (X, y) in (("low", low), ("high", high)):
        np.testing.assert_array_equal(mf.X[mf.index[f]], X)
        np.testing.assert_array_equal(mf.y[f][mf.index[f], 0], y)
        assert int(np.isfinite(mf.y[f]).sum()) == len(y)


def test_list_is_a_chain_and_default_parents():
    low, high = _arrays()
    mf = multifidelity_data([low, high])
    assert mf.fidelities == ["f1", "f2"] and mf.parents["f2"] == ["f1"]
    mf2 = multifidelity_data({"a": low, "b": high})
    assert mf2.parents["b"] == ["a"]


def test_graphical_shape():
    low, high = _arrays()
    mf = multifidelity_data({"L1": low, "L2": low, "H": high}, parents={"H": ["L1", "L2"]})
    assert set(mf.graph.edges) == {("x", "L1"), ("x", "L2"), ("x", "H"), ("L1", "H"), ("L2", "H")}
    assert mf.num_cases == 6


def test_bad_input():
    low, high = _arrays()
    with pytest.raises(DAGInputError, match="different input dimensions"):
        multifidelity_data({"low": low, "high": (np.ones((3, 3)), np.ones(3))})
    with pytest.raises(DAGInputError, match="'high' is observed nowhere"):
        multifidelity_data({"low": low, "high": (high[0], np.full(2, np.nan))})
    with pytest.raises(DAGInputError, match="no path from the input"):
        multifidelity_data({"low": low, "high": high}, parents={}, connect_input=["low"])
    with pytest.raises(DAGInputError, match="cycle"):
        multifidelity_data({"a": low, "b": high}, parents={"a": ["b"], "b": ["a"]})
    with pytest.raises(DAGInputError, match="'zzz', which is not among"):
        multifidelity_data({"low": low, "high": high}, parents={"high": ["zzz"]})
    with pytest.raises(DAGInputError, match="X has 6 rows but y has 2"):
        multifidelity_data({"low": (low[0], high[1])})
    with pytest.raises(DAGInputError, match="repeated design points"):
        multifidelity_data({"low": (np.ones((2, 2)), np.ones(2))})


def test_text_values_and_an_infinite_run_are_named():
    low, high = _arrays()
    X = low[0].astype(object)
    X[2, 0] = "1,5"
    with pytest.raises(DAGInputError, match="fidelity 'low': X holds values that are not numbers"):  # raw numpy
        multifidelity_data({"low": (X, low[1]), "high": high})
    y = high[1].astype(object)
    y[0] = "n/a"
    with pytest.raises(DAGInputError, match="fidelity 'high': y holds values that are not numbers"):
        multifidelity_data({"low": low, "high": (high[0], y)})
    y = np.array(high[1], dtype=float)
    y[1] = np.inf                                              # was silently dropped as a run not made
    with pytest.raises(DAGInputError, match="fidelity 'high': y is infinite at design point 1"):
        multifidelity_data({"low": low, "high": (high[0], y)})
    y[1] = np.nan                                              # a failed run: dropped, as documented
    assert multifidelity_data({"low": low, "high": (high[0], y)}).observed("high").sum() == len(y) - 1


def test_one_parent_name_as_a_string_is_that_parent():
    """parents={'high': 'low'} was read letter by letter ("refines 'l', which is not among the fidelities")."""
    low, high = _arrays()
    mf = multifidelity_data({"low": low, "high": high}, parents={"high": "low"}, connect_input="low")
    assert mf.parents == {"low": [], "high": ["low"]}
    assert set(mf.graph.edges) == {("x", "low"), ("low", "high")}
    with pytest.raises(DAGInputError, match="parents must be a dict"):
        multifidelity_data({"low": low, "high": high}, parents=[("high", "low")])


def test_designs_whose_standard_deviation_overflows_are_refused():
    """Designs at 1e300 were accepted without a word (every other standardisation refuses such values)."""
    low, high = _arrays()
    with pytest.raises(DAGInputError, match=r"fidelity 'low': X column 0 reaches .*e\+299.*rescale the column"):
        multifidelity_data({"low": (low[0] * 1e300, low[1]), "high": (high[0] * 1e300, high[1])})
