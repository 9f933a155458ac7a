"""Renamed arguments keep working for one release: the old name gives the same object with a FutureWarning naming
the new one, and passing both names with different values is refused."""
import networkx as nx
import pytest

from pyro_dag import DAGDGP
from pyro_dag.datasets.latent_sem import quadratic_sem
from pyro_dag.infer.autoguide import AutoEncodedStructuredGuide, AutoStructuredGuide
from pyro_dag.sem import LatentSEM
from pyro_dag.utils import renamed_argument


def _model():
    return DAGDGP(nx.DiGraph([("x", "y")]), num_inducing=3)


def test_guide_structure_is_renamed_precision():
    with pytest.warns(FutureWarning, match="structure= is renamed precision="):
        guide = AutoStructuredGuide(_model(), structure="mean_field")
    assert guide.precision == "mean_field" and guide.structure == "mean_field"
    with pytest.raises(TypeError, match="pass only precision="):
        AutoStructuredGuide(_model(), structure="mean_field", precision="full")
    with pytest.warns(FutureWarning, match="AutoEncodedStructuredGuide: structure= is renamed precision="):
        g = nx.DiGraph([("h", "y")])
        AutoEncodedStructuredGuide(DAGDGP(g, latent_inputs={"h": 1}, num_inducing=3), structure="full")


def test_dagdgp_options_are_keyword_only():
    with pytest.raises(TypeError):
        DAGDGP(nx.DiGraph([("x", "y")]), None, 3)


def test_latent_sem_structure_is_renamed_graph():
    data = quadratic_sem(n=20)
    with pytest.warns(FutureWarning, match="LatentSEM: structure= is renamed graph="):
        model = LatentSEM(structure=data.graph, indicators=data.indicators, anchors=data.anchors, num_inducing=3)
    assert set(model.graph.edges) == set(data.graph.edges) and model.structure is model.graph
    assert data.structure is data.graph


def test_renamed_argument_passes_the_new_name_through_silently(recwarn):
    assert renamed_argument("f", "old", "new", None, 3, 1) == 3
    assert not recwarn.list
