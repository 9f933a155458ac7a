"""AutoLatentEncoder: an amortised guide for the latent inputs of a :class:`~pyro_dag.DAGDGP`.

``q(h_i) = N(μ_φ(e_i), diag σ_φ(e_i)²)`` with ``e_i`` the observed values of case ``i`` at chosen nodes
(missing entries zeroed, with 0/1 indicators) and ``(μ_φ, σ_φ)`` a small MLP shared by all cases: amortised
inference of a per-case latent layer (Salimbeni, Dutordoir, Hensman & Deisenroth 2019, "Deep Gaussian processes
with importance-weighted variational inference", ICML, Sec. 3; the encoder of Kingma & Welling 2014, "Auto-encoding
variational Bayes"). New cases get their ``q(h)`` from one pass of the encoder instead of a fit.
"""
import inspect

import pyro
import pyro.distributions as dist
import torch
from pyro import poutine
from pyro.infer.autoguide import AutoGuide, AutoGuideList
from pyro.nn import PyroModule
from torch import nn

from ...dgp.handoff import suspended
from ...utils import renamed_argument
from .structured import AutoStructuredGuide

__all__ = ["AutoLatentEncoder", "AutoEncodedStructuredGuide"]


def _is_latent_input(msg):
    return msg["infer"].get("dag", {}).get("role") == "latent_input"


class AutoLatentEncoder(AutoGuide):
    """Amortised Gaussian guide for the ``"{h}.x"`` sites of a :class:`~pyro_dag.DAGDGP`'s latent inputs.

    ``q(h_i | e_i) = N(μ_φ(e_i), diag softplus(ρ_φ(e_i))²)``, ``e_i = [x_i, ỹ_i, m_i]`` the case's observed
    roots, its values at ``nodes`` (missing entries 0) and their 0/1 observation indicators, ``[μ_φ, ρ_φ]`` an MLP
    (tanh hidden layers). Encode the nodes that will be observed for new cases (``nodes=``): the encoder sees
    at prediction time what it saw in training.
    Its sites sit in the model's ``"data"`` plate, so minibatching scales them by n/B and only the subsampled
    cases are encoded. It guides the latent inputs only; :class:`AutoEncodedStructuredGuide` combines it with
    an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` for the rest of the model::

        guide = AutoEncodedStructuredGuide(model, precision="chordal")
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))

    :meth:`DAGDGP.predict <pyro_dag.DAGDGP.predict>` then encodes new cases from their ``data`` (one pass, no fit),
    and keeps marginal ancestral sampling through the structured part.

    :param model: the :class:`~pyro_dag.DAGDGP` (with ``latent_inputs``).
    :param list nodes: nodes whose observations are encoded (default: the model's observed nodes at set-up).
    :param tuple hidden: widths of the hidden layers (default ``(32, 32)``).
    :param float init_scale: initial ``σ`` (the output layer starts near ``μ = 0``, ``σ = init_scale``).
    :param callable create_plates: as in Pyro's autoguides (e.g. ``model.create_plates``).
    """

    is_latent_input = staticmethod(_is_latent_input)

    def __init__(self, model, *, nodes=None, hidden=(32, 32), init_scale=0.1, create_plates=None):
        from ...dgp import DAGDGP

        if not isinstance(model, DAGDGP):
            raise ValueError(f"AutoLatentEncoder needs the DAGDGP itself (it encodes the model's data), got "
                             f"{type(model).__name__}")
        if not model.latent_inputs:
            raise ValueError("AutoLatentEncoder: the model has no latent inputs; build it with "
                             "DAGDGP(graph, latent_inputs={'h': d}, ...)")
        hidden = tuple(int(h) for h in hidden)
        if any(h < 1 for h in hidden):
            raise ValueError(f"hidden widths must be positive integers, got {hidden}")
        if not float(init_scale) > 0:
            raise ValueError(f"init_scale must be a positive number, got {init_scale!r}")
        if nodes is not None:
            for w in nodes:
                if w not in model.gp_nodes:
                    raise ValueError(f"AutoLatentEncoder: node {w!r} is not a GP node of the model, so it has no "
                                     f"observations to encode (GP nodes: {model.gp_nodes})")
        super().__init__(poutine.block(model, expose_fn=_is_latent_input), create_plates=create_plates)
        self._dgp = (model,)   # not a submodule: its parameters stay the model's
        self._nodes = None if nodes is None else list(nodes)
        self.hidden = hidden
        self.init_scale = float(init_scale)
        self._signature = inspect.signature(model.forward)

    @property
    def dgp(self):
        """The :class:`~pyro_dag.DAGDGP` this guide encodes for."""
        return self._dgp[0]

    def _setup_prototype(self, *args, **kwargs):
        with suspended():
            super()._setup_prototype(*args, **kwargs)
        model = self.dgp
        self.nodes = list(model.observed_nodes) if self._nodes is None else self._nodes
        if not self.nodes:
            raise ValueError("AutoLatentEncoder: the model has no observed node to encode; pass data, or nodes=[...]")
        self.latent_dims = dict(model.latent_inputs)
        in_dim = sum(model.input_dims.values()) + 2 * sum(model.output_dims[w] for w in self.nodes)
        out_dim = 2 * sum(self.latent_dims.values())
        layers, width = [], in_dim
        for h in self.hidden:
            layers += [PyroModule[nn.Linear](width, h), nn.Tanh()]
            width = h
        last = PyroModule[nn.Linear](width, out_dim)
        with torch.no_grad():
            last.weight.mul_(0.01)
            last.bias.zero_()
            raw = torch.log(torch.expm1(torch.tensor(self.init_scale, dtype=torch.float64)))
            off = 0
            for d in self.latent_dims.values():
                last.bias[off + d:off + 2 * d] = float(raw)
                off += 2 * d
        layers.append(last)
        self.net = PyroModule[nn.Sequential](*layers).to(dtype=model.dtype, device=model.device)

    def features(self, X, obs, n):
        """``e`` ``[n, Σ d_r + 2 Σ d_w]``: the observed roots, then for each encoded node its values (missing
        entries 0) and 0/1 indicators.

        :param dict X: ``{root: [n, d_r]}``; :param dict obs: ``{node: (y [n, d_w], mask [n, d_w])}``, both as
            returned by :meth:`~pyro_dag.DAGDGP.checked_arguments`; nodes absent from ``obs`` count as unobserved.
        """
        model = self.dgp
        cols = [X[r] for r in model.root_nodes]
        for w in self.nodes:
            if w in obs:
                y, m = obs[w]
                cols += [torch.where(m, y, torch.zeros_like(y)), m.to(y.dtype)]
            else:
                z = torch.zeros((n, model.output_dims[w]), dtype=model.dtype, device=model.device)
                cols += [z, z]
        return torch.cat(cols, dim=-1)

    def encode(self, X, obs, n):
        """``{h: (loc [n, d_h], scale [n, d_h])}`` of ``q(h)`` for cases with roots ``X`` and observations ``obs``
        (see :meth:`features`)."""
        out = self.net(self.features(X, obs, n))
        result, off = {}, 0
        for h, d in self.latent_dims.items():
            loc, raw = out[..., off:off + d], out[..., off + d:off + 2 * d]
            result[h] = (loc, nn.functional.softplus(raw) + torch.finfo(loc.dtype).tiny)
            off += 2 * d
        return result

    def forward(self, *args, **kwargs):
        """Sample ``"{h}.x"`` for the (sub)sampled cases from the encoder; arguments are the model's.

        :returns: ``{site name: value}``.
        """
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        plates = self._create_plates(*args, **kwargs)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        X, n, obs = self.dgp.checked_arguments(bound.arguments["inputs"], bound.arguments["data"],
                                               bound.arguments["mask"])
        with plates["data"] as idx:
            obs_b = {w: (y[idx], m[idx]) for w, (y, m) in obs.items()}
            q = self.encode({r: x[idx] for r, x in X.items()}, obs_b, len(idx))
            return {f"{h}.x": pyro.sample(f"{h}.x", dist.Normal(loc, scale).to_event(1))
                    for h, (loc, scale) in q.items()}

    @torch.no_grad()
    def median(self, *args, **kwargs):
        """``{"{h}.x": loc [n, d_h]}``, the encoder's means for the cases of the model's arguments."""
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        X, n, obs = self.dgp.checked_arguments(bound.arguments["inputs"], bound.arguments["data"],
                                               bound.arguments["mask"])
        return {f"{h}.x": loc for h, (loc, _) in self.encode(X, obs, n).items()}


class AutoEncodedStructuredGuide(AutoGuideList):
    """An :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` for the inducing outputs (and any other latent
    site) of a :class:`~pyro_dag.DAGDGP` plus an :class:`AutoLatentEncoder` for its latent inputs, as one
    ``AutoGuideList`` that works under :class:`~pyro_dag.infer.DAGELBO` (its prototype is traced with the
    estimator suspended) and Pyro's ELBOs.

    ``guide[0]`` is the structured part, ``guide[1]`` the encoder; :meth:`DAGDGP.predict <pyro_dag.DAGDGP.predict>`
    uses the first's ``q(U)`` (marginal ancestral sampling) and the second's ``q(h)`` for new cases.

    :param model: the :class:`~pyro_dag.DAGDGP` (with ``latent_inputs``).
    :param str precision: ``"mean_field"``, ``"chordal"`` (default) or ``"full"`` (of the structured part;
        ``structure=`` is its old name).
    :param str backend: as for :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`.
    :param init_scale: the structured part's ``init_scale``.
    :param list nodes: the encoder's nodes. :param tuple hidden: the encoder's hidden widths.
    :param float encoder_init_scale: the encoder's initial ``σ``.
    :param callable create_plates: as in Pyro's autoguides (e.g. ``model.create_plates``).

    Example::

        guide = AutoEncodedStructuredGuide(model)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
        svi.step(inputs, data, subsample_size=64)
        pred = model.predict(guide, new_inputs, new_data)        # q(h) of the new cases from the encoder
    """

    def __init__(self, model, *, precision="chordal", backend="auto", init_scale=None, nodes=None, hidden=(32, 32),
                 encoder_init_scale=0.1, create_plates=None, structure=None):
        precision = renamed_argument("AutoEncodedStructuredGuide", "structure", "precision", structure, precision,
                                     "chordal")
        encoder = AutoLatentEncoder(model, nodes=nodes, hidden=hidden, init_scale=encoder_init_scale)
        super().__init__(model, create_plates=create_plates)
        self.append(AutoStructuredGuide(poutine.block(model, hide_fn=_is_latent_input), precision=precision,
                                        backend=backend, init_scale=init_scale))
        self.append(encoder)

    def _setup_prototype(self, *args, **kwargs):
        with suspended():
            super()._setup_prototype(*args, **kwargs)
