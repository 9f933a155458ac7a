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


@pytest.mark.parametrize("entry", ["fit", "exact"])
def test_bad_columns_are_named_by_their_names(entry):
    """NaN, inf, constant and float32-overflowing columns were named by index (``columns [1]``), duplicated column
    names were accepted (two nodes called the same) and exact_posterior took node_names of the wrong length."""
    pd = pytest.importorskip("pandas")
    run = (lambda X, **kw: fit(X, num_steps=1, num_particles=2, progress=False, **kw)) if entry == "fit" \
        else (lambda X, **kw: exact_posterior(X, **kw))
    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.normal(size=(20, 3)), columns=["col_p", "col_q", "col_r"])
    for bad in (float("nan"), float("inf")):
        X = df.copy()
        X.loc[3, "col_q"] = bad
        with pytest.raises(ValueError, match=r"NaN or inf in column 'col_q' \(rows \[3\]\)"):
            run(X)
        with pytest.raises(ValueError, match=r"NaN or inf in column 'q2'"):     # node_names name the columns too
            run(X.to_numpy(), node_names=["p1", "q2", "r3"])
    with pytest.raises(ValueError, match="column 'col_r' is constant"):
        run(df.assign(col_r=2.0))
    with pytest.raises(ValueError, match="column 'col_r'"):                       # 1e300: float32 or its sd overflows
        run(df.assign(col_r=df["col_r"] * 1e300))
    with pytest.raises(ValueError, match=r"columns name 'col_q' twice \(columns 1 and 2\)"):
        run(df.set_axis(["col_p", "col_q", "col_q"], axis=1))
    with pytest.raises(ValueError, match="node_names name 'a' twice"):
        run(df.to_numpy(), node_names=["a", "b", "a"])
    with pytest.raises(ValueError, match=r"node_names must hold one name per column of the data \(3\)"):
        run(df.to_numpy(), node_names=["a1", "b1"])
    assert run(df.to_numpy(), node_names=["a", "b", "c"]).node_names == ["a", "b", "c"]


def test_float32_overflow_names_the_column():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame({"x": np.arange(5.0), "big": np.arange(5.0) * 1e50})
    with pytest.raises(ValueError, match=r"data column 'big' holds 4e\+50, which is finite but overflows "
                                         r"torch.float32.*dtype=torch.float64"):
        fit(df, num_steps=1, progress=False)
