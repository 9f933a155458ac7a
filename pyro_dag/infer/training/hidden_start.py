"""A start for hidden GP nodes from their observed descendants: the deep model begins at the shallow fit.

Stochastic steps from the prior leave a DAG deep GP with hidden nodes in poor optima more often than not: on
``x → h → y`` the default fit was 1.1-17× the RMSE of an exact GP of ``y`` on ``x`` in ``benchmarks/zoo.py``
(``default_deep``), on the latent collider the child's noise took the signal. Here each hidden node ``h`` (a GP node
never observed) gets pseudo-values before the steps, from a pilot exact GP (:class:`~pyro_dag.baselines.ExactGP`)
of each of its nearest observed descendants ``c`` on ``h``'s observed ancestral roots: ``ĥ`` is the mean, over those
descendants, of the standardised pilot means ``E[y_c | roots]``, i.e. the part of each descendant that ``h``'s roots
explain (Salimbeni & Deisenroth 2017 start hidden layers at a projection of the inputs for the same reason; here the
projection is learned from the data). Then, in topological order, with the pseudo-values standing in for the hidden
parents:

* a hidden node's kernel hyperparameters are fitted by L-BFGS on the collapsed bound (Titsias 2009) of ``ĥ`` with a
  small fixed noise (``PSEUDO_NOISE`` of its variance), and its ``q(V_h)`` is that bound's optimum, so that
  ``h ≈ ĥ``;
* each observed Gaussian node with a hidden parent gets the same fit on its own data (kernel, noise and ``q(V)``),
  with its (learned) inducing inputs re-initialised by k-means on the pseudo-values where its parents are hidden.

Nothing is held afterwards: the steps then train everything from this start, which is the shallow model's fit
written into the deep model (for ``x → h → y``: ``h`` ≈ the exact GP's mean, ``y`` ≈ a smooth map of it).
"""
import networkx as nx
import torch

from ...baselines import ExactGP
from ...dgp import DAGDGP
from ...gp.inducing import init_inducing_inputs
from ...gp.likelihoods import Gaussian
from ..autoguide.families import MeanFieldFamily
from .collapsed import FIT_MAX_CASES, collapsed_bound, fitting_rows, lbfgs, learnable_node_tensors, write_posterior
from .validation import structured_part

__all__ = ["start_hidden_nodes", "PSEUDO_NOISE"]

#: The noise of a hidden node's pseudo-values, as a fraction of their variance.
PSEUDO_NOISE = 1e-2
#: L-BFGS iterations per node.
MAX_ITER = 100


def _nearest_observed(graph, h, observed):
    """The observed descendants of ``h`` reached through hidden nodes only."""
    out, stack, seen = [], list(graph.successors(h)), set()
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        if c in observed:
            out.append(c)
        else:
            stack.extend(graph.successors(c))
    return sorted(out)


def _pilot_mean(X, roots, y, mask, seed):
    """Standardised mean of a pilot exact GP of ``y`` on the ``roots``' columns, at every case; ``None`` when the
    pilot finds no signal."""
    design = torch.cat([X[r] for r in roots], -1).detach().double().cpu()
    y = y.detach().double().cpu()[:, 0]
    keep = mask[:, 0].cpu()
    if int(keep.sum()) < 5 or not float(y[keep].var()) > 0:
        return None
    loc, scale = y[keep].mean(), y[keep].std()
    pilot = ExactGP(restarts=2, max_exact=300, seed=seed).fit(design[keep], (y[keep] - loc) / scale)
    if pilot.noise_fraction > 0.9:
        return None
    return pilot.predict(design)[0]


def _reset_inducing(model, w, values):
    """Re-initialise ``Z_w`` by k-means on the (pseudo-)values of its parents, if it is learned (fixed inducing
    inputs are the user's choice, and a buffer would not be in a checkpoint's parameter store)."""
    target = dict(model.inducing.named_parameters()).get(f"{w}_unconstrained")
    if target is None:
        return
    blocks = [values[p] for p in model.parents[w]]
    Z = init_inducing_inputs(blocks, model.num_inducing[w], seed=model.seed)
    with torch.no_grad():
        target.copy_(Z.to(target))


def start_hidden_nodes(model, guide, inputs, data, *, mask=None, max_iter=MAX_ITER):
    """Start the hidden nodes of ``model`` and their observed children at the shallow fit (module docstring).

    :param model: a :class:`~pyro_dag.DAGDGP` (set up here if it is not yet).
    :param guide: its :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (or an ``AutoGuideList`` holding one).
    :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d_w]}``, NaN = missing.
    :returns: ``{node: "hidden" or "child"}`` for the nodes started; empty without hidden nodes (or when none has an
        observed descendant and observed roots above it).
    """
    if not isinstance(model, DAGDGP):
        raise ValueError(f"start_hidden_nodes needs a DAGDGP model, got {type(model).__name__}")
    if not model.is_setup:
        model.setup(inputs, data, mask)
    if getattr(model, "priors", None) is not None:
        return {}
    X, n, obs = model.checked_arguments(inputs, data, mask)
    target = structured_part(guide)
    if target is None:
        return {}
    hidden = [w for w in model.topo_nodes if w not in obs and w not in model.latent_inputs]
    if not hidden:
        return {}
    if target.family is None:
        guide(inputs, data) if mask is None else guide(inputs, data, mask=mask)
    graph = model.graph
    values = {r: X[r] for r in X}
    started, pilots = {}, {}

    def pilot_mean(c, roots):   # hidden nodes of one chain share their roots and descendant: fit each pilot once
        key = (c, tuple(roots))
        if key not in pilots:
            pilots[key] = _pilot_mean(X, roots, *obs[c], model.seed)
        return pilots[key]

    for h in hidden:
        if model.output_dims[h] != 1 or not all(p in values for p in model.parents[h]):
            continue
        ancestors = nx.ancestors(graph, h)   # once per node: inside the comprehension it was once per root
        roots = [r for r in model.root_nodes if r in X and r in ancestors]
        kids = _nearest_observed(graph, h, obs)
        means = [m for c in kids if model.output_dims[c] == 1
                 for m in [pilot_mean(c, roots)] if m is not None] if roots else []
        if not means:
            continue
        pseudo = torch.stack(means).mean(0).to(dtype=model.dtype, device=model.device)
        noise = PSEUDO_NOISE * float(pseudo.var())
        parents = {p: values[p] for p in model.parents[h]}
        params = list(learnable_node_tensors(model, h, likelihood=False, inducing=False).values())
        if params:   # hyperparameters on a random subset above FIT_MAX_CASES cases, q(V_h) on every case
            sub, sub_pseudo = fitting_rows(parents, pseudo, FIT_MAX_CASES, model.seed)
            lbfgs(params, lambda: -collapsed_bound(model, h, sub, sub_pseudo, noise)[0], max_iter)
        write_posterior(target, model, h, parents, pseudo, noise)
        values[h] = pseudo.unsqueeze(-1)
        started[h] = "hidden"
    for w in model.topo_nodes:
        if w not in obs or w in started or not any(p in started for p in model.parents[w]):
            continue
        if model.output_dims[w] != 1 or type(model.likelihoods[w]) is not Gaussian:
            continue
        y, m = obs[w]
        rows = m[:, 0]
        full = {p: (values[p] if p in values else torch.where(obs[p][1], obs[p][0], torch.nan))
                for p in model.parents[w] if p in values or p in obs}
        if len(full) != len(model.parents[w]):
            continue
        rows = rows & torch.stack([torch.isfinite(v).all(-1) for v in full.values()]).all(0)
        if int(rows.sum()) < 5:
            continue
        _reset_inducing(model, w, {p: v[rows] for p, v in full.items()})
        parents = {p: v[rows] for p, v in full.items()}
        params = list(learnable_node_tensors(model, w, inducing=False).values())
        if params:
            sub, sub_y = fitting_rows(parents, y[rows, 0], FIT_MAX_CASES, model.seed)
            lbfgs(params, lambda: -collapsed_bound(model, w, sub, sub_y)[0], max_iter)
        write_posterior(target, model, w, parents, y[rows, 0])
        started[w] = "child"
    if started and not isinstance(target.family, MeanFieldFamily):
        target.family.zero_offdiagonal()
    return started
