"""Exact fits of many collapsible nodes at once, where each node's collapsed bound is an exact GP's evidence.

A collapsible node (:mod:`pyro_dag.infer.training.collapsed`) with the default kernel (an ARD RBF on its
concatenated parents), a learned Gaussian noise and every distinct case as an inducing input (``num_inducing=
"auto"``) has a collapsed bound (Titsias 2009, "Variational learning of inducing variables in sparse Gaussian
processes", AISTATS) equal to the log marginal likelihood of a zero-mean exact GP regression on its observed
parents (Rasmussen & Williams 2006, *Gaussian Processes for Machine Learning*, eq. 5.8), up to the relative jitter
of ``K(Z, Z)``. Those nodes are fitted by the batched BFGS of :func:`pyro_dag.structure.gp_batch.batched_gp_fit`
(``center=False``: the node's zero-mean model), the ones with the same number of cases and inputs in one batch and
each from the model's current hyperparameters (the noise rule's pilot fit, ``kernel_init="pilot"``), instead of one
L-BFGS run per node whose Python overhead dominates small problems. The caller checks each node's bound at the
batch's optimum against the batch's evidence and fits a node that disagrees by L-BFGS instead.
"""
import math

import torch
from torch.distributions import biject_to

from ...dgp.conditionals import _concat_values
from ...gp.likelihoods import Gaussian
from ...kernels import RBF, Concat
from ...structure.gp_batch import MIN_NOISE, batched_gp_fit
from .groups import _sync_with_param_store

__all__ = ["exact_gp_problem", "fit_exact_nodes", "EVIDENCE_TOLERANCE", "LOG_BOUNDS"]

#: Box of the scaled log-hyperparameters (:func:`pyro_dag.gp.noise.fit_exact_gps`'s): a noise fraction down to
#: the batch's floor and the large signal variances of uncentred data.
LOG_BOUNDS = (-20.0, 20.0)
#: Largest disagreement, in nats per case, between a node's collapsed bound and the batch's exact evidence at the
#: batch's optimum for the batch's fit to stand (the relative jitter 1e-8 of ``K(Z, Z)`` moves it by far less).
EVIDENCE_TOLERANCE = 1e-5


def _unconstrained(module, name):
    """The ``nn.Parameter`` behind the :class:`~pyro.nn.PyroParam` ``name`` of ``module`` and its constraint."""
    constraint = module.__dict__["_pyro_params"][name][0]
    return module._parameters[name + "_unconstrained"], constraint


def _constrained(module, name):
    u, constraint = _unconstrained(module, name)
    with torch.no_grad():
        return biject_to(constraint)(u)


def exact_gp_problem(model, w, parent_values, y):
    """Node ``w``'s exact-fit problem as an exact GP regression, or ``None`` where its collapsed bound is not one.

    :param model: a set-up :class:`~pyro_dag.DAGDGP`. :param dict parent_values: ``{parent: [n, d_p]}`` on the cases
        where ``w`` is observed. :param torch.Tensor y: ``[n]`` its observations there.
    :returns: ``(X [n, D], y [n])`` in float64, when ``w``'s kernel is the default :class:`~pyro_dag.kernels.Concat`
        of an ARD :class:`~pyro_dag.kernels.RBF` whose length-scales and variance are its only learnable tensors,
        its Gaussian noise is learned, and its inducing inputs are exactly its distinct cases; else ``None``.
    """
    kernel, lik = model.kernels[w], model.likelihoods[w]
    if type(kernel) is not Concat or type(kernel.base) is not RBF or type(lik) is not Gaussian:
        return None
    base = kernel.base
    if set(base.__dict__.get("_pyro_params", {})) != {"lengthscale", "variance"} \
            or set(lik.__dict__.get("_pyro_params", {})) != {"variance"}:
        return None
    for module in (kernel, lik):
        _sync_with_param_store(module)
    learnable = [p for m in (kernel, lik) for p in m.parameters() if p.requires_grad]
    if len(learnable) != 3:
        return None
    X = _concat_values([parent_values[p] for p in model.parents[w]])
    if base._own_value("lengthscale").numel() != X.shape[-1] or X.shape[0] < 3:
        return None
    Z = model.inducing_inputs(w).detach()
    if Z.shape[0] != torch.unique(X.detach(), dim=0).shape[0]:
        return None
    gap = torch.cdist(Z.to(X), X.detach(), compute_mode="donot_use_mm_for_euclid_dist").amin(-1)
    if not bool((gap == 0).all()):
        return None
    return X.detach().to("cpu", torch.float64), y.detach().to("cpu", torch.float64).reshape(-1)


def _scaling(X, y):
    """``batched_gp_fit``'s scaling of one problem: input spans ``[D]`` and the targets' standard deviation."""
    span = X.amax(0) - X.amin(0)
    span = torch.where(span > 0, span, torch.ones_like(span))
    sd = y.std()
    return span, (sd if float(sd) > 0 else torch.ones_like(sd))


def fit_exact_nodes(model, problems, progress=None):
    """Fit the nodes of ``problems`` (``{node: (X, y)}`` from :func:`exact_gp_problem`) by batched BFGS from the
    model's current hyperparameters and write the optimum into their kernels and likelihoods.

    :param progress: called with the number of nodes each batch fitted.
    :returns: ``{node: log evidence}`` (float, data units) at the written hyperparameters.
    """
    groups = {}
    for w, (X, y) in problems.items():
        groups.setdefault(tuple(X.shape), []).append(w)
    out = {}
    for (n, D), members in groups.items():
        Xb = torch.stack([problems[w][0] for w in members])
        yb = torch.stack([problems[w][1] for w in members])
        scales = [_scaling(problems[w][0], problems[w][1]) for w in members]
        starts = []
        for w, (span, sd) in zip(members, scales):
            base, lik = model.kernels[w].base, model.likelihoods[w]
            ls = _constrained(base, "lengthscale").double().cpu().reshape(-1)
            sf2 = float(_constrained(base, "variance").reshape(-1)[0])
            sn2 = float(_constrained(lik, "variance").reshape(-1)[0])
            s2 = float(sd) ** 2
            starts.append(torch.cat([(ls / span).log(),
                                     torch.tensor([math.log(max(sf2 / s2, 1e-12)),
                                                   math.log(max(sn2 / s2 - MIN_NOISE, 1e-12))], dtype=torch.float64)]))
        start = torch.stack(starts).clamp(*LOG_BOUNDS)
        evidence, params = batched_gp_fit(Xb, yb, center=False, start=start, bounds=LOG_BOUNDS)
        for i, (w, (span, sd)) in enumerate(zip(members, scales)):
            x, s2 = params[i], sd ** 2
            kernel, lik = model.kernels[w], model.likelihoods[w]
            values = {(kernel.base, "lengthscale"): x[:D].exp() * span,
                      (kernel.base, "variance"): x[D].exp() * s2,
                      (lik, "variance"): (x[D + 1].exp() + MIN_NOISE) * s2}
            with torch.no_grad():
                for (module, name), value in values.items():
                    u, constraint = _unconstrained(module, name)
                    u.copy_(biject_to(constraint).inv(value.to(u)).reshape(u.shape))
            out[w] = float(evidence[i])
        if progress is not None:
            progress(len(members))
    return out
