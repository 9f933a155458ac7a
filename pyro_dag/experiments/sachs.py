"""The Sachs protein-signalling regression study of the DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas
2026, *Deep Gaussian Processes on Directed Acyclic Graphs*, arXiv:2607.09645, Sec. 6, App. G.4, Tables 1 and 3).

**Data.** The cd3cd28icam2 condition of Sachs et al. (2005) (902 cases x 11 proteins,
:func:`pyro_dag.datasets.sachs`), log-transformed, then standardised per column with the *training* cases' mean
and standard deviation (the paper standardises without saying with which statistics; training statistics keep
the test cases out of the preprocessing). All metrics are in these standardised log units.

**Model.** The bnlearn 17-arc network (:func:`pyro_dag.datasets.sachs_graph`, ``graph="bnlearn"``) with the roots
PKC and Plcg as observed inputs and a 2-D latent confounder, one dimension into PKA (``h1 -> PKA``) and one into
Raf (``h2 -> Raf``): ``DAGDGP(graph, latent_inputs={"h1": 1, "h2": 1})`` (the prior factorises, so two 1-D
latent inputs are the paper's 2-D layer). Every GP node: 32 inducing points, an ARD RBF kernel on its
concatenated parents with length-scales initialised to 0.1, a Gaussian likelihood with noise variance initialised
to 0.01.

**Tasks.** ``"interpolation"``: a random 80/20 split of the cases (seeded). ``"extrapolation"`` (the projection
protocol of Lindinger et al. 2020, as adapted by the paper): standardise (PKC, Plcg) over all 902 cases, project
on a random unit direction ``w`` (seeded), train on the central 80 % of the projections and test on both 10 %
tails.

**Test predictions.** Propagation from the roots through the DAG (:meth:`pyro_dag.DAGDGP.predict`): the test
cases' PKC and Plcg are the inputs; their observed PKA and Raf are used *only* to infer the latent ``h1, h2`` of
each test case (:meth:`pyro_dag.DAGDGP.infer_latent_inputs`, the model and ``q(U)`` frozen); every node's
prediction, PKA's and Raf's included, is the model's propagated predictive (samples of the parents, not their
observed values, feed the children). The predictive of a noisy test observation is the equally weighted mixture
over ``S`` draws of ``N(loc_s, var_s + τ_w²)``.

**Metrics** per node, then averaged over nodes (:func:`~pyro_dag.metrics.node_metrics`): RMSE of the predictive
mean, CRPS (from noisy predictive samples), NLPD (the mixture), PICP of the central 95 % interval (noisy sample
quantiles).
Metrics are in standardised log units; ``"all_log_units"`` / ``"unseen_log_units"`` convert
them to log units (:func:`to_log_units`; the paper does not say in which of the two it reports). Two averages:
``"all"`` over the 9 GP nodes (PKA, Raf, Mek, Erk, Akt, P38, Jnk, PIP3, PIP2; the paper's
"averaged over all nodes") and ``"unseen"`` over the 7 nodes whose test values the predictions never see (PKA
and Raf left out, since their test values inform ``h``).

**Methods** (:data:`METHODS`): ``"dag_svi"`` (chordal structured guide, :class:`~pyro_dag.infer.autoguide.
AutoStructuredGuide`), ``"dag_vi"`` (mean field), and two baselines a user would otherwise pick, each without the
latent confounder: ``"gp_sem"``, one independent sparse GP per node on its observed parents (same kernel, noise and
inducing settings, fitted alone), and ``"linear_sem"``, a linear-Gaussian SEM (least squares per node). The
baselines are evaluated in two modes: ``"propagated"`` (samples pushed from the roots through the DAG, as the
DAG-DGP) and ``"observed_parents"`` (each node predicted from its parents' observed test values, a one-step
predictor that sees more of the test case than the DAG-DGP does).

**Recipes** (:data:`RECIPES`): ``"paper"``: Adam with lr 1e-3, 1000 node-wise pretraining steps (interpolation
only; the paper's extrapolation runs have none) and 10 000 joint steps, inducing inputs and noise held fixed for
the first 40 % of the joint steps. ``"recommended"``: :func:`pyro_dag.infer.train`'s recommended recipe (Adam with
lr 0.01, antithetic samples, natural-gradient steps on the structured posterior after 1000 steps), 300 node-wise
pretraining steps and the same 40 % freeze, 2000 joint steps.
"""
import math
import time

import networkx as nx
import numpy as np
import pyro
import torch

from ..datasets.sachs import SACHS_NODES, sachs, sachs_graph
from ..metrics.regression import node_metrics
from ..plot import save_held_out_figure

__all__ = ["SachsSplit", "sachs_split", "sachs_dag", "sachs_model", "fit_sachs", "save_sachs_outputs", "node_metrics",
           "average_metrics", "to_log_units",
           "METHODS", "RECIPES", "GP_NODES", "UNSEEN_NODES", "ROOTS", "LATENT_CHILDREN", "PAPER"]

#: The observed inputs (roots) of the study.
ROOTS = ("PKC", "Plcg")
#: Latent input -> the node it feeds.
LATENT_CHILDREN = {"h1": "PKA", "h2": "Raf"}
#: The GP nodes (all observed), in the paper's network order.
GP_NODES = ("PKA", "Raf", "Mek", "Erk", "Akt", "P38", "Jnk", "PIP3", "PIP2")
#: GP nodes whose test values are never used by the DAG-DGP predictions (PKA and Raf inform the latent).
UNSEEN_NODES = tuple(w for w in GP_NODES if w not in LATENT_CHILDREN.values())
METHODS = ("dag_svi", "dag_vi", "gp_sem", "linear_sem")
RECIPES = {
    "paper": {"recipe": "adam", "lr": 1e-3, "pretrain_steps": {"interpolation": 1000, "extrapolation": 0},
              "num_steps": 10000, "freeze_fraction": 0.4},
    "recommended": {"recipe": "recommended", "lr": 0.01, "pretrain_steps": {"interpolation": 300, "extrapolation": 300},
                    "num_steps": 2000, "freeze_fraction": 0.4},
}
#: The paper's numbers (node averages, log space; Table 1, and Table 3's mean ± std over 5 projection splits).
PAPER = {
    "interpolation": {"dag_vi": {"rmse": 0.646, "crps": 0.355}, "dag_svi": {"rmse": 0.642, "crps": 0.359}},
    "extrapolation": {"dag_vi": {"rmse": 0.7371, "crps": 0.3252, "nlpd": 0.9104, "picp": 0.7980},
                      "dag_svi": {"rmse": 0.6423, "crps": 0.2995, "nlpd": 0.8274, "picp": 0.8395}},
}
TASKS = ("interpolation", "extrapolation")


class SachsSplit:
    """One train/test split of the study, standardised log values as ``{node: [n, 1]}`` tensors.

    :ivar dict train_inputs: ``{"PKC": [n_train, 1], "Plcg": [n_train, 1]}``. :ivar dict train_data: the 9 GP nodes.
    :ivar dict test_inputs: / :ivar dict test_data: the same for the test cases.
    :ivar torch.Tensor train_index: / :ivar torch.Tensor test_index: row indices into the 902 cases.
    :ivar dict mean: / :ivar dict std: per-node statistics of the log values on the training cases.
    :ivar str task: ``"interpolation"`` or ``"extrapolation"``. :ivar int seed: the split's seed.
    :ivar direction: the projection direction ``w`` (extrapolation), else ``None``.
    """

    def __init__(self, task, seed, values, train_index, test_index, direction=None):
        self.task, self.seed, self.direction = task, seed, direction
        self.train_index, self.test_index = train_index, test_index
        train = values[train_index]
        mean, std = train.mean(0), train.std(0)
        z = (values - mean) / std
        col = {w: i for i, w in enumerate(SACHS_NODES)}
        self.mean = {w: float(mean[col[w]]) for w in SACHS_NODES}
        self.std = {w: float(std[col[w]]) for w in SACHS_NODES}

        def pick(names, idx):
            return {w: z[idx, col[w]].unsqueeze(-1).clone() for w in names}

        self.train_inputs, self.train_data = pick(ROOTS, train_index), pick(GP_NODES, train_index)
        self.test_inputs, self.test_data = pick(ROOTS, test_index), pick(GP_NODES, test_index)


def sachs_split(task, seed=0, test_fraction=0.2, dtype=torch.float64):
    """The train/test split of ``task`` for ``seed`` (see the module docstring).

    :param str task: ``"interpolation"`` (random split) or ``"extrapolation"`` (central 80 % / both 10 % tails of
        a random projection of the standardised (PKC, Plcg)).
    :param int seed: seed of the permutation or of the projection direction.
    :param float test_fraction: the test share (0.2: 80/20, tails of 10 % each).
    :returns: :class:`SachsSplit` (``n_train = 722``, ``n_test = 180`` for the default fraction).
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    if not 0 < test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    values = sachs(subset="cd3cd28icam2", log=True, dtype=dtype).data
    n = values.shape[0]
    gen = torch.Generator().manual_seed(int(seed))
    n_test = int(round(test_fraction * n))
    direction = None
    if task == "interpolation":
        perm = torch.randperm(n, generator=gen)
        test, train = perm[:n_test].sort().values, perm[n_test:].sort().values
    else:
        col = [SACHS_NODES.index(r) for r in ROOTS]
        x = values[:, col]
        x = (x - x.mean(0)) / x.std(0)
        w = torch.randn(2, generator=gen, dtype=values.dtype)
        direction = w / w.norm()
        order = torch.argsort(x @ direction)
        lower, upper = n_test // 2, n_test - n_test // 2
        test = torch.cat([order[:lower], order[n - upper:]]).sort().values
        train = order[lower:n - upper].sort().values
    return SachsSplit(task, int(seed), values, train, test, direction)


def sachs_dag(latent=True):
    """The bnlearn Sachs network as a ``networkx.DiGraph`` (parents in bnlearn's order), with ``h1 -> PKA`` and
    ``h2 -> Raf`` added first when ``latent``."""
    a = sachs_graph("bnlearn")
    g = nx.DiGraph()
    g.add_nodes_from(SACHS_NODES)
    if latent:
        g.add_edges_from((h, w) for h, w in LATENT_CHILDREN.items())
    for i, j in a.nonzero().tolist():
        g.add_edge(SACHS_NODES[i], SACHS_NODES[j])
    return g


def _kernels(graph, nodes, lengthscale):
    from ..kernels import RBF

    out = {}
    for w in nodes:
        d = graph.in_degree(w)
        out[w] = RBF(lengthscale=torch.full((d,), float(lengthscale)), ard=True)
    return out


def sachs_model(latent=True, num_inducing=32, lengthscale=0.1, noise=0.01, seed=0, graph=None):
    """The paper's DAG-DGP for Sachs: ARD RBF on the concatenated parents (length-scales ``lengthscale``),
    ``num_inducing`` inducing points and a Gaussian likelihood (noise variance ``noise``) per GP node, float64.

    :param bool latent: with the latent confounder ``h1 -> PKA``, ``h2 -> Raf`` (``latent_inputs={"h1": 1,
        "h2": 1}``). :param graph: another DAG over (a subset of) the nodes (default :func:`sachs_dag`).
    :returns: a :class:`~pyro_dag.DAGDGP`.
    """
    from .. import DAGDGP
    from ..gp.likelihoods import Gaussian

    g = sachs_dag(latent) if graph is None else graph
    gp_nodes = [w for w in g if g.in_degree(w) > 0]
    lat = {h: 1 for h in LATENT_CHILDREN if h in g} if latent else None
    model = DAGDGP(g, kernels=_kernels(g, gp_nodes, lengthscale), num_inducing=num_inducing,
                   likelihoods={w: Gaussian(variance=noise) for w in gp_nodes}, seed=seed, latent_inputs=lat or None)
    return model.double()


# ---------------------------------------------------------------------------------------------------- metrics
def average_metrics(per_node, nodes):
    """``{metric: mean over nodes}`` of ``per_node = {node: {metric: value}}``."""
    keys = next(iter(per_node.values())).keys()
    return {k: float(np.mean([per_node[w][k] for w in nodes])) for k in keys}


def to_log_units(per_node, std):
    """Per-node metrics in log units (before standardisation) from metrics in standardised units: RMSE and CRPS
    scale by the node's training standard deviation ``std[w]``, NLPD shifts by ``log std[w]``, PICP is unchanged.

    :param dict per_node: ``{node: {"rmse", "crps", "nlpd", "picp"}}``. :param dict std: ``{node: float}``.
    """
    out = {}
    for w, m in per_node.items():
        out[w] = {"rmse": m["rmse"] * std[w], "crps": m["crps"] * std[w], "nlpd": m["nlpd"] + math.log(std[w]),
                  "picp": m["picp"]}
    return out


def _summary(per_node, std=None):
    out = {"per_node": per_node, "all": average_metrics(per_node, GP_NODES),
           "unseen": average_metrics(per_node, UNSEEN_NODES)}
    if std is not None:
        log = to_log_units(per_node, std)
        out["all_log_units"] = average_metrics(log, GP_NODES)
        out["unseen_log_units"] = average_metrics(log, UNSEEN_NODES)
    return out


# ---------------------------------------------------------------------------------------------------- DAG-DGP
def _fit_dagdgp(split, structure, recipe, num_steps, pretrain_steps, num_particles, progress, num_samples,
                latent_steps, seed, callbacks=(), lr=None, checkpoint=None, checkpoint_every=100):
    from ..infer import train
    from ..infer.autoguide import AutoStructuredGuide
    from ..infer.training import initial_scales

    r = RECIPES[recipe]
    steps = r["num_steps"] if num_steps is None else num_steps
    pre = r["pretrain_steps"][split.task] if pretrain_steps is None else pretrain_steps
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    model = sachs_model(latent=True, seed=seed)
    model.setup(split.train_inputs, split.train_data)
    guide = AutoStructuredGuide(model, precision=structure,
                                init_scale=initial_scales(model, split.train_inputs, split.train_data))
    t0, c0 = time.perf_counter(), time.process_time()
    result = train(model, guide, split.train_inputs, split.train_data, num_steps=steps, recipe=r["recipe"],
                   lr=r["lr"] if lr is None else lr, pretrain_steps=pre, checkpoint=checkpoint,
                   checkpoint_every=checkpoint_every, resume=checkpoint is not None,
                   freeze_fraction=r["freeze_fraction"], num_particles=num_particles,
                   progress=progress, callbacks=callbacks, name=f"sachs {structure}")
    t_train, c_train = time.perf_counter() - t0, time.process_time() - c0
    t0 = time.perf_counter()
    pred = model.predict(guide, split.test_inputs, {w: split.test_data[w] for w in LATENT_CHILDREN.values()},
                         num_samples=num_samples, latent_steps=latent_steps)
    t_pred = time.perf_counter() - t0
    per_node = {}
    for w in GP_NODES:
        tau2 = model.likelihoods[w].variance.detach()
        per_node[w] = node_metrics(pred[w].loc[..., 0], pred[w].var[..., 0], tau2, split.test_data[w][:, 0])
    out = _summary(per_node, split.std)
    out.update(seconds_train=t_train, cpu_seconds_train=c_train, seconds_predict=t_pred, num_steps=steps,
               pretrain_steps=pre,
               final_loss=result.final_loss, settings=result.settings,
               natural_gradient_stopped=result.natural_gradient_stopped,
               noise={w: float(model.likelihoods[w].variance.detach().mean()) for w in GP_NODES},
               prediction=pred)
    out["model"], out["guide"] = model, guide
    return out


# ---------------------------------------------------------------------------------------------------- baselines
def _parent_lists(latent=False):
    g = sachs_dag(latent=False)
    return g, {w: list(g.predecessors(w)) for w in GP_NODES}


class _NodeGP:
    """One sparse GP ``w | observed parents``, fitted alone (the GP-SEM baseline)."""

    def __init__(self, w, parents, split, steps, lr, num_particles, seed, progress):
        from .. import DAGDGP
        from ..gp.likelihoods import Gaussian
        from ..infer import train
        from ..infer.autoguide import AutoStructuredGuide
        from ..infer.training import initial_scales
        from ..kernels import RBF

        self.w, self.parents = w, parents
        g = nx.DiGraph([(p, w) for p in parents])
        inputs = {p: (split.train_inputs.get(p) if p in split.train_inputs else split.train_data[p]) for p in parents}
        data = {w: split.train_data[w]}
        self.name = f"GPSEM_{w}"
        model = DAGDGP(g, kernels={w: RBF(lengthscale=torch.full((len(parents),), 0.1), ard=True)}, num_inducing=32,
                       likelihoods={w: Gaussian(variance=0.01)}, seed=seed).double()
        model.setup(inputs, data)
        guide = AutoStructuredGuide(model, init_scale=initial_scales(model, inputs, data), name=self.name)
        train(model, guide, inputs, data, num_steps=steps, recipe="recommended", lr=lr, num_particles=num_particles,
              progress=progress, name=f"gp-sem {w}")
        self.model, self.guide = model, guide
        self.noise = float(model.likelihoods[w].variance.detach().mean())

    def predict(self, parent_values):
        """``parent_values = {p: [S, n]}`` -> ``(loc, var)`` ``[S, n]`` (one draw per parent sample)."""
        S, n = next(iter(parent_values.values())).shape
        X = {p: v.reshape(S * n, 1) for p, v in parent_values.items()}
        pred = self.model.predict(self.guide, X, num_samples=1)[self.w]
        return pred.loc[0, :, 0].reshape(S, n), pred.var[0, :, 0].reshape(S, n)


class _NodeLinear:
    """Least squares ``w = a + b·parents + N(0, σ²)`` (the linear-Gaussian SEM baseline)."""

    def __init__(self, w, parents, split):
        self.w, self.parents = w, parents
        X = torch.cat([split.train_inputs[p] if p in split.train_inputs else split.train_data[p] for p in parents], -1)
        X = torch.cat([torch.ones(X.shape[0], 1, dtype=X.dtype), X], -1)
        y = split.train_data[w]
        self.beta = torch.linalg.lstsq(X, y).solution[:, 0]
        resid = y[:, 0] - X @ self.beta
        self.noise = float(resid.pow(2).sum() / (X.shape[0] - X.shape[1]))

    def predict(self, parent_values):
        S, n = next(iter(parent_values.values())).shape
        loc = self.beta[0] + sum(self.beta[1 + k] * parent_values[p] for k, p in enumerate(self.parents))
        return loc.expand(S, n), torch.zeros(S, n, dtype=loc.dtype)


def _evaluate_baseline(nodes, split, num_samples, seed):
    """Per-node metrics of independent node models in both modes (propagated / observed parents)."""
    g, parents = _parent_lists()
    order = [w for w in nx.topological_sort(g) if w in GP_NODES]
    gen = torch.Generator().manual_seed(seed)
    n = split.test_data[GP_NODES[0]].shape[0]
    values = {r: split.test_inputs[r][:, 0].expand(num_samples, n) for r in ROOTS}
    out = {"propagated": {}, "observed_parents": {}}
    for w in order:
        m = nodes[w]
        loc, var = m.predict({p: values[p] for p in m.parents})
        y = split.test_data[w][:, 0]
        out["propagated"][w] = node_metrics(loc, var, m.noise, y, seed=seed)
        values[w] = loc + (var + m.noise).sqrt() * torch.randn(loc.shape, generator=gen, dtype=loc.dtype)
        obs = {p: (split.test_inputs[p] if p in split.test_inputs else split.test_data[p])[:, 0].expand(num_samples, n)
               for p in m.parents}
        loc_o, var_o = m.predict(obs)
        out["observed_parents"][w] = node_metrics(loc_o, var_o, m.noise, y, seed=seed)
    return {mode: _summary(per, split.std) for mode, per in out.items()}


# ---------------------------------------------------------------------------------------------------- one run
def fit_sachs(task="extrapolation", seed=0, method="dag_svi", recipe="paper", num_steps=None, pretrain_steps=None,
              num_particles=None, num_samples=200, latent_steps=300, progress=False, split=None, callbacks=(),
              lr=None, checkpoint=None, checkpoint_every=100):
    """Fit one method on one split of the Sachs study and score it on the test cases (module docstring).

    :param str task: ``"interpolation"`` or ``"extrapolation"``. :param int seed: the split's seed (also the
        optimisation seed). :param str method: one of :data:`METHODS`.
    :param str recipe: ``"paper"`` or ``"recommended"`` (:data:`RECIPES`; the DAG-DGP methods; the GP-SEM baseline
        always fits each node with the recommended recipe, ``num_steps`` steps, default 2000).
    :param int num_steps: joint steps (default: the recipe's). :param int pretrain_steps: node-wise pretraining
        steps (default: the recipe's for the task). :param int num_particles: ELBO samples per step (default 4).
    :param int num_samples: predictive draws ``S``. :param int latent_steps: Adam steps of the test cases' latent
        fit. :param SachsSplit split: a prepared split (default :func:`sachs_split(task, seed)`).
    :param float lr: Adam's learning rate (default: the recipe's). :param checkpoint: a file or directory for
        :func:`pyro_dag.infer.train`'s checkpoints (resumed when it holds one; DAG-DGP methods).
    :param int checkpoint_every: steps between checkpoints.
    :returns: dict with ``"per_node"``, ``"all"`` (9-node average) and ``"unseen"`` (7-node average) for the
        DAG-DGP methods, ``{"propagated": {...}, "observed_parents": {...}}`` for the baselines; plus
        ``"seconds"`` / ``"cpu_seconds"`` (wall-clock and process CPU time of the whole run, training and
        prediction; ``"seconds_train"`` / ``"cpu_seconds_train"`` the training alone) and the settings.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if recipe not in RECIPES:
        raise ValueError(f"recipe must be one of {tuple(RECIPES)}, got {recipe!r}")
    split = sachs_split(task, seed) if split is None else split
    t0, c0 = time.perf_counter(), time.process_time()
    if method in ("dag_svi", "dag_vi"):
        out = _fit_dagdgp(split, "chordal" if method == "dag_svi" else "mean_field", recipe, num_steps, pretrain_steps,
                          num_particles, progress, num_samples, latent_steps, seed, callbacks, lr, checkpoint,
                          checkpoint_every)
    elif method == "gp_sem":
        pyro.clear_param_store()
        pyro.set_rng_seed(seed)
        _, parents = _parent_lists()
        steps = 2000 if num_steps is None else num_steps
        nodes = {w: _NodeGP(w, parents[w], split, steps, 0.01 if lr is None else lr, num_particles, seed, progress)
                 for w in GP_NODES}
        out = _evaluate_baseline(nodes, split, num_samples, seed)
        out["num_steps"] = steps
    else:
        _, parents = _parent_lists()
        nodes = {w: _NodeLinear(w, parents[w], split) for w in GP_NODES}
        out = _evaluate_baseline(nodes, split, num_samples, seed)
    out.update(task=task, seed=seed, method=method, recipe=recipe if method in ("dag_svi", "dag_vi") else None,
               seconds=time.perf_counter() - t0, cpu_seconds=time.process_time() - c0, n_train=len(split.train_index),
               n_test=len(split.test_index))
    out["split"] = split
    return out


def save_sachs_outputs(result, out_dir):
    """Write ``sachs_metrics.json`` (per node and averaged, the settings) and ``sachs.png`` (the DAG coloured by
    each node's held-out RMSE, observed-vs-predicted panels) for a DAG-DGP result of :func:`fit_sachs`.

    Each file is written atomically (:mod:`pyro_dag.outputs`).

    :returns: ``(json path, figure path)``.
    :raises pyro_dag.outputs.OutputError: naming the file that could not be written and the ones that were.
    """
    from ..outputs import OutputSet

    out = OutputSet(out_dir, ["sachs_metrics.json", "sachs.png"])
    keep = {k: v for k, v in result.items() if k not in ("model", "guide", "prediction", "split")}
    split = result["split"]
    keep["direction"] = None if split.direction is None else split.direction.tolist()
    keep["averaged_nodes"] = {"all": list(GP_NODES), "unseen": list(UNSEEN_NODES)}
    keep["paper"] = PAPER[result["task"]]
    jpath = out.json("sachs_metrics.json", keep, indent=2, default=str)
    title = (f"Sachs {result['task']} (seed {result['seed']}, {result['method']}): held-out RMSE per node, "
             "standardised log units")
    fpath = out.call(["sachs.png"], lambda: save_held_out_figure(result["model"], result["prediction"],
                                                                 split.test_data, out.path("sachs.png"),
                                                                 title=title, nodes=GP_NODES))
    return jpath, fpath

