"""Centred inducing outputs for hidden nodes: a Pyro reparameteriser for MCMC with hyperpriors.

A :class:`~pyro_dag.DAGDGP` samples each node's inducing outputs whitened, ``"{w}.u" ~ N(0, I)`` with the values at
the inducing inputs ``U_w = Lᵀ u`` (``K(Z, Z) = Lᵀ L``, Perlino et al. 2026, arXiv:2607.09645, Eq. (80)). Whitening
decouples ``u`` from the kernel hyperparameters a priori, which is what NUTS needs where the data say little about
``U_w``. Where the data pin ``U_w`` (a hidden node whose child is observed with little noise) it is the wrong way
round: the whitened ``u = L⁻ᵀ U_w`` that keeps ``U_w`` in place moves with every change of the length-scale, so the
posterior of ``(u, ℓ)`` is a curved ridge that a mass matrix cannot straighten. The centred parameterisation samples
``U_w ~ N(0, K(Z, Z))`` directly (Papaspiliopoulos, Roberts & Sköld 2007, Statistical Science 22(1), for the
centred/non-centred trade-off; Betancourt & Girolami 2015, arXiv:1312.0906, for HMC).

:class:`CentredInducing` wraps a model: the same joint density, with each chosen ``"{w}.u"`` replaced by a site
``"{w}.u_centred"`` ``[d_w, M_w]`` (rows ``N(0, K_w(Z_w, Z_w))``) and ``"{w}.u"`` recorded as its deterministic
function. :meth:`CentredInducing.model_draws` maps draws back to the model's own sites, so
:func:`pyro_dag.diagnostics.to_inference_data` reads an MCMC run of the wrapper as it reads one of the model.
"""
import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.infer.reparam.reparam import Reparam

__all__ = ["CentredInducing", "CentredInducingReparam"]


class CentredInducingReparam(Reparam):
    """Reparameterise the whitened inducing outputs ``"{w}.u"`` of one node of a :class:`~pyro_dag.DAGDGP` as
    centred ones (see the module docstring).

    The new site ``"{w}.u_centred"`` ``[..., d_w, M_w]`` has rows ``N(0, Lᵀ L)`` with ``L`` the (jittered)
    upper Cholesky factor the model uses, and ``u = U L⁻¹`` row by row. The wrapped model's joint density at
    ``(U, rest)`` is the model's at ``(u(U), rest)`` times ``|det L|⁻ᵈ``, the Jacobian of the change of variables
    (it depends on the hyperparameters and is part of the centred prior), so both define the same posterior.

    :param model: the :class:`~pyro_dag.DAGDGP`, set up.
    :param str node: a GP node whose inducing outputs are sampled as ``"{node}.u"`` (not one collapsed by
        ``collapse="inducing"``).
    """

    def __init__(self, model, node):
        if node not in model.gp_nodes:
            raise ValueError(f"CentredInducingReparam: {node!r} is not a GP node of the model (GP nodes: "
                             f"{model.gp_nodes})")
        self.model, self.node = model, node

    def apply(self, msg):
        fn, value, name = msg["fn"], msg["value"], msg["name"]
        # the kernel's hyperparameters are read inside the model's call, so a PyroSample hyperparameter is the
        # draw this trace already has (PyroModule caches it for the call)
        _, L = self.model._node_cholesky(self.node)
        d, m = fn.event_shape
        # rows N(0, Lᵀ L); a batch of factors [*b, M, M] (a batch of hyperparameter draws) gives batch shape (*b,)
        loc = torch.zeros(d, m, dtype=L.dtype, device=L.device)
        prior = dist.MultivariateNormal(loc, scale_tril=L.mT.unsqueeze(-3)).to_event(1)
        centred = None if value is None else value @ L  # an initial value of u, in centred coordinates
        # as Pyro's own reparameterisers: a given value is passed on, observed only if the original was
        centred = pyro.sample(f"{name}_centred", prior, obs=centred, infer={"is_observed": bool(msg["is_observed"])})
        # each row of U is the row of u times L (U = u L), so u = U L⁻¹
        u = torch.linalg.solve_triangular(L, centred, upper=True, left=False)
        return {"fn": dist.Delta(u, event_dim=2), "value": u, "is_observed": True}


class CentredInducing:
    """A :class:`~pyro_dag.DAGDGP` with the inducing outputs of some nodes centred (see the module docstring): a
    model for ``MCMC(NUTS(CentredInducing(model)))``, called like the model.

    :param model: the :class:`~pyro_dag.DAGDGP`, set up (``model.setup(inputs, data)``).
    :param nodes: the nodes to centre; default: the GP nodes that are observed nowhere and whose inducing outputs
        are sites ``"{w}.u"`` (the hidden nodes, whose values only their children's data pin).

    Sites: ``"{w}.u_centred"`` ``[d_w, M_w]`` instead of ``"{w}.u"`` for each node in :attr:`nodes`; the others
    as in the model.
    """

    def __init__(self, model, nodes=None):
        if not getattr(model, "is_setup", False):
            raise RuntimeError("CentredInducing: set the model up first (model.setup(inputs, data)), so that its "
                               "observed nodes and inducing inputs are known")
        if nodes is None:
            observed = set(model.observed_nodes or ())
            nodes = [w for w in model.gp_nodes if w not in observed]
        nodes = list(nodes)
        if not nodes:
            raise ValueError("CentredInducing: no node to centre (every GP node is observed); pass nodes=[...]")
        self.model, self.nodes = model, nodes
        # CentredInducingReparam rejects a node that is not a GP node
        self._reparam = poutine.reparam(model, config={f"{w}.u": CentredInducingReparam(model, w) for w in nodes})

    def __call__(self, *args, **kwargs):
        return self._reparam(*args, **kwargs)

    def model_draws(self, samples, *args, **kwargs):
        """The draws of the wrapped model's sites (e.g. ``mcmc.get_samples()``) as draws of the model's own:
        ``"{w}.u_centred"`` replaced by ``"{w}.u"`` ``[S, d_w, M_w]``, computed draw by draw with that draw's
        hyperparameters; the other sites unchanged.

        :param dict samples: ``{site: [S, ...]}``. :param args: the model's arguments (inputs, data, mask).
        """
        keys = [f"{w}.u_centred" for w in self.nodes]
        missing = [k for k in keys if k not in samples]
        if missing:
            raise KeyError(f"CentredInducing.model_draws: samples lack the sites {missing}")
        num = next(iter(samples.values())).shape[0]
        us = {w: [] for w in self.nodes}
        with torch.no_grad():
            for s in range(num):
                draw = {k: v[s] for k, v in samples.items()}
                trace = poutine.trace(poutine.condition(self._reparam, data=draw)).get_trace(*args, **kwargs)
                for w in self.nodes:
                    us[w].append(trace.nodes[f"{w}.u"]["value"])
        out = {k: v for k, v in samples.items() if k not in keys}
        out.update({f"{w}.u": torch.stack(v) for w, v in us.items()})
        return out
