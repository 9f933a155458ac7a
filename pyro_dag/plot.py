"""Pictures of DAG-DGP and structure posteriors (matplotlib and networkx).

* :func:`dag` -- the DAG, nodes in depth slices (Perlino et al. 2026, arXiv:2607.09645, Prop. 1), each GP node
  coloured by a posterior summary (predictive sd, or held-out RMSE when targets are given) and labelled with it.
* The figures the experiments and the command line write: :func:`save_held_out_figure` (the DAG coloured by
  held-out RMSE, observed-vs-predicted panels), :func:`plot_collider` (the latent collider),
  :func:`save_observed_vs_predicted` (one emulated output), :func:`edge_heatmap`, :func:`save_structure_figures`
  and :func:`save_conditional_heatmap` (edge probabilities of a DAG posterior, unconditional and given edge
  evidence).

:func:`dag` draws with the caller's matplotlib backend; the ``save_*`` figures and :func:`plot_collider` select
the non-interactive Agg backend, since they only write files, and write each file atomically
(:func:`pyro_dag.outputs.save_figure`: a full disk leaves no partial picture).
"""
import os

import numpy as np
import torch

from .outputs import save_figure

__all__ = ["dag", "node_summaries", "save_held_out_figure", "plot_collider", "save_observed_vs_predicted",
           "edge_heatmap", "save_structure_figures", "save_conditional_heatmap"]


def _numpy(x):
    return x.detach().cpu().numpy() if torch.is_tensor(x) else np.asarray(x)


def node_summaries(model, posterior, targets=None):
    """One number per GP node: the mean posterior sd of its values, or the RMSE against ``targets``.

    :param model: a :class:`~pyro_dag.DAGDGP`.
    :param posterior: ``{node: NodePrediction}`` from :meth:`~pyro_dag.DAGDGP.predict`, or an ArviZ
        ``InferenceData`` from :func:`pyro_dag.to_inference_data` (node values ``"{w}.f"``, else the
        posterior predictive ``"{w}.y"``).
    :param dict targets: optional ``{node: [n, d_w]}`` held-out values (NaN = missing); needs predictions at
        the same cases.
    :returns: ``(values {node: float}, label str)``.
    """
    means, sds = {}, {}
    if isinstance(posterior, dict):
        for w, p in posterior.items():
            means[w] = _numpy(p.mean)
            sds[w] = np.sqrt(_numpy(p.variance))
    else:
        groups = getattr(posterior, "groups", None)
        names = groups() if callable(groups) else list(getattr(posterior, "children", {}))
        post = posterior["posterior"] if "posterior" in names else None
        ppc = posterior["posterior_predictive"] if "posterior_predictive" in names else None
        for w in model.gp_nodes:
            src = None
            if post is not None and f"{w}.f" in post:
                src = post[f"{w}.f"]
            elif ppc is not None and f"{w}.y" in ppc:
                src = ppc[f"{w}.y"]
            if src is not None:
                arr = np.asarray(src.values)
                arr = arr.reshape((-1,) + arr.shape[2:])
                means[w], sds[w] = arr.mean(0), arr.std(0)
    if targets:
        values = {}
        for w, t in targets.items():
            if w not in means:
                raise ValueError(f"node_summaries: no posterior values for target node {w!r}")
            t = _numpy(t).reshape(means[w].shape)
            ok = np.isfinite(t)
            values[w] = float(np.sqrt(np.mean((means[w][ok] - t[ok]) ** 2)))
        return values, "RMSE"
    return {w: float(np.mean(s)) for w, s in sds.items()}, "posterior sd"


def _layout(graph):
    from .diagnostics.collapse import antichain_decomposition

    slices = antichain_decomposition(graph)
    pos = {}
    for level, nodes in enumerate(slices):
        for j, v in enumerate(nodes):
            pos[v] = (level, -(j - (len(nodes) - 1) / 2))
    return pos


def dag(model, posterior=None, targets=None, ax=None, cmap="viridis", node_size=1600, title=None):
    """Draw the model's DAG with each GP node's posterior summary (colour and label).

    Roots are grey squares, GP nodes circles coloured by :func:`node_summaries` (mean posterior sd of the node's
    values, or held-out RMSE with ``targets``); observed nodes have a thick edge. Depth slices (the progressive
    antichain decomposition of Perlino et al. 2026, Prop. 1) run left to right.

    :param model: a :class:`~pyro_dag.DAGDGP`.
    :param posterior: ``{node: NodePrediction}`` (:meth:`~pyro_dag.DAGDGP.predict`) or an ``InferenceData``
        (:func:`pyro_dag.to_inference_data`); ``None`` draws the bare graph.
    :param dict targets: optional held-out values ``{node: [n, d_w]}`` (colour = RMSE).
    :param ax: a matplotlib axis (default a new figure).
    :returns: the matplotlib axis.

    Example::

        pred = model.predict(guide, inputs_test, num_samples=200)
        pyro_dag.plot.dag(model, pred, targets={"w3": y_test})
    """
    import matplotlib.pyplot as plt
    import networkx as nx

    if ax is None:
        _, ax = plt.subplots(figsize=(2.2 * (1 + len(_layout(model.graph)) ** 0.5) + 2, 4))
    graph = model.graph
    pos = _layout(graph)
    values, label = node_summaries(model, posterior, targets) if posterior is not None else ({}, "")
    roots = [v for v in graph.nodes if v not in model.gp_nodes]
    gp = list(model.gp_nodes)
    observed = set(model.observed_nodes or ())
    nx.draw_networkx_edges(graph, pos, ax=ax, arrows=True, arrowsize=18, node_size=node_size)
    nx.draw_networkx_nodes(graph, pos, nodelist=roots, node_shape="s", node_color="#d9d9d9", ax=ax,
                           node_size=node_size)
    colored = [w for w in gp if w in values]
    plain = [w for w in gp if w not in values]
    if colored:
        vals = np.array([values[w] for w in colored])
        vmin, vmax = float(vals.min()), float(vals.max())
        if vmax <= vmin:
            vmax = vmin + 1e-12
        coll = nx.draw_networkx_nodes(graph, pos, nodelist=colored, node_color=vals, cmap=cmap, vmin=vmin,
                                      vmax=vmax, ax=ax, node_size=node_size,
                                      linewidths=[3.0 if w in observed else 0.5 for w in colored],
                                      edgecolors="black")
        ax.figure.colorbar(coll, ax=ax, label=label, shrink=0.8)
    if plain:
        nx.draw_networkx_nodes(graph, pos, nodelist=plain, node_color="white", edgecolors="black", ax=ax,
                               node_size=node_size, linewidths=[3.0 if w in observed else 0.5 for w in plain])
    labels = {v: v if v not in values else f"{v}\n{values[v]:.3g}" for v in graph.nodes}
    nx.draw_networkx_labels(graph, pos, labels=labels, ax=ax, font_size=9,
                            bbox={"facecolor": "white", "alpha": 0.7, "edgecolor": "none", "pad": 1.0})
    ax.set_axis_off()
    if title:
        ax.set_title(title)
    return ax


# ------------------------------------------------------------------------------------ held-out predictions
def save_held_out_figure(model, pred, targets, path, title=None, nodes=None):
    """The DAG coloured by each node's held-out RMSE (:func:`dag`) and observed-vs-predicted panels (predictive
    mean ± 2 sd against the held-out values), written to ``path``.

    :param dict pred: ``{node: NodePrediction}`` at the held-out cases. :param dict targets: ``{node: [n, 1]}``.
    """
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    nodes = list(targets) if nodes is None else list(nodes)
    cols = min(4, len(nodes))
    rows = (len(nodes) + cols - 1) // cols
    fig = plt.figure(figsize=(3.2 * cols + 1, 4.5 + 3.0 * rows))
    grid = fig.add_gridspec(1 + rows, cols, height_ratios=[1.6] + [1] * rows)
    ax = fig.add_subplot(grid[0, :])
    dag(model, {w: pred[w] for w in nodes}, targets={w: targets[w] for w in nodes}, ax=ax,
        title=title or "held-out RMSE per node")
    for k, w in enumerate(nodes):
        a = fig.add_subplot(grid[1 + k // cols, k % cols])
        y = targets[w][:, 0].numpy()
        mu = pred[w].y_mean[:, 0].numpy() if pred[w].y_mean is not None else pred[w].mean[:, 0].numpy()
        var = pred[w].y_variance if pred[w].y_variance is not None else pred[w].variance
        sd = var[:, 0].sqrt().numpy()
        ok = np.isfinite(y)
        a.errorbar(y[ok], mu[ok], yerr=2 * sd[ok], fmt="o", ms=2, alpha=0.4, lw=0.5)
        lo, hi = float(np.nanmin(np.r_[y[ok], mu[ok]])), float(np.nanmax(np.r_[y[ok], mu[ok]]))
        a.plot([lo, hi], [lo, hi], "k--", lw=0.8)
        a.set_title(w, fontsize=9)
        a.set_xlabel("observed", fontsize=8)
        a.set_ylabel("predicted", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path, dpi=110)
    return path


def save_observed_vs_predicted(y, mean, sd, target, title, path):
    """One output's predictive mean ± 2 sd against its true values (a multi-fidelity emulator's held-out runs),
    written to ``path``; returns ``path``.

    :param y: ``[n]`` true values. :param mean: / :param sd: ``[n]`` predictive mean and standard deviation.
    :param str target: the output's name (axis labels). :param str title: the panel's title.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(4, 4))
    ax.errorbar(y, mean, yerr=2 * sd, fmt="o", ms=3, alpha=0.7)
    lo, hi = float(y.min()), float(y.max())
    ax.plot([lo, hi], [lo, hi], "k--", lw=1)
    ax.set_xlabel(f"true {target}")
    ax.set_ylabel(f"predicted {target} (±2 sd)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)
    return path


# ------------------------------------------------------------------------------------------ latent collider
def plot_collider(result, path):
    """Save a 2×2 figure: the parents' posteriors over their roots, the child reconstruction, and the
    explaining-away cloud of (w1, w2) posterior samples at a few cases."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ds, pred = result["data"], result["prediction"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 8))
    n2 = ds.x2_grid.shape[0]
    for ax, node, grid, sel in ((axes[0, 0], "w1", ds.x1_grid, slice(None, None, n2)),
                                (axes[0, 1], "w2", ds.x2_grid, slice(0, n2))):
        mean = pred[node].mean[sel, 0].cpu()
        sd = pred[node].variance[sel, 0].clamp_min(0).sqrt().cpu()
        ax.plot(grid, ds.truth[node][sel, 0], "k--", label="truth")
        ax.plot(grid, mean, "C0", label="posterior mean")
        ax.fill_between(grid, mean - 2 * sd, mean + 2 * sd, color="C0", alpha=0.25, label="±2 sd")
        ax.set_xlabel(f"x{node[1]}")
        ax.set_title(f"parent {node} (identifiable up to a shift)")
        ax.legend(fontsize=8)
    ax = axes[1, 0]
    truth = ds.truth["w3"][:, 0]
    mean = pred["w3"].mean[:, 0].cpu()
    train = ds.train_mask
    ax.scatter(truth[train], mean[train], s=10, label="observed cases")
    ax.scatter(truth[~train], mean[~train], s=14, marker="x", label="held-out cases")
    lims = [float(truth.min()) - 0.1, float(truth.max()) + 0.1]
    ax.plot(lims, lims, "k:", lw=1)
    m = result["metrics"]
    ax.set_title(f"child w3: RMSE train {m['rmse_train']:.3f}, test {m['rmse_test']:.3f}")
    ax.set_xlabel("noise-free w3")
    ax.set_ylabel("posterior mean")
    ax.legend(fontsize=8)
    ax = axes[1, 1]
    w1, w2 = pred["w1"].samples[..., 0].cpu(), pred["w2"].samples[..., 0].cpu()
    for k, case in enumerate([0, 40, 82, 120, 164]):
        ax.scatter(w1[:, case] - w1[:, case].mean(), w2[:, case] - w2[:, case].mean(), s=3, alpha=0.4,
                   color=f"C{k}")
    ax.set_xlabel("w1 - mean")
    ax.set_ylabel("w2 - mean")
    ax.set_title(f"posterior (w1, w2) at 5 cases: mean |corr| {m['mean_abs_corr']:.2f}")
    ax.axis("equal")
    fig.suptitle(f"latent collider, {m['structure']} guide, {m['steps']} steps")
    fig.tight_layout()
    save_figure(fig, path, dpi=110)


# --------------------------------------------------------------------------------------- structure posteriors
def edge_heatmap(ax, P, names, title, fontsize=None):
    """Draw the ``[p, p]`` edge probabilities ``P[i, j] = P(i -> j)`` on ``ax``; returns the image."""
    im = ax.imshow(P, vmin=0, vmax=1, cmap="viridis")
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels(names, rotation=90)
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.set_xlabel("child j")
    ax.set_ylabel("parent i")
    ax.set_title(title, fontsize=fontsize)
    return im


def save_structure_figures(P, names, out_dir, threshold=0.5):
    """Write ``edge_probs.png`` (heat map of the edge probabilities ``P[i, j] = P(i -> j)``) and
    ``posterior_graph.png`` (the posterior-mean graph: edges with ``P > threshold``, width growing with the
    probability) to ``out_dir``; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import networkx as nx

    p = len(names)
    fig, ax = plt.subplots(figsize=(0.55 * p + 2.5, 0.5 * p + 2))
    im = edge_heatmap(ax, P, names, "posterior P(i -> j)")
    fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    heat = os.path.join(out_dir, "edge_probs.png")
    save_figure(fig, heat, dpi=120)

    g = nx.DiGraph()
    g.add_nodes_from(names)
    for i in range(p):
        for j in range(p):
            if i != j and P[i, j] > threshold:
                g.add_edge(names[i], names[j], prob=float(P[i, j]))
    fig, ax = plt.subplots(figsize=(7, 6))
    pos = nx.circular_layout(g)
    nx.draw_networkx_nodes(g, pos, ax=ax, node_color="#dde8f7", node_size=900)
    nx.draw_networkx_labels(g, pos, ax=ax, font_size=8)
    widths = [1 + 4 * (d["prob"] - threshold) / (1 - threshold) for _, _, d in g.edges(data=True)]
    nx.draw_networkx_edges(g, pos, ax=ax, width=widths, arrowsize=15, node_size=900, connectionstyle="arc3,rad=0.08")
    nx.draw_networkx_edge_labels(g, pos, ax=ax, font_size=6,
                                 edge_labels={(u, v): f"{d['prob']:.2f}" for u, v, d in g.edges(data=True)})
    ax.set_title(f"posterior-mean graph (P > {threshold})")
    ax.axis("off")
    fig.tight_layout()
    graph = os.path.join(out_dir, "posterior_graph.png")
    save_figure(fig, graph, dpi=120)
    return heat, graph


def save_conditional_heatmap(P, Pg, names, out_dir, label):
    """Write ``edge_probs_given.png``: the edge probabilities ``P`` beside the conditional ones ``Pg`` given the
    edge evidence described by ``label``, to ``out_dir``; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    p = len(names)
    fig, axes = plt.subplots(1, 2, figsize=(1.1 * p + 4, 0.5 * p + 2.2))
    for ax, M, title in ((axes[0], P, "P(i -> j)"), (axes[1], Pg, f"P(i -> j | {label})")):
        im = edge_heatmap(ax, M, names, title, fontsize=9)
    fig.colorbar(im, ax=axes, fraction=0.03)
    path = os.path.join(out_dir, "edge_probs_given.png")
    save_figure(fig, path, dpi=120)
    return path
