"""Interventional predictions of a Gaussian-process network, averaged over the posterior's DAGs.

A GP network (Friedman & Nachman 2000) is a DAG whose every node is a GP regression on its parents: a deep GP on the
DAG, all of whose nodes are observed (the DAG-DGP of Zinage 2026 with the structure unknown). Under a posterior over
DAGs (:func:`~pyro_dag.structure.fit` with ``likelihood="gp"``), the prediction of a node under an intervention
``do(x_i = v)`` is the Bayesian model average over DAGs of each DAG's interventional distribution,

    p(x_t | do(x_i = v), D) = Σ_G p(G | D) p(x_t | do(x_i = v), G, D),

where, in each DAG, the intervened node is clamped, its incoming edges cut, and every other node is drawn in
topological order from its family's GP predictive (the GP fitted by the score, at its type-II ML hyperparameters,
conditioned on all rows), its roots from their empirical marginals: the ancestral sampling of a deep GP's layers
(Salimbeni & Deisenroth 2017). The DAGs are drawn from the posterior, so the average is a Monte Carlo estimate.
The values are on the scale the posterior scored (standardised columns by default).
"""
import warnings

import networkx as nx
import numpy as np
import torch

from pyro_dag.graph import topological_order

__all__ = ["gp_interventional_effect"]


class _FamilyPredictor:
    """The GP predictive of ``x_j`` given parents ``G`` at the fitted hyperparameters of the scorer's family."""

    def __init__(self, X, j, G, theta, kernel):
        x, y = X[:, list(G)], X[:, j]
        self.lo, span = x.min(0).values, x.max(0).values - x.min(0).values
        self.span = torch.where(span > 0, span, torch.ones_like(span))
        self.mean, sd = y.mean(), y.std()
        self.sd = sd if float(sd) > 0 else torch.ones_like(sd)
        D = len(G)
        self.log_ls, self.log_sf2 = theta[:D], theta[D]
        self.noise = float(theta[D + 1].exp()) + 1e-8
        self.kernel = kernel
        self.Xs = (x - self.lo) / self.span
        K = self._k(self.Xs, self.Xs) + self.noise * torch.eye(len(y), dtype=X.dtype)
        self.L = torch.linalg.cholesky(K)
        self.alpha = torch.cholesky_solve(((y - self.mean) / self.sd).unsqueeze(-1), self.L).squeeze(-1)

    def _k(self, A, B):
        from pyro_dag.baselines.exact_gp import _kernel

        return _kernel(self.kernel, A, B, self.log_ls, self.log_sf2)

    def sample(self, parents, gen):
        """Draws ``[m]`` of ``x_j`` at parent values ``[m, D]``: the predictive mean plus the latent and noise
        variance."""
        Xs = (parents - self.lo) / self.span
        Ks = self._k(Xs, self.Xs)
        mean = Ks @ self.alpha
        v = torch.linalg.solve_triangular(self.L, Ks.T, upper=False)
        var = (self.log_sf2.exp() - v.pow(2).sum(0)).clamp_min(0.0) + self.noise
        z = torch.randn(len(mean), generator=gen, dtype=mean.dtype)
        return self.mean + self.sd * (mean + var.sqrt() * z)


def gp_interventional_effect(posterior, target, intervene, values, *, num_dags=200, draws_per_dag=50, seed=0):
    """``E[x_target | do(x_intervene = v)]`` and its standard deviation for each ``v`` of ``values``, averaged over
    DAGs drawn from a GP-network posterior (see the module docstring).

    :param posterior: a posterior from :func:`~pyro_dag.structure.fit` (``likelihood="gp"``),
        :func:`~pyro_dag.structure.exact_posterior` or :func:`~pyro_dag.structure.hybrid_posterior` with
        ``likelihood="gp"`` (it needs ``gp_scorer`` and ``data``).
    :param target, intervene: node indices or names.
    :param values: ``[V]`` intervention values, on the scale of ``posterior.data`` (standardised by default).
    :param int num_dags: DAGs drawn from the posterior. :param int draws_per_dag: ancestral draws per DAG and value.
    :param int seed: seeds the DAG draws and the ancestral sampling.
    :returns: ``(mean [V], sd [V], prob_ancestor)``: the model-averaged interventional mean and standard deviation
        of ``x_target``, and the posterior probability that ``intervene`` is an ancestor of ``target`` (where it is
        not, the intervention leaves ``x_target``'s distribution unchanged).
    """
    scorer = getattr(posterior, "gp_scorer", None)
    if getattr(posterior, "interventions", None) is not None:
        raise ValueError("gp_interventional_effect does not handle a posterior fitted with interventions= yet (each "
                         "node's GP would have to be refitted on its own rows); fit the effect on observational data")
    if scorer is None:
        raise ValueError("gp_interventional_effect needs a posterior of the GP network score "
                         "(fit(X, likelihood='gp') or exact_posterior(X, 'gp'))")
    X = torch.as_tensor(np.asarray(posterior.data), dtype=torch.float64)
    N, p = X.shape
    names = [str(v) for v in (posterior.node_names or range(p))]

    def index(node, what):
        if isinstance(node, str):
            if node not in names:
                raise ValueError(f"gp_interventional_effect: {what} {node!r} is not a node; nodes: {names}")
            return names.index(node)
        if isinstance(node, (bool, np.bool_)) or not isinstance(node, (int, np.integer)):
            raise TypeError(f"gp_interventional_effect: {what} must be a node name or an integer index in "
                            f"0..{p - 1}, got {node!r} ({type(node).__name__})")
        if not 0 <= int(node) < p:
            raise ValueError(f"gp_interventional_effect: {what} {node!r} is not a node index in 0..{p - 1}")
        return int(node)

    t, i = index(target, "target"), index(intervene, "intervene")
    if t == i:
        raise ValueError("gp_interventional_effect: target and intervene are the same node: do(x = v) sets it to v")
    for name, v, least in (("num_dags", num_dags, 1), ("draws_per_dag", draws_per_dag, 1)):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < least:
            raise ValueError(f"gp_interventional_effect: {name} must be a positive integer, got {v!r}")
    if num_dags * draws_per_dag < 2:
        raise ValueError(f"gp_interventional_effect: num_dags * draws_per_dag = {num_dags * draws_per_dag} draws "
                         "per value; the standard deviation needs at least 2: raise draws_per_dag")
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"gp_interventional_effect: seed must be a non-negative integer, got {seed!r}")
    try:
        raw = np.asarray(values.detach().cpu() if isinstance(values, torch.Tensor) else values)
        if raw.dtype.kind not in "iuf":
            raise TypeError
        values = torch.as_tensor(raw.astype(np.float64)).reshape(-1)
    except (TypeError, ValueError):
        raise TypeError(f"gp_interventional_effect: values must be numbers (a number or a 1-D array of "
                        f"intervention values), got {values!r}") from None
    if values.numel() == 0:
        raise ValueError("gp_interventional_effect: values is empty; pass at least one intervention value")
    if not bool(torch.isfinite(values).all()):
        bad = values[~torch.isfinite(values)][0].item()
        raise ValueError(f"gp_interventional_effect: values holds {bad} (intervention values must be finite "
                         f"numbers on the scale of posterior.data)")
    far = values.abs().max().item()
    scale = float(X[:, i].abs().max()) if N else 0.0
    if far > 1e3 * max(scale, 1.0):
        warnings.warn(f"gp_interventional_effect: do(x_{names[i]} = {far:g}) lies far outside the data of "
                      f"{names[i]!r} (|x| <= {scale:.3g} on the posterior's scale, standardised by default): the GP "
                      "predictions there revert to the prior; rescale the values to the scale of posterior.data",
                      UserWarning, stacklevel=2)
    dags = torch.as_tensor(posterior.sample(num_dags, seed=seed)).to(torch.int64)
    gen = torch.Generator().manual_seed(seed)
    cache = {}
    draws = torch.empty(num_dags, len(values), draws_per_dag, dtype=torch.float64)
    ancestor = 0
    for d, A in enumerate(dags):
        A = A.clone()
        A[:, i] = 0                                             # do(x_i): the intervened node loses its parents
        order = topological_order(nx.from_numpy_array(A.numpy(), create_using=nx.DiGraph))
        reach = {i}
        for k in order:
            if any(A[u, k] and u in reach for u in range(p)):
                reach.add(k)
        ancestor += t in reach
        m = len(values) * draws_per_dag
        x = torch.zeros(m, p, dtype=torch.float64)
        for k in order:
            if k == i:
                x[:, k] = values.repeat_interleave(draws_per_dag)
                continue
            G = tuple(int(u) for u in torch.nonzero(A[:, k]).flatten())
            if not G:
                x[:, k] = X[torch.randint(N, (m,), generator=gen), k]  # a root: its empirical marginal
                continue
            key = (k, G)
            if key not in cache:
                if key not in scorer.hyperparameters:
                    scorer.prefetch([key])
                cache[key] = _FamilyPredictor(X, k, G, scorer.hyperparameters[key], scorer.kernel)
            x[:, k] = cache[key].sample(x[:, list(G)], gen)
        draws[d] = x[:, t].reshape(len(values), draws_per_dag)
    flat = draws.permute(1, 0, 2).reshape(len(values), -1)
    return flat.mean(-1), flat.std(-1), ancestor / num_dags

