r"""LatentMAP: latent-MAP (LaMP) fitting of a :class:`~pyro_dag.DAGDGP` with exact-GP nodes.

Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation": the per-case
values ``W`` of every hidden node are MAP point estimates, fitted jointly with the kernel length-scales (and nuggets)
by Adam per parameter block on the profiled objective of :mod:`pyro_dag.infer.lamp.objective` (Sec. 3, Eqs. (4)-(9));
full batch or mini-batch with row-wise Adam and the growing batch schedule (Sec. 4, Algorithm 1); the iterate with the
lowest validation RMSE is kept. Prediction is the linked GP (Sec. 3.2) of
:class:`~pyro_dag.infer.lamp.LinkedGPPredictor`.
"""
import math

import torch

from ...dgp import NodePrediction
from ...dgp.inputs import positive_int
from ...errors import NotFittedError
from .algorithm import LaMPFit, _input_error
from .fitted import KERNELS, FittedNode
from .linked import LinkedGPPredictor
from .objective import kernel_matrix, profiled_log_likelihood
from .persistence import load_lamp, save_lamp

__all__ = ["LatentMAP", "INITS"]

#: How a hidden node narrower than its inputs starts: ``"exact"`` (its first column at an exact GP's fit of its
#: observed descendants, the default) or ``"pca"`` (the leading principal components of its inputs, as before).
INITS = ("exact", "pca")



class LatentMAP:
    r"""Latent-MAP fitting of a :class:`~pyro_dag.DAGDGP` (LaMP-DGP; Chang & Sung 2026, Secs. 3-4).

    Every non-root node ``v`` of ``model.graph`` is ``d_v = model.output_dims[v]`` independent zero-mean **exact**
    GPs (no inducing points) on its parents' values: roots' design columns, observed parents' observations, and
    the per-case values ``W_v`` ``[n, d_v]`` of hidden parents, which are MAP parameters. Hidden nodes have process
    variance 1 (identifiability, Sec. 2) and a fixed jitter; observed nodes' variance ``τ²`` is profiled out
    (Eq. (5)); the objective is the DAG form of Eqs. (6)-(7), scaled by ``1/n``
    (:class:`~pyro_dag.infer.lamp.objective.LaMPObjective`). The paper's two-layer DGP with ``D`` latent dimensions
    is the chain ``x -> w -> y`` with ``output_dims={"w": D}``.

    Only the graph, the output dimensions and which nodes are observed are taken from ``model``; the kernels are
    this class's own (``kernel``, ``lengthscale``), the model's sparse-GP kernels and inducing points are unused.
    Put the inputs on comparable scales (e.g. the unit cube) with an isotropic kernel, as the paper does.

    **Initialisation** (the paper leaves it open, Sec. 3.1). ``W_v^{(0)}``, in topological order: the node's parent
    values (``P``, hidden parents at their own initial values), standardised column-wise; if ``P`` has ``d_v``
    columns, ``W_v^{(0)}`` is that (the paper's ``D = d`` chain starts at ``W = X`` after scaling, as deepgp does);
    with more columns, the first ``d_v`` principal components of the standardised ``P``, standardised; with fewer,
    its columns repeated with ``N(0, 0.1²)`` noise (so the repeated outputs do not stay identical). Length-scales
    from the median squared distance ``med`` of the node's inputs: ``ℓ² = med / 2`` (the paper's ``θ = med``);
    ARD ``ℓ_d² = D med_d / 2``. Estimated nuggets start at ``nugget_init``.
    With ``init="exact"`` (the default) a hidden node narrower than its inputs (``d_v`` below ``P``'s columns)
    starts its first column instead at the **exact GP fit** of its nearest observed descendants on ``P``: the
    standardised posterior mean of an :class:`~pyro_dag.baselines.ExactGP` (ARD RBF, at most 300 cases), averaged
    over those descendants' columns (its other columns at the leading principal components), so that the chain
    ``x -> w -> y`` with a one-dimensional ``w`` starts at the shallow fit (``w = f̂(x)``, ``y`` a smooth map of
    ``w``), which the chain contains. The principal component need not carry the function: on smooth 3-6-D draws
    (:func:`~pyro_dag.datasets.random_regression.random_regression`) the chain started there predicted no better
    than the training mean (``init="pca"`` keeps that start).

    **Missing data.** An observed node may miss cases only if it is a leaf (no children) and misses whole cases
    (all its columns at once): its likelihood then uses the cases where it is observed. Missing entries of an
    observed node with children are refused (its children need its value at every case), as are non-Gaussian
    likelihoods, latent inputs and hidden nodes without an observed descendant (their MAP is ``W = 0``).

    :param model: the :class:`~pyro_dag.DAGDGP` (its dtype and device are used: ``model.double()`` for float64).
    :param str kernel: ``"rbf"`` (the paper's Eq. (1)) or ``"matern52"`` (separable Matérn-5/2).
    :param str lengthscale: ``"ard"`` (one per input column, the default) or ``"isotropic"`` (one per output, the
        paper's choice and the default before the exact start: ``lengthscale="isotropic", init="pca"`` restores the
        earlier defaults).
    :param nugget: the observed nodes' nugget ``g`` (noise variance over ``τ²``): a float held fixed (default 1e-4,
        the paper's choice for deterministic simulators) or ``"estimate"`` (noisy data; its own Adam block).
    :param float nugget_init: the starting ``g`` when estimated (default 1e-2).
    :param str init: ``"exact"`` (default) or ``"pca"``: the start of a hidden node narrower than its inputs
        (see *Initialisation*).
    :param float jitter: the hidden nodes' fixed jitter ``ε`` (default 1e-3). The paper fixes a "numerical"
        jitter without a value (App. A); with a tiny one (1e-6) the prior precision ``(K + εI)⁻¹`` of a smooth kernel
        is so ill-conditioned that Adam's first steps on ``W`` (about ``α_W`` on every coordinate, whatever the
        curvature) put ``O(α_W²/ε)`` into its stiff directions: on the G function (``d = 4``, 400 training cases,
        a fifth of ``K``'s eigenvalues below 1e-6) the first mini-batch epoch raises ``L_n`` by 49 at ``ε = 1e-6``,
        7.7 at 1e-4, 1.6 at 1e-3 and 0.2 at 1e-2, and the fits at 1e-6 were unstable and worse than a single GP;
        1e-3 keeps the prior well-conditioned (the repository's ``benchmarks/README.md`` has the comparison). The
        joint optimum of ``L_n`` over ``W`` and the length-scales is degenerate besides: ``-½ log|K + εI|`` rewards a
        first layer so smooth that most eigenvalues sit at ``ε`` (full-batch L-BFGS from ``W = X`` on G ``d = 4``:
        first-layer ``ℓ`` 0.56 -> 1.3-3.1, ``L_n`` -3.4 -> -10.8, test RMSE 0.33 -> 0.51), so the validation-based
        choice of the iterate (Sec. 3.1) is what makes the method work, not convergence.

    Example::

        g = nx.DiGraph([("x", "w"), ("w", "y")])
        model = DAGDGP(g, output_dims={"w": 1}).double()
        lamp = LatentMAP(model)
        history = lamp.fit({"x": X}, {"y": Y}, num_epochs=500)
        pred = lamp.predict({"x": X_test})               # {node: NodePrediction}, linked-GP moments
        mean, var = pred["y"].mean, pred["y"].variance
    """

    def __init__(self, model, *, kernel="rbf", lengthscale="ard", nugget=1e-4, nugget_init=1e-2, jitter=1e-3,
                 init="exact"):
        if not (hasattr(model, "graph") and hasattr(model, "checked_arguments")):
            raise TypeError(f"LatentMAP takes a DAGDGP, got {type(model).__name__}")
        if kernel not in KERNELS:
            raise ValueError(f"LatentMAP: kernel must be one of {KERNELS}, got {kernel!r}")
        if lengthscale not in ("isotropic", "ard"):
            raise ValueError(f"LatentMAP: lengthscale must be 'isotropic' or 'ard', got {lengthscale!r}")
        if nugget != "estimate" and not (isinstance(nugget, (int, float)) and not isinstance(nugget, bool)
                                          and math.isfinite(nugget) and nugget > 0):
            raise ValueError(f"LatentMAP: nugget must be a positive number (held fixed) or 'estimate', got {nugget!r}")
        if not (isinstance(nugget_init, (int, float)) and nugget_init > 0):
            raise ValueError(f"LatentMAP: nugget_init must be a positive number, got {nugget_init!r}")
        if getattr(model, "latent_inputs", None):
            raise _input_error(f"LatentMAP does not support latent inputs ({list(model.latent_inputs)}): their "
                               "per-case values have a N(0, I) prior, not a GP on parents; fit this model by SVI "
                               "(pyro_dag.infer.train) or make them observed roots")
        self.model = model
        self.kernel = kernel
        self.lengthscale_kind = lengthscale
        self.nugget = nugget
        self.nugget_init = float(nugget_init)
        if not (isinstance(jitter, (int, float)) and not isinstance(jitter, bool) and math.isfinite(jitter)
                and jitter > 0):
            raise ValueError(f"LatentMAP: jitter must be a positive number, got {jitter!r}")
        self.jitter = float(jitter)
        if init not in INITS:
            raise ValueError(f"LatentMAP: init must be one of {INITS}, got {init!r}")
        self.init = init
        self.history = None
        self._state = None

    # ------------------------------------------------------------------ properties
    @property
    def is_fitted(self):
        return self._state is True

    def _require_fit(self, what):
        # _state: None before any fit, "fitting" while a fit runs (and after one that did not finish), True after
        if self._state == "fitting":
            raise NotFittedError(f"LatentMAP.{what}: the last fit did not finish (interrupted, or stopped by an "
                                 "error), so the fitted state is incomplete: call fit(inputs, data) again")
        if self._state is not True:
            raise NotFittedError(f"LatentMAP.{what}: this LatentMAP has not been fitted; call fit(inputs, data) "
                                 "first (or load a saved fit)")

    @property
    def dtype(self):
        return self.model.dtype

    @property
    def device(self):
        return self.model.device

    # ------------------------------------------------------------------ checks



    # ------------------------------------------------------------------ initialisation





    # ------------------------------------------------------------------ fit
    def fit(self, inputs, data, *, mask=None, settings=None, batch="auto", seed=0, progress=False, **changes):
        r"""Fit the per-case values of the hidden nodes and the hyperparameters (Chang & Sung 2026, Algorithm 1).

        Each epoch updates every hidden node's rows once: full batch, or the cases partitioned into ``⌈n/m_t⌉``
        mini-batches of :func:`~pyro_dag.infer.lamp.batch_size_schedule` (Eq. (13)) with row-wise Adam
        (:class:`~pyro_dag.infer.lamp.RowwiseAdam`: each row's own moments and step count) and ``α_W`` decayed by
        ``lr_decay`` every ``lr_decay_every`` epochs; every ``hyper_every`` epochs one Adam step of the
        log-length-scales and log-nuggets on ``hyper_batch`` random cases with ``W`` fixed; every ``validate_every``
        epochs the validation score of the observed leaves (exact linked GP on ``prediction_subset`` fixed training
        cases), keeping the best iterate. ``τ²`` is profiled per batch; the fitted nodes' ``τ̂²`` is profiled on all
        training cases at the end. With ``condition_on_validation`` (the default) the fitted GPs then condition on
        all cases, the validation cases included (hidden values: the selected GPs' posterior means at all cases, see
        :attr:`fitted_rows`); the selected length-scales and nuggets are kept.

        :param dict inputs: ``{root: [n, d_r]}`` design matrices (as for :meth:`pyro_dag.DAGDGP.forward`).
        :param dict data: ``{node: [n, d_v]}`` observations, NaN = missing (see the class docstring).
        :param dict mask: optional ``{node: bool [n, d_v]}``, True = observed.
        :param LaMPSettings settings: the protocol (default :meth:`LaMPSettings.paper`: full batch for ``n <= 100``,
            mini-batch above, or as ``batch`` says).
        :param str batch: ``"auto"``, ``"full"`` or ``"minibatch"``: which of the paper's protocols is the default
            (ignored when ``settings`` is given).
        :param int seed: seed of the split, the batches and the initialisation.
        :param bool progress: print a line every ``validate_every`` epochs.
        :param changes: fields of :class:`LaMPSettings` to change, e.g. ``num_epochs=200``, ``lr={"W": 0.02}``.
        :returns: a :class:`LaMPHistory` (also kept as :attr:`history`).
        """
        return LaMPFit(self).run(inputs, data, mask=mask, settings=settings, batch=batch, seed=seed,
                                 progress=progress, **changes)

    # ------------------------------------------------------------------ saving and loading
    def save(self, path):
        """Save the fit to ``path`` (the per-case values ``Ŵ``, the hyperparameters, the cases the fitted GPs
        condition on and :attr:`history`), in the format of :func:`pyro_dag.persist.save` (it loads with
        ``torch.load(weights_only=True)``; written atomically).

        :returns: ``path``.
        """
        return save_lamp(path, self)

    def load(self, path):
        """Restore a fit saved by :meth:`save` into this LatentMAP, built on a model of the same graph and output
        dims with the same ``kernel``, ``lengthscale``, ``nugget`` and ``jitter``: its predictions then equal the
        saved one's (the same draws for the same ``seed``). The model takes the saved dtype.

        :returns: ``self``. :raises pyro_dag.persist.SavedFileError: for a missing, corrupt or foreign file, or a
            LatentMAP that does not match the saved one.

        Example::

            lamp.save("lamp.pt")
            lamp2 = LatentMAP(DAGDGP(g, output_dims={"w": 1}).double()).load("lamp.pt")
        """
        return load_lamp(path, self)

    # ------------------------------------------------------------------ fitted state
    @torch.no_grad()
    def _fitted_nodes(self, rows):
        obj = self._objective
        W = {v: w[rows] for v, w in self._W.items()}
        out = {}
        for v in obj.nodes:
            P = obj.node_inputs(v, rows, W)
            ls = self._log_ls[v].detach().exp()
            ls = ls.expand(ls.shape[0], P.shape[1]).clone()
            d = ls.shape[0]
            kw = {"dtype": P.dtype, "device": P.device}
            if v in obj.hidden:
                y = W[v]
                out[v] = FittedNode(name=v, inputs=tuple(obj.inputs[v]), input_dims=tuple(self._block_dims(v)), X=P,
                                    y=y.clone(), kernel=self.kernel, lengthscale=ls, variance=torch.ones(d, **kw),
                                    nugget=torch.full((d,), obj.jitter, **kw), observed=False)
                continue
            y = obj.fixed[v][rows]
            if v in obj.observed_rows:
                keep = obj.observed_rows[v][rows]
                P, y = P[keep], y[keep]
            g = self._log_g[v].detach().exp() if v in self._log_g else self._fixed_g[v]
            K = kernel_matrix(P, P, ls[:, :1] if self.lengthscale_kind == "isotropic" else ls, self.kernel)
            eye = torch.eye(P.shape[0], **kw)
            _, tau2 = profiled_log_likelihood(y, K + g.view(-1, 1, 1) * eye, v)
            out[v] = FittedNode(name=v, inputs=tuple(obj.inputs[v]), input_dims=tuple(self._block_dims(v)), X=P,
                                y=y.clone(), kernel=self.kernel, lengthscale=ls, variance=tau2, nugget=g.clone(),
                                observed=True)
        return out

    def _block_dims(self, v):
        obj = self._objective
        return [obj.fixed[p].shape[1] if p in obj.fixed else self._W[p].shape[1] for p in obj.inputs[v]]

    def fitted_nodes(self):
        """``{node: FittedNode}``: each non-root node's exact GP on all training cases, hidden nodes' outputs at
        ``Ŵ`` (variance 1, nugget = the jitter), observed nodes' at their observations with ``τ̂²`` profiled on all
        training cases (Eq. (5)) and the fitted nugget."""
        self._require_fit("fitted_nodes")
        if getattr(self, "_fitted_cache", None) is None:
            self._fitted_cache = self._fitted_nodes(torch.arange(self._fitted_rows.shape[0], device=self.device))
        return self._fitted_cache

    @property
    def train_rows(self):
        """``[n_train]`` indices (into the cases given to :meth:`fit`) of the training cases; the others validated."""
        self._require_fit("train_rows")
        return self._train_rows

    @property
    def fitted_rows(self):
        """``[n_fitted]`` indices of the cases the fitted GPs condition on: all cases when the validation cases were
        added after selection (``LaMPSettings.condition_on_validation``, the default), else :attr:`train_rows`."""
        self._require_fit("fitted_rows")
        return self._fitted_rows

    def latent_values(self):
        """``{hidden node: [n_fitted, d_v]}`` the per-case values at :attr:`fitted_rows`: the MAP values ``Ŵ``, or
        after ``condition_on_validation`` the fitted hidden GPs' posterior means at all cases."""
        self._require_fit("latent_values")
        return {v: w.clone() for v, w in self._W.items()}

    def hyperparameters(self):
        """``{node: {"lengthscale": [d_v, D_v], "variance": [d_v], "nugget": [d_v]}}`` of the fitted nodes."""
        return {v: {"lengthscale": f.lengthscale, "variance": f.variance, "nugget": f.nugget}
                for v, f in self.fitted_nodes().items()}

    def predictor(self, **kwargs):
        """A :class:`~pyro_dag.infer.lamp.LinkedGPPredictor` on :meth:`fitted_nodes` (``kwargs`` go to it, e.g.
        ``method="nystrom_local"``)."""
        return LinkedGPPredictor(self.fitted_nodes(), **kwargs)

    def _check_predict_inputs(self, inputs):
        X, n = self.model._check_inputs(inputs)
        for r, x in X.items():
            if x.shape[1] != self.input_dims[r]:
                raise _input_error(f"inputs[{r!r}] has {x.shape[1]} columns but LatentMAP was fitted with "
                                   f"{self.input_dims[r]}; pass the same columns as in training")
        return X, n

    def predict_dag(self, model, inputs, data=None, nodes=None, num_samples=200, mask=None):
        """:meth:`pyro_dag.DAGDGP.predict` with this LatentMAP as the guide (the guide's side of the prediction
        hand-off, see :mod:`pyro_dag.infer.predict`): :meth:`predict` on its own model."""
        return predict_for_model(self, model, inputs, data, nodes, num_samples, mask)

    def predict(self, inputs, nodes=None, num_samples=200, *, method="auto", seed=None, **predictor_kwargs):
        r"""Linked-GP predictions at new root inputs, in :meth:`pyro_dag.DAGDGP.predict`'s format.

        ``mean`` / ``variance``: the closed-form linked-GP moments of the latent node values (Chang & Sung 2026,
        Sec. 3.2); ``samples`` ``[S, n, d]``: ancestral draws of the linked predictive
        (:meth:`LinkedGPPredictor.sample`); ``loc`` / ``var``: the moments expanded to ``[S, n, d]`` (the
        predictive as a mixture of identical Gaussians); ``y_mean`` / ``y_variance``: with the observation noise
        ``τ̂² ĝ`` for observed nodes, ``None`` for hidden ones.

        :param dict inputs: ``{root: [n, d_r]}``. :param list nodes: nodes to return (default all non-root nodes).
        :param int num_samples: ``S`` (``0``: no samples, empty ``[0, n, d]`` tensors).
        :param str method: the predictor's method (``"auto"``: exact for ``n_train <= 1000``, else Nyström +
            local GP). :param int seed: seed of the samples.
        :returns: ``{node: NodePrediction}``.
        """
        self._require_fit("predict")
        X, n = self._check_predict_inputs(inputs)
        nodes = list(self.model.topo_nodes) if nodes is None else list(nodes)
        for w in nodes:
            if w not in self.model.gp_nodes:
                raise _input_error(f"cannot predict node {w!r}: it is not a non-root node of the graph "
                                   f"(nodes: {self.model.gp_nodes})")
        predictor = self.predictor(method=method, **predictor_kwargs)
        moments = predictor.moments(X, nodes=nodes)
        S = int(num_samples)
        if S < 0:
            raise ValueError(f"num_samples must be >= 0, got {num_samples!r}")
        generator = None
        if seed is not None:
            generator = torch.Generator(device=self.device).manual_seed(int(seed))
        draws = predictor.sample(X, S, nodes=nodes, generator=generator) if S > 0 else {}
        fitted = self.fitted_nodes()
        out = {}
        for w in nodes:
            mean, var = moments[w]
            samples = draws[w] if S > 0 else mean.new_empty((0,) + tuple(mean.shape))
            loc = mean.unsqueeze(0).expand((S,) + tuple(mean.shape))
            vv = var.unsqueeze(0).expand((S,) + tuple(var.shape))
            node = fitted[w]
            # the observation noise τ̂² ĝ on top of the latent variance (as LinkedGPPredictor's include_noise)
            y_mean, y_var = (mean, var + node.variance * node.nugget) if node.observed else (None, None)
            out[w] = NodePrediction(samples, mean, var, loc, vv, y_mean, y_var)
        return out

def predict_for_model(lamp, model, inputs, data=None, nodes=None, num_samples=200, mask=None):
    """:meth:`pyro_dag.DAGDGP.predict` with a :class:`LatentMAP` as the guide: :meth:`LatentMAP.predict`."""
    if lamp.model is not model:
        raise _input_error("predict: this LatentMAP was built on another DAGDGP; call predict on its own model "
                           "(lamp.model.predict(lamp, ...)) or lamp.predict(...)")
    if data is not None or mask is not None:
        raise _input_error("predict: with a LatentMAP, predictions propagate from the roots; drop data and mask")
    # DAGDGP.predict's contract: at least one sample (LatentMAP.predict itself takes 0 for the moments alone)
    return lamp.predict(inputs, nodes=nodes, num_samples=positive_int(num_samples, "num_samples"))
