"""Tests of the shipped Sachs data and graphs (SVI-DAG, arXiv:2608.04930, §4.4; DAG-DGP, arXiv:2607.09645, App. G.4)."""
import numpy as np
import pytest
import torch

from pyro_dag.datasets import SACHS_COLUMNS, SACHS_NODES, sachs, sachs_graph
from pyro_dag.metrics import is_dag


def edges(a):
    return {(SACHS_NODES[i], SACHS_NODES[j]) for i, j in zip(*np.nonzero(a.numpy()))}


def test_full_data_shape_and_columns():
    d = sachs()
    assert d.data.shape == (7466, 11)
    assert d.columns == SACHS_COLUMNS == ["praf", "pmek", "plcg", "PIP2", "PIP3", "p44/42", "pakts473", "PKA",
                                          "PKC", "P38", "pjnk"]
    assert d.nodes[5] == "Erk" and d.nodes[6] == "Akt"
    assert d.data.dtype == torch.get_default_dtype()
    assert float(d.data.min()) >= 1.0  # raw intensities; log is defined
    assert d.data[0].tolist() == pytest.approx([26.4, 13.2, 8.82, 18.3, 58.8, 6.61, 17.0, 414.0, 17.0, 44.9, 40.0])


def test_cd3cd28icam2_subset_rows():
    d = sachs(subset="cd3cd28icam2", dtype=torch.float64)
    assert d.data.shape == (902, 11)
    # first and last rows of the condition "2. CD3, CD28, ICAM-2" (data rows 853 and 1754 of the pooled file)
    assert d.data[0].tolist() == pytest.approx([36.5, 22.3, 17.5, 142, 9.06, 16.1, 22.1, 661, 6.55, 27.6, 20.2])
    assert d.data[-1].tolist() == pytest.approx([117, 66.1, 4.74, 16.3, 15.5, 22.3, 37.5, 328, 8.74, 23.1, 19.8])
    full = sachs(dtype=torch.float64).data
    assert torch.equal(full[853:1755], d.data)
    assert sachs(subset="cd3cd28").data.shape == (853, 11)


def test_log_and_standardize():
    raw = sachs(subset="cd3cd28icam2", dtype=torch.float64).data
    d = sachs(subset="cd3cd28icam2", log=True, standardize=True, dtype=torch.float64).data
    ref = raw.log()
    ref = (ref - ref.mean(0)) / ref.std(0, unbiased=False)
    assert torch.allclose(d, ref)
    assert torch.allclose(d.mean(0), torch.zeros(11, dtype=torch.float64), atol=1e-10)


def test_graphs():
    cdt = sachs_graph("cdt")
    assert int(cdt.sum()) == 18 and not is_dag(cdt)
    assert {("Plcg", "PIP2"), ("PIP2", "PIP3"), ("PIP3", "Plcg")} <= edges(cdt)  # the cycle
    cons = sachs_graph("consensus")
    assert int(cons.sum()) == 17 and is_dag(cons)
    assert edges(cdt) - edges(cons) == {("PIP2", "PIP3")}
    bn = sachs_graph("bnlearn")
    assert int(bn.sum()) == 17 and is_dag(bn)
    assert {("PKC", "PKA"), ("Erk", "Akt"), ("PIP3", "PIP2"), ("Plcg", "PIP3")} <= edges(bn)
    assert not bn[:, SACHS_NODES.index("PKC")].any() and not bn[:, SACHS_NODES.index("Plcg")].any()  # roots
    assert torch.equal(sachs(graph="bnlearn").adjacency, bn)


def test_bad_arguments():
    with pytest.raises(ValueError, match="subset"):
        sachs(subset="observational")
    with pytest.raises(ValueError, match="graph"):
        sachs_graph("sachs")
