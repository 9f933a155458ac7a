"""AutoStructuredGuide: a Gaussian guide over all whitened inducing outputs of a DAGDGP (digest-000 §2.2).

The family is chosen by ``structure``:

* ``"mean_field"`` -- DAG-VI: one independent full-covariance Gaussian per node (digest-000 Eq. 77);
* ``"chordal"`` and ``"full"`` -- DAG-SVI (see :mod:`pyro_dag.infer.autoguide.families`).

The guide reads the DAG from the model's trace: every inducing site ``"{w}.u"`` of a
:class:`~pyro_dag.DAGDGP` carries ``infer["dag"]`` metadata (node, graph, observed nodes). Other
continuous latent sites of the model (e.g. kernel hyperparameters given priors with ``PyroSample``) are
guided by an :class:`~pyro.infer.autoguide.AutoNormal` over them.

On a model with no DAGDGP in it, the guide works on any continuous latent sites: the structure is the
posterior dependency graph from ``pyro.infer.inspect.get_dependencies`` completed to a chordal graph, with
one block per latent site (in unconstrained space), and the same dense / sparse machinery (use it with
``Trace_ELBO``).
"""
from contextlib import ExitStack

import pyro
import pyro.distributions as dist
import torch
from pyro.distributions.util import sum_rightmost
from pyro import poutine
from pyro.distributions.torch_distribution import TorchDistribution
from pyro.infer.autoguide import AutoGuide, AutoNormal
from torch.distributions import biject_to, constraints

from ... import graph as dag_graph

from ..context import current_estimator, suspended
from .families import _assign, make_family
from .posteriors import Block

__all__ = ["AutoStructuredGuide", "InducingDistribution"]


class InducingDistribution(TorchDistribution):
    """A Pyro distribution wrapping an inducing posterior: event shape ``[P]``, reparameterised."""

    arg_constraints = {}
    support = constraints.real_vector
    has_rsample = True

    def __init__(self, posterior, validate_args=False):
        self.posterior = posterior
        super().__init__(torch.Size(), torch.Size([posterior.size]), validate_args=validate_args)

    def rsample(self, sample_shape=torch.Size()):
        return self.posterior.rsample(sample_shape)

    def log_prob(self, value):
        return self.posterior.log_prob(value)


class AutoStructuredGuide(AutoGuide):
    """Gaussian guide over the whitened inducing outputs of a :class:`~pyro_dag.DAGDGP`.

    Works with :class:`~pyro_dag.infer.DAGELBO` (the paper's estimator: analytic KL and marginal
    ancestral sampling) and with Pyro's ``Trace_ELBO`` and ``Predictive`` (it then samples the
    ``"{w}.u"`` sites jointly through an auxiliary site).

    :param callable model: a :class:`~pyro_dag.DAGDGP` (or a model that calls exactly one).
    :param str structure: ``"mean_field"`` (DAG-VI), ``"chordal"`` or ``"full"`` (DAG-SVI).
    :param str backend: ``"dense"``, ``"sparse"`` or ``"auto"`` (structured families only).
    :param init_scale: initial posterior standard deviation of the whitened inducing outputs: a number, or
        ``{node: number}`` (nodes not named get 1.0, the prior's).
    :param callable create_plates: as in Pyro's autoguides.
    :param str name: prefix of the guide's parameters in Pyro's parameter store (default the class name;
        give distinct names to guides that coexist in one parameter store).

    Example::

        guide = AutoStructuredGuide(model, structure="mean_field")
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
    """

    def __init__(self, model, structure="chordal", backend="auto", init_scale=1.0, create_plates=None, name=None):
        scales = init_scale.values() if isinstance(init_scale, dict) else [init_scale]
        if not all(isinstance(v, (int, float)) and v > 0 for v in scales):
            raise ValueError(f"init_scale must be a positive number or a dict {{node: number}}, got {init_scale!r}")
        self.structure = structure
        self.backend = backend
        self.init_scale = init_scale
        make_family(structure, backend, None, None, check_only=True)
        super().__init__(model, create_plates=create_plates)
        if name is not None:  # parameter-store prefix; two guides with one name would share parameters
            self._pyro_name = name
        self.family = None
        self.other_guide = None

    def _setup_prototype(self, *args, **kwargs):
        with suspended():
            super()._setup_prototype(*args, **kwargs)
        trace = self.prototype_trace
        dag_sites, others = [], []
        for name, site in trace.iter_stochastic_nodes():
            meta = site["infer"].get("dag")
            if meta is not None and meta["role"] == "inducing":
                dag_sites.append((name, site))
            else:
                others.append(name)
        if not dag_sites:
            self._setup_generic(*args, **kwargs)
            return
        keys = {site["infer"]["dag"]["model_key"] for _, site in dag_sites}
        if len(keys) > 1:
            raise ValueError("AutoStructuredGuide supports one DAGDGP per model; found several. Use one guide per "
                             "DAGDGP with pyro.infer.autoguide.AutoGuideList and poutine.block")
        meta0 = dag_sites[0][1]["infer"]["dag"]
        self._model_key = meta0["model_key"]
        self._graph = meta0["graph"]
        self._observed = list(meta0["observed"])
        ref = dag_sites[0][1]["value"]
        blocks, offset = [], 0
        for name, site in dag_sites:
            meta = site["infer"]["dag"]
            d, m = meta["shape"]
            blocks.append(Block(meta["node"], d, m, offset))
            offset += d * m
        self._site_names = {b.node: name for b, (name, _) in zip(blocks, dag_sites)}
        self.family = make_family(self.structure, self.backend, blocks, self._graph, observed=self._observed,
                                  init_scale=self.init_scale, dtype=ref.dtype, device=ref.device)
        if others:
            hidden = [name for name, _ in dag_sites]
            self.other_guide = AutoNormal(poutine.block(self.model, hide=hidden), init_scale=0.1)
            with suspended():
                self.other_guide._setup_prototype(*args, **kwargs)

    def _setup_generic(self, *args, **kwargs):
        """Any Pyro model with continuous latent sites: the structure comes from the model's posterior
        dependency graph (``pyro.infer.inspect.get_dependencies``, which already marries co-parents), completed
        to a chordal graph; each latent site (in unconstrained space, plates included) is one block."""
        import networkx as nx
        from pyro.infer.inspect import get_dependencies

        self._generic = True
        latent = []
        for name, site in self.prototype_trace.iter_stochastic_nodes():
            if site["fn"].support.is_discrete:
                raise ValueError(f"AutoStructuredGuide: site {name!r} is discrete; it supports continuous latent "
                                 "sites only (enumerate or marginalise discrete sites)")
            latent.append(name)
        with suspended(), poutine.block():  # keep the model's sites out of any enclosing trace
            deps = get_dependencies(self.model, args, kwargs)["posterior_dependencies"]
        ids = {name: f"site{i}" for i, name in enumerate(latent)}
        graph = nx.Graph()
        graph.add_nodes_from(ids[n] for n in latent)
        for a in latent:
            for b in deps.get(a, {}):
                if b in ids and b != a:
                    graph.add_edge(ids[a], ids[b])
        blocks, offset, self._unconstrained_shapes = [], 0, {}
        for name in latent:
            site = self.prototype_trace.nodes[name]
            u = biject_to(site["fn"].support).inv(site["value"].detach())
            self._unconstrained_shapes[name] = u.shape
            blocks.append(Block(ids[name], 1, u.numel(), offset))
            offset += u.numel()
        self._site_names = {ids[n]: n for n in latent}
        ref = self.prototype_trace.nodes[latent[0]]["value"]
        if self.structure == "mean_field":
            self.family = make_family("mean_field", self.backend, blocks, None, init_scale=self.init_scale,
                                      dtype=ref.dtype, device=ref.device)
        else:
            from .families import StructuredFamily

            pattern = nx.complete_graph([b.node for b in blocks]) if self.structure == "full" else \
                dag_graph.chordal_completion(graph)
            order = dag_graph.perfect_elimination_order(pattern)
            self.family = StructuredFamily(blocks, pattern, order, self.backend, self.init_scale, ref.dtype,
                                           ref.device)
        # Start at the prototype's (feasible) values, like Pyro's autoguides.
        with torch.no_grad():
            for b in self.family.blocks:
                name = self._site_names[b.node]
                site = self.prototype_trace.nodes[name]
                u = biject_to(site["fn"].support).inv(site["value"].detach()).reshape(-1)
                _assign(self.family.locs, b.node, u)

    def _forward_generic(self, posterior):
        latent = pyro.sample(f"_{self._pyro_name}_latent", InducingDistribution(posterior),
                             infer={"is_auxiliary": True})
        result = {}
        for b in posterior.blocks:
            name = self._site_names[b.node]
            site = self.prototype_trace.nodes[name]
            u = latent[..., b.slice].reshape(latent.shape[:-1] + self._unconstrained_shapes[name])
            transform = biject_to(site["fn"].support)
            value = transform(u)
            log_density = transform.inv.log_abs_det_jacobian(value, u)
            log_density = sum_rightmost(log_density, log_density.dim() - value.dim() + site["fn"].event_dim)
            with ExitStack() as stack:
                for frame in site["cond_indep_stack"]:
                    if frame.vectorized:
                        stack.enter_context(self.plates[frame.name])
                result[name] = pyro.sample(name, dist.Delta(value, log_density=log_density,
                                                            event_dim=site["fn"].event_dim))
        return result

    def _check_prototype(self, part_trace):
        # Called by the inner AutoNormal (as by AutoGuideList): it must not guide inducing sites.
        for name, site in part_trace.iter_stochastic_nodes():
            if site["infer"].get("dag", {}).get("role") == "inducing":
                raise RuntimeError(f"inducing site {name!r} is guided twice")

    @property
    def blocks(self):
        """The block layout (:class:`~pyro_dag.infer.autoguide.posteriors.Block` per GP node)."""
        return self.family.blocks

    def inducing_posterior(self):
        """The current ``q(U)`` as an :class:`~pyro_dag.infer.autoguide.posteriors.InducingPosterior`."""
        if self.family is None:
            raise RuntimeError("the guide has not been run yet: call it once (or run an SVI step) to set it up")
        return self.family.posterior()

    def forward(self, *args, **kwargs):
        """Sample the inducing sites (or, under DAGELBO, publish ``q(U)``) and any other latent sites."""
        if self.prototype_trace is None:
            self._setup_prototype(*args, **kwargs)
        self._create_plates(*args, **kwargs)  # shared with the inner AutoNormal, as in AutoGuideList
        posterior = self.family.posterior()
        if getattr(self, "_generic", False):
            return self._forward_generic(posterior)
        estimator = current_estimator()
        result = {}
        if estimator is not None:
            estimator.publish(self._model_key, posterior)
        else:
            latent = pyro.sample(f"_{self._pyro_name}_latent", InducingDistribution(posterior),
                                 infer={"is_auxiliary": True})
            for node, value in posterior.split(latent).items():
                result[self._site_names[node]] = pyro.sample(self._site_names[node], dist.Delta(value, event_dim=2))
        if self.other_guide is not None:
            result.update(self.other_guide(*args, **kwargs))
        return result

    @torch.no_grad()
    def warm_start(self, source, reset_latent_scale=1.0):
        """Initialise this guide from a trained guide (the paper's recipe: mean field first, digest-000 §2.13).

        Means are copied for every node. Observed nodes keep the source's covariance (as the diagonal block of
        the precision, ``Λ_ww = S_w⁻¹``, with no coupling between blocks). Latent (never observed) nodes get
        their scale reset to ``reset_latent_scale`` (the prior's by default): a mean-field fit collapses the
        posterior variance of co-parents, and copying it would trap the structured guide in that collapsed
        solution (issue 3, pitfall 3). Pass ``reset_latent_scale=None`` to copy every covariance.

        :param source: a set-up :class:`AutoStructuredGuide` for the same model (any structure).
        """
        if self.family is None or source.family is None:
            raise RuntimeError("run both guides once (e.g. one SVI step) before warm-starting")
        src = source.inducing_posterior()
        observed = set(self._observed)
        for b in self.family.blocks:
            loc = src.mean_blocks()[b.node].reshape(-1)
            if reset_latent_scale is not None and b.node not in observed:
                cov = torch.eye(b.size, dtype=loc.dtype, device=loc.device) * reset_latent_scale ** 2
            else:
                cov = src.covariance_block(b.node)
            if self.structure == "mean_field":
                self.family.set_node(b.node, loc, torch.linalg.cholesky(cov))
            else:
                self.family.set_node(b.node, loc, torch.linalg.cholesky(torch.linalg.inv(cov)))
        if self.structure != "mean_field":
            self.family.zero_offdiagonal()
        return self

    @torch.no_grad()
    def median(self, *args, **kwargs):
        """Posterior means of the inducing sites (the Gaussian's median)."""
        means = self.inducing_posterior().mean_blocks()
        out = {self._site_names[w]: v for w, v in means.items()}
        if self.other_guide is not None:
            out.update(self.other_guide.median(*args, **kwargs))
        return out
