"""The structured Gaussian guide of any Pyro model: one block per continuous latent site (in unconstrained space,
plates included), the precision on the chordal completion of the model's posterior dependency graph
(``pyro.infer.inspect.get_dependencies``, which marries co-parents; Vandenberghe & Andersen 2015, §4); it behaves
like :class:`~pyro.infer.autoguide.AutoMultivariateNormal` with a sparse precision."""
import networkx as nx
from pyro import poutine
from pyro.infer.autoguide.initialization import init_to_median
from pyro.infer.autoguide.utils import helpful_support_errors
from pyro.infer.inspect import get_dependencies
from pyro.ops.tensor_utils import periodic_repeat
from torch.distributions import biject_to

from ... import graph as dag_graph
from ...dgp.handoff import suspended
from .base import StructuredGaussianGuide, _DefaultInit, _SiteLayout
from .families import StructuredFamily, make_family
from .gaussians import Block

__all__ = ["AutoGenericGuide"]


class AutoGenericGuide(StructuredGaussianGuide):
    """:class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` for any Pyro model with continuous latent sites (the
    same arguments); a DAGDGP's inducing sites are then ordinary sites (for ``Trace_ELBO``, not DAGELBO)."""

    def _setup_layout(self, dag_sites, others, args, kwargs):
        if isinstance(self.init_loc_fn, _DefaultInit) and self.init_loc_fn.fn is not init_to_median:
            self.init_loc_fn.fn = init_to_median  # a generic model: AutoMultivariateNormal's default
            self._trace_prototype(args, kwargs)
        self._setup_generic(*args, **kwargs)

    def _setup_generic(self, *args, **kwargs):
        """Any Pyro model with continuous latent sites: the structure comes from the model's posterior
        dependency graph (``pyro.infer.inspect.get_dependencies``, which already marries co-parents), completed
        to a chordal graph; each latent site (in unconstrained space, plates included) is one block."""
        trace = self.prototype_trace
        latent, init = [], {}
        self._sites, offset = [], 0
        for name, site in trace.iter_stochastic_nodes():
            with helpful_support_errors(site):
                u = biject_to(site["fn"].support).inv(site["value"].detach()).detach()
            event_dim = site["fn"].event_dim + u.dim() - site["value"].dim()
            subsampled = []
            for frame in site["cond_indep_stack"]:
                if not frame.vectorized:
                    raise NotImplementedError("AutoStructuredGuide does not support sequential pyro.plate "
                                              f"(site {name!r}, plate {frame.name!r})")
                full_size = frame.full_size or frame.size
                if full_size != frame.size:  # parameters at the full size, as AutoNormal's
                    dim = frame.dim - event_dim
                    u = periodic_repeat(u, full_size, dim).contiguous()
                    subsampled.append((frame.name, dim))
            node = f"site{len(latent)}"
            self._sites.append(_SiteLayout(name, node, u.shape, event_dim, offset, subsampled, site))
            offset += u.numel()
            latent.append(name)
            init[name] = u
        self._site_names = {s.node: s.name for s in self._sites}
        if not latent:  # nothing to guide: an empty guide, like AutoNormal's
            self._index = None
            return
        with suspended(), poutine.block():  # keep the model's sites out of any enclosing trace
            deps = get_dependencies(self.model, args, kwargs)["posterior_dependencies"]
        ids = {s.name: s.node for s in self._sites}
        graph = nx.Graph()
        graph.add_nodes_from(ids.values())
        for a in latent:
            for b in deps.get(a, {}):
                if b in ids and b != a:
                    graph.add_edge(ids[a], ids[b])
        blocks = [Block(s.node, 1, s.size, s.offset) for s in self._sites]
        ref = trace.nodes[latent[0]]["value"]
        init_scale = 0.1 if self.init_scale is None else self.init_scale
        if isinstance(init_scale, dict):
            unknown = set(init_scale) - set(ids)
            if unknown:
                raise ValueError(f"init_scale names sites the model does not have: {sorted(unknown)}; latent sites "
                                 f"are {latent}")
            init_scale = {ids[k]: v for k, v in init_scale.items()}
            init_scale = {s.node: init_scale.get(s.node, 0.1) for s in self._sites}
        if self.precision == "mean_field":
            self.family = make_family("mean_field", self.backend, blocks, None, init_scale=init_scale,
                                      dtype=ref.dtype, device=ref.device)
        else:
            pattern = nx.complete_graph([b.node for b in blocks]) if self.precision == "full" else \
                dag_graph.chordal_completion(graph)
            order = dag_graph.perfect_elimination_order(pattern)
            self.family = StructuredFamily(blocks, pattern, order, self.backend, init_scale, ref.dtype, ref.device,
                                           self.conditioning)
        self._init_means(init)
        self._finish_layout()
