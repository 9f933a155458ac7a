"""MultiFidelityEmulator: from per-fidelity arrays to predictions at every fidelity; the data-driven defaults work
(far better than the training-mean predictor where the audited defaults were not), predmean / free inducing inputs,
the box warning and bad input."""
import warnings

import numpy as np
import pyro
import pytest
import torch

from pyro_dag.datasets.multifidelity import chain_problem
from pyro_dag.emulation import MultiFidelityEmulator, initial_lengthscale


@pytest.fixture(scope="module")
def forrester_fit():
    pyro.clear_param_store()
    p = chain_problem("forrester", [50, 14], num_test=60, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, precision="mean_field", num_inducing=30)
    em.fit(num_steps=40, pretrain_steps=200)
    return p, em


def _rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a) - np.asarray(b)) ** 2)))


def test_predicts_every_fidelity(forrester_fit):
    p, em = forrester_fit
    X = np.linspace(0.05, 0.95, 40)[:, None]
    pred = em.predict(X, num_samples=100)
    assert set(pred) == {"f1", "f2"}
    for f in ("f1", "f2"):
        assert pred[f].mean.shape == (40,) and pred[f].variance.shape == (40,) and pred[f].samples.shape == (100, 40)
        assert bool((pred[f].variance > 0).all())
    # the defaults beat the training-mean predictor by far at both fidelities (the audit's defaults did not:
    # RMSE 0.368 = the mean's on the standard 50 / 14 set)
    for f in ("f1", "f2"):
        truth = p.truth[f](X)[:, 0]
        base = _rmse(truth, np.mean(p.train[f][1]))
        assert _rmse(pred[f].mean, truth) < 0.1 * base, f


def test_predmean_inducing_inputs(forrester_fit):
    p, em = forrester_fit
    Z = em.model.inducing_inputs("f2").detach().numpy()
    assert Z.shape == (14, 2)                       # one per high-fidelity run
    # x part: the high-fidelity design (unit box); z part: the pretrained low fidelity's mean there (standardised)
    x = Z[:, 0] * em.span[0] + em.lower[0]
    np.testing.assert_allclose(np.sort(x), np.sort(p.train["f2"][0][:, 0]), atol=1e-12)
    low = (p.truth["f1"](x[:, None])[:, 0] - em.y_loc["f1"]) / em.y_scale["f1"]
    assert np.abs(Z[:, 1] - low).max() < 0.1
    assert "f2" not in dict(em.model.inducing.named_parameters()) and not any(
        n.startswith("f2") for n, _ in em.model.inducing.named_parameters())   # held fixed, as the paper


def test_free_inducing_inputs_are_learned():
    pyro.clear_param_store()
    p = chain_problem("forrester", [20, 6], num_test=5, seed=1)
    em = MultiFidelityEmulator(p.train, p.parents, inducing_init="free", precision="mean_field", num_inducing=10)
    em.fit(num_steps=3, pretrain_steps=2)
    names = [n for n, _ in em.model.inducing.named_parameters()]
    assert any(n.startswith("f2") for n in names)
    Z = em.model.inducing_inputs("f2").detach()
    assert Z.shape == (6, 2) and bool(torch.isfinite(Z).all())


def test_box_warning_and_bad_input(forrester_fit):
    p, em = forrester_fit
    with pytest.warns(UserWarning, match="outside the design box"):
        em.predict(np.array([[1.5]]), num_samples=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        em.predict(np.array([[0.5]]), num_samples=4)
    with pytest.raises(ValueError, match=r"X must be \[n, 1\]"):
        em.predict(np.ones((3, 2)))
    with pytest.raises(ValueError, match="unknown fidelity"):
        em.predict(np.array([[0.5]]), fidelities=["f9"])
    with pytest.raises(RuntimeError, match="fit the emulator first"):
        MultiFidelityEmulator(p.train, p.parents).predict(np.array([[0.5]]))
    with pytest.raises(ValueError, match="inducing_init must be one of"):
        MultiFidelityEmulator(p.train, p.parents, inducing_init="random")


def test_initial_lengthscale_tracks_the_data():
    rng = np.random.default_rng(0)
    X = rng.random((60, 1))
    smooth, wiggly = initial_lengthscale(X, np.sin(2 * X[:, 0])), initial_lengthscale(X, np.sin(25 * X[:, 0]))
    assert smooth > 3 * wiggly


def test_shapley_through_the_emulator():
    pyro.clear_param_store()
    from pyro_dag.datasets.multifidelity import graphical_problem

    p = graphical_problem(n_low=40, n_high=12, num_test=8, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, precision="mean_field", num_inducing=20)
    em.fit(num_steps=20, pretrain_steps=50)
    res = em.shapley(p.test[0], num_samples=32)
    assert res.players == ["L1", "L2"] and res.mean_share.shape == (8, 2)


def test_fixed_noise_is_held():
    """learn_noise=False: every fidelity's noise stays at ``noise`` (a buffer no optimiser sees) through pretraining
    and joint training, while the kernels still learn."""
    pyro.clear_param_store()
    p = chain_problem("forrester", [20, 6], num_test=5, seed=2)
    em = MultiFidelityEmulator(p.train, p.parents, precision="mean_field", num_inducing=20, noise=1e-5,
                               learn_noise=False)
    em.build()
    before = {n: q.detach().clone() for n, q in em.model.kernels.named_parameters()}
    noise = {f: em.model.likelihoods[f].variance.clone() for f in ("f1", "f2")}
    em.fit(num_steps=5, pretrain_steps=20)
    for f in ("f1", "f2"):
        assert torch.equal(em.model.likelihoods[f].variance, noise[f])
        assert float(noise[f]) == pytest.approx(1e-5, rel=1e-5)
    assert not any("likelihoods" in n for n, _ in em.model.named_parameters())
    assert any(not torch.equal(before[n], q) for n, q in em.model.kernels.named_parameters())
    with pytest.raises(ValueError, match="noise must be a positive variance"):
        MultiFidelityEmulator(p.train, p.parents, noise=0.0)


def test_baseline_report(forrester_fit):
    """The emulator against an exact GP and linear regression on the high fidelity's 14 runs alone, on the same
    held-out cases and in the fidelity's units."""
    from pyro_dag.baselines import BaselineWarning

    p, em = forrester_fit
    X, y = p.test
    with warnings.catch_warnings():
        warnings.simplefilter("error", BaselineWarning)
        rep = em.baseline_report(X, y, num_samples=50, tolerance=1e6)
    assert rep["fidelity"] == "f2" and rep["n_train"] == 14 and rep["n_test"] == len(y)
    assert set(rep["baselines"]) == {"exact_gp", "linear", "mean"}
    assert rep["emulator"]["rmse"] == pytest.approx(_rmse(em.predict(X, ["f2"], num_samples=50)["f2"].mean,
                                                          y[:, 0]))
    assert rep["comparison"]["best_baseline"] in rep["baselines"] and np.isfinite(rep["emulator"]["nlpd"])
    # the low fidelity's runs alone: its own 50 runs
    assert em.baseline_report(X, p.truth["f1"](X)[:, 0], fidelity="f1", num_samples=20, warn=False)["n_train"] == 50
    with pytest.warns(BaselineWarning, match="MultiFidelityEmulator, fidelity 'f2'"):
        em.baseline_report(X, y, num_samples=50, tolerance=1e-6)    # "not better" by a factor 1e6: must warn
    with pytest.raises(ValueError, match="unknown fidelity"):
        em.baseline_report(X, y, fidelity="f9")


@pytest.mark.parametrize("scale", [1e300, 1e160])
def test_outputs_whose_standard_deviation_overflows_are_refused(scale):
    """The emulator used to end with an infinite output scale and NaN predictions."""
    from pyro_dag import DAGInputError

    X = np.linspace(0, 1, 8)[:, None]
    with pytest.raises(DAGInputError, match="fidelity 'high': y reaches .* overflows float64.*rescale"):
        MultiFidelityEmulator({"low": (X, np.sin(6 * X[:, 0])), "high": (X[::2], np.cos(6 * X[::2, 0]) * scale)},
                              parents={"high": ["low"]})


def test_exact_fit_on_nested_designs():
    """fit(method="exact"): every fidelity on its collapsed bound; on Forrester 50 / 14 (nested) it is far better than
    the training mean and at least as good as a short stochastic fit, and a design that is not nested is refused."""
    pyro.clear_param_store()
    p = chain_problem("forrester", [50, 14], num_test=60, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, num_inducing=50).fit(method="exact")
    assert set(em.history["exact"]) == {"f1", "f2"}
    X = np.linspace(0.05, 0.95, 40)[:, None]
    truth = p.truth["f2"](X)[:, 0]
    err = _rmse(em.predict(X, num_samples=100)["f2"].mean, truth)
    assert err < 0.05 * _rmse(truth, np.mean(p.train["f2"][1])), err
    # the high fidelity run where the low one was not: its input is latent there
    pyro.clear_param_store()
    (X1, y1), (X2, y2) = p.train["f1"], p.train["f2"]
    shifted = {"f1": (X1[::2], y1[::2]), "f2": (X2 + 0.013, y2)}
    with pytest.raises(ValueError, match="fidelity 'f2'.*not nested.*method='svi'"):
        MultiFidelityEmulator(shifted, p.parents).fit(method="exact")
    with pytest.raises(ValueError, match="method must be one of"):
        MultiFidelityEmulator(p.train, p.parents).fit(method="lbfgs")


def test_predict_after_an_interrupted_fit_says_the_fit_did_not_finish():
    """Earlier a RuntimeError saying to fit first (after a fit that had run for a while)."""
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from pyro_dag.errors import NotFittedError

    pyro.clear_param_store()
    rng = np.random.default_rng(0)
    X = rng.random((10, 1))
    em = MultiFidelityEmulator({"lo": (X, np.sin(8 * X[:, 0])), "hi": (X[:5], 2 * np.sin(8 * X[:5, 0]))},
                               parents={"hi": ["lo"]})
    with pytest.raises(NotFittedError, match=r"fit the emulator first"):
        em.predict(X)

    def interrupt(*a):
        raise KeyboardInterrupt

    handle = register_optimizer_step_pre_hook(interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            em.fit(num_steps=6, pretrain_steps=2)
    finally:
        handle.remove()
    with pytest.raises(NotFittedError, match=r"the last fit of the emulator did not finish.*call em.fit\(...\) again"):
        em.predict(X)
    em.fit(num_steps=6, pretrain_steps=2)
    assert np.isfinite(em.predict(X, num_samples=4)["hi"].mean).all()
