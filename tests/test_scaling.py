"""pyro_dag.scaling: the check every standardisation shares (a column's moments, refused when they overflow)."""
import numpy as np
import pytest
import torch

from pyro_dag.scaling import column_moments, float32_overflow


def test_moments_match_numpy_and_ignore_missing_values():
    v = np.array([1.0, 2.0, np.nan, 4.0])
    assert column_moments(v, "c") == pytest.approx((np.nanmean(v), np.nanstd(v)))
    assert column_moments(torch.tensor(v, dtype=torch.float32), "c", ddof=1)[1] == pytest.approx(np.nanstd(v, ddof=1))
    assert column_moments([3.0, 3.0], "c") == (3.0, 0.0)             # constant: the caller refuses it in its words


@pytest.mark.parametrize("values", [[1e300, 2e300, 3e300], [2e154, -2e154, 1.0], [1.0, 2.0, 1e200]])
def test_overflowing_standard_deviation_names_the_column_and_the_fix(values):
    with np.errstate(over="ignore"):
        assert not np.isfinite(np.std(values))    # what a plain standardisation divides by: every value becomes 0
    with pytest.raises(KeyError, match="column 'b' reaches .* overflows float64.*rescale the column"):
        column_moments(values, "column 'b'", error=KeyError)


def test_float32_values_are_summed_in_float64():
    t = torch.tensor([1e20, 2e20, 3e20], dtype=torch.float32)
    assert column_moments(t, "c")[1] == pytest.approx(np.std([1e20, 2e20, 3e20]), rel=1e-6)


def test_underflowing_standard_deviation_is_not_called_constant():
    with pytest.raises(ValueError, match="underflows to 0.*rescale"):
        column_moments([1e-170, 2e-170, 3e-170], "column 'a'")


def test_float32_overflow_names_the_value_and_the_fix():
    src = np.array([[1.0], [1e39]])
    with pytest.raises(ValueError, match=r"x holds 1e\+39, which is finite but overflows torch.float32.*model.double"):
        float32_overflow(src, torch.as_tensor(src, dtype=torch.float32), "x", fix="use model.double()")
    float32_overflow(np.array([1.0, np.inf]), torch.tensor([1.0, float("inf")]), "x")   # a real inf: not ours
    float32_overflow(src, torch.as_tensor(src), "x")                                      # float64: nothing to say
