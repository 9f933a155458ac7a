"""Pictures of DAG-DGP posteriors (matplotlib and networkx).

* :func:`dag` -- the DAG, nodes in depth slices (Perlino et al. 2026, arXiv:2607.09645, Prop. 1), each GP node
  coloured by a posterior summary (predictive sd, or held-out RMSE when targets are given) and labelled with it.
"""
import numpy as np
import torch

__all__ = ["dag", "node_summaries"]


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
