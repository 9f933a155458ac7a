r"""LatentMAP: latent-MAP (LaMP) fitting of a :class:`~pyro_dag.DAGDGP` with exact-GP nodes.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation": the per-case
values ``W`` of every hidden node are MAP point estimates, fitted jointly with the kernel length-scales (and nuggets)
by Adam per parameter block on the profiled objective of :mod:`pyro_dag.infer.lamp.objective` (Sec. 3, Eqs. (4)-(9));
full batch or mini-batch with row-wise Adam and the growing batch schedule (Sec. 4, Algorithm 1); the iterate with the
lowest validation RMSE is kept. Prediction is the linked GP (Sec. 3.2) of
:class:`~pyro_dag.infer.lamp.LinkedGPPredictor`.
"""
import math
import time
import warnings
from dataclasses import dataclass, field

import torch

from .fitted import KERNELS, FittedNode
from .linked import LinkedGPPredictor
from .objective import LaMPObjective, kernel_matrix, profiled_log_likelihood
from .row_adam import RowwiseAdam
from .schedule import LaMPSettings

__all__ = ["LatentMAP", "LaMPHistory"]


@dataclass
class LaMPHistory:
    """What :meth:`LatentMAP.fit` returns.

    :ivar list losses: the objective ``L_S`` of every epoch (the mean over its mini-batches, each evaluated before
        its own update; ``L_n`` in full batch). A DAG without hidden nodes has no per-case values to update: its
        losses are those of the hyperparameter steps.
    :ivar list loss_epochs: the epoch of each loss.
    :ivar list batch_sizes: ``m_t`` of every epoch.
    :ivar list validation: ``(epoch, score)``: the validation score (the mean over the observed leaves of their
        RMSE divided by their training standard deviation; the plain RMSE for one standardised leaf).
    :ivar list validation_rmse: ``(epoch, {leaf: RMSE})``.
    :ivar int best_epoch: the epoch of the kept iterate (the lowest score; the last epoch without validation).
    :ivar float best_validation: its score (``None`` without validation).
    :ivar LaMPSettings settings: the settings used.
    :ivar int num_train: training cases. :ivar int num_validation: validation cases.
    :ivar float seconds: wall-clock seconds of the fit.
    """

    losses: list = field(default_factory=list)
    loss_epochs: list = field(default_factory=list)
    batch_sizes: list = field(default_factory=list)
    validation: list = field(default_factory=list)
    validation_rmse: list = field(default_factory=list)
    best_epoch: int = None
    best_validation: float = None
    settings: LaMPSettings = None
    num_train: int = 0
    num_validation: int = 0
    seconds: float = 0.0


def _input_error(message):
    from ...dgp import DAGInputError  # lazily: pyro_dag.dgp imports pyro_dag.infer

    return DAGInputError(message)


class LatentMAP:
    r"""Latent-MAP fitting of a :class:`~pyro_dag.DAGDGP` (LaMP-DGP; Chang & Sung 2026, Secs. 3-4).

    Every non-root node ``v`` of ``model.graph`` is ``d_v = model.output_dims[v]`` independent zero-mean **exact**
    GPs (no inducing points) on its parents' values: roots' design columns, observed parents' observations, and
    the per-case values ``W_v`` ``[n, d_v]`` of hidden parents, which are MAP parameters. Hidden nodes have process
    variance 1 (identifiability, Sec. 2) and a fixed jitter; observed nodes' variance ``τ²`` is profiled out
    (Eq. (5)); the objective is the DAG form of Eqs. (6)-(7), scaled by ``1/n``
    (:class:`~pyro_dag.infer.lamp.objective.LaMPObjective`). The paper's two-layer DGP with ``D`` latent dimensions
    is the chain ``x -> w -> y`` with ``output_dims={"w": D}``.

    Only the graph, the output dimensions and which nodes are observed are taken from ``model``; the kernels are
    this class's own (``kernel``, ``lengthscale``), the model's sparse-GP kernels and inducing points are unused.
    Put the inputs on comparable scales (e.g. the unit cube) with an isotropic kernel, as the paper does.

    **Initialisation** (the paper leaves it open, Sec. 3.1). ``W_v^{(0)}``, in topological order: the node's parent
    values (``P``, hidden parents at their own initial values), standardised column-wise; if ``P`` has ``d_v``
    columns, ``W_v^{(0)}`` is that (the paper's ``D = d`` chain starts at ``W = X`` after scaling, as deepgp does);
    with more columns, the first ``d_v`` principal components of the standardised ``P``, standardised; with fewer,
    its columns repeated with ``N(0, 0.1²)`` noise (so the repeated outputs do not stay identical). Length-scales
    from the median squared distance ``med`` of the node's inputs: ``ℓ² = med / 2`` (the paper's ``θ = med``);
    ARD ``ℓ_d² = D med_d / 2``. Estimated nuggets start at ``nugget_init``.

    **Missing data.** An observed node may miss cases only if it is a leaf (no children) and misses whole cases
    (all its columns at once): its likelihood then uses the cases where it is observed. Missing entries of an
    observed node with children are refused (its children need its value at every case), as are non-Gaussian
    likelihoods, latent inputs and hidden nodes without an observed descendant (their MAP is ``W = 0``).

    :param model: the :class:`~pyro_dag.DAGDGP` (its dtype and device are used: ``model.double()`` for float64).
    :param str kernel: ``"rbf"`` (the paper's Eq. (1)) or ``"matern52"`` (separable Matérn-5/2).
    :param str lengthscale: ``"isotropic"`` (one per output, the paper) or ``"ard"`` (one per input column).
    :param nugget: the observed nodes' nugget ``g`` (noise variance over ``τ²``): a float held fixed (default 1e-4,
        the paper's choice for deterministic simulators) or ``"estimate"`` (noisy data; its own Adam block).
    :param float nugget_init: the starting ``g`` when estimated (default 1e-2).
    :param float jitter: the hidden nodes' fixed jitter ``ε`` (default 1e-3). The paper fixes a "numerical"
        jitter without a value (App. A); with a tiny one (1e-6) the prior precision ``(K + εI)⁻¹`` of a smooth kernel
        is so ill-conditioned that Adam's first steps on ``W`` (about ``α_W`` on every coordinate, whatever the
        curvature) put ``O(α_W²/ε)`` into its stiff directions: on the G function (``d = 4``, 400 training cases,
        a fifth of ``K``'s eigenvalues below 1e-6) the first mini-batch epoch raises ``L_n`` by 49 at ``ε = 1e-6``,
        7.7 at 1e-4, 1.6 at 1e-3 and 0.2 at 1e-2, and the fits at 1e-6 were unstable and worse than a single GP;
        1e-3 keeps the prior well-conditioned (the repository's ``benchmarks/README.md`` has the comparison). The
        joint optimum of ``L_n`` over ``W`` and the length-scales is degenerate besides: ``-½ log|K + εI|`` rewards a
        first layer so smooth that most eigenvalues sit at ``ε`` (full-batch L-BFGS from ``W = X`` on G ``d = 4``:
        first-layer ``ℓ`` 0.56 -> 1.3-3.1, ``L_n`` -3.4 -> -10.8, test RMSE 0.33 -> 0.51), so the validation-based
        choice of the iterate (Sec. 3.1) is what makes the method work, not convergence.

    Example::

        g = nx.DiGraph([("x", "w"), ("w", "y")])
        model = DAGDGP(g, output_dims={"w": 1}).double()
        lamp = LatentMAP(model)
        history = lamp.fit({"x": X}, {"y": Y}, num_epochs=500)
        pred = lamp.predict({"x": X_test})               # {node: NodePrediction}, linked-GP moments
        mean, var = pred["y"].mean, pred["y"].variance
    """

    def __init__(self, model, *, kernel="rbf", lengthscale="isotropic", nugget=1e-4, nugget_init=1e-2, jitter=1e-3):
        if not (hasattr(model, "graph") and hasattr(model, "checked_arguments")):
            raise TypeError(f"LatentMAP takes a DAGDGP, got {type(model).__name__}")
        if kernel not in KERNELS:
            raise ValueError(f"LatentMAP: kernel must be one of {KERNELS}, got {kernel!r}")
        if lengthscale not in ("isotropic", "ard"):
            raise ValueError(f"LatentMAP: lengthscale must be 'isotropic' or 'ard', got {lengthscale!r}")
        if nugget != "estimate" and not (isinstance(nugget, (int, float)) and not isinstance(nugget, bool)
                                          and math.isfinite(nugget) and nugget > 0):
            raise ValueError(f"LatentMAP: nugget must be a positive number (held fixed) or 'estimate', got {nugget!r}")
        if not (isinstance(nugget_init, (int, float)) and nugget_init > 0):
            raise ValueError(f"LatentMAP: nugget_init must be a positive number, got {nugget_init!r}")
        if getattr(model, "latent_inputs", None):
            raise _input_error(f"LatentMAP does not support latent inputs ({list(model.latent_inputs)}): their "
                               "per-case values have a N(0, I) prior, not a GP on parents; fit this model by SVI "
                               "(pyro_dag.infer.train) or make them observed roots")
        self.model = model
        self.kernel = kernel
        self.lengthscale_kind = lengthscale
        self.nugget = nugget
        self.nugget_init = float(nugget_init)
        if not (isinstance(jitter, (int, float)) and not isinstance(jitter, bool) and math.isfinite(jitter)
                and jitter > 0):
            raise ValueError(f"LatentMAP: jitter must be a positive number, got {jitter!r}")
        self.jitter = float(jitter)
        self.history = None
        self._state = None

    # ------------------------------------------------------------------ properties
    @property
    def is_fitted(self):
        return self._state is not None

    def _require_fit(self, what):
        if self._state is None:
            raise RuntimeError(f"LatentMAP.{what}: call fit(inputs, data) first")

    @property
    def dtype(self):
        return self.model.dtype

    @property
    def device(self):
        return self.model.device

    # ------------------------------------------------------------------ checks
    def _structure(self, obs):
        """``(hidden, observed, observed_rows)`` after refusing what the method cannot fit."""
        from ...gp.likelihoods import Gaussian

        model = self.model
        observed = [w for w in model.topo_nodes if w in obs]
        hidden = [w for w in model.topo_nodes if w not in obs]
        for w in observed:
            if not isinstance(model.likelihoods[w], Gaussian):
                raise _input_error(f"LatentMAP: node {w!r} has a {type(model.likelihoods[w]).__name__} likelihood; "
                                   "latent-MAP fitting with exact GPs needs Gaussian observations. Use the default "
                                   "Gaussian likelihood, or fit this model by SVI (pyro_dag.infer.train)")
        import networkx as nx

        for w in hidden:
            if not any(d in obs for d in nx.descendants(model.graph, w)):
                raise _input_error(f"LatentMAP: hidden node {w!r} has no observed descendant, so nothing informs its "
                                   f"per-case values (their MAP is W = 0); observe a descendant of {w!r} or remove "
                                   "it from the graph")
        observed_rows = {}
        for w in observed:
            _, m = obs[w]
            if bool(m.all()):
                continue
            if model.graph.out_degree(w) > 0:
                i = int((~m.all(-1)).nonzero()[0])
                raise _input_error(f"LatentMAP: node {w!r} has children {list(model.graph.successors(w))} but is "
                                   f"missing at some cases (first at row {i}); its children need its value at every "
                                   f"case. Drop those cases, impute data[{w!r}], or fit by SVI (pyro_dag.infer.train)")
            partial = m.any(-1) & ~m.all(-1)
            if bool(partial.any()):
                i = int(partial.nonzero()[0])
                raise _input_error(f"LatentMAP: leaf {w!r} is observed at some but not all of its columns at row {i}; "
                                   "a case must be observed at all columns or none (the outputs share one GP input "
                                   "design): split the node into one node per column, or mark the whole row missing")
            observed_rows[w] = m.all(-1)
        return hidden, observed, observed_rows

    def _check_repeated_rows(self, objective, observed):
        """Refuse repeated input rows of a node whose inputs are all known (roots / observed parents): its exact-GP
        Gram matrix is then singular (up to jitter), unless it is observed with an estimated nugget, or hidden
        with a jitter of at least 1e-4 (then the jitter is a nugget, ``W = f(x) + N(0, ε)``, that keeps the prior
        well conditioned and ties the MAP values of repeated rows to within ``sqrt(2ε)``: designs on grids, such as
        the latent collider's, are fitted as they are)."""
        for v in objective.nodes:
            if any(p in objective.hidden for p in objective.inputs[v]):
                continue
            if v in observed and self.nugget == "estimate":
                continue
            if v in objective.hidden and self.jitter >= 1e-4:
                continue
            P = torch.cat([objective.fixed[p] for p in objective.inputs[v]], -1)
            if v in objective.observed_rows:
                rows = objective.observed_rows[v].nonzero().squeeze(-1)
                P = P[rows]
            else:
                rows = torch.arange(P.shape[0], device=P.device)
            _, inverse, counts = torch.unique(P, dim=0, return_inverse=True, return_counts=True)
            if bool((counts > 1).any()):
                group = int((counts > 1).nonzero()[0])
                dup = rows[(inverse == group).nonzero().squeeze(-1)][:5].tolist()
                kind = f"a hidden node with the tiny jitter {self.jitter}" if v in objective.hidden else \
                    f"observed with the fixed nugget {self.nugget}"
                raise _input_error(
                    f"LatentMAP: the inputs of node {v!r} ({list(objective.inputs[v])}) repeat at training rows {dup} "
                    f"({int((counts - 1).sum())} repeated rows in all); {v!r} is {kind}, so its exact-GP Gram matrix "
                    "is singular. Merge repeated cases (average their responses) or drop them"
                    + (", or pass LatentMAP(..., jitter=1e-3)" if v in objective.hidden
                       else ", or pass LatentMAP(..., nugget='estimate') for replicates"))

    # ------------------------------------------------------------------ initialisation
    @staticmethod
    def _standardise(P):
        sd = P.std(0, unbiased=False)
        return (P - P.mean(0)) / torch.where(sd > 0, sd, torch.ones_like(sd))

    def _init_values(self, P, d, generator):
        """``W^{(0)}`` ``[n, d]`` from the parent values ``P`` (see the class docstring)."""
        Ps = self._standardise(P)
        D = Ps.shape[1]
        if D == d:
            return Ps.clone()
        if D > d:
            _, _, Vh = torch.linalg.svd(Ps, full_matrices=False)
            return self._standardise(Ps @ Vh[:d].T)
        reps = [Ps[:, k % D] for k in range(d)]
        W = torch.stack(reps, -1)
        noise = torch.randn(W.shape, generator=generator, dtype=torch.float64).to(W)
        return W + 0.1 * noise

    def _init_lengthscale(self, P, d, generator):
        """``[d, 1]`` (isotropic) or ``[d, D]`` (ARD) from the median squared distance of ``P``'s rows."""
        n, D = P.shape
        if n > 1000:
            P = P[torch.randperm(n, generator=generator)[:1000].to(P.device)]
        iu = torch.triu_indices(P.shape[0], P.shape[0], offset=1, device=P.device)
        diff2 = (P[iu[0]] - P[iu[1]]).pow(2)  # [pairs, D]
        if diff2.shape[0] == 0:
            diff2 = torch.ones((1, D), dtype=P.dtype, device=P.device)
        if self.lengthscale_kind == "isotropic":
            med = diff2.sum(-1).median().clamp_min(1e-12)
            ls = (med / 2).sqrt().reshape(1, 1)
        else:
            med = diff2.median(0).values.clamp_min(1e-12)
            ls = (D * med / 2).sqrt().reshape(1, D)
        return ls.expand(d, ls.shape[1]).clone()

    # ------------------------------------------------------------------ fit
    def fit(self, inputs, data, *, mask=None, settings=None, batch="auto", seed=0, progress=False, **changes):
        r"""Fit the per-case values of the hidden nodes and the hyperparameters (Chang & Sung 2026, Algorithm 1).

        Each epoch updates every hidden node's rows once: full batch, or the cases partitioned into ``⌈n/m_t⌉``
        mini-batches of :func:`~pyro_dag.infer.lamp.batch_size_schedule` (Eq. (13)) with row-wise Adam
        (:class:`~pyro_dag.infer.lamp.RowwiseAdam`: each row's own moments and step count) and ``α_W`` decayed by
        ``lr_decay`` every ``lr_decay_every`` epochs; every ``hyper_every`` epochs one Adam step of the
        log-length-scales and log-nuggets on ``hyper_batch`` random cases with ``W`` fixed; every ``validate_every``
        epochs the validation score of the observed leaves (exact linked GP on ``prediction_subset`` fixed training
        cases), keeping the best iterate. ``τ²`` is profiled per batch; the fitted nodes' ``τ̂²`` is profiled on all
        training cases at the end. With ``condition_on_validation`` (the default) the fitted GPs then condition on
        all cases, the validation cases included (hidden values: the selected GPs' posterior means at all cases, see
        :attr:`fitted_rows`); the selected length-scales and nuggets are kept.

        :param dict inputs: ``{root: [n, d_r]}`` design matrices (as for :meth:`pyro_dag.DAGDGP.forward`).
        :param dict data: ``{node: [n, d_v]}`` observations, NaN = missing (see the class docstring).
        :param dict mask: optional ``{node: bool [n, d_v]}``, True = observed.
        :param LaMPSettings settings: the protocol (default :meth:`LaMPSettings.paper`: full batch for ``n <= 100``,
            mini-batch above, or as ``batch`` says).
        :param str batch: ``"auto"``, ``"full"`` or ``"minibatch"``: which of the paper's protocols is the default
            (ignored when ``settings`` is given).
        :param int seed: seed of the split, the batches and the initialisation.
        :param bool progress: print a line every ``validate_every`` epochs.
        :param changes: fields of :class:`LaMPSettings` to change, e.g. ``num_epochs=200``, ``lr={"W": 0.02}``.
        :returns: a :class:`LaMPHistory` (also kept as :attr:`history`).
        """
        t_start = time.perf_counter()
        model = self.model
        X, n, obs = model.checked_arguments(inputs, data, mask)
        if not obs:
            raise _input_error("LatentMAP.fit: data is empty; pass the observations, data={node: [n, d] tensor}")
        hidden, observed, observed_rows = self._structure(obs)
        if batch not in ("auto", "full", "minibatch"):
            raise ValueError(f"LatentMAP.fit: batch must be 'auto', 'full' or 'minibatch', got {batch!r}")
        if settings is None:
            settings = {"auto": LaMPSettings.paper(n), "full": LaMPSettings.full_batch(),
                        "minibatch": LaMPSettings.mini_batch()}[batch]
        elif not isinstance(settings, LaMPSettings):
            raise TypeError(f"LatentMAP.fit: settings must be a LaMPSettings, got {type(settings).__name__}")
        if changes:
            settings = settings.replace(**changes)
        kw = {"dtype": self.dtype, "device": self.device}
        generator = torch.Generator().manual_seed(int(seed))
        jitter = self.jitter

        # ---- split (Sec. 5.1: 90/10 full batch, 80/20 mini-batch)
        perm = torch.randperm(n, generator=generator)
        n_val = int(round(settings.validation_fraction * n)) if settings.validation_fraction > 0 else 0
        if settings.validation_fraction > 0:
            n_val = max(n_val, 1)
        n_tr = n - n_val
        if n_tr < 2:
            raise _input_error(f"LatentMAP.fit: {n} cases leave {n_tr} for training after holding out {n_val} for "
                               "validation; pass more cases or validation_fraction=0")
        train_rows = perm[n_val:].sort().values.to(self.device)
        val_rows = perm[:n_val].sort().values.to(self.device)
        if settings.minibatch and n_tr < settings.batch_min:
            warnings.warn(f"LatentMAP.fit: {n_tr} training cases are fewer than the batch schedule's floor "
                          f"m_min = {settings.batch_min}, so every epoch is one full batch (m_t = min{{n, ...}})",
                          stacklevel=2)
        fixed = {r: X[r][train_rows] for r in model.root_nodes}
        fixed.update({w: obs[w][0][train_rows] for w in observed})
        rows_obs = {w: m[train_rows] for w, m in observed_rows.items()}
        for w, m in rows_obs.items():
            if not bool(m.any()):
                raise _input_error(f"LatentMAP.fit: leaf {w!r} is observed at no training case; observe it at more "
                                   "cases or drop it from data")
        objective = LaMPObjective(nodes=model.topo_nodes, inputs={v: tuple(model.parents[v]) for v in model.topo_nodes},
                                  hidden=hidden, fixed=fixed, observed_rows=rows_obs, kernel=self.kernel,
                                  jitter=jitter)
        self._check_repeated_rows(objective, observed)

        # ---- initialisation
        all_rows = torch.arange(n_tr, device=self.device)
        W = {}
        log_ls, log_g = {}, {}
        for v in model.topo_nodes:
            P = objective.node_inputs(v, all_rows, W)
            d = model.output_dims[v]
            if v in hidden:
                W[v] = self._init_values(P, d, generator).to(**kw)
            if v in rows_obs:
                P = P[rows_obs[v]]
            log_ls[v] = self._init_lengthscale(P, d, generator).log().requires_grad_()
            if v in observed and self.nugget == "estimate":
                log_g[v] = torch.full((d,), math.log(self.nugget_init), **kw).requires_grad_()
        fixed_g = {v: torch.full((model.output_dims[v],), float(self.nugget), **kw)
                   for v in observed if self.nugget != "estimate"}

        # ---- optimisers: row-wise Adam per hidden node, one Adam with a group per hyperparameter block
        row_adams = {v: RowwiseAdam(W[v], betas=settings.betas["W"], eps=settings.eps) for v in hidden}
        groups = [("theta_hidden", [log_ls[v] for v in hidden]), ("theta_observed", [log_ls[v] for v in observed]),
                  ("nugget", list(log_g.values()))]
        hyper_optim = torch.optim.Adam([{"params": ps, "lr": settings.lr[b], "betas": settings.betas[b],
                                         "eps": settings.eps} for b, ps in groups if ps])

        def nuggets(detach):
            out = dict(fixed_g)
            out.update({v: (g.detach() if detach else g).exp() for v, g in log_g.items()})
            return out

        # ---- validation set-up
        leaves = [w for w in observed if model.graph.out_degree(w) == 0]
        sd_leaf = {}
        for w in leaves:
            y, m = obs[w][0][train_rows], obs[w][1][train_rows]
            sd = y[m].std(unbiased=False) if int(m.sum()) > 1 else torch.ones((), **kw)
            sd_leaf[w] = float(sd) if float(sd) > 0 else 1.0
        pred_rows = all_rows
        if n_val and n_tr > settings.prediction_subset:
            pred_rows = torch.randperm(n_tr, generator=generator)[:settings.prediction_subset].sort().values.to(
                self.device)
        val_inputs = {r: X[r][val_rows] for r in model.root_nodes}
        val_obs = {w: (obs[w][0][val_rows], obs[w][1][val_rows]) for w in leaves}

        self._objective, self._train_rows, self._row_adams = objective, train_rows, row_adams
        self._W, self._log_ls, self._log_g, self._fixed_g = W, log_ls, log_g, fixed_g
        self._state = True
        history = LaMPHistory(settings=settings, num_train=n_tr, num_validation=n_val)
        best = None

        def snapshot():
            return ({v: w.clone() for v, w in W.items()}, {v: p.detach().clone() for v, p in log_ls.items()},
                    {v: p.detach().clone() for v, p in log_g.items()})

        def validate(t):
            means = _linked_means(self._fitted_nodes(pred_rows), val_inputs, leaves)
            rmse = {}
            for w in leaves:
                y, m = val_obs[w]
                if not bool(m.any()):
                    continue
                err = (means[w] - y)[m]
                rmse[w] = float(err.pow(2).mean().sqrt())
            if not rmse:
                return None
            score = sum(r / sd_leaf[w] for w, r in rmse.items()) / len(rmse)
            if len(rmse) == 1 and abs(sd_leaf[next(iter(rmse))] - 1.0) < 1e-6:
                score = next(iter(rmse.values()))
            history.validation.append((t, score))
            history.validation_rmse.append((t, rmse))
            return score

        # ---- Algorithm 1
        for t in range(1, settings.num_epochs + 1):
            m_t = settings.batch_size(t, n_tr)
            history.batch_sizes.append(m_t)
            if hidden:
                lr_W = settings.lr_W(t)
                ls_fixed = {v: p.detach().exp() for v, p in log_ls.items()}
                g_fixed = nuggets(detach=True)
                order = torch.randperm(n_tr, generator=generator).to(self.device)
                epoch_loss = torch.zeros((), **kw)
                for S in torch.tensor_split(order, math.ceil(n_tr / m_t)):
                    W_S = {v: W[v][S].requires_grad_() for v in hidden}
                    loss = objective(S, W_S, ls_fixed, g_fixed)
                    grads = torch.autograd.grad(loss, [W_S[v] for v in hidden])
                    for v, gr in zip(hidden, grads):
                        row_adams[v].step(S, gr, lr_W)
                    epoch_loss = epoch_loss + loss.detach() * (S.shape[0] / n_tr)
                loss_value = float(epoch_loss)
                if not math.isfinite(loss_value):
                    raise FloatingPointError(f"LatentMAP.fit, epoch {t}: the objective is {loss_value}; lower the "
                                             "learning rates (lr={'W': ...}) or standardise the data")
                history.losses.append(loss_value)
                history.loss_epochs.append(t)
            if t % settings.hyper_every == 0:
                size = n_tr if not settings.minibatch else min(n_tr, settings.hyper_batch)
                H = all_rows if size == n_tr else torch.randperm(n_tr, generator=generator)[:size].to(self.device)
                hyper_optim.zero_grad()
                loss = objective(H, {v: W[v][H] for v in hidden}, {v: p.exp() for v, p in log_ls.items()},
                                 nuggets(detach=False))
                loss.backward()
                hyper_loss = float(loss.detach())
                if not math.isfinite(hyper_loss):
                    raise FloatingPointError(f"LatentMAP.fit, epoch {t}: the hyperparameter objective is "
                                             f"{hyper_loss}; lower the learning rates or standardise the data")
                hyper_optim.step()
                if not hidden:
                    history.losses.append(hyper_loss)
                    history.loss_epochs.append(t)
            if n_val and (t % settings.validate_every == 0 or t == settings.num_epochs):
                score = validate(t)
                if score is not None and (history.best_validation is None or score < history.best_validation):
                    history.best_validation, history.best_epoch, best = score, t, snapshot()
                if progress:
                    print(f"LaMP epoch {t}: loss {history.losses[-1] if history.losses else float('nan'):.4f}, "
                          f"validation {score}, m_t {m_t}")
        if best is not None:
            for v, w in best[0].items():
                W[v].copy_(w)
            with torch.no_grad():
                for v, p in best[1].items():
                    log_ls[v].copy_(p)
                for v, p in best[2].items():
                    log_g[v].copy_(p)
        else:
            history.best_epoch = settings.num_epochs
        self._fitted_rows = train_rows
        if n_val and settings.condition_on_validation:
            self._condition_on_all_cases(X, obs, observed_rows, n)
        self._fitted_cache = None
        self.input_dims = {r: X[r].shape[1] for r in model.root_nodes}
        history.seconds = time.perf_counter() - t_start
        self.history = history
        return history

    @torch.no_grad()
    def _condition_on_all_cases(self, X, obs, observed_rows, n):
        r"""After selection, let the fitted GPs condition on all ``n`` cases, the validation cases included.

        Every hidden node's values at all cases become its fitted GP's posterior mean there (in topological order:
        ``k(P, P_tr)(K + εI)⁻¹ Ŵ`` with ``P`` the node's inputs at all cases, hidden parents at their new values,
        observed parents at their observations); the observed nodes' GPs then condition on all their observations
        with the selected length-scales and nuggets, ``τ̂²`` profiled on all cases. Replacing the MAP values of the
        training cases by these means too (not only adding the validation cases) gives the second layer the inputs
        that linked-GP prediction feeds it at those cases: with the jitter ``ε``, ``Ŵ`` is not interpolated
        exactly by the first layer.
        """
        obj = self._objective
        fitted = self._fitted_nodes(torch.arange(self._train_rows.shape[0], device=self.device))
        fixed = {r: X[r] for r in self.model.root_nodes}
        fixed.update({w: obs[w][0] for w in obj.nodes if w not in obj.hidden})
        W = {}
        for v in obj.nodes:
            if v not in obj.hidden:
                continue
            node = fitted[v]
            P = torch.cat([W[p] if p in obj.hidden else fixed[p] for p in obj.inputs[v]], -1)
            eye = torch.eye(node.X.shape[0], dtype=node.X.dtype, device=node.X.device)
            K = kernel_matrix(node.X, node.X, node.lengthscale, self.kernel) + node.nugget.view(-1, 1, 1) * eye
            a = torch.cholesky_solve(node.y.transpose(0, 1).unsqueeze(-1), torch.linalg.cholesky(K))  # [d, n_tr, 1]
            W[v] = (kernel_matrix(P, node.X, node.lengthscale, self.kernel) @ a).squeeze(-1).transpose(0, 1)
        self._objective = LaMPObjective(nodes=obj.nodes, inputs=obj.inputs, hidden=obj.hidden, fixed=fixed,
                                        observed_rows=dict(observed_rows), kernel=obj.kernel, jitter=obj.jitter)
        for v, w in W.items():
            self._W[v] = w.contiguous()
        self._fitted_rows = torch.arange(n, device=self.device)

    # ------------------------------------------------------------------ fitted state
    @torch.no_grad()
    def _fitted_nodes(self, rows):
        obj = self._objective
        W = {v: w[rows] for v, w in self._W.items()}
        out = {}
        for v in obj.nodes:
            P = obj.node_inputs(v, rows, W)
            ls = self._log_ls[v].detach().exp()
            ls = ls.expand(ls.shape[0], P.shape[1]).clone()
            d = ls.shape[0]
            kw = {"dtype": P.dtype, "device": P.device}
            if v in obj.hidden:
                y = W[v]
                out[v] = FittedNode(name=v, inputs=tuple(obj.inputs[v]), input_dims=tuple(self._block_dims(v)), X=P,
                                    y=y.clone(), kernel=self.kernel, lengthscale=ls, variance=torch.ones(d, **kw),
                                    nugget=torch.full((d,), obj.jitter, **kw), observed=False)
                continue
            y = obj.fixed[v][rows]
            if v in obj.observed_rows:
                keep = obj.observed_rows[v][rows]
                P, y = P[keep], y[keep]
            g = self._log_g[v].detach().exp() if v in self._log_g else self._fixed_g[v]
            K = kernel_matrix(P, P, ls[:, :1] if self.lengthscale_kind == "isotropic" else ls, self.kernel)
            eye = torch.eye(P.shape[0], **kw)
            _, tau2 = profiled_log_likelihood(y, K + g.view(-1, 1, 1) * eye, v)
            out[v] = FittedNode(name=v, inputs=tuple(obj.inputs[v]), input_dims=tuple(self._block_dims(v)), X=P,
                                y=y.clone(), kernel=self.kernel, lengthscale=ls, variance=tau2, nugget=g.clone(),
                                observed=True)
        return out

    def _block_dims(self, v):
        obj = self._objective
        return [obj.fixed[p].shape[1] if p in obj.fixed else self._W[p].shape[1] for p in obj.inputs[v]]

    def fitted_nodes(self):
        """``{node: FittedNode}``: each non-root node's exact GP on all training cases, hidden nodes' outputs at
        ``Ŵ`` (variance 1, nugget = the jitter), observed nodes' at their observations with ``τ̂²`` profiled on all
        training cases (Eq. (5)) and the fitted nugget."""
        self._require_fit("fitted_nodes")
        if getattr(self, "_fitted_cache", None) is None:
            self._fitted_cache = self._fitted_nodes(torch.arange(self._fitted_rows.shape[0], device=self.device))
        return self._fitted_cache

    @property
    def train_rows(self):
        """``[n_train]`` indices (into the cases given to :meth:`fit`) of the training cases; the others validated."""
        self._require_fit("train_rows")
        return self._train_rows

    @property
    def fitted_rows(self):
        """``[n_fitted]`` indices of the cases the fitted GPs condition on: all cases when the validation cases were
        added after selection (``LaMPSettings.condition_on_validation``, the default), else :attr:`train_rows`."""
        self._require_fit("fitted_rows")
        return self._fitted_rows

    def latent_values(self):
        """``{hidden node: [n_fitted, d_v]}`` the per-case values at :attr:`fitted_rows`: the MAP values ``Ŵ``, or
        after ``condition_on_validation`` the fitted hidden GPs' posterior means at all cases."""
        self._require_fit("latent_values")
        return {v: w.clone() for v, w in self._W.items()}

    def hyperparameters(self):
        """``{node: {"lengthscale": [d_v, D_v], "variance": [d_v], "nugget": [d_v]}}`` of the fitted nodes."""
        return {v: {"lengthscale": f.lengthscale, "variance": f.variance, "nugget": f.nugget}
                for v, f in self.fitted_nodes().items()}

    def predictor(self, **kwargs):
        """A :class:`~pyro_dag.infer.lamp.LinkedGPPredictor` on :meth:`fitted_nodes` (``kwargs`` go to it, e.g.
        ``method="nystrom_local"``)."""
        return LinkedGPPredictor(self.fitted_nodes(), **kwargs)

    def _check_predict_inputs(self, inputs):
        X, n = self.model._check_inputs(inputs)
        for r, x in X.items():
            if x.shape[1] != self.input_dims[r]:
                raise _input_error(f"inputs[{r!r}] has {x.shape[1]} columns but LatentMAP was fitted with "
                                   f"{self.input_dims[r]}; pass the same columns as in training")
        return X, n

    def predict_dag(self, model, inputs, data=None, nodes=None, num_samples=200, mask=None):
        """:meth:`pyro_dag.DAGDGP.predict` with this LatentMAP as the guide (the guide's side of the prediction
        hand-off, see :mod:`pyro_dag.infer.predict`): :meth:`predict` on its own model."""
        return predict_for_model(self, model, inputs, data, nodes, num_samples, mask)

    def predict(self, inputs, nodes=None, num_samples=200, *, method="auto", seed=None, **predictor_kwargs):
        r"""Linked-GP predictions at new root inputs, in :meth:`pyro_dag.DAGDGP.predict`'s format.

        ``mean`` / ``variance``: the closed-form linked-GP moments of the latent node values (Chang & Sung 2026,
        Sec. 3.2); ``samples`` ``[S, n, d]``: ancestral draws of the linked predictive
        (:meth:`LinkedGPPredictor.sample`); ``loc`` / ``var``: the moments expanded to ``[S, n, d]`` (the
        predictive as a mixture of identical Gaussians); ``y_mean`` / ``y_variance``: with the observation noise
        ``τ̂² ĝ`` for observed nodes, ``None`` for hidden ones.

        :param dict inputs: ``{root: [n, d_r]}``. :param list nodes: nodes to return (default all non-root nodes).
        :param int num_samples: ``S`` (``0``: no samples, empty ``[0, n, d]`` tensors).
        :param str method: the predictor's method (``"auto"``: exact for ``n_train <= 1000``, else Nyström +
            local GP). :param int seed: seed of the samples.
        :returns: ``{node: NodePrediction}``.
        """
        from ...dgp import NodePrediction

        self._require_fit("predict")
        X, n = self._check_predict_inputs(inputs)
        nodes = list(self.model.topo_nodes) if nodes is None else list(nodes)
        for w in nodes:
            if w not in self.model.gp_nodes:
                raise _input_error(f"cannot predict node {w!r}: it is not a non-root node of the graph "
                                   f"(nodes: {self.model.gp_nodes})")
        predictor = self.predictor(method=method, **predictor_kwargs)
        moments = predictor.moments(X, nodes=nodes)
        S = int(num_samples)
        if S < 0:
            raise ValueError(f"num_samples must be >= 0, got {num_samples!r}")
        generator = None
        if seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(int(seed))
        draws = predictor.sample(X, S, nodes=nodes, generator=generator) if S > 0 else {}
        fitted = self.fitted_nodes()
        out = {}
        for w in nodes:
            mean, var = moments[w]
            samples = draws[w] if S > 0 else mean.new_empty((0,) + tuple(mean.shape))
            loc = mean.unsqueeze(0).expand((S,) + tuple(mean.shape))
            vv = var.unsqueeze(0).expand((S,) + tuple(var.shape))
            node = fitted[w]
            # the observation noise τ̂² ĝ on top of the latent variance (as LinkedGPPredictor's include_noise)
            y_mean, y_var = (mean, var + node.variance * node.nugget) if node.observed else (None, None)
            out[w] = NodePrediction(samples, mean, var, loc, vv, y_mean, y_var)
        return out


@torch.no_grad()
def _linked_means(fitted, inputs, leaves):
    """Exact linked-GP predictive means ``{leaf: [m, d]}`` of nodes without children (Chang & Sung 2026, Sec. 3.2:
    ``E[f*] = k̄ (K + gI)⁻¹ y``), with the parents' moments from :class:`LinkedGPPredictor`; the leaves' variances,
    whose ``H`` terms dominate the cost, are not needed for a validation RMSE."""
    from .expectations import expected_kernel

    parents = sorted({p for w in leaves for p in fitted[w].inputs if p in fitted})
    moments = LinkedGPPredictor(fitted, method="exact").moments(inputs, nodes=parents) if parents else {}
    out = {}
    for w in leaves:
        node = fitted[w]
        mean_in = torch.cat([moments[p][0] if p in fitted else inputs[p] for p in node.inputs], -1)
        var_in = torch.cat([moments[p][1] if p in fitted else torch.zeros_like(inputs[p]) for p in node.inputs], -1)
        eye = torch.eye(node.X.shape[0], dtype=node.X.dtype, device=node.X.device)
        cols = []
        for j in range(node.output_dim):
            K = kernel_matrix(node.X, node.X, node.lengthscale[j:j + 1], node.kernel)[0] + node.nugget[j] * eye
            a = torch.cholesky_solve(node.y[:, j:j + 1], torch.linalg.cholesky(K))
            cols.append(expected_kernel(node.kernel, node.X, node.lengthscale[j], mean_in, var_in) @ a)
        out[w] = torch.cat(cols, -1)
    return out


def predict_for_model(lamp, model, inputs, data=None, nodes=None, num_samples=200, mask=None):
    """:meth:`pyro_dag.DAGDGP.predict` with a :class:`LatentMAP` as the guide: :meth:`LatentMAP.predict`."""
    if lamp.model is not model:
        raise _input_error("predict: this LatentMAP was built on another DAGDGP; call predict on its own model "
                           "(lamp.model.predict(lamp, ...)) or lamp.predict(...)")
    if data is not None or mask is not None:
        raise _input_error("predict: with a LatentMAP, predictions propagate from the roots; drop data and mask")
    return lamp.predict(inputs, nodes=nodes, num_samples=num_samples)


def train_lamp(model, lamp, inputs, data=None, *, num_steps, optim_args=None, model_kwargs=None):
    """:func:`pyro_dag.infer.train` with ``recipe="lamp"``: :meth:`LatentMAP.fit` for ``num_steps`` epochs (other
    settings from ``optim_args``, a dict of :class:`LaMPSettings` fields), its history as a
    :class:`~pyro_dag.infer.TrainResult` (``losses`` per epoch, ``validation`` ``(epoch, score)``, ``best_step``)."""
    import dataclasses

    from ..training import TrainResult

    if not isinstance(lamp, LatentMAP):
        raise TypeError(f"train(recipe='lamp') takes a LatentMAP as the guide, got {type(lamp).__name__}; build it "
                        "with pyro_dag.infer.LatentMAP(model)")
    if lamp.model is not model:
        raise ValueError("train(recipe='lamp'): the LatentMAP was built on another model; pass its own model")
    if optim_args is not None and not isinstance(optim_args, dict):
        raise ValueError("train(recipe='lamp'): optim_args must be a dict of LaMPSettings fields, e.g. "
                         "{'lr': {'W': 0.05}, 'validation_fraction': 0.2}")
    kwargs = dict(model_kwargs or {})
    unknown = sorted(set(kwargs) - {"mask"})
    if unknown:
        raise ValueError(f"train(recipe='lamp'): model_kwargs {unknown} are not LaMP arguments (only 'mask')")
    history = lamp.fit(inputs, data, mask=kwargs.get("mask"), num_epochs=num_steps, **dict(optim_args or {}))
    settings = {"recipe": "lamp", **dataclasses.asdict(history.settings)}
    return TrainResult(losses=list(history.losses), validation=list(history.validation),
                       best_step=history.best_epoch, best_validation_loss=history.best_validation,
                       settings=settings, seconds=history.seconds)
