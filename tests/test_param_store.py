"""Two models (or guides) with the same names in one process: Pyro's global parameter store would silently tie them.

A PyroModule's parameters live in the global store under their module path, and a name the store already holds
returns the stored tensor, so a second DAGDGP with the same nodes starts from the first one's trained values and
shares its tensors. These tests reproduce that (under ``train`` and a plain ``SVI`` loop with ``AutoNormal`` and
with ``AutoStructuredGuide``), check the warning that names the parameters and the fixes, and that the fixes
(``name=``, ``pyro.clear_param_store()``, ``module_local_params``) keep the models apart, while the workflows
that rightly reuse stored values (the same model again, a resumed checkpoint, a loaded parameter store) stay
silent.
"""
import contextlib
import warnings

import pyro
import pytest
import torch
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoNormal

from helpers import chain_problem
from pyro_dag import DAGDGP
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO, train
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.param_store import ParamStoreCollisionWarning, param_store_names


def _chain(name=None):
    """``chain_problem``'s model ``x -> a -> b`` (b observed), with an optional parameter-name prefix."""
    model, inputs, data = chain_problem()
    if name is not None:
        model = DAGDGP(model.graph, num_inducing=5, likelihoods={"b": Gaussian(0.01)}, name=name).double()
    return model, inputs, data


def _fit(model, guide, inputs, data, how, steps=15):
    if how == "train":
        train(model, guide, inputs, data, num_steps=steps, lr=0.05, progress=False)
        return
    elbo = Trace_ELBO() if isinstance(guide, AutoNormal) else DAGELBO()
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.05}), elbo)
    for _ in range(steps):
        svi.step(inputs, data)


def _guide(kind, model, **kw):
    return AutoNormal(model, **kw) if kind == "autonormal" else AutoStructuredGuide(model, **kw)


def _other_data(inputs, data):
    return inputs, {"b": 2.0 * data["b"].flip(0)}


@contextlib.contextmanager
def _silent():
    """A context in which a ParamStoreCollisionWarning fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ParamStoreCollisionWarning)
        yield


@pytest.mark.parametrize("how,kind", [("train", "structured"), ("svi", "autonormal"), ("svi", "structured")])
def test_a_second_model_with_the_same_nodes_warns_naming_the_tied_parameters(how, kind):
    model_a, inputs, data = chain_problem()
    _fit(model_a, _guide(kind, model_a), inputs, data, how)
    trained = {n: p.detach().clone() for n, p in model_a.named_parameters()}
    model_b, _, _ = chain_problem()
    inputs_b, data_b = _other_data(inputs, data)
    # structured guides are kept apart by name, so that only the models collide (AutoNormal takes no name)
    guide_b = _guide(kind, model_b, **({} if kind == "autonormal" else {"name": "guide_b"}))
    with pytest.warns(ParamStoreCollisionWarning) as record:
        svi = SVI(model_b, guide_b, pyro.optim.Adam({"lr": 0.0}), Trace_ELBO() if kind == "autonormal" else DAGELBO())
        svi.step(inputs_b, data_b)
    messages = [str(w.message) for w in record if w.category is ParamStoreCollisionWarning]
    assert len(messages) == 1, messages  # one warning, not one per check
    message = messages[0]
    assert "another DAGDGP" in message and "'kernels.a.base.lengthscale'" in message
    assert "pyro.clear_param_store()" in message and "name=" in message and "module_local_params=True" in message
    # what the warning is about: B runs with A's trained tensors (Pyro's store semantics), not its own
    assert all(torch.equal(p.detach(), trained[n]) for n, p in model_b.named_parameters())
    assert any(p is q for p in model_b.parameters() for q in model_a.parameters())


def test_a_second_structured_guide_with_the_same_name_warns():
    model_a, inputs, data = chain_problem()
    _fit(model_a, AutoStructuredGuide(model_a), inputs, data, "svi")
    model_b, _, _ = _chain(name="b")  # the models are kept apart: only the guides collide
    guide_b = AutoStructuredGuide(model_b)
    with pytest.warns(ParamStoreCollisionWarning, match=r"another AutoStructuredGuide .*"
                                                        r"'AutoStructuredGuide\.family\.locs\.a'.*name='guide_b'"):
        guide_b(inputs, data)


@pytest.mark.parametrize("kind", ["autonormal", "structured"])
def test_name_prefixes_keep_two_models_apart(kind):
    model_a, inputs, data = chain_problem()
    _fit(model_a, _guide(kind, model_a), inputs, data, "svi")
    a_values = {n: p.detach().clone() for n, p in model_a.named_parameters()}
    inputs_b, data_b = _other_data(inputs, data)
    model_b, _, _ = _chain(name="b")
    with _silent():  # (AutoNormal takes no name: its guides share parameters as Pyro's always do, unreported)
        _fit(model_b, _guide(kind, model_b, **({} if kind == "autonormal" else {"name": "guide_b"})), inputs_b,
             data_b, "svi", steps=1)
    names = set(pyro.get_param_store().keys())
    assert "b.kernels.a.base.lengthscale" in names and "b.inducing.a" in names
    assert not any(p is q for p in model_b.parameters() for q in model_a.parameters())
    # A is untouched by B's step, and B started from its own initialisation (its inducing inputs from its data)
    assert all(torch.equal(p.detach(), a_values[n]) for n, p in model_a.named_parameters())
    assert not torch.equal(model_b.inducing_inputs("a").detach(), model_a.inducing_inputs("a").detach())


def test_module_local_params_keep_two_models_apart():
    with pyro.settings.context(module_local_params=True):
        model_a, inputs, data = chain_problem()
        _fit(model_a, AutoStructuredGuide(model_a), inputs, data, "svi")
        a_values = {n: p.detach().clone() for n, p in model_a.named_parameters()}
        model_b, _, _ = chain_problem()
        with _silent():
            _fit(model_b, AutoStructuredGuide(model_b), inputs, data, "svi", steps=2)
        assert not any(p is q for p in model_b.parameters() for q in model_a.parameters())
        assert all(torch.equal(p.detach(), a_values[n]) for n, p in model_a.named_parameters())


def test_checkpointing_under_module_local_params_is_refused(tmp_path):
    # The checkpoint reads Pyro's global store, which module-local parameters leave empty: without the check it
    # would save no parameters and a resume would silently restart from the initial values.
    with pyro.settings.context(module_local_params=True):
        model, inputs, data = chain_problem()
        with pytest.raises(ValueError, match="module_local_params"):
            train(model, AutoStructuredGuide(model), inputs, data, num_steps=2, progress=False,
                  checkpoint=tmp_path / "run.pt")
    assert not (tmp_path / "run.pt").exists()


def test_clear_param_store_between_models_is_silent():
    model_a, inputs, data = chain_problem()
    _fit(model_a, AutoStructuredGuide(model_a), inputs, data, "train")
    pyro.clear_param_store()
    model_b, _, _ = chain_problem()
    with _silent():
        _fit(model_b, AutoStructuredGuide(model_b), inputs, data, "train")
    assert not any(p is q for p in model_b.parameters() for q in model_a.parameters())


def test_the_same_model_and_guide_again_are_silent():
    model, inputs, data = chain_problem()
    guide = AutoStructuredGuide(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _fit(model, guide, inputs, data, "train")
        after_first = {n: p.detach().clone() for n, p in model.named_parameters()}
        _fit(model, guide, inputs, data, "svi")
        _fit(model, AutoStructuredGuide(model, name="another"), inputs, data, "train")  # a new guide, same model
        model.predict(guide, inputs, num_samples=2)
    assert not [w for w in caught if issubclass(w.category, ParamStoreCollisionWarning)]
    # the later fits continued the same model's parameters (they moved on from the first fit's values)
    assert any(not torch.equal(p.detach(), after_first[n]) for n, p in model.named_parameters())


def test_a_stale_model_is_reported_even_when_it_is_gone():
    # the notebook case: `model = DAGDGP(...)` rebinds the name, the old model is garbage, its tensors stay stored
    model, inputs, data = chain_problem()
    _fit(model, AutoStructuredGuide(model), inputs, data, "svi")
    del model
    import gc

    gc.collect()
    model, _, _ = chain_problem()
    with pytest.warns(ParamStoreCollisionWarning, match="another DAGDGP"):
        model.setup(inputs, data)


def test_a_model_run_again_after_another_took_its_names_warns():
    model_b, inputs, data = chain_problem()
    _fit(model_b, AutoStructuredGuide(model_b, name="guide_b"), inputs, data, "svi", steps=2)
    pyro.clear_param_store()
    model_a, _, _ = chain_problem()
    _fit(model_a, AutoStructuredGuide(model_a), inputs, data, "svi", steps=2)  # A now holds the names
    with pytest.warns(ParamStoreCollisionWarning, match="another DAGDGP"):
        model_b(inputs, data)


def test_a_loaded_param_store_initialises_a_new_model_silently(tmp_path):
    # Pyro's documented way to restore saved values: load the store, then build the model
    model, inputs, data = chain_problem()
    _fit(model, AutoStructuredGuide(model), inputs, data, "svi")
    saved = {n: p.detach().clone() for n, p in model.named_parameters()}
    pyro.get_param_store().save(tmp_path / "params.pt")
    pyro.clear_param_store()
    pyro.get_param_store().load(tmp_path / "params.pt")
    rebuilt, _, _ = chain_problem()
    with _silent():
        rebuilt(inputs, data)
    assert all(torch.equal(p.detach(), saved[n]) for n, p in rebuilt.named_parameters())


def test_resuming_a_checkpoint_with_rebuilt_objects_in_the_same_process_is_silent(tmp_path):
    path = tmp_path / "run.pt"
    model, inputs, data = chain_problem()
    first = train(model, AutoStructuredGuide(model), inputs, data, num_steps=6, checkpoint=path, checkpoint_every=3,
                  progress=False)
    rebuilt, _, _ = chain_problem()
    with _silent():
        again = train(rebuilt, AutoStructuredGuide(rebuilt), inputs, data, num_steps=8, checkpoint=path,
                      resume=True, progress=False)
    assert again.resumed_from == 6 and again.losses[:6] == first.losses


def test_a_second_warm_started_run_does_not_start_from_the_first_runs_mean_field_guide():
    # train's warm-start guide has a fixed name: a second run (other model and guide names) must start it afresh
    def run(name):
        pyro.set_rng_seed(0)
        model, inputs, data = _chain(name=name)
        return train(model, AutoStructuredGuide(model, name=f"guide_{name}"), inputs, data, num_steps=10,
                     warm_start=6, progress=False).losses

    first = run("first")
    with _silent():
        second = run("second")
    pyro.clear_param_store()
    alone = run("second")
    assert second == alone and second[:6] == first[:6]


def test_param_store_names_match_the_names_pyro_uses():
    model, inputs, data = _chain(name="m")
    guide = AutoStructuredGuide(model, name="g")
    _fit(model, guide, inputs, data, "svi", steps=1)
    stored = dict(pyro.get_param_store().named_parameters())
    for module in (model, guide):
        names = param_store_names(module)
        assert names and all(stored[n] is t for n, t in names.items() if n in stored)
    # every stored name is one of theirs; the only name not stored is the unobserved node's noise, never read
    ours = set(param_store_names(model)) | set(param_store_names(guide))
    assert set(stored) <= ours and ours - set(stored) == {"m.likelihoods.a.variance"}


def test_bad_name_is_refused():
    model, _, _ = chain_problem()
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        DAGDGP(model.graph, name="")
