"""The structured Gaussian guide of a :class:`~pyro_dag.DAGDGP`: one block per node's whitened inducing outputs, the
precision on the chordal completion of the moralised ancestral graph of the observed nodes (DAG-SVI; Perlino,
Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed Acyclic Graphs", arXiv:2607.09645,
Sec. 2.4, Eqs. (6) and (75)); the model's other continuous sites are guided by an inner
:class:`~pyro.infer.autoguide.AutoNormal`."""
import torch
from pyro import poutine
from pyro.infer.autoguide import AutoNormal
from pyro.infer.autoguide.initialization import init_to_feasible

from ...dgp import DAGDGP
from ...dgp.handoff import suspended
from .base import StructuredGaussianGuide, _DefaultInit, _SiteLayout
from .families import make_family
from .gaussians import Block
from .scales import initial_scales

__all__ = ["AutoDAGGuide"]


class AutoDAGGuide(StructuredGaussianGuide):
    """:class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` for models that hold a :class:`~pyro_dag.DAGDGP` (the
    same arguments); refuses a model without one."""

    def _setup_layout(self, dag_sites, others, args, kwargs):
        if not dag_sites:
            raise ValueError(f"{type(self).__name__}: the model has no DAGDGP inducing site; use AutoStructuredGuide "
                             "(or AutoGenericGuide) for other Pyro models")
        self._setup_dag(dag_sites, others, *args, **kwargs)

    def _setup_dag(self, dag_sites, others, *args, **kwargs):
        keys = {site["infer"]["dag"]["model_key"] for _, site in dag_sites}
        if len(keys) > 1:
            raise ValueError("AutoStructuredGuide supports one DAGDGP per model; found several. Use one guide per "
                             "DAGDGP with pyro.infer.autoguide.AutoGuideList and poutine.block")
        meta0 = dag_sites[0][1]["infer"]["dag"]
        self._model_key = meta0["model_key"]
        self._graph = meta0["graph"]
        self._observed = list(meta0["observed"])
        ref = dag_sites[0][1]["value"]
        blocks, offset, self._sites = [], 0, []
        for name, site in dag_sites:
            meta = site["infer"]["dag"]
            d, m = meta["shape"]
            blocks.append(Block(meta["node"], d, m, offset))
            self._sites.append(_SiteLayout(name, meta["node"], (d, m), 2, offset, (), site))
            offset += d * m
        self._site_names = {b.node: name for b, (name, _) in zip(blocks, dag_sites)}
        init_scale = self._data_driven_scales(args, kwargs) if self.init_scale is None else self.init_scale
        self.family = make_family(self.precision, self.backend, blocks, self._graph, observed=self._observed,
                                  init_scale=init_scale, dtype=ref.dtype, device=ref.device,
                                  conditioning=self.conditioning)
        self._init_means({name: site["value"].detach() for name, site in dag_sites})
        self._index = None
        if others:
            hidden = [name for name, _ in dag_sites]
            init = init_to_feasible if isinstance(self.init_loc_fn, _DefaultInit) else self.init_loc_fn
            self.other_guide = AutoNormal(poutine.block(self.model, hide=hidden), init_loc_fn=init, init_scale=0.1)
            with suspended():
                self.other_guide._setup_prototype(*args, **kwargs)
            names = list(self.prototype_trace.nodes)
            self._others_first = names.index(others[0]) < names.index(dag_sites[0][0])
        self._finish_layout()

    def _data_driven_scales(self, args, kwargs):
        """The default initial scales of a DAGDGP's whitened inducing outputs: for each observed node with a Gaussian
        likelihood, the scale its data implies (:func:`pyro_dag.infer.training.initial_scales`); 1.0 (the prior's)
        for the other nodes, and for models that only call a DAGDGP inside a function of their own."""
        model = self._user_model[0]
        if not isinstance(model, DAGDGP):
            return 1.0
        inputs = args[0] if args else kwargs.get("inputs")
        data = args[1] if len(args) > 1 else kwargs.get("data")
        mask = args[2] if len(args) > 2 else kwargs.get("mask")
        with suspended(), poutine.block(), torch.no_grad():
            return initial_scales(model, inputs, data, mask)
