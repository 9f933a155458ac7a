"""Seeded synthetic DAGs and structural equation models for structure learning.

After the synthetic benchmarks of SVI-DAG (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to
Bayesian Causal Discovery*, arXiv:2608.04930, §4.1-4.3; generator details from the authors' code,
github.com/shrenikvz/SVI-DAG).

Graphs: Erdős–Rényi with an exact edge count (SVI-DAG's generator: ``networkx.gnm_random_graph`` oriented by a
random node order) and scale-free (Barabási–Albert preferential attachment, oriented by the order of
attachment, then relabelled at random). Mechanisms, all with additive Gaussian noise
``x_j = f_j(x_pa(j)) + ε_j``:

* ``"linear"``: ``f_j = Σ_i W_ij x_i`` with ``|W_ij| ~ U[0.3, 0.7]`` and a random sign (SVI-DAG, §4.2);
* ``"mlp"``: a random one-hidden-layer ReLU network, ``f_j = w2ᵀ ReLU(W1ᵀ x_pa + b1)``, 10 hidden units, all
  weights ``±U[0.3, 0.7]``, no output bias (SVI-DAG's nonlinear SEM);
* ``"gp"``: a draw from a zero-mean GP with an RBF kernel (unit variance, length-scale 1) on the parents' values,
  realised with 1000 random Fourier features (Rahimi & Recht 2007), so that it is cheap for any ``n`` and the
  same function applies to every row.

Root nodes are pure noise. ``A[i, j] = 1`` means the edge ``i -> j``; ``W`` uses the same convention.
"""
from dataclasses import dataclass, field
from typing import Optional

import numpy as np
import torch

__all__ = [
    "SEMData",
    "erdos_renyi_dag",
    "scale_free_dag",
    "sample_sem",
    "synthetic_sem",
    "two_node",
]


@dataclass
class SEMData:
    """Data sampled from a structural equation model with a known DAG.

    :ivar torch.Tensor data: ``[n, p]`` samples (standardised per column if requested).
    :ivar torch.Tensor adjacency: ``[p, p]`` long tensor, ``A[i, j] = 1`` means ``i -> j``.
    :ivar torch.Tensor weights: ``[p, p]`` edge weights for the linear mechanism (``None`` otherwise).
    :ivar str mechanism: ``"linear"``, ``"mlp"``, ``"gp"`` or ``"two_node"``.
    :ivar dict info: generator settings (graph kind, seed, noise scale, ...).
    """

    data: torch.Tensor
    adjacency: torch.Tensor
    weights: Optional[torch.Tensor]
    mechanism: str
    info: dict = field(default_factory=dict)


def _rng(seed):
    if isinstance(seed, np.random.Generator):
        return seed
    if seed is not None and (not isinstance(seed, (int, np.integer)) or seed < 0):
        raise ValueError(f"seed must be a non-negative int, a numpy Generator or None; got {seed!r}")
    return np.random.default_rng(seed)


def _check_p(p):
    if not isinstance(p, (int, np.integer)) or p < 2:
        raise ValueError(f"p (the number of nodes) must be an int >= 2; got {p!r}")


def _permute(a, rng):
    perm = rng.permutation(a.shape[0])
    return a[np.ix_(perm, perm)]


def erdos_renyi_dag(p, num_edges=None, seed=None):
    """A random DAG with exactly ``num_edges`` edges, uniform over skeletons (G(p, m) model), oriented by a
    uniformly random node order (SVI-DAG's generator, arXiv:2608.04930, §4.2-4.3).

    :param int p: number of nodes. :param int num_edges: number of edges ``s`` (default ``p``, i.e. an expected
        degree of 2), at most ``p (p - 1) / 2``.
    :param seed: int seed or ``numpy.random.Generator``.
    :returns: ``[p, p]`` long tensor, ``A[i, j] = 1`` means ``i -> j``.
    """
    _check_p(p)
    m = p if num_edges is None else num_edges
    if not isinstance(m, (int, np.integer)) or not 0 <= m <= p * (p - 1) // 2:
        raise ValueError(f"num_edges must be an int in [0, p(p-1)/2] = [0, {p * (p - 1) // 2}]; got {num_edges!r}")
    rng = _rng(seed)
    iu = np.triu_indices(p, 1)
    chosen = rng.choice(len(iu[0]), size=m, replace=False)
    a = np.zeros((p, p), dtype=np.int64)
    a[iu[0][chosen], iu[1][chosen]] = 1  # upper triangular in the order 0..p-1
    return torch.as_tensor(_permute(a, rng))


def scale_free_dag(p, edges_per_node=2, hubs="parents", seed=None):
    """A scale-free DAG by Barabási–Albert preferential attachment.

    Node ``t`` (in order of arrival) links to ``min(edges_per_node, t)`` distinct earlier nodes, chosen with
    probability proportional to their degree + 1. With ``hubs="parents"`` edges point from the earlier node to
    the new one (hubs have many children, a power-law out-degree); ``"children"`` reverses every edge. Nodes are
    then relabelled by a random permutation. The graph has ``Σ_t min(m, t)`` edges.

    :param int p: number of nodes. :param int edges_per_node: ``m >= 1``.
    :param str hubs: ``"parents"`` or ``"children"``. :param seed: int seed or ``numpy.random.Generator``.
    :returns: ``[p, p]`` long tensor, ``A[i, j] = 1`` means ``i -> j``.
    """
    _check_p(p)
    if not isinstance(edges_per_node, (int, np.integer)) or edges_per_node < 1:
        raise ValueError(f"edges_per_node must be an int >= 1; got {edges_per_node!r}")
    if hubs not in ("parents", "children"):
        raise ValueError(f"hubs must be 'parents' or 'children'; got {hubs!r}")
    rng = _rng(seed)
    a = np.zeros((p, p), dtype=np.int64)
    degree = np.zeros(p)
    for t in range(1, p):
        k = min(edges_per_node, t)
        w = degree[:t] + 1.0
        targets = rng.choice(t, size=k, replace=False, p=w / w.sum())
        a[targets, t] = 1
        degree[targets] += 1
        degree[t] += k
    if hubs == "children":
        a = a.T.copy()
    return torch.as_tensor(_permute(a, rng))


def _signed_uniform(rng, size, low=0.3, high=0.7):
    return rng.uniform(low, high, size=size) * rng.choice([-1.0, 1.0], size=size)


def _topological_order(a):
    import networkx as nx

    return list(nx.topological_sort(nx.from_numpy_array(a, create_using=nx.DiGraph)))


def _check_adjacency(adjacency):
    if isinstance(adjacency, torch.Tensor):
        adjacency = adjacency.detach().cpu().numpy()
    a = np.asarray(adjacency)
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"adjacency must be a square [p, p] matrix; got shape {list(a.shape)}")
    if not np.all((a == 0) | (a == 1)) or np.any(np.diag(a)):
        raise ValueError("adjacency must be 0/1 with a zero diagonal (A[i, j] = 1 means i -> j)")
    a = a.astype(np.int64)
    from ..metrics.structure import is_dag

    if not is_dag(a):
        raise ValueError("adjacency has a cycle; an SEM needs a DAG")
    return a


def synthetic_sem(adjacency, n, mechanism="linear", noise_scale=1.0, weight_range=(0.3, 0.7), hidden=10,
                  lengthscale=1.0, num_features=1000, standardize=False, seed=None, dtype=None):
    """Sample ``n`` rows from an additive-noise SEM on a given DAG (SVI-DAG, arXiv:2608.04930, §4.2-4.3).

    ``x_j = f_j(x_pa(j)) + noise_scale_j * ε_j``, ``ε_j ~ N(0, 1)``, in topological order; the mechanisms are
    described in the module docstring.

    :param adjacency: ``[p, p]`` DAG, ``A[i, j] = 1`` means ``i -> j``.
    :param int n: number of samples.
    :param str mechanism: ``"linear"``, ``"mlp"`` or ``"gp"``.
    :param noise_scale: standard deviation of the additive noise, a float or one per node (``[p]``).
    :param tuple weight_range: ``(low, high)`` range of ``|W|`` for the linear and MLP weights.
    :param int hidden: hidden units of the MLP mechanism.
    :param float lengthscale: RBF length-scale of the GP mechanism. :param int num_features: its random features.
    :param bool standardize: centre and scale every column to unit variance (removes varsortability cues).
    :param seed: int seed or ``numpy.random.Generator``. :param dtype: defaults to ``torch.get_default_dtype()``.
    :returns: :class:`SEMData`.
    """
    a = _check_adjacency(adjacency)
    if mechanism not in ("linear", "mlp", "gp"):
        raise ValueError(f"mechanism must be 'linear', 'mlp' or 'gp'; got {mechanism!r}")
    if not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n must be a positive int; got {n!r}")
    noise = np.asarray(noise_scale, dtype=np.float64).reshape(-1)
    if np.ndim(noise_scale) > 1 or noise.size not in (1, a.shape[0]) or np.any(noise <= 0):
        raise ValueError(f"noise_scale must be a positive float or p = {a.shape[0]} positive floats; got {noise_scale!r}")
    noise = np.broadcast_to(noise, (a.shape[0],))
    lo, hi = weight_range
    if not 0 <= lo <= hi:
        raise ValueError(f"weight_range must be (low, high) with 0 <= low <= high; got {weight_range}")
    rng = _rng(seed)
    p = a.shape[0]
    x = np.zeros((n, p))
    weights = _signed_uniform(rng, (p, p), lo, hi) * a if mechanism == "linear" else None
    for j in _topological_order(a):
        pa = np.nonzero(a[:, j])[0]
        eps = noise[j] * rng.standard_normal(n)
        if len(pa) == 0:
            x[:, j] = eps
            continue
        xp = x[:, pa]
        if mechanism == "linear":
            f = xp @ weights[pa, j]
        elif mechanism == "mlp":
            w1 = _signed_uniform(rng, (len(pa), hidden), lo, hi)
            b1 = _signed_uniform(rng, hidden, lo, hi)
            w2 = _signed_uniform(rng, hidden, lo, hi)
            f = np.maximum(xp @ w1 + b1, 0.0) @ w2
        else:
            omega = rng.standard_normal((len(pa), num_features)) / lengthscale
            phase = rng.uniform(0.0, 2.0 * np.pi, num_features)
            coef = rng.standard_normal(num_features)
            f = np.sqrt(2.0 / num_features) * np.cos(xp @ omega + phase) @ coef
        x[:, j] = f + eps
    if standardize:
        x = (x - x.mean(0)) / x.std(0)
    dtype = dtype or torch.get_default_dtype()
    info = {"noise_scale": noise.tolist() if np.ndim(noise_scale) else float(noise_scale),
            "weight_range": tuple(weight_range), "standardize": standardize}
    if mechanism == "mlp":
        info["hidden"] = hidden
    if mechanism == "gp":
        info.update(lengthscale=lengthscale, num_features=num_features)
    return SEMData(
        data=torch.as_tensor(x, dtype=dtype),
        adjacency=torch.as_tensor(a),
        weights=None if weights is None else torch.as_tensor(weights, dtype=dtype),
        mechanism=mechanism,
        info=info,
    )


def sample_sem(p, n, graph="er", mechanism="linear", num_edges=None, edges_per_node=2, seed=0, **kwargs):
    """A random DAG and data from an SEM on it, in one seeded call (SVI-DAG, arXiv:2608.04930, §4.2-4.3).

    The graph and the data use independent streams spawned from ``seed`` (``numpy.random.SeedSequence``), so
    the same seed always gives the same graph whatever ``n`` or ``mechanism``.

    :param int p: nodes. :param int n: samples. :param str graph: ``"er"`` or ``"sf"``.
    :param str mechanism: ``"linear"``, ``"mlp"`` or ``"gp"``.
    :param int num_edges: ER edge count (default ``p``). :param int edges_per_node: SF attachment ``m``.
    :param int seed: non-negative int. :param kwargs: passed to :func:`synthetic_sem`.
    :returns: :class:`SEMData` with ``info["graph"]`` and ``info["seed"]`` set.

    Example::

        >>> d = sample_sem(p=10, n=1000, graph="er", mechanism="linear", num_edges=10, seed=0)
        >>> d.data.shape, int(d.adjacency.sum())
        (torch.Size([1000, 10]), 10)
    """
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative int; got {seed!r}")
    g_seq, d_seq = np.random.SeedSequence(int(seed)).spawn(2)
    g_rng, d_rng = np.random.default_rng(g_seq), np.random.default_rng(d_seq)
    if graph == "er":
        a = erdos_renyi_dag(p, num_edges, seed=g_rng)
    elif graph == "sf":
        a = scale_free_dag(p, edges_per_node, seed=g_rng)
    else:
        raise ValueError(f"graph must be 'er' or 'sf'; got {graph!r}")
    out = synthetic_sem(a, n, mechanism=mechanism, seed=d_rng, **kwargs)
    out.info.update(graph=graph, seed=int(seed), p=p, n=n)
    return out


def _two_node_f(x):
    return np.exp(-x**2) * np.sin(5 * x**3) + np.abs(x) ** 0.5 * np.cos(4 * x) + np.sin(3 * np.pi * x)


def two_node(kind="linear", n=1000, standardize=True, seed=0, dtype=None):
    """The two-node orientation study's data, ``x1 -> x2`` (SVI-DAG, arXiv:2608.04930, §4.1, Fig. 3).

    * ``"linear"`` (not identifiable): ``x1 ~ N(0, 1)``, ``x2 = x1 + N(0, 1)``;
    * ``"nonlinear"`` (identifiable): ``x1 ~ N(0, 1)``, ``x2 = f(x1) + N(0, 0.1²)`` with
      ``f(x) = exp(-x²) sin(5x³) + |x|^0.5 cos(4x) + sin(3πx)``.

    SVI-DAG draws 1000 rows, keeps the first 900 and standardises them; pass ``n=900`` for the same size.

    :param str kind: ``"linear"`` or ``"nonlinear"``. :param int n: samples.
    :param bool standardize: standardise both columns (default, as the reference code).
    :param int seed: seed. :param dtype: defaults to ``torch.get_default_dtype()``.
    :returns: :class:`SEMData` with ``adjacency = [[0, 1], [0, 0]]``.
    """
    if kind not in ("linear", "nonlinear"):
        raise ValueError(f"kind must be 'linear' or 'nonlinear'; got {kind!r}")
    rng = _rng(seed)
    x1 = rng.standard_normal(n)
    if kind == "linear":
        x2 = x1 + rng.standard_normal(n)
    else:
        x2 = _two_node_f(x1) + 0.1 * rng.standard_normal(n)
    x = np.stack([x1, x2], 1)
    if standardize:
        x = (x - x.mean(0)) / x.std(0)
    return SEMData(
        data=torch.as_tensor(x, dtype=dtype or torch.get_default_dtype()),
        adjacency=torch.tensor([[0, 1], [0, 0]]),
        weights=None,
        mechanism="two_node",
        info={"kind": kind, "seed": seed, "standardize": standardize},
    )
