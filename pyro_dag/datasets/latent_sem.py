"""Synthetic latent-variable SEM problems of Silva & Gramacy (2010), "Gaussian Process Structural Equation Models
with Latent Variables", UAI, arXiv:1002.4802, Sec. 5, and stand-ins for its external data sets.

* :func:`quadratic_sem` -- the paper's synthetic quadratic problem (Sec. 5, Fig. 3), fully specified there;
* :func:`consumer_like_sem` -- a synthetic stand-in for the Consumer data (Bartholomew et al. 2008; not
  redistributable here): the paper's latent DAG X1 -> X2, X1 -> X3, X2 -> X3, X2 -> X4, four indicators each,
  N = 333 (Sec. 5, EPSR experiment); the functions and loadings are ours;
* :func:`abalone_like_sem` -- a synthetic stand-in for the UCI Abalone problem (two latents Size -> Weight with
  3 + 4 indicators; Sec. 5): weight grows like size cubed, shell-like indicators are noisier; all values are ours.

Each returns a :class:`LatentSEMData` with a DataFrame of indicators, the true latent values, the latent DAG and
the ``indicators`` / ``anchors`` declaration for :class:`~pyro_dag.sem.LatentSEM`.
"""
from dataclasses import dataclass
from typing import Dict, List

import networkx as nx
import numpy as np
import pandas as pd

__all__ = ["LatentSEMData", "quadratic_sem", "consumer_like_sem", "abalone_like_sem"]


@dataclass
class LatentSEMData:
    """A latent SEM data set.

    :ivar pandas.DataFrame data: ``[n, J]`` indicators. :ivar pandas.DataFrame latents: ``[n, V]`` true latents.
    :ivar networkx.DiGraph graph: latent DAG (``structure`` is its old name). :ivar dict indicators: ``{latent: [columns]}``.
    :ivar dict anchors: ``{latent: column}``.
    """

    data: pd.DataFrame
    latents: pd.DataFrame
    graph: nx.DiGraph
    indicators: Dict[str, List[str]]
    anchors: Dict[str, str]

    @property
    def structure(self):
        """The old name of :attr:`graph`."""
        return self.graph


def quadratic_sem(n=150, seed=0):
    """``X1 ~ N(0, 1)``, ``X2 = 4 X1² + ζ``, ``ζ ~ N(0, 1)``; ``Y1..Y3 = X1 + ε``, ``Y4..Y6 = X2 + ε``, ``ε ~ N(0, 1)``;
    ``Y1`` and ``Y4`` are the anchors (Silva & Gramacy 2010, Sec. 5, N = 150)."""
    rng = np.random.default_rng(seed)
    x1 = rng.normal(size=n)
    x2 = 4 * x1 ** 2 + rng.normal(size=n)
    cols = {f"Y{i}": (x1 if i <= 3 else x2) + rng.normal(size=n) for i in range(1, 7)}
    return LatentSEMData(pd.DataFrame(cols), pd.DataFrame({"X1": x1, "X2": x2}), nx.DiGraph([("X1", "X2")]),
                         {"X1": ["Y1", "Y2", "Y3"], "X2": ["Y4", "Y5", "Y6"]}, {"X1": "Y1", "X2": "Y4"})


def consumer_like_sem(n=333, seed=0):
    """Four latents on the paper's Consumer DAG (X1 -> X2, X1 -> X3, X2 -> X3, X2 -> X4), four indicators each with
    loadings in [0.7, 1.3] and error s.d. 0.5; ``X1`` is a two-component mixture, the equations are mildly
    nonlinear (``tanh``, products). Standardised indicators, as the paper normalises the Consumer data."""
    rng = np.random.default_rng(seed)
    z = rng.random(n) < 0.4
    x1 = np.where(z, rng.normal(-1.0, 0.5, n), rng.normal(0.7, 0.6, n))
    x2 = 0.8 * np.tanh(1.5 * x1) + 0.4 * rng.normal(size=n)
    x3 = 0.5 * x1 + 0.6 * x2 + 0.3 * x1 * x2 + 0.4 * rng.normal(size=n)
    x4 = 0.9 * x2 + 0.4 * rng.normal(size=n)
    X = {"X1": x1, "X2": x2, "X3": x3, "X4": x4}
    cols, ind = {}, {}
    for k, (name, x) in enumerate(X.items()):
        ind[name] = []
        for i in range(4):
            c = f"y{k + 1}{i + 1}"
            lam = 1.0 if i == 0 else rng.uniform(0.7, 1.3)
            cols[c] = lam * x + 0.5 * rng.normal(size=n)
            ind[name].append(c)
    df = pd.DataFrame(cols)
    df = (df - df.mean()) / df.std()
    g = nx.DiGraph([("X1", "X2"), ("X1", "X3"), ("X2", "X3"), ("X2", "X4")])
    return LatentSEMData(df, pd.DataFrame(X), g, ind, {x: v[0] for x, v in ind.items()})


def abalone_like_sem(n=1000, seed=0):
    """Size -> Weight with Size indicators (length, diameter, height) and Weight indicators (whole, shucked,
    viscera, shell): ``Size ~ Gamma``-shaped (skewed, positive), ``Weight = 0.12 Size³ + heteroscedastic noise``,
    indicators linear in their latent with error s.d. 3-10 % of the latent's range."""
    rng = np.random.default_rng(seed)
    size = 1.0 + rng.gamma(4.0, 0.35, n)
    weight = 0.12 * size ** 3 * np.exp(0.08 * rng.normal(size=n))
    sz = {"length": (1.0, 0.08), "diameter": (0.8, 0.07), "height": (0.3, 0.05)}
    wt = {"whole": (1.0, 0.05), "shucked": (0.43, 0.04), "viscera": (0.22, 0.03), "shell": (0.29, 0.05)}
    cols = {}
    for c, (lam, sd) in sz.items():
        cols[c] = lam * size + sd * rng.normal(size=n)
    for c, (lam, sd) in wt.items():
        cols[c] = lam * weight + sd * rng.normal(size=n)
    return LatentSEMData(pd.DataFrame(cols), pd.DataFrame({"Size": size, "Weight": weight}),
                         nx.DiGraph([("Size", "Weight")]), {"Size": list(sz), "Weight": list(wt)},
                         {"Size": "length", "Weight": "whole"})
