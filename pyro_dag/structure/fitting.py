"""One-call Bayesian structure learning: :func:`fit` -> :class:`~pyro_dag.structure.StructurePosterior`.

:func:`fit` assembles the SVI-DAG model (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to
Bayesian Causal Discovery*, arXiv:2608.04930) from the primitives of this package -- :class:`StructureModel`, the
:class:`~pyro_dag.structure.AutoEdgeFlowGuide` and :class:`~pyro_dag.structure.OrderSVGD` -- trains them and returns
the posterior. Its settings are a validated :class:`~pyro_dag.structure.FitConfig`. Everything it builds is an
ordinary Pyro object, returned on the posterior.
"""
import time

import pyro
import torch
from pyro.infer import TraceMeanField_ELBO

from pyro_dag.threads import DEFAULT_NUM_THREADS, limit_threads

from .autoguide import AutoEdgeFlowGuide
from .config import FitConfig
from .data import prepare_data, standardize_columns
from .mechanisms import BGeSEM, LinearGaussianSEM, MLPSEM
from .model import StructureModel, structure_model
from .order_scorer import OrderScorer
from .priors import edge_prior_parameters as _edge_prior_parameters
from .svgd import OrderMaskKernel, OrderSVGD
from .variational import StructurePosterior, _distinct_orders

__all__ = ["StructureModel", "StructurePosterior", "fit", "structure_model"]

# kept importable for code written against the single-module layout
_prior = _edge_prior_parameters
_to_tensor = prepare_data
_LIKELIHOODS = ("linear", "bge", "linear-sites", "mlp")


def _config(config, likelihood, settings, caller):
    if config is None:
        config = FitConfig()
    elif not isinstance(config, FitConfig):
        raise TypeError(f"{caller}: config must be a pyro_dag.structure.FitConfig; got {type(config).__name__}")
    if likelihood is not None:
        settings = dict(settings, likelihood=likelihood)
    try:
        return config.replace(**settings)
    except TypeError as e:
        raise TypeError(f"{caller}() got an unexpected keyword argument: {e}") from None


def fit(data, likelihood=None, edge_beliefs=None, *, config=None, node_names=None, dtype=torch.float32, device=None,
        callback=None, progress=True, num_threads=DEFAULT_NUM_THREADS, **settings):
    r"""Fit a posterior over DAGs to data with SVI-DAG: a conditional flow over the edge logits and SVGD particles
    over node-order potentials (Zinage 2026, arXiv:2608.04930, Alg. 1), plus Metropolis-Hastings order moves.

    The settings are a :class:`~pyro_dag.structure.FitConfig`: pass one as ``config=``, or its fields as keywords
    (``fit(X, likelihood="bge", num_steps=500)``), or both (keywords override the config's fields). Fields left at
    ``None`` get the per-likelihood defaults of :data:`~pyro_dag.structure.config.LIKELIHOOD_DEFAULTS` and the
    size-dependent ones of :meth:`FitConfig.resolve <pyro_dag.structure.FitConfig.resolve>`; the field list with
    its meaning is in :class:`~pyro_dag.structure.FitConfig`. The main ones:

    * ``likelihood``: ``"linear"`` (linear-Gaussian SEM with the parameters integrated out exactly), ``"bge"``
      (the score-equivalent BGe marginal likelihood), ``"linear-sites"`` (weight and noise sample sites with a
      hypernetwork guide) or ``"mlp"`` (one tanh MLP per node);
    * the edge prior: ``expected_parents`` (sparsity prior ``p0 = expected_parents / (p - 1)``; ``None``: none),
      ``prior_concentration``, ``belief_strength``;
    * the run: ``num_steps``, ``num_particles``, ``seed``, ``lr``, ``batch_size``;
    * the order search: ``order_score`` (``"exact"``: ``log p(D, order)`` with the edges summed out exactly, as order
      MCMC does, Friedman & Koller 2003; ``"elbo"``: the flow's per-particle ELBO), ``swap_every``, ``swap_moves``;
    * the posterior's weights: ``weighting`` (``"order"``, ``"elbo"`` or ``"uniform"``) and ``order_history``.

    :param data: ``[N, p]`` tensor, array or ``pandas.DataFrame`` of numbers (column names become node names; a
        string or categorical column raises an error naming it).
    :param str likelihood: shorthand for the config field (``None``: the config's, default ``"linear"``).
    :param edge_beliefs: optional ``[p, p]`` prior beliefs ``P(i -> j)`` in ``(0, 1)``; 0.5 = no opinion
        (:func:`~pyro_dag.structure.edge_belief_prior`); "no opinion" entries get the sparsity prior.
    :param FitConfig config: the settings (default: ``FitConfig()``).
    :param list node_names: names of the columns (default: a DataFrame's column names).
    :param dtype: float dtype (``torch.float32`` or ``torch.float64``); ``device``: torch device (default: the
        data's, else CPU).
    :param callable callback: ``callback(step, svgd, loss)`` after every step.
    :param bool progress: show a tqdm progress bar.
    :param int num_threads: intra-op threads during the fit (:func:`pyro_dag.threads.limit_threads`; the caller's
        settings are restored afterwards); ``None`` keeps the process's settings.
    :returns: :class:`~pyro_dag.structure.StructurePosterior` (its ``config`` is the resolved
        :class:`~pyro_dag.structure.FitConfig`, its ``settings`` a dict of the main fields).

    Example::

        post = pyro_dag.structure.fit(X, likelihood="linear", num_steps=500)
        P = post.edge_probs()          # [p, p], P[i, j] = P(i -> j)
        dags = post.sample(1000)       # [1000, p, p], all acyclic
    """
    from tqdm.auto import tqdm

    config = _config(config, likelihood, settings, "fit")
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64; got {dtype}")
    if device is None:
        device = data.device if torch.is_tensor(data) else torch.device("cpu")
    X, names = prepare_data(data, dtype, device)
    N, p = X.shape
    if node_names is not None:
        if len(node_names) != p:
            raise ValueError(f"node_names has {len(node_names)} names but the data have {p} columns")
        names = [str(n) for n in node_names]
    if config.standardize:
        X = standardize_columns(X)
    config = config.resolve(p, N)
    (likelihood, num_particles, num_steps, seed, lr, affine_lr, particle_lr, batch_size, sinkhorn_iters,
     edge_temperature, edge_relaxation, edge_offset, offset_gradient_cap, flow_hidden, flow_blocks, mlp_hidden,
     param_kl_weight, repulsion_cap, weighting, swap_every, warmup, soft_warmup, likelihood_scale, swap_until,
     swap_moves, order_score, max_parents, candidate_parents, order_history) = (
        getattr(config, k) for k in (
            "likelihood", "num_particles", "num_steps", "seed", "lr", "affine_lr", "particle_lr", "batch_size",
            "sinkhorn_iters", "edge_temperature", "edge_relaxation", "edge_offset", "offset_gradient_cap",
            "flow_hidden", "flow_blocks", "mlp_hidden", "param_kl_weight", "repulsion_cap", "weighting",
            "swap_every", "warmup", "soft_warmup", "likelihood_scale", "swap_until", "swap_moves", "order_score",
            "max_parents", "candidate_parents", "order_history"))
    tau0, tau1 = config.order_temperature
    with limit_threads(num_threads):
        alpha, beta = config.edge_prior(p, edge_beliefs, dtype=dtype, device=device)
        pyro.set_rng_seed(seed)
        store = pyro.get_param_store()
        t0 = time.perf_counter()
        losses = []
        with store.scope() as state:
            if likelihood == "linear":
                mech = LinearGaussianSEM(p, marginalize=True)
            elif likelihood == "bge":
                mech = BGeSEM(p)
            elif likelihood == "linear-sites":
                mech = LinearGaussianSEM(p, marginalize=False, subsample_size=batch_size)
            else:
                mech = MLPSEM(p, hidden=mlp_hidden, subsample_size=batch_size, kl_weight=param_kl_weight)
            scorer = None
            if order_score == "exact":
                X64 = X.detach().to(device="cpu", dtype=torch.float64)
                scorer = OrderScorer(mech, X64, alpha / (alpha + beta), max_parents=max_parents,
                                     candidates=candidate_parents)
            mech = mech.to(dtype=dtype, device=device)
            model = StructureModel(mech, alpha, beta)
            guide = AutoEdgeFlowGuide(
                model,
                mechanism=mech,
                hidden_dims=flow_hidden,
                num_blocks=flow_blocks,
                temperature=edge_temperature,
                edge_relaxation=edge_relaxation,
                edge_offset=edge_offset,
                offset_gradient_cap=offset_gradient_cap,
                order_temperature=tau0,
                sinkhorn_iters=sinkhorn_iters,
            )
            kernel = OrderMaskKernel(temperature=tau0, sinkhorn_iters=sinkhorn_iters)
            svgd_ref = {}

            def optim_args(name):
                if name == svgd_ref["svgd"].particle_name:
                    return {"lr": particle_lr, "clip_norm": 10.0}
                if ".affine." in name:  # the per-edge location / scale of the flow: low-dimensional, well conditioned
                    return {"lr": affine_lr, "clip_norm": 10.0}
                return {"lr": lr, "clip_norm": 10.0}

            optim = pyro.optim.ClippedAdam(optim_args)
            svgd = OrderSVGD(
                model,
                guide,
                optim,
                num_particles=num_particles,
                max_plate_nesting=1,
                kernel=kernel,
                loss=TraceMeanField_ELBO(),
                repulsion_cap=repulsion_cap,
            )
            svgd_ref["svgd"] = svgd
            visited_r = []  # [K, p] particles of each recorded step (order_history); deduplicated by order at the end
            bar = tqdm(range(num_steps), disable=not progress, desc="pyro_dag.fit", leave=False)
            for step in bar:
                frac = step / max(1, num_steps - 1)
                tau = tau0 + (tau1 - tau0) * frac
                guide.order_temperature = tau
                kernel.temperature = tau
                model.order_temperature, model.sinkhorn_iters = tau, sinkhorn_iters
                model.soft_mix = max(0.0, 1.0 - step / (soft_warmup * num_steps)) if soft_warmup > 0 else 0.0
                if warmup > 0:
                    ramp = (1.0 / N) ** max(0.0, 1.0 - step / (warmup * num_steps))
                    model.likelihood_scale = float(likelihood_scale * min(1.0, ramp))
                else:
                    model.likelihood_scale = float(likelihood_scale)
                loss = svgd.step(X)
                losses.append(loss)
                if swap_every and step % swap_every == 0 and step < swap_until * num_steps:
                    svgd.swap_step(X, moves=swap_moves, order_score=None if scorer is None else
                                   (lambda r: scorer(r, scale=model.likelihood_scale)))
                if order_history > 0 and step >= (1.0 - order_history) * num_steps:
                    visited_r.append(svgd.particles.detach().clone())
                if callback is not None:
                    callback(step, svgd, loss)
                if progress and (step % 25 == 0 or step == num_steps - 1):
                    bar.set_postfix(loss=f"{loss:.4g}", tau=f"{tau:.3g}")
            bar.close()
        wall = time.perf_counter() - t0
        settings = config.settings()
        post = StructurePosterior(model, guide, svgd, X, names, state, losses, settings, wall, weighting=weighting)
        post.order_scorer = scorer
        post.config = config
        if visited_r:
            visited = torch.cat(visited_r, 0)
            post.visited = visited[_distinct_orders(visited)[1]]  # the first potentials seen with each order
        return post
