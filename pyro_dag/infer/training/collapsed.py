"""Exact fits of the nodes whose inputs are all observed: the collapsed bound, maximised by L-BFGS.

A GP node ``w`` whose parents are all observed roots or fully observed nodes, with a Gaussian likelihood
(:func:`~pyro_dag.dgp.observed_inputs.collapsible_nodes`), is sparse GP regression on known inputs. Its part of the
ELBO, maximised over the Gaussian ``q(V_w)``, is the collapsed bound of Titsias (2009, "Variational learning of
inducing variables in sparse Gaussian processes", AISTATS), whitened:

    B_w = log N(y | 0, A Aᵀ + τ² I) - Σ_i r_i / (2 τ²),      A = [a_i]ᵀ  [n, M],   (a_i, r_i) Eq. (80) of
    Perlino, Hamelijnck, Johansen & Damoulas (2026, arXiv:2607.09645),

attained at ``q(V_w) = N(Σ Aᵀ y / τ², Σ)``, ``Σ = (I + AᵀA / τ²)⁻¹``. With every case an inducing input
(``num_inducing="auto"``) ``B_w`` is the exact GP's log marginal likelihood. ``B_w`` is deterministic, so its
kernel hyperparameters and noise are fitted by L-BFGS as GPy and emukit fit an exact GP, and not by the stochastic
steps, which on these nodes drift to a larger noise and a smoother fit (measured in ``benchmarks/zoo.py``: 1.4-5.8×
the exact GP's RMSE after 3000 steps, against 1.0-1.5× here). The ``"recommended"`` recipe of
:func:`~pyro_dag.infer.train` calls :func:`fit_collapsed` first, holds those nodes' kernels, noise and inducing
inputs through the stochastic steps that train the rest, and skips the steps when nothing is left.

Above :data:`FIT_MAX_CASES` cases a node's kernel hyperparameters and noise are fitted on a seeded random subset of
that many (subset of data, Rasmussen & Williams 2006, Sec. 8.3.2: each evaluation of ``B_w`` and its gradient costs
``O(n M²)``, 2.3 CPU s at ``n = 2·10⁴``, ``M = 512``, and L-BFGS takes tens of them), and ``q(V_w)`` is then written
from every case in one pass (chunks of rows, ``O(n M²)`` once); a :class:`~pyro_dag.progress.ScaledDefaultWarning`
says so.
"""
import math
import time
import warnings
from dataclasses import dataclass, field

import torch

from ...dgp import DAGDGP
from ...dgp.observed_inputs import collapsible_nodes
from ...dgp.scale import scale_hint
from ...gp.amplitude import bounded_amplitude_factor, scale_amplitude
from ...gp.conditional import NotPositiveDefiniteError
from ...gp.noise import NUGGET_FRACTION
from ...progress import ScaledDefaultWarning, setup_progress
from ..autoguide.families import MeanFieldFamily
from .collapsed_batch import EVIDENCE_TOLERANCE, exact_gp_problem, fit_exact_nodes
from .groups import _sync_with_param_store
from .validation import structured_part

__all__ = ["CollapsedFit", "collapsed_bound", "fit_collapsed", "collapsible_nodes", "fitting_rows", "FIT_MAX_CASES",
           "calibrate_amplitude"]

#: L-BFGS iterations per node.
MAX_ITER = 200

#: The exact fits choose a node's hyperparameters on a random subset of this many cases when it has more
#: (module docstring); ``q(V_w)`` always uses every case.
FIT_MAX_CASES = 4096

#: Rows per chunk when ``q(V_w)`` is written from every case (bounds the ``[rows, M]`` conditionals held at once).
POSTERIOR_CHUNK = 8192


@dataclass
class CollapsedFit:
    """What :func:`fit_collapsed` did.

    :ivar list nodes: the nodes fitted. :ivar dict losses: ``{node: [negative bound per evaluation]}``.
    :ivar dict floored: ``{node: noise variance}`` of the nodes whose learned noise ended below the floor and was
        raised to it. :ivar dict subset: ``{node: cases}`` of the nodes whose hyperparameters were fitted on a
        random subset of their cases (``max_cases``). :ivar dict amplitude_factors: ``{node: c}`` of the deterministic
        nodes whose kernel and nugget were scaled by the leave-one-out factor ``c`` (:func:`calibrate_amplitude`).
        :ivar float seconds: wall-clock seconds.
    """

    nodes: list = field(default_factory=list)
    losses: dict = field(default_factory=dict)
    floored: dict = field(default_factory=dict)
    subset: dict = field(default_factory=dict)
    amplitude_factors: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def final_loss(self):
        """The summed negative bound at the end (``nan`` without nodes)."""
        if not self.losses:
            return float("nan")
        return sum(v[-1] for v in self.losses.values() if v)


def collapsed_bound(model, w, parent_values, y, noise=None):
    """The collapsed bound ``B_w`` of node ``w`` (module docstring), in float64 whatever the model's dtype.

    :param model: a set-up :class:`~pyro_dag.DAGDGP`. :param dict parent_values: ``{parent: [n, d_p]}``.
    :param torch.Tensor y: ``[n]`` observations of ``w``.
    :param noise: ``τ²`` (default: the node's Gaussian likelihood's variance).
    :returns: ``(bound, A [n, M], τ²)``, float64 scalars and matrix (differentiable in the model's parameters).
    """
    a, r = model.node_conditional(w, parent_values)                   # [n, M], [n]
    a, r, y = a.double(), r.double(), y.double()
    tau2 = model.likelihoods[w].variance.reshape(-1)[0] if noise is None else torch.as_tensor(noise, dtype=torch.float64)
    tau2 = tau2.double().to(a.device)
    n, M = a.shape
    B = torch.eye(M, dtype=a.dtype, device=a.device) + a.T @ a / tau2
    LB, info = torch.linalg.cholesky_ex(B)
    if bool(info.any()):   # a noise variance tiny against the kernel's: I + AᵀA/τ² past float64's precision
        raise NotPositiveDefiniteError(
            f"node {w!r}: the collapsed bound's matrix I + AᵀA/τ² is not positive definite in float64 (noise "
            f"variance τ² = {float(tau2):.3g} against a kernel variance of order {float((a * a).sum(-1).max()):.3g})."
            + (scale_hint(model, w, parent_values, {w: y}) or " Fix the noise variance at a larger value (or use "
               "the default noise rule, noise='auto'), or rescale the data"))
    c = torch.linalg.solve_triangular(LB, (a.T @ y / tau2)[:, None], upper=False)
    quad = (y * y).sum() / tau2 - (c * c).sum()
    logdet = 2 * LB.diagonal().log().sum() + n * tau2.log()
    bound = -0.5 * (n * math.log(2 * math.pi) + logdet + quad) - 0.5 * r.sum() / tau2
    return bound, a, tau2


class _NonFiniteBound(RuntimeError):
    pass


def lbfgs(params, objective, max_iter, tolerance_change=1e-12):
    """Minimise ``objective()`` over ``params`` by L-BFGS with a strong-Wolfe line search; ends at the best
    parameters seen, also when an evaluation fails (a Cholesky error or a non-finite value at an extreme trial
    point). ``tolerance_change``: stop when the objective or the step changes less (torch's L-BFGS option).
    :returns: the objective's values, one per evaluation."""
    best = [float("inf"), [q.detach().clone() for q in params]]
    values = []
    optim = torch.optim.LBFGS(params, lr=1.0, max_iter=max_iter, max_eval=max_iter * 5 // 4, history_size=50,
                              tolerance_grad=1e-9, tolerance_change=tolerance_change, line_search_fn="strong_wolfe")

    def closure():
        optim.zero_grad()
        loss = objective()
        if not torch.isfinite(loss):
            raise _NonFiniteBound
        value = float(loss.detach())
        values.append(value)
        if value < best[0]:
            best[0], best[1] = value, [q.detach().clone() for q in params]
        loss.backward()
        return loss

    try:
        optim.step(closure)
    except (_NonFiniteBound, torch.linalg.LinAlgError, NotPositiveDefiniteError):
        pass
    with torch.no_grad():
        for q, b in zip(params, best[1]):
            q.copy_(b)
    return values


def _rows(model, w, X, obs):
    """Parent values and observations of ``w`` on the cases where it is observed."""
    y, m = obs[w]
    keep = m[:, 0]
    return {p: (X[p] if p in X else obs[p][0])[keep] for p in model.parents[w]}, y[keep, 0]


def learnable_node_tensors(model, w, likelihood=True, inducing=True):
    """The learnable tensors of node ``w``'s kernel and likelihood (registered in Pyro's parameter store first, as
    training would), and of its inducing inputs if learned: ``{id: tensor}``. ``likelihood=False`` leaves the
    likelihood out (a hidden node's is never used, so it must not enter the store: checkpoints would hold it);
    ``inducing=False`` the inducing inputs (the exact fits hold them)."""
    out = {}
    for module in (model.kernels[w], model.likelihoods[w]) if likelihood else (model.kernels[w],):
        _sync_with_param_store(module)
        out.update({id(p): p for p in module.parameters() if p.requires_grad})
    if not inducing:
        return out
    store = model.inducing
    if w in store.__dict__.get("_pyro_params", {}):  # register this node's Z alone: syncing every node's per node
        with store._pyro_context:                   # made holding N nodes O(N²) (3.6 s at 278 nodes)
            getattr(store, w)
        Z = store._parameters.get(f"{w}_unconstrained")
        if Z is not None:
            out[id(Z)] = Z
    return out


def fitting_rows(parent_values, y, max_cases=FIT_MAX_CASES, seed=0):
    """The cases an exact fit chooses hyperparameters on: all of them up to ``max_cases``, else a seeded random
    subset of that many (module docstring).

    :param dict parent_values: ``{parent: [n, d_p]}``. :param torch.Tensor y: ``[n]``.
    :returns: ``(parent_values, y)`` on the chosen rows (the same objects when nothing is dropped).
    """
    n = y.shape[0]
    if max_cases is None or n <= max_cases:
        return parent_values, y
    idx = torch.randperm(n, generator=torch.Generator().manual_seed(int(seed)))[:int(max_cases)].to(y.device)
    return {p: v[idx] for p, v in parent_values.items()}, y[idx]


@torch.no_grad()
def calibrate_amplitude(model, w, parent_values, y):
    """Scale the kernel amplitude and the nugget of a deterministic node ``w`` by its bounded leave-one-out factor
    ``c`` (:mod:`pyro_dag.gp.amplitude`): the posterior mean stays, every posterior variance is multiplied by ``c``.

    Applies only where the model chose both (the node's noise fixed as a nugget by the noise rule, its kernel the
    default one) and ``model.deterministic_amplitude == "loo"`` (the default; ``"ml"`` keeps the type-II
    maximum-likelihood amplitude). The factor is recorded in ``model.amplitude_factors[w]``.

    :returns: ``c``, or ``None`` where nothing was scaled.
    """
    if getattr(model, "deterministic_amplitude", "ml") != "loo":
        return None
    choice = model.noise_choices.get(w)
    lik = model.likelihoods[w]
    if (not getattr(choice, "fixed", False) or w not in model._default_kernels
            or "variance" not in lik._buffers):   # noise learned, a user's kernel or a user's fixed noise
        return None
    a, r = model.node_conditional(w, parent_values)
    tau2 = float(lik.variance.reshape(-1)[0])
    # a node with children propagates its latent f to them: calibrate f, not a new observation (gp.amplitude)
    c = bounded_amplitude_factor(a, y, tau2, residual=r, latent=model.graph.out_degree(w) > 0, seed=model.seed)
    if c is None or not scale_amplitude(model.kernels[w], c):
        return None
    lik._buffers["variance"].mul_(c)
    model.amplitude_factors[w] = c
    return c


@torch.no_grad()
def write_posterior(guide, model, w, parent_values, y, noise=None, bound=None, chunk=POSTERIOR_CHUNK):
    """Write the optimal ``q(V_w)`` of the collapsed bound at the current hyperparameters into ``guide``'s block of
    ``w`` (its off-diagonal blocks are the caller's to zero); ``noise`` as for :func:`collapsed_bound`, ``bound``
    its result at the current hyperparameters if the caller has it. Above ``chunk`` rows the sufficient statistics
    ``AᵀA`` and ``Aᵀy`` are summed over chunks of ``chunk`` rows (memory ``O(chunk · M)``)."""
    y = y.double()
    n = y.shape[0]
    if n <= chunk:   # the bound's own checks (a matrix past float64's precision names the node)
        _, a, tau2 = collapsed_bound(model, w, parent_values, y, noise) if bound is None else bound
        AtA, Aty = a.T @ a, a.T @ y
    else:
        tau2 = model.likelihoods[w].variance.reshape(-1)[0] if noise is None else torch.as_tensor(noise)
        AtA = Aty = 0.0
        for lo in range(0, n, chunk):
            a = model.node_conditional(w, {p: v[lo:lo + chunk] for p, v in parent_values.items()})[0].double()
            AtA, Aty = AtA + a.T @ a, Aty + a.T @ y[lo:lo + chunk]
        tau2 = tau2.double().to(AtA.device)
    M = AtA.shape[0]
    prec = torch.eye(M, dtype=AtA.dtype, device=AtA.device) + AtA / tau2
    Lp = torch.linalg.cholesky(prec)
    mean = torch.cholesky_solve((Aty / tau2)[:, None], Lp)[:, 0]
    family = guide.family   # set_node casts to the family's dtype and device
    if isinstance(family, MeanFieldFamily):
        family.set_node(w, mean, torch.linalg.cholesky(torch.cholesky_inverse(Lp)))
    else:
        family.set_node(w, mean, Lp)


def fit_collapsed(model, guide, inputs, data, *, nodes=None, max_iter=MAX_ITER, mask=None,
                  noise_floor=NUGGET_FRACTION, batch=True, max_cases=FIT_MAX_CASES):
    """Fit each collapsible node of ``model`` exactly (module docstring): its kernel hyperparameters and noise (those
    that are learnable; inducing inputs held) by L-BFGS on ``B_w``, then the optimal ``q(V_w)`` into ``guide``.

    :param model: a :class:`~pyro_dag.DAGDGP` (set up here if it is not yet).
    :param guide: its :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (or an ``AutoGuideList`` holding one).
    :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d_w]}``, NaN = missing.
    :param nodes: the nodes to fit (default every collapsible one); each must be collapsible.
    :param int max_iter: L-BFGS iterations per node. :param dict mask: optional observation masks.
    :param float noise_floor: a learned noise variance that ends below ``noise_floor · Var(y_w)`` is raised to it
        (a GP fitted to noise-free data drives ``τ²`` to the jitter's scale, where ``q(V_w)`` is ill-conditioned).
    :param bool batch: fit the nodes whose bound is an exact GP's evidence (the default kernel, a learned noise,
        every case an inducing input) together by batched BFGS (:mod:`~pyro_dag.infer.training.collapsed_batch`),
        the others one by one by L-BFGS; ``False``: every node by L-BFGS (same optimum to the optimisers'
        tolerance; at 113 such nodes of 100 cases the batch takes a fraction of the one-by-one fits' CPU time).
    :param int max_cases: hyperparameters are fitted on a random subset of this many cases above it (``None``:
        every case); ``q(V_w)`` is written from every case.
    :returns: a :class:`CollapsedFit`.
    :raises ValueError: naming a node that cannot be fitted this way, or a guide without a structured part.
    """
    start = time.perf_counter()
    if not isinstance(model, DAGDGP):
        raise ValueError(f"fit_collapsed needs a DAGDGP model, got {type(model).__name__}")
    if not model.is_setup:
        model.setup(inputs, data, mask)
    X, _, obs = model.checked_arguments(inputs, data, mask)
    possible = collapsible_nodes(model, X, obs)
    nodes = possible if nodes is None else list(nodes)
    for w in nodes:
        if w not in possible:
            raise ValueError(f"fit_collapsed: node {w!r} cannot be fitted exactly: it needs a Gaussian likelihood "
                             "without hyperpriors, one output, and every parent an observed root or a node observed "
                             "in every case")
    fit = CollapsedFit()
    if not nodes:
        return fit
    target = structured_part(guide)
    if target is None:
        raise ValueError(f"fit_collapsed writes each node's q(V_w) into an AutoStructuredGuide; got "
                         f"{type(guide).__name__}")
    if target.family is None:   # the guide's first call traces the model to build q(U), whose shapes do not
        # depend on the cases: on a minibatch above FIT_MAX_CASES (a full trace held [n, M] conditionals: 2.3 GiB
        # at n = 2·10⁵, M = 512)
        n = next(iter(obs.values()))[0].shape[0]
        if mask is not None:
            guide(inputs, data, mask=mask)
        elif n > FIT_MAX_CASES:
            guide(inputs, data, subsample_size=FIT_MAX_CASES)
        else:
            guide(inputs, data)
    bar = setup_progress(len(nodes), "exact fits of the nodes with observed inputs")
    rows = {w: _rows(model, w, X, obs) for w in nodes}
    batched = {}
    if batch:   # the batch fits on every case: nodes whose cases the subset rule would thin go one by one
        problems = {w: exact_gp_problem(model, w, *rows[w]) for w in nodes
                    if max_cases is None or rows[w][1].shape[0] <= max_cases}
        problems = {w: p for w, p in problems.items() if p is not None}
        batched = fit_exact_nodes(model, problems, progress=bar.update) if problems else {}
    subset = {}
    for w in nodes:
        values, y = rows[w]
        fit.losses[w], at_optimum = [], None
        if w in batched:
            with torch.no_grad():
                at_optimum = collapsed_bound(model, w, values, y)
            bound = float(at_optimum[0])
            # the batch solved the node's own problem: its bound there is the batch's evidence
            if math.isfinite(bound) and abs(bound - batched[w]) <= EVIDENCE_TOLERANCE * (y.numel() + abs(bound)):
                fit.losses[w] = [-bound]
            else:
                at_optimum = None
        else:
            bar.update(1)
        if not fit.losses[w]:
            params = list(learnable_node_tensors(model, w, inducing=False).values())
            sub_values, sub_y = fitting_rows(values, y, max_cases, model.seed)
            if params and sub_y is not y:
                subset[w] = y.shape[0]
            fit.losses[w] = (lbfgs(params, lambda: -collapsed_bound(model, w, sub_values, sub_y)[0], max_iter)
                             if params else [])
        lik = model.likelihoods[w]
        floor = noise_floor * float(y.double().var()) if y.numel() > 1 else 0.0
        if lik.variance.requires_grad and float(lik.variance.detach().reshape(-1)[0]) < floor:
            with torch.no_grad():
                lik.variance = torch.full_like(lik.variance, floor)
            fit.floored[w] = floor
            at_optimum = None
        if not fit.losses[w]:
            with torch.no_grad():
                fit.losses[w] = [float(-collapsed_bound(model, w, values, y)[0])]
        c = calibrate_amplitude(model, w, *fitting_rows(values, y, max_cases, model.seed))
        if c is not None:   # the kernel and nugget changed: the bound at the optimum is not this one's
            fit.amplitude_factors[w] = c
            at_optimum = None
        write_posterior(target, model, w, values, y, bound=at_optimum)
        fit.nodes.append(w)
        model.exact_fit_nodes.add(w)   # fitted on its parents' observed values: predict feeds it those (with noise)
    bar.close()
    if subset:
        largest = max(subset.values())
        warnings.warn(f"fit_collapsed: {len(subset)} node(s) ({', '.join(map(repr, subset))}) with up to {largest} "
                      f"cases: kernel and noise fitted on a random {max_cases} of them, q(V) on all (max_cases=None "
                      "fits on every case)", ScaledDefaultWarning, stacklevel=2)
    if not isinstance(target.family, MeanFieldFamily):
        target.family.zero_offdiagonal()
    fit.subset = dict(subset)
    fit.seconds = time.perf_counter() - start
    return fit
