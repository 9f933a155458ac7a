"""benchmarks/sachs_regression.py: the table's summaries and the cheap extrapolation diagnosis (Perlino et al. 2026,
arXiv:2607.09645, Sec. 6, Table 3)."""
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from benchmarks import sachs_regression as bench  # noqa: E402
from pyro_dag.experiments.sachs import GP_NODES, ROOTS, sachs_split  # noqa: E402


def test_rows_are_mean_and_standard_error():
    values = [0.6, 0.7, 0.65, 0.9, 0.8]
    se = np.std(values, ddof=1) / np.sqrt(len(values))
    assert bench._fmt(values) == f"{np.mean(values):.3f} ± {se:.3f}"
    assert bench._fmt([0.5]) == "0.500"


def test_paper_cells_mark_the_papers_sd():
    assert bench._paper_cell("extrapolation", "dag_svi", "rmse") == "0.642 (sd 0.031)"
    assert bench._paper_cell("interpolation", "dag_svi", "rmse") == "0.642"      # Table 1 gives means only
    assert bench._paper_cell("interpolation", "dag_svi", "nlpd") == "–"


def test_split_along_a_seeds_direction_is_that_seeds_split():
    for seed in (0, 3):
        s = sachs_split("extrapolation", seed)
        t = bench._split_along(s.direction)
        assert torch.equal(s.train_index, t.train_index) and torch.equal(s.test_index, t.test_index)
        assert all(torch.equal(s.test_data[w], t.test_data[w]) for w in GP_NODES)


def _fake_split(train, test):
    """A split over the Sachs nodes from ``{node: [n]}`` arrays (the diagnosis only reads these fields)."""
    def cols(d, names):
        return {w: torch.as_tensor(d[w], dtype=torch.float64).unsqueeze(-1) for w in names}
    n_train, n_test = len(train["PKC"]), len(test["PKC"])
    return SimpleNamespace(train_index=torch.arange(n_train), test_index=torch.arange(n_train, n_train + n_test),
                           train_inputs=cols(train, ROOTS), test_inputs=cols(test, ROOTS),
                           train_data=cols(train, GP_NODES), test_data=cols(test, GP_NODES))


def test_knn_floor_leaves_each_test_case_out():
    rng = np.random.default_rng(0)
    nodes = ROOTS + GP_NODES
    train = {w: rng.normal(size=40) for w in nodes}
    # test cases that duplicate training cases: the nearest other case is the copy, so the 1-NN floor is 0
    copies = {w: train[w][:10].copy() for w in nodes}
    floor = bench._floor(_fake_split(train, copies), k=1)
    assert all(floor[w]["knn_rmse"] == 0.0 for w in GP_NODES)
    # fresh, unique test cases: with the case itself left out its own value is never used, so the error is not 0
    fresh = {w: rng.normal(size=10) for w in nodes}
    floor = bench._floor(_fake_split(train, fresh), k=1)
    assert all(floor[w]["knn_rmse"] > 0.1 for w in GP_NODES)
    assert np.isclose(floor["PKA"]["test_sd"], fresh["PKA"].std())
