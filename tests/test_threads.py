import pytest
import torch

from pyro_dag.threads import limit_threads


def test_limit_threads_restores_callers_setting():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with limit_threads(1):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with pytest.raises(RuntimeError):
            with limit_threads(1):
                raise RuntimeError("boom")
        assert torch.get_num_threads() == 2  # restored on error too
        with limit_threads(None):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_limit_threads_limits_blas():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    with limit_threads(1):
        infos = threadpoolctl.threadpool_info()
        assert all(info["num_threads"] == 1 for info in infos)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_limit_threads_rejects_bad_values(bad):
    with pytest.raises(ValueError, match="num_threads"):
        with limit_threads(bad):
            pass
