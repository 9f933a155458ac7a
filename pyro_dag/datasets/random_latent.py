"""Random latent-DAG problems from a seed: for judging the DAG-DGP's defaults on DAGs with hidden nodes that nobody
tuned them to.

``random_latent(seed)`` draws a small DAG, a mechanism for every non-root node, a training design and held-out
cases. The draw depends on the seed only, so a benchmark can tune on some seeds and report on others it never looked
at. The problems are of the kind the deep GP on a DAG is built for (Perlino, Hamelijnck, Johansen & Damoulas 2026,
"Deep Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645): roots are observed inputs, some inner
nodes are hidden, and a target node is observed with noise.

**Graph.** One or two roots (``x1``, ``x2``), each with one or two input columns (three at most in all), one to three
inner nodes ``h1, h2, ...`` and the target ``y``. Each inner node's parents are one or two of the roots and earlier
inner nodes; the target's parents are one or two inner nodes and, one time in four, a root (a skip connection).
Every root has a child and every inner node is an ancestor of ``y``. Each inner node is hidden with probability 3/4
(at least one is hidden); an inner node that is not hidden is observed with noise, as the target is.

**Mechanisms.** A node's function takes its parents' values, each column normalised (roots: ``(x - 1/2) / 0.29``;
inner nodes: already standardised) and is one of

* ``"gp"``: a draw from a zero-mean GP with an ARD squared-exponential kernel (length-scales log-uniform in
  ``[0.7, 2.5]`` in the normalised units), realised with ``NUM_FEATURES`` random Fourier features (Rahimi & Recht
  2007, "Random features for large-scale kernel machines"), so it is defined at every input;
* ``"additive"``: ``sum_j a_j phi_j(c_j z_j + b_j)``, one random smooth nonlinearity ``phi`` per column;
* ``"product"``: ``phi_1(c_1 u_1 + b_1) phi_2(c_2 u_2 + b_2)`` of two random projections ``u`` of the columns
  (the diamond of a DAG-DGP's collider, ``y = a b``);
* ``"ridge"``: ``phi(c w^T z + b)`` for a random direction ``w``;

with ``phi`` one of ``sin``, ``cos``, ``tanh`` and ``t -> t^2 / 2`` and frequencies ``c`` log-uniform in
``[0.5, 2]``. Every node's noise-free values are standardised with the mean and sd of a large reference sample of
the design distribution (so a node's values have mean 0 and variance 1 there, whatever its mechanism).

**Observations.** Observed nodes get Gaussian noise whose sd is a fraction of the node's sd, log-uniform in
``[0.02, 0.2]``; hidden nodes are noise-free and absent from ``data``. Training inputs are a Latin hypercube of
``n`` cases on ``[0, 1]^d`` (:func:`~pyro_dag.datasets.latin_hypercube`), test inputs another one of ``n_test``.
Everything observed (``data``, ``y_test``, ``f_test``, ``f_train``, ``noise_sd``) is in the units of the observed
node's training values standardised (their training mean and sd), as a user would standardise them.
"""
import math
from dataclasses import dataclass, field

import networkx as nx
import torch

from .test_functions import latin_hypercube

__all__ = ["LatentProblem", "random_latent", "MECHANISMS", "NUM_FEATURES"]

#: The kinds of mechanism a node can draw.
MECHANISMS = ("gp", "additive", "product", "ridge")
#: Random Fourier features of a GP-drawn mechanism.
NUM_FEATURES = 500
#: Cases of the reference sample that standardises every node.
NUM_REFERENCE = 4000
_ROOT_SD = math.sqrt(1.0 / 12.0)
_PHIS = {"sin": torch.sin, "cos": torch.cos, "tanh": torch.tanh, "square": lambda t: 0.5 * t * t}


@dataclass
class LatentProblem:
    """One random latent-DAG problem (:func:`random_latent`).

    :ivar networkx.DiGraph graph: the DAG (roots ``x1``/``x2``, inner nodes ``h1, h2, ...``, target ``y``).
    :ivar dict inputs: ``{root: [n, d_root]}`` training inputs in ``[0, 1]``.
    :ivar dict data: ``{observed node: [n, 1]}`` noisy training observations (standardised); hidden nodes absent.
    :ivar dict test_inputs: ``{root: [m, d_root]}``.
    :ivar list targets: ``["y"]``, the node the benchmarks score.
    :ivar dict y_test: ``{target: [m, 1]}`` new noisy observations at the test inputs (standardised).
    :ivar dict f_test: ``{target: [m, 1]}`` the noise-free target at the test inputs (standardised).
    :ivar dict f_train: ``{target: [n, 1]}`` the noise-free target at the training inputs (standardised).
    :ivar dict truth: ``{node: [n, 1]}`` every non-root node's noise-free values at the training inputs, in the
        reference-standardised units of the mechanisms (hidden nodes included; their sign and scale are not
        identifiable from the data).
    :ivar list hidden: the hidden nodes. :ivar dict noise_sd: ``{observed node: noise sd}`` (standardised units).
    :ivar dict mechanisms: ``{node: description}``. :ivar int seed: the seed.
    :ivar str description: one line naming the draw. :ivar dict info: its parameters.
    """

    graph: nx.DiGraph
    inputs: dict
    data: dict
    test_inputs: dict
    targets: list
    y_test: dict
    f_test: dict
    f_train: dict
    truth: dict
    hidden: list
    noise_sd: dict
    mechanisms: dict
    seed: int
    description: str
    info: dict = field(default_factory=dict)


def _log_uniform(g, lo, hi, size=()):
    u = torch.rand(size, generator=g, dtype=torch.float64)
    return torch.exp(math.log(lo) + u * (math.log(hi) - math.log(lo)))


def _randint(g, lo, hi):
    """Uniform integer in ``[lo, hi]``."""
    return int(torch.randint(lo, hi + 1, (), generator=g))


def _choice(g, seq):
    return seq[_randint(g, 0, len(seq) - 1)]


def _draw_graph(g):
    num_roots = _randint(g, 1, 2)
    widths = {}
    for i in range(num_roots):
        left = 3 - sum(widths.values()) - (num_roots - 1 - i)
        widths[f"x{i + 1}"] = _randint(g, 1, min(2, left))
    roots = list(widths)
    num_inner = _randint(g, 1, 3)
    inner = [f"h{i + 1}" for i in range(num_inner)]
    graph = nx.DiGraph()
    graph.add_nodes_from(roots + inner + ["y"])
    for k, h in enumerate(inner):
        candidates = roots + inner[:k]
        # a root without a child yet is preferred, so that every root feeds the DAG
        orphans = [r for r in roots if graph.out_degree(r) == 0]
        first = orphans[0] if orphans and k >= num_inner - len(orphans) else _choice(g, candidates)
        parents = {first}
        if len(candidates) > 1 and torch.rand((), generator=g) < 0.5:
            parents.add(_choice(g, [c for c in candidates if c != first]))
        graph.add_edges_from((p, h) for p in sorted(parents))
    for r in roots:   # still childless (possible only when it was never drawn): give it the first inner node
        if graph.out_degree(r) == 0:
            graph.add_edge(r, inner[0])
    sinks = [h for h in inner if graph.out_degree(h) == 0]
    y_parents = set(sinks[-2:]) if sinks else {inner[-1]}
    if len(y_parents) < 2 and num_inner > 1 and torch.rand((), generator=g) < 0.5:
        y_parents.add(_choice(g, [h for h in inner if h not in y_parents]))
    graph.add_edges_from((p, "y") for p in sorted(y_parents))
    if len(sinks) > 2:   # an inner node that is no ancestor of y: connect it to a later one or to y
        for h in sinks[:-2]:
            later = [c for c in inner if int(c[1:]) > int(h[1:])]
            graph.add_edge(h, later[0] if later else "y")
    if torch.rand((), generator=g) < 0.25:
        graph.add_edge(_choice(g, roots), "y")
    hidden = [h for h in inner if torch.rand((), generator=g) < 0.75]
    if not hidden:
        hidden = [_choice(g, inner)]
    return graph, widths, hidden


def _phi(g):
    name = _choice(g, list(_PHIS))
    return name, _PHIS[name]


def _draw_mechanism(g, width):
    """A random function ``[N, width] -> [N]`` and its description."""
    kind = _choice(g, MECHANISMS)
    if kind == "product" and width < 2:
        kind = "ridge"
    if kind == "gp":
        ls = _log_uniform(g, 0.7, 2.5, (width,))
        omega = torch.randn(NUM_FEATURES, width, generator=g, dtype=torch.float64) / ls
        phase = 2 * math.pi * torch.rand(NUM_FEATURES, generator=g, dtype=torch.float64)
        weight = torch.randn(NUM_FEATURES, generator=g, dtype=torch.float64) * math.sqrt(2.0 / NUM_FEATURES)
        fn = lambda z: torch.cos(z @ omega.T + phase) @ weight  # noqa: E731
        return fn, f"gp (RBF, length-scales {', '.join(f'{v:.2f}' for v in ls.tolist())})"
    if kind == "additive":
        terms = [(_phi(g), float(_log_uniform(g, 0.5, 2.0)), float(2 * math.pi * torch.rand((), generator=g)),
                  float(torch.randn((), generator=g, dtype=torch.float64))) for _ in range(width)]
        fn = lambda z: sum(a * phi(c * z[:, j] + b) for j, ((_, phi), c, b, a) in enumerate(terms))  # noqa: E731
        return fn, "additive: " + " + ".join(f"{a:.2f} {name}({c:.2f} z{j} + {b:.2f})"
                                            for j, ((name, _), c, b, a) in enumerate(terms))
    directions = torch.randn(2, width, generator=g, dtype=torch.float64)
    directions = directions / directions.norm(dim=-1, keepdim=True)
    if kind == "product":
        f1, f2 = _phi(g), _phi(g)
        c = _log_uniform(g, 0.5, 2.0, (2,))
        b = 2 * math.pi * torch.rand(2, generator=g, dtype=torch.float64)
        fn = lambda z: f1[1](c[0] * z @ directions[0] + b[0]) * f2[1](c[1] * z @ directions[1] + b[1])  # noqa: E731
        return fn, f"product: {f1[0]}(.) x {f2[0]}(.) of two random projections"
    name, phi = _phi(g)
    c = float(_log_uniform(g, 0.5, 2.0))
    b = float(2 * math.pi * torch.rand((), generator=g))
    fn = lambda z: phi(c * z @ directions[0] + b)  # noqa: E731
    return fn, f"ridge: {name}({c:.2f} w'z + {b:.2f})"


def random_latent(seed, *, n=200, n_test=1000, noise_ratio=None, dtype=torch.float64):
    """Draw a random latent-DAG problem (module docstring: graph, mechanisms, observations).

    :param int seed: the draw's seed (non-negative); the same seed gives the same problem.
    :param int n: training cases (Latin hypercube on the roots' ``[0, 1]^d``).
    :param int n_test: held-out cases (another Latin hypercube).
    :param float noise_ratio: the observation noise's sd as a fraction of each observed node's sd (default drawn
        per observed node, log-uniform in ``[0.02, 0.2]``).
    :param torch.dtype dtype: of the returned tensors.
    :returns: a :class:`LatentProblem`.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"random_latent: seed must be a non-negative int, got {seed!r}")
    if n < 2 or n_test < 1:
        raise ValueError(f"random_latent: n must be >= 2 and n_test >= 1, got n={n}, n_test={n_test}")
    if noise_ratio is not None and not noise_ratio >= 0:
        raise ValueError(f"random_latent: noise_ratio must be >= 0 (or None to draw it), got {noise_ratio!r}")
    g = torch.Generator().manual_seed(int(seed))
    graph, widths, hidden = _draw_graph(g)
    roots = list(widths)
    d = sum(widths.values())
    design = torch.Generator().manual_seed(int(seed) + 7919)
    X = torch.cat([latin_hypercube(n, [(0.0, 1.0)] * d, generator=design),
                   latin_hypercube(n_test, [(0.0, 1.0)] * d, generator=design),
                   torch.rand(NUM_REFERENCE, d, generator=design, dtype=torch.float64)]).double()
    cols, start = {}, 0
    for r in roots:
        cols[r] = X[:, start:start + widths[r]]
        start += widths[r]
    values = {r: (cols[r] - 0.5) / _ROOT_SD for r in roots}
    mechanisms = {}
    for w in nx.topological_sort(graph):
        if w in widths:
            continue
        parents = sorted(graph.predecessors(w))
        z = torch.cat([values[p] for p in parents], -1)
        fn, text = _draw_mechanism(g, z.shape[-1])
        v = fn(z)
        ref = v[n + n_test:]
        sd = float(ref.std())
        v = (v - float(ref.mean())) / (sd if sd > 1e-12 else 1.0)
        values[w] = v[:, None]
        mechanisms[w] = f"{w} <- {', '.join(parents)}: {text}"
    observed = [w for w in graph.nodes if w not in widths and w not in hidden]
    noise_g = torch.Generator().manual_seed(int(seed) + 104729)
    data, noise_sd, y_test, f_test, f_train, ratios = {}, {}, {}, {}, {}, {}
    for w in observed:
        ratio = float(_log_uniform(noise_g, 0.02, 0.2)) if noise_ratio is None else float(noise_ratio)
        f_all = values[w][: n + n_test]
        y_all = f_all + ratio * torch.randn(f_all.shape, generator=noise_g, dtype=torch.float64)
        m, s = float(y_all[:n].mean()), float(y_all[:n].std())
        s = s if s > 1e-12 else 1.0
        data[w] = ((y_all[:n] - m) / s).to(dtype)
        noise_sd[w] = ratio / s
        ratios[w] = ratio
        if w == "y":
            y_test[w] = ((y_all[n:] - m) / s).to(dtype)
            f_test[w] = ((f_all[n:] - m) / s).to(dtype)
            f_train[w] = ((f_all[:n] - m) / s).to(dtype)
    inputs = {r: cols[r][:n].to(dtype) for r in roots}
    test_inputs = {r: cols[r][n:n + n_test].to(dtype) for r in roots}
    truth = {w: values[w][:n].to(dtype) for w in graph.nodes if w not in widths}
    edges = ", ".join(f"{a}->{b}" for a, b in sorted(graph.edges))
    description = (f"random latent DAG (seed {seed}): {edges}; hidden {', '.join(hidden)}; roots "
                   + ", ".join(f"{r} ({widths[r]} col)" for r in roots)
                   + f"; noise sd {', '.join(f'{w} {ratios[w]:.3f}' for w in observed)} of the node's sd; n = {n}")
    info = {"root_widths": dict(widths), "noise_ratio": ratios, "edges": [list(e) for e in sorted(graph.edges)]}
    return LatentProblem(graph=graph, inputs=inputs, data=data, test_inputs=test_inputs, targets=["y"],
                         y_test=y_test, f_test=f_test, f_train=f_train, truth=truth, hidden=list(hidden),
                         noise_sd=noise_sd, mechanisms=mechanisms, seed=int(seed), description=description,
                         info=info)
