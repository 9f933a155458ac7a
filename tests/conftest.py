import os

import pyro
import pytest
import torch
from hypothesis import settings

# Property tests draw the same examples on every run (derandomize=True, no example database): a landing must not
# fail by chance (issue 42). The random search stays available: HYPOTHESIS_PROFILE=random pytest tests/...
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("random", derandomize=False, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

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


def pytest_collection_modifyitems(config, items):
    """Tests marked ``early`` (the docs build, the guide's examples, the Quickstart: tens of seconds each) run first,
    the others keep their order. Under pytest-xdist's worksteal scheduling (setup.cfg) a long test left for the end
    would keep one worker busy while the other has nothing left to take over."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)


def pytest_addoption(parser):
    parser.addoption("--device", default=None, help="run device-parametrised tests only on this device")


@pytest.fixture
def float64_default():
    """float64 as torch's default dtype inside one test, restored after it; use with
    ``pytestmark = pytest.mark.usefixtures("float64_default")`` (a module-level ``set_default_dtype`` leaks into every
    later test)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)


@pytest.fixture(params=DEVICES)
def device(request):
    chosen = request.config.getoption("--device")
    if chosen is not None and request.param != chosen:
        pytest.skip(f"--device={chosen}")
    return torch.device(request.param)
