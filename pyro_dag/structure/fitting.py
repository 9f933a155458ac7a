"""One-call Bayesian structure learning: :func:`fit` -> :class:`~pyro_dag.structure.StructurePosterior`.

:func:`fit` assembles the SVI-DAG model (Zinage 2026, *SVI-DAG: A Structured Variational Inference Approach to
Bayesian Causal Discovery*, arXiv:2608.04930) from the primitives of this package -- :class:`StructureModel`, the
:class:`~pyro_dag.structure.AutoEdgeFlowGuide` and :class:`~pyro_dag.structure.OrderSVGD` -- trains them and returns
the posterior. Its settings are a validated :class:`~pyro_dag.structure.FitConfig`. Everything it builds is an
ordinary Pyro object, returned on the posterior.
"""
import dataclasses
import sys
import time
from typing import NamedTuple, Optional

import pyro
import torch
from pyro.infer import TraceMeanField_ELBO

from pyro_dag.threads import DEFAULT_NUM_THREADS, limit_threads

from .autoguide import AutoEdgeFlowGuide
from .config import FitConfig, StructureConfig
from .data import prepare_data, standardize_columns
from .mechanisms import LinearGaussianSEM, MLPSEM
from .method_choice import MethodChoice, choose_method
from .model import StructureModel, structure_model
from .order_scorer import OrderScorer
from .scores import collapsed_mechanism
from .priors import edge_prior_parameters as _edge_prior_parameters
from .svgd import OrderMaskKernel, OrderSVGD
from .variational import StructurePosterior, _distinct_orders

__all__ = ["StructureModel", "StructurePosterior", "fit", "structure_model"]

# kept importable for code written against the single-module layout
_prior = _edge_prior_parameters
_to_tensor = prepare_data
_LIKELIHOODS = ("linear", "bge", "linear-sites", "mlp")
#: ``fit(likelihood="gp")`` computes the exact posterior of the GP score up to this many variables
#: (``p Σ_{k ≤ 2} C(p - 1, k)`` GP fits: 804 at ``p = 12``) and the hybrid posterior above.
GP_EXACT_FIT_NODES = 12


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
        callback=None, progress=True, num_threads=DEFAULT_NUM_THREADS, interventions=None, method="auto", **settings):
    r"""Fit a posterior over DAGs to data with SVI-DAG: a conditional flow over the edge logits and SVGD particles
    over node-order potentials (Zinage 2026, arXiv:2608.04930, Alg. 1), plus Metropolis-Hastings order moves.

    The settings are a :class:`~pyro_dag.structure.FitConfig`: pass one as ``config=``, or its fields as keywords
    (``fit(X, likelihood="bge", num_steps=500)``), or both (keywords override the config's fields). Fields left at
    ``None`` get the per-likelihood defaults of :data:`~pyro_dag.structure.config.LIKELIHOOD_DEFAULTS` and the
    size-dependent ones of :meth:`FitConfig.resolve <pyro_dag.structure.FitConfig.resolve>`; the field list with
    its meaning is in :class:`~pyro_dag.structure.FitConfig`. The main ones:

    * ``likelihood``: ``"linear"`` (linear-Gaussian SEM with the parameters integrated out exactly), ``"bge"``
      (the score-equivalent BGe marginal likelihood), ``"linear-sites"`` (weight and noise sample sites with a
      hypernetwork guide), ``"mlp"`` (one tanh MLP per node) or ``"gp"`` (Gaussian-process mechanisms: the GP
      network score of Friedman & Nachman 2000, see below);
    * the edge prior: ``expected_parents`` (sparsity prior ``p0 = expected_parents / (p - 1)``; ``None``: none),
      ``prior_concentration``, ``belief_strength``;
    * the run: ``num_steps``, ``num_particles``, ``seed``, ``lr``, ``batch_size``;
    * the order search: ``order_score`` (``"exact"``: ``log p(D, order)`` with the edges summed out exactly, as order
      MCMC does, Friedman & Koller 2003; ``"elbo"``: the flow's per-particle ELBO), ``swap_every``, ``swap_moves``;
    * the posterior's weights: ``weighting`` (``"order"``, ``"elbo"`` or ``"uniform"``) and ``order_history``.

    ``likelihood="gp"`` is not fitted by SVI-DAG: every parent set's score is a GP fit (type-II maximum likelihood,
    :mod:`~pyro_dag.structure.gp_scores`), which a flow sampling thousands of parent sets cannot afford. The GP
    scores of the parent sets of at most 2 parents are computed once and the posterior over them is computed
    exactly: :func:`~pyro_dag.structure.exact_posterior` for ``p ≤`` :data:`GP_EXACT_FIT_NODES`, else
    :func:`~pyro_dag.structure.hybrid_posterior` (candidate parents, then the exact DP or order MCMC on their
    tables). Only the model's settings (:class:`~pyro_dag.structure.StructureConfig`'s fields: the edge prior,
    ``standardize``, ``likelihood_scale``) apply; the SVI settings given as keywords are refused. The scores are
    computed on the CPU in float64 (``dtype``, ``device`` and ``progress`` do not apply). The returned posterior
    answers the same queries (:class:`~pyro_dag.structure.posterior.DAGPosterior`).

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
    :param interventions: known perfect interventions (a boolean ``[N, p]`` mask or GIES's
        ``(environments, targets)``, see :func:`~pyro_dag.structure.exact_posterior`). SVI-DAG does not take them
        yet; with ``"linear"`` or ``"bge"`` the posterior is then computed as :func:`_fit_interventional` says (the
        exact posterior up to 14 variables, the hybrid one above); other likelihoods are refused.
    :param str method: ``"auto"`` (default), ``"svi"``, ``"exact"`` or ``"hybrid"``. ``"auto"`` picks by size when
        no SVI-DAG setting is given (:func:`~pyro_dag.structure.method_choice.choose_method`): the exact posterior up
        to 12 variables, the hybrid posterior up to 200 (with ``n ≥ p + 10``), SVI-DAG above, or for the
        likelihoods only SVI-DAG scores; it prints the choice in one line (with ``progress``) and records it as the
        posterior's ``method`` and ``settings["method"]``. ``"exact"`` and ``"hybrid"`` take the model settings
        only (:class:`~pyro_dag.structure.StructureConfig`'s fields).
    :returns: :class:`~pyro_dag.structure.StructurePosterior` (its ``config`` is the resolved
        :class:`~pyro_dag.structure.FitConfig`, its ``settings`` a dict of the main fields); for ``"gp"`` an
        :class:`~pyro_dag.structure.ExactStructurePosterior` or :class:`~pyro_dag.structure.OrderMCMCPosterior`
        (with ``config``, ``settings`` and ``gp_scorer``).

    Example::

        post = pyro_dag.structure.fit(X, likelihood="linear", num_steps=500)
        P = post.edge_probs()          # [p, p], P[i, j] = P(i -> j)
        dags = post.sample(1000)       # [1000, p, p], all acyclic
    """
    given = config
    config = _config(config, likelihood, settings, "fit")
    if interventions is not None:
        return _fit_interventional(data, config, settings, edge_beliefs, node_names, num_threads, interventions,
                                   callback)
    if config.likelihood != "gp":
        choice = _choose(data, config, given, settings, method, node_names)
        if choice.method != "svi":
            return _fit_collapsed_posterior(data, config, choice, edge_beliefs, node_names, num_threads, progress)
        if method == "auto" and progress:
            print(f"structure.fit: {choice.reason}; method='exact' or 'hybrid' to choose", file=sys.stderr)
    if config.likelihood == "gp":
        if callback is not None:
            raise ValueError("fit(likelihood='gp') runs no optimisation steps, so callback would never be called; "
                             "drop it")
        return _fit_gp(data, config, settings, edge_beliefs, node_names, num_threads)
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64; got {dtype}")
    if device is None:
        device = data.device if torch.is_tensor(data) else torch.device("cpu")
    X, names = prepare_data(data, dtype, device, node_names)
    N, p = X.shape
    if config.standardize:
        X = standardize_columns(X, names)
    config = config.resolve(p, N)
    with limit_threads(num_threads):
        alpha, beta = config.edge_prior(p, edge_beliefs, dtype=dtype, device=device)
        pyro.set_rng_seed(config.seed)
        t0 = time.perf_counter()
        with pyro.get_param_store().scope() as state:
            parts = _build(config, X, alpha, beta, dtype, device)
            losses, visited = _train(config, X, parts, callback, progress)
        wall = time.perf_counter() - t0
        post = StructurePosterior(parts.model, parts.guide, parts.svgd, X, names, state, losses, config.settings(),
                                  wall, weighting=config.weighting)
        post.order_scorer = parts.scorer
        post.config = config
        post.method = "svi"
        post.settings = dict(post.settings, method="svi")
        if visited:
            visited = torch.cat(visited, 0)
            post.visited = visited[_distinct_orders(visited)[1]]  # the first potentials seen with each order
        return post


def _choose(data, config, given, settings, method, node_names):
    """The method (:mod:`.method_choice`): ``method`` unless ``"auto"``, which chooses by size unless SVI-DAG
    settings were given (as keywords, or as fields of ``given``, the caller's config, that differ from their
    defaults)."""
    model_fields = {f.name for f in dataclasses.fields(StructureConfig)} | {"seed"}   # (the hybrid's chains use seed)
    if method not in ("auto", "svi", "exact", "hybrid"):
        raise ValueError(f"method must be 'auto', 'svi', 'exact' or 'hybrid'; got {method!r}")
    svi = {k for k in settings if k not in model_fields}
    if given is not None:
        default = FitConfig()
        svi |= {f.name for f in dataclasses.fields(FitConfig)
                if f.name not in model_fields and getattr(given, f.name) != getattr(default, f.name)}
    if method == "auto":
        shape = tuple(getattr(data, "shape", ()))
        if svi or len(shape) != 2:   # (a bad shape gets SVI-DAG's checks and their message)
            return choose_method(0, 0, config.likelihood, svi or {"(data checks)"})
        return choose_method(int(shape[1]), int(shape[0]), config.likelihood, svi)
    if method != "svi" and svi:
        raise ValueError(f"fit(method={method!r}) computes the posterior without an SVI run, so the SVI-DAG setting(s) "
                         f"{sorted(svi)} do not apply; drop them or use method='svi'")
    return MethodChoice(method, f"method={method!r} given")


def _fit_collapsed_posterior(data, config, choice, edge_beliefs, node_names, num_threads, progress):
    """``fit`` by the exact or the hybrid posterior of a collapsed likelihood (``choice.method``)."""
    from .exact import exact_posterior
    from .hybrid import hybrid_posterior

    if progress:
        print(f"structure.fit: {choice.reason}; method='svi' for SVI-DAG", file=sys.stderr)
    model = config.structure_config()
    t0 = time.perf_counter()
    if choice.method == "exact":
        post = exact_posterior(data, config.likelihood, edge_beliefs, config=model, node_names=node_names,
                               num_threads=num_threads)
    else:
        post = hybrid_posterior(data, config.likelihood, edge_beliefs, config=model, node_names=node_names,
                                num_threads=num_threads, seed=config.seed)
    post.method = choice.method
    post.method_reason = choice.reason
    post.settings = dict(likelihood=config.likelihood, method=choice.method, wall_s=time.perf_counter() - t0)
    return post


def _fit_gp(data, config, settings, edge_beliefs, node_names, num_threads):
    """``fit(likelihood="gp")``: the exact (``p ≤`` :data:`GP_EXACT_FIT_NODES`) or hybrid posterior of the GP
    network score, with the model settings of ``config``."""
    from .exact import exact_posterior
    from .hybrid import hybrid_posterior

    _refuse_svi_settings(settings, "fit(likelihood='gp') computes the posterior of the GP score exactly (no SVI run)")
    X, names = prepare_data(data, torch.float64, None, node_names)
    model = config.structure_config()
    t0 = time.perf_counter()
    if X.shape[1] <= GP_EXACT_FIT_NODES:
        post = exact_posterior(X, "gp", edge_beliefs, config=model, node_names=names, num_threads=num_threads)
        method = "exact"
    else:
        post = hybrid_posterior(X, "gp", edge_beliefs, config=model, node_names=names, num_threads=num_threads,
                                seed=config.seed)
        method = "hybrid"
    post.method = method
    post.settings = dict(likelihood="gp", method=method, gp_fits=post.gp_scorer.num_fits,
                         wall_s=time.perf_counter() - t0)
    return post


def _refuse_svi_settings(settings, why, extra=()):
    """Refuse, naming them, the settings of ``settings`` that only SVI-DAG uses (and ``extra`` ones), for a fit that
    runs no SVI: ``why`` says what it computes instead."""
    model_fields = {f.name for f in dataclasses.fields(StructureConfig)}
    svi_only = sorted(k for k in settings if k not in model_fields) + list(extra)
    if svi_only:
        raise ValueError(f"{why}, so the SVI setting(s) {svi_only} do not apply; drop them (the model settings that "
                         f"apply: {sorted(model_fields - {'likelihood'})})")


def _fit_interventional(data, config, settings, edge_beliefs, node_names, num_threads, interventions, callback):
    """``fit(interventions=...)``: SVI-DAG's mechanisms score every row as observational, so the interventional
    posterior of the collapsed likelihoods is computed by the order DP instead -- exactly
    (:func:`~pyro_dag.structure.exact_posterior`) up to :data:`~pyro_dag.structure.config.EXACT_ORDER_SCORE_MAX_NODES`
    variables, else on candidate tables (:func:`~pyro_dag.structure.hybrid_posterior`). Refuses, by name, the
    likelihoods and SVI settings that do not apply."""
    from .config import EXACT_ORDER_SCORE_MAX_NODES
    from .exact import exact_posterior
    from .hybrid import hybrid_posterior

    if config.likelihood not in ("linear", "bge", "gp"):
        raise ValueError(f"fit(likelihood={config.likelihood!r}) does not take interventions= yet (its mechanisms "
                         "would score the interventional rows as observational); use likelihood='bge', 'linear' or "
                         "'gp'")
    _refuse_svi_settings(settings, "fit(interventions=...) computes the interventional posterior by the order DP (no "
                         "SVI run)", extra=["callback"] if callback is not None else [])
    X, names = prepare_data(data, torch.float64, None, node_names)
    model = config.structure_config()
    t0 = time.perf_counter()
    kw = dict(config=model, node_names=names, num_threads=num_threads, interventions=interventions)
    if config.likelihood == "gp" and X.shape[1] > GP_EXACT_FIT_NODES:
        raise ValueError(f"fit(likelihood='gp', interventions=...) computes the exact posterior, for at most "
                         f"{GP_EXACT_FIT_NODES} variables; the data have {X.shape[1]}")
    if X.shape[1] <= EXACT_ORDER_SCORE_MAX_NODES:
        post, method = exact_posterior(X, config.likelihood, edge_beliefs, **kw), "exact"
    else:
        post, method = hybrid_posterior(X, config.likelihood, edge_beliefs, seed=config.seed, **kw), "hybrid"
    post.settings = dict(likelihood=config.likelihood, method=method, interventions=True,
                         wall_s=time.perf_counter() - t0)
    return post


def _mechanism(config, p, num_rows):
    """The SEM likelihood of ``config.likelihood`` for ``p`` variables and ``num_rows`` rows."""
    if config.likelihood in ("linear", "bge"):
        return collapsed_mechanism(config.likelihood, p, num_rows, config)
    if config.likelihood == "linear-sites":
        return LinearGaussianSEM(p, marginalize=False, subsample_size=config.batch_size)
    return MLPSEM(p, hidden=config.mlp_hidden, subsample_size=config.batch_size, kl_weight=config.param_kl_weight)


class _Parts(NamedTuple):
    model: StructureModel
    guide: AutoEdgeFlowGuide
    kernel: OrderMaskKernel
    svgd: OrderSVGD
    scorer: Optional[OrderScorer]


def _build(config, X, alpha, beta, dtype, device):
    """Model, guide, kernel, :class:`OrderSVGD` (with its optimiser) and the exact order scorer of a resolved config."""
    p = X.shape[1]
    tau0 = config.order_temperature[0]
    mech = _mechanism(config, p, X.shape[0])
    scorer = None
    if config.order_score == "exact":
        X64 = X.detach().to(device="cpu", dtype=torch.float64)
        scorer = OrderScorer(mech, X64, alpha / (alpha + beta), max_parents=config.max_parents,
                             candidates=config.candidate_parents)
    mech = mech.to(dtype=dtype, device=device)
    model = StructureModel(mech, alpha, beta)
    guide = AutoEdgeFlowGuide(
        model,
        mechanism=mech,
        hidden_dims=config.flow_hidden,
        num_blocks=config.flow_blocks,
        temperature=config.edge_temperature,
        edge_relaxation=config.edge_relaxation,
        edge_offset=config.edge_offset,
        offset_gradient_cap=config.offset_gradient_cap,
        order_temperature=tau0,
        sinkhorn_iters=config.sinkhorn_iters,
    )
    kernel = OrderMaskKernel(temperature=tau0, sinkhorn_iters=config.sinkhorn_iters)
    svgd_ref = {}

    def optim_args(name):
        if name == svgd_ref["svgd"].particle_name:
            return {"lr": config.particle_lr, "clip_norm": 10.0}
        if ".affine." in name:  # the per-edge location / scale of the flow: low-dimensional, well conditioned
            return {"lr": config.affine_lr, "clip_norm": 10.0}
        return {"lr": config.lr, "clip_norm": 10.0}

    svgd = OrderSVGD(
        model,
        guide,
        pyro.optim.ClippedAdam(optim_args),
        num_particles=config.num_particles,
        max_plate_nesting=1,
        kernel=kernel,
        loss=TraceMeanField_ELBO(),
        repulsion_cap=config.repulsion_cap,
    )
    svgd_ref["svgd"] = svgd
    return _Parts(model, guide, kernel, svgd, scorer)


def _train(config, X, parts, callback, progress):
    """The training loop: annealed Sinkhorn temperature, tempered likelihood and soft warm-up, one SVGD step and the
    order moves per step. Returns the losses and the particles of each step recorded for ``order_history``."""
    from tqdm.auto import tqdm

    model, guide, kernel, svgd, scorer = parts
    N = X.shape[0]
    num_steps, (tau0, tau1) = config.num_steps, config.order_temperature
    soft_warmup, warmup, likelihood_scale = config.soft_warmup, config.warmup, config.likelihood_scale
    losses = []
    visited = []  # [K, p] particles of each recorded step (order_history); deduplicated by order at the end
    bar = tqdm(range(num_steps), disable=not progress, desc="pyro_dag.fit", leave=False)
    for step in bar:
        frac = step / max(1, num_steps - 1)
        tau = tau0 + (tau1 - tau0) * frac
        guide.order_temperature = tau
        kernel.temperature = tau
        model.order_temperature, model.sinkhorn_iters = tau, config.sinkhorn_iters
        model.soft_mix = max(0.0, 1.0 - step / (soft_warmup * num_steps)) if soft_warmup > 0 else 0.0
        if warmup > 0:
            ramp = (1.0 / N) ** max(0.0, 1.0 - step / (warmup * num_steps))
            model.likelihood_scale = float(likelihood_scale * min(1.0, ramp))
        else:
            model.likelihood_scale = float(likelihood_scale)
        loss = svgd.step(X)
        losses.append(loss)
        if config.swap_every and step % config.swap_every == 0 and step < config.swap_until * num_steps:
            svgd.swap_step(X, moves=config.swap_moves, order_score=None if scorer is None else
                           (lambda r: scorer(r, scale=model.likelihood_scale)))
        if config.order_history > 0 and step >= (1.0 - config.order_history) * num_steps:
            visited.append(svgd.particles.detach().clone())
        if callback is not None:
            callback(step, svgd, loss)
        if progress and (step % 25 == 0 or step == num_steps - 1):
            bar.set_postfix(loss=f"{loss:.4g}", tau=f"{tau:.3g}")
    bar.close()
    return losses, visited
