"""GP nodes whose inputs are all observed: their sparse GP can be fitted exactly.

A node ``w`` of a :class:`~pyro_dag.DAGDGP` whose parents are observed roots or nodes observed wherever ``w`` is,
with a Gaussian likelihood, is a sparse GP regression on known inputs. Its ELBO, maximised over ``q(V_w)``, is the
collapsed bound of Titsias (2009, "Variational learning of inducing variables in sparse Gaussian processes",
AISTATS), which with every case as an inducing input is the exact GP's log marginal likelihood. The
``"recommended"`` recipe of :func:`~pyro_dag.infer.train` fits such nodes on that bound (deterministic, so by
L-BFGS) instead of by stochastic steps, and ``num_inducing="auto"`` gives them every case as an inducing input up
to :data:`AUTO_INDUCING_EXACT`.
"""
from ..gp.likelihoods import Gaussian

__all__ = ["collapsible_nodes", "AUTO_INDUCING_EXACT"]

#: ``num_inducing="auto"`` for a collapsible node: every case as an inducing input, up to this many (the collapsed
#: bound costs ``O(n M²)`` per evaluation; 512 keeps an L-BFGS fit of 2000 cases within seconds).
AUTO_INDUCING_EXACT = 512


def _has_priors(module):
    return any(getattr(m, "_pyro_samples", None) for m in module.modules())


def collapsible_nodes(model, X, obs):
    """The GP nodes of ``model`` that can be fitted exactly on the collapsed bound, in topological order: observed
    in at least one case, one output dimension, a Gaussian likelihood, no hyperpriors on its kernel or likelihood,
    and every parent an observed root or a node observed wherever ``w`` is (nested designs: a refined fidelity run
    only where its parents were); none when the model has ``priors``. When every GP node is collapsible, the ELBO
    separates over the nodes (no data term depends on a latent value), so the exact fits are the joint optimum.

    :param model: a :class:`~pyro_dag.DAGDGP`. :param dict X: ``{root: [n, d]}`` the observed roots.
    :param dict obs: ``{node: (y [n, d], mask [n, d])}`` (the model's checked observations).
    :returns: a list of node names.
    """
    out = []
    if getattr(model, "priors", None) is not None:  # hyperpriors (set at set-up) make the hyperparameters latent
        return out
    for w in model.topo_nodes:
        if w in model.root_nodes or w not in obs or model.output_dims[w] != 1:
            continue
        if not bool(obs[w][1].any()):
            continue
        likelihood = model.likelihoods[w]
        if type(likelihood) is not Gaussian or _has_priors(likelihood) or _has_priors(model.kernels[w]):
            continue
        rows = obs[w][1].any(-1)
        if all(p in X or (p in obs and bool(obs[p][1][rows].all())) for p in model.parents[w]):
            out.append(w)
    return out
