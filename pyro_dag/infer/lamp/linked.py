r"""Linked-GP prediction through a DAG of fitted exact GPs (Chang & Sung 2026, Sec. 3.2, Eqs. (10)–(11)).

Every non-root node is a :class:`~pyro_dag.infer.lamp.fitted.FittedNode`. With the training latents fixed at
their MAP values, a node's predictive at a test input is

    p(f* | x*) ≈ ∫ p(f* | w*) Π_parents p(w*_parent | x*) dw*,

moment-matched to a Gaussian node by node in topological order (Kyzyurova, Berger & Wolpert 2018, "Coupling
computer models through linking their statistical emulators", SIAM/ASA JUQ; Ming & Guillas 2021, "Linked
Gaussian process emulation for systems of computer models using Matérn kernels and adaptive design",
SIAM/ASA JUQ). With ``a = Σ⁻¹ y``, ``Σ = K(X) + g I``, ``k̄ = E[k(w*, X)]`` and ``H = E[k(X, w*) k(w*, X)]``:

    E[f*]   = k̄ a,
    Var[f*] = τ² [1 - tr(Σ⁻¹ H)] + aᵀ (H - k̄ᵀ k̄) a          (law of total variance).
"""
from graphlib import CycleError, TopologicalSorter
from typing import Mapping

import torch

from ...gp.conditional import NotPositiveDefiniteError, cholesky_with_jitter
from .expectations import PairTerms, expected_kernel, expected_quadratic_form, kernel_matrix
from .fitted import FittedNode

__all__ = ["LinkedGPPredictor"]

_METHODS = ("auto", "exact", "nystrom_local")
# elements of one [chunk, n, n] block of H; the Matérn product keeps a few dozen such temporaries
_H_BUDGET = 2 ** 21


def _gram_cholesky(node, j):
    """Lower Cholesky factor of ``K(X) + g I`` for output ``j`` (jitter ladder that follows the dtype)."""
    K = kernel_matrix(node.kernel, node.X, node.X, node.lengthscale[j])
    K = K + node.nugget[j] * torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)
    try:
        return cholesky_with_jitter(K, node=node.name)
    except NotPositiveDefiniteError as e:
        raise NotPositiveDefiniteError(
            f"node {node.name!r}, output {j}: the training Gram matrix K(X, X) + g I is not positive definite "
            "even with jitter; the node's training inputs probably contain repeated rows (drop duplicates) or "
            "its lengthscale is far larger than the spread of its inputs") from e


def _check_hyperparameters(node):
    """Finite data and hyperparameters in range, else a ValueError naming the node."""
    if not (bool(torch.isfinite(node.X).all()) and bool(torch.isfinite(node.y).all())):
        raise ValueError(f"node {node.name!r}: X and y must be finite (NaN or inf in its training inputs or "
                         "outputs; check the fitted latent values)")
    for label, positive in (("lengthscale", True), ("variance", True), ("nugget", False)):
        t = getattr(node, label)
        ok = torch.isfinite(t).all() and ((t > 0).all() if positive else (t >= 0).all())
        if not bool(ok):
            raise ValueError(f"node {node.name!r}: {label} must be finite and {'> 0' if positive else '>= 0'}, "
                             f"got {t.tolist()}")


class _ExactGP:
    """Per-output Cholesky factors, ``a = Σ⁻¹ y`` and (for nodes with random inputs) the variance weights."""

    def __init__(self, node, need_inverse):
        self.L, self.a, self.pairs = [], [], []
        for j in range(node.output_dim):
            L = _gram_cholesky(node, j)
            a = torch.cholesky_solve(node.y[:, j:j + 1], L).squeeze(-1)
            self.L.append(L)
            self.a.append(a)
            if need_inverse:  # the weights of the variance's one contraction, B = τ²Σ⁻¹ - aaᵀ
                B = node.variance[j] * torch.cholesky_inverse(L) - torch.outer(a, a)
                self.pairs.append(PairTerms(node.kernel, node.X, 0.5 * (B + B.T)))


class LinkedGPPredictor:
    r"""Predictive moments and samples of every node of a latent-MAP-fitted DAG deep GP.

    Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation",
    Sec. 3.2 (exact linked GP) and Sec. 4.4 (Nyström first layer + nearest-neighbour local GP).

    **Moments** (:meth:`moments`) are propagated in topological order. A node's input block from a root is the
    given design (variance 0); from a non-root parent it is Gaussian with that parent's moment-matched mean and
    variance. Dimensions are treated as independent: the parents of a node are independent given the test
    inputs, and the outputs of one parent are independent. This is the linked-GP approximation of Kyzyurova,
    Berger & Wolpert (2018) and Ming & Guillas (2021). A node whose parents take only roots gets the exact mean
    and variance of its linked predictive (the parents' outputs are independent Gaussians there); deeper nodes
    see each parent through its moment-matched Gaussian, and parents that share ancestors are correlated in
    truth, which this ignores (:meth:`sample` keeps that correlation).
    For every node, the mean and variance of ``f*`` given Gaussian inputs are closed form for the RBF and the
    separable Matérn-5/2 kernels (:mod:`pyro_dag.infer.lamp.expectations`):

    ``E[f*] = k̄ Σ⁻¹ y``, ``Var[f*] = τ² [1 - tr(Σ⁻¹ H)] + aᵀ (H - k̄ᵀ k̄) a``, ``a = Σ⁻¹ y``.

    ``H`` (``n × n`` per test point) is never stored for many test points: ``chunk_size`` test points at a time,
    ``τ²[1 - tr(Σ⁻¹H)] + aᵀHa`` is computed as one contraction ``τ² - Σ_ij B_ij H_ij``, ``B = τ²Σ⁻¹ - aaᵀ``
    (for RBF over the pairs ``i ≤ j`` without forming ``H``). Nodes whose inputs are all roots
    get the plain GP posterior.

    **Samples** (:meth:`sample`) are ancestral draws of the linked predictive itself, not of the moment-matched
    Gaussians: per test point and sample, each node is drawn from its GP conditional (a Gaussian) given the
    already drawn values of its parents. Draws are independent across test points: each test point's marginal
    is right, the joint over test points is not modelled. Shared ancestors are sampled once, so their
    dependence is kept.

    ``method="nystrom_local"`` (Sec. 4.4) replaces the exact computation for large ``n``: see
    :mod:`pyro_dag.infer.lamp.approx`. It drops the uncertainty of the parents (plug-in means); its samples are
    draws from each node's approximate Gaussian, independently across nodes.

    Parents feed their *latent* value ``f`` to their children (as in :class:`~pyro_dag.DAGDGP`);
    ``include_noise=True`` adds the observation noise ``τ² g`` only to the returned values of observed nodes.
    Device and dtype (float32 or float64) follow the :class:`~pyro_dag.infer.lamp.fitted.FittedNode` tensors.
    The variance ``τ² - Σ_ij B_ij H_ij`` cancels when nuggets are small: float32 is about 1e-3 off float64 at
    nugget 1e-4 on a two-layer example, so prefer float64 for calibrated variances.

    :param nodes: ``{name: FittedNode}``, one per non-root node. Names in a node's ``inputs`` that are not keys
        here are roots.
    :param str method: ``"exact"``, ``"nystrom_local"`` or ``"auto"`` (exact when every node has ``n ≤ 1000``
        training rows, as in the paper's experiments).
    :param int num_nystrom: ``n_Q``, the size of the random Nyström subset of the first-layer nodes.
    :param int num_neighbours: ``k`` of the local GP of the other nodes.
    :param int chunk_size: test points per block of ``H`` (default: about ``2²¹ / n²``, ``2²² / n²`` for RBF).
    :param int seed: seed of the Nyström subsets.

    Example::

        predictor = LinkedGPPredictor({"w": node_w, "y": node_y})      # x -> w -> y
        moments = predictor.moments({"x": x_test})                     # {"w": (mean, var), "y": (mean, var)}
        draws = predictor.sample({"x": x_test}, 500)["y"]              # [500, m, d_y]
    """

    def __init__(self, nodes: Mapping[str, FittedNode], *, method="auto", num_nystrom=1000, num_neighbours=100,
                 chunk_size=None, seed=0):
        if method not in _METHODS:
            raise ValueError(f"method must be one of {_METHODS}, got {method!r}")
        if not nodes:
            raise ValueError("nodes is empty: pass {name: FittedNode} for every non-root node")
        for name, node in nodes.items():
            if not isinstance(node, FittedNode):
                raise TypeError(f"nodes[{name!r}] must be a FittedNode, got {type(node).__name__}")
            if node.name != name:
                raise ValueError(f"nodes[{name!r}] is a FittedNode named {node.name!r}; use its name as the key")
        if chunk_size is not None and int(chunk_size) < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}")
        for label, value in (("num_nystrom", num_nystrom), ("num_neighbours", num_neighbours)):
            if int(value) < 1:
                raise ValueError(f"{label} must be a positive integer, got {value!r}")
        self.nodes = dict(nodes)
        first = next(iter(self.nodes.values()))
        self.dtype, self.device = first.X.dtype, first.X.device
        for name, node in self.nodes.items():
            if node.X.dtype != self.dtype or node.X.device != self.device:
                raise ValueError(f"node {name!r} has tensors of {node.X.dtype} on {node.X.device}, node "
                                 f"{first.name!r} of {self.dtype} on {self.device}: move all to one dtype/device")
            _check_hyperparameters(node)
        self.order = self._topological_order()
        self.roots = {}
        for name in self.order:
            node = self.nodes[name]
            for parent, dim in zip(node.inputs, node.input_dims):
                if parent in self.nodes:
                    if self.nodes[parent].output_dim != dim:
                        raise ValueError(f"node {name!r} takes {dim} columns from {parent!r}, which has "
                                         f"{self.nodes[parent].output_dim} outputs")
                elif self.roots.setdefault(parent, dim) != dim:
                    raise ValueError(f"root {parent!r} has {self.roots[parent]} columns for one node and {dim} "
                                     f"for node {name!r}")
        if method == "auto":
            method = "exact" if all(node.X.shape[0] <= 1000 for node in self.nodes.values()) else "nystrom_local"
        self.method = method
        self.num_nystrom, self.num_neighbours, self.seed = int(num_nystrom), int(num_neighbours), int(seed)
        self.chunk_size = None if chunk_size is None else int(chunk_size)
        self._exact = {}
        self._approx = None
        self._cache = None

    # ----------------------------------------------------------------------------------------- structure
    def _topological_order(self):
        graph = {name: [p for p in node.inputs if p in self.nodes] for name, node in self.nodes.items()}
        try:
            return list(TopologicalSorter(graph).static_order())
        except CycleError as e:
            raise ValueError(f"the fitted nodes form a cycle through their inputs: {e.args[1]}") from e

    def is_first_layer(self, name):
        """Whether all inputs of node ``name`` are roots."""
        return all(p not in self.nodes for p in self.nodes[name].inputs)

    def _needed(self, nodes):
        if nodes is None:
            return list(self.order), list(self.order)
        if isinstance(nodes, str):
            nodes = [nodes]
        nodes = list(nodes)
        for name in nodes:
            if name not in self.nodes:
                raise ValueError(f"unknown node {name!r}; fitted nodes are {sorted(self.nodes)}")
        needed, stack = set(), list(nodes)
        while stack:
            name = stack.pop()
            if name not in needed:
                needed.add(name)
                stack.extend(p for p in self.nodes[name].inputs if p in self.nodes)
        return [name for name in self.order if name in needed], nodes

    def _check_inputs(self, inputs, order):
        roots = {p for name in order for p in self.nodes[name].inputs if p not in self.nodes}
        m, out = None, {}
        for root in sorted(roots):
            users = [name for name in order if root in self.nodes[name].inputs]
            dim = self.roots[root]
            if root not in inputs:
                raise ValueError(f"inputs has no root {root!r} (an input of node {users[0]!r}); pass "
                                 f"inputs[{root!r}] as a tensor of shape [m, {dim}]")
            x = torch.as_tensor(inputs[root])
            if x.dim() != 2 or x.shape[-1] != dim:
                raise ValueError(f"inputs[{root!r}] must have shape [m, {dim}] (node {users[0]!r} was fitted on "
                                 f"{dim} columns of it), got {tuple(x.shape)}")
            if m is None:
                m = x.shape[0]
            elif x.shape[0] != m:
                raise ValueError(f"inputs[{root!r}] has {x.shape[0]} rows, other roots have {m}")
            x = x.to(dtype=self.dtype, device=self.device)
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"inputs[{root!r}] contains NaN or inf")
            out[root] = x
        return out, m

    def _chunk(self, n):
        return self.chunk_size or max(1, _H_BUDGET // max(n * n, 1))

    def _exact_state(self, name):
        if name not in self._exact:
            self._exact[name] = _ExactGP(self.nodes[name], need_inverse=not self.is_first_layer(name))
        return self._exact[name]

    # ----------------------------------------------------------------------------------------- moments
    def _node_moments(self, name, mean_in, var_in):
        """Exact linked-GP moments ``([m, d_w], [m, d_w])`` of node ``name`` at Gaussian inputs."""
        node, state = self.nodes[name], self._exact_state(name)
        deterministic = self.is_first_layer(name)
        means, variances = [], []
        chunk = self._chunk(node.X.shape[0])
        for j in range(node.output_dim):
            ell, a, tau2 = node.lengthscale[j], state.a[j], node.variance[j]
            if deterministic:
                # plain GP posterior: one triangular solve per block of test points
                mu, var = [], []
                for start in range(0, mean_in.shape[0], max(chunk, 256)):
                    k = kernel_matrix(node.kernel, mean_in[start:start + max(chunk, 256)], node.X, ell)
                    v = torch.linalg.solve_triangular(state.L[j], k.T, upper=False)
                    mu.append(k @ a)
                    var.append(tau2 * (1 - v.pow(2).sum(0)))
                means.append(torch.cat(mu))
                variances.append(torch.cat(var).clamp_min(0))
                continue
            mu, var = [], []
            pairs = state.pairs[j]
            chunk = self.chunk_size or max(1, _H_BUDGET // pairs.size)
            for start in range(0, mean_in.shape[0], chunk):
                mc, vc = mean_in[start:start + chunk], var_in[start:start + chunk]
                m1 = expected_kernel(node.kernel, node.X, ell, mc, vc) @ a
                # τ²[1 - tr(Σ⁻¹H)] + aᵀHa - m1² = τ² - Σ_ij B_ij H_ij - m1², B = τ²Σ⁻¹ - aaᵀ
                quad = expected_quadratic_form(node.kernel, node.X, ell, mc, vc, pairs.B, pairs=pairs)
                mu.append(m1)
                var.append(tau2 - quad - m1.pow(2))
            means.append(torch.cat(mu))
            variances.append(torch.cat(var).clamp_min(0))
        return torch.stack(means, -1), torch.stack(variances, -1)

    def _gather(self, name, roots, values):
        node = self.nodes[name]
        mean, var = [], []
        for parent in node.inputs:
            if parent in self.nodes:
                mean.append(values[parent][0])
                var.append(values[parent][1])
            else:
                mean.append(roots[parent])
                var.append(torch.zeros_like(roots[parent]))
        return torch.cat(mean, -1), torch.cat(var, -1)

    def moments(self, inputs, *, nodes=None, include_noise=False):
        r"""Moment-matched Gaussian predictive of the nodes at new root inputs.

        :param dict inputs: ``{root: Tensor[m, d_r]}`` for every root the requested nodes depend on.
        :param nodes: node name(s) to return (default all); their ancestors are computed as needed.
        :param bool include_noise: add the observation noise ``τ² g`` to the variance of observed nodes.
        :returns: ``{node: (mean [m, d_w], var [m, d_w])}``.
        """
        order, wanted = self._needed(nodes)
        roots, m = self._check_inputs(inputs, order)
        values = self._cached(inputs, order)
        if values is None:
            if self.method == "nystrom_local":
                values = self._approximation().moments(roots, order)
            else:
                values = {}
                with torch.no_grad():
                    for name in order:
                        values[name] = self._node_moments(name, *self._gather(name, roots, values))
            # one entry: a second call on the same tensors (e.g. with include_noise) costs nothing. The cache
            # holds the input tensors themselves, so identity and version counter identify them safely.
            self._cache = ({r: (x, x._version) for r, x in inputs.items() if isinstance(x, torch.Tensor)},
                           set(order), values)
        out = {}
        for name in wanted:
            mean, var = values[name][0].clone(), values[name][1].clone()  # the cache stays untouched
            node = self.nodes[name]
            if include_noise and node.observed:
                var = var + node.variance * node.nugget
            out[name] = (mean, var)
        return out

    def _cached(self, inputs, order):
        if self._cache is None:
            return None
        tensors, computed, values = self._cache
        if not set(order) <= computed:
            return None
        for root in {p for name in order for p in self.nodes[name].inputs if p not in self.nodes}:
            x = inputs.get(root)
            if root not in tensors or x is not tensors[root][0] or x._version != tensors[root][1]:
                return None
        return values

    def _approximation(self):
        if self._approx is None:
            from .approx import NystromLocalGP

            self._approx = NystromLocalGP(self, num_nystrom=self.num_nystrom, num_neighbours=self.num_neighbours,
                                          seed=self.seed, chunk_size=self.chunk_size)
        return self._approx

    # ----------------------------------------------------------------------------------------- samples
    def _conditional(self, name, x):
        """GP conditional mean and variance ``[P, d_w]`` of node ``name`` at fixed inputs ``x`` ``[P, D]``."""
        node, state = self.nodes[name], self._exact_state(name)
        means, variances = [], []
        block = max(256, self._chunk(node.X.shape[0]))
        for j in range(node.output_dim):
            mu, var = [], []
            for start in range(0, x.shape[0], block):
                k = kernel_matrix(node.kernel, x[start:start + block], node.X, node.lengthscale[j])
                v = torch.linalg.solve_triangular(state.L[j], k.T, upper=False)
                mu.append(k @ state.a[j])
                var.append(node.variance[j] * (1 - v.pow(2).sum(0)))
            means.append(torch.cat(mu))
            variances.append(torch.cat(var).clamp_min(0))
        return torch.stack(means, -1), torch.stack(variances, -1)

    def sample(self, inputs, num_samples, *, nodes=None, include_noise=False, generator=None):
        r"""Ancestral samples of the linked predictive (Chang & Sung 2026, Eq. (10)), e.g. for CRPS.

        Per sample and test point, nodes are drawn in topological order from their GP conditionals given the
        drawn parent values (so the draws follow the non-Gaussian linked predictive, not its moment-matched
        Gaussian). Test points are drawn independently (right marginals, no joint over test points).

        :param dict inputs: ``{root: Tensor[m, d_r]}``. :param int num_samples: ``S``.
        :param nodes: node name(s) to return (default all).
        :param bool include_noise: add observation noise ``N(0, τ² g)`` to the returned draws of observed nodes
            (children still receive the latent values).
        :param torch.Generator generator: optional source of randomness.
        :returns: ``{node: Tensor[S, m, d_w]}``.
        """
        num_samples = int(num_samples)
        if num_samples < 1:
            raise ValueError(f"num_samples must be a positive integer, got {num_samples!r}")
        order, wanted = self._needed(nodes)
        roots, m = self._check_inputs(inputs, order)

        def normal(shape):
            return torch.randn(shape, dtype=self.dtype, device=self.device, generator=generator)

        draws = {}
        with torch.no_grad():
            if self.method == "nystrom_local":
                moments = self._approximation().moments(roots, order)
                for name in order:
                    mean, var = moments[name]
                    draws[name] = mean + var.sqrt() * normal((num_samples,) + tuple(mean.shape))
            else:
                for name in order:
                    node = self.nodes[name]
                    if self.is_first_layer(name):  # inputs fixed: one conditional for all samples
                        mean, var = self._conditional(name, torch.cat([roots[p] for p in node.inputs], -1))
                        draws[name] = mean + var.sqrt() * normal((num_samples,) + tuple(mean.shape))
                        continue
                    blocks = [draws[p] if p in self.nodes else roots[p].expand(num_samples, -1, -1)
                              for p in node.inputs]
                    x = torch.cat(blocks, -1).reshape(num_samples * m, -1)
                    mean, var = self._conditional(name, x)
                    f = mean + var.sqrt() * normal(tuple(mean.shape))
                    draws[name] = f.reshape(num_samples, m, -1)
        out = {}
        for name in wanted:
            node, f = self.nodes[name], draws[name]
            if include_noise and node.observed:
                f = f + (node.variance * node.nugget).sqrt() * normal(tuple(f.shape))
            out[name] = f
        return out
