"""The model's inputs and their checks: design matrices, data, masks, minibatch arguments.

Every check names the node and the fix (a :class:`DAGInputError`). The checks are a mixin of
:class:`~pyro_dag.dgp.DAGDGP` (Perlino, Hamelijnck, Johansen & Damoulas 2026, "Deep Gaussian Processes on Directed
Acyclic Graphs", arXiv:2607.09645, Sec. 2: roots hold design matrices; any non-root node may carry noisy, partially
observed data).
"""
import math
import operator

import numpy as np
import pyro
import torch
from torch.distributions import constraints

from .. import graph as dag
from ..scaling import float32_overflow
from ..utils import is_tracing

__all__ = ["DAGInputError", "InputChecks", "positive_int", "positive_number"]


class DAGInputError(ValueError):
    """Bad inputs or data for a :class:`DAGDGP`; the message names the node and the fix."""


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



_DOUBLE = "use a float64 model (model.double())"


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
            "divide by the standard deviation)" + (" or use a float64 model (model.double())"
                                                   if t.dtype != torch.float64 else ""))


def positive_int(value, name):
    """``value`` as an ``int`` if it is a positive integer (not a bool); a :class:`DAGInputError` naming ``name``
    otherwise."""
    try:
        v = operator.index(value)
    except TypeError:
        v = None
    if v is None or isinstance(value, bool) or v < 1:
        raise DAGInputError(f"{name} must be a positive integer, got {value!r}")
    return int(v)


def positive_number(value, name, what=""):
    """``value`` as a ``float`` if it is a finite number above 0 (not a bool); a :class:`DAGInputError` naming
    ``name`` (and saying ``what`` it is) otherwise."""
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    if not (ok and math.isfinite(value) and value > 0):
        raise DAGInputError(f"{name} must be a positive finite number{what}, got {value!r}")
    return float(value)


def _is_bool(x):
    dtype = getattr(x, "dtype", None)
    return dtype == torch.bool or (isinstance(dtype, np.dtype) and dtype.kind == "b")


def _is_complex(x):
    if torch.is_tensor(x):
        return x.is_complex()
    dtype = getattr(x, "dtype", None)
    return isinstance(dtype, np.dtype) and dtype.kind == "c"


class InputChecks:
    """Checks and conversions of a :class:`~pyro_dag.dgp.DAGDGP`'s arguments (a mixin: the methods read the
    model's graph, roles and set-up state)."""

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
        if _is_complex(x):  # torch would drop the imaginary part with a warning only
            raise DAGInputError(f"{label} is complex ({x.dtype}); DAGDGP takes real numbers: pass the real part, the "
                                "modulus, or the real and imaginary parts as two columns")
        try:
            return torch.as_tensor(x, dtype=self.dtype, device=self.device)
        except (TypeError, ValueError, RuntimeError) as e:
            raise DAGInputError(f"{label} could not be converted to a {self.dtype} tensor ({e}); pass an [n, d] "
                                "tensor, numpy array or numeric pandas DataFrame") from None

    def _check_inputs(self, inputs, validate=True):
        if self.dtype not in (torch.float32, torch.float64):
            name = str(self.dtype).rsplit(".", 1)[-1]
            raise DAGInputError(f"the model's parameters are {name} (model.half(), .bfloat16() or .to(torch.{name})), "
                                f"but a DAGDGP computes in float32 or float64: its Cholesky factorisations have no "
                                f"{name} kernels, and {name} cannot resolve the jitter of the Gram matrices; call "
                                "model.float() (or model.double()) and pass float32 / float64 data")
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
            bad = None if is_tracing() or not validate else ~torch.isfinite(x).all(-1)
            if bad is not None and bool(bad.any()):
                float32_overflow(inputs[r], x, f"inputs[{r!r}]", error=DAGInputError, fix=_DOUBLE)
                i = int(bad.nonzero()[0])
                raise DAGInputError(f"inputs[{r!r}] contains NaN or inf (first at row {i}); roots are deterministic "
                                    "inputs and must be finite: impute or drop those cases")
            if validate:
                _check_scale(x, f"inputs[{r!r}]")
            X[r] = x
        return X, n

    def _check_data(self, data, mask, n, X=None, validate=True):
        """Returns ``{node: (y_filled [n, d], mask [n, d] bool)}``; ``X`` (the checked inputs) names the root that
        gave ``n`` in the errors; ``validate=False`` skips the checks of the values (already made on these
        tensors)."""
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
        first = next(iter(X or {}), None)
        if n == 0 and any(w in data for w in self.gp_nodes):
            raise DAGInputError((f"inputs[{first!r}] has" if first is not None else "the data have") + " zero rows "
                                "(zero cases), so there is nothing to fit: pass at least one case, one row per case "
                                "in every input and data tensor")
        for w in self.gp_nodes:
            if w not in data:
                continue
            d = self.output_dims[w]
            y = self._as_tensor(data[w], f"data[{w!r}]")
            if y.dim() == 1 and d == 1:
                y = y.unsqueeze(-1)
            if y.dim() != 2 or y.shape[0] != n:
                source = "" if first is None else f" (inputs[{first!r}] has shape {tuple(X[first].shape)})"
                if first is not None and y.dim() == 2 and X[first].shape[1] == y.shape[0] != n:
                    raise DAGInputError(f"inputs[{first!r}] has shape {tuple(X[first].shape)}, which looks "
                                        f"transposed: data[{w!r}] has {y.shape[0]} rows (cases) and inputs "
                                        f"[{first!r}] has {X[first].shape[1]} columns. Pass each input as an [n, d] "
                                        f"matrix, one row per case (e.g. inputs[{first!r}].T)")
                raise DAGInputError(f"data[{w!r}] has shape {tuple(y.shape)} but the inputs have {n} cases{source}; "
                                    "give an [n, d] tensor with one row per case and NaN for missing entries")
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
                if validate and not is_tracing() and bool((m & ~torch.isfinite(y)).any()):
                    float32_overflow(data[w], y, f"data[{w!r}]", error=DAGInputError, fix=_DOUBLE)
                    raise DAGInputError(f"data[{w!r}] has NaN/inf at entries that mask[{w!r}] marks as observed; "
                                        "fix the data or set those mask entries to False")
            else:
                if validate and not is_tracing() and bool(torch.isinf(y).any()):
                    float32_overflow(data[w], y, f"data[{w!r}]", error=DAGInputError, fix=_DOUBLE)
                    raise DAGInputError(f"data[{w!r}] contains inf; mark missing entries with NaN (or pass a mask)")
                m = ~torch.isnan(y)
            if validate and not is_tracing() and not bool(m.any()):
                raise DAGInputError(f"data[{w!r}] has no observed entries; drop it from data (the node is then "
                                    "latent)")
            filled = torch.where(m, y, torch.zeros_like(y))
            if validate:
                _check_scale(filled, f"data[{w!r}]")
            if validate and not is_tracing():
                self._check_support(w, data[w], filled, m)
            out[w] = (filled, m)
        return out

    def _check_support(self, w, raw, y, m):
        """Refuse observations outside the support of node ``w``'s likelihood (its ``support`` constraint: 0/1 for a
        Bernoulli, non-negative integers for a Poisson) and bool data for a likelihood that does not take 0/1, before
        any step (Pyro's distributions would refuse them in the middle of the loss, naming no node)."""
        lik = self.likelihoods[w]
        support = getattr(lik, "support", None)
        name = type(lik).__name__
        if _is_bool(raw) and support is not constraints.boolean:
            raise DAGInputError(f"data[{w!r}] is boolean, but node {w!r} has a {name} likelihood: for 0/1 outcomes "
                                f"give it likelihoods={{{w!r}: 'bernoulli'}}, otherwise pass numbers (e.g. "
                                f"data[{w!r}].double())")
        if support is None:
            return
        bad = m & ~support.check(y)
        if bool(bad.any()):
            i, j = (int(k) for k in bad.nonzero()[0])
            raise DAGInputError(f"data[{w!r}] holds {float(y[i, j]):g} (row {i}), outside the support of the {name} "
                                f"likelihood of node {w!r} ({getattr(lik, 'support_text', '') or support}): "
                                f"{getattr(lik, 'support_fix', 'fix the data')}, or give the node another likelihood "
                                f"(e.g. likelihoods={{{w!r}: 'gaussian'}} for continuous data)")

    def checked_arguments(self, inputs, data=None, mask=None):
        """The model's arguments checked and converted as in :meth:`forward` (same errors).

        :returns: ``(X, n, obs)``: ``X = {root: [n, d_r]}`` tensors (observed roots only; latent inputs have no
            design matrix), ``n`` the number of cases and
            ``obs = {node: (y [n, d_w] with missing entries zeroed, mask [n, d_w] bool)}``.
        """
        key = self._arguments_key(inputs, data, mask)
        memo = self.__dict__.get("_checked_key")
        validate = key is None or memo is None or memo[0] != key
        X, n = self._check_inputs(inputs, validate)
        if n is None:
            n = self._count_cases(data)
        obs = self._check_data(data, mask, n, X, validate)
        if validate and key is not None:
            # the tensors are kept with the key, so that their ids cannot be reused by other tensors
            self.__dict__["_checked_key"] = (key, (inputs, data, mask))
        return X, n, obs

    def _arguments_key(self, inputs, data, mask):
        """What the value checks of :meth:`checked_arguments` (finite, scale, support) depend on, for arguments
        that are dicts of tensors: each tensor's identity and version counter (an in-place change is checked
        again), the model's dtype, device, set-up and likelihoods; ``None`` (check every call) for other arguments
        or under a trace. A training loop passes the same tensors at every step: the values are checked at the
        first and only converted at the others (checking them again cost about a tenth of a collider step). The
        conversions (masks, zero-filled data) are redone every call, so a change that torch does not count (through
        ``.data`` or a numpy view) still reaches the model."""
        if is_tracing():
            return None
        parts = [self.dtype, self.device, None if self.input_dims is None else tuple(self.input_dims.items()),
                 tuple(id(lik) for lik in self.likelihoods.values())]
        for arg in (inputs, data, mask):
            if arg is None:
                parts.append(None)
                continue
            if type(arg) is not dict:
                return None
            items = []
            for name, value in arg.items():
                if not torch.is_tensor(value):
                    return None
                items.append((name, id(value), value._version))
            parts.append(tuple(items))
        return tuple(parts)

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
