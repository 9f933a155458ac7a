"""The I-essential graph (Hauser & Bühlmann 2012) against brute force: the union of the interventional Markov
equivalence class, found by enumerating every DAG on 4 nodes."""
import itertools

import numpy as np
import pytest
import torch

from pyro_dag.graph import dag_to_cpdag, dag_to_icpdag
from pyro_dag.metrics.structure import auroc, expected_shd


def _all_dags(p):
    pairs = [(i, j) for i in range(p) for j in range(p) if i < j]
    out = []
    for states in itertools.product([0, 1, 2], repeat=len(pairs)):
        A = np.zeros((p, p), dtype=np.int8)
        for (i, j), st in zip(pairs, states):
            if st == 1:
                A[i, j] = 1
            elif st == 2:
                A[j, i] = 1
        if not np.linalg.matrix_power(A.astype(np.int64), p).any():
            out.append(A)
    return out


def _signature(A, family):
    """Hauser & Bühlmann 2012, Theorem 10: skeleton, v-structures, and the skeleton with the edges into each target
    cut."""
    p = A.shape[0]
    skel = (A + A.T) > 0
    v = tuple((i, k, j) for k in range(p) for i in range(p) for j in range(i + 1, p)
              if A[i, k] and A[j, k] and not skel[i, j])
    cut = []
    for t in family:
        B = A.copy()
        B[:, list(t)] = 0
        cut.append(((B + B.T) > 0).tobytes())
    return skel.tobytes(), v, tuple(cut)


@pytest.mark.parametrize("family", [[()], [(), (0,)], [(), (1, 2)], [(), (3,), (0,)], [(0,), (1,), (2,), (3,)]])
def test_i_essential_graph_is_the_union_of_the_interventional_equivalence_class(family):
    dags = _all_dags(4)
    assert len(dags) == 543
    classes = {}
    for A in dags:
        classes.setdefault(_signature(A, family), []).append(A)
    for members in classes.values():
        union = (np.stack(members).sum(0) > 0).astype(np.int8)
        for A in members:
            np.testing.assert_array_equal(dag_to_icpdag(A, family), union)


def test_observational_family_is_the_cpdag_and_inputs_keep_their_type():
    A = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]])
    np.testing.assert_array_equal(dag_to_icpdag(A), dag_to_cpdag(A))
    t = dag_to_icpdag(torch.as_tensor(A, dtype=torch.float32), [[], [1]])
    assert t.dtype == torch.float32 and t.tolist() == [[0, 1, 0], [0, 0, 1], [0, 0, 0]]
    mask = np.zeros((6, 3), dtype=bool)
    mask[3:, 1] = True
    np.testing.assert_array_equal(dag_to_icpdag(A, mask), t.numpy())
    with pytest.raises(ValueError, match="node 1 is a target of every experiment"):
        dag_to_icpdag(A, [[1]])
    with pytest.raises(ValueError, match="not a node index"):
        dag_to_icpdag(A, [[], [5]])


def test_metrics_at_the_interventional_cpdag_level():
    A = np.array([[0, 1], [0, 0]])
    wrong = np.array([[[0, 0], [1, 0]]])
    # observationally both directions are one class: no error; with an experiment on node 1 they differ
    assert expected_shd(wrong, A, level="cpdag") == 0.0
    assert expected_shd(wrong, A, level="cpdag", targets=[[], [1]]) == 1.0
    assert auroc(np.stack([A, A]), A, level="cpdag", targets=[[], [1]]) == 1.0
