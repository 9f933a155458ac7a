import os

import pyro
import pytest
import torch

# One thread: on 2-core machines two threads under load are much slower, and results stay reproducible.
torch.set_num_threads(1)
os.environ.setdefault("MPLBACKEND", "Agg")

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


@pytest.fixture(autouse=True)
def _fresh_pyro():
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    yield
    pyro.clear_param_store()


def pytest_addoption(parser):
    parser.addoption("--device", default=None, help="run device-parametrised tests only on this device")


@pytest.fixture(params=DEVICES)
def device(request):
    chosen = request.config.getoption("--device")
    if chosen is not None and request.param != chosen:
        pytest.skip(f"--device={chosen}")
    return torch.device(request.param)
