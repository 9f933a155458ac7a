import warnings

import networkx as nx
import numpy as np
import pandas as pd
import pytest

from pyro_dag.sem import IdentifiabilityWarning, LatentSEM, SEMSpecError, check_sem_declaration

THREE = {"A": ["a1", "a2", "a3"], "B": ["b1", "b2", "b3"]}


def test_three_indicators_pass_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = check_sem_declaration(nx.DiGraph([("A", "B")]), THREE, {"A": "a1", "B": "b2"})
    assert spec.latents == ["A", "B"]
    assert spec.rules == {"A": "three-indicator", "B": "three-indicator"}
    assert spec.anchors == {"A": "a1", "B": "b2"}
    assert spec.indicator_parents["b2"] == ["B"]


def test_default_anchor_is_first_indicator():
    spec = check_sem_declaration(nx.DiGraph([("A", "B")]), THREE)
    assert spec.anchors == {"A": "a1", "B": "b1"}


def test_one_indicator_is_an_error_naming_the_latent():
    with pytest.raises(SEMSpecError, match=r"latent 'B' has 1 indicator"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), {"A": ["a1", "a2", "a3"], "B": ["b1"]})


def test_two_indicators_without_neighbour_is_an_error():
    with pytest.raises(SEMSpecError, match=r"latent 'C' has only two indicators.*no structural edge"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), {**THREE, "C": ["c1", "c2"]})


def test_two_indicators_with_neighbour_warns_naming_the_latent():
    with pytest.warns(IdentifiabilityWarning, match=r"latent 'B' has only two indicators"):
        spec = check_sem_declaration(nx.DiGraph([("A", "B")]), {"A": ["a1", "a2", "a3"], "B": ["b1", "b2"]})
    assert spec.rules["B"] == "two-indicator"


def test_two_non_gaussian_indicators_suffice_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        spec = check_sem_declaration(nx.DiGraph(), {"C": ["c1", "c2"]}, non_gaussian=["c1", "c2"])
    assert spec.rules["C"] == "two-non-gaussian"
    # one Gaussian error among the two is not enough
    with pytest.raises(SEMSpecError, match="'C'"):
        check_sem_declaration(nx.DiGraph(), {"C": ["c1", "c2"]}, non_gaussian=["c1"])


def test_cross_loading_needs_the_opt_out():
    ind = {"A": ["a1", "a2", "a3", "x"], "B": ["b1", "b2", "b3", "x"]}
    with pytest.raises(SEMSpecError, match=r"indicator 'x' has two latent parents \['A', 'B'\].*check_identifiability"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), ind)
    spec = check_sem_declaration(nx.DiGraph([("A", "B")]), ind, check_identifiability=False)
    assert spec.indicator_parents["x"] == ["A", "B"]
    assert spec.rules == {"A": "unchecked", "B": "unchecked"}


def test_cross_loaded_indicator_is_not_unique():
    # A has 3 listed indicators but one is shared: only two unique ones (and B is a neighbour) -> unchecked
    ind = {"A": ["a1", "a2", "x"], "B": ["b1", "b2", "b3", "x"]}
    spec = check_sem_declaration(nx.DiGraph([("A", "B")]), ind, check_identifiability=False)
    assert spec.indicator_parents["x"] == ["A", "B"]


def test_anchor_not_among_indicators():
    with pytest.raises(SEMSpecError, match=r"anchor 'b1' of latent 'A' is not among its indicators"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), THREE, {"A": "b1", "B": "b2"})


def test_missing_anchor_in_partial_dict():
    with pytest.raises(SEMSpecError, match=r"latent 'B' has no scale constraint"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), THREE, {"A": "a1"})


def test_two_anchors_for_one_latent_rejected():
    with pytest.raises(SEMSpecError, match=r"exactly one scale constraint"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), THREE, {"A": ["a1", "a2"], "B": "b1"})


def test_cycle_among_latents_is_shown():
    g = nx.DiGraph([("A", "B"), ("B", "C"), ("C", "A")])
    ind = {**THREE, "C": ["c1", "c2", "c3"]}
    with pytest.raises(SEMSpecError, match=r"cycle: A -> B -> C -> A|cycle: B -> C -> A -> B|cycle: C -> A -> B -> C"):
        check_sem_declaration(g, ind)


def test_latent_without_indicators():
    with pytest.raises(SEMSpecError, match=r"latent 'C' has no indicators"):
        check_sem_declaration(nx.DiGraph([("A", "B"), ("B", "C")]), THREE)


def test_dense_needs_opt_out_and_loads_everything():
    with pytest.raises(SEMSpecError, match=r"dense.*check_identifiability=False"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), THREE, measurement="dense")
    spec = check_sem_declaration(nx.DiGraph([("A", "B")]), THREE, measurement="dense", check_identifiability=False)
    assert all(ps == ["A", "B"] for ps in spec.indicator_parents.values())
    assert spec.anchors == {}


def test_latent_and_indicator_name_clash():
    with pytest.raises(SEMSpecError, match=r"'B' is both a latent and an indicator"):
        check_sem_declaration(nx.DiGraph([("A", "B")]), {"A": ["a1", "a2", "B"], "B": ["b1", "b2", "b3"]})


def test_model_rejects_non_numeric_and_missing_columns():
    rng = np.random.default_rng(0)
    df = pd.DataFrame({c: rng.normal(size=20) for c in ["a1", "a2", "a3", "b1", "b2", "b3"]})
    model = LatentSEM(nx.DiGraph([("A", "B")]), THREE, num_inducing=4)
    bad = df.assign(a2=["x"] * 20)
    with pytest.raises(SEMSpecError, match=r"indicator column 'a2' is not numeric"):
        model(bad)
    with pytest.raises(SEMSpecError, match=r"indicator 'b3' is not a column"):
        model(df.drop(columns="b3"))
    with pytest.raises(SEMSpecError, match=r"'b1' .*inf"):
        model(df.assign(b1=np.inf))
    with pytest.raises(SEMSpecError, match=r"'a3' is constant"):
        model(df.assign(a3=1.0))
