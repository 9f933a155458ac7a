"""The DAGELBO -> guide -> model hand-off is a Pyro effect handler on the handler stack, not module state."""
import pyro
import pytest
import torch
from pyro import poutine
from pyro.poutine.runtime import _PYRO_STACK

from helpers import chain_problem, setup_guide
from pyro_dag.infer import DAGELBO
from pyro_dag.dgp.handoff import SuspendMessenger, current_estimator, suspended
from pyro_dag.infer.context import MarginalEstimator


def test_estimator_is_a_messenger_on_the_pyro_stack():
    assert current_estimator() is None
    with MarginalEstimator(2) as est:
        assert isinstance(est, poutine.messenger.Messenger)
        assert _PYRO_STACK[-1] is est
        assert current_estimator() is est
        with poutine.trace(), poutine.block():  # other handlers above it do not hide it
            assert current_estimator() is est
    assert current_estimator() is None
    assert est not in _PYRO_STACK


def test_nesting_and_suspension():
    with MarginalEstimator(1) as outer:
        with MarginalEstimator(3) as inner:
            assert current_estimator() is inner
            with suspended() as s:
                assert isinstance(s, SuspendMessenger)
                assert current_estimator() is None
                with MarginalEstimator(5) as innermost:  # an estimator entered inside a suspension is seen
                    assert current_estimator() is innermost
                assert current_estimator() is None
            assert current_estimator() is inner
        assert current_estimator() is outer
    assert current_estimator() is None


def test_suspended_works_as_a_decorator():
    seen = []

    @suspended()
    def f():
        seen.append(current_estimator())

    with MarginalEstimator(1):
        f()
    assert seen == [None]


def test_an_exception_leaves_no_estimator_active():
    with pytest.raises(RuntimeError, match="boom"):
        with MarginalEstimator(1):
            with suspended():
                raise RuntimeError("boom")
    assert current_estimator() is None
    assert not any(isinstance(f, (MarginalEstimator, SuspendMessenger)) for f in _PYRO_STACK)


def test_a_failing_dagelbo_evaluation_leaves_no_estimator_active():
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data)

    def bad_model(*args, **kwargs):
        model(*args, **kwargs)
        raise RuntimeError("model failed")

    with pytest.raises(RuntimeError, match="model failed"):
        DAGELBO(num_particles=2).differentiable_loss(bad_model, guide, inputs, data)
    assert current_estimator() is None
    # the model then runs as ordinary Pyro code again: it samples its inducing sites
    trace = poutine.trace(model).get_trace(inputs, data)
    assert "a.u" in trace.nodes and "b.u" in trace.nodes


def test_the_model_sees_the_estimator_of_its_own_evaluation():
    """Two DAGELBOs (different S) evaluated one inside the other: each model run sees its own estimator."""
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data)
    seen = []

    def spy_model(*args, **kwargs):
        seen.append(current_estimator().num_particles)
        return model(*args, **kwargs)

    def outer_model(*args, **kwargs):
        seen.append(current_estimator().num_particles)
        with poutine.block():  # keep the inner evaluation's sites out of the outer traces
            inner_loss = DAGELBO(num_particles=3).differentiable_loss(spy_model, guide, *args, **kwargs)
        seen.append(current_estimator().num_particles)  # back to the outer estimator
        assert torch.isfinite(inner_loss)
        return model(*args, **kwargs)

    loss = DAGELBO(num_particles=2).differentiable_loss(outer_model, guide, inputs, data)
    assert torch.isfinite(loss)
    assert seen == [2, 3, 2]
    assert current_estimator() is None


def test_estimators_of_separate_evaluations_are_separate():
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data)
    published = []

    class Recording(MarginalEstimator):
        def publish(self, key, posterior):
            published.append(id(self))
            super().publish(key, posterior)

    with Recording(2) as a:
        guide(inputs, data)
    with Recording(2) as b:
        guide(inputs, data)
    assert published == [id(a), id(b)]
    assert list(a.posteriors) == list(b.posteriors) and len(a.kl_terms) == len(b.kl_terms) == 1


def test_guide_outside_an_estimator_samples_the_inducing_sites():
    model, inputs, data = chain_problem()
    guide = setup_guide(model, inputs, data)
    with MarginalEstimator(1):
        with suspended():
            tr = poutine.trace(guide).get_trace(inputs, data)
    assert "a.u" in tr.nodes  # suspended: ordinary Pyro sampling
    with MarginalEstimator(1) as est:
        tr = poutine.trace(guide).get_trace(inputs, data)
    assert "a.u" not in tr.nodes and len(est.posteriors) == 1  # published instead


def test_marginal_estimator_rejects_bad_particles():
    with pytest.raises(ValueError, match="num_particles"):
        MarginalEstimator(0)
    assert pyro.get_param_store() is not None
