"""DAGDGP: a deep Gaussian process on a directed acyclic graph, as a Pyro model.

Every non-root node ``w`` carries an independent sparse GP ``f_w`` over the concatenated values of its
parents, with a node-wise fusion kernel (:mod:`pyro_dag.kernels`). Roots hold design matrices. Any
non-root node may carry noisy, partially observed data with its own likelihood.

Reference: F. L. Perlino, O. Hamelijnck, A. M. Johansen, T. Damoulas (2026), "Deep Gaussian Processes on
Directed Acyclic Graphs", arXiv:2607.09645: the model is Sec. 2, Eqs. (2)-(4); the sparse variational
family Eq. (5) and the whitened conditional Eq. (80) (App. E.3).
"""
import contextlib
import operator
import uuid

import networkx as nx
import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule, PyroParam
from torch import nn
from torch.distributions import constraints

from .. import graph as dag
from ..diagnostics.collapse import check_prior_collapse
from ..gp.collapsed import CollapsedGaussianLeaf
from ..gp.inducing import init_inducing_inputs
from ..gp.likelihoods import Gaussian, get_likelihood
from ..gp.noise import choose_noise_many
from ..kernels import Concat, ParentSpec, RBF, as_fusion_kernel
from ..param_store import check_param_store
from ..priors import set_hyperpriors
from ..progress import setup_progress
from ..utils import freeze
from .collapse import CollapsedParameterisation
from .conditionals import NodeConditionals
from .handoff import current_estimator, suspended
from .inputs import DAGInputError, InputChecks, positive_number
from .scale import scale_warnings
from .observed_inputs import AUTO_INDUCING_EXACT, collapsible_nodes
from .prediction import Prediction

__all__ = ["DAGDGP", "AUTO_INDUCING"]

#: ``num_inducing="auto"``: every case as an inducing input, up to this many.
AUTO_INDUCING = 64



#: The remedies the parameter-store collision warning names.
PARAM_STORE_FIXES = ("Call pyro.clear_param_store() before building a new model, give each model its own name "
                     "(DAGDGP(..., name='b')), or call pyro.settings.set(module_local_params=True) before building "
                     "the models.")


class DAGDGP(InputChecks, NodeConditionals, CollapsedParameterisation, Prediction, PyroModule):
    r"""A deep Gaussian process on a DAG (Perlino et al. 2026, arXiv:2607.09645, Sec. 2, Eq. (2); Eq. (5)).

    ``F_w^{(i)} = f_w({F_p^{(i)}}_{p ∈ Pa(w)})`` with ``f_w ~ GP(0, K_w)`` for each non-root ``w``; roots
    hold design matrices. Each GP is sparse, with ``M_w`` inducing inputs ``Z_w`` in the node's own input
    space (the concatenated parent state, parents in declaration order) and whitened inducing outputs
    ``V_w ~ N(0, I)`` of shape ``[d_w, M_w]`` (``U_w = R_w V_w`` with ``R_w`` the upper-triangular Cholesky
    factor of ``K_w(Z_w, Z_w)``, see :mod:`pyro_dag.gp.conditional`); vector-valued
    nodes have independent outputs that share ``Z_w``.

    Sample sites (each carries ``infer={"dag": {...}}`` metadata with its role, node and the graph):

    * ``"{w}.u"`` -- whitened inducing outputs ``[d_w, M_w]``, prior ``N(0, I)``, outside any plate;
    * ``"{w}.f"`` -- node values ``[B, d_w]`` in the ``"data"`` plate: a deterministic site by default
      (values are drawn from ``p(F_w | F_Pa(w), U_w)`` by reparameterisation, the variational family
      ``q(F, U) = q(U) p(F | U)`` of Eq. (5)); with ``sample_f=True`` (for MCMC) the node values are
      non-centred, ``f = μ(U, F_Pa) + sd(U, F_Pa) · ε`` with ``"{w}.eps"`` ``[B, d_w]``, prior ``N(0, I)``, the
      sample site and ``"{w}.f"`` deterministic (``sample_f="centred"``: ``"{w}.f"`` itself is the sample site,
      a funnel for NUTS when ``sd`` is small);
    * ``"{w}.y"`` -- observations ``[B, d_w]`` in the ``"data"`` plate, masked where missing (with
      ``collapse="inducing"``, an observed Gaussian node's ``"{w}.y"`` is one site ``[n, d_w]`` outside the plate,
      its marginal over the inducing outputs, and a node with children samples ``"{w}.z"`` ``[d_w, M_w]``
      instead of ``"{w}.u"``; see ``collapse``);
    * ``"{h}.x"`` -- for each latent input ``h`` (see ``latent_inputs``), its per-case values ``[B, d_h]`` in the
      ``"data"`` plate, prior ``N(0, I)`` (role ``"latent_input"`` in the metadata), sampled before the
      inducing sites.

    The ``"data"`` plate (dim -1) supports ``subsample_size`` (minibatching: the likelihood and the latent
    inputs' log-densities, hence their KL, are scaled by n/B).

    **Latent inputs** (hidden confounders): a root named in ``latent_inputs={"h": d_h}`` has no design
    matrix; its values ``h_i ~ N(0, I_{d_h})``, one per case, are latent and feed its children like any root
    (the per-case latent layer of Salimbeni, Dutordoir, Hensman & Deisenroth 2019, "Deep Gaussian processes with
    importance-weighted variational inference", ICML; used for a confounder in Perlino et al. 2026, Sec. 6, with
    its KL added as in App. E.3.4). Any Pyro guide with per-case parameters guides ``"{h}.x"``:
    :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` puts a per-case Gaussian on it (an inner
    :class:`~pyro.infer.autoguide.AutoNormal`, local parameters that follow the subsample), under
    :class:`~pyro_dag.infer.DAGELBO` (which conditions its ancestral sampling on the guide's draw) and under
    ``Trace_ELBO``. As with any Pyro autoguide with local parameters, the guide's ``"data"`` plate draws the
    minibatch (the model replays it) with the size of the guide's first call; to change it between calls (e.g.
    minibatch training, then a full-batch ELBO), give the guide the model's plate,
    ``AutoStructuredGuide(model, create_plates=model.create_plates)`` (:meth:`create_plates`). For new cases,
    :meth:`predict` infers them from the nodes observed for those cases (:meth:`infer_latent_inputs`). To feed
    different dimensions to different children, use one latent input per dimension (e.g. ``{"h1": 1, "h2": 1}``;
    the prior factorises, so this is the same model).

    Under :class:`~pyro_dag.infer.DAGELBO` the same ``forward`` evaluates the paper's estimator
    (marginal ancestral sampling, closed-form expected log-likelihood) instead.

    **dtype and device** follow the module: call ``model.double()`` / ``model.to("cuda")``; inputs and data
    (tensors, numpy arrays, or pandas DataFrames / Series with numeric columns) are converted to the module's
    dtype and device.

    **Inducing inputs** are initialised at the first call (or by :meth:`setup`) from the data: blocks of
    roots and observed parents by k-means++ on the cases, blocks of latent parents by scrambled-Sobol
    quantiles of the parent's prior marginal (:mod:`pyro_dag.gp.inducing`); pass ``inducing_inputs`` to
    override.

    :param networkx.DiGraph graph: the DAG; nodes are strings (no ``"."``).
    :param dict kernels: ``{node: kernel}``; a base kernel acts on the concatenated parents
        (:class:`~pyro_dag.kernels.Concat`), a fusion kernel is bound to the parents. Default: an ARD RBF.
    :param num_inducing: ``M_w``, an int, ``"auto"`` (the default, resolved at set-up: every case up to
        :data:`AUTO_INDUCING` of them, and up to :data:`~pyro_dag.dgp.observed_inputs.AUTO_INDUCING_EXACT` for a
        node whose inputs are all observed and whose likelihood is Gaussian, which
        :func:`~pyro_dag.infer.train` fits exactly: :func:`~pyro_dag.dgp.observed_inputs.collapsible_nodes`) or
        ``{node: int or "auto"}`` (a node missing from the dict gets 16).
    :param dict likelihoods: ``{node: Likelihood or name}``; default a Gaussian with learned noise.
    :param dict output_dims: ``{node: d_w}`` (default: the node attribute ``"dim"`` or 1).
    :param dict inducing_inputs: ``{node: [M_w, D_w] tensor}`` initial inducing inputs.
    :param learn_inducing: ``True``, ``False`` or a collection of nodes whose inducing inputs are learned.
    :param float jitter: relative jitter of ``K(Z, Z)`` (default 1e-8 in float64, 1e-5 in float32).
    :param sample_f: ``True`` (or ``"non_centred"``) makes the node values sample sites through their
        standardised noise ``"{w}.eps"`` (see above), ``"centred"`` through ``"{w}.f"``; Gaussian-likelihood leaves
        are then collapsed (see ``collapse``). Use it for MCMC (``MCMC(NUTS(model))``).
    :param collapse: what ``sample_f`` mode integrates out of a Gaussian-likelihood leaf (a node without
        children): ``"values"`` (default) its node values, ``y ~ N(μ(U), r + τ²)`` per case; ``"inducing"``
        also its inducing outputs, ``y_j ~ N(0, A Aᵀ + diag(r + τ_j²))`` jointly over the cases where it is
        observed (:class:`~pyro_dag.gp.CollapsedGaussianLeaf`; full batch only), and samples an observed
        Gaussian node with children in posterior-whitened coordinates, ``"{w}.z"`` and ``"{w}.eps"``, standard
        normal a posteriori but for the children's likelihood (``"{w}.u"``, ``"{w}.f"`` deterministic), so that
        NUTS does not meet the stiff directions that its own observations put on ``U_w``;
        :meth:`full_model_draws` converts the draws to the full model's sites, drawing the leaves' ``"{w}.u"``
        exactly given each draw (:func:`~pyro_dag.diagnostics.to_inference_data` does it itself);
        ``None``: nothing (the leaves' values are sample sites like any other node's). Prefer ``"inducing"`` for NUTS.
    :param priors: ``None`` (default: kernel and likelihood hyperparameters are learnable ``PyroParam`` s) or
        ``"weakly_informative"`` (or a dict, see :func:`pyro_dag.priors.set_hyperpriors`): LogNormal
        hyperpriors on the kernel variances and length-scales and the observed nodes' noise, applied at set-up,
        so that NUTS samples them (sites ``"kernels.{w}....lengthscale"``, ``"likelihoods.{w}.variance"``).
    :param int seed: seed of the inducing-input initialisation.
    :param dict latent_inputs: ``{root: d_h}``, roots whose per-case values are latent (see above); each must
        be a root of the graph with at least one child, and is neither given in ``inputs`` nor in ``data``.
    :param noise: the initial noise of the observed Gaussian nodes whose likelihood is not given in
        ``likelihoods``: ``"auto"`` (the default): the noise rule of :mod:`pyro_dag.gp.noise` at set-up (a pilot exact GP on the node's
        observed parents, or its ancestral roots, gives the initial noise on the data's scale; a node that the pilot
        finds deterministic given observed parents gets a fixed nugget), the choices kept in
        :attr:`noise_choices`; ``"learned"`` (variance 0.1, learned, the default before the rule) or a positive number
        (that initial variance, learned).
    :param str deterministic_amplitude: ``"loo"`` (the default): a node that the noise rule holds deterministic
        (a fixed nugget) and that has the default kernel gets its amplitude and nugget scaled by the leave-one-out
        factor of :mod:`pyro_dag.gp.amplitude` after its exact fit in :func:`~pyro_dag.infer.train` (same mean,
        left-out residuals scaled to unit variance, that of the latent ``f`` for a node with children, of a new
        observation for a leaf; factors in :attr:`amplitude_factors`); ``"ml"``: keep the type-II
        maximum-likelihood amplitude (intervals of noise-free simulators then cover nearly every point).
    :param str kernel_init: ``"pilot"`` (the default) or ``"default"`` (length-scales and variances of 1). With
        ``"pilot"`` the default kernel of
        each observed node whose parents are all observed starts at the hyperparameters of the pilot exact GP that
        the noise rule fits (:mod:`pyro_dag.gp.noise`), i.e. at the type-II maximum-likelihood fit of a plain GP.
    :param str name: prefix of the model's parameter names in Pyro's global parameter store (default none:
        ``"kernels.w1.base.lengthscale"``; with ``name="b"``, ``"b.kernels.w1.base.lengthscale"``). Like any
        :class:`~pyro.nn.PyroModule`, a model takes the stored value of a name the store already holds, so two
        models with the same nodes in one process would share their parameters: the model warns
        (:class:`~pyro_dag.param_store.ParamStoreCollisionWarning`) when the store holds another model's, and
        ``pyro.clear_param_store()``, distinct names or ``pyro.settings.set(module_local_params=True)`` (before
        building the models) keep them apart.

    Example::

        g = nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])
        model = DAGDGP(g, kernels={"w3": kernels.SumInput(kernels.RBF())}, num_inducing=16).double()
        guide = AutoStructuredGuide(model, structure="mean_field")
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
        svi.step(inputs, data)            # inputs = {"x1": X1, "x2": X2}, data = {"w3": Y}

    With a hidden confounder ``h`` of ``a`` and ``b``::

        g = nx.DiGraph([("h", "a"), ("h", "b"), ("x", "b")])
        model = DAGDGP(g, latent_inputs={"h": 1}).double()
        guide = AutoStructuredGuide(model)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.03}), DAGELBO(num_particles=4))
        svi.step({"x": X}, {"a": A, "b": B}, subsample_size=64)
        h_train = guide.median()["h.x"]                              # [n, 1] posterior means of h
        pred = model.predict(guide, {"x": X_new}, {"a": A_new})     # h inferred from a, b predicted
    """

    def __init__(self, graph, *, kernels=None, num_inducing="auto", likelihoods=None, output_dims=None,
                 inducing_inputs=None, learn_inducing=True, jitter=None, sample_f=False, seed=0, latent_inputs=None,
                 priors=None, name=None, collapse="values", noise="auto", kernel_init="pilot",
                 deterministic_amplitude="loo"):
        if name is not None and (not isinstance(name, str) or not name):
            raise DAGInputError(f"name must be a non-empty string (a prefix of the model's parameter names), got "
                                f"{name!r}")
        super().__init__(name="" if name is None else name)
        dag.validate_dag(graph)
        self.graph = nx.DiGraph(graph)
        self.latent_inputs = self._check_latent_inputs(latent_inputs)
        self.root_nodes = [r for r in dag.roots(graph) if r not in self.latent_inputs]
        self.gp_nodes = dag.non_roots(graph)
        if not self.gp_nodes:
            raise dag.DAGStructureError("the graph has no non-root node, so there is no GP to fit; add an edge "
                                        "from an input root to a node")
        gp_set = set(self.gp_nodes)
        self.topo_nodes = [v for v in dag.topological_order(graph) if v in gp_set]
        self.parents = {w: dag.parents(graph, w) for w in self.gp_nodes}
        kernels = dict(kernels or {})
        likelihoods = dict(likelihoods or {})
        output_dims = dict(output_dims or {})
        inducing_inputs = dict(inducing_inputs or {})
        nums = dict(num_inducing) if isinstance(num_inducing, dict) else {}
        for label, mapping in [("kernels", kernels), ("likelihoods", likelihoods), ("output_dims", output_dims),
                               ("num_inducing", nums), ("inducing_inputs", inducing_inputs)]:
            for key in mapping:
                if key not in self.graph:
                    raise DAGInputError(f"{label} names node {key!r}, which is not in the graph; check the name")
                if key not in gp_set:
                    raise DAGInputError(f"{label} names root {key!r}; roots are inputs without a GP, so they take no "
                                        f"{label}: remove it")
        self.output_dims = {w: int(output_dims.get(w, self.graph.nodes[w].get("dim", 1))) for w in self.gp_nodes}
        self.num_inducing = {}
        # "auto": resolved at set-up from the number of cases (AUTO_INDUCING)
        self._auto_inducing = set()
        for w in self.gp_nodes:
            m = nums.get(w, 16 if isinstance(num_inducing, dict) else num_inducing)
            if m == "auto":
                self._auto_inducing.add(w)
                self.num_inducing[w] = AUTO_INDUCING
                continue
            try:
                m_int = operator.index(m)
            except TypeError:
                m_int = None
            if m_int is None or isinstance(m, bool) or m_int < 1:
                what = f"num_inducing[{w!r}]" if w in nums else "num_inducing"
                raise DAGInputError(f"{what} must be a positive integer (the number M_w of inducing inputs of "
                                    f"node {w!r}) or 'auto', got {m!r}; pass e.g. num_inducing=16")
            self.num_inducing[w] = int(m_int)
        seen = {}
        for w in kernels:
            for m in kernels[w].modules() if isinstance(kernels[w], nn.Module) else ():
                if id(m) in seen and seen[id(m)] != w:
                    raise DAGInputError(f"the kernels of nodes {seen[id(m)]!r} and {w!r} share the kernel instance "
                                        f"{type(m).__name__}, which would tie their hyperparameters; give each node "
                                        "its own instance (e.g. copy.deepcopy(kernel))")
                seen[id(m)] = w
        self.kernels = PyroModule[nn.ModuleDict](
            {w: as_fusion_kernel(kernels[w]) if w in kernels else Concat(RBF(ard=True)) for w in self.gp_nodes})
        self.likelihoods = PyroModule[nn.ModuleDict](
            {w: get_likelihood(likelihoods.get(w, "gaussian"), w) for w in self.gp_nodes})
        self.inducing = PyroModule()
        self._inducing_init = inducing_inputs
        if learn_inducing is True or learn_inducing is False:
            self._learn_inducing = set(self.gp_nodes) if learn_inducing else set()
        else:
            self._learn_inducing = set(learn_inducing)
        self.jitter = None if jitter is None else positive_number(jitter, "jitter", " (relative, of K(Z, Z))")
        if sample_f not in (False, True, "centred", "non_centred"):
            raise DAGInputError(f"sample_f must be False, True, 'non_centred' or 'centred', got {sample_f!r}")
        self.sample_f = bool(sample_f)
        self.centred = sample_f == "centred"
        if collapse not in ("values", "inducing", None):
            raise DAGInputError(f"collapse must be 'values', 'inducing' or None, got {collapse!r}")
        if collapse == "inducing" and not self.sample_f:
            raise DAGInputError("collapse='inducing' integrates a Gaussian leaf's inducing outputs out of the model "
                                "for MCMC; it needs sample_f=True (DAGDGP(..., sample_f=True, collapse='inducing'))")
        self.collapse = collapse
        if priors is not None and not isinstance(priors, dict) and priors != "weakly_informative":
            raise DAGInputError(f"priors must be None, 'weakly_informative' or a dict of LogNormal (loc, scale) "
                                f"(see pyro_dag.priors.set_hyperpriors), got {priors!r}")
        self.priors = priors
        if not (noise in ("learned", "auto") or (isinstance(noise, (int, float)) and not isinstance(noise, bool)
                                                 and noise > 0)):
            raise DAGInputError(f"noise must be 'learned', 'auto' or a positive initial noise variance, got {noise!r}")
        self.noise = noise
        if kernel_init not in ("default", "pilot"):
            raise DAGInputError(f"kernel_init must be 'default' or 'pilot', got {kernel_init!r}")
        self.kernel_init = kernel_init
        if deterministic_amplitude not in ("loo", "ml"):
            raise DAGInputError(f"deterministic_amplitude must be 'loo' or 'ml', got {deterministic_amplitude!r}")
        self.deterministic_amplitude = deterministic_amplitude
        #: ``{node: c}``: each deterministic node's leave-one-out amplitude factor (``deterministic_amplitude``).
        self.amplitude_factors = {}
        #: Nodes fitted exactly on their parents' *observed* values (``train``'s collapsed fit): :meth:`predict` feeds
        #: them each observed Gaussian parent's draw plus its noise, the kind of input their GPs were fitted on.
        self.exact_fit_nodes = set()
        # nodes whose kernel the model chose (kernel_init="pilot" may set its hyperparameters)
        self._default_kernels = {w for w in self.gp_nodes if w not in kernels}
        # nodes whose likelihood the model chose (the noise rule may set their noise; a user's likelihood is kept)
        self._default_likelihoods = {w for w in self.gp_nodes if w not in likelihoods}
        #: ``{node: NoiseChoice}`` of the noise rule (``noise="auto"``), filled at set-up.
        self.noise_choices = {}
        self.seed = int(seed)
        self.register_buffer("_anchor", torch.zeros(()), persistent=False)
        self.input_dims = None
        self.observed_nodes = None
        self._key = uuid.uuid4().hex
        # a deep graph with long stretches of nodes without a root-only kernel component may collapse a priori
        # (Perlino et al. 2026, Sec. 4, Theorem 1): warn, recommending InputConnected
        check_prior_collapse(self)

    # ------------------------------------------------------------------ set-up
    @property
    def is_setup(self):
        return self.input_dims is not None

    def _node_dim(self, v):
        if v in self.latent_inputs:
            return self.latent_inputs[v]
        return self.input_dims[v] if v in self.input_dims else self.output_dims[v]

    def setup(self, inputs, data=None, mask=None):
        """Bind kernels to the parents and initialise inducing inputs from the data (done at the first call).

        Also fixes which nodes are observed: :attr:`observed_nodes`.
        """
        X, n, obs = self.checked_arguments(inputs, data, mask)
        if n == 0:  # the inducing inputs are initialised from the cases: none (with or without data) is no fit
            first = next(iter(X), None)
            raise DAGInputError((f"inputs[{first!r}] has" if first is not None else "the data have") + " zero rows "
                                "(zero cases), so there is nothing to fit or to set the model up from: pass at least "
                                "one case (zero-row inputs are fine for predict, after training)")
        self._setup(X, obs)
        scale_warnings(self, X, obs)   # inputs or data far from unit scale, met by unit-scale kernels: "rescale"
        return self

    def _setup(self, X, obs):
        if self._auto_inducing:  # every case up to AUTO_INDUCING of them (AUTO_INDUCING_EXACT: fitted exactly)
            n = next(iter(X.values())).shape[0] if X else next(iter(obs.values()))[0].shape[0]
            exact = set(collapsible_nodes(self, X, obs))
            for w in self._auto_inducing:
                if w in exact:
                    cases = int(obs[w][1].any(-1).sum())
                    self.num_inducing[w] = max(1, min(cases, AUTO_INDUCING_EXACT))
                else:
                    self.num_inducing[w] = max(1, min(int(n), AUTO_INDUCING))
        self.input_dims = {r: X[r].shape[1] for r in self.root_nodes}
        self.observed_nodes = [w for w in self.gp_nodes if w in obs]
        for w in self.topo_nodes:
            specs = [ParentSpec(p, self._node_dim(p), p in self.input_dims) for p in self.parents[w]]
            kernel = self.kernels[w]
            kernel.bind_parents(specs, w)
            kernel.to(dtype=self.dtype, device=self.device)
        # every name the model puts in the store exists now, or is about to (inducing inputs), and none has been read
        self._check_param_store(future_inducing=True)
        with torch.no_grad(), suspended():
            for w in self.topo_nodes:
                D = sum(self._node_dim(p) for p in self.parents[w])
                M = self.num_inducing[w]
                if w in self._inducing_init:
                    Z = self._as_tensor(self._inducing_init[w], f"inducing_inputs[{w!r}]").clone()
                else:
                    blocks = []
                    for p in self.parents[w]:
                        if p in X:
                            blocks.append(X[p])
                        elif p in self.latent_inputs:  # prior N(0, I)
                            blocks.append((self.latent_inputs[p], 1.0))
                        elif p in obs:
                            y, m = obs[p]
                            blocks.append(torch.where(m, y, torch.full_like(y, float("nan"))))
                        else:
                            Zp = self._inducing_Z(p)
                            scale = self.kernels[p](Zp, diag=True).mean().sqrt().item()
                            blocks.append((self.output_dims[p], scale))
                    Z = init_inducing_inputs(blocks, M, seed=self.seed).to(dtype=self.dtype, device=self.device)
                if Z.shape != (M, D):
                    raise DAGInputError(f"inducing inputs of node {w!r} must have shape [M, D] = [{M}, {D}] "
                                        f"(D = sum of its parents' dims {self.parents[w]}), got {tuple(Z.shape)}")
                self._check_inducing_finite(w, Z, given=w in self._inducing_init)
                if w in self._learn_inducing:
                    setattr(self.inducing, w, PyroParam(Z))
                else:
                    self.inducing.register_buffer(w, Z)
        self._inducing_init = {}
        self._set_noise(X, obs)
        if self.priors is not None:
            set_hyperpriors(self, self.priors)

    def _set_noise(self, X, obs):
        """The initial noise of the observed Gaussian nodes whose likelihood the model chose: ``noise="auto"`` applies
        the noise rule (:func:`pyro_dag.gp.noise.choose_noise`: a pilot GP on the node's observed parents, or on its
        ancestral roots; a nugget fixed for deterministic nodes), a number sets that initial variance."""
        nodes = [w for w in self.observed_nodes if w in self._default_likelihoods
                 and isinstance(self.likelihoods[w], Gaussian)
                 and "variance" in self.likelihoods[w].__dict__.get("_pyro_params", {})]  # not frozen by the user
        if (self.noise == "learned" and self.kernel_init == "default") or not nodes:
            return
        pilots = {}  # node -> (parents observed, [pilot problem per output column])
        for w in nodes:
            lik = self.likelihoods[w]
            if self.noise not in ("auto", "learned"):
                lik.variance = PyroParam(torch.full_like(lik.variance, float(self.noise)), constraints.positive)
            if self.noise != "auto" and self.kernel_init != "pilot":
                continue
            parents = self.parents[w]
            observed = all(p in X or p in obs for p in parents)
            if observed:
                cols = [X[p] if p in X else torch.where(obs[p][1], obs[p][0], torch.full_like(obs[p][0], float("nan")))
                        for p in parents]
            else:
                ancestors = nx.ancestors(self.graph, w)
                cols = [X[r] for r in self.root_nodes if r in ancestors]
            if not cols:  # only latent inputs above it: nothing to fit a pilot on
                continue
            design = torch.cat(cols, -1).detach()
            y, m = obs[w]
            pilots[w] = (observed, [(torch.where(m[:, j], y[:, j], torch.full_like(y[:, j], float("nan"))).detach(),
                                     design, observed) for j in range(y.shape[1])])
        # every pilot at once: the ones with the same number of cases and inputs are fitted as one batch
        flat = [problem for _, problems in pilots.values() for problem in problems]
        with setup_progress(len(flat), "pilot GPs of the noise rule") as bar:
            fitted = choose_noise_many(flat, seed=self.seed, progress=bar.update) if flat else []
        k = 0
        for w, (observed, problems) in pilots.items():
            choices, k = fitted[k:k + len(problems)], k + len(problems)
            if any(c is None for c in choices):
                continue
            lik = self.likelihoods[w]
            if self.kernel_init == "pilot" and observed and w in self._default_kernels and len(choices) == 1:
                self._kernel_from_pilot(w, choices[0].pilot)
            if self.noise != "auto":
                continue
            variance = sum(c.variance for c in choices) / len(choices)
            lik.variance = PyroParam(torch.full_like(lik.variance, variance), constraints.positive)
            if all(c.fixed for c in choices):
                freeze(lik, {"variance"})
            self.noise_choices[w] = choices[0] if len(choices) == 1 else choices

    def _kernel_from_pilot(self, w, pilot):
        """Start a default kernel (an ARD RBF on the concatenated parents) at the pilot GP's type-II maximum
        likelihood hyperparameters (``kernel_init="pilot"``)."""
        base = getattr(self.kernels[w], "base", None)
        params = base.__dict__.get("_pyro_params", {}) if base is not None else {}
        if "lengthscale" not in params or "variance" not in params:
            return
        ls = pilot.lengthscales.to(dtype=self.dtype, device=self.device)
        if base._own_value("lengthscale").numel() != ls.numel():
            return
        base.lengthscale = PyroParam(ls.clone(), constraints.positive)
        base.variance = PyroParam(torch.as_tensor(pilot.signal_variance, dtype=self.dtype, device=self.device),
                                  constraints.positive)

    def _check_param_store(self, future_inducing=False):
        """Warn if Pyro's global parameter store holds another DAGDGP's parameters under this model's names (which
        this model would otherwise silently start from and share); see ``name`` in the class docstring.
        ``future_inducing``: also check the names of the learned inducing inputs the set-up is about to create."""
        future = [f"{self.inducing.__dict__['_pyro_name']}.{w}" for w in self._learn_inducing] if future_inducing else ()
        check_param_store(self, self._key, "DAGDGP", PARAM_STORE_FIXES, future)

    def _site_meta(self, w, role):
        if role == "latent_input":
            return {"dag": {"role": role, "node": w, "model_key": self._key, "graph": self.graph, "parents": (),
                            "observed": tuple(self.observed_nodes or ()), "shape": (self.latent_inputs[w],)}}
        return {"dag": {"role": role, "node": w, "model_key": self._key, "graph": self.graph,
                        "parents": tuple(self.parents[w]), "observed": tuple(self.observed_nodes or ()),
                        "shape": (self.output_dims[w], self.num_inducing[w])}}

    def _sample_latent_inputs(self, plate):
        """Sample ``"{h}.x"`` ``[B, d_h]`` (batch dims of outer plates in front), prior ``N(0, I)``, for every
        latent input ``h``, in the ``"data"`` plate (so minibatching scales its log-density by n/B)."""
        values = {}
        if not self.latent_inputs:
            return values
        with plate as idx:
            for h, d in self.latent_inputs.items():
                loc = torch.zeros((idx.shape[0], d), dtype=self.dtype, device=self.device)
                values[h] = pyro.sample(f"{h}.x", dist.Normal(loc, 1.0).to_event(1),
                                        infer=self._site_meta(h, "latent_input"))
        return values

    # ------------------------------------------------------------------ forward
    def forward(self, inputs, data=None, mask=None, subsample_size=None, subsample=None):
        """Run the model.

        :param dict inputs: ``{root: [n, d_r]}`` design matrices (tensors, arrays or numeric DataFrames), or
            one DataFrame whose columns are the roots (each a ``[n, 1]`` design matrix).
        :param dict data: ``{node: [n, d_w]}`` observations, NaN = missing (or a DataFrame whose columns are
            nodes). ``None`` (e.g. under
            ``Predictive``) samples new observations for the nodes observed at set-up.
        :param dict mask: optional ``{node: bool [n, d_w]}``, True = observed (overrides NaN detection).
        :param int subsample_size: minibatch size ``B`` of the ``"data"`` plate, ``1 <= B <= n``.
        :param torch.Tensor subsample: explicit minibatch indices.
        :returns: ``{node: [..., B, d]}`` values of every node for the (sub)sampled cases.
        """
        X, n, obs = self.checked_arguments(inputs, data, mask)
        self._check_subsample(subsample_size, subsample, n)
        size = len(subsample) if subsample is not None else subsample_size
        if size is not None and size < n and self._collapsed_inducing(obs, data is None):
            raise DAGInputError(f"collapse='inducing' integrates the inducing outputs of nodes "
                                f"{self._collapsed_inducing(obs, False)} out of all their cases jointly, so the model "
                                "cannot be minibatched; run it full batch (no subsample_size) or use collapse='values'")
        if self.is_setup:  # (else the set-up checks, once its kernels have their parameters)
            self._check_param_store()  # before a read of a parameter ties it to the store's tensor
        else:
            # with priors, the set-up turns hyperparameters into sample sites: hide its own reads of them from
            # this call's trace (a site may not be a param and a sample in one trace)
            with pyro.poutine.block() if self.priors is not None else contextlib.nullcontext():
                self._setup(X, obs)
        estimator = current_estimator()
        # Factorise every K(Z, Z) before entering the data plate: hyperparameters with priors (PyroSample)
        # are then sampled once, outside the plate, and reused by the per-case computations.
        cache = self.cholesky_cache()
        # likewise the likelihood hyperparameters with priors (DAGDGP(priors=...)): once, outside the plate
        for lik in self.likelihoods.values():
            for name in lik.__dict__.get("_pyro_samples", ()):
                getattr(lik, name)
        self._check_outer_plates(obs, data is None)
        # minibatch indices on the data's device (a CPU index into CUDA tensors costs a copy per site)
        device = next(iter(X.values())).device if X else self.device
        plate = pyro.plate("data", n, subsample_size=subsample_size, subsample=subsample, dim=-1, device=device)
        if estimator is not None:
            return estimator.forward_model(self, X, obs, plate, cache)
        return self._forward_generative(X, obs, plate, data is None, cache)

    def _observation_nodes(self, obs, generate):
        if generate:
            return [w for w in self.gp_nodes if w in (self.observed_nodes or ())]
        return [w for w in self.gp_nodes if w in obs]

    def _forward_generative(self, X, obs, plate, generate, cache):
        latent = self._sample_latent_inputs(plate)
        collapsed = self._collapsed_inducing(obs, generate)
        whitened = [w for w in collapsed if self.graph.out_degree(w) > 0]
        us = {}
        for w in self.topo_nodes:
            if w in whitened:
                # posterior-whitened inducing outputs: U_w = m + L⁻ᵀ z with (m, L Lᵀ) the mean and precision of
                # U_w | y_w, computed in the data plate below (they need the parents' values)
                shape = (self.output_dims[w], self.num_inducing[w])
                zero = torch.zeros(shape, dtype=self.dtype, device=self.device)
                z = pyro.sample(f"{w}.z", dist.Normal(zero, 1.0).to_event(2), infer=self._site_meta(w, "inducing"))
                us[w] = z.squeeze(-3) if z.dim() > 2 and z.shape[-3] == 1 else z  # as u below
                continue
            if w in collapsed:  # V_w integrated out: see CollapsedGaussianLeaf
                continue
            shape = (self.output_dims[w], self.num_inducing[w])
            prior = dist.Normal(torch.zeros(shape, dtype=self.dtype, device=self.device), 1.0).to_event(2)
            u = pyro.sample(f"{w}.u", prior, infer=self._site_meta(w, "inducing"))
            # Sample plates outside the data plate leave a size-1 dim where the data plate sits (dim -1
            # of the batch shape); drop it so that u's batch dims line up with the cases' batch dims.
            us[w] = u.squeeze(-3) if u.dim() > 2 and u.shape[-3] == 1 else u
        observed = self._observation_nodes(obs, generate)
        marginals = {}
        with plate as idx:
            values = {r: X[r][idx] for r in self.root_nodes}
            values.update(latent)
            for w in self.topo_nodes:
                a, r = self.node_conditional(w, values, cache)
                lik = self.likelihoods[w]
                if w in collapsed:
                    if w in whitened:  # its marginal's factor is shared with the posterior of U_w
                        values[w], us[w], marginals[w] = self._posterior_whitened_values(w, a, r, us[w], obs[w])
                    else:
                        marginals[w] = CollapsedGaussianLeaf(a, r, lik.hyper("variance"), self.output_dims[w],
                                                             mask=obs[w][1])
                    continue
                u = us[w]
                loc = a @ u.transpose(-1, -2)
                scale = r.sqrt().unsqueeze(-1)
                if self._collapsed(w):
                    f = None
                    y_dist = dist.Normal(loc, (r.unsqueeze(-1) + lik.hyper("variance")).sqrt())
                elif self.sample_f and self.centred:
                    f = pyro.sample(f"{w}.f", dist.Normal(loc, scale.expand_as(loc)).to_event(1),
                                    infer=self._site_meta(w, "value"))
                elif self.sample_f:  # non-centred: NUTS sees ε, not the funnel of (U, F) when sd is small
                    eps = pyro.sample(f"{w}.eps", dist.Normal(torch.zeros_like(loc), 1.0).to_event(1),
                                      infer=self._site_meta(w, "value"))
                    f = loc + scale * eps
                    pyro.deterministic(f"{w}.f", f, event_dim=1)
                else:
                    f = loc + scale * torch.randn_like(loc)
                    pyro.deterministic(f"{w}.f", f, event_dim=1)
                if f is not None:
                    values[w] = f
                    y_dist = lik.dist(f) if w in observed else None
                else:
                    values[w] = loc
                if w in observed:
                    if generate:
                        pyro.sample(f"{w}.y", y_dist.to_event(1), infer=self._site_meta(w, "observation"))
                    else:
                        y, m = obs[w]
                        pyro.sample(f"{w}.y", y_dist.mask(m[idx]).to_event(1), obs=y[idx],
                                    infer=self._site_meta(w, "observation"))
        for w in whitened:
            # a batch of draws [*batch, d, M] gets the size-1 dim of the data plate back, as the site "{w}.u" has
            u = us[w].unsqueeze(-3) if us[w].dim() > 2 else us[w]
            pyro.deterministic(f"{w}.u", u, event_dim=2)
        # The collapsed nodes' cases are jointly Gaussian (not independent given the parents), so their site sits
        # outside the data plate, every case in one event.
        for w, marginal in marginals.items():
            y, m = obs[w]
            # a batch of draws [*batch] of the marginal (batched parents or hyperparameters) is put at the plates'
            # dims, [*batch, 1], the data plate's dim being -1
            pyro.sample(f"{w}.y", marginal.align_to_plates(), obs=torch.where(m, y, torch.zeros_like(y)),
                        infer=self._site_meta(w, "observation"))
        return values
