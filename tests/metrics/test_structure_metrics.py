"""Tests of pyro_dag.metrics.structure against hand-computed cases and brute force (SVI-DAG, Zinage 2026, arXiv:2608.04930, App. C)."""
import itertools

import numpy as np
import pytest
import torch

from pyro_dag.metrics import (
    auprc,
    auroc,
    brier,
    cpdag_to_dags,
    dag_to_cpdag,
    edge_marginals,
    expected_f1,
    expected_shd,
    is_dag,
    structure_metrics,
)


def adj(p, edges):
    a = np.zeros((p, p), dtype=np.int64)
    for i, j in edges:
        a[i, j] = 1
    return a


# ------------------------------------------------------------------------------------------------
# dag_to_cpdag: textbook cases
# ------------------------------------------------------------------------------------------------
def und(p, directed, undirected):
    c = adj(p, directed)
    for i, j in undirected:
        c[i, j] = c[j, i] = 1
    return c


@pytest.mark.parametrize(
    "name, p, dag_edges, directed, undirected",
    [
        ("empty", 3, [], [], []),
        ("chain", 3, [(0, 1), (1, 2)], [], [(0, 1), (1, 2)]),
        ("fork", 3, [(1, 0), (1, 2)], [], [(0, 1), (1, 2)]),
        ("collider", 3, [(0, 2), (1, 2)], [(0, 2), (1, 2)], []),
        ("shielded collider", 3, [(0, 2), (1, 2), (0, 1)], [], [(0, 1), (0, 2), (1, 2)]),
        # R1: the v-structure 0 -> 2 <- 1 compels 2 -> 3 (0 and 3 non-adjacent)
        ("meek R1", 4, [(0, 2), (1, 2), (2, 3)], [(0, 2), (1, 2), (2, 3)], []),
        # sprinkler (Pearl): C=0, S=1, R=2, W=3, G=4
        ("sprinkler", 5, [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4)], [(1, 3), (2, 3), (3, 4)], [(0, 1), (0, 2)]),
        # R2: v-structure 0 -> 2 <- 1, R1 gives 2 -> 3, then R2 orients 1 -> 3 (1 -> 2 -> 3); 0 - 4 stays
        ("meek R2", 5, [(0, 2), (0, 4), (1, 2), (1, 3), (2, 3)], [(0, 2), (1, 2), (2, 3), (1, 3)], [(0, 4)]),
        # R3: c=1 -> b=0 <- d=2 (c, d non-adjacent), a=3 adjacent to all: a -> b compelled, a - c and a - d not
        ("meek R3", 4, [(3, 1), (3, 2), (3, 0), (1, 0), (2, 0)], [(1, 0), (2, 0), (3, 0)], [(3, 1), (3, 2)]),
    ],
)
def test_dag_to_cpdag_textbook(name, p, dag_edges, directed, undirected):
    assert np.array_equal(dag_to_cpdag(adj(p, dag_edges)), und(p, directed, undirected)), name


def _v_structures(a):
    p = a.shape[0]
    sk = a | a.T
    return {(i, j, k) for k in range(p) for i in range(p) for j in range(i + 1, p)
            if a[i, k] and a[j, k] and not sk[i, j]}


def _mec_brute_force(a):
    """All DAGs with the skeleton and v-structures of a (Verma & Pearl 1990)."""
    p = a.shape[0]
    pairs = [(i, j) for i in range(p) for j in range(i + 1, p) if a[i, j] or a[j, i]]
    vs = _v_structures(a)
    members = []
    for bits in itertools.product([0, 1], repeat=len(pairs)):
        g = np.zeros_like(a)
        for (i, j), b in zip(pairs, bits):
            if b:
                g[i, j] = 1
            else:
                g[j, i] = 1
        if is_dag(g) and _v_structures(g) == vs:
            members.append(g)
    return members


def _random_dag(rng, p, prob):
    a = (rng.random((p, p)) < prob).astype(np.int64)
    a = np.triu(a, 1)
    perm = rng.permutation(p)
    return a[np.ix_(perm, perm)]


def test_dag_to_cpdag_matches_brute_force_mec():
    rng = np.random.default_rng(0)
    graphs = [_random_dag(rng, p, prob) for p in (4, 5) for prob in (0.3, 0.5, 0.7) for _ in range(12)]
    for a in graphs:
        members = _mec_brute_force(a)
        assert any(np.array_equal(m, a) for m in members)
        union = np.max(members, axis=0)  # an entry is set iff some member of the class has it
        c = dag_to_cpdag(a)
        assert np.array_equal(c, union), a
        # every member of the class has the same CPDAG
        for m in members[:5]:
            assert np.array_equal(dag_to_cpdag(m), c)


def test_dag_to_cpdag_batched_types_and_errors():
    chain = adj(3, [(0, 1), (1, 2)])
    coll = adj(3, [(0, 2), (1, 2)])
    t = torch.tensor(np.stack([chain, coll, chain]), dtype=torch.float32)
    c = dag_to_cpdag(t)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float32 and c.shape == (3, 3, 3)
    assert torch.equal(c[0], c[2]) and torch.equal(c[1], t[1]) and c[0].sum() == 4
    with pytest.raises(ValueError, match="cycle"):
        dag_to_cpdag(adj(3, [(0, 1), (1, 2), (2, 0)]))
    with pytest.raises(ValueError, match="0/1"):
        dag_to_cpdag([[0, 0.5], [0, 0]])
    with pytest.raises(ValueError, match="shape"):
        dag_to_cpdag(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="diagonal"):
        dag_to_cpdag(np.eye(3))


def test_is_dag():
    assert is_dag(adj(3, [(0, 1), (1, 2)]))
    assert not is_dag(adj(3, [(0, 1), (1, 2), (2, 0)]))
    assert is_dag(np.stack([adj(2, [(0, 1)]), adj(2, [(0, 1), (1, 0)])])).tolist() == [True, False]


def test_cpdag_to_dags_stays_in_class_and_reaches_every_member():
    rng = np.random.default_rng(1)
    for _ in range(20):
        a = _random_dag(rng, 5, 0.5)
        c = dag_to_cpdag(a)
        dags = cpdag_to_dags(c, num_samples=5, seed=rng)
        assert is_dag(dags).all()
        assert all(np.array_equal(dag_to_cpdag(d), c) for d in dags)
    chain = dag_to_cpdag(adj(3, [(0, 1), (1, 2)]))  # class of size 3
    dags = cpdag_to_dags(chain, num_samples=200, seed=0)
    assert len({d.tobytes() for d in dags}) == 3
    with pytest.raises(ValueError, match="extension"):
        cpdag_to_dags(adj(3, [(0, 1), (1, 2), (2, 0)]))
    with pytest.raises(ValueError, match="extension"):  # 4-cycle of undirected edges is not chordal
        cpdag_to_dags(und(4, [], [(0, 1), (1, 2), (2, 3), (3, 0)]))


# ------------------------------------------------------------------------------------------------
# metrics: hand-computed cases. Truth: chain 0 -> 1 -> 2.
# ------------------------------------------------------------------------------------------------
TRUTH = adj(3, [(0, 1), (1, 2)])
G1 = TRUTH                                   # exact
G2 = adj(3, [(0, 1), (2, 1)])                # 1 -> 2 reversed: a v-structure
G3 = adj(3, [])                              # empty
G4 = adj(3, [(0, 1), (1, 2), (0, 2)])        # one extra edge: complete DAG
SAMPLES = np.stack([G1, G2, G3, G4])


def test_brier_probs_hand_computed():
    P = np.array([[0, 0.9, 0.2], [0.1, 0, 0.6], [0, 0.3, 0]])
    assert brier(P, TRUTH) == pytest.approx(0.31 / 6)
    assert brier(torch.tensor(P), torch.tensor(TRUTH)) == pytest.approx(0.31 / 6)


def test_sample_metrics_dag_level():
    assert edge_marginals(SAMPLES) == pytest.approx(np.array([[0, .75, .25], [0, 0, .5], [0, .25, 0]]))
    assert brier(SAMPLES, TRUTH) == pytest.approx(0.4375 / 6)
    assert expected_shd(SAMPLES, TRUTH, reversal_cost=1) == pytest.approx((0 + 1 + 2 + 1) / 4)
    assert expected_shd(SAMPLES, TRUTH, reversal_cost=2) == pytest.approx((0 + 2 + 2 + 1) / 4)
    val, per = expected_shd(SAMPLES, TRUTH, return_all=True)
    assert per.tolist() == [0, 1, 2, 1]
    assert expected_f1(SAMPLES, TRUTH) == pytest.approx((1 + 0.5 + 0 + 0.8) / 4)
    # edge probabilities give the same expected SHD (exact for DAG posteriors)
    P = edge_marginals(SAMPLES)
    for rc in (1, 2):
        assert expected_shd(P, TRUTH, reversal_cost=rc) == pytest.approx(expected_shd(SAMPLES, TRUTH, reversal_cost=rc))
    # weights select samples
    assert expected_shd(SAMPLES, TRUTH, weights=[1, 0, 0, 0]) == 0.0
    assert expected_f1(SAMPLES, TRUTH, weights=torch.tensor([0.0, 1.0, 0.0, 1.0])) == pytest.approx((0.5 + 0.8) / 2)


def test_expected_shd_from_probs_hand_computed():
    P = np.array([[0, 0.9, 0.2], [0.1, 0, 0.6], [0, 0.3, 0]])
    # pairs: (0,1): 0.1 rc; (0,2): 0.2; (1,2): 0.3 rc + 0.1
    assert expected_shd(P, TRUTH, reversal_cost=1) == pytest.approx(0.7)
    assert expected_shd(P, TRUTH, reversal_cost=2) == pytest.approx(1.1)
    assert expected_shd(P, TRUTH, level="skeleton") == pytest.approx(0.2 + 0.1)


def test_sample_metrics_cpdag_level():
    # truth CPDAG: 0 - 1 - 2. CPDAGs: G1 same; G2 v-structure (directed); G3 empty; G4 all undirected.
    assert expected_shd(SAMPLES, TRUTH, level="cpdag") == pytest.approx((0 + 2 + 2 + 1) / 4)
    assert expected_shd(SAMPLES, TRUTH, level="cpdag", reversal_cost=2) == pytest.approx((0 + 4 + 2 + 1) / 4)
    assert expected_f1(SAMPLES, TRUTH, level="cpdag") == pytest.approx((1 + 4 / 6 + 0 + 0.8) / 4)
    assert brier(SAMPLES, TRUTH, level="cpdag") == pytest.approx(0.75 / 6)
    assert auroc(SAMPLES, TRUTH, level="cpdag") == 1.0
    with pytest.raises(ValueError, match="samples"):
        brier(edge_marginals(SAMPLES), TRUTH, level="cpdag")
    with pytest.raises(ValueError, match="cycle"):
        expected_shd(SAMPLES, adj(3, [(0, 1), (1, 2), (2, 0)]), level="cpdag")


def test_sample_metrics_skeleton_level():
    assert brier(SAMPLES, TRUTH, level="skeleton") == pytest.approx(0.0625)
    assert brier(SAMPLES, TRUTH, level="skeleton", symmetrize="max") == pytest.approx(0.375 / 3)
    assert brier(edge_marginals(SAMPLES), TRUTH, level="skeleton") == pytest.approx(0.0625)
    assert expected_shd(SAMPLES, TRUTH, level="skeleton") == pytest.approx(0.75)
    assert expected_f1(SAMPLES, TRUTH, level="skeleton") == pytest.approx(2.8 / 4)
    assert auroc(SAMPLES, TRUTH, level="skeleton") == 1.0
    with pytest.raises(ValueError, match="exclusive"):
        brier(np.array([[0, .8, 0], [.7, 0, 0], [0, 0, 0]]), TRUTH, level="skeleton")


def test_auroc_auprc_hand_computed_with_ties():
    P = np.array([[0, 0.9, 0.2], [0.1, 0, 0.6], [0, 0.6, 0]])  # a positive (1,2) ties with a negative (2,1)
    assert auroc(P, TRUTH) == pytest.approx(7.5 / 8)
    assert auprc(P, TRUTH) == pytest.approx(0.5 * 1 + 0.5 * 2 / 3)
    assert np.isnan(auroc(P, np.zeros((3, 3))))
    assert np.isnan(auprc(P, np.zeros((3, 3))))


def _auroc_pairs(s, y):
    pos, neg = s[y == 1], s[y == 0]
    return np.mean([(a > b) + 0.5 * (a == b) for a in pos for b in neg])


def _auprc_thresholds(s, y):
    ap, prev_r = 0.0, 0.0
    for t in sorted(set(s.tolist()), reverse=True):
        sel = s >= t
        prec = (y[sel] == 1).mean()
        rec = (y[sel] == 1).sum() / (y == 1).sum()
        ap += (rec - prev_r) * prec
        prev_r = rec
    return ap


@pytest.mark.parametrize("seed", range(6))
def test_auroc_auprc_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    p = 6
    P = np.round(rng.random((p, p)), 1)  # coarse grid: many ties
    np.fill_diagonal(P, 0)
    T = _random_dag(rng, p, 0.4)
    if T.sum() == 0:
        T[0, 1] = 1
    m = ~np.eye(p, dtype=bool)
    s, y = P[m], T[m]
    assert auroc(P, T) == pytest.approx(_auroc_pairs(s, y))
    assert auprc(P, T) == pytest.approx(_auprc_thresholds(s, y))


def test_structure_metrics_and_input_errors():
    out = structure_metrics(SAMPLES, TRUTH, level="dag", reversal_cost=2)
    assert set(out) == {"brier", "e_shd", "e_f1", "auroc", "auprc", "edges"}
    assert out["e_shd"] == pytest.approx(1.25) and out["edges"] == pytest.approx((2 + 2 + 0 + 3) / 4)
    with pytest.raises(ValueError, match="level"):
        brier(SAMPLES, TRUTH, level="pdag")
    with pytest.raises(ValueError, match="nodes"):
        brier(SAMPLES, np.zeros((4, 4)))
    with pytest.raises(ValueError, match="0/1"):
        expected_f1(SAMPLES * 0.5, TRUTH)
    with pytest.raises(ValueError, match=r"\[k, p, p\]"):
        expected_f1(TRUTH, TRUTH)
    with pytest.raises(ValueError, match="weights"):
        expected_shd(SAMPLES, TRUTH, weights=[1, 1])
    with pytest.raises(ValueError, match="reversal_cost"):
        expected_shd(SAMPLES, TRUTH, reversal_cost=-1)
    with pytest.raises(ValueError, match="NaN"):
        brier(np.full((3, 3), np.nan), TRUTH)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        auroc(np.full((3, 3), 2.0) * (1 - np.eye(3)), TRUTH)
    with pytest.raises(ValueError, match="exclusive"):
        expected_shd(np.array([[0, .8, 0], [.7, 0, 0], [0, 0, 0]]), TRUTH)
