"""pyro_dag.emulation.arguments: the emulator's bounds and fit arguments are refused by name before any work."""
import numpy as np
import pytest

from pyro_dag import DAGInputError
from pyro_dag.emulation import MultiFidelityEmulator
from pyro_dag.emulation.arguments import check_fit_arguments


def _fidelities():
    X = np.linspace(0, 1, 8)[:, None]
    return {"low": (X, np.sin(6 * X[:, 0])), "high": (X[::2], np.cos(6 * X[::2, 0]))}


def test_bounds_that_exclude_every_design_are_refused():
    with pytest.raises(DAGInputError, match=r"bounds \[\[5.0, 6.0\]\] exclude every design point"):
        MultiFidelityEmulator(_fidelities(), {"high": ["low"]}, bounds=[[5.0, 6.0]])
    with pytest.warns(UserWarning, match="4 of 8 design points lie outside bounds"):
        MultiFidelityEmulator(_fidelities(), {"high": ["low"]}, bounds=[[0.0, 0.45]])
    with pytest.raises(DAGInputError, match="lower < upper"):
        MultiFidelityEmulator(_fidelities(), {"high": ["low"]}, bounds=[[1.0, 0.0]])


@pytest.mark.parametrize("kwargs, message", [
    (dict(num_steps=0), "num_steps must be an integer >= 1"),
    (dict(num_steps=-5), "num_steps must be an integer >= 1"),
    (dict(num_steps=2.5), "num_steps must be an integer >= 1"),
    (dict(lr=0.0), "lr must be a positive finite number"),
    (dict(lr=float("nan")), "lr must be a positive finite number"),
    (dict(pretrain_lr=-1.0), "pretrain_lr must be a positive finite number"),
    (dict(pretrain_steps=-1), "pretrain_steps must be an integer >= 0"),
    (dict(num_particles=0), "num_particles must be an integer >= 1"),
    (dict(num_steps=10, warm_start=10), r"warm_start \(10\) must be smaller than num_steps \(10\)"),
])
def test_fit_arguments_are_checked_before_pretraining(monkeypatch, kwargs, message):
    """They were checked by train() after the pretraining (and the chordal guide turned num_steps <= warm_start
    into one step)."""
    import pyro_dag.emulation.emulator as emulator

    def no_pretraining(*args, **kw):
        raise AssertionError("pretraining ran before the arguments were checked")

    monkeypatch.setattr(emulator, "pretrain_collapsed", no_pretraining)
    em = MultiFidelityEmulator(_fidelities(), {"high": ["low"]})
    with pytest.raises(ValueError, match=message):
        em.fit(**dict(dict(num_steps=5, pretrain_steps=2), **kwargs))
    assert em.model is None                                                          # nothing was built


def test_default_warm_start_is_a_sixth():
    assert check_fit_arguments(num_steps=12, pretrain_steps=0, warm_start=None, num_particles=4, chordal=True,
                               lr=1e-3) == 2
    assert check_fit_arguments(num_steps=3, pretrain_steps=0, warm_start=5, num_particles=4, chordal=False,
                               lr=1e-3) == 5


@pytest.mark.parametrize("kwargs, name", [
    (dict(num_steps=-5), "num_steps"), (dict(lr=float("nan")), "lr"),
    (dict(pretrain_steps=10), "pretrain_steps"), (dict(num_particles=8), "num_particles"),
])
def test_step_options_with_the_exact_fit_are_refused(kwargs, name):
    """Issue 42: fit(method="exact", num_steps=-5, lr=nan) was accepted (the exact fit takes no steps)."""
    em = MultiFidelityEmulator(_fidelities(), {"high": ["low"]})
    # the refusal names the option and the method it belongs to
    with pytest.raises(ValueError, match=f"{name}.*apply to method='svi' only, not method='exact'"):
        em.fit(method="exact", **kwargs)
    assert em.model is None and em.guide is None                 # refused before any work
