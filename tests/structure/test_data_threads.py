"""Bad data get a message naming the column; fit and exact_posterior run under limit_threads."""
import numpy as np
import pytest
import torch

from pyro_dag.structure import exact_posterior, fit


def test_dataframe_with_string_or_categorical_columns_names_the_column():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=20), "b": rng.normal(size=20)})
    bad = df.assign(colour=["red", "blue"] * 10)
    with pytest.raises(ValueError, match=r"column .colour. has dtype .*, not numbers.*pd.to_numeric"):
        fit(bad, num_steps=1, progress=False)
    cat = df.assign(group=pd.Categorical(["x", "y"] * 10))
    with pytest.raises(ValueError, match=r"column 'group' has dtype category.*cat.codes"):
        fit(cat, num_steps=1, progress=False)
    with pytest.raises(ValueError, match="column 'group'"):
        exact_posterior(cat)
    ok = df.assign(flag=[True, False] * 10, count=np.arange(20))       # bool and integer columns are numbers
    assert fit(ok, num_steps=1, num_particles=2, progress=False).node_names == ["a", "b", "flag", "count"]


def test_array_with_strings_names_the_column():
    X = np.array([[1.0, "a"], [2.0, "b"], [3.0, "c"]], dtype=object)
    with pytest.raises(ValueError, match="column 1 holds a value that is not a number"):
        fit(X, num_steps=1, progress=False)


def test_fit_limits_threads_and_restores_them():
    X = torch.randn(50, 3)
    before = torch.get_num_threads()
    seen = []
    fit(X, num_steps=2, num_particles=2, progress=False, num_threads=2,
        callback=lambda step, svgd, loss: seen.append(torch.get_num_threads()))
    assert seen == [2, 2] and torch.get_num_threads() == before
    seen.clear()
    fit(X, num_steps=1, num_particles=2, progress=False, callback=lambda *a: seen.append(torch.get_num_threads()))
    assert seen == [1]                                                   # default: one thread
    torch.set_num_threads(2)
    try:
        seen.clear()
        fit(X, num_steps=1, num_particles=2, progress=False, num_threads=None,
            callback=lambda *a: seen.append(torch.get_num_threads()))
        assert seen == [2]                                               # None: the process's settings
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="num_threads"):
        fit(X, num_steps=1, progress=False, num_threads=0)
    with pytest.raises(ValueError, match="num_threads"):
        exact_posterior(X, num_threads=0)
    assert torch.get_num_threads() == before
