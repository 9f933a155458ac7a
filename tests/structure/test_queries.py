"""Posterior queries with edge evidence (prob, edge_probs(given=), map_dag, sample(given=), causal_effects) on the
exact posterior, against brute-force enumeration of all (order, DAG) pairs; the sample-based answers of
StructurePosterior; evidence parsing and its errors."""
import itertools
import math

import numpy as np
import pytest
import torch

from test_exact import _dags_of_order

from pyro_dag.graph import dag_to_cpdag
from pyro_dag.structure import (BGeSEM, ExactStructurePosterior, LinearGaussianSEM, bge_mean_weights,
                                exact_posterior, fit, is_acyclic, local_scores, parse_evidence, total_effects)


def _pairs(log_f, q):
    """All (order, DAG) pairs with their unnormalised log weights: ``(orders [n, p], A [n, p, p], logw [n])``."""
    p = log_f.shape[0]
    orders, As, ws = [], [], []
    for order in itertools.permutations(range(p)):
        for A, logw in _dags_of_order(order, q, log_f):
            orders.append(order)
            As.append(A)
            ws.append(logw)
    return np.array(orders), np.array(As, dtype=float), np.array(ws)


def _holds(A, evidence):
    ok = np.ones(len(A), dtype=bool)
    for (i, j), v in evidence.items():
        ok &= (A[:, i, j] > 0.5) == v
    return ok


def _problem(p, mechanism="linear", seed=0, n=30):
    rng = np.random.default_rng(seed)
    X = torch.as_tensor(rng.normal(size=(n, p)))
    X[:, 1] += 0.9 * X[:, 0]
    X[:, p - 1] += 0.7 * X[:, 1] - 0.5 * X[:, 2]
    X = (X - X.mean(0)) / X.std(0)
    mech = LinearGaussianSEM(p, marginalize=True) if mechanism == "linear" else BGeSEM(p)
    log_f = local_scores(mech, X)
    q = rng.uniform(0.15, 0.85, size=(p, p))
    np.fill_diagonal(q, 0.0)
    post = ExactStructurePosterior(log_f, q, node_names=[f"x{k}" for k in range(p)])
    post.data = X
    return post, log_f, q, X


def _dag_log_probs(A, logw):
    """``{DAG bytes: log of the summed weight of its (order, DAG) pairs}`` (the unnormalised DAG posterior)."""
    out = {}
    for a, w in zip(A, logw):
        key = a.astype(np.int8).tobytes()
        out[key] = np.logaddexp(out.get(key, -np.inf), w)
    return out


def _assert_most_probable_dag(A_map, A, logw):
    """``A_map`` is a most probable DAG of the Markov equivalence class of the most probable (order, DAG) pair among
    the enumerated pairs ``(A, logw)`` (what map_dag promises), so at least as probable as that pair's DAG."""
    probs = _dag_log_probs(A, logw)
    joint = A[np.argmax(logw)]
    cpdag = dag_to_cpdag(joint.astype(np.int8))
    skeleton = (joint + joint.T) > 0.5
    same_class = []
    for key in probs:
        dag = np.frombuffer(key, np.int8).reshape(joint.shape)
        # Markov-equivalent DAGs have the same skeleton (Verma & Pearl 1990): the CPDAGs of the others need not be
        # computed (thousands of DAGs for p = 5)
        if np.array_equal((dag + dag.T) > 0, skeleton) and np.array_equal(dag_to_cpdag(dag), cpdag):
            same_class.append(key)
    key = A_map.astype(np.int8).tobytes()
    assert key in same_class, "map_dag left the Markov equivalence class of the best (order, DAG) pair"
    assert probs[key] == pytest.approx(max(probs[k] for k in same_class), abs=1e-9), \
        "map_dag is not the most probable DAG of its class by enumeration"


def _assert_consistent(A, order):
    seen = set()
    for k in order:
        assert set(np.nonzero(A[:, k])[0]) <= seen, (A, order)
        seen.add(k)


EVIDENCE = [{(0, 1): True}, {(1, 0): True, (2, 3): False}, {(0, 3): False, (2, 3): True, (1, 3): True},
            {(3, 0): True, (0, 1): True}]


@pytest.fixture(scope="module")
def p4():
    post, log_f, q, X = _problem(4)
    return post, _pairs(log_f, q), X


@pytest.mark.parametrize("evidence", EVIDENCE)
def test_exact_conditional_queries_match_enumeration(p4, evidence):
    post, (orders, A, logw), _ = p4
    w = np.exp(logw - logw.max())
    ok = _holds(A, evidence)
    assert post.prob(evidence) == pytest.approx(w[ok].sum() / w.sum(), rel=1e-9)
    assert post.log_prob(evidence) == pytest.approx(math.log(w[ok].sum() / w.sum()), rel=1e-9)
    P_ref = (w[ok, None, None] * A[ok]).sum(0) / w[ok].sum()
    P, se = post.edge_probs(given=evidence, return_stderr=True)
    np.testing.assert_allclose(P.numpy(), P_ref, rtol=1e-8, atol=1e-12)
    assert float(se.abs().max()) == 0.0
    for (i, j), v in evidence.items():                                # the evidence itself holds surely
        assert P[i, j] == pytest.approx(float(v), abs=1e-12)
    # MAP: a most probable DAG given the evidence (by the sum over its orders), with an order consistent with it
    A_map, order = post.map_dag(given=evidence, return_order=True)
    _assert_most_probable_dag(A_map.numpy(), A[ok], logw[ok])
    _assert_consistent(A_map.numpy(), order)


@pytest.mark.slow  # over 10 s on 2 cores: run by `pytest -m slow`
def test_exact_queries_on_five_nodes_bge():
    post, log_f, q, _ = _problem(5, "bge", seed=3)
    orders, A, logw = _pairs(log_f, q)
    w = np.exp(logw - logw.max())
    evidence = {(0, 1): True, (4, 2): False, (1, 4): True}
    ok = _holds(A, evidence)
    assert post.prob(evidence) == pytest.approx(w[ok].sum() / w.sum(), rel=1e-9)
    P_ref = (w[ok, None, None] * A[ok]).sum(0) / w[ok].sum()
    np.testing.assert_allclose(post.edge_probs(given=evidence).numpy(), P_ref, rtol=1e-8, atol=1e-12)
    _assert_most_probable_dag(post.map_dag(given=evidence).numpy(), A[ok], logw[ok])
    _assert_most_probable_dag(post.map_dag().numpy(), A, logw)


def test_acyclicity_and_impossible_evidence(p4):
    post = p4[0]
    assert post.prob({(0, 1): True, (1, 0): True}) == 0.0
    assert post.prob({(0, 1): True, (1, 2): True, (2, 0): True}) == 0.0
    assert post.log_prob({(0, 1): True, (1, 0): True}) == -math.inf
    # P(i -> j and j -> i) = 0 for every pair; P(i -> j or j -> i) = P(i -> j) + P(j -> i)
    P = post.edge_probs()
    for i, j in itertools.combinations(range(4), 2):
        assert post.prob({(i, j): True, (j, i): True}) == 0.0
        assert post.edge_probs(given={(i, j): True})[j, i] == 0.0
        assert 1 - post.prob({(i, j): False, (j, i): False}) == pytest.approx(float(P[i, j] + P[j, i]), rel=1e-9)
    for query in (lambda e: post.edge_probs(given=e), lambda e: post.map_dag(given=e),
                  lambda e: post.sample(5, given=e)):
        with pytest.raises(ValueError, match="x0 -> x1 -> x2 -> x0, which form a cycle"):
            query({(0, 1): True, (1, 2): True, (2, 0): True})


def test_names_and_indices_give_the_same_answer(p4):
    post = p4[0]
    by_index = post.edge_probs(given={(0, 1): True, (2, 3): False})
    by_name = post.edge_probs(given={("x0", "x1"): True, ("x2", "x3"): False})
    mixed = post.edge_probs(given={("x0", 1): True, (2, "x3"): False, (0, 1): True})   # repeats that agree
    assert torch.equal(by_index, by_name) and torch.equal(by_index, mixed)
    assert post.prob({("x0", "x1"): True}) == post.prob({(0, 1): True})


@pytest.mark.parametrize("evidence,match", [
    ({("x0", "nope"): True}, "unknown node 'nope'"),
    ({(0, 7): True}, "out of range"),
    ({(2, 2): True}, "self-loop"),
    ({("x2", "x2"): False}, "self-loop"),
    ({(0, 1): True, ("x0", "x1"): False}, "contradictory"),
    ({(0, 1): 1}, "True .present. or False"),
    ({0: True}, "must be an edge"),
    ({(0, 1, 2): True}, "must be an edge"),
])
def test_bad_evidence_is_refused_clearly(p4, evidence, match):
    post = p4[0]
    with pytest.raises(ValueError, match=match):
        post.prob(evidence)
    with pytest.raises(ValueError, match=match):
        post.edge_probs(given=evidence)


def test_evidence_must_be_a_dict(p4):
    with pytest.raises(TypeError, match="dict"):
        p4[0].prob([(0, 1)])
    ev = parse_evidence({(0, 1): True, (2, 1): False}, 4)
    assert ev.required.tolist() == [0, 1, 0, 0] and ev.forbidden.tolist() == [0, 4, 0, 0]


def test_exact_conditional_samples_have_the_exact_frequencies(p4):
    post = p4[0]
    evidence = {(1, 0): True, (2, 3): False}
    S = post.sample(3000, seed=0, given=evidence)
    assert bool(is_acyclic(S).all())
    assert bool(parse_evidence(evidence, 4).holds(S).all())
    P = post.edge_probs(given=evidence)
    se = (P * (1 - P) / 3000).sqrt()
    assert ((S.mean(0) - P).abs() <= 4.5 * se + 1e-9).all()
    orders, dags = post.sample_orders(2000, seed=1, given=evidence)
    pos = torch.argsort(orders, 1)
    assert bool((pos[:, 1] < pos[:, 0]).all())                        # 1 -> 0 forces 1 before 0
    # order frequencies against p(order | X, evidence) by enumeration
    _, (o_all, A_all, logw), _ = p4
    ok = _holds(A_all, evidence)
    w = np.exp(logw - logw.max()) * ok
    first = o_all[:, 0]
    for k in range(4):
        ref = w[first == k].sum() / w.sum()
        got = float((orders[:, 0] == k).double().mean())
        assert abs(got - ref) <= 4.5 * math.sqrt(ref * (1 - ref) / 2000) + 1e-9


def test_bge_mean_weights_are_the_regressions_on_the_posterior_scatter():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 4))
    A = np.zeros((4, 4))
    A[0, 2] = A[1, 2] = A[2, 3] = 1
    B = bge_mean_weights(X, torch.as_tensor(A)).numpy()
    R, _ = BGeSEM(4)._R(torch.as_tensor(X))
    R = R.numpy()
    np.testing.assert_allclose(B[[0, 1], 2], np.linalg.solve(R[np.ix_([0, 1], [0, 1])], R[[0, 1], 2]), rtol=1e-10)
    assert B[2, 3] == pytest.approx(R[2, 3] / R[2, 2], rel=1e-10)
    assert (B[A == 0] == 0).all()
    E = total_effects(torch.as_tensor(B)).numpy()
    assert E[0, 3] == pytest.approx(B[0, 2] * B[2, 3], rel=1e-10) and E[3, 0] == 0.0 and E[1, 1] == 1.0


def test_exact_causal_effects_within_their_standard_error(p4):
    post, (orders, A, logw), X = p4
    w = np.exp(logw - logw.max())
    E = total_effects(bge_mean_weights(X, torch.as_tensor(A))).numpy()
    ref = (w[:, None, None] * E).sum(0) / w.sum()
    got, se = post.causal_effects(4000, seed=0, return_stderr=True)
    assert ((got.numpy() - ref).__abs__() <= 4.5 * se.numpy() + 1e-9).all()
    assert np.allclose(np.diag(got.numpy()), 1.0)
    evidence = {(0, 1): True}
    ok = _holds(A, evidence)
    ref_e = (w[ok, None, None] * E[ok]).sum(0) / w[ok].sum()
    got_e, se_e = post.causal_effects(4000, seed=1, given=evidence, return_stderr=True)
    assert ((got_e.numpy() - ref_e).__abs__() <= 4.5 * se_e.numpy() + 1e-9).all()


def test_exact_posterior_keeps_names_and_data_for_queries():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3))
    X[:, 1] += X[:, 0]
    import pandas as pd

    post = exact_posterior(pd.DataFrame(X, columns=["a", "b", "c"]), likelihood="bge")
    assert post.data.shape == (60, 3)
    assert post.prob({("a", "b"): True}) == pytest.approx(float(post.edge_probs()[0, 1]), rel=1e-9)
    g = post.to_networkx(threshold=0.0, given={("a", "b"): True})
    assert g.edges["a", "b"]["prob"] == pytest.approx(1.0) and not g.has_edge("b", "a")


@pytest.fixture(scope="module")
def fitted():
    g = torch.Generator().manual_seed(0)
    X = torch.randn(150, 3, generator=g)
    X[:, 1] += X[:, 0]
    X[:, 2] += X[:, 1]
    return fit(X, num_steps=8, num_particles=4, progress=False)


def test_structure_posterior_answers_from_its_samples_with_standard_errors(fitted):
    post = fitted
    evidence = {(0, 1): True}
    S = post.sample(800, seed=3)
    ok = parse_evidence(evidence, 3).holds(S)
    P, se = post.prob(evidence, 800, seed=3, return_stderr=True)
    assert P == pytest.approx(float(ok.double().mean())) and se == pytest.approx(math.sqrt(P * (1 - P) / 800))
    Pc, sec = post.edge_probs(800, seed=3, given=evidence, return_stderr=True)
    ref = S[ok].mean(0)
    assert torch.allclose(Pc, ref) and torch.allclose(sec, (ref * (1 - ref) / int(ok.sum())).sqrt())
    assert Pc[0, 1] == 1.0 and Pc[1, 0] == 0.0
    D = post.sample(50, seed=4, given=evidence)
    assert D.shape == (50, 3, 3) and bool(parse_evidence(evidence, 3).holds(D).all())
    assert bool(is_acyclic(D).all())
    A = post.map_dag(given=evidence, num_samples=800, seed=3)
    assert A[0, 1] == 1.0 and bool(is_acyclic(A))
    E = post.causal_effects(200, seed=5, given=evidence)
    assert E.shape == (3, 3) and torch.allclose(E.diagonal(), torch.ones(3, dtype=E.dtype))
    ll = post.held_out_log_likelihood(torch.randn(20, 3, generator=torch.Generator().manual_seed(1)), 100, seed=0)
    assert math.isfinite(ll)


def test_structure_posterior_reports_missing_coverage(fitted):
    rare = {(2, 1): True, (1, 0): True, (2, 0): True}  # a few percent of the samples
    with pytest.raises(ValueError, match="satisfy the evidence"):
        fitted.sample(500, seed=0, given=rare, max_draws=2000)


def _counting_draws(post):
    """``post`` with its ``sample`` counting the DAGs it returns."""
    drawn = [0]
    real = post.sample

    def sample(num_samples=1000, *args, **kwargs):
        out = real(num_samples, *args, **kwargs)
        drawn[0] += len(out)
        return out

    post.sample = sample
    return post, drawn


@pytest.mark.parametrize("kind", ["fit", "exact", "spn"])
def test_evidence_whose_required_edges_form_a_cycle_is_refused_before_any_draw(fitted, kind):
    """Earlier: fit's posterior drew the samples (100 000 if asked) and then said "draw more samples"."""
    import copy

    if kind == "fit":
        post = copy.copy(fitted)
    else:
        post = exact_posterior(fitted.data if getattr(fitted, "data", None) is not None else torch.randn(50, 3))
        if kind == "spn":
            from pyro_dag.structure import order_spn
            post = order_spn(post, "random", expansion=(3, 2), seed=0)
    post, drawn = _counting_draws(post)
    two = {(0, 1): True, (1, 0): True}
    three = {(0, 1): True, (1, 2): True, (2, 0): True, (1, 0): False}
    queries = [lambda e: post.edge_probs(100_000, given=e), lambda e: post.map_dag(given=e, num_samples=100_000),
               lambda e: post.sample(100_000, given=e),
               lambda e: post.causal_effects(10, given=e, data=torch.randn(20, 3)),
               lambda e: post.held_out_log_likelihood(torch.randn(5, 3), 10, given=e)]
    for evidence, shown in ((two, "0 -> 1 -> 0"), (three, "0 -> 1 -> 2 -> 0")):
        for query in queries:
            with pytest.raises(ValueError, match="form a cycle") as info:
                query(evidence)
            assert shown in str(info.value) and "draw more" not in str(info.value)
        assert post.prob(evidence) == 0.0
    assert drawn[0] == 0


@pytest.mark.parametrize("kind", ["fit", "exact"])
def test_test_data_are_checked_before_any_draw(fitted, kind):
    """held_out_log_likelihood on rows with NaN (earlier: a NaN or a raw torch error after the draws), data of the
    wrong width for causal_effects (earlier: a shape error after the draws)."""
    import copy

    import pandas as pd

    post = copy.copy(fitted) if kind == "fit" else exact_posterior(torch.randn(40, 3, dtype=torch.float64))
    post, drawn = _counting_draws(post)
    X = torch.randn(6, 3, dtype=torch.float64)
    X[[1, 4], 2] = float("nan")
    with pytest.raises(ValueError, match=r"X_test has NaN or infinite values in 2 of its 6 rows \(rows \[1, 4\]\)"):
        post.held_out_log_likelihood(X, 100_000)
    with pytest.raises(ValueError, match=r"X_test must be \[M, 3\]"):
        post.held_out_log_likelihood(torch.zeros(4, 2), 100_000)
    with pytest.raises(ValueError, match=r"data must be \[M, 3\]"):
        post.causal_effects(100_000, data=torch.zeros(10, 2))
    with pytest.raises(ValueError, match="NaN or infinite"):
        post.causal_effects(100_000, data=X)
    assert drawn[0] == 0
    names = ["a", "b", "c"]
    post.node_names = names
    frame = pd.DataFrame(torch.randn(5, 3).numpy(), columns=names)
    reordered = post.held_out_log_likelihood(frame[["c", "a", "b"]], 50, seed=0)
    assert reordered == pytest.approx(post.held_out_log_likelihood(frame, 50, seed=0))
    with pytest.raises(ValueError, match="columns"):
        post.held_out_log_likelihood(frame.rename(columns={"c": "z"}), 50)
