import warnings

import numpy as np

from pyro_dag.datasets.boston import boston_housing, boston_raw
from pyro_dag.datasets.latent_sem import abalone_like_sem, consumer_like_sem, quadratic_sem
from pyro_dag.sem import IdentifiabilityWarning, check_sem_declaration


def test_boston_is_the_mass_data_and_the_papers_subset():
    raw = boston_raw()
    assert raw.shape == (506, 14)
    assert list(raw.columns[:3]) == ["crim", "zn", "indus"]
    np.testing.assert_allclose(raw.iloc[0][["crim", "rm", "medv"]].to_numpy(float), [0.00632, 6.575, 24.0])
    h = boston_housing()
    assert h.data.shape == (374, 11)  # rad < 24 leaves the paper's 374 rows
    np.testing.assert_allclose(h.data["rad"].max(), np.log(8))
    assert sorted(h.graph.edges) == sorted([("Accessibility", "Structural"), ("Accessibility", "NeighborhoodII"),
                                                ("Accessibility", "NeighborhoodI"), ("Structural", "NeighborhoodII"),
                                                ("Structural", "NeighborhoodI"), ("NeighborhoodII", "NeighborhoodI")])
    # the two two-indicator latents are accepted with a warning each
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_sem_declaration(h.graph, h.indicators, h.anchors, columns=h.data.columns)
    named = sorted(str(w.message).split("'")[1] for w in caught if issubclass(w.category, IdentifiabilityWarning))
    assert named == ["Accessibility", "Structural"]


def test_synthetic_problems():
    q = quadratic_sem(n=150, seed=0)
    assert q.data.shape == (150, 6)
    assert abs((q.data["Y1"] - q.latents["X1"]).std() - 1) < 0.15  # anchor: Y1 = X1 + N(0, 1)
    resid = q.latents["X2"] - 4 * q.latents["X1"] ** 2
    assert abs(resid.std() - 1) < 0.15
    c = consumer_like_sem()
    assert c.data.shape == (333, 16) and len(c.graph.edges) == 4
    a = abalone_like_sem(n=200)
    assert a.data.shape == (200, 7) and (a.latents["Weight"] > 0).all()
    for d in (q, c, a):
        check_sem_declaration(d.graph, d.indicators, d.anchors, columns=d.data.columns)
