"""fit(method="auto"): exact fits, the fusion kernel chosen by evidence, the noise rule, non-nested designs."""
import math
import warnings

import numpy as np
import pyro
import pytest
import torch

from pyro_dag.datasets.multifidelity import chain_problem
from pyro_dag.emulation import MultiFidelityEmulator
from pyro_dag.emulation.selection import exact_evidence, loo_log_density
from pyro_dag.kernels import RBF


def _rmse(a, b):
    return float(np.sqrt(np.mean((np.asarray(a).reshape(-1) - np.asarray(b).reshape(-1)) ** 2)))


def test_exact_evidence_and_loo_match_dense_formulas():
    """The log marginal likelihood and the closed-form leave-one-out density against a dense reference (refitting
    the GP without each point)."""
    gen = torch.Generator().manual_seed(0)
    X = torch.rand(12, 2, generator=gen, dtype=torch.float64)
    y = torch.sin(3 * X[:, 0]) + X[:, 1]
    k = RBF(ard=True, variance=1.3, lengthscale=0.4).double().bind(2)
    noise = 1e-2
    with torch.no_grad():
        K = k(X) + noise * torch.eye(12, dtype=torch.float64)
        ref = torch.distributions.MultivariateNormal(torch.zeros(12, dtype=torch.float64), K).log_prob(y)
        # the fits add a jitter of 1e-10 of the mean diagonal: agreement to ~1e-8
        assert float(exact_evidence(k, X, y, noise)) == pytest.approx(float(ref), rel=1e-7)
        lpd = []
        for i in range(12):
            keep = [j for j in range(12) if j != i]
            Kk = K[keep][:, keep]
            kx = K[i, keep]
            m = kx @ torch.linalg.solve(Kk, y[keep])
            v = K[i, i] - kx @ torch.linalg.solve(Kk, kx)
            lpd.append(float(torch.distributions.Normal(m, v.sqrt()).log_prob(y[i])))
    assert loo_log_density(k, X, y, noise) == pytest.approx(np.mean(lpd), rel=1e-6)


def test_auto_fit_chooses_by_evidence_and_reports_it():
    """On Forrester 50 / 14 (nested, deterministic) the default fit is exact, detects the deterministic simulator
    (nugget noise), keeps the candidate with the smallest refitted cross-validation error (14 runs: few), beats the
    training mean by far, and reports every candidate in .selection and in baseline_report."""
    pyro.clear_param_store()
    p = chain_problem("forrester", [50, 14], num_test=60, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, seed=0).fit()
    sel = em.selection
    assert set(sel.chosen) == {"f1", "f2"} and sel.chosen["f1"] == "rbf"
    cands = [c for c in sel.candidates if c.fidelity == "f2"]
    assert {c.kernel for c in cands} == {"multifidelity", "ar1", "nargp"}
    assert sel.criterion == {"f1": "evidence", "f2": "cv"}
    best = min(cands, key=lambda c: c.cv_mse)
    assert sel.chosen["f2"] == best.kernel
    assert all(math.isfinite(c.loo) and math.isfinite(c.cv_mse) for c in cands)
    assert sel.deterministic == {"f1": True, "f2": True}
    assert float(em.model.likelihoods["f2"].variance) < 1e-5
    X, y = p.test
    pred = em.predict(X, num_samples=100)["f2"]
    assert _rmse(pred.mean, y) < 0.02 * _rmse(y, np.mean(p.train["f2"][1]))
    assert "f2" in sel.table() and "*" in sel.table() and "cv" in sel.table()


@pytest.mark.slow
def test_baseline_report_carries_the_selection():
    pyro.clear_param_store()
    p = chain_problem("forrester", [50, 14], num_test=60, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, seed=0).fit()
    best = min((c for c in em.selection.candidates if c.fidelity == "f2"), key=lambda c: c.cv_mse)
    X, y = p.test
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rep = em.baseline_report(X, y, warn=False)
    assert rep["selection"]["chosen"]["f2"] == best.kernel
    assert len(rep["selection"]["candidates"]) == 4


def test_auto_fit_learns_the_noise_of_a_noisy_simulator():
    pyro.clear_param_store()
    p = chain_problem("currin", [60, 20], num_test=10, seed=1)
    rng = np.random.default_rng(0)
    train = {f: (X, y + 0.3 * rng.standard_normal(y.shape)) for f, (X, y) in p.train.items()}
    em = MultiFidelityEmulator(train, p.parents, kernel="ar1").fit()
    assert em.selection.deterministic["f1"] is False
    assert {c.kernel for c in em.selection.candidates if c.fidelity == "f2"} == {"ar1"}
    assert float(em.model.likelihoods["f1"].variance) > 1e-3


def test_auto_fit_on_designs_that_are_not_nested_warns_and_imputes():
    pyro.clear_param_store()
    p = chain_problem("forrester", [40, 12], num_test=60, seed=0)
    (X1, y1), (X2, y2) = p.train["f1"], p.train["f2"]
    X2s = np.clip(X2 + 0.013, 0, 1)
    train = {"f1": (X1, y1), "f2": (X2s, p.truth["f2"](X2s))}
    with pytest.warns(UserWarning, match="not nested.*'f2' was run at 12 points"):
        em = MultiFidelityEmulator(train, p.parents).fit()
    assert em.selection.imputed == {"f2": 12}
    X, y = p.test
    assert _rmse(em.predict(X, num_samples=100)["f2"].mean, y) < 0.05 * _rmse(y, np.mean(y2))


def test_step_options_select_svi_and_are_refused_elsewhere():
    pyro.clear_param_store()
    p = chain_problem("forrester", [20, 6], num_test=10, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents)
    with pytest.raises(ValueError, match=r"\['num_steps'\] apply to method='svi' only"):
        em.fit(num_steps=5, method="auto")
    em.fit(num_steps=3, pretrain_steps=2)
    assert "train" in em.history and em.selection is None


def test_an_auto_fit_saves_and_loads(tmp_path):
    pyro.clear_param_store()
    p = chain_problem("forrester", [30, 8], num_test=20, seed=2)
    em = MultiFidelityEmulator(p.train, p.parents, kernel="ar1").fit()
    X = p.test[0]
    before = em.predict(X, num_samples=50, seed=3)["f2"]
    path = em.save(tmp_path / "em.pt")
    pyro.clear_param_store()
    other = MultiFidelityEmulator(p.train, p.parents, kernel="ar1").load(path)
    after = other.predict(X, num_samples=50, seed=3)["f2"]
    np.testing.assert_allclose(after.mean, before.mean, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(after.variance, before.variance, rtol=1e-10, atol=1e-14)
    assert other.selection.chosen == em.selection.chosen


def test_linked_simulators_fed_by_others_only():
    """x -> s1 -> s2 (s2 sees no input: connect_input=["s1"]): s2 gets an ARD RBF on s1, and the prediction of s2
    from x through s1 is accurate and not over-confident (the chain propagates s1's uncertainty)."""
    pyro.clear_param_store()
    rng = np.random.default_rng(0)
    X = rng.random((60, 2))
    s1 = lambda X: np.sin(2 * np.pi * X[:, 0]) + X[:, 1]  # noqa: E731
    s2 = lambda v: np.sin(2.0 * v) + 0.3 * v  # noqa: E731
    em = MultiFidelityEmulator({"s1": (X, s1(X)), "s2": (X, s2(s1(X)))}, parents={"s2": ["s1"]},
                               connect_input=["s1"], bounds=np.array([[0.0, 1.0], [0.0, 1.0]])).fit()
    assert em.selection.chosen == {"s1": "rbf", "s2": "rbf"}
    Xt = rng.random((200, 2))
    pred = em.predict(Xt, fidelities=["s2"], num_samples=200)["s2"]
    truth = s2(s1(Xt))
    err = pred.mean - truth
    assert _rmse(pred.mean, truth) < 0.05 * truth.std()
    assert np.mean(np.abs(err) <= 1.96 * pred.std) > 0.85


def test_exact_mean_of_a_three_level_chain_matches_the_model():
    """The exact posterior mean that imputes a parent's missing runs (``_exact_mean``) equals the fitted model's
    prediction on a 3-level chain, where two fusion kernels share their short parameter names (each is evaluated
    in a parameter-store scope of its own; in one shared scope the top level read the middle one's
    hyperparameters)."""
    from pyro_dag.emulation.auto_fit import AUTO_MAX_EXACT

    pyro.clear_param_store()
    p = chain_problem("hartmann3", [60, 30, 12], num_test=40, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, seed=0, kernel="ar1").fit()
    sel, fitted = em.selection, {}
    for f in em.mf.fidelities:
        Z, y, _, _ = em._auto_rows(f, fitted or None, AUTO_MAX_EXACT, sel.deterministic)
        _, order, _, Zo = em._auto_columns(f, Z)
        chosen = next(c for c in sel.candidates if c.fidelity == f and c.kernel == sel.chosen[f])
        fitted[f] = (chosen.kernel_module, chosen.noise, Zo, y, order)
    X = p.test[0]
    xq = torch.as_tensor(em._scale_x(X), dtype=torch.float64)
    pred = em.predict(X, fidelities=["f3"], num_samples=400)["f3"]
    exact = em._exact_mean("f3", xq, fitted).numpy() * em.y_scale["f3"] + em.y_loc["f3"]
    # the model's mean propagates the lower fidelities' (small) uncertainty by sampling: agreement to ~1 % of sd
    assert _rmse(exact, pred.mean) < 0.02 * np.std(p.train["f3"][1])


def test_cv_variance_scale_without_refit_is_the_closed_form_leave_one_out():
    """n folds and no refit: the held-out residuals are the closed-form leave-one-out ones (a dense reference for
    the fold bookkeeping); with refits the factor is positive and finite, and the kernel is left as it was."""
    from pyro_dag.emulation.selection import cv_variance_scale, loo_variance_scale

    gen = torch.Generator().manual_seed(1)
    X = torch.rand(15, 2, generator=gen, dtype=torch.float64)
    y = torch.sin(4 * X[:, 0]) * X[:, 1]
    y = (y - y.mean()) / y.std()
    k = RBF(ard=True, variance=0.7, lengthscale=0.5).double().bind(2)
    noise = 1e-4
    ref = loo_variance_scale(k, X, y, noise)
    assert cv_variance_scale(k, X, y, noise, folds=15, max_iter=0) == pytest.approx(ref, rel=1e-6)
    before = [p.detach().clone() for p in k.parameters()]
    c = cv_variance_scale(k, X, y, noise, folds=5, seed=0)
    assert math.isfinite(c) and c > 0
    assert all(torch.equal(a, b) for a, b in zip(before, k.parameters()))


def test_auto_fit_widens_a_few_runs_intervals_by_refitted_cross_validation():
    """Currin 200 / 25 (deterministic): the high fidelity's maximum-likelihood intervals covered 70 % of test points;
    the refitted cross-validation factor (> 1, recorded on the chosen candidate) brings the coverage into
    [0.85, 0.99] and leaves the mean as it was."""
    pyro.clear_param_store()
    p = chain_problem("currin", [200, 25], num_test=300, seed=0)
    X, _ = p.test
    truth = p.truth["f2"](X).reshape(-1)
    em = MultiFidelityEmulator(p.train, p.parents, seed=0, bounds=p.bounds).fit()
    chosen = next(c for c in em.selection.candidates if c.fidelity == "f2" and c.kernel == em.selection.chosen["f2"])
    assert chosen.variance_scale > 1.5
    pred = em.predict(X, fidelities=["f2"], num_samples=200)["f2"]
    assert 0.85 <= np.mean(np.abs(pred.mean - truth) <= 1.96 * pred.std) <= 0.99
    pyro.clear_param_store()
    raw = MultiFidelityEmulator(p.train, p.parents, seed=0, bounds=p.bounds, calibrate=False).fit()
    base = raw.predict(X, fidelities=["f2"], num_samples=200)["f2"]
    assert np.mean(np.abs(base.mean - truth) <= 1.96 * base.std) < 0.8
    assert _rmse(base.mean, pred.mean) < 0.05 * _rmse(pred.mean, truth)


def test_many_runs_choose_by_evidence():
    """A refined fidelity with more runs than CV_SELECT_MAX_RUNS keeps the candidate with the largest evidence (no
    cross-validation scores computed)."""
    from pyro_dag.emulation.auto_fit import CV_SELECT_MAX_RUNS

    pyro.clear_param_store()
    p = chain_problem("forrester", [90, CV_SELECT_MAX_RUNS + 5], num_test=10, seed=0)
    em = MultiFidelityEmulator(p.train, p.parents, seed=0).fit()
    cands = [c for c in em.selection.candidates if c.fidelity == "f2"]
    assert em.selection.criterion["f2"] == "evidence"
    assert em.selection.chosen["f2"] == max(cands, key=lambda c: c.evidence).kernel
    assert all(math.isnan(c.cv_mse) for c in cands)


def test_coverage_scale_is_the_conformal_quantile():
    """The factor's intervals cover ``⌈level (m + 1)⌉`` of ``m`` residuals, one fewer with a slightly smaller factor
    (brute force over the scores); on many Gaussian residuals of variance ``s² σ²`` it recovers ``s²`` (Monte
    Carlo); with fewer runs than the level resolves, the largest score."""
    from pyro_dag.emulation.selection import coverage_scale

    gen = torch.Generator().manual_seed(3)
    var = torch.rand(99, generator=gen, dtype=torch.float64) + 0.1
    resid = torch.randn(99, generator=gen, dtype=torch.float64) * var.sqrt() * 2.5
    c = coverage_scale(resid, var, 0.95)
    covered = lambda c_: int((resid.abs() <= 1.959964 * (c_ * var).sqrt()).sum())  # noqa: E731
    assert covered(c * (1 + 1e-9)) == 95 and covered(c * (1 - 1e-6)) == 94
    big_var = torch.rand(40000, generator=gen, dtype=torch.float64) + 0.5
    big = torch.randn(40000, generator=gen, dtype=torch.float64) * big_var.sqrt() * 1.5
    assert coverage_scale(big, big_var, 0.95) == pytest.approx(2.25, rel=0.04)
    assert coverage_scale(big, big_var, 0.5) == pytest.approx(2.25, rel=0.04)
    few = torch.tensor([0.1, -3.0, 0.5], dtype=torch.float64)
    assert coverage_scale(few, torch.ones(3, dtype=torch.float64), 0.95) == pytest.approx((3.0 / 1.959964) ** 2,
                                                                                            rel=1e-5)
    assert math.isnan(coverage_scale(few[:0], few[:0], 0.95))
    with pytest.raises(ValueError, match="level"):
        coverage_scale(few, few, 1.0)


def test_coverage_factor_of_leave_one_out_matches_dense_refits():
    """``loo_variance_scale(level=)`` is the conformal quantile of the leave-one-out residuals computed by solving
    the GP without each run (a dense reference), and the refit-free n-fold ``cv_variance_scale(level=)`` equals it."""
    from pyro_dag.emulation.selection import coverage_scale, cv_variance_scale, loo_variance_scale

    gen = torch.Generator().manual_seed(2)
    X = torch.rand(17, 2, generator=gen, dtype=torch.float64)
    y = torch.sin(5 * X[:, 0]) * X[:, 1] + 0.3 * X[:, 0]
    y = (y - y.mean()) / y.std()
    k = RBF(ard=True, variance=0.8, lengthscale=0.3).double().bind(2)
    noise = 1e-3
    with torch.no_grad():
        K = k(X) + noise * torch.eye(17, dtype=torch.float64)
        r, v = [], []
        for i in range(17):
            keep = [j for j in range(17) if j != i]
            kx = K[i, keep]
            r.append(y[i] - kx @ torch.linalg.solve(K[keep][:, keep], y[keep]))
            v.append(K[i, i] - kx @ torch.linalg.solve(K[keep][:, keep], kx))
    ref = coverage_scale(torch.stack(r), torch.stack(v), 0.9)
    assert loo_variance_scale(k, X, y, noise, level=0.9) == pytest.approx(ref, rel=1e-5)
    assert cv_variance_scale(k, X, y, noise, folds=17, max_iter=0, level=0.9) == pytest.approx(ref, rel=1e-5)
