"""ArviZ ``InferenceData`` from MCMC runs and from variational guides of a :class:`~pyro_dag.DAGDGP`.

:func:`to_inference_data` writes the groups ArviZ's model-checking and model-comparison functions read
(``posterior``, ``posterior_predictive``, ``log_likelihood``, ``observed_data`` and, for MCMC, ``sample_stats``),
with named dimensions, so that ``az.summary``, ``az.loo``, ``az.waic``, ``az.compare``, ``az.plot_trace`` and
``az.plot_ppc`` work on DAG-DGP posteriors whether they come from ``MCMC(NUTS(model))`` or from a guide (ours or
Pyro's autoguides). It works with ArviZ 0.x (``az.from_dict(posterior=..., ...)``, Python 3.11) and ArviZ 1.x
(``az.from_dict({"posterior": ..., ...})``, Python >= 3.12).

The pointwise log-likelihood of a Gaussian-likelihood leaf is the collapsed one,
``log N(y_i; μ_i(U, F_Pa), r_i + τ²)``, with the node value integrated out given its inducing outputs and parents
(as ``DAGDGP(sample_f=True)`` does for NUTS), so that LOO/WAIC of guides and of NUTS estimate the same quantity
and can be compared (Vehtari, Gelman & Gabry 2017, "Practical Bayesian model evaluation using leave-one-out
cross-validation and WAIC", Statistics and Computing 27).
"""
import contextlib

import numpy as np
import torch
from pyro import poutine

from ..gp.collapsed import value_posterior

__all__ = ["MCMCStats", "arviz_from_dict", "to_inference_data"]


def _numpy(x):
    return x.detach().cpu().numpy() if torch.is_tensor(x) else np.asarray(x)


def _arviz_major(az):
    return int(str(az.__version__).split(".")[0])


def _arviz_from_dict(groups, coords=None, dims=None):
    """Build ``InferenceData`` from ``{group: {var: array [chain, draw, ...]}}`` on ArviZ 0.x or 1.x.

    ArviZ 1.x takes one dict of groups (``az.from_dict({"posterior": ...}, coords=, dims=)``, returning an
    ``xarray.DataTree``); ArviZ 0.x takes one keyword per group.
    """
    import arviz as az

    groups = {k: v for k, v in groups.items() if v}
    if _arviz_major(az) >= 1:
        return az.from_dict(groups, coords=coords, dims=dims)
    return az.from_dict(**groups, coords=coords, dims=dims)


def arviz_from_dict(groups, coords=None, dims=None):
    """``InferenceData`` from ``{group: {var: array [chain, draw, ...]}}`` on ArviZ 0.x or 1.x (empty groups
    dropped): the version switch of :func:`to_inference_data`, for converters of other model families
    (e.g. :func:`pyro_dag.sem.sem_inference_data`)."""
    return _arviz_from_dict(groups, coords=coords, dims=dims)


class MCMCStats:
    """Per-draw NUTS statistics for ``sample_stats``: use as ``MCMC(..., hook_fn=MCMCStats())``.

    Pyro's :class:`~pyro.infer.MCMC` keeps only the indices of divergent transitions; this hook records, for
    every post-warm-up draw, ``diverging`` (bool), ``step_size`` and ``tree_depth`` (the number of trajectory
    doublings of NUTS, Hoffman & Gelman 2014, Alg. 6; 0 for HMC). Chains run in this process (``num_chains=1``,
    or several chains when Pyro runs them sequentially) are recorded in order; pass the same hook to one
    ``MCMC`` per chain, or one hook per run, and give it to :func:`to_inference_data` with ``sample_stats=``.

    :ivar list records: one dict per draw, in order.
    """

    def __init__(self):
        self.records = []
        self._kernel = None
        self._depth = 0
        self._num_div = 0

    def _wrap(self, kernel):
        self._kernel = kernel
        build = getattr(kernel, "_build_tree", None)
        if build is None or getattr(build, "_pyro_dag_wrapped", False):
            return

        def wrapped(z, r, z_grads, log_slice, direction, tree_depth, energy_current):
            self._depth = max(self._depth, int(tree_depth) + 1)
            return build(z, r, z_grads, log_slice, direction, tree_depth, energy_current)

        wrapped._pyro_dag_wrapped = True
        kernel._build_tree = wrapped

    def __call__(self, kernel, params, stage, i):
        if kernel is not self._kernel:
            self._wrap(kernel)
        num_div = len(getattr(kernel, "_divergences", ()))
        if stage.startswith("Sample"):
            if i == 0:
                self._num_div = 0  # a new chain: the kernel's divergence list restarted at setup
            self.records.append({"diverging": num_div > self._num_div, "step_size": float(kernel.step_size),
                                 "tree_depth": self._depth})
        self._num_div = num_div
        self._depth = 0

    def as_arrays(self, num_chains):
        """``{stat: [num_chains, num_draws]}`` arrays."""
        if not self.records or len(self.records) % num_chains:
            raise ValueError(f"MCMCStats holds {len(self.records)} draws, which is not a multiple of "
                             f"num_chains = {num_chains}: pass the hook that was given to these runs")
        out = {}
        for key in self.records[0]:
            out[key] = np.asarray([r[key] for r in self.records]).reshape(num_chains, -1)
        return out


@contextlib.contextmanager
def _collapsed_leaves(model, collapse):
    """Temporarily evaluate the model with ``sample_f=True`` and its Gaussian leaves' values (only) collapsed:
    the pointwise log-likelihood ``log N(y_i; μ_i(U), r_i + τ²)`` given the leaves' inducing outputs, which
    :meth:`~pyro_dag.DAGDGP.full_model_draws` has drawn for a ``collapse="inducing"`` run."""
    old = model.sample_f, model.collapse
    model.sample_f = bool(collapse) or old[0]
    model.collapse = "values" if collapse or old[1] == "inducing" else old[1]
    try:
        yield
    finally:
        model.sample_f, model.collapse = old


def _site_draws(trace):
    return {name: site["value"].detach() for name, site in trace.nodes.items()
            if site["type"] == "sample" and not site["is_observed"] and not site["infer"].get("is_auxiliary")}


def _evaluate(model, inputs, data, mask, draw, obs, record, exact_leaves):
    """One model pass with the latent sites fixed to ``draw``: node values, pointwise log-likelihood
    ``[n]`` of each observed node and a posterior-predictive draw ``[n, d]``.

    A collapsed Gaussian leaf's values are drawn given the draw: from ``p(f | y, U, F_Pa)`` (``exact_leaves``,
    the exact conditional posterior for MCMC), or from ``p(f | U, F_Pa)`` (the variational family
    ``q(U) p(F | U)`` of a guide, Perlino et al. 2026, Eq. (5))."""
    with poutine.trace() as tr, poutine.condition(data=draw):
        values = model(inputs, data, mask)
    out = {}
    for w in record:
        if model._collapsed(w) and w in values:
            loc = values[w]
            _, r = model.node_conditional(w, values)
            var = r.unsqueeze(-1).expand_as(loc)
            if exact_leaves and w in obs:
                y, m = obs[w]
                tau2 = model.likelihoods[w].variance
                loc, var, _ = value_posterior(loc, var, y, m, tau2)
            out[f"f:{w}"] = (loc + var.clamp_min(0).sqrt() * torch.randn_like(loc)).detach()
    for w in obs:
        site = tr.trace.nodes[f"{w}.y"]
        fn = site["fn"]
        out[f"ll:{w}"] = fn.log_prob(site["value"]).detach()
        out[f"pp:{w}"] = fn.sample().detach()
    for w in record:
        if w in values and f"{w}.f" not in draw and not model._collapsed(w):
            out[f"f:{w}"] = values[w].detach()
    for name, site in tr.trace.nodes.items():
        if site["type"] == "sample" and not site["is_observed"] and name not in draw and name.endswith(".f"):
            out[f"f:{name[:-2]}"] = site["value"].detach()
    return out


def _dims_for(model, name, shape, obs_cases):
    """Named dimensions of a variable (event shape ``shape``)."""
    if name.endswith(".u"):
        w = name[:-2]
        return [f"{w}_output", f"{w}_inducing"]
    if name.endswith(".eps"):
        return ["case", f"{name[:-4]}_output"]
    if name.endswith(".f") or name.endswith(".x"):
        w = name[:-2]
        return ["case", f"{w}_output" if name.endswith(".f") else f"{w}_dim"]
    if name.endswith(".y"):
        w = name[:-2]
        return [f"{w}_case", f"{w}_output"]
    return [f"{name}_dim{i}" for i in range(len(shape))]


def to_inference_data(model=None, guide=None, inputs=None, data=None, nodes=None, num_samples=500, mcmc=None, *,
                      mask=None, sample_stats=None, log_likelihood=True, posterior_predictive=True,
                      collapse_leaves=True, case_coords=None):
    """A DAG-DGP posterior as an ArviZ ``InferenceData`` (groups for LOO/WAIC, model comparison and PPC).

    Sources:

    * ``to_inference_data(mcmc=mcmc)``: a :class:`pyro.infer.MCMC` that has been run on a
      :class:`~pyro_dag.DAGDGP` (its model, inputs and data are read from the run), or a list of such runs,
      one chain each (chains run one after the other, e.g. one core);
    * ``to_inference_data(model, guide, inputs, data)``: any trained guide of the model (e.g.
      :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`, Pyro's ``AutoNormal``), ``num_samples`` draws
      (one chain); the arguments in the order of :func:`pyro_dag.infer.train`.

    Groups (``S`` draws per chain, ``n`` cases, ``n_w`` cases where node ``w`` is observed):

    * ``posterior``: ``"{w}.u"`` ``[chain, draw, w_output, w_inducing]`` (whitened inducing outputs),
      ``"{w}.f"`` ``[chain, draw, case, w_output]`` (node values; a Gaussian leaf, which NUTS integrates out,
      is drawn from its conditional given the draw and ``y`` for MCMC, from ``p(f | U, F_Pa)`` for a guide),
      ``"{h}.x"`` (latent inputs) and every other latent site (kernel and likelihood hyperparameters with
      priors, e.g. ``DAGDGP(..., priors="weakly_informative")``);
    * ``log_likelihood``: ``"{w}.y"`` ``[chain, draw, w_case]`` per observed node, summed over its outputs;
    * ``posterior_predictive``: ``"{w}.y"`` ``[chain, draw, w_case, w_output]``;
    * ``observed_data``: ``"{w}.y"`` ``[w_case, w_output]``; coordinate ``w_case`` = the case indices;
    * ``sample_stats`` (MCMC): ``diverging`` and, with an :class:`MCMCStats` hook, ``step_size`` and
      ``tree_depth``.

    Example::

        stats = MCMCStats()
        mcmc = MCMC(NUTS(model), num_samples=500, warmup_steps=500, hook_fn=stats)
        mcmc.run(inputs, data)
        idata = to_inference_data(mcmc=mcmc, sample_stats=stats)
        az.loo(idata, var_name="w3.y")

    :param model: a :class:`~pyro_dag.DAGDGP` (guide source). :param guide: its trained guide.
    :param dict inputs: root design matrices ``{root: [n, d_r]}``.
    :param dict data: observations ``{node: [n, d_w]}`` (NaN = missing); the MCMC run's data by default.
    :param list nodes: nodes whose values ``"{w}.f"`` enter the posterior (default every GP node).
    :param int num_samples: draws from the guide (at least 1).
    :param mcmc: a run :class:`pyro.infer.MCMC`, or a list of runs (one chain each, same model and data); the
        model may also be a :class:`~pyro_dag.infer.CentredInducing` wrapper of a DAGDGP.
    :param dict mask: optional ``{node: bool [n, d_w]}``.
    :param sample_stats: an :class:`MCMCStats` hook given to the run(s).
    :param bool log_likelihood: write the ``log_likelihood`` group. :param bool posterior_predictive: and that.
    :param bool collapse_leaves: pointwise log-likelihood of Gaussian leaves with the node value integrated out
        (default, the form NUTS samples); ``False`` uses ``log p(y_i | f_i)`` for guides.
    :param case_coords: optional labels of the ``n`` cases (default ``0..n-1``).
    """
    if isinstance(data, (list, tuple)) and all(isinstance(w, str) for w in data):
        raise ValueError(f"to_inference_data: the fourth argument is data (as in train(model, guide, inputs, data)), "
                         f"got the node names {list(data)}; pass them as nodes={list(data)!r}")
    if isinstance(nodes, (dict, str)):
        raise ValueError(f"to_inference_data: nodes must be a list of node names, got a {type(nodes).__name__}; pass "
                         "the observations as data (the fourth argument, or data=...)")
    if mcmc is None and (isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples < 1):
        raise ValueError(f"to_inference_data: num_samples must be a positive integer (the draws from the guide), got "
                         f"{num_samples!r}; with 0 draws there is no posterior, only the observed data")
    if mcmc is not None:
        runs = list(mcmc) if isinstance(mcmc, (list, tuple)) else [mcmc]
        for r in runs:
            if getattr(r, "_args", None) is None:
                raise ValueError("to_inference_data(mcmc=...) needs MCMC runs that have been run (mcmc.run(...))")
        model = getattr(runs[0].kernel, "model", None) if model is None else model
        args, kwargs = runs[0]._args, dict(runs[0]._kwargs or {})
        if inputs is None:
            inputs = args[0] if args else kwargs.get("inputs")
        if data is None:
            data = args[1] if len(args) > 1 else kwargs.get("data")
        if mask is None:
            mask = args[2] if len(args) > 2 else kwargs.get("mask")
        chains = []
        for r in runs:
            samples = r.get_samples(group_by_chain=True)
            chains.extend([{k: v[c] for k, v in samples.items()} for c in range(r.num_chains)])
        num_draws = min(next(iter(c.values())).shape[0] for c in chains) if chains[0] else 0
        if hasattr(model, "model_draws") and hasattr(model, "model"):
            # a reparameterised wrapper (pyro_dag.infer.CentredInducing): its draws as the model's own sites
            chains = [model.model_draws(c, inputs, data, mask) for c in chains]
            model = model.model
    else:
        if model is None or guide is None or inputs is None:
            raise ValueError("pass model, guide and inputs (a variational posterior) or mcmc=... (an MCMC run)")
        chains = None
        num_draws = int(num_samples)
    from ..dgp import DAGDGP

    if not isinstance(model, DAGDGP):
        raise TypeError(f"to_inference_data needs a DAGDGP model, got {type(model).__name__}; for other Pyro "
                        "models use arviz.from_pyro")
    X, n, obs = model.checked_arguments(inputs, data, mask)
    if chains is not None:
        # a collapse="inducing" run samples reparameterised sites for its observed Gaussian nodes: map them to the
        # full model's (a leaf's inducing outputs drawn exactly given each draw)
        chains = [model.full_model_draws(c, inputs, data, mask) for c in chains]
    record = list(model.gp_nodes if nodes is None else nodes)
    unknown = [w for w in record if w not in model.gp_nodes]
    if unknown:
        raise ValueError(f"nodes {unknown} are not GP nodes of the model (GP nodes: {model.gp_nodes})")
    observed_cases = {w: _numpy(m.any(-1)).nonzero()[0] for w, (y, m) in obs.items()}

    def evaluate_chain(draws_of):
        acc = {}
        for s in range(num_draws):
            draw = draws_of(s)
            with _collapsed_leaves(model, collapse_leaves):
                out = _evaluate(model, inputs, data, mask, draw, obs, record, exact_leaves=chains is not None)
            for k, v in {**{f"post:{name}": v for name, v in draw.items()}, **out}.items():
                acc.setdefault(k, []).append(_numpy(v))
        return {k: np.stack(v) for k, v in acc.items()}

    with torch.no_grad():
        if chains is not None:
            per_chain = [evaluate_chain(lambda s, c=c: {k: v[s] for k, v in c.items()}) for c in chains]
        else:
            def from_guide(s):
                return _site_draws(poutine.trace(guide).get_trace(inputs, data, mask))
            per_chain = [evaluate_chain(from_guide)]
    stacked = {k: np.stack([c[k] for c in per_chain]) for k in per_chain[0]}

    posterior, loglik, ppc, dims = {}, {}, {}, {}
    for key, arr in stacked.items():
        kind, name = key.split(":", 1)
        if kind == "post":
            posterior[name] = arr
            dims[name] = _dims_for(model, name, arr.shape[2:], observed_cases)
        elif kind == "f" and name in record:
            posterior[f"{name}.f"] = arr
            dims[f"{name}.f"] = _dims_for(model, f"{name}.f", arr.shape[2:], observed_cases)
        elif kind == "ll":
            loglik[f"{name}.y"] = arr[:, :, observed_cases[name]]
        elif kind == "pp":
            ppc[f"{name}.y"] = arr[:, :, observed_cases[name]]
            dims[f"{name}.y"] = _dims_for(model, f"{name}.y", arr.shape[3:], observed_cases)
    posterior = {k: v for k, v in posterior.items() if not (k.endswith(".f") and k[:-2] not in record)}
    observed = {f"{w}.y": _numpy(torch.where(m, y, torch.full_like(y, float("nan"))))[observed_cases[w]]
                for w, (y, m) in obs.items()}
    cases = np.arange(n) if case_coords is None else np.asarray(case_coords)
    if len(cases) != n:
        raise ValueError(f"case_coords has {len(cases)} labels but there are n = {n} cases")
    coords = {"case": cases}
    for w in obs:
        coords[f"{w}_case"] = cases[observed_cases[w]]
    groups = {"posterior": posterior, "observed_data": observed}
    if log_likelihood:
        groups["log_likelihood"] = loglik
    if posterior_predictive:
        groups["posterior_predictive"] = ppc
    if chains is not None:
        num_chains = len(chains)
        if sample_stats is not None:
            stats = sample_stats.as_arrays(num_chains)
            stats = {k: v[:, -num_draws:] for k, v in stats.items()}
        else:
            div = np.zeros((num_chains, num_draws), dtype=bool)
            c = 0
            for r in runs:
                diag = r.diagnostics() if hasattr(r, "_diagnostics") else {}
                per = diag.get("divergences", {})
                for j in range(r.num_chains):
                    idx = np.asarray(per.get(f"chain {j}", []), dtype=int)
                    idx = idx[(idx >= 0) & (idx < num_draws)]
                    div[c, idx] = True
                    c += 1
            stats = {"diverging": div}
        groups["sample_stats"] = stats
    return _arviz_from_dict(groups, coords=coords, dims=dims)
