"""Stacking of MCMC chains that do not mix (Yao, Vehtari & Gelman 2022, "Stacking for non-mixing Bayesian
computations: the curse and blessing of multimodal posteriors", JMLR 23(79)).

When chains settle in different modes of a multimodal posterior and do not cross between them, R-hat says so
(it is > 1.01) but the pooled draws are not a posterior sample: each mode is weighted by how many chains
happened to land there. Chain stacking weights the chains instead by how well each predicts held-out data,
using the pointwise PSIS-LOO log predictive densities ``elpd_loo[i, k]`` of every chain ``k``:

    w = argmax over the simplex of  Σ_i log Σ_k w_k exp(elpd_loo[i, k])

(Yao et al. 2022, Eq. (3); Yao, Vehtari, Simpson & Gelman 2018, "Using stacking to average Bayesian predictive
distributions", Bayesian Analysis 13(3), Eq. (4)). Draws resampled with probabilities ``w_k / S_k`` are the
stacked posterior (Yao et al. 2022, Sec. 3.2). Chains in the same mode share their weight; a chain stuck in a
mode that predicts worse gets weight near 0.
"""
import numpy as np

from .inference_data import _arviz_major

__all__ = ["ChainStacking", "chain_stacking", "stacked_posterior", "stacking_weights"]


def stacking_weights(pointwise_elpd):
    """Stacking weights of ``K`` predictive distributions from their pointwise log predictive densities.

    Maximises ``Σ_i log Σ_k w_k exp(l[i, k])`` over the probability simplex (Yao et al. 2018, Eq. (4)), a concave
    problem; each row is shifted by its maximum first, so that densities far below 1 do not underflow (ArviZ's
    ``az.compare(method="stacking")`` exponentiates them as they are).

    :param pointwise_elpd: ``[N, K]`` array: ``l[i, k]``, the leave-one-out log predictive density of point ``i``
        under distribution ``k`` (e.g. the ``loo_i`` of ``az.loo(..., pointwise=True)``).
    :returns: ``[K]`` non-negative weights that sum to 1.
    """
    lpd = np.asarray(pointwise_elpd, dtype=float)
    if lpd.ndim != 2 or lpd.shape[0] == 0 or lpd.shape[1] == 0:
        raise ValueError(f"stacking_weights: pointwise_elpd must be [N points, K distributions]; got shape "
                         f"{lpd.shape}")
    if not np.isfinite(lpd).all():
        bad = np.argwhere(~np.isfinite(lpd))[0]
        raise ValueError(f"stacking_weights: pointwise_elpd[{bad[0]}, {bad[1]}] is not finite; a distribution "
                         f"that gives a point zero density (or NaN) cannot be stacked; check its draws")
    num = lpd.shape[1]
    if num == 1:
        return np.ones(1)
    # here, not at the top: scipy.optimize costs ~0.8 s, and pyro_dag.dgp imports this package
    from scipy.optimize import Bounds, LinearConstraint, minimize

    dens = np.exp(lpd - lpd.max(1, keepdims=True))  # [N, K], each row's largest entry 1

    def neg_score(w):
        return -np.log(dens @ w).sum()

    def neg_grad(w):
        return -(dens / (dens @ w)[:, None]).sum(0)

    result = minimize(neg_score, np.full(num, 1.0 / num), jac=neg_grad, method="SLSQP",
                      bounds=Bounds(np.zeros(num), np.ones(num)),
                      constraints=LinearConstraint(np.ones(num), 1.0, 1.0),
                      options={"ftol": 1e-12, "maxiter": 1000})
    if not result.success:
        import warnings

        warnings.warn(f"stacking_weights: the optimiser stopped without converging ({result.message}); the weights "
                      f"may not be optimal", RuntimeWarning, stacklevel=2)
    w = np.clip(result.x, 0.0, None)
    return w / w.sum()


class ChainStacking:
    """The result of :func:`chain_stacking`.

    :ivar numpy.ndarray weights: ``[C]`` stacking weights of the chains (sum 1).
    :ivar numpy.ndarray elpd_loo: ``[C]`` each chain's PSIS-LOO expected log predictive density, summed over
        the observations.
    :ivar numpy.ndarray pointwise_elpd: ``[N, C]`` the pointwise densities the weights were fitted to (the
        observations of every observed node, concatenated in ``variables`` order).
    :ivar numpy.ndarray max_pareto_k: ``[C]`` each chain's largest Pareto ``k̂``; above 0.7 that chain's LOO
        estimate is unreliable (Vehtari et al. 2017) and so is its weight.
    :ivar list variables: the ``log_likelihood`` variables used (one per observed node).
    """

    def __init__(self, weights, elpd_loo, pointwise_elpd, max_pareto_k, variables):
        self.weights = weights
        self.elpd_loo = elpd_loo
        self.pointwise_elpd = pointwise_elpd
        self.max_pareto_k = max_pareto_k
        self.variables = variables

    @property
    def elpd_stacked(self):
        """``Σ_i log Σ_k w_k exp(elpd_loo[i, k])``: the LOO log predictive density of the stacked mixture; a little
        optimistic, as the weights were fitted to the same pointwise values."""
        m = self.pointwise_elpd.max(1)
        return float((m + np.log(np.exp(self.pointwise_elpd - m[:, None]) @ self.weights)).sum())

    def __repr__(self):
        return (f"ChainStacking(weights={np.round(self.weights, 3).tolist()}, "
                f"elpd_loo={np.round(self.elpd_loo, 2).tolist()}, elpd_stacked={self.elpd_stacked:.2f})")


def _group(idata, name):
    # InferenceData (ArviZ 0.x) and DataTree (ArviZ 1.x) both give groups by item; a DataTree node -> Dataset
    group = idata[name]
    return group.to_dataset() if hasattr(group, "to_dataset") else group


def _pointwise_loo(idata, chain, names):
    """``(elpd_loo_i [N], max k̂)`` of one chain: ``az.loo(..., pointwise=True)`` on that chain alone, per
    variable, concatenated. With one chain ArviZ takes the relative efficiency as 1."""
    import warnings

    import arviz as az

    one = _map_groups(idata, lambda ds: ds.isel(chain=[chain]))
    columns, ks = [], []
    for v in names:
        with warnings.catch_warnings():  # a high k̂ warns per call; it is reported in max_pareto_k instead
            warnings.simplefilter("ignore")
            res = az.loo(one, pointwise=True, var_name=v)
        pointwise = getattr(res, "loo_i", None)  # ArviZ 0.x
        if pointwise is None:
            pointwise = res.elpd_i  # ArviZ 1.x
        columns.append(np.asarray(pointwise, dtype=float).reshape(-1))
        ks.append(np.asarray(res.pareto_k, dtype=float).reshape(-1))
    return np.concatenate(columns), float(np.concatenate(ks).max())


def chain_stacking(idata, var_names=None):
    """Stack the chains of an MCMC posterior by their leave-one-out predictive performance (Yao, Vehtari &
    Gelman 2022, JMLR 23(79), Sec. 3).

    Use when the chains settle in different modes (R-hat > 1.01, each chain's own diagnostics fine): the
    weights say which modes predict the data, and :func:`stacked_posterior` resamples the draws by them.

    :param idata: ``InferenceData`` with a ``log_likelihood`` group (e.g. from
        :func:`~pyro_dag.diagnostics.to_inference_data` with ``mcmc=``); ``[chain, draw, ...]`` per variable.
    :param list var_names: ``log_likelihood`` variables to use (default: all, i.e. every observed node; their
        observations are concatenated, each one a point to leave out).
    :returns: :class:`ChainStacking`.
    """
    loglik = _group(idata, "log_likelihood")
    names = list(loglik.data_vars) if var_names is None else list(var_names)
    missing = [v for v in names if v not in loglik.data_vars]
    if missing or not names:
        raise ValueError(f"chain_stacking: log_likelihood has no variable {missing or names}; it has "
                         f"{list(loglik.data_vars)}")
    num_chains = loglik.sizes["chain"]
    if num_chains < 2:
        raise ValueError("chain_stacking: the posterior has one chain; run several (e.g. MCMC(num_chains=4) or one "
                         "MCMC per chain, passed together to to_inference_data)")
    columns, ks = zip(*(_pointwise_loo(idata, c, names) for c in range(num_chains)))
    pointwise = np.stack(columns, axis=1)  # [N, C]
    return ChainStacking(stacking_weights(pointwise), pointwise.sum(0), pointwise, np.array(ks), names)


def stacked_posterior(idata, weights, num_draws=None, seed=0):
    """Draws of the stacked posterior: one chain of ``num_draws`` draws, chain ``k`` chosen with probability
    ``weights[k]`` and a draw uniformly within it (Yao, Vehtari & Gelman 2022, Sec. 3.2).

    :param idata: ``InferenceData`` (``DataTree`` on ArviZ 1.x) with ``[chain, draw, ...]`` groups.
    :param weights: ``[C]`` chain weights (e.g. ``chain_stacking(idata).weights``).
    :param int num_draws: draws to return (default: all draws of all chains, ``C · S``).
    :param int seed: seed of the resampling.
    :returns: the same kind of object with every group: those with ``chain`` and ``draw`` dimensions resampled
        (the same draws in each, so ``posterior``, ``posterior_predictive``, ``log_likelihood`` and
        ``sample_stats`` stay paired), ``chain`` of size 1; the others (``observed_data``) as they are.
    """
    import xarray as xr

    post = _group(idata, "posterior")
    num_chains, num_per_chain = post.sizes["chain"], post.sizes["draw"]
    w = np.asarray(weights, dtype=float)
    if w.shape != (num_chains,) or (w < 0).any() or not np.isclose(w.sum(), 1.0):
        raise ValueError(f"stacked_posterior: weights must be {num_chains} non-negative numbers that sum to 1 (one "
                         f"per chain); got {w.tolist()}")
    num_draws = num_chains * num_per_chain if num_draws is None else int(num_draws)
    rng = np.random.default_rng(seed)
    chain_idx = xr.DataArray(rng.choice(num_chains, size=num_draws, p=w / w.sum()), dims="draw")
    draw_idx = xr.DataArray(rng.integers(num_per_chain, size=num_draws), dims="draw")

    def resample(ds):
        ds = ds.isel(chain=chain_idx, draw=draw_idx)
        ds = ds.drop_vars([c for c in ("chain", "draw") if c in ds.coords]).expand_dims(chain=[0])
        return ds.assign_coords(draw=np.arange(num_draws)).transpose("chain", "draw", ...)

    return _map_groups(idata, resample)


def _map_groups(idata, fn):
    """``fn`` applied to every group with ``chain`` and ``draw`` dimensions, the others kept; the same kind of
    object back (ArviZ 0.x ``InferenceData`` or 1.x ``DataTree``)."""
    import arviz as az

    names = list(idata.groups()) if callable(getattr(idata, "groups", None)) else list(idata.children)
    out = {}
    for g in names:
        ds = _group(idata, g)
        out[g] = fn(ds) if "chain" in ds.dims and "draw" in ds.dims else ds
    if _arviz_major(az) < 1:
        return az.InferenceData(**out)
    import xarray as xr

    return xr.DataTree.from_dict(out)
