"""The GP network score: its local scores against ExactGP and the Gaussian likelihood, the exact posterior over
them against enumeration, candidate tables on it, and a dependence the linear score cannot see."""
import math

import numpy as np
import pytest
import torch

from pyro_dag.baselines import ExactGP
from pyro_dag.structure import (ExactStructurePosterior, FitConfig, candidate_tables, exact_posterior, fit,
                                hybrid_posterior)
from pyro_dag.structure.gp_scores import GPFamilyScorer
from helpers import brute_force_edge_posterior


def _quadratic(n=80, seed=0):
    """x1 = x0² + noise (uncorrelated with x0), x2 independent."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(-2, 2, n)
    X = np.c_[x0, x0 ** 2 + 0.3 * rng.normal(size=n), rng.normal(size=n)]
    return (X - X.mean(0)) / X.std(0)


@pytest.fixture(scope="module")
def gp_post():
    return exact_posterior(_quadratic(), "gp")


def test_local_scores_are_the_gp_evidence(gp_post):
    X = np.asarray(gp_post.data)
    s = gp_post.gp_scorer
    n = X.shape[0]
    y = X[:, 2] - X[:, 2].mean()
    assert s.score(2, []) == pytest.approx(-0.5 * n * (math.log(2 * math.pi * np.mean(y ** 2)) + 1), rel=1e-12)
    # the cached evidence is the Gaussian likelihood at the fitted hyperparameters, in the data's units ...
    log_ls, log_sf2, log_sn2 = s.hyperparameters[(1, (0,))].tolist()
    x = torch.as_tensor(X[:, 0])
    x = (x - x.min()) / (x.max() - x.min())
    y1 = torch.as_tensor(X[:, 1])
    sd = y1.std()
    K = math.exp(log_sf2) * torch.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / math.exp(2 * log_ls))
    K = K + (math.exp(log_sn2) + 1e-8) * torch.eye(n, dtype=K.dtype)
    mvn = torch.distributions.MultivariateNormal(torch.zeros(n, dtype=K.dtype), covariance_matrix=K)
    evidence = float(mvn.log_prob((y1 - y1.mean()) / sd)) - n * math.log(float(sd))
    assert s.score(1, [0]) == pytest.approx(evidence - 0.5 * math.log(n), rel=1e-10)
    # ... and the batched optimiser reaches ExactGP's optimum (the one-by-one L-BFGS fit) from the same starts
    gp = ExactGP(restarts=2, seed=0).fit(X[:, [0]], X[:, 1])
    assert s.score(1, [0]) >= gp.log_marginal_likelihood - 0.5 * math.log(n) - 0.02
    fits = s.num_fits
    s.score(1, [0])
    assert s.num_fits == fits                                      # cached
    assert s(1, np.array([[0, -1], [-1, -1]]))[1] == s.score(1, [])
    with pytest.raises(ValueError, match="own parent"):
        s.score(1, [1])


def test_gp_exact_posterior_matches_enumeration_and_sees_the_quadratic(gp_post):
    log_f = gp_post.gp_scorer.local_scores(2)
    al, be = gp_post.config.edge_prior(3, dtype=torch.float64)
    q = (al / (al + be)).numpy()
    np.fill_diagonal(q, 0.0)
    P = gp_post.edge_probs().numpy()
    np.testing.assert_allclose(P, brute_force_edge_posterior(log_f, q), rtol=1e-8, atol=1e-12)
    assert P[0, 1] + P[1, 0] > 0.9                                 # x0 - x1 adjacent
    assert P[0, 2] + P[2, 0] < 0.3 and P[1, 2] + P[2, 1] < 0.3    # (p = 3: the prior's q is 0.75)
    lin = exact_posterior(_quadratic()).edge_probs().numpy()
    assert lin[0, 1] + lin[1, 0] < 0.3                             # no linear correlation to see
    S = gp_post.sample(200, seed=0)                                # the other queries work on the GP score
    assert S.shape == (200, 3, 3)
    assert 0.0 <= gp_post.prob({(0, 1): True}) <= 1.0


def test_gp_candidate_tables_reuse_the_fits(gp_post):
    s = gp_post.gp_scorer
    fits = s.num_fits
    tabs = candidate_tables(gp_post.data, "gp", candidates=[[1, 2], [0, 2], [0, 1]], gp_scorer=s, standardize=False)
    assert s.num_fits == fits
    np.testing.assert_allclose(tabs.to_exact().edge_probs().numpy(), gp_post.edge_probs().numpy(), atol=1e-10)
    picked = candidate_tables(gp_post.data, "gp", num_candidates=1, gp_scorer=s, standardize=False)
    assert picked.candidates[1] == [0]                             # the largest single-parent GP gain


def test_fit_with_the_gp_score_is_its_exact_posterior(gp_post):
    post = fit(gp_post.data, likelihood="gp", standardize=False)
    assert isinstance(post, ExactStructurePosterior) and post.settings["method"] == "exact"
    np.testing.assert_allclose(post.edge_probs().numpy(), gp_post.edge_probs().numpy(), atol=1e-10)
    assert FitConfig(likelihood="gp").likelihood == "gp"


def test_hybrid_gp_finds_a_parent_without_correlation_and_matches_its_exact_tables():
    rng = np.random.default_rng(3)
    n = 150
    x0 = rng.uniform(-2, 2, n)
    x1 = x0 ** 2 + 0.3 * rng.normal(size=n)          # no correlation with x0: Fisher-z cannot see it
    x2 = np.tanh(x1) + 0.3 * rng.normal(size=n)
    x3 = rng.normal(size=n)
    X = np.c_[x0, x1, x2, x3]
    post = hybrid_posterior(X, "gp", max_candidates=2)
    assert 0 in post.candidates[1]                   # from its GP gain
    P = post.edge_probs().numpy()
    assert P[0, 1] + P[1, 0] > 0.9
    tabs = candidate_tables(X, "gp", candidates=post.candidates, gp_scorer=post.gp_scorer)
    np.testing.assert_allclose(P, tabs.to_exact().edge_probs().numpy(), atol=1e-10)
    mcmc = hybrid_posterior(X, "gp", max_candidates=2, method="mcmc", gp_scorer=post.gp_scorer, num_samples=400)
    assert np.abs(mcmc.edge_probs().numpy() - P).max() < 0.1            # order MCMC on the same tables


def test_fit_with_the_gp_score_goes_hybrid_above_the_exact_size(monkeypatch):
    import pyro_dag.structure.fitting as fitting

    monkeypatch.setattr(fitting, "GP_EXACT_FIT_NODES", 2)
    post = fit(_quadratic(), likelihood="gp")
    assert post.settings["method"] == "hybrid" and post.gp_scorer.num_fits > 0
    P = post.edge_probs().numpy()
    assert P[0, 1] + P[1, 0] > 0.9


def test_gp_settings_are_checked():
    with pytest.raises(ValueError, match="p ≤ 16"):
        exact_posterior(np.random.default_rng(0).normal(size=(30, 17)), "gp")
    with pytest.raises(ValueError, match="hyper_penalty"):
        GPFamilyScorer(np.zeros((5, 2)), hyper_penalty=-1.0)


def test_many_rows_use_the_sparse_bound_below_the_exact_evidence():
    rng = np.random.default_rng(5)
    n = 500
    x0 = rng.uniform(-2, 2, n)
    X = np.c_[x0, np.sin(2 * x0) + 0.3 * rng.normal(size=n)]
    sparse = GPFamilyScorer(X)
    assert sparse.inducing == 128                                   # above GP_EXACT_ROWS rows
    exact = GPFamilyScorer(X, inducing=None)
    assert sparse.score(1, [0]) > sparse.score(1, []) + 50          # the dependence is seen
    assert sparse.score(1, [0]) <= exact.score(1, [0]) + 1e-6       # through a lower bound ...
    assert exact.score(1, [0]) - sparse.score(1, [0]) < 5.0         # ... a tight one
    assert sparse.score(1, []) == exact.score(1, [])
    with pytest.raises(ValueError, match="inducing"):
        GPFamilyScorer(X, inducing=0)


def test_order_circuit_on_the_gp_score_answers_queries_exactly(gp_post):
    from pyro_dag.structure import order_spn

    spn = order_spn(gp_post, "greedy", expansion=(8, 4))       # p = 3: every split enumerated, the circuit is exact
    np.testing.assert_allclose(spn.edge_probs().numpy(), gp_post.edge_probs().numpy(), atol=1e-8)
    ev = {(0, 1): True}
    np.testing.assert_allclose(spn.edge_probs(given=ev).numpy(), gp_post.edge_probs(given=ev).numpy(), atol=1e-8)
    assert spn.prob(ev) == pytest.approx(gp_post.prob(ev), abs=1e-8)


def test_three_parent_sets_are_fitted_within_the_wide_candidates_and_find_a_collider_of_three():
    from pyro_dag.structure.gp_scores import GP_DEFAULT_MAX_PARENTS

    rng = np.random.default_rng(8)
    n = 100
    Z = rng.normal(size=(n, 4))
    y = np.sin(Z[:, 0]) + 0.8 * np.tanh(2 * Z[:, 1]) + 0.6 * Z[:, 2] ** 2 + 0.2 * rng.normal(size=n)
    X = np.c_[Z, y]
    s = GPFamilyScorer(X, wide_candidates=3)
    assert GP_DEFAULT_MAX_PARENTS == 3
    table = s.subsets(4, np.arange(4), 3)
    wide = s.wide_set(4, range(4))
    assert sorted(wide) == [0, 1, 2]
    for m in range(16):
        G = [b for b in range(4) if (m >> b) & 1]
        if len(G) <= 2:
            assert np.isfinite(table[m])
        elif len(G) == 3:
            assert np.isfinite(table[m]) == set(G).issubset(wide)
        else:
            assert table[m] == -np.inf
    assert max(range(16), key=lambda m: table[m]) == 0b0111          # y's three parents
    full = s.local_scores(3)                                         # the exact table: the same rule per node
    assert full[4, 0b00111] == table[0b0111]
    assert np.isfinite(full[4]).sum() == np.isfinite(table).sum()
