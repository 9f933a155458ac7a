"""Natural-gradient steps for the Gaussian inducing posterior of a DAGDGP guide: shared pieces.

Two optimisers, one module each (both re-exported by :mod:`pyro_dag.infer`), beyond the DAG-DGP paper
(Perlino et al. 2026, arXiv:2607.09645), which trains every parameter with Adam:

* :class:`~pyro_dag.infer.natural_gaussian.GaussianNaturalGradient`: a damped natural-gradient step on the whole
  ``q(V) = N(m, Λ⁻¹)`` of an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (any structure), from any ELBO
  estimator (Khan & Lin 2017; Salimbeni, Eleftheriadis & Hensman 2018, "Natural gradients in practice");
* :class:`~pyro_dag.infer.natural_sink.SinkNaturalGradient`: the closed-form (conjugate) step on the
  Gaussian-likelihood sinks only.

This module holds what both use: the names of the variational parameters a step sets (so that the ordinary
optimiser can leave them alone, :func:`freezing_optim_args`) and the Gaussian KL of a step's trust region.
"""
import pyro
import torch

__all__ = ["freezing_optim_args", "family_param_names", "gaussian_kl"]


def freezing_optim_args(names, args):
    """Per-parameter ``pyro.optim`` arguments: ``args`` for every parameter, ``lr = 0`` for those in ``names``.

    :param set names: parameter-store names to freeze. :param dict args: e.g. ``{"lr": 0.01}``.
    :returns: a callable ``param_name -> dict``, as ``pyro.optim`` optimisers accept.
    """
    frozen = dict(args, lr=0.0)

    def per_param(param_name):
        return frozen if param_name in names else args

    return per_param


def family_param_names(family, nodes, offdiagonal=False):
    """Names in Pyro's parameter store of a guide family's parameters for ``nodes``: each node's mean and
    diagonal block (``locs``, ``scales``, ``unit_trils``) and, with ``offdiagonal``, every off-diagonal block.

    The names are found by identity with the tensors of Pyro's parameter store, so the guide must have run
    (its parameters are registered on the first run).

    :param family: the guide's variational family (a :class:`~pyro.nn.PyroModule`).
    :param nodes: GP node names. :param bool offdiagonal: include the off-diagonal blocks.
    :returns: a set of parameter-store names.
    """
    nodes = set(nodes)
    wanted = {}
    for path, p in family.named_parameters():
        local = path[:-len("_unconstrained")] if path.endswith("_unconstrained") else path
        group, _, leaf = local.rpartition(".")
        if (group in ("locs", "scales", "unit_trils") and leaf in nodes) or (offdiagonal and group == "offdiag"):
            wanted[id(p)] = local
    names = {name for name, p in pyro.get_param_store().named_parameters() if id(p) in wanted}
    if len(names) != len(wanted):
        raise RuntimeError("the guide's parameters are not in Pyro's parameter store (was it cleared after the "
                           "guide ran?): run the guide once (e.g. guide(inputs, data)) before building the step")
    return names


def gaussian_kl(m1, chol1, m0, chol0):
    """``KL(N(m1, Λ1⁻¹) || N(m0, Λ0⁻¹))`` from the precision Cholesky factors ``Λ = L Lᵀ``.

    :param m1: ``[P]``. :param chol1: ``[P, P]`` lower-triangular. :param m0: ``[P]``. :param chol0: ``[P, P]``.
    :returns: a float (nats).
    """
    a = torch.linalg.solve_triangular(chol1, chol0, upper=False)          # L1⁻¹ L0: tr(Λ0 Σ1) = ||a||²
    d = chol0.T @ (m1 - m0)                                                # (m1-m0)ᵀ Λ0 (m1-m0) = ||d||²
    logdet = 2 * (chol1.diagonal().log().sum() - chol0.diagonal().log().sum())
    return float(0.5 * (a.pow(2).sum() + d.pow(2).sum() - m1.shape[0] + logdet))
