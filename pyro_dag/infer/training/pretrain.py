"""Node-wise pretraining: each GP node fitted alone, as a sparse GP on its observed parents.

The DAG-DGP paper (Perlino, Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645, Sec. 6 and App. G.4) starts
its Sachs interpolation runs with 1000 steps of "node-wise mean-field pretraining" before the joint steps. Here
each observed node ``w`` whose parents are all roots or observed nodes is fitted as its own sparse variational GP
(Hensman, Fusi & Lawrence 2013; Titsias 2009) on the cases where all its parents are observed, with the parents'
observed values as inputs:

    L_w = Σ_i Σ_k m_ik E_{q(f_ik)}[log p_w(y_ik | f_ik)] - KL(q(V_w) || N(0, I)),

with the model's own kernel ``K_w``, inducing inputs ``Z_w``, likelihood ``p_w`` and the whitened conditional
(``f = a_iᵀ v_k + N(0, r_i)``, Eq. 80), and ``q(V_w)`` one full-covariance Gaussian over the node's ``d_w M_w``
whitened inducing outputs (the node's block of the DAG-VI family). ``E_q[log p_w]`` is the likelihood's
closed form or Gauss-Hermite rule (:meth:`~pyro_dag.gp.likelihoods.Likelihood.expected_log_prob`), so the
objective is exact (no Monte Carlo). Nodes with a latent parent cannot be fitted alone (their inputs are not
observed) and are left to the joint phase.

The nodes are independent, so the sum of their objectives is optimised with one Adam (an elementwise rule: the
same as one Adam per node). Afterwards each fitted node's ``q(V_w)`` is written into the guide's block (mean,
and covariance or precision diagonal block), with no coupling to other blocks, as
:meth:`~pyro_dag.infer.autoguide.AutoStructuredGuide.warm_start` does. The model's kernel hyperparameters,
inducing inputs and likelihood parameters of the fitted nodes are trained in place (those that are learnable).
"""
import math

import torch

from ...dgp import DAGDGP
from ..autoguide.families import MeanFieldFamily
from ..checks import check_finite_gradients, check_finite_loss, training_step
from .validation import structured_part

__all__ = ["pretrainable_nodes", "node_elbo", "pretrain_nodes"]


def pretrainable_nodes(model, obs):
    """GP nodes of ``model`` that are observed and whose parents are all roots or observed nodes, in topological
    order. :param dict obs: the model's checked observations (``model.checked_arguments(...)[2]``)."""
    return [w for w in model.topo_nodes
            if w in obs and all(p in model.root_nodes or p in obs for p in model.parents[w])]


def _node_rows(model, w, X, obs):
    """The cases where every parent of ``w`` is fully observed and ``w`` has an observed entry: ``(parent values
    {p: [n_w, d_p]}, y [n_w, d_w], mask [n_w, d_w])``."""
    y, m = obs[w]
    rows = m.any(-1)
    for p in model.parents[w]:
        if p not in X:
            rows = rows & obs[p][1].all(-1)
    values = {p: (X[p] if p in X else obs[p][0])[rows] for p in model.parents[w]}
    return values, y[rows], m[rows]


def node_elbo(model, w, parent_values, y, mask, loc, scale_tril):
    """The sparse-GP ELBO of node ``w`` alone (see the module docstring).

    :param model: a set-up :class:`~pyro_dag.DAGDGP`. :param str w: the node.
    :param dict parent_values: ``{parent: [n, d_p]}`` observed parent values.
    :param y: ``[n, d_w]`` observations (any value where ``mask`` is False). :param mask: ``[n, d_w]`` bool.
    :param loc: ``[d_w, M_w]`` mean of ``q(V_w)``. :param scale_tril: ``[P, P]`` lower Cholesky factor of its
        covariance, ``P = d_w M_w`` (coordinates ordered output-major, as the guide's blocks).
    :returns: a scalar tensor.
    """
    d, M = loc.shape
    a, r = model.node_conditional(w, parent_values)            # [n, M], [n]
    mean = a @ loc.T                                           # [n, d]
    rows = scale_tril.reshape(d, M, d * M)                      # rows of L for each output
    var = r.unsqueeze(-1) + torch.einsum("nm,kmp->nkp", a, rows).pow(2).sum(-1)
    ell = model.likelihoods[w].expected_log_prob(y, mean, var)
    ell = torch.where(mask, ell, torch.zeros_like(ell)).sum()
    P = d * M
    kl = 0.5 * (scale_tril.pow(2).sum() + loc.pow(2).sum() - P) - scale_tril.diagonal().log().sum()
    return ell - kl


class _NodePosterior(torch.nn.Module):
    def __init__(self, d, M, scale, dtype, device):
        super().__init__()
        P = d * M
        self.loc = torch.nn.Parameter(torch.zeros(d, M, dtype=dtype, device=device))
        self.log_diag = torch.nn.Parameter(torch.full((P,), math.log(scale), dtype=dtype, device=device))
        self.lower = torch.nn.Parameter(torch.zeros(P, P, dtype=dtype, device=device))

    def scale_tril(self):
        return self.lower.tril(-1) + torch.diag(self.log_diag.exp())


def _node_scale(guide, w):
    init = getattr(guide, "init_scale", None)
    if isinstance(init, dict):
        return float(init.get(w, 1.0))
    return 1.0 if init is None else float(init)


def pretrain_nodes(model, guide, inputs, data, num_steps, lr=0.01, mask=None, nodes=None, lr_scale=None,
                   progress=False):
    """Fit each pretrainable GP node alone (see the module docstring), then write its ``q(V_w)`` into ``guide``.

    :param model: a :class:`~pyro_dag.DAGDGP` (set up here if it is not yet).
    :param guide: its :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`, or an ``AutoGuideList`` holding one
        (run once here if it is not set up).
    :param dict inputs: ``{root: [n, d_r]}``. :param dict data: ``{node: [n, d_w]}``, NaN = missing.
    :param int num_steps: Adam steps (``>= 1``). :param float lr: Adam's learning rate.
    :param dict mask: optional observation masks, as for the model.
    :param nodes: the nodes to fit (default: :func:`pretrainable_nodes`); each must be pretrainable.
    :param dict lr_scale: optional ``{id(tensor): factor}`` multiplying the learning rate of model parameters
        (e.g. the likelihood's).
    :param bool progress: show a tqdm bar.
    :returns: ``(nodes, losses)``: the fitted nodes and the summed negative ELBO per step (floats).
    :raises ValueError: naming a node that cannot be fitted alone.
    :raises NonFiniteLossError: naming the step, if the loss or a gradient is not finite.
    """
    if not isinstance(model, DAGDGP):
        raise ValueError(f"pretrain_nodes needs a DAGDGP model, got {type(model).__name__}")
    if not model.is_setup:
        model.setup(inputs, data, mask)
    X, _, obs = model.checked_arguments(inputs, data, mask)
    possible = pretrainable_nodes(model, obs)
    if nodes is None:
        nodes = possible
    for w in nodes:
        if w not in possible:
            why = ("it is not observed" if w not in obs else
                   f"its parents {[p for p in model.parents[w] if p not in model.root_nodes and p not in obs]} "
                   "are latent")
            raise ValueError(f"pretrain_nodes: node {w!r} cannot be fitted alone: {why}; the joint steps train it")
    if not nodes:
        return [], []
    target = structured_part(guide)
    if target is None:
        raise ValueError(f"pretrain_nodes writes each node's q(V_w) into an AutoStructuredGuide; got "
                         f"{type(guide).__name__}")
    if target.family is None:
        guide(inputs, data, mask)
    guide = target
    posts, rows, params = {}, {}, {}
    for w in nodes:
        d, M = model.output_dims[w], model.num_inducing[w]
        posts[w] = _NodePosterior(d, M, _node_scale(guide, w), model.dtype, model.device)
        rows[w] = _node_rows(model, w, X, obs)
        for module in (model.kernels[w], model.likelihoods[w]):
            for p in module.parameters():
                if p.requires_grad:
                    params[id(p)] = p
        Z = dict(model.inducing.named_parameters()).get(f"{w}_unconstrained")
        if Z is not None and Z.requires_grad:
            params[id(Z)] = Z
    lr_scale = dict(lr_scale or {})
    by_lr = {}
    for p in params.values():
        by_lr.setdefault(lr * lr_scale.get(id(p), 1.0), []).append(p)
    by_lr.setdefault(lr, []).extend(p for post in posts.values() for p in post.parameters())
    optim = torch.optim.Adam([{"params": ps, "lr": g} for g, ps in by_lr.items()], foreach=True)
    named = [(f"pretrain[{w}].{n}", p) for w, post in posts.items() for n, p in post.named_parameters()]
    losses = []
    steps = range(num_steps)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="node-wise pretraining", mininterval=0.5)
    for step in steps:
        with training_step("pretrain_nodes", step + 1):
            loss = -sum(node_elbo(model, w, *rows[w], posts[w].loc, posts[w].scale_tril()) for w in nodes)
            check_finite_loss(loss.detach(), "the node-wise loss", inputs, data)
            loss.backward()
            check_finite_gradients(named + [(f"model parameter {i}", p) for i, p in enumerate(params.values())],
                                   "pretrain_nodes", loss=loss.item())
            optim.step()
            optim.zero_grad(set_to_none=True)
        losses.append(loss.item())
    _write(guide, posts)
    return list(nodes), losses


@torch.no_grad()
def _write(guide, posts):
    family = guide.family
    for w, post in posts.items():
        loc = post.loc.detach().reshape(-1)
        L = post.scale_tril().detach()
        if isinstance(family, MeanFieldFamily):
            family.set_node(w, loc, L)
        else:
            family.set_node(w, loc, torch.linalg.cholesky(torch.cholesky_inverse(L)))
    if not isinstance(family, MeanFieldFamily):
        family.zero_offdiagonal()
