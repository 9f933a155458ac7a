"""ArviZ ``InferenceData`` from fits of a :class:`~pyro_dag.sem.LatentSEM` (NUTS runs, SVI guides or draws).

:func:`sem_inference_data` writes the groups that ArviZ's diagnostics, model comparison and predictive checks
read, with named dimensions:

* ``posterior``: every latent site -- the per-case latents ``"{X}.x"`` ``[chain, draw, case]`` (the model's
  standardised scale; :func:`pyro_dag.sem.latent_samples` gives anchor units) and the globals (``"{X}.xbar"``
  ``[.., X_inducing, X_parent]``, ``"{X}.u"`` ``[.., X_inducing]``, ``"indicators.loading"`` ``[.., loading]``
  labelled ``"indicator<-latent"``, ``"indicators.noise"`` ``[.., indicator]``, ...);
* ``log_likelihood``: ``"indicators"`` ``[chain, draw, case]``, ``log p(y_d | x_d, θ)`` summed over the case's
  observed indicators, given the draw's latent values of that case (the conditional likelihood that the model's
  ``"indicators.y"`` site scores, as :func:`arviz.from_pyro` would record it), in the indicators' original units
  (the standardisation's log-Jacobian added back);
* ``posterior_predictive``: ``"indicators"`` ``[chain, draw, case, indicator]``, replicated indicators given the
  draw (original units);
* ``observed_data``: ``"indicators"`` ``[case, indicator]`` (original units, NaN = missing);
* ``sample_stats`` (MCMC runs): ``diverging``.

Silva & Gramacy (2010, arXiv:1002.4802, Sec. 5) judge convergence by EPSR (Gelman & Rubin 1992) of the latent
values across chains; with this conversion ``arviz.rhat(idata, var_names=["X1.x"])`` gives the same statistic.
"""
import numpy as np
import pyro.distributions as dist
import torch
from pyro import poutine

from ..diagnostics.inference_data import arviz_from_dict
from .predict import guide_samples

__all__ = ["sem_inference_data"]


def _chains_from(samples, mcmc, model, guide, data, num_samples):
    """``[ {site: [S, ...]} per chain ]`` and the MCMC runs (or ``[]``)."""
    given = [a is not None for a in (samples, mcmc, guide)]
    if sum(given) != 1:
        raise ValueError("sem_inference_data needs exactly one of samples= (a dict of draws, or a list of them, "
                         "one per chain), mcmc= (a run MCMC, or a list of runs) or guide= (a trained SVI guide)")
    if guide is not None:
        return [guide_samples(model, guide, data, num_samples=num_samples)], []
    if samples is not None:
        chains = list(samples) if isinstance(samples, (list, tuple)) else [samples]
        return [{k: torch.as_tensor(v) for k, v in c.items()} for c in chains], []
    runs = list(mcmc) if isinstance(mcmc, (list, tuple)) else [mcmc]
    chains = []
    for r in runs:
        if getattr(r, "_args", None) is None:
            raise ValueError("sem_inference_data(mcmc=...) needs MCMC runs that have been run (mcmc.run(df))")
        grouped = r.get_samples(group_by_chain=True)
        chains.extend({k: v[c] for k, v in grouped.items()} for c in range(r.num_chains))
    return chains, runs


def _dims(model, name, shape):
    """Named dimensions of a site's event shape ``shape`` (per draw)."""
    if name.endswith(".x") and name[:-2] in model.latents:
        return ["case"]
    if name.endswith(".xbar"):
        return [f"{name[:-5]}_inducing", f"{name[:-5]}_parent"]
    if name.endswith(".u"):
        return [f"{name[:-2]}_inducing"]
    if name.startswith("kernels.") and name.endswith(".lengthscale"):
        return [f"{name.split('.')[1]}_parent"]
    if name in ("indicators.noise",):
        return ["indicator"]
    if name == "indicators.loading":
        return ["loading"]
    if name == "indicators.intercept":
        return ["intercept"]
    if name.endswith((".weights", ".locs", ".vars")):
        return [f"{name.rsplit('.', 1)[0]}_component"]
    if name.endswith(".coef"):
        return [f"{name[:-5]}_feature"]
    return [f"{name}_dim{i}" for i in range(len(shape))]


def _coords(model, n, case_coords):
    cases = np.arange(n) if case_coords is None else np.asarray(case_coords)
    if len(cases) != n:
        raise ValueError(f"case_coords has {len(cases)} labels but the data have n = {n} cases")
    coords = {"case": cases, "indicator": list(model.indicators)}
    rows, cols = model._free_rows.tolist(), model._free_cols.tolist()
    coords["loading"] = [f"{model.indicators[j]}<-{model.latents[v]}" for j, v in zip(rows, cols)]
    coords["intercept"] = [model.indicators[j] for j in model._free_intercepts.tolist()]
    for x in model.endogenous:
        if model.equations[x] == "gp":
            coords[f"{x}_parent"] = list(model.parents[x])
    return coords


@torch.no_grad()
def _pointwise(model, draw, y, mask, gen):
    """Per-case ``log p(y_d | x_d, θ)`` ``[n]`` (model scale) and a replicated ``y`` ``[n, J]`` (model scale)."""
    with poutine.block(), poutine.condition(data=draw):
        g = model.sample_globals()
    xs = torch.stack([draw[f"{x}.x"] for x in model.latents], -1)  # [n, V]
    ll = model.measurement_log_prob(g, xs, y, mask)
    intercepts, loadings, noise = model.measurement_params(g)
    mu = intercepts + xs @ loadings.transpose(-1, -2)
    eps = torch.randn(mu.shape, generator=gen, dtype=mu.dtype)
    if model._t_cols:
        t = dist.StudentT(torch.tensor(model.student_df, dtype=mu.dtype)).sample(mu.shape)
        is_t = torch.zeros(len(model.indicators), dtype=torch.bool)
        is_t[model._t_cols] = True
        eps = torch.where(is_t, t, eps)
    return ll, mu + noise.sqrt() * eps


def sem_inference_data(model, data, *, samples=None, mcmc=None, guide=None, num_samples=200,
                       log_likelihood=True, posterior_predictive=True, case_coords=None, seed=0):
    """A :class:`~pyro_dag.sem.LatentSEM` posterior as ArviZ ``InferenceData`` (groups: module docstring).

    Sources (exactly one): ``samples`` -- posterior draws ``{site: [S, ...]}`` (e.g. ``MCMC.get_samples()`` or
    :func:`~pyro_dag.sem.guide_samples`; every latent site, including the per-case ``"{X}.x"``), or a list of such
    dicts, one per chain; ``mcmc`` -- a run :class:`pyro.infer.MCMC` (its chains), or a list of runs (one chain
    each, e.g. run one after the other); ``guide`` -- a trained SVI guide (``num_samples`` draws, one chain).

    :param LatentSEM model: the fitted model (its standardisation comes from its training data).
    :param data: the training DataFrame the draws belong to (``n`` cases).
    :param bool log_likelihood: write the ``log_likelihood`` group. :param bool posterior_predictive: and that.
    :param case_coords: optional labels of the ``n`` cases (default ``0..n-1``).
    :param int seed: of the posterior-predictive noise.
    :returns: ``arviz.InferenceData`` (ArviZ 0.x) or ``xarray.DataTree`` (ArviZ 1.x).

    Example::

        mcmc = MCMC(NUTS(model, init_strategy=model.init_loc_fn), warmup_steps=200, num_samples=200)
        mcmc.run(df)
        idata = sem_inference_data(model, df, mcmc=mcmc)
        az.rhat(idata, var_names=["X1.x"])          # EPSR of every latent value
        az.loo(idata)                               # PSIS-LOO of the conditional likelihood
    """
    y, mask = model.prepare(data)
    n = y.shape[0]
    chains, runs = _chains_from(samples, mcmc, model, guide, data, num_samples)
    local = [f"{x}.x" for x in model.latents]
    for c, ch in enumerate(chains):
        missing = [s for s in local if s not in ch]
        if missing:
            raise ValueError(f"sem_inference_data: chain {c} has no draws of the per-case latents {missing}; pass "
                             "draws of every latent site (MCMC.get_samples() or guide_samples())")
        bad = [s for s in local if ch[s].shape[-1] != n]
        if bad:
            raise ValueError(f"sem_inference_data: draws of {bad} have {ch[bad[0]].shape[-1]} cases, the data have "
                             f"{n}: pass the data the model was fitted on")
    num_draws = min(next(iter(ch.values())).shape[0] for ch in chains)
    names = list(chains[0])
    gen = torch.Generator().manual_seed(seed)
    scale = model.scaler.scale
    log_jac = (mask.to(y.dtype) * torch.as_tensor(-np.log(scale), dtype=y.dtype)).sum(-1)  # [n]
    mean_t, scale_t = torch.as_tensor(model.scaler.mean, dtype=y.dtype), torch.as_tensor(scale, dtype=y.dtype)
    ll, pp = [], []
    if log_likelihood or posterior_predictive:
        for ch in chains:
            l_c, p_c = [], []
            for s in range(num_draws):
                l, rep = _pointwise(model, {k: v[s] for k, v in ch.items()}, y, mask, gen)
                l_c.append((l + log_jac).numpy())
                p_c.append((mean_t + scale_t * rep).numpy())
            ll.append(np.stack(l_c))
            pp.append(np.stack(p_c))
    posterior, dims = {}, {}
    for k in names:
        arr = np.stack([ch[k][:num_draws].detach().cpu().numpy() for ch in chains])
        posterior[k] = arr
        dims[k] = _dims(model, k, arr.shape[2:])
    observed = np.where(mask.numpy(), (mean_t + scale_t * y).numpy(), np.nan)
    groups = {"posterior": posterior, "observed_data": {"indicators": observed}}
    dims["indicators"] = ["case", "indicator"]
    if log_likelihood:
        groups["log_likelihood"] = {"indicators": np.stack(ll)}
    if posterior_predictive:
        groups["posterior_predictive"] = {"indicators": np.stack(pp)}
    if runs:
        div = np.zeros((len(chains), num_draws), dtype=bool)
        c = 0
        for r in runs:
            per = r.diagnostics().get("divergences", {})
            for j in range(r.num_chains):
                idx = np.asarray(per.get(f"chain {j}", []), dtype=int)
                div[c, idx[(idx >= 0) & (idx < num_draws)]] = True
                c += 1
        groups["sample_stats"] = {"diverging": div}
    coords = _coords(model, n, case_coords)
    used = {d for v in dims.values() for d in v}
    coords = {k: v for k, v in coords.items() if k in used}
    # the log-likelihood variable has dims [case] only: ArviZ matches it by name to "indicators"' first dim
    idata = arviz_from_dict(groups, coords=coords, dims=dims)
    return idata
