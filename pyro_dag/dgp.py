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
from collections import namedtuple

import networkx as nx
import numpy as np
import pyro
import pyro.distributions as dist
import torch
from pyro.nn import PyroModule, PyroParam
from torch import nn

from . import graph as dag
from .gp.conditional import NonFiniteGramError, cholesky_with_jitter, whitened_conditional
from .gp.collapsed import CollapsedGaussianLeaf, value_posterior
from .gp.inducing import init_inducing_inputs
from .gp.likelihoods import Gaussian, get_likelihood
from .infer.checks import NonFiniteLossError
from .infer.context import current_estimator, standard_normal, suspended
from .kernels import Concat, ParentSpec, RBF, as_fusion_kernel
from .param_store import check_param_store
from .utils import broadcast_shapes, is_tracing

__all__ = ["DAGDGP", "DAGInputError", "NodePrediction"]


#: The remedies the parameter-store collision warning names.
PARAM_STORE_FIXES = ("Call pyro.clear_param_store() before building a new model, give each model its own name "
                     "(DAGDGP(..., name='b')), or call pyro.settings.set(module_local_params=True) before building "
                     "the models.")


class DAGInputError(ValueError):
    """Bad inputs or data for a :class:`DAGDGP`; the message names the node and the fix."""


NodePrediction = namedtuple("NodePrediction", ["samples", "mean", "variance", "loc", "var", "y_mean", "y_variance"])
NodePrediction.__doc__ = """Posterior prediction for one node (see :meth:`DAGDGP.predict`).

* ``samples`` ``[S, n, d]``: draws of the latent node values ``F_w``;
* ``mean``, ``variance`` ``[n, d]``: their mean and variance (law of total variance over the S draws);
* ``loc``, ``var`` ``[S, n, d]``: the Gaussian conditional of each draw given its sampled ancestors
  (the predictive is the equally weighted mixture of these);
* ``y_mean``, ``y_variance`` ``[n, d]``: moments of a new observation (likelihood noise added), or
  ``None`` for nodes without a likelihood that has closed-form moments.
"""


def _is_pandas(x):
    return type(x).__module__.split(".")[0] == "pandas"


def _pandas_to_numpy(x, label):
    """``[n, d]`` float64 array from a pandas DataFrame / Series (NaN for missing values).

    :raises DAGInputError: naming ``label`` and the column, for a column that is not numeric or boolean.
    """
    import pandas as pd

    frame = x.to_frame() if isinstance(x, pd.Series) else x
    for i, col in enumerate(frame.columns):
        column = frame.iloc[:, i]
        if not (pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)):
            raise DAGInputError(f"{label} column {col!r} has dtype {column.dtype}, which is not numeric; DAGDGP "
                                "takes numbers only: encode the column (e.g. pandas.get_dummies(...) or "
                                ".cat.codes) or drop it")
    return frame.to_numpy(dtype=np.float64, na_value=np.nan, copy=True)


def _frame_as_dict(frame, what):
    """A whole DataFrame passed as ``inputs`` or ``data``: one ``[n, 1]`` matrix per column, named by the column."""
    if frame.columns.duplicated().any():
        dup = list(frame.columns[frame.columns.duplicated()])
        raise DAGInputError(f"{what} is a DataFrame with duplicated column names {dup}; each column names a node")
    return {col: frame[[col]] for col in frame.columns}


def _concat_values(values):
    """Concatenate ``[..., B, d_i]`` tensors along the last dim, broadcasting leading dims."""
    if len(values) == 1:
        return values[0]
    batch = broadcast_shapes(*[v.shape[:-1] for v in values])
    return torch.cat([v.expand(batch + v.shape[-1:]) for v in values], dim=-1)



def _check_scale(t, label):
    """Refuse values whose squares overflow ``t``'s dtype: every kernel and likelihood squares them, so such data
    would give an infinite loss at the first step and NaN parameters after it."""
    if t.numel() == 0 or is_tracing():  # checked in the eager call before a trace (see is_tracing)
        return
    biggest = t.detach().abs().max()
    if not bool(torch.isfinite(biggest * biggest)):
        raise DAGInputError(
            f"{label} reaches {float(biggest):.3g}, whose square overflows {t.dtype} (largest "
            f"{torch.finfo(t.dtype).max:.3g}): the loss would be infinite. Standardise the data (subtract the mean, "
            "divide by the standard deviation) or use float64")

class DAGDGP(PyroModule):
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
    :param num_inducing: ``M_w``, an int or ``{node: int}`` (default 16).
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
        ``None``: nothing (the leaves' values are sample sites like any other node's).
    :param priors: ``None`` (default: kernel and likelihood hyperparameters are learnable ``PyroParam`` s) or
        ``"weakly_informative"`` (or a dict, see :func:`pyro_dag.priors.set_hyperpriors`): LogNormal
        hyperpriors on the kernel variances and length-scales and the observed nodes' noise, applied at set-up,
        so that NUTS samples them (sites ``"kernels.{w}....lengthscale"``, ``"likelihoods.{w}.variance"``).
    :param int seed: seed of the inducing-input initialisation.
    :param dict latent_inputs: ``{root: d_h}``, roots whose per-case values are latent (see above); each must
        be a root of the graph with at least one child, and is neither given in ``inputs`` nor in ``data``.
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

    def __init__(self, graph, kernels=None, num_inducing=16, likelihoods=None, output_dims=None,
                 inducing_inputs=None, learn_inducing=True, jitter=None, sample_f=False, seed=0, latent_inputs=None,
                 priors=None, name=None, collapse="values"):
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
        for w in self.gp_nodes:
            m = nums.get(w, 16 if isinstance(num_inducing, dict) else num_inducing)
            try:
                m_int = operator.index(m)
            except TypeError:
                m_int = None
            if m_int is None or isinstance(m, bool) or m_int < 1:
                what = f"num_inducing[{w!r}]" if w in nums else "num_inducing"
                raise DAGInputError(f"{what} must be a positive integer (the number M_w of inducing inputs of "
                                    f"node {w!r}), got {m!r}; pass e.g. num_inducing=16")
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
        self.jitter = jitter
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
        self.seed = int(seed)
        self.register_buffer("_anchor", torch.zeros(()), persistent=False)
        self.input_dims = None
        self.observed_nodes = None
        self._key = uuid.uuid4().hex
        # a deep graph with long stretches of nodes without a root-only kernel component may collapse a priori
        # (Perlino et al. 2026, Sec. 4, Theorem 1): warn, recommending InputConnected
        from .diagnostics.collapse import check_prior_collapse

        check_prior_collapse(self)

    # ------------------------------------------------------------------ validation
    def _check_latent_inputs(self, latent_inputs):
        """``{root: d_h}`` in the graph's declaration order, after checking each latent input."""
        if latent_inputs is None:
            return {}
        if not isinstance(latent_inputs, dict):
            raise DAGInputError("latent_inputs must be a dict {root: dimension}, e.g. latent_inputs={'h': 2}, got "
                                f"{type(latent_inputs).__name__}")
        for h, d in latent_inputs.items():
            if h not in self.graph:
                raise DAGInputError(f"latent_inputs names {h!r}, which is not in the graph; add the latent root with "
                                    f"edges to the nodes it feeds, e.g. graph.add_edges_from([({h!r}, 'a'), "
                                    f"({h!r}, 'b')])")
            if self.graph.in_degree(h) > 0:
                raise DAGInputError(f"latent input {h!r} has parents {dag.parents(self.graph, h)}, but a latent input "
                                    "is a root (per-case values h_i ~ N(0, I)): remove its incoming edges, or drop it "
                                    "from latent_inputs to make it a GP node")
            if self.graph.out_degree(h) == 0:
                raise DAGInputError(f"latent input {h!r} has no children, so nothing depends on it and its values "
                                    f"cannot be inferred: add edges from {h!r} to the nodes it feeds, or drop it from "
                                    "latent_inputs")
            try:
                d_int = operator.index(d)
            except TypeError:
                d_int = None
            if d_int is None or isinstance(d, bool) or d_int < 1:
                raise DAGInputError(f"latent_inputs[{h!r}] must be a positive integer (the dimension of the latent "
                                    f"input {h!r}), got {d!r}; pass e.g. latent_inputs={{{h!r}: 2}}")
        return {h: int(latent_inputs[h]) for h in self.graph.nodes if h in latent_inputs}

    @property
    def dtype(self):
        return self._anchor.dtype

    @property
    def device(self):
        return self._anchor.device

    def _as_tensor(self, x, label="value"):
        """``x`` (tensor, array, nested list, pandas DataFrame / Series) as a tensor in the model's dtype and
        device; ``label`` (e.g. ``"inputs['x']"``) names it in the error."""
        if _is_pandas(x):
            x = _pandas_to_numpy(x, label)
        try:
            return torch.as_tensor(x, dtype=self.dtype, device=self.device)
        except (TypeError, ValueError, RuntimeError) as e:
            raise DAGInputError(f"{label} could not be converted to a {self.dtype} tensor ({e}); pass an [n, d] "
                                "tensor, numpy array or numeric pandas DataFrame") from None

    def _check_inputs(self, inputs):
        if _is_pandas(inputs) and hasattr(inputs, "columns"):
            inputs = _frame_as_dict(inputs, "inputs")
        if not isinstance(inputs, dict):
            raise DAGInputError("inputs must be a dict {root: [n, d] design matrix} (or a DataFrame whose columns "
                                f"are the roots), got {type(inputs).__name__}")
        for key in inputs:
            if key not in self.graph:
                raise DAGInputError(f"inputs has node {key!r}, which is not in the graph; check the name "
                                    f"(roots: {self.root_nodes})")
            if key in self.latent_inputs:
                raise DAGInputError(f"inputs has {key!r}, which is a latent input (latent_inputs={{{key!r}: "
                                    f"{self.latent_inputs[key]}}}): its per-case values are inferred, not given. "
                                    f"Remove it from inputs, or drop it from latent_inputs to pass it as an "
                                    "observed root")
            if key not in self.root_nodes:
                raise DAGInputError(f"node {key!r} is not a root (its parents are {self.parents[key]}); only roots "
                                    "take design matrices: remove it from inputs (put its observations in data)")
        X, n, first = {}, None, None
        for r in self.root_nodes:
            if r not in inputs:
                raise DAGInputError(f"root {r!r} has no design matrix; pass inputs[{r!r}] as an [n, d] tensor")
            x = self._as_tensor(inputs[r], f"inputs[{r!r}]")
            if x.dim() == 1:
                x = x.unsqueeze(-1)
            if x.dim() != 2:
                raise DAGInputError(f"inputs[{r!r}] must be an [n, d] matrix, got shape {tuple(x.shape)}")
            if n is None:
                n, first = x.shape[0], r
            elif x.shape[0] != n:
                raise DAGInputError(f"inputs[{r!r}] has {x.shape[0]} rows but inputs[{first!r}] has {n}; every root "
                                    "needs one row per case")
            if self.input_dims is not None and x.shape[1] != self.input_dims[r]:
                raise DAGInputError(f"inputs[{r!r}] has {x.shape[1]} columns but the model was set up with "
                                    f"{self.input_dims[r]}; pass the same columns as in training")
            bad = None if is_tracing() else ~torch.isfinite(x).all(-1)
            if bad is not None and bool(bad.any()):
                i = int(bad.nonzero()[0])
                raise DAGInputError(f"inputs[{r!r}] contains NaN or inf (first at row {i}); roots are deterministic "
                                    "inputs and must be finite: impute or drop those cases")
            _check_scale(x, f"inputs[{r!r}]")
            X[r] = x
        return X, n

    def _check_data(self, data, mask, n):
        """Returns ``{node: (y_filled [n, d], mask [n, d] bool)}``."""
        if data is None:
            if mask:
                raise DAGInputError("a mask was given without data; pass data={node: [n, d] tensor}")
            return {}
        if _is_pandas(data) and hasattr(data, "columns"):
            data = _frame_as_dict(data, "data")
        if not isinstance(data, dict):
            raise DAGInputError("data must be a dict {node: [n, d] tensor} (or a DataFrame whose columns are "
                                f"nodes), got {type(data).__name__}")
        mask = dict(mask or {})
        for key in list(data) + list(mask):
            if key not in self.graph:
                raise DAGInputError(f"data/mask has node {key!r}, which is not in the graph; check the name "
                                    f"(GP nodes: {self.gp_nodes})")
            if key in self.root_nodes:
                raise DAGInputError(f"node {key!r} is a root (an input); pass its values in inputs, not data")
            if key in self.latent_inputs:
                raise DAGInputError(f"node {key!r} is a latent input: its per-case values are inferred, not "
                                    "observed. Remove it from data, or drop it from latent_inputs and pass its "
                                    "values in inputs")
            if key in mask and key not in data:
                raise DAGInputError(f"mask[{key!r}] is given but data[{key!r}] is not; add the observations")
        out = {}
        for w in self.gp_nodes:
            if w not in data:
                continue
            d = self.output_dims[w]
            y = self._as_tensor(data[w], f"data[{w!r}]")
            if y.dim() == 1 and d == 1:
                y = y.unsqueeze(-1)
            if y.dim() != 2 or y.shape[0] != n:
                raise DAGInputError(f"data[{w!r}] has shape {tuple(y.shape)} but the inputs have {n} cases; give "
                                    f"an [n, d] tensor with one row per case and NaN for missing entries")
            if y.shape[1] != d:
                raise DAGInputError(f"data[{w!r}] has {y.shape[1]} columns but node {w!r} has output dimension {d}; "
                                    f"set output_dims={{{w!r}: {y.shape[1]}}} in DAGDGP or fix the data")
            if w in mask:
                m = mask[w]
                if _is_pandas(m):
                    m = m.to_numpy()
                m = torch.as_tensor(m, device=self.device)
                if m.dim() == 1 and d == 1:
                    m = m.unsqueeze(-1)
                if m.shape != y.shape or m.dtype != torch.bool:
                    raise DAGInputError(f"mask[{w!r}] must be a bool tensor of shape {tuple(y.shape)}, got "
                                        f"{m.dtype} {tuple(m.shape)}")
                if not is_tracing() and bool((m & ~torch.isfinite(y)).any()):
                    raise DAGInputError(f"data[{w!r}] has NaN/inf at entries that mask[{w!r}] marks as observed; "
                                        "fix the data or set those mask entries to False")
            else:
                if not is_tracing() and bool(torch.isinf(y).any()):
                    raise DAGInputError(f"data[{w!r}] contains inf; mark missing entries with NaN (or pass a mask)")
                m = ~torch.isnan(y)
            if not is_tracing() and not bool(m.any()):
                raise DAGInputError(f"data[{w!r}] has no observed entries; drop it from data (the node is then "
                                    "latent)")
            filled = torch.where(m, y, torch.zeros_like(y))
            _check_scale(filled, f"data[{w!r}]")
            out[w] = (filled, m)
        return out

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
        self._setup(X, obs)
        return self

    def checked_arguments(self, inputs, data=None, mask=None):
        """The model's arguments checked and converted as in :meth:`forward` (same errors).

        :returns: ``(X, n, obs)``: ``X = {root: [n, d_r]}`` tensors (observed roots only; latent inputs have no
            design matrix), ``n`` the number of cases and
            ``obs = {node: (y [n, d_w] with missing entries zeroed, mask [n, d_w] bool)}``.
        """
        X, n = self._check_inputs(inputs)
        if n is None:
            n = self._count_cases(data)
        return X, n, self._check_data(data, mask, n)

    def _count_cases(self, data):
        """``n`` from the data, for a model whose roots are all latent inputs (no design matrix counts the cases)."""
        first = None
        if isinstance(data, dict):
            first = next((data[w] for w in self.gp_nodes if w in data), None)
        elif _is_pandas(data):
            first = data
        if first is None:
            raise DAGInputError(f"every root of the graph is a latent input ({list(self.latent_inputs)}), so the "
                                "number of cases comes from the data: pass data={node: [n, d] tensor} for at least "
                                "one node (NaN for missing entries)")
        try:
            return len(first)
        except TypeError:
            raise DAGInputError("data must hold [n, d] matrices (one row per case) to count the cases, got "
                                f"{type(first).__name__}") from None

    def _setup(self, X, obs):
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
        if self.priors is not None:
            from .priors import set_hyperpriors

            set_hyperpriors(self, self.priors)

    def _check_param_store(self, future_inducing=False):
        """Warn if Pyro's global parameter store holds another DAGDGP's parameters under this model's names (which
        this model would otherwise silently start from and share); see ``name`` in the class docstring.
        ``future_inducing``: also check the names of the learned inducing inputs the set-up is about to create."""
        future = [f"{self.inducing.__dict__['_pyro_name']}.{w}" for w in self._learn_inducing] if future_inducing else ()
        check_param_store(self, self._key, "DAGDGP", PARAM_STORE_FIXES, future)

    def _inducing_Z(self, w):
        return getattr(self.inducing, w)

    def _check_inducing_finite(self, w, Z, given=False):
        if is_tracing():
            return
        bad = ~torch.isfinite(Z).all(-1)
        if not bool(bad.any()):
            return
        row = int(bad.nonzero()[0])
        if given:
            raise DAGInputError(f"the inducing inputs of node {w!r} are NaN or inf (inducing_inputs[{w!r}], first at "
                                f"row {row}); they are often computed from data with missing values: drop the NaN "
                                "rows before choosing them")
        raise DAGInputError(f"the inducing inputs of node {w!r} are NaN or inf (first at row {row}); the likely "
                            f"cause is NaN in the inputs or parents of {w!r} ({self.parents[w]}) they were "
                            "initialised from, or a non-finite kernel at a latent parent: check them, or pass "
                            f"inducing_inputs={{{w!r}: ...}}")

    # ------------------------------------------------------------------ the GP pieces
    def inducing_inputs(self, w):
        """``Z_w`` ``[M_w, D_w]`` (after set-up)."""
        return self._inducing_Z(w)

    def _node_cholesky(self, w):
        kernel = self.kernels[w]
        Z = self._inducing_Z(w)
        # Upper-triangular whitening: see pyro_dag.gp.conditional for why.
        try:
            # per_matrix: with a batch of hyperparameter draws (vectorised particles), each K(Z, Z) gets the jitter
            # it gets alone
            return Z, cholesky_with_jitter(kernel(Z), node=w, jitter=self.jitter, upper=True, per_matrix=True)
        except NonFiniteGramError as e:
            bad = ~torch.isfinite(Z.detach()).all(-1)
            if bool(bad.any()):
                raise NonFiniteGramError(
                    f"the inducing inputs of node {w!r} are NaN or inf (first at row {int(bad.nonzero()[0])}), so "
                    f"its Gram matrix K(Z, Z) is too; they were finite at set-up, so a training step made them "
                    f"non-finite: the likely cause is NaN in the inputs or parents of {w!r} ({self.parents[w]}) or "
                    "a learning rate too large for the scale of the data") from e
            hyper = [n.removesuffix("_unconstrained") for n, p in kernel.named_parameters()
                     if not bool(torch.isfinite(p.detach()).all())]
            if hyper:
                raise NonFiniteGramError(
                    f"the kernel of node {w!r} has non-finite hyperparameters {hyper}, so its Gram matrix K(Z, Z) "
                    "is NaN or inf: training diverged; lower the learning rate or rescale the data") from e
            raise

    def node_conditional(self, w, parent_values, cache=None):
        """Whitened conditional of node ``w`` (Perlino et al. 2026, Eq. (80)).

        :param dict parent_values: ``{parent: [..., B, d_p]}``.
        :returns: ``(a [..., B, M_w], r [..., B])``.
        """
        if cache is not None and w in cache:
            Z, L = cache[w]
        else:
            Z, L = self._node_cholesky(w)
            if cache is not None:
                cache[w] = (Z, L)
        x = _concat_values([parent_values[p] for p in self.parents[w]])
        fixed = self.__dict__.get("_fixed_conditionals")
        if fixed is None:
            return whitened_conditional(self.kernels[w], Z, L, x, upper=True)
        if x.requires_grad or not all(p in self.root_nodes for p in self.parents[w]):
            return whitened_conditional(self.kernels[w], Z, L, x, upper=True, inverse=self._fixed_inverse(w, L))
        # Inside fixed_kernels(), a node whose parents are roots sees the same design matrix at every full-batch
        # step: reuse (a, r) while it is the very same tensor, unmodified (identity and version counter; the
        # cache holds a reference, so the identity cannot be recycled).
        hit = fixed.get(w)
        if hit is not None and hit[0] is x and hit[1] == x._version:
            return hit[2]
        out = whitened_conditional(self.kernels[w], Z, L, x, upper=True)
        fixed[w] = (x, x._version, out)
        return out

    def _fixed_inverse(self, w, L):
        """``L_w⁻ᵀ`` of the factor cached by :meth:`fixed_kernels` (computed on first use, kept while the same
        factor comes back)."""
        inverses = self.__dict__["_fixed_inverses"]
        hit = inverses.get(w)
        if hit is None or hit[0] is not L:
            eye = torch.eye(L.shape[-1], dtype=L.dtype, device=L.device)
            hit = inverses[w] = (L, torch.linalg.solve_triangular(L, eye, upper=True).transpose(-1, -2).contiguous())
        return hit[1]

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
            return self._forward_marginal(estimator, X, obs, plate, cache)
        return self._forward_generative(X, obs, plate, data is None, cache)

    def _check_outer_plates(self, obs, generate):
        """Refuse an outer vectorised plate at dim -1, the ``"data"`` plate's, naming the fix (Pyro's own error,
        "plates collide at dim=-1", does not). Pyro puts its particle / predictive plate there when it guesses
        ``max_plate_nesting = 0``, which it does when no sample site of the model is in the ``"data"`` plate: a
        model whose GP nodes are all Gaussian leaves integrated out by ``collapse="inducing"``."""
        from pyro.poutine.indep_messenger import IndepMessenger
        from pyro.poutine.runtime import _PYRO_STACK

        outer = next((m for m in _PYRO_STACK if isinstance(m, IndepMessenger) and m.dim == -1 and m.name != "data"),
                     None)
        if outer is None:
            return
        collapsed = self._collapsed_inducing(obs, generate)
        why = (f" (with collapse='inducing', the observed Gaussian leaves {collapsed} have no site in the 'data' plate, "
               "so if no other site is in it Pyro guesses max_plate_nesting=0)" if collapsed else "")
        raise DAGInputError(
            f"the outer plate {outer.name!r} is at dim -1, where the model's 'data' plate sits{why}. Give the model's "
            "plate nesting explicitly: Trace_ELBO(..., vectorize_particles=True, max_plate_nesting=1) (the particles "
            "then go to dim -2); Predictive cannot be told it, so use Predictive(..., parallel=False); or use "
            "collapse='values'")

    def create_plates(self, inputs, data=None, mask=None, subsample_size=None, subsample=None):
        """The model's ``"data"`` plate for the same arguments as :meth:`forward`, for a guide's ``create_plates``
        (Pyro's autoguides): ``AutoStructuredGuide(model, create_plates=model.create_plates)``. The guide then
        draws each call's minibatch with that call's ``subsample_size`` / ``subsample`` (without it, a guide with
        local parameters, e.g. for latent inputs, keeps the minibatch size of its first call).

        :returns: ``pyro.plate("data", n, subsample_size=subsample_size, subsample=subsample, dim=-1)``.
        """
        n = None
        if _is_pandas(inputs):
            n = len(inputs)
        elif isinstance(inputs, dict):
            n = next((len(inputs[r]) for r in self.root_nodes if r in inputs), None)
        if n is None:
            n = self._count_cases(data)
        return pyro.plate("data", n, subsample_size=subsample_size, subsample=subsample, dim=-1, device=self.device)

    @staticmethod
    def _check_subsample(subsample_size, subsample, n):
        if subsample_size is not None:
            try:
                size = operator.index(subsample_size)
            except TypeError:
                size = None
            if size is None or isinstance(subsample_size, bool) or not 1 <= size <= n:
                raise DAGInputError(f"subsample_size must be an integer between 1 and the number of cases n = {n}, "
                                    f"got {subsample_size!r}; pass subsample_size=None for full-batch training")
        if subsample is not None:
            idx = torch.as_tensor(subsample)
            if idx.dim() != 1 or idx.dtype.is_floating_point or idx.dtype.is_complex or idx.dtype == torch.bool:
                raise DAGInputError(f"subsample must be a 1-d tensor of case indices in [0, n = {n}), got "
                                    f"{idx.dtype} of shape {tuple(idx.shape)}")
            if idx.numel() == 0 or (idx.device.type == "cpu" and not bool(((idx >= 0) & (idx < n)).all())):
                raise DAGInputError(f"subsample must hold at least one case index, each in [0, n = {n}); got "
                                    f"{idx.numel()} indices" + ("" if idx.numel() == 0 else
                                                               f" from {int(idx.min())} to {int(idx.max())}"))
            if subsample_size is not None and subsample_size != idx.numel():
                raise DAGInputError(f"subsample_size = {subsample_size} but subsample has {idx.numel()} indices; "
                                    "pass one of them")

    def cholesky_cache(self):
        """``{node: (Z_w, chol K_w(Z_w, Z_w))}`` for every GP node (inside :meth:`fixed_kernels`: the factors
        computed when the block was entered)."""
        fixed = self.__dict__.get("_fixed_cholesky")
        if fixed is not None:
            return dict(fixed)
        return {w: self._node_cholesky(w) for w in self.topo_nodes}

    @contextlib.contextmanager
    def fixed_kernels(self):
        """Factorise every ``K_w(Z_w, Z_w)`` once and reuse the factors for every ELBO evaluation in the block.

        For models whose kernel hyperparameters and inducing inputs are held fixed (e.g. frozen with
        :func:`pyro_dag.utils.freeze`, as in the latent-collider protocol, Perlino et al. 2026, App. G.3): each
        step then skips one ``[M_w, M_w]`` kernel evaluation and Cholesky factorisation per node, and nodes whose
        parents are all roots reuse their whitened conditional ``(a, r)`` while the same (unmodified) design
        matrix comes back, i.e. in full-batch training. The model must be set up (:meth:`setup`) first, and the kernels, inducing inputs, jitter, dtype and device must not change
        inside the block.

        :raises ValueError: naming the node, if a kernel has learnable or sampled hyperparameters or the
            inducing inputs are learnable (their factors would go stale): freeze them or drop the block.
        """
        if not self.is_setup:
            raise RuntimeError("fixed_kernels: set the model up first (model.setup(inputs, data))")
        for w in self.topo_nodes:
            kernel = self.kernels[w]
            if any(p.requires_grad for p in kernel.parameters()):
                raise ValueError(f"fixed_kernels: the kernel of node {w!r} has learnable hyperparameters; freeze "
                                 "them (pyro_dag.utils.freeze(model.kernels)) or train without fixed_kernels()")
            if any(getattr(m, "_pyro_samples", None) for m in kernel.modules()):
                raise ValueError(f"fixed_kernels: the kernel of node {w!r} has sampled (PyroSample) "
                                 "hyperparameters; train without fixed_kernels()")
            if self._inducing_Z(w).requires_grad:
                raise ValueError(f"fixed_kernels: the inducing inputs of node {w!r} are learnable; freeze them "
                                 "(pyro_dag.utils.freeze(model.inducing)) or train without fixed_kernels()")
        with torch.no_grad():
            cache = {w: tuple(t.detach() for t in self._node_cholesky(w)) for w in self.topo_nodes}
        self.__dict__["_fixed_cholesky"] = cache
        self.__dict__["_fixed_conditionals"] = {}
        self.__dict__["_fixed_inverses"] = {}
        try:
            yield self
        finally:
            self.__dict__.pop("_fixed_cholesky", None)
            self.__dict__.pop("_fixed_conditionals", None)
            self.__dict__.pop("_fixed_inverses", None)

    def _observation_nodes(self, obs, generate):
        if generate:
            return [w for w in self.gp_nodes if w in (self.observed_nodes or ())]
        return [w for w in self.gp_nodes if w in obs]

    def _collapsed(self, w):
        """Gaussian-likelihood leaves are integrated out analytically in ``sample_f`` mode."""
        return (self.sample_f and self.collapse is not None and self.graph.out_degree(w) == 0
                and isinstance(self.likelihoods[w], Gaussian))

    def _collapsed_inducing(self, obs, generate):
        """The observed Gaussian-likelihood nodes that ``collapse="inducing"`` reparameterises: leaves with their
        inducing outputs integrated out, nodes with children sampled in posterior-whitened coordinates (none when
        generating: a draw of new observations needs the inducing outputs)."""
        if self.collapse != "inducing" or generate:
            return []
        return [w for w in self.gp_nodes if w in obs and isinstance(self.likelihoods[w], Gaussian)
                and (self._collapsed(w) or not self.centred)]

    def _posterior_whitened_values(self, w, a, r, z, observed):
        """Node values ``[B, d]``, inducing outputs ``[d, M]`` and the marginal of ``y`` (a
        :class:`CollapsedGaussianLeaf`) of an observed Gaussian node with children under ``collapse="inducing"``,
        from its standardised sites ``z`` (``"{w}.z"``) and ``ε`` (``"{w}.eps"``).

        ``p(U) p(F | U) p(y | F) = p(y) p(U | y) p(F | U, y)`` for the node's own observations ``y``, all Gaussian:
        with ``U = m + L⁻ᵀ z`` (``U | y ~ N(m, (L Lᵀ)⁻¹)``) and ``F_b = E[F_b | U, y_b] + sd(F_b | U, y_b) · ε_b``
        the density in ``(z, ε)`` is ``p(y) N(z; 0, I) N(ε; 0, I)``, so ``z`` and ``ε`` are a posteriori standard
        normal but for the children's likelihood (the data-informed non-centring of Papaspiliopoulos, Roberts &
        Sköld 2007, with the conjugate part exact); ``p(y)`` is the :class:`CollapsedGaussianLeaf` site."""
        y, m = observed
        tau2 = self.likelihoods[w].hyper("variance")  # [d] or, batched, [*batch, 1, d] (see Likelihood.hyper)
        y0 = torch.where(m, y, torch.zeros_like(y))
        marginal = CollapsedGaussianLeaf(a, r, tau2, self.output_dims[w], mask=m)
        mean, L = marginal.inducing_posterior(y0)
        u = mean + torch.linalg.solve_triangular(L.transpose(-1, -2), z.unsqueeze(-1), upper=True).squeeze(-1)
        loc = a @ u.transpose(-1, -2)
        var = r.unsqueeze(-1).expand_as(loc)
        mean_f, var_f, gain = value_posterior(loc, var, y0, m, tau2)
        eps = pyro.sample(f"{w}.eps", dist.Normal(torch.zeros_like(loc), 1.0).to_event(1),
                          infer=self._site_meta(w, "value"))
        f = mean_f + var_f.clamp_min(0).sqrt() * eps
        pyro.deterministic(f"{w}.f", f, event_dim=1)
        # the same value's standardised residual under the prior conditional, ε' = (F - μ(U)) / √r (the "{w}.eps"
        # of collapse="values"), written without dividing by √r (r goes down to the jitter)
        eps_prior = torch.where(m, var.sqrt() / (var + tau2) * (y0 - loc) + (1 - gain).sqrt() * eps, eps)
        pyro.deterministic(f"{w}.eps_prior", eps_prior, event_dim=1)
        return f, u, marginal

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

    def marginal_pass(self, posterior, X, num_samples, idx=None, cache=None, sampler="conditional", antithetic=False,
                      state=None, noise=None, latent=None):
        """Marginal ancestral sampling through the whole DAG (Perlino et al. 2026, Prop. 9; Algorithms 1-3, App. E.3).

        :param posterior: an :class:`~pyro_dag.infer.autoguide.posteriors.InducingPosterior`.
        :param dict X: root design matrices ``{root: [n, d_r]}`` (already checked).
        :param int num_samples: ``S``.
        :param idx: optional case indices ``[B]``.
        :param dict cache: optional :meth:`cholesky_cache`.
        :param str sampler: ``"conditional"`` (Algorithms 1-3) or ``"joint"`` (see :class:`~pyro_dag.infer.DAGELBO`).
        :param bool antithetic: pair the samples, ``ε`` for the first ``S/2`` and ``-ε`` for the rest (``S`` even).
        :param state: a sampler state to draw with (default: a fresh one for ``sampler``); pass one to read its
            draws afterwards (as :class:`~pyro_dag.infer.natural.SinkNaturalGradient` does).
        :param dict noise: optional ``{node: [S, B, d] standard-normal draws}`` to use instead of fresh ones
            (:meth:`predict` draws them for all cases first, so that its result does not depend on ``batch_size``).
        :param dict latent: the values of the latent inputs for the (sub)sampled cases (already indexed by
            ``idx``), ``{h: [B, d_h]}`` (one value per case, shared by the ``S`` samples, e.g. the guide's draw of
            ``"{h}.x"``) or ``{h: [S, B, d_h]}`` (one per sample and case); required when the model has latent
            inputs.
        :returns: ``{node: (f [S, B, d], loc [S, B, d], var [S, B, d])}``: the draws, and the mean and the
            marginal variances of the Gaussian each draw came from.
        """
        latent = dict(latent or {})
        missing = [h for h in self.latent_inputs if h not in latent]
        if missing:
            raise ValueError(f"marginal_pass: the model has latent inputs {missing}; pass their values for the cases "
                             "as latent={h: [B, d_h] or [S, B, d_h] tensor} (a caller that does not draw them, e.g. "
                             "SinkNaturalGradient, does not support models with latent inputs: train those with "
                             "DAGELBO or GaussianNaturalGradient)")
        if state is None and sampler == "joint":
            sinks = [w for w in self.gp_nodes if self.graph.out_degree(w) == 0]
            state = posterior.joint_state(num_samples, sinks, antithetic=antithetic)
        elif state is None:
            state = posterior.ancestral_state()
        values = {r: (X[r] if idx is None else X[r][idx]) for r in self.root_nodes}
        values.update({h: latent[h] for h in self.latent_inputs})
        out = {}
        cache = self.cholesky_cache() if cache is None else cache
        for w in self.topo_nodes:
            a, r = self.node_conditional(w, values, cache)
            loc, cov = state.predict(w, a, r)
            batch = (num_samples,) + loc.shape[-2:]
            eps = standard_normal(batch, loc, antithetic) if noise is None else noise[w]
            if cov.shape[-1] == 1:
                var = cov[..., 0]
                f = loc + var.clamp_min(0).sqrt() * eps
            else:
                var = cov.diagonal(dim1=-2, dim2=-1)
                f = loc + (torch.linalg.cholesky(cov) @ eps.unsqueeze(-1)).squeeze(-1)
            if w != self.topo_nodes[-1]:  # nothing is drawn after the last node: skip its conditioning
                state.update(w, a, r, f)
            values[w] = f
            out[w] = (f, loc.expand(batch), var.expand(batch))
        return out

    def _forward_marginal(self, estimator, X, obs, plate, cache):
        latent = self._sample_latent_inputs(plate)
        posterior = estimator.posterior(self._key, self.topo_nodes[0])
        observed = self._observation_nodes(obs, generate=False)
        with plate as idx:
            passes = self.marginal_pass(posterior, X, estimator.num_particles, idx, cache, estimator.sampler,
                                        estimator.antithetic, latent=latent)
            for w in observed:
                _, loc, var = passes[w]
                y, m = obs[w]
                ell = self.likelihoods[w].expected_log_prob(y[idx], loc, var)
                ell = torch.where(m[idx], ell, torch.zeros_like(ell)).sum(-1).mean(0)
                pyro.factor(f"{w}.y", ell)
        return {w: passes[w][0] for w in self.topo_nodes}

    # ------------------------------------------------------------------ prediction
    #: Default ``num_samples × batch_size × Σ_w d_w M_w`` bound of :meth:`predict`'s working set (elements).
    predict_chunk_elements = 2 ** 21

    @torch.no_grad()
    def predict(self, guide, inputs, data=None, nodes=None, num_samples=200, batch_size=None, mask=None,
                latent_steps=300, latent_lr=0.05, latent_particles=16):
        """Posterior predictive of node values at new inputs, also for nodes that are never observed.

        With an :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide` (alone or as a part of an
        ``AutoGuideList``) this runs marginal ancestral sampling against its ``q(U)`` (exact samples from the
        induced ``q(F)``; Perlino et al. 2026, arXiv:2607.09645, Prop. 9 and Algorithms 1-3 of App. E.3); with any
        other guide it draws ``U`` from the guide and propagates (plain ancestral sampling). Predictions propagate
        from the roots through the DAG.

        **Latent inputs.** For a model with ``latent_inputs``, the per-case latent values of the new cases are
        inferred from ``data``, the nodes observed for them (:meth:`infer_latent_inputs`: a short fit of
        ``q(h_i) = N(μ_i, diag σ_i²)`` with the model and ``q(U)`` frozen); a case with nothing observed keeps the
        prior ``N(0, I)``, as do all cases when ``data`` is ``None``. With an amortised guide
        (:class:`~pyro_dag.infer.autoguide.AutoEncodedStructuredGuide`, or any ``AutoGuideList`` holding an
        :class:`~pyro_dag.infer.autoguide.AutoLatentEncoder`) ``q(h_i)`` is the encoder's output instead (one pass,
        no fit). Each sample then draws ``h`` from ``q(h)`` and propagates. ``data`` is used for nothing else (an
        observed node's prediction is still the model's).

        The cases are processed in chunks of ``batch_size``, so that memory beyond the returned tensors stays
        bounded whatever ``n``. The standard-normal draws are made for all cases first, in the same order as in
        one pass, so the result (for a given seed) does not depend on ``batch_size`` (with latent inputs inferred
        from ``data``, the fit of ``q(h)`` is also done chunk by chunk, and its random draws depend on it).

        :param guide: a trained guide. :param dict inputs: ``{root: [n, d_r]}`` (observed roots only).
        :param dict data: ``{node: [n, d_w]}`` observations of the new cases (NaN = missing), used only to infer
            latent inputs; ``None``: the latent inputs keep their prior. Refused for a model without latent inputs.
        :param list nodes: nodes to return (default: all GP nodes); latent inputs may be named too (their samples
            are the draws of ``h``, their ``loc`` / ``var`` the moments of ``q(h)``).
        :param int num_samples: ``S``.
        :param int batch_size: cases per chunk (default: as many as keep ``S × batch_size × Σ_w d_w M_w``
            below :attr:`predict_chunk_elements`, i.e. a working set of about 16 MiB per intermediate in float64).
        :param dict mask: optional ``{node: bool [n, d_w]}`` for ``data`` (True = observed).
        :param int latent_steps: Adam steps of the latent fit. :param float latent_lr: its learning rate.
        :param int latent_particles: samples per case and step of the latent fit.
        :returns: ``{node: NodePrediction}`` with samples ``[S, n, d_w]``.

        With a :class:`~pyro_dag.infer.LatentMAP` as ``guide``: its linked-GP prediction
        (:meth:`~pyro_dag.infer.LatentMAP.predict`: moments in closed form, ancestral samples).
        """
        from .infer.lamp import LatentMAP

        if isinstance(guide, LatentMAP):
            from .infer.lamp.fit import predict_for_model

            return predict_for_model(guide, self, inputs, data, nodes, num_samples, mask)
        X, n, obs = self.checked_arguments(inputs, data, mask)
        if not self.is_setup:
            raise RuntimeError("the model is not set up yet: train it (or call model.setup(inputs, data)) first")
        if data is not None and not self.latent_inputs:
            raise DAGInputError("predict: data is used only to infer latent inputs, and this model has none; drop "
                                "data (predictions propagate from the roots)")
        nodes = list(self.gp_nodes) if nodes is None else list(nodes)
        for w in nodes:
            if w not in self.gp_nodes and w not in self.latent_inputs:
                raise DAGInputError(f"cannot predict node {w!r}: it is not a GP node of the graph "
                                    f"(GP nodes: {self.gp_nodes}" +
                                    (f", latent inputs: {list(self.latent_inputs)})" if self.latent_inputs else ")"))
        num_samples = self._check_positive_int(num_samples, "num_samples")
        batch_size = self._predict_batch_size(num_samples, batch_size)
        chunks = [(lo, min(lo + batch_size, n)) for lo in range(0, n, batch_size)]
        structured, encoder = self._guide_parts(guide)
        if not self.latent_inputs:
            q_h = {}
        elif encoder is not None:
            q_h = self._encode_latent_inputs(encoder, X, n, obs)
        else:
            q_h = self._fit_latent_inputs(guide, inputs, X, n, obs, latent_steps, latent_lr, latent_particles)
        posterior = structured.inducing_posterior() if structured is not None else None
        with suspended():
            # draws of the latent inputs for all cases first (so that chunking does not change them)
            hs = {h: loc + scale * standard_normal((num_samples,) + loc.shape, loc) for h, (loc, scale) in q_h.items()}
            if posterior is not None:
                cache = self.cholesky_cache()
                # one draw per (sample, case, node), in the order a single pass over all cases makes them; the
                # draws of a returned node are overwritten, chunk by chunk, by its samples
                noise = {w: standard_normal((num_samples, n, self.output_dims[w]), self._anchor)
                         for w in self.topo_nodes}
                out = _PredictionBuffers(self, nodes, num_samples, n, samples={**noise, **hs})
                for lo, hi in chunks:
                    Xc = {r: X[r][lo:hi] for r in self.root_nodes}
                    eps = {w: noise[w][:, lo:hi] for w in self.topo_nodes}
                    latent = {h: v[:, lo:hi] for h, v in hs.items()}
                    passes = self.marginal_pass(posterior, Xc, num_samples, cache=cache, noise=eps, latent=latent)
                    for w in nodes:
                        if w in self.gp_nodes:
                            out.fill(w, 0, lo, hi, *passes[w])
            else:
                out = _PredictionBuffers(self, nodes, num_samples, n, samples=hs)
                for s in range(num_samples):
                    latent = {h: v[s] for h, v in hs.items()}
                    self._predict_one_guide_sample(guide, inputs, X, n, chunks, out, s, latent)
            for h, (loc, scale) in q_h.items():
                if h in out.nodes:
                    out.fill(h, 0, 0, n, hs[h], loc.expand(hs[h].shape), scale.pow(2).expand(hs[h].shape))
        return out.result(chunks)

    def full_model_draws(self, samples, inputs, data=None, mask=None):
        """Posterior draws of a ``collapse="inducing"`` run in the coordinates of the full model.

        NUTS on ``DAGDGP(..., sample_f=True, collapse="inducing")`` samples reparameterised sites for the observed
        Gaussian-likelihood nodes (:class:`~pyro_dag.gp.CollapsedGaussianLeaf`): a leaf's whitened
        inducing outputs ``"{w}.u"`` are integrated out, and a node with children is sampled through
        posterior-whitened ``"{w}.z"`` and ``"{w}.eps"``. This returns, for every draw, the sites of the model
        with ``collapse="values"``: a leaf's ``"{w}.u"`` drawn exactly from ``p(U_w | y, rest)``, once per draw
        (Rao-Blackwellisation), and a node with children's ``"{w}.u"`` and prior-standardised ``"{w}.eps"``
        computed from its draw (Perlino et al. 2026, arXiv:2607.09645, Eq. (80)). Use the result wherever the full
        model's draws are needed, e.g. ``Predictive(model, posterior_samples=...)`` (which runs the model without
        data, so with every ``"{w}.u"`` site) or :func:`pyro_dag.diagnostics.to_inference_data` (which calls
        this itself).

        :param dict samples: ``{site: [S, ...]}`` posterior draws, e.g. ``mcmc.get_samples()``.
        :param dict inputs: the inputs of the run. :param dict data: its data. :param dict mask: its mask.
        :returns: a new dict: ``samples`` with ``"{w}.u"`` ``[S, d_w, M_w]`` for each reparameterised node,
            ``"{w}.eps"`` in the full model's coordinates and no ``"{w}.z"``.
        """
        X, n, obs = self.checked_arguments(inputs, data, mask)
        nodes = self._collapsed_inducing(obs, generate=data is None)
        if not nodes:
            return dict(samples)
        num = {int(v.shape[0]) for v in samples.values()}
        if len(num) != 1:
            raise DAGInputError(f"samples must hold the same number of draws at every site, got sizes {sorted(num)}")
        num = num.pop()
        draws = {}
        with torch.no_grad():
            for s in range(num):
                with pyro.poutine.trace() as tr, pyro.poutine.condition(data={k: v[s] for k, v in samples.items()}):
                    self(inputs, data, mask)
                for w in nodes:
                    if self.graph.out_degree(w) == 0:
                        site = tr.trace.nodes[f"{w}.y"]
                        draws.setdefault(f"{w}.u", []).append(site["fn"].sample_inducing(site["value"]))
                    else:
                        draws.setdefault(f"{w}.u", []).append(tr.trace.nodes[f"{w}.u"]["value"])
                        draws.setdefault(f"{w}.eps", []).append(tr.trace.nodes[f"{w}.eps_prior"]["value"])
        out = {k: v for k, v in samples.items() if not (k.endswith(".z") and k[:-2] in nodes)}
        out.update({k: torch.stack(v) for k, v in draws.items()})
        return out

    def _predict_batch_size(self, num_samples, batch_size):
        if batch_size is None:
            size = sum(self.output_dims[w] * self.num_inducing[w] for w in self.topo_nodes)
            return max(1, self.predict_chunk_elements // (num_samples * size))
        return self._check_positive_int(batch_size, "batch_size")

    @torch.no_grad()
    def infer_latent_inputs(self, guide, inputs, data=None, mask=None, num_steps=300, lr=0.05, num_particles=16,
                            batch_size=None):
        """Infer the latent inputs of (new) cases from the nodes observed for them, with the model and the guide's
        ``q(U)`` frozen.

        Fits ``q(h_i) = N(μ_i, diag σ_i²)`` per case by maximising the cases' ELBO
        ``Σ_i E_{q(h_i) q(U) p(F | U, h_i)}[Σ_w log p(y_w^{(i)} | F_w^{(i)})] - KL(q(h_i) || N(0, I))`` with Adam,
        starting from the prior, ``num_particles`` reparameterised draws of ``h`` per case and step (the per-case
        latent layer of Salimbeni, Dutordoir, Hensman & Deisenroth 2019, "Deep Gaussian processes with
        importance-weighted variational inference", ICML, used for confounders by Perlino et al. 2026,
        arXiv:2607.09645, Sec. 6 and App. E.3.4). The expected log-likelihood is evaluated as in
        :class:`~pyro_dag.infer.DAGELBO` (marginal ancestral sampling, closed form at each observed node) for an
        :class:`~pyro_dag.infer.autoguide.AutoStructuredGuide`; for other guides ``num_particles`` draws of ``U``
        from the guide are made once and held fixed during the fit. Cases with nothing observed (and all cases
        when ``data`` is ``None``) keep the prior ``N(0, I)``. The cases are fitted independently, in chunks of
        ``batch_size``.

        :param guide: the trained guide. :param dict inputs: ``{root: [n, d_r]}``.
        :param dict data: ``{node: [n, d_w]}``, NaN = missing. :param dict mask: optional, as in :meth:`forward`.
        :param int num_steps: Adam steps. :param float lr: Adam's learning rate.
        :param int num_particles: draws of ``h`` per case and step.
        :param int batch_size: cases per chunk (default as in :meth:`predict`).
        :returns: ``{h: (loc [n, d_h], scale [n, d_h])}``, the moments of ``q(h)``.
        """
        X, n, obs = self.checked_arguments(inputs, data, mask)
        if not self.is_setup:
            raise RuntimeError("the model is not set up yet: train it (or call model.setup(inputs, data)) first")
        return self._fit_latent_inputs(guide, inputs, X, n, obs, num_steps, lr, num_particles, batch_size)

    @staticmethod
    def _guide_parts(guide):
        """``(part with an inducing posterior, AutoLatentEncoder part)`` of a guide or an ``AutoGuideList`` (each
        ``None`` if absent)."""
        from pyro.infer.autoguide import AutoGuideList

        from .infer.autoguide.encoder import AutoLatentEncoder

        parts = list(guide) if isinstance(guide, AutoGuideList) else [guide]
        structured = next((p for p in parts if hasattr(p, "inducing_posterior")), None)
        encoder = next((p for p in parts if isinstance(p, AutoLatentEncoder)), None)
        return structured, encoder

    def _encode_latent_inputs(self, encoder, X, n, obs):
        """``q(h)`` of the cases from an :class:`~pyro_dag.infer.autoguide.encoder.AutoLatentEncoder` (one pass);
        cases with nothing observed keep the prior."""
        if encoder.prototype_trace is None:
            raise RuntimeError("predict: the AutoLatentEncoder has not been trained (run the guide once first)")
        kw = {"dtype": self.dtype, "device": self.device}
        q = {h: (torch.zeros((n, d), **kw), torch.ones((n, d), **kw)) for h, d in self.latent_inputs.items()}
        seen = torch.zeros(n, dtype=torch.bool, device=self.device)
        for w, (_, m) in obs.items():
            seen |= m.any(-1)
        if bool(seen.any()):
            idx = seen.nonzero().squeeze(-1)
            X_seen = {r: x[idx] for r, x in X.items()}
            encoded = encoder.encode(X_seen, {w: (y[idx], m[idx]) for w, (y, m) in obs.items()}, len(idx))
            for h, (loc, scale) in encoded.items():
                q[h][0][idx] = loc.detach()
                q[h][1][idx] = scale.detach()
        return q

    def _fit_latent_inputs(self, guide, inputs, X, n, obs, num_steps, lr, num_particles, batch_size=None):
        num_steps = int(num_steps)
        if num_steps < 0:
            raise DAGInputError(f"latent_steps / num_steps must be >= 0, got {num_steps}")
        if not (float(lr) > 0 and np.isfinite(float(lr))):
            raise DAGInputError(f"latent_lr / lr must be a finite positive number, got {lr!r}")
        S = self._check_positive_int(num_particles, "latent_particles / num_particles")
        kw = {"dtype": self.dtype, "device": self.device}
        q = {h: (torch.zeros((n, d), **kw), torch.ones((n, d), **kw)) for h, d in self.latent_inputs.items()}
        seen = torch.zeros(n, dtype=torch.bool, device=self.device)
        for w, (_, m) in obs.items():
            seen |= m.any(-1)
        if num_steps == 0 or not bool(seen.any()):
            return q
        batch_size = self._predict_batch_size(S, batch_size)
        structured, _ = self._guide_parts(guide)
        posterior = structured.inducing_posterior() if structured is not None else None
        with suspended():
            cache = {w: tuple(t.detach() for t in v) for w, v in self.cholesky_cache().items()}
            us = None
            if posterior is None:  # U drawn from the guide once, held fixed during the fit: [S, d_w, M_w]
                traces = [pyro.poutine.trace(guide).get_trace(inputs) for _ in range(S)]
                us = {w: torch.stack([t.nodes[f"{w}.u"]["value"].detach() for t in traces]) for w in self.topo_nodes}
            cases = seen.nonzero().squeeze(-1)
            for lo in range(0, len(cases), batch_size):
                idx = cases[lo:lo + batch_size]
                Xc = {r: X[r][idx] for r in self.root_nodes}
                obs_c = {w: (y[idx], m[idx]) for w, (y, m) in obs.items()}
                fitted = self._fit_latent_chunk(posterior, us, Xc, obs_c, cache, len(idx), num_steps, lr, S)
                for h, (loc, scale) in fitted.items():
                    q[h][0][idx] = loc
                    q[h][1][idx] = scale
        return q

    def _fit_latent_chunk(self, posterior, us, X, obs, cache, B, num_steps, lr, S):
        kw = {"dtype": self.dtype, "device": self.device}
        locs = {h: torch.zeros((B, d), **kw, requires_grad=True) for h, d in self.latent_inputs.items()}
        log_scales = {h: torch.zeros((B, d), **kw, requires_grad=True) for h, d in self.latent_inputs.items()}
        params = list(locs.values()) + list(log_scales.values())
        optim = torch.optim.Adam(params, lr=float(lr))
        with torch.enable_grad():
            for _ in range(num_steps):
                optim.zero_grad()
                latent, kl = {}, 0.0
                for h in self.latent_inputs:
                    loc, log_s = locs[h], log_scales[h]
                    scale = log_s.exp()
                    latent[h] = loc + scale * torch.randn((S,) + loc.shape, **kw)
                    kl = kl + 0.5 * (loc.pow(2) + scale.pow(2) - 1.0 - 2.0 * log_s).sum()
                if us is None:
                    passes = self.marginal_pass(posterior, X, S, cache=cache, latent=latent)
                else:
                    passes = self._sampled_u_pass(us, X, latent, cache)
                ell = 0.0
                for w, (y, m) in obs.items():
                    _, loc_w, var_w = passes[w]
                    e = self.likelihoods[w].expected_log_prob(y, loc_w, var_w)
                    ell = ell + torch.where(m, e, torch.zeros_like(e)).sum() / S
                loss = kl - ell
                if not bool(torch.isfinite(loss)):
                    raise NonFiniteLossError(f"infer_latent_inputs: the loss of the latent fit is {float(loss)}; "
                                             "lower lr (latent_lr) or check the data of the new cases")
                # gradients of the local parameters only (the model's own .grad stay untouched)
                for p, g in zip(params, torch.autograd.grad(loss, params)):
                    p.grad = g
                optim.step()
        return {h: (locs[h].detach(), log_scales[h].detach().exp()) for h in self.latent_inputs}

    def _sampled_u_pass(self, us, X, latent, cache):
        """Ancestral pass with fixed draws ``us = {w: [S, d_w, M_w]}`` of the inducing outputs and latent inputs
        ``{h: [S, B, d_h]}``; ``{node: (f, loc, var)}`` ``[S, B, d_w]``."""
        values = dict(X)
        values.update(latent)
        out = {}
        for w in self.topo_nodes:
            a, r = self.node_conditional(w, values, cache)
            loc = a @ us[w].transpose(-1, -2)
            var = r.unsqueeze(-1).expand_as(loc)
            f = loc + var.sqrt() * torch.randn_like(loc)
            values[w] = f
            out[w] = (f, loc, var)
        return out

    @staticmethod
    def _check_positive_int(value, name):
        try:
            v = operator.index(value)
        except TypeError:
            v = None
        if v is None or isinstance(value, bool) or v < 1:
            raise DAGInputError(f"{name} must be a positive integer, got {value!r}")
        return int(v)

    def _predict_one_guide_sample(self, guide, inputs, X, n, chunks, out, s, latent=None):
        """Sample ``s`` of :meth:`predict` with a guide that is not structured: one ``U`` from the guide, pushed
        through the DAG chunk by chunk (``latent``: ``{h: [n, d_h]}`` values of the latent inputs)."""
        latent = latent or {}
        guide_trace = pyro.poutine.trace(guide).get_trace(inputs)
        us = {w: guide_trace.nodes[f"{w}.u"]["value"] for w in self.topo_nodes}
        cache = self.cholesky_cache()
        noise = {w: torch.randn((n, self.output_dims[w]), dtype=self.dtype, device=self.device)
                 for w in self.topo_nodes}
        for lo, hi in chunks:
            values = {r: X[r][lo:hi] for r in self.root_nodes}
            values.update({h: v[lo:hi] for h, v in latent.items()})
            for w in self.topo_nodes:
                a, r = self.node_conditional(w, values, cache)
                loc = a @ us[w].transpose(-1, -2)
                var = r.unsqueeze(-1).expand_as(loc)
                f = loc + var.sqrt() * noise[w][lo:hi]
                values[w] = f
                if w in out.nodes:
                    out.fill(w, s, lo, hi, f.unsqueeze(0), loc.unsqueeze(0), var.unsqueeze(0))
class _PredictionBuffers:
    """Output tensors of :meth:`DAGDGP.predict`, filled chunk by chunk (samples ``[S, n, d]`` and moments)."""

    def __init__(self, model, nodes, num_samples, n, samples=None):
        self.model, self.nodes, self.num_samples = model, list(nodes), num_samples
        kw = {"dtype": model.dtype, "device": model.device}
        samples = samples or {}

        def buffer(w):
            d = model.latent_inputs[w] if w in model.latent_inputs else model.output_dims[w]
            return torch.empty((num_samples, n, d), **kw)

        self.draws = {w: (samples[w] if w in samples else buffer(w), buffer(w), buffer(w)) for w in self.nodes}

    def fill(self, w, s, lo, hi, f, loc, var):
        """Write ``f``, ``loc``, ``var`` ``[k, hi - lo, d]`` for samples ``s .. s + k`` and cases ``lo .. hi``."""
        for buf, v in zip(self.draws[w], (f, loc, var)):
            buf[s:s + v.shape[0], lo:hi] = v

    def result(self, chunks):
        """``{node: NodePrediction}``; the moments over the samples are computed chunk by chunk of cases."""
        out = {}
        for w in self.nodes:
            f, loc, var = self.draws[w]
            mean, variance = torch.empty_like(loc[0]), torch.empty_like(loc[0])
            y_mean = y_var = None
            for lo, hi in chunks:
                lc, vc = loc[:, lo:hi], var[:, lo:hi]
                mean[lo:hi] = lc.mean(0)
                variance[lo:hi] = vc.mean(0) + lc.var(0, unbiased=False)
                # latent inputs have no likelihood
                moments = self.model.likelihoods[w].predictive_moments(lc, vc) if w in self.model.gp_nodes else None
                if moments is not None:
                    ym, yv = moments
                    if y_mean is None:
                        y_mean, y_var = torch.empty_like(mean), torch.empty_like(mean)
                    y_mean[lo:hi] = ym.mean(0)
                    y_var[lo:hi] = yv.mean(0) + ym.var(0, unbiased=False)
            out[w] = NodePrediction(f, mean, variance, loc, var, y_mean, y_var)
        return out
