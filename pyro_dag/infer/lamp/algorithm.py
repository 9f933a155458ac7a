r"""The fitting algorithm of :class:`~pyro_dag.infer.LatentMAP` as an object: :class:`LaMPFit` (Chang & Sung 2026,
"Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation", Algorithm 1): the per-case values
``W`` of the hidden nodes and the kernel hyperparameters by Adam per parameter block on the profiled objective, full
batch or mini-batch with row-wise Adam and the growing batch schedule (Sec. 4), keeping the iterate with the lowest
validation RMSE; and :class:`LaMPHistory`, what a fit returns (a :class:`~pyro_dag.infer.training.TrainResult`).
"""
import math
import time
import warnings
from dataclasses import dataclass, field

import torch

from ...dgp import DAGInputError
from ..training import TrainResult
from .linked import LinkedGPPredictor
from .objective import LaMPObjective, kernel_matrix
from .row_adam import RowwiseAdam
from .schedule import LaMPSettings

__all__ = ["LaMPFit", "LaMPHistory"]


@dataclass
class LaMPHistory(TrainResult):
    """What :meth:`LatentMAP.fit <pyro_dag.infer.LatentMAP.fit>` returns: a
    :class:`~pyro_dag.infer.training.TrainResult` whose steps are epochs, with the fit's own records.

    :ivar list losses: the objective ``L_S`` of every epoch (the mean over its mini-batches, each evaluated before
        its own update; ``L_n`` in full batch). A DAG without hidden nodes has no per-case values to update: its
        losses are those of the hyperparameter steps.
    :ivar list loss_epochs: the epoch of each loss.
    :ivar list batch_sizes: ``m_t`` of every epoch.
    :ivar list validation: ``(epoch, score)``: the validation score (the mean over the observed leaves of their
        RMSE divided by their training standard deviation; the plain RMSE for one standardised leaf).
    :ivar list validation_rmse: ``(epoch, {leaf: RMSE})``.
    :ivar int best_epoch: the epoch of the kept iterate (the lowest score; the last epoch without validation);
        the same as :attr:`best_step`.
    :ivar float best_validation: its score (``None`` without validation); the same as
        :attr:`best_validation_loss`.
    :ivar LaMPSettings settings: the settings used.
    :ivar int num_train: training cases. :ivar int num_validation: validation cases.
    :ivar float seconds: wall-clock seconds of the fit.
    """

    loss_epochs: list = field(default_factory=list)
    batch_sizes: list = field(default_factory=list)
    validation_rmse: list = field(default_factory=list)
    settings: LaMPSettings = None
    num_train: int = 0
    num_validation: int = 0

    @property
    def best_epoch(self):
        return self.best_step

    @best_epoch.setter
    def best_epoch(self, epoch):
        self.best_step = epoch

    @property
    def best_validation(self):
        return self.best_validation_loss

    @best_validation.setter
    def best_validation(self, score):
        self.best_validation_loss = score


def _input_error(message):
    return DAGInputError(message)


class LaMPFit:
    """One fit of a :class:`~pyro_dag.infer.LatentMAP` (Chang & Sung 2026, Algorithm 1); :meth:`LatentMAP.fit
    <pyro_dag.infer.LatentMAP.fit>` builds one and runs it, which sets the LatentMAP's fitted state and
    :attr:`~pyro_dag.infer.LatentMAP.history`.

    :param lamp: the :class:`~pyro_dag.infer.LatentMAP` to fit.
    """

    def __init__(self, lamp):
        self.lamp = lamp

    def run(self, inputs, data, *, mask=None, settings=None, batch="auto", seed=0, progress=False, **changes):
        """The fit (arguments as :meth:`LatentMAP.fit <pyro_dag.infer.LatentMAP.fit>`); returns a
        :class:`LaMPHistory`."""
        t_start = time.perf_counter()
        lamp = self.lamp
        model = lamp.model
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
        kw = {"dtype": lamp.dtype, "device": lamp.device}
        generator = torch.Generator().manual_seed(int(seed))
        jitter = lamp.jitter

        # ---- split (Sec. 5.1: 90/10 full batch, 80/20 mini-batch)
        perm = torch.randperm(n, generator=generator)
        n_val = int(round(settings.validation_fraction * n)) if settings.validation_fraction > 0 else 0
        if settings.validation_fraction > 0:
            n_val = max(n_val, 1)
        n_tr = n - n_val
        if n_tr < 2:
            raise _input_error(f"LatentMAP.fit: {n} cases leave {n_tr} for training after holding out {n_val} for "
                               "validation; pass more cases or validation_fraction=0")
        train_rows = perm[n_val:].sort().values.to(lamp.device)
        val_rows = perm[:n_val].sort().values.to(lamp.device)
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
                                  hidden=hidden, fixed=fixed, observed_rows=rows_obs, kernel=lamp.kernel,
                                  jitter=jitter)
        self._check_repeated_rows(objective, observed)

        # ---- initialisation
        all_rows = torch.arange(n_tr, device=lamp.device)
        W = {}
        log_ls, log_g = {}, {}
        for v in model.topo_nodes:
            P = objective.node_inputs(v, all_rows, W)
            d = model.output_dims[v]
            if v in hidden:
                W[v] = self._init_values(P, d, generator).to(**kw)
                exact_ls = None
                if lamp.init == "exact" and P.shape[1] > d:
                    start = self._exact_start(v, P, obs, train_rows, seed)
                    if start is not None:
                        W[v][:, 0] = start[0].to(**kw)
                        exact_ls = start[1]
            if v in rows_obs:
                P = P[rows_obs[v]]
            ls = self._init_lengthscale(P, d, generator)
            if v in hidden and exact_ls is not None and lamp.lengthscale_kind == "ard":
                ls[0] = exact_ls.to(ls)   # the first column reproduces the pilot's fit with the pilot's length-scales
            log_ls[v] = ls.log().requires_grad_()
            if v in observed and lamp.nugget == "estimate":
                log_g[v] = torch.full((d,), math.log(lamp.nugget_init), **kw).requires_grad_()
        fixed_g = {v: torch.full((model.output_dims[v],), float(lamp.nugget), **kw)
                   for v in observed if lamp.nugget != "estimate"}

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
                lamp.device)
        val_inputs = {r: X[r][val_rows] for r in model.root_nodes}
        val_obs = {w: (obs[w][0][val_rows], obs[w][1][val_rows]) for w in leaves}

        lamp._objective, lamp._train_rows, lamp._row_adams = objective, train_rows, row_adams
        lamp._W, lamp._log_ls, lamp._log_g, lamp._fixed_g = W, log_ls, log_g, fixed_g
        lamp._state = "fitting"   # the LatentMAP's state is this fit's from here on, complete when it ends
        history = LaMPHistory(settings=settings, num_train=n_tr, num_validation=n_val)
        best = None

        def snapshot():
            return ({v: w.clone() for v, w in W.items()}, {v: p.detach().clone() for v, p in log_ls.items()},
                    {v: p.detach().clone() for v, p in log_g.items()})

        def validate(t):
            means = _linked_means(lamp._fitted_nodes(pred_rows), val_inputs, leaves)
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
                order = torch.randperm(n_tr, generator=generator).to(lamp.device)
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
                H = all_rows if size == n_tr else torch.randperm(n_tr, generator=generator)[:size].to(lamp.device)
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
        lamp._fitted_rows = train_rows
        if n_val and settings.condition_on_validation:
            self._condition_on_all_cases(X, obs, observed_rows, n)
        lamp._fitted_cache = None
        lamp.input_dims = {r: X[r].shape[1] for r in model.root_nodes}
        history.seconds = time.perf_counter() - t_start
        lamp.history = history
        lamp._state = True
        return history

    def _structure(self, obs):
        """``(hidden, observed, observed_rows)`` after refusing what the method cannot fit."""
        lamp = self.lamp
        from ...gp.likelihoods import Gaussian

        model = lamp.model
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
        lamp = self.lamp
        for v in objective.nodes:
            if any(p in objective.hidden for p in objective.inputs[v]):
                continue
            if v in observed and lamp.nugget == "estimate":
                continue
            if v in objective.hidden and lamp.jitter >= 1e-4:
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
                kind = f"a hidden node with the tiny jitter {lamp.jitter}" if v in objective.hidden else \
                    f"observed with the fixed nugget {lamp.nugget}"
                raise _input_error(
                    f"LatentMAP: the inputs of node {v!r} ({list(objective.inputs[v])}) repeat at training rows {dup} "
                    f"({int((counts - 1).sum())} repeated rows in all); {v!r} is {kind}, so its exact-GP Gram matrix "
                    "is singular. Merge repeated cases (average their responses) or drop them"
                    + (", or pass LatentMAP(..., jitter=1e-3)" if v in objective.hidden
                       else ", or pass LatentMAP(..., nugget='estimate') for replicates"))

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

    def _exact_start(self, v, P, obs, train_rows, seed):
        """``(start [n_tr], lengthscales [D])``: the standardised exact-GP fit of ``v``'s nearest observed descendants
        on its inputs ``P`` ``[n_tr, D]`` (at the training rows), averaged over their columns, and the pilots' ARD
        length-scales (geometric mean); ``None`` when no pilot finds a signal (the class docstring,
        *Initialisation*)."""
        from ...baselines import ExactGP
        from ..training.hidden_start import _nearest_observed

        graph = self.lamp.model.graph
        design = P.detach().double().cpu()
        means, scales = [], []
        for c in _nearest_observed(graph, v, set(obs)):
            y, m = obs[c][0][train_rows].detach().double().cpu(), obs[c][1][train_rows].cpu()
            for j in range(y.shape[1]):
                keep = m[:, j]
                if int(keep.sum()) < 5 or not float(y[keep, j].var()) > 0:
                    continue
                pilot = ExactGP(restarts=2, max_exact=300, seed=int(seed)).fit(design[keep], y[keep, j])
                if pilot.noise_fraction > 0.9:
                    continue
                means.append(self._standardise(pilot.predict(design)[0].unsqueeze(-1))[:, 0])
                scales.append(pilot.lengthscales.log())
        if not means:
            return None
        start = self._standardise(torch.stack(means, -1).mean(-1, keepdim=True))[:, 0]
        return start, torch.stack(scales).mean(0).exp()

    def _init_lengthscale(self, P, d, generator):
        """``[d, 1]`` (isotropic) or ``[d, D]`` (ARD) from the median squared distance of ``P``'s rows."""
        lamp = self.lamp
        n, D = P.shape
        if n > 1000:
            P = P[torch.randperm(n, generator=generator)[:1000].to(P.device)]
        iu = torch.triu_indices(P.shape[0], P.shape[0], offset=1, device=P.device)
        diff2 = (P[iu[0]] - P[iu[1]]).pow(2)  # [pairs, D]
        if diff2.shape[0] == 0:
            diff2 = torch.ones((1, D), dtype=P.dtype, device=P.device)
        if lamp.lengthscale_kind == "isotropic":
            med = diff2.sum(-1).median().clamp_min(1e-12)
            ls = (med / 2).sqrt().reshape(1, 1)
        else:
            med = diff2.median(0).values.clamp_min(1e-12)
            ls = (D * med / 2).sqrt().reshape(1, D)
        return ls.expand(d, ls.shape[1]).clone()

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
        lamp = self.lamp
        obj = lamp._objective
        fitted = lamp._fitted_nodes(torch.arange(lamp._train_rows.shape[0], device=lamp.device))
        fixed = {r: X[r] for r in lamp.model.root_nodes}
        fixed.update({w: obs[w][0] for w in obj.nodes if w not in obj.hidden})
        W = {}
        for v in obj.nodes:
            if v not in obj.hidden:
                continue
            node = fitted[v]
            P = torch.cat([W[p] if p in obj.hidden else fixed[p] for p in obj.inputs[v]], -1)
            eye = torch.eye(node.X.shape[0], dtype=node.X.dtype, device=node.X.device)
            K = kernel_matrix(node.X, node.X, node.lengthscale, lamp.kernel) + node.nugget.view(-1, 1, 1) * eye
            a = torch.cholesky_solve(node.y.transpose(0, 1).unsqueeze(-1), torch.linalg.cholesky(K))  # [d, n_tr, 1]
            W[v] = (kernel_matrix(P, node.X, node.lengthscale, lamp.kernel) @ a).squeeze(-1).transpose(0, 1)
        lamp._objective = LaMPObjective(nodes=obj.nodes, inputs=obj.inputs, hidden=obj.hidden, fixed=fixed,
                                        observed_rows=dict(observed_rows), kernel=obj.kernel, jitter=obj.jitter)
        for v, w in W.items():
            lamp._W[v] = w.contiguous()
        lamp._fitted_rows = torch.arange(n, device=lamp.device)


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
