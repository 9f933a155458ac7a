"""OrderSPN (the order circuit of Wang, Wicker & Kwiatkowska 2022): structure (Prop. 6 sizes, determinism), the
closed-form ELBO, and every query against enumeration of the distribution the circuit represents, for p <= 5."""
import itertools
import math

import numpy as np
import pytest
import torch

from test_exact import _dags_of_order
from test_queries import _assert_consistent, _assert_most_probable_dag, _holds, _problem

from pyro_dag.structure import bge_mean_weights, is_acyclic, order_spn, parse_evidence, total_effects


def _circuit_pairs(spn, log_f, q):
    """The circuit's distribution by enumeration: every supported order σ with its circuit weight Π φ, times the
    exact column posteriors given σ. Returns ``(orders, A [n, p, p], log q [n])``."""
    orders, As, lq = [], [], []
    for order, logphi in spn.support():
        dags = list(_dags_of_order(tuple(order), q, log_f))
        logw = np.array([w for _, w in dags])
        norm = np.logaddexp.reduce(logw)
        for (A, w) in dags:
            orders.append(tuple(order))
            As.append(A)
            lq.append(logphi + w - norm)
    return orders, np.array(As, dtype=float), np.array(lq)


@pytest.fixture(scope="module")
def p5():
    post, log_f, q, X = _problem(5, "bge", seed=1)
    return post, log_f, q, X


@pytest.fixture(scope="module", params=["closed_form", "uniform"])
def circuit(request, p5):
    post, log_f, q, X = p5
    spn = order_spn(post, "exact", num_orders=200, expansion=(3, 2), parameters=request.param, seed=0)
    return spn, _circuit_pairs(spn, log_f, q)


def test_structure_is_deterministic_with_the_prop6_support(p5):
    post = p5[0]
    spn = order_spn(post, "random", expansion=(3, 2), seed=2)
    sup = spn.support()
    # root: 3 splits 2|3; a 2-set has 1 balanced split (2 orders), a 3-set 3 (each 1|2: 3 * 2 orders)
    assert spn.num_orders == len(sup) == 3 * 2 * 6
    assert len({tuple(o) for o, _ in sup}) == len(sup)                  # distinct splits: deterministic
    assert all(sorted(o) == list(range(5)) for o, _ in sup)
    assert sum(math.exp(w) for _, w in sup) == pytest.approx(1.0)
    p4 = _problem(4)[0]
    spn4 = order_spn(p4, "random", expansion=(3, 2), enum_threshold=1, seed=0)
    assert spn4.num_orders == 3 * 2 ** 2                                # Prop. 6: Π_i K_i^(2^i) for d = 4
    # Prop. 6 size: Σ_{i=1..l} (2^i + 2^(i-1)) Π_{j<i} K_j = 3 * 3 + 6 * 6
    assert spn4.num_edges == 3 * 3 + 6 * 6


def test_closed_form_weights_are_the_support_restricted_posterior(p5):
    post, log_f, q, _ = p5
    spn = order_spn(post, "exact", num_orders=200, expansion=(3, 2), seed=0)
    Z = {}
    for order in itertools.permutations(range(5)):
        Z[order] = np.logaddexp.reduce([w for _, w in _dags_of_order(order, q, log_f)])
    sup = [tuple(o) for o, _ in spn.support()]
    log_Z_supp = np.logaddexp.reduce([Z[o] for o in sup])
    assert spn.log_Z_support == pytest.approx(log_Z_supp, rel=1e-10)
    assert spn.elbo() == pytest.approx(log_Z_supp, rel=1e-10)            # ELBO* = log Z_support (Prop. 5)
    assert spn.coverage == pytest.approx(math.exp(log_Z_supp - np.logaddexp.reduce(list(Z.values()))), rel=1e-9)
    for o, w in spn.support():
        assert w == pytest.approx(Z[tuple(o)] - log_Z_supp, abs=1e-9)
    uni = order_spn(post, "exact", num_orders=200, expansion=(3, 2), parameters="uniform", seed=0)
    assert uni.elbo() < spn.elbo()                                       # the closed form maximises the ELBO


def test_a_full_support_circuit_is_the_exact_posterior():
    post = _problem(4, seed=2)[0]
    spn = order_spn(post, "random", expansion=(6, 2), seed=0)           # all 6 * 2 * 2 = 24 orders
    assert spn.num_orders == 24 and spn.coverage == pytest.approx(1.0)
    assert spn.log_Z_support == pytest.approx(post._log_Z, rel=1e-12)
    ev = {(0, 1): True, (3, 2): False}
    np.testing.assert_allclose(spn.edge_probs(given=ev).numpy(), post.edge_probs(given=ev).numpy(), atol=1e-10)
    assert spn.prob(ev) == pytest.approx(post.prob(ev), rel=1e-10)
    assert torch.equal(spn.map_dag(given=ev), post.map_dag(given=ev))


EVIDENCE = [{}, {(0, 1): True}, {(1, 0): True, (2, 4): False}, {(3, 4): True, (1, 4): True, (0, 2): False}]


@pytest.mark.parametrize("evidence", EVIDENCE)
def test_circuit_queries_match_enumeration(circuit, evidence):
    spn, (orders, A, lq) = circuit
    q = np.exp(lq)
    assert q.sum() == pytest.approx(1.0, rel=1e-9)
    ok = _holds(A, evidence)
    assert spn.prob(evidence) == pytest.approx(q[ok].sum(), rel=1e-9)
    P_ref = (q[ok, None, None] * A[ok]).sum(0) / q[ok].sum()
    np.testing.assert_allclose(spn.edge_probs(given=evidence).numpy(), P_ref, rtol=1e-8, atol=1e-12)
    A_map, order = spn.map_dag(given=evidence, return_order=True)
    _assert_most_probable_dag(A_map.numpy(), A[ok], lq[ok])
    _assert_consistent(A_map.numpy(), order)


def test_complete_dag_probability_sums_orders(circuit):
    spn, (orders, A, lq) = circuit
    q = np.exp(lq)
    # q(G) = Σ over the supported orders consistent with G
    G = A[int(np.argmax(lq))]
    full = {(i, j): bool(G[i, j]) for i in range(5) for j in range(5) if i != j}
    same = (A == G).all((1, 2))
    assert spn.prob(full) == pytest.approx(q[same].sum(), rel=1e-9)


def test_acyclicity_and_support_limits(circuit):
    spn = circuit[0]
    for i, j in itertools.combinations(range(5), 2):
        assert spn.prob({(i, j): True, (j, i): True}) == 0.0
    with pytest.raises(ValueError, match="x0 -> x1 -> x2 -> x0, which form a cycle"):
        spn.edge_probs(given={(0, 1): True, (1, 2): True, (2, 0): True})
    with pytest.raises(ValueError, match="unknown node"):
        spn.prob({("x0", "zz"): True})
    assert spn.prob({("x0", "x1"): True}) == spn.prob({(0, 1): True})


def test_circuit_samples_match_its_probabilities(circuit):
    spn, (orders, A, lq) = circuit
    evidence = {(1, 0): True, (2, 4): False}
    S, O = spn.sample(4000, seed=0, given=evidence, return_orders=True)
    assert bool(is_acyclic(S).all()) and bool(parse_evidence(evidence, 5).holds(S).all())
    P = spn.edge_probs(given=evidence)
    se = (P * (1 - P) / 4000).sqrt()
    assert ((S.mean(0) - P).abs() <= 4.5 * se + 1e-9).all()
    # each sampled DAG is consistent with its sampled order, which is in the support
    sup = {tuple(o) for o, _ in spn.support()}
    pos = torch.argsort(O, 1)
    assert all(tuple(o) in sup for o in O.tolist()[:300])
    i, j = torch.nonzero(S.sum(0) > 0, as_tuple=True)
    for a, b in zip(i.tolist(), j.tolist()):
        has = S[:, a, b] > 0.5
        assert bool((pos[has, a] < pos[has, b]).all())
    # order frequencies against the enumeration
    q = np.exp(lq) * _holds(A, evidence)
    first = np.array([o[0] for o in orders])
    for k in range(5):
        ref = q[first == k].sum() / q.sum()
        got = float((O[:, 0] == k).double().mean())
        assert abs(got - ref) <= 4.5 * math.sqrt(ref * (1 - ref) / 4000) + 1e-9


@pytest.mark.parametrize("evidence", [{}, {(0, 1): True, (3, 4): False}])
def test_circuit_causal_effects_match_enumeration(circuit, p5, evidence):
    spn, (orders, A, lq) = circuit
    X = p5[3]
    q = np.exp(lq) * _holds(A, evidence)
    E = total_effects(bge_mean_weights(X, torch.as_tensor(A))).numpy()
    ref = (q[:, None, None] * E).sum(0) / q.sum()
    np.testing.assert_allclose(spn.causal_effects(given=evidence).numpy(), ref, rtol=1e-7, atol=1e-10)


def test_oracle_orders_steer_the_splits(p5):
    post = p5[0]
    order = [4, 3, 2, 1, 0]
    spn = order_spn(post, np.array([order] * 5), expansion=(1, 1), enum_threshold=1, fill=False)
    assert [tuple(o) for o, _ in spn.support()] == [tuple(order)]
    spn2 = order_spn(post, (np.array([order, [0, 1, 2, 3, 4]]), np.array([1.0, 0.0])), expansion=(1, 1),
                     enum_threshold=1, fill=False)
    assert [tuple(o) for o, _ in spn2.support()] == [tuple(order)]
    with pytest.raises(ValueError, match="permutations"):
        order_spn(post, np.array([[0, 0, 1, 2, 3]]))
    with pytest.raises(ValueError, match="oracle must be"):
        order_spn(post, "gadget")
    with pytest.raises(TypeError, match="ExactStructurePosterior"):
        order_spn(object())
    with pytest.raises(ValueError, match="parameters"):
        order_spn(post, parameters="adam")


def test_held_out_log_likelihood_is_the_sample_average(circuit, p5):
    spn = circuit[0]
    Xt = torch.randn(50, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    ll, se = spn.held_out_log_likelihood(Xt, 300, seed=0, return_stderr=True)
    assert math.isfinite(ll) and se > 0
    with pytest.raises(ValueError, match="X_test"):
        spn.held_out_log_likelihood(torch.zeros(4, 3))


def test_greedy_oracle_takes_the_heaviest_splits(p5):
    post, log_f, q, _ = p5
    Z = {o: np.logaddexp.reduce([w for _, w in _dags_of_order(o, q, log_f)])
         for o in itertools.permutations(range(5))}
    # root split masses by enumeration: orders whose first two nodes are S21
    mass = {}
    for o, z in Z.items():
        key = frozenset(o[:2])
        mass[key] = np.logaddexp(mass.get(key, -np.inf), z)
    best = sorted(mass, key=lambda k: -mass[k])[:3]
    spn = order_spn(post, "greedy", expansion=(3, 1), enum_threshold=1)
    roots = {frozenset(o[:2]) for o, _ in spn.support()}
    assert roots == set(best)
    # with every split kept the greedy circuit is the exact posterior; with K = 3 its coverage beats random splits
    assert order_spn(post, "greedy", expansion=(10, 3)).coverage == pytest.approx(1.0)
    cov_greedy = order_spn(post, "greedy", expansion=(3, 1), enum_threshold=1).coverage
    cov_random = max(order_spn(post, "random", expansion=(3, 1), enum_threshold=1, seed=s).coverage
                     for s in range(5))
    assert cov_greedy >= cov_random
