"""Hyperpriors on a :class:`~pyro_dag.DAGDGP`'s kernel and likelihood hyperparameters (for MCMC).

By default the kernel variances and length-scales and the likelihood noise are learnable ``PyroParam`` s (type-II
maximum likelihood under SVI). :func:`set_hyperpriors` turns them into ``PyroSample`` sites with priors, so that
``MCMC(NUTS(model))`` samples them with the inducing outputs (and a guide guides them); it is what
``DAGDGP(..., priors="weakly_informative")`` applies when the model is set up.

``"weakly_informative"`` (for inputs and observations on a unit scale, e.g. standardised):

* kernel variances ``σ² ~ LogNormal(0, 1)``;
* length-scales ``ℓ ~ LogNormal(0, 1)`` (per dimension for ARD kernels);
* Gaussian noise variances ``τ² ~ LogNormal(-3, 1.5)`` (median 0.05), Student-t scales ``LogNormal(-1.5, 1)``.

Sites are named by the module path, e.g. ``"kernels.w3.base.lengthscale"``, ``"likelihoods.w3.variance"``.

Frozen parameters (``requires_grad=False``, e.g. by :func:`pyro_dag.utils.freeze`) stay fixed, and so do the
likelihoods of nodes observed nowhere (they never enter the model).

``fix_latent_variance=True`` keeps the kernel variances of the unobserved GP nodes fixed (no prior): a hidden
node's scale is not identified by the data (scaling ``f_a`` by ``c`` is undone, up to the child's inducing inputs,
by scaling the child's length-scale by ``c``), so with a prior on both NUTS has to travel a long ridge in
``(log σ²_a, log ℓ_child)`` and its chains do not mix; fixing the scale, the usual identifiability constraint of a
latent variable model, removes that ridge.

``fix_latent_kernels=True`` keeps every kernel hyperparameter of the unobserved GP nodes fixed at its current value
(the variance and the length-scales: set them when building the kernel, e.g. ``kernels.Matern32(lengthscale=3.0)``).
A hidden node is identified only up to a monotone warping that its child's GP undoes (Perlino et al. 2026,
arXiv:2607.09645, Sec. 3), so its length-scale is as weakly identified as its scale; with it sampled, NUTS chains on
a latent chain or collider disagree between starts (``benchmarks/README.md``, "NUTS mixing"). The hidden node's
kernel then fixes the prior over the warping, and the observed nodes' kernels and noises keep their priors.
"""
import pyro.distributions as dist
import torch
from pyro.nn import PyroSample

__all__ = ["WEAKLY_INFORMATIVE", "set_hyperpriors"]

#: ``{parameter name: (loc, scale)}`` of the LogNormal priors of ``"weakly_informative"``; ``"noise"`` is the
#: Gaussian likelihood's variance, ``"scale"`` the Student-t scale.
WEAKLY_INFORMATIVE = {"kernel.variance": (0.0, 1.0), "kernel.lengthscale": (0.0, 1.0),
                      "likelihood.variance": (-3.0, 1.5), "likelihood.scale": (-1.5, 1.0)}


class _LogNormalPrior:
    """``LogNormal(loc, scale)`` over a parameter of shape ``shape``, in the dtype/device of the module's anchor
    buffer (so that ``model.double()`` / ``model.to(device)`` after :func:`set_hyperpriors` are followed)."""

    def __init__(self, loc, scale, shape):
        self.loc, self.scale, self.shape = float(loc), float(scale), tuple(shape)

    def __call__(self, module):
        anchor = module._prior_anchor
        loc = torch.full(self.shape, self.loc, dtype=anchor.dtype, device=anchor.device)
        scale = torch.full(self.shape, self.scale, dtype=anchor.dtype, device=anchor.device)
        return dist.LogNormal(loc, scale).to_event(len(self.shape))

    def __repr__(self):
        return f"LogNormal({self.loc}, {self.scale}) of shape {self.shape}"


def set_hyperpriors(model, priors="weakly_informative", *, fix_latent_variance=False, fix_latent_kernels=False):
    """Put priors on the learnable kernel and likelihood hyperparameters of a set-up model.

    :param model: a :class:`~pyro_dag.DAGDGP`, set up (kernels bound, so ARD length-scales have their shape).
    :param priors: ``"weakly_informative"`` (see the module docstring) or a dict with the same keys as
        :data:`WEAKLY_INFORMATIVE` giving ``(loc, scale)`` of LogNormal priors (missing keys keep the default).
    :param bool fix_latent_variance: leave the kernel variances of the GP nodes observed nowhere as fixed
        (non-learnable) parameters at their current values (see the module docstring).
    :param bool fix_latent_kernels: leave every kernel hyperparameter (variances, length-scales, ...) of the GP nodes
        observed nowhere fixed at its current value (implies ``fix_latent_variance``; see the module docstring).
    :returns: the list of site names that now have priors.
    """
    if isinstance(priors, str):
        if priors != "weakly_informative":
            raise ValueError(f"priors must be 'weakly_informative' or a dict of (loc, scale) LogNormal priors "
                             f"keyed by {sorted(WEAKLY_INFORMATIVE)}, got {priors!r}")
        table = dict(WEAKLY_INFORMATIVE)
    elif isinstance(priors, dict):
        unknown = sorted(set(priors) - set(WEAKLY_INFORMATIVE))
        if unknown:
            raise ValueError(f"priors has unknown keys {unknown}; use {sorted(WEAKLY_INFORMATIVE)}")
        table = {**WEAKLY_INFORMATIVE, **priors}
    else:
        raise ValueError(f"priors must be 'weakly_informative' or a dict, got {type(priors).__name__}")
    if not getattr(model, "is_setup", False):
        raise RuntimeError("set_hyperpriors: set the model up first (model.setup(inputs, data)), so that the "
                           "kernels know their input dimensions")
    sites = []
    observed = set(model.observed_nodes or ())
    if fix_latent_variance or fix_latent_kernels:
        for w in model.gp_nodes:
            if w in observed:
                continue
            for module in model.kernels[w].modules():
                names = module.__dict__.get("_pyro_params", {})
                for name in (names if fix_latent_kernels else ["variance"] if "variance" in names else []):
                    value = module._parameters.get(f"{name}_unconstrained")
                    if value is not None:
                        value.requires_grad_(False)
    roots = [("kernel", w, model.kernels[w]) for w in model.gp_nodes]
    roots += [("likelihood", w, model.likelihoods[w]) for w in model.gp_nodes if w in observed]
    for group, w, root in roots:
        for prefix, module in root.named_modules():
            params = module.__dict__.get("_pyro_params", {})
            for name in list(params):
                key = f"{group}.{name}"
                if key not in table:
                    continue
                value = module._parameters.get(f"{name}_unconstrained")
                if value is None or not value.requires_grad:
                    continue
                shape = tuple(getattr(module, name).shape)
                if "_prior_anchor" not in module._buffers:
                    module.register_buffer("_prior_anchor", torch.zeros((), dtype=value.dtype, device=value.device),
                                           persistent=False)
                delattr(module, name)
                loc, scale = table[key]
                setattr(module, name, PyroSample(_LogNormalPrior(loc, scale, shape)))
                path = ".".join(p for p in ("kernels" if group == "kernel" else "likelihoods", w, prefix, name) if p)
                sites.append(path)
    return sites
