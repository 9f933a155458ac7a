"""Known perfect interventions (Cooper & Yoo 1999; Eaton & Murphy 2007): each node scored on the rows where it is not
intervened, against an all-False mask (bit for bit the observational posterior) and brute-force enumeration."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest
import torch

from pyro_dag.structure import (BGeSEM, LinearGaussianSEM, StructureConfig, candidate_tables, exact_posterior, fit,
                                hybrid_posterior, order_spn)
from pyro_dag.structure.causal import node_scatters, posterior_scatter
from pyro_dag.structure.interventions import intervention_mask, interventional_local_scores


def _chain_data(n, seed, targets=((), (1,)), p=3, weight=1.0):
    """A chain 0 -> 1 -> ... -> p-1 in ``len(targets)`` equal blocks of rows; a target is set to N(0, 1) noise."""
    rng = np.random.default_rng(seed)
    m = n // len(targets)
    X = np.zeros((m * len(targets), p))
    mask = np.zeros_like(X, dtype=bool)
    for b, tset in enumerate(targets):
        rows = slice(b * m, (b + 1) * m)
        for j in range(p):
            x = rng.normal(size=m) + (weight * X[rows, j - 1] if j > 0 else 0.0)
            if j in tset:
                x = rng.normal(size=m) * 1.5
                mask[rows, j] = True
            X[rows, j] = x
    return X, mask


def _all_dags(p):
    pairs = [(i, j) for i in range(p) for j in range(p) if i != j]
    for bits in itertools.product([0, 1], repeat=len(pairs)):
        A = np.zeros((p, p), dtype=int)
        for (i, j), b in zip(pairs, bits):
            A[i, j] = b
        if not np.linalg.matrix_power(A, p).any():             # nilpotent: no directed cycle
            yield A


def _reference_posterior(X, mask, lik, q):
    """Edge posteriors by enumerating every DAG: the order-modular prior (sum over the orders consistent with the
    DAG of Π q^A (1 - q)^(1-A) over ordered pairs) times Π_j of node j's mechanism evidence on its free rows."""
    N, p = X.shape
    config = StructureConfig()
    P, total = np.zeros((p, p)), -np.inf
    for A in _all_dags(p):
        log_prior = -np.inf
        for order in itertools.permutations(range(p)):
            pos = np.argsort(order)
            if any(A[i, j] and pos[i] > pos[j] for i in range(p) for j in range(p)):
                continue
            log_prior = np.logaddexp(log_prior, sum(
                math.log(q[i, j]) if A[i, j] else math.log(1 - q[i, j])
                for i in range(p) for j in range(p) if pos[i] < pos[j]))
        ll = 0.0
        for j in range(p):
            rows = torch.as_tensor(~mask[:, j])
            n_j = int(rows.sum())
            if lik == "bge":
                mech = BGeSEM(p).double()
                ll += float(mech.node_scores(torch.as_tensor(X)[rows], torch.as_tensor(A, dtype=torch.float64))[j])
            else:
                a0, b0, s = config.linear_prior(n_j)
                mech = LinearGaussianSEM(p, marginalize=True, weight_scale=s, noise_concentration=a0,
                                         noise_rate=b0).double()
                Xj = torch.as_tensor(X)[rows]
                ll += float(mech.node_evidence(Xj.T @ Xj, n_j, torch.as_tensor(A, dtype=torch.float64))[j])
        w = log_prior + ll
        total = np.logaddexp(total, w)
        P += A * math.exp(w)
    return P / math.exp(total)


@pytest.mark.filterwarnings("ignore::pyro_dag.structure.MAPTieWarning")
def test_an_all_false_mask_gives_the_observational_posterior_bit_for_bit():
    X, _ = _chain_data(120, 0)
    none = np.zeros(X.shape, dtype=bool)
    for lik in ("linear", "bge"):
        a = exact_posterior(X, lik)
        for iv in (none, torch.as_tensor(none), (np.zeros(len(X), dtype=int), [[]])):
            b = exact_posterior(X, lik, interventions=iv)
            assert np.array_equal(a.edge_probs().numpy(), b.edge_probs().numpy())
            assert a.log_evidence == b.log_evidence
            assert torch.equal(a.sample(50, seed=1), b.sample(50, seed=1))
            assert torch.equal(a.causal_effects(50, seed=1), b.causal_effects(50, seed=1))
            assert torch.equal(a.map_dag(), b.map_dag())
    h0 = hybrid_posterior(X, "bge")
    h1 = hybrid_posterior(X, "bge", interventions=none)
    assert np.array_equal(h0.edge_probs().numpy(), h1.edge_probs().numpy())


@pytest.mark.parametrize("p,lik", [(3, "linear"), (3, "bge"), (4, "bge")])
def test_interventional_posterior_matches_enumeration_over_dags(p, lik):
    X, mask = _chain_data(90 if p == 3 else 60, p, targets=((), (1,), (0, p - 1)), p=p, weight=0.6)
    post = exact_posterior(X, lik, interventions=mask, standardize=False, expected_parents=1.0)
    ref = _reference_posterior(X, mask, lik, post._q)
    np.testing.assert_allclose(post.edge_probs().numpy(), ref, rtol=1e-8, atol=1e-10)
    # the table of local scores is each node's mechanism evidence on its own rows
    f = interventional_local_scores(lik, torch.as_tensor(X), mask, StructureConfig())
    j, G = 1, 0b01
    A = torch.zeros(p, p, dtype=torch.float64)
    A[0, 1] = 1.0
    rows = torch.as_tensor(~mask[:, j])
    if lik == "bge":
        assert f[j, G] == pytest.approx(float(BGeSEM(p).double().node_scores(torch.as_tensor(X)[rows], A)[j]),
                                        rel=1e-10)


def test_interventions_orient_an_edge_that_observational_data_cannot():
    X, mask = _chain_data(600, 3, targets=((), (0,)), p=2)
    obs = exact_posterior(X, "bge").edge_probs()
    assert abs(float(obs[0, 1]) - float(obs[1, 0])) < 0.2          # score-equivalent: the direction is a coin toss
    post = exact_posterior(X, "bge", interventions=mask)
    assert float(post.edge_probs()[0, 1]) > 0.97
    assert post.map_dag().tolist() == [[0.0, 1.0], [0.0, 0.0]]
    # intervening on the effect orients it too
    X2, mask2 = _chain_data(600, 4, targets=((), (1,)), p=2)
    assert float(exact_posterior(X2, "bge", interventions=mask2).edge_probs()[0, 1]) > 0.97


def test_every_query_works_on_the_interventional_posterior():
    X, mask = _chain_data(300, 5, targets=((), (1,), (2,)), p=4, weight=0.8)
    post = exact_posterior(X, "bge", interventions=mask)
    P = post.edge_probs()
    assert post.prob({(0, 1): True}) == pytest.approx(float(P[0, 1]), abs=1e-12)
    Pg = post.edge_probs(given={(1, 2): True})
    assert float(Pg[1, 2]) == pytest.approx(1.0)
    assert post.sample(20, seed=0, given={(1, 2): True})[:, 1, 2].eq(1).all()
    # causal effects: exact (Rao-Blackwellised over orders) against the sample average with each node's own rows
    E = post.causal_effects(4000, seed=0)
    from pyro_dag.structure.posterior import DAGPosterior

    E_mc, se = DAGPosterior.causal_effects(post, 4000, seed=1, return_stderr=True)
    assert torch.all((E - E_mc).abs() <= 5 * se + 1e-3)
    # the order circuit on the exact tables, and the candidate tables with every node a candidate
    spn = order_spn(post)
    np.testing.assert_allclose(spn.edge_probs().numpy(), P.numpy(), atol=1e-8)
    np.testing.assert_allclose(spn.causal_effects().numpy(), post.causal_effects(4000, seed=0).numpy(), atol=0.05)
    tabs = candidate_tables(X, "bge", num_candidates=3, interventions=mask)
    np.testing.assert_allclose(tabs.to_exact().edge_probs().numpy(), P.numpy(), atol=1e-8)
    assert tabs.interventions is not None
    h = hybrid_posterior(X, "bge", interventions=mask, method="mcmc", num_samples=200)
    assert np.abs(h.edge_probs().numpy() - P.numpy()).max() < 0.1
    assert h.causal_effects(200, seed=0).shape == (4, 4)


def test_node_scatters_are_each_nodes_rows():
    X, mask = _chain_data(90, 6, targets=((), (1,), (0, 2)), p=3)
    R = node_scatters(torch.as_tensor(X), mask)
    for j in range(3):
        torch.testing.assert_close(R[j], posterior_scatter(torch.as_tensor(X[~mask[:, j]])))


def test_fit_routes_interventions_to_the_order_dp_and_refuses_what_it_cannot_do():
    X, mask = _chain_data(200, 7)
    post = fit(X, likelihood="bge", interventions=mask)
    ref = exact_posterior(X, "bge", interventions=mask)
    np.testing.assert_allclose(post.edge_probs().numpy(), ref.edge_probs().numpy(), rtol=1e-12)
    assert post.settings["method"] == "exact"
    with pytest.raises(ValueError, match="likelihood='mlp'.*interventions"):
        fit(X, likelihood="mlp", interventions=mask)
    with pytest.raises(ValueError, match="num_steps"):
        fit(X, likelihood="bge", interventions=mask, num_steps=10)


def test_gies_form_equals_the_mask():
    X, mask = _chain_data(200, 8, targets=((), (1,)))
    env = np.repeat(["obs", "knock-b"], 100)
    names = ["a", "b", "c"]
    a = exact_posterior(X, "bge", node_names=names, interventions=mask)
    b = exact_posterior(X, "bge", node_names=names, interventions=(env, {"obs": [], "knock-b": ["b"]}))
    c = exact_posterior(pd.DataFrame(X, columns=names), "bge",
                        interventions=pd.DataFrame({"b": mask[:, 1]}))
    for other in (b, c):
        assert np.array_equal(a.edge_probs().numpy(), other.edge_probs().numpy())


@pytest.mark.parametrize("interventions,message", [
    (np.zeros((5, 3), dtype=bool), r"\[N, p\] = \[200, 3\].*got shape \(5, 3\)"),
    (np.full((200, 3), 0.5), r"boolean \(or 0/1\): column 'a' row 0 holds 0.5"),
    ((np.repeat([0, 1], 100), [[], ["z"]]), "target 'z' is not among the data's columns"),
    ((np.repeat([0, 1], 100), [[], [7]]), "target 7 is not a column index"),
    ((np.r_[np.zeros(199, int), 1], [[], [1]]), "environment 1 has a single row"),
    ((np.repeat([0, 2], 100), [[], [1]]), "environment 2 .* has no target set"),
    ((np.zeros(200, int), [[1]]), "node 'b' is intervened in 200 of the 200 rows"),
    (pd.DataFrame({"zz": np.zeros(200, bool)}), "column 'zz', which is not among"),
])
def test_bad_interventions_are_refused_with_the_column_or_row_named(interventions, message):
    X, _ = _chain_data(200, 9)
    with pytest.raises(ValueError, match=message):
        exact_posterior(X, "bge", node_names=["a", "b", "c"], interventions=interventions)


def test_intervention_mask_keeps_a_valid_mask():
    m = np.zeros((10, 2), dtype=bool)
    m[:3, 0] = True
    assert np.array_equal(intervention_mask(m.astype(int), 10, 2), m)
    assert intervention_mask(None, 10, 2) is None


def _write_csv(path, X, names, extra=None):
    with open(path, "w") as f:
        f.write(",".join(names + ([extra[0]] if extra else [])) + "\n")
        for r, row in enumerate(X):
            f.write(",".join(f"{v:.6g}" for v in row) + ((f",{extra[1][r]}") if extra else "") + "\n")


def test_discover_takes_a_mask_file_or_a_column_and_names_bad_ones(tmp_path, capsys):
    import json

    from pyro_dag.cli import main

    X, mask = _chain_data(300, 10, targets=((), (1,)))
    names = ["a", "b", "c"]
    _write_csv(tmp_path / "d.csv", X, names)
    with open(tmp_path / "m.csv", "w") as f:
        f.write("b\n" + "".join(f"{int(v)}\n" for v in mask[:, 1]))
    _write_csv(tmp_path / "dc.csv", X, names, ("iv", ["b" if v else "" for v in mask[:, 1]]))
    ref = exact_posterior(X, "bge", node_names=names, interventions=mask, expected_parents=1.5).edge_probs()
    for extra in (["--csv", str(tmp_path / "d.csv"), "--interventions", str(tmp_path / "m.csv")],
                  ["--csv", str(tmp_path / "dc.csv"), "--intervention-column", "iv"]):
        out = tmp_path / "out"
        assert main(["discover", *extra, "--likelihood", "bge", "--out", str(out), "--no-progress"]) == 0
        res = json.loads((out / "discover.json").read_text())
        assert res["nodes"] == names
        np.testing.assert_allclose(res["edge_probs"], ref.numpy(), atol=1e-6)
    with open(tmp_path / "bad.csv", "w") as f:
        f.write("zz\n" + "0\n" * 300)
    with pytest.raises(SystemExit, match="column 'zz' is not a variable"):
        main(["discover", "--csv", str(tmp_path / "d.csv"), "--interventions", str(tmp_path / "bad.csv"),
              "--likelihood", "bge", "--out", str(tmp_path / "o2")])
    with pytest.raises(SystemExit, match="likelihood linear or bge"):
        main(["discover", "--csv", str(tmp_path / "d.csv"), "--interventions", str(tmp_path / "m.csv"),
              "--likelihood", "mlp", "--out", str(tmp_path / "o3")])


def test_sachs_experiments_hold_the_nine_conditions_and_their_targets():
    from pyro_dag.datasets import SACHS_CONDITIONS, sachs_experiments

    d = sachs_experiments()
    assert len(d.environments) == 7466 and d.mask.shape == (7466, 11)
    assert [n for n, _, _ in SACHS_CONDITIONS][:2] == ["cd3cd28", "cd3cd28icam2"]
    counts = dict(zip(d.nodes, d.mask.sum(0).tolist()))
    assert counts == {"Raf": 0, "Mek": 799, "Plcg": 0, "PIP2": 810, "PIP3": 848, "Erk": 0, "Akt": 911, "PKA": 707,
                      "PKC": 723 + 913, "P38": 0, "Jnk": 0}
    assert not d.mask[:853 + 902].any()


def test_unknown_targets_are_summed_out_exactly_and_learned():
    from pyro_dag.structure.uncertain_targets import target_posterior, uncertain_target_scores

    rng = np.random.default_rng(11)
    n = 150
    X = rng.normal(size=(3 * n, 3))
    env = np.repeat(["obs", "b", "c"], n)
    X[:, 1] += np.where(env == "b", 0.0, X[:, 0])
    X[:, 2] += np.where(env == "c", -1.0, 1.0) * X[:, 1]
    U = {"b": env == "b", "c": env == "c"}
    log_f, _ = uncertain_target_scores(torch.as_tensor(X), None, U, 0.2)
    mech = BGeSEM(3).double()
    Xt = torch.as_tensor(X)
    for j, G in [(1, 0b001), (2, 0b010), (2, 0b011), (0, 0)]:
        A = torch.zeros(3, 3, dtype=torch.float64)
        A[[k for k in range(3) if (G >> k) & 1], j] = 1.0
        terms = []
        for T in itertools.product([0, 1], repeat=2):
            shared = (env == "obs") | ((env == "b") & (T[0] == 0)) | ((env == "c") & (T[1] == 0))
            w = sum(math.log(0.2) if t else math.log(0.8) for t in T)
            w += float(mech.node_scores(Xt[torch.as_tensor(shared)], A)[j])
            for t, e in zip(T, ("b", "c")):
                if t:
                    w += float(mech.node_scores(Xt[torch.as_tensor(U[e])], A)[j])
            terms.append(w)
        assert log_f[j, G] == pytest.approx(float(np.logaddexp.reduce(terms)), rel=1e-9)
    post = exact_posterior(X, "bge", interventions=(env, {"obs": [], "b": "unknown", "c": "unknown"}))
    assert float(post.edge_probs()[0, 1]) > 0.95 and float(post.edge_probs()[1, 2]) > 0.95
    labels, probs, _ = target_posterior(post, 300)
    assert labels == ["b", "c"]
    assert probs[0, 1] > 0.95 and probs[1, 2] > 0.95 and probs[0, [0, 2]].max() < 0.05
    with pytest.raises(NotImplementedError, match="unknown intervention targets"):
        post.causal_effects(10)
    with pytest.raises(ValueError, match="likelihood='bge' only"):
        exact_posterior(X, "linear", interventions=(env, {"obs": [], "b": "unknown", "c": "unknown"}))
    with pytest.raises(ValueError, match="unknown targets: only exact_posterior"):
        hybrid_posterior(X, "bge", interventions=(env, {"obs": [], "b": "unknown", "c": [2]}))


def test_pairwise_candidates_use_each_nodes_rows():
    from pyro_dag.structure.candidate_selection import top_candidates

    X, mask = _chain_data(400, 12, targets=((), (1,), (2,)), p=4, weight=0.8)
    tabs = candidate_tables(X, "bge", num_candidates=2, selection="pairwise", interventions=mask)
    Z = torch.as_tensor((X - X.mean(0)) / X.std(0, ddof=1))
    f = interventional_local_scores("bge", Z, mask, StructureConfig(),
                                    masks=np.concatenate([[0], 1 << np.arange(4)]))
    gain = f[:, 1:].T - f[:, :1].T                     # [k, i]: f_i({k}) - f_i(∅)
    assert tabs.candidates == top_candidates(gain, [[] for _ in range(4)], 2)


def test_the_gp_score_fits_each_nodes_gps_on_its_own_rows():
    from pyro_dag.structure import GPFamilyScorer, gp_interventional_effect

    rng = np.random.default_rng(13)
    n = 60
    X = rng.normal(size=(2 * n, 2))
    X[:n, 1] = np.sin(2 * X[:n, 0]) + 0.3 * rng.normal(size=n)
    X[n:, 0] = rng.normal(size=n)                        # experiment on node 0: still the cause of node 1
    X[n:, 1] = np.sin(2 * X[n:, 0]) + 0.3 * rng.normal(size=n)
    mask = np.zeros(X.shape, dtype=bool)
    mask[n:, 0] = True
    post = exact_posterior(X, "gp", interventions=mask)
    Z = torch.as_tensor((X - X.mean(0)) / X.std(0, ddof=1))
    ref = GPFamilyScorer(Z[torch.as_tensor(~mask[:, 1])])
    log_f0 = post._g[1, 0b01] - math.log(post._q[0, 1] / (1 - post._q[0, 1]))
    assert log_f0 == pytest.approx(ref.score(1, [0]), rel=1e-8)
    assert float(post.edge_probs()[0, 1]) > 0.9
    assert fit(X, likelihood="gp", interventions=mask).edge_probs()[0, 1] == post.edge_probs()[0, 1]
    with pytest.raises(ValueError, match="interventions"):
        gp_interventional_effect(post, 1, 0, [0.0])
