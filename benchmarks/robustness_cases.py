"""The cases of the bad-input battery (``benchmarks/robustness.py``, whose docstring has the rules).

Every case is tiny: a handful of rows, a few training steps. Node and column names are chosen so that no message
names them by chance (``root_a -> node_b -> leaf_c``; fidelities ``lofi``, ``hifi``; columns ``col_p``, ``col_q``,
``col_r``). A case's ``run(ctx)`` builds what it needs, calls ``ctx.start()`` just before the call under test (so
set-up work does not count as work done before an error) and returns what the call returned.
"""
import builtins
import contextlib
import errno
import io
import json
import math
import os
import sys

import networkx as nx
import numpy as np
import pandas as pd
import pyro
import torch

from robustness import CLIResult, Case, InjectedInterrupt, broken_files, nonfinite

N = 12
CHAIN = ("root_a", "node_b", "leaf_c")
COLS = ("col_p", "col_q", "col_r")
CASES = []


def case(id, cls, entry, names, **kw):
    """Decorator: register ``run`` as a case."""
    def register(run):
        CASES.append(Case(id=id, cls=cls, entry=entry, run=run, names=names, what=(run.__doc__ or "").strip(), **kw))
        return run
    return register


def all_cases():
    ids = [c.id for c in CASES]
    dup = {i for i in ids if ids.count(i) > 1}
    assert not dup, f"duplicated case ids: {sorted(dup)}"
    return list(CASES)


# ----------------------------------------------------------------------------------------------------------------
# Building blocks
# ----------------------------------------------------------------------------------------------------------------
def chain_graph():
    return nx.DiGraph([("root_a", "node_b"), ("node_b", "leaf_c")])


def chain_data(n=N, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g, dtype=dtype) * 2 - 1
    b = torch.sin(3 * x) + 0.05 * torch.randn(n, 1, generator=g, dtype=dtype)
    c = b ** 2 + 0.05 * torch.randn(n, 1, generator=g, dtype=dtype)
    return {"root_a": x}, {"node_b": b, "leaf_c": c}


def model_and_guide(graph=None, dtype=torch.float64, **kw):
    from pyro_dag import DAGDGP
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    model = DAGDGP(graph if graph is not None else chain_graph(), **kw).to(dtype)
    return model, AutoStructuredGuide(model)


def fit_predict(inputs, data, steps=3, test=None, graph=None, model_kw=None, ctx=None, **train_kw):
    """Build, train ``steps`` steps and predict at ``test`` (default: the training inputs); with ``test`` and
    ``ctx``, the prediction is the call under test (``ctx.start()`` before it)."""
    from pyro_dag.infer import train

    model, guide = model_and_guide(graph, **(model_kw or {}))
    train(model, guide, inputs, data, num_steps=steps, progress=False, **train_kw)
    if test is not None and ctx is not None:
        ctx.start()
    return model.predict(guide, inputs if test is None else test, num_samples=8)


def trained(steps=3, n=N, **model_kw):
    """``(model, guide, inputs, data)`` after ``steps`` steps of the default recipe."""
    from pyro_dag.infer import train

    inputs, data = chain_data(n)
    model, guide = model_and_guide(**model_kw)
    train(model, guide, inputs, data, num_steps=steps, progress=False)
    return model, guide, inputs, data


def with_value(d, node, value, rows=(0,)):
    out = {k: v.clone() for k, v in d.items()}
    for r in rows:
        out[node][r] = value
    return out


def rmse(a, b):
    return float((torch.as_tensor(a, dtype=torch.float64) - torch.as_tensor(b, dtype=torch.float64))
                 .pow(2).mean().sqrt())


def wrong_if(test):
    """``wrong`` from a predicate on the result: ``test(result)`` returns a message or ``None``; non-finite numbers
    are checked first."""
    def wrong(result):
        return nonfinite(result) or test(result)
    return wrong


# ------------------------------------------------------------------------------------- the command line
def cli(ctx, *argv, out=True):
    """``pyro_dag.cli.main(argv)`` in process, ``--out ctx/out`` appended; exit status and output captured."""
    from pyro_dag.cli import main

    argv = [str(a) for a in argv]
    if out and "--out" not in argv:
        argv += ["--out", ctx.path("out")]
    if "--no-progress" not in argv:
        argv.append("--no-progress")
    so, se = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(so), contextlib.redirect_stderr(se):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
            if not isinstance(code, int):
                print(code, file=sys.stderr)
                code = 1 if code is not None else 0
    return CLIResult(code=code or 0, stdout=so.getvalue(), stderr=se.getvalue(), out=ctx.path("out"))


def write_csv(ctx, frame, name="data.csv"):
    path = ctx.path(name)
    if isinstance(frame, str):
        with open(path, "w") as f:
            f.write(frame)
    else:
        frame.to_csv(path, index=False)
    return path


def write_graph(ctx, text="root_a -> node_b -> leaf_c\n", name="graph.txt"):
    path = ctx.path(name)
    with open(path, "w") as f:
        f.write(text)
    return path


def chain_frame(n=20, seed=0):
    r = np.random.default_rng(seed)
    a = r.normal(size=n)
    b = np.sin(a) + 0.1 * r.normal(size=n)
    c = b ** 2 + 0.1 * r.normal(size=n)
    return pd.DataFrame({"root_a": a, "node_b": b, "leaf_c": c})


FIT_CSV = ("--steps", 3, "--pretrain-steps", 1, "--latent-steps", 2, "--num-inducing", 4)


def fit_csv_cli(ctx, frame, *extra, graph="root_a -> node_b -> leaf_c\n"):
    return cli(ctx, "fit", "--csv", write_csv(ctx, frame), "--graph", write_graph(ctx, graph), *FIT_CSV, *extra)


def csv_outputs_wrong(res):
    """A successful ``fit --csv``: every output there and readable, metrics finite and not 0 on held-out rows, no
    empty means or infinite sds in ``predictions.csv``."""
    if not isinstance(res, CLIResult) or res.code != 0:
        return None
    missing = [f for f in ("metrics.json", "predictions.csv", "figure.png") if not os.path.exists(
        os.path.join(res.out, f))]
    if missing:
        return f"exit 0 without {', '.join(missing)}"
    with open(os.path.join(res.out, "metrics.json")) as f:
        m = json.load(f)
    for w, met in m["per_node"].items():
        for k in ("rmse", "crps", "nlpd", "picp"):
            v = met.get(k)
            if v is None or not math.isfinite(v):
                return f"metrics.json: node {w} {k} = {v}"
        if met["rmse"] == 0.0:
            return f"metrics.json: node {w} held-out RMSE 0.0"
    pred = pd.read_csv(os.path.join(res.out, "predictions.csv"))
    for c in pred.columns:
        if c.endswith("_mean") or c.endswith("_sd"):
            v = pred[c].to_numpy(dtype=float)
            if not np.isfinite(v).all():
                return f"predictions.csv: column {c} has empty or non-finite values"
    return None


def discover_wrong(res):
    """A successful ``discover``: discover.json readable, finite edge probabilities, distinct node names."""
    if not isinstance(res, CLIResult) or res.code != 0:
        return None
    path = os.path.join(res.out, "discover.json")
    if not os.path.exists(path):
        return "exit 0 without discover.json"
    with open(path) as f:
        d = json.load(f)
    names = d.get("nodes") or d.get("node_names") or []
    if len(set(names)) != len(names):
        return f"discover.json names the nodes {names} (duplicates: edges like B->B)"
    P = np.asarray(d.get("edge_probs", []), dtype=float)
    if P.size and not np.isfinite(P).all():
        return "discover.json: non-finite edge probabilities"
    return None


def out_broken(ctx):
    return broken_files(ctx.path("out"))


# ------------------------------------------------------------------------------------- faults
class _FullFile:
    """A writable file on a disk that fills up: writes beyond the budget raise ``OSError(ENOSPC)``."""

    def __init__(self, f, state):
        self._f, self._state = f, state

    def write(self, b):
        left = self._state["left"]
        if left is not None and len(b) > left:
            if left > 0:
                self._f.write(b[:left])
            self._state["left"] = 0
            self._f.flush()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if left is not None:
            self._state["left"] = left - len(b)
        return self._f.write(b)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self._f.close()
        return False

    def __iter__(self):
        return iter(self._f)

    def __getattr__(self, name):
        return getattr(self._f, name)


@contextlib.contextmanager
def full_disk(ctx, under, budget=0, match=None):
    """Files opened for writing under ``under`` (whose name has the stem and extension of ``match``, if given, so
    that a writer's temporary ``.{stem}.tmp-*{ext}`` counts too) share a budget of ``budget`` bytes; past it,
    writes raise ``OSError(ENOSPC)``, as on a full disk (after a partial write). Python's ``open`` / ``io.open``
    are patched, and ``torch.save`` to a path (whose C++ writer bypasses them) writes through them instead."""
    ctx.injected_errno = errno.ENOSPC
    real_open, real_io_open, real_save = builtins.open, io.open, torch.save
    state = {"left": budget}
    under = os.path.abspath(under)
    stem, ext = os.path.splitext(match) if match else (None, None)

    def target(file):
        if isinstance(file, int):
            try:
                file = os.readlink(f"/proc/self/fd/{file}")
            except OSError:
                return False
        if not isinstance(file, (str, bytes, os.PathLike)):
            return False
        p = os.path.abspath(os.fsdecode(file))
        name = os.path.basename(p)
        return p.startswith(under + os.sep) and (match is None or (stem in name and name.endswith(ext)))

    def fake_open(file, mode="r", *a, **k):
        f = real_open(file, mode, *a, **k)
        if any(c in mode for c in "wax+") and target(file):
            return _FullFile(f, state)
        return f

    def fake_save(obj, f, *a, **k):
        if isinstance(f, (str, os.PathLike)) and target(f):
            with fake_open(f, "wb") as fh:
                return real_save(obj, fh, *a, **k)
        return real_save(obj, f, *a, **k)

    builtins.open = io.open = fake_open
    torch.save = fake_save
    try:
        yield state
    finally:
        builtins.open, io.open, torch.save = real_open, real_io_open, real_save


def interrupt_at(obj, name, call):
    """Patch ``obj.name`` to raise :class:`InjectedInterrupt` on its ``call``-th call (1-based)."""
    real = getattr(obj, name)
    count = {"n": 0}

    def wrapper(*a, **k):
        count["n"] += 1
        if count["n"] == call:
            raise InjectedInterrupt(f"injected at call {call} of {name}")
        return real(*a, **k)

    return _patched(obj, name, wrapper)


@contextlib.contextmanager
def _patched(obj, name, value):
    real = obj.__dict__[name] if isinstance(obj, type) and name in obj.__dict__ else getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        setattr(obj, name, real)


@contextlib.contextmanager
def interrupt_optimizer_step(call):
    """Raise :class:`InjectedInterrupt` inside the ``call``-th optimiser step (gradients computed, before the
    update)."""
    count = {"n": 0}

    def hook(optimizer, args, kwargs):
        # the training steps' optimisers only: the exact fits and hidden-node starts before them use L-BFGS
        if isinstance(optimizer, torch.optim.LBFGS):
            return
        count["n"] += 1
        if count["n"] == call:
            raise InjectedInterrupt(f"injected in optimiser step {call}")

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    from pyro_dag.infer.training.foreach_adam import ForeachAdam

    # train's Adam steps run ForeachAdam (not a torch.optim.Optimizer, so the global hook misses them)
    real_step = ForeachAdam.step

    def step(self, *a, **k):
        hook(self, a, k)
        return real_step(self, *a, **k)

    handle = register_optimizer_step_pre_hook(hook)
    ForeachAdam.step = step
    try:
        yield count
    finally:
        handle.remove()
        ForeachAdam.step = real_step


def state_problems(params_before=None, threads=None):
    """What an interruption may leave inconsistent: Pyro's handler stack, grad mode, default dtype, thread count,
    non-finite parameters, parameters frozen by the run."""
    from pyro.poutine.runtime import _PYRO_STACK

    out = []
    if _PYRO_STACK:
        out.append(f"{len(_PYRO_STACK)} Pyro handler(s) left on the stack ({type(_PYRO_STACK[-1]).__name__})")
    if not torch.is_grad_enabled():
        out.append("grad mode left disabled")
    if torch.get_default_dtype() != torch.float32:
        out.append(f"default dtype left at {torch.get_default_dtype()}")
    if threads is not None and torch.get_num_threads() != threads:
        out.append(f"torch threads left at {torch.get_num_threads()} (was {threads})")
    store = pyro.get_param_store()
    for name in store.keys():
        v = store.get_param(name)
        if not bool(torch.isfinite(v.detach()).all()):
            out.append(f"parameter {name} not finite")
            break
    if params_before is not None:
        frozen = [n for n, p in params_before if not p.requires_grad]
        if frozen:
            out.append(f"parameters left frozen: {frozen[:2]}")
    return out


def interrupted(facts):
    """``good`` of an interruption case: the interrupt stopped the call (it propagated) and nothing was left
    inconsistent (``wrong`` reports the problems); a raw error from the next call is poor (the reason)."""
    if not facts.get("interrupted", False):
        return "the interrupt did not stop the call"
    if facts.get("poor"):
        return facts["poor"]
    return not facts.get("problems")


def facts_wrong(facts):
    if facts.get("problems"):
        return "; ".join(facts["problems"])
    return None


# ================================================================================================================
# Controls: valid input on every entry point (the harness works; not counted)
# ================================================================================================================
@case("control_dgp", "control", "DAGDGP+train+predict", (), expect="accept", quick=True)
def _(ctx):
    """the chain root_a -> node_b -> leaf_c, 12 rows, 3 steps, predict"""
    inputs, data = chain_data()
    return fit_predict(inputs, data)


@case("control_cli_fit_csv", "control", "pyro-dag fit --csv", (), expect="accept", wrong=csv_outputs_wrong,
      after=out_broken)
def _(ctx):
    """fit --csv on 20 clean rows"""
    return fit_csv_cli(ctx, chain_frame())


# ================================================================================================================
# DAGDGP + train + predict: bad inputs
# ================================================================================================================
def _train_call(inputs, data, steps=3, **kw):
    def run(ctx):
        return fit_predict(inputs, data, steps=steps, **kw)
    return run


def _dgp_bad(id, names, mutate, what, expect="refuse", forbid=(), quick=False, **kw):
    """A case that trains and predicts on the chain with ``mutate(inputs, data)`` applied."""
    def run(ctx):
        inputs, data = chain_data()
        inputs, data = mutate(inputs, data)
        ctx.start()
        return fit_predict(inputs, data, ctx=ctx, **kw)
    run.__doc__ = what
    CASES.append(Case(id=id, cls="bad input", entry="DAGDGP+train", run=run, names=names, expect=expect,
                      forbid=forbid, quick=quick, what=what))


_dgp_bad("dgp_nan_input", ("root_a",), lambda i, d: (with_value(i, "root_a", float("nan")), d),
         "a NaN in the root's inputs", quick=True)
_dgp_bad("dgp_inf_input", ("root_a",), lambda i, d: (with_value(i, "root_a", float("inf")), d),
         "+inf in the root's inputs")
_dgp_bad("dgp_neginf_data", ("leaf_c",), lambda i, d: (i, with_value(d, "leaf_c", -float("inf"))),
         "-inf in an observed node's data")
_dgp_bad("dgp_inf_data", ("leaf_c",), lambda i, d: (i, with_value(d, "leaf_c", float("inf"))),
         "+inf in an observed node's data", quick=True)
_dgp_bad("dgp_overflow_1e200", ("leaf_c",), lambda i, d: (i, with_value(d, "leaf_c", 1e200)),
         "one value at 1e200 in a float64 model's data (its variance overflows)", forbid=("use float64",))
_dgp_bad("dgp_overflow_1e160_column", ("leaf_c",),
         lambda i, d: (i, {**d, "leaf_c": d["leaf_c"] * 1e160}),
         "a whole column at 1e160 (finite, but its standardisation overflows)", forbid=("use float64",))
_dgp_bad("dgp_overflow_input_1e200", ("root_a",), lambda i, d: ({"root_a": i["root_a"] * 1e200}, d),
         "root inputs at 1e200", forbid=("use float64",))
_dgp_bad("dgp_float32_overflow", ("leaf_c",), lambda i, d: (i, with_value(d, "leaf_c", 1e39)),
         "1e39 (finite in float64, beyond float32) given to a float32 model", forbid=("nan or inf", "NaN/inf"),
         model_kw={"dtype": torch.float32})
_dgp_bad("dgp_nan_all_leaf", ("leaf_c",), lambda i, d: (i, {**d, "leaf_c": torch.full_like(d["leaf_c"], float("nan"))}),
         "an observed node whose every value is missing (NaN)", expect="either")
_dgp_bad("dgp_1d_input", ("root_a",), lambda i, d: ({"root_a": i["root_a"][:, 0]}, d),
         "a 1-D [n] input instead of [n, 1]", expect="either")
_dgp_bad("dgp_1d_data", ("leaf_c",), lambda i, d: (i, {**d, "leaf_c": d["leaf_c"][:, 0]}),
         "a 1-D [n] data column instead of [n, 1]", expect="either")
_dgp_bad("dgp_3d_input", ("root_a",), lambda i, d: ({"root_a": i["root_a"][:, :, None]}, d),
         "a 3-D [n, 1, 1] input")
_dgp_bad("dgp_rows_mismatch", ("root_a", "leaf_c", "rows", "cases"), lambda i, d: (i, {**d, "leaf_c": d["leaf_c"][:-2]}),
         "data with 2 rows fewer than the inputs", quick=True)
_dgp_bad("dgp_transposed_input", ("root_a",), lambda i, d: ({"root_a": i["root_a"].T}, d),
         "a transposed [1, n] input")
_dgp_bad("dgp_int_input", ("root_a",), lambda i, d: ({"root_a": (i["root_a"] * 10).long()}, d),
         "int64 inputs", expect="either")
_dgp_bad("dgp_bool_data", ("leaf_c",), lambda i, d: (i, {**d, "leaf_c": d["leaf_c"] > 0}),
         "bool data for a Gaussian node", expect="either")
_dgp_bad("dgp_complex_data", ("leaf_c",), lambda i, d: (i, {**d, "leaf_c": d["leaf_c"].to(torch.complex128)}),
         "complex data")
_dgp_bad("dgp_float16_input", ("root_a",), lambda i, d: ({"root_a": i["root_a"].half()}, d),
         "float16 inputs to a float64 model", expect="either")
_dgp_bad("dgp_numpy_input", ("root_a",), lambda i, d: ({"root_a": i["root_a"].numpy()}, d),
         "numpy arrays instead of tensors", expect="either")
_dgp_bad("dgp_list_input", ("root_a",), lambda i, d: ({"root_a": i["root_a"].tolist()}, d),
         "nested lists instead of tensors", expect="either")
_dgp_bad("dgp_string_input", ("root_a",), lambda i, d: ({"root_a": np.array([["a"]] * N)}, d),
         "a numpy array of strings as an input")
_dgp_bad("dgp_dataframe_data", ("leaf_c",), lambda i, d: (i, {**d, "leaf_c": pd.DataFrame(d["leaf_c"].numpy())}),
         "a pandas DataFrame as a node's data", expect="either")
_dgp_bad("dgp_zero_rows", ("root_a", "rows", "cases", "empty"),
         lambda i, d: ({"root_a": i["root_a"][:0]}, {k: v[:0] for k, v in d.items()}), "zero rows", quick=True)
_dgp_bad("dgp_one_row", ("root_a", "rows", "cases"),
         lambda i, d: ({"root_a": i["root_a"][:1]}, {k: v[:1] for k, v in d.items()}), "one row", expect="either")
_dgp_bad("dgp_constant_data", ("leaf_c",), lambda i, d: (i, {**d, "leaf_c": torch.ones_like(d["leaf_c"])}),
         "a constant observed node", expect="either")
_dgp_bad("dgp_constant_input", ("root_a",), lambda i, d: ({"root_a": torch.zeros_like(i["root_a"])}, d),
         "a constant root input", expect="either")
_dgp_bad("dgp_unknown_data_node", ("nope_z",), lambda i, d: (i, {**d, "nope_z": d["leaf_c"]}),
         "data for a node that is not in the graph", quick=True)
_dgp_bad("dgp_unknown_input_node", ("nope_z",), lambda i, d: ({**i, "nope_z": i["root_a"]}, d),
         "inputs for a node that is not in the graph")
_dgp_bad("dgp_missing_input", ("root_a",), lambda i, d: ({}, d), "no inputs for the root")
_dgp_bad("dgp_root_in_data", ("root_a",), lambda i, d: ({}, {**d, "root_a": i["root_a"]}),
         "the root's values passed in data instead of inputs")
_dgp_bad("dgp_input_for_nonroot", ("node_b",), lambda i, d: ({**i, "node_b": d["node_b"]}, d),
         "inputs for a non-root node")
_dgp_bad("dgp_no_data", ("data",), lambda i, d: (i, {}), "data={} (nothing observed)", expect="either")
_dgp_bad("dgp_width_mismatch_between_calls", ("root_a",),
         lambda i, d: (i, d), "predicting at 2-column inputs after training on 1 column",
         test={"root_a": torch.zeros(4, 2, dtype=torch.float64)})
_dgp_bad("dgp_predict_nan_input", ("root_a",), lambda i, d: (i, d), "predicting at a NaN input",
         test={"root_a": torch.tensor([[float("nan")], [0.1]], dtype=torch.float64)})
_dgp_bad("dgp_predict_missing_root", ("root_a",), lambda i, d: (i, d), "predicting without the root's inputs",
         test={})
_dgp_bad("dgp_predict_far", (), lambda i, d: (i, d), "predicting at 1e6, far outside the data",
         expect="accept", test={"root_a": torch.tensor([[1e6]], dtype=torch.float64)})


# ---------------------------------------------------------------------------------- scale: train to nothing?
def _scale_case(id, where, factor, quick=False):
    """Fit the chain at unit scale and with ``where`` (inputs / outputs) multiplied by ``factor`` (40 steps, the same
    seed): the scaled fit, rescaled, must predict about as well, or warn."""
    def run(ctx):
        inputs, data = chain_data(n=16)
        pyro.set_rng_seed(0)
        ref = fit_predict(inputs, data, steps=40)
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        if where == "inputs":
            si, sd = {"root_a": inputs["root_a"] * factor}, data
        else:
            si, sd = inputs, {k: v * factor for k, v in data.items()}
        ctx.start()
        got = fit_predict(si, sd, steps=40)
        back = 1.0 if where == "inputs" else factor
        return {"errors": {w: (rmse(ref[w].mean, data[w]), rmse(got[w].mean / back, data[w]),
                               float(data[w].std())) for w in data}}

    def test(res):
        for w, (e_ref, e_got, sd) in res["errors"].items():
            if e_got > 1.5 * e_ref + 0.1 * sd:
                return (f"node {w}: RMSE {e_got:.3g} (data units / {factor:g}) against {e_ref:.3g} at unit scale "
                        f"(sd {sd:.3g}): trained to nothing")
        return None

    run.__doc__ = f"the {where} at {factor:g} scale (40 steps, against the same fit at unit scale)"
    names = ("root_a",) if where == "inputs" else ("node_b", "leaf_c")
    CASES.append(Case(id=id, cls="bad input", entry="DAGDGP+train", run=run, names=names, expect="accept",
                      wrong=wrong_if(test), forbid=("learning rate",), quick=quick, what=run.__doc__))


_scale_case("dgp_scale_inputs_1e-8", "inputs", 1e-8)
_scale_case("dgp_scale_inputs_1e8", "inputs", 1e8)
_scale_case("dgp_scale_outputs_1e8", "outputs", 1e8)
_scale_case("dgp_scale_outputs_1e-8", "outputs", 1e-8, quick=True)


# ---------------------------------------------------------------------------------- graphs and constructor
def _dgp_ctor(id, names, make, what, expect="refuse", cls="bad input", quick=False):
    def run(ctx):
        from pyro_dag import DAGDGP

        graph, kw = make()
        ctx.start()
        model = DAGDGP(graph, **kw).double()
        return fit_predict(*chain_data(), graph=graph, model_kw=kw) if expect != "refuse" else model
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="DAGDGP", run=run, names=names, expect=expect, quick=quick, what=what))


_dgp_ctor("graph_cycle", ("node_b", "leaf_c", "cycle"),
          lambda: (nx.DiGraph([("root_a", "node_b"), ("node_b", "leaf_c"), ("leaf_c", "node_b")]), {}),
          "a graph with the cycle node_b -> leaf_c -> node_b", quick=True)
_dgp_ctor("graph_self_loop", ("leaf_c",),
          lambda: (nx.DiGraph([("root_a", "node_b"), ("node_b", "leaf_c"), ("leaf_c", "leaf_c")]), {}),
          "a self-loop leaf_c -> leaf_c")
_dgp_ctor("graph_undirected", ("graph", "directed", "DiGraph"),
          lambda: (nx.Graph([("root_a", "node_b"), ("node_b", "leaf_c")]), {}), "an undirected nx.Graph")
_dgp_ctor("graph_no_edges", ("graph", "edge", "non-root", "no node"),
          lambda: (nx.DiGraph([("root_a", "root_a2")]).subgraph(["root_a"]).copy(), {}), "a graph with one node")
_dgp_ctor("graph_empty", ("graph", "empty", "node"), lambda: (nx.DiGraph(), {}), "an empty graph")
_dgp_ctor("graph_edge_list", ("graph",), lambda: ([("root_a", "node_b"), ("node_b", "leaf_c")], {}),
          "a list of edges instead of a DiGraph", expect="either")
_dgp_ctor("graph_multidigraph", ("graph", "multi", "parallel"),
          lambda: (nx.MultiDiGraph([("root_a", "node_b"), ("root_a", "node_b"), ("node_b", "leaf_c")]), {}),
          "a MultiDiGraph with a duplicated edge root_a -> node_b", expect="either")
_dgp_ctor("graph_dotted_name", ("node.b", "'.'", "dot"),
          lambda: (nx.DiGraph([("root_a", "node.b"), ("node.b", "leaf_c")]), {}),
          "a node named 'node.b' (the sites are named '{node}.u')", expect="either")
_dgp_ctor("graph_int_names", ("node 0", "not a string", "relabel"), lambda: (nx.DiGraph([(0, 1), (1, 2)]), {}),
          "integer node names", expect="either")
_dgp_ctor("kernels_unknown_node", ("nope_z",), lambda: (chain_graph(), {"kernels": {"nope_z": None}}),
          "kernels= for a node not in the graph", cls="misuse")
_dgp_ctor("likelihoods_unknown_node", ("nope_z",), lambda: (chain_graph(), {"likelihoods": {"nope_z": None}}),
          "likelihoods= for a node not in the graph", cls="misuse")
_dgp_ctor("likelihood_for_root", ("root_a",), lambda: (chain_graph(), {"likelihoods": {"root_a": _gaussian()}}),
          "a likelihood for the root", cls="misuse")
_dgp_ctor("num_inducing_zero", ("num_inducing",), lambda: (chain_graph(), {"num_inducing": 0}),
          "num_inducing=0", cls="misuse", quick=True)
_dgp_ctor("num_inducing_negative", ("num_inducing",), lambda: (chain_graph(), {"num_inducing": -4}),
          "num_inducing=-4", cls="misuse")
_dgp_ctor("num_inducing_float", ("num_inducing",), lambda: (chain_graph(), {"num_inducing": 2.5}),
          "num_inducing=2.5", cls="misuse")
_dgp_ctor("num_inducing_unknown_node", ("nope_z",), lambda: (chain_graph(), {"num_inducing": {"nope_z": 4}}),
          "num_inducing={'nope_z': 4}", cls="misuse")
_dgp_ctor("num_inducing_above_n", ("num_inducing",), lambda: (chain_graph(), {"num_inducing": 50}),
          "num_inducing=50 with 12 rows", cls="misuse", expect="either")
_dgp_ctor("noise_bogus", ("noise",), lambda: (chain_graph(), {"noise": "bogus"}), "noise='bogus'", cls="misuse")
_dgp_ctor("collapse_bogus", ("collapse",), lambda: (chain_graph(), {"collapse": "bogus"}), "collapse='bogus'",
          cls="misuse")
_dgp_ctor("jitter_negative", ("jitter",), lambda: (chain_graph(), {"jitter": -1.0}), "jitter=-1", cls="misuse")


def _gaussian():
    from pyro_dag.gp import Gaussian

    return Gaussian()


def _likelihood_case(id, names, lik, values, what):
    def run(ctx):
        from pyro_dag import gp

        inputs, data = chain_data()
        data = {**data, "leaf_c": values(data["leaf_c"])}
        ctx.start()
        return fit_predict(inputs, data, model_kw={"likelihoods": {"leaf_c": getattr(gp, lik)()}})
    run.__doc__ = what
    CASES.append(Case(id=id, cls="bad input", entry="DAGDGP+train", run=run, names=names, what=what))


_likelihood_case("bernoulli_not_binary", ("leaf_c",), "Bernoulli", lambda c: c * 3, "Bernoulli data that are not 0/1")
_likelihood_case("poisson_negative", ("leaf_c",), "Poisson", lambda c: -(c * 10).round() - 1,
                 "negative Poisson counts")
_likelihood_case("poisson_fractional", ("leaf_c",), "Poisson", lambda c: c + 0.5, "fractional Poisson counts")


# ================================================================================================================
# train and predict: misuse
# ================================================================================================================
def _train_misuse(id, names, what, expect="refuse", quick=False, call=None, **train_kw):
    """``train(model, guide, inputs, data, num_steps=3, **train_kw)`` (or ``call(model, guide, inputs, data)``)."""
    def run(ctx):
        from pyro_dag.infer import train

        inputs, data = chain_data()
        model, guide = model_and_guide()
        ctx.start()
        if call is not None:
            return call(model, guide, inputs, data)
        kw = {"num_steps": 3, "progress": False, **train_kw}
        res = train(model, guide, inputs, data, **kw)
        return {"losses": res.losses, "pred": model.predict(guide, inputs, num_samples=4)}
    run.__doc__ = what
    CASES.append(Case(id=id, cls="misuse", entry="train", run=run, names=names, expect=expect, quick=quick,
                      what=what))


def _train(*a, **k):
    from pyro_dag.infer import train

    return train(*a, **k)


_train_misuse("train_num_steps_negative", ("num_steps",), "num_steps=-1", num_steps=-1, quick=True)
_train_misuse("train_num_steps_zero", ("num_steps",), "num_steps=0", expect="either", num_steps=0)
_train_misuse("train_num_steps_float", ("num_steps",), "num_steps=2.5", num_steps=2.5)
_train_misuse("train_num_steps_missing", ("num_steps",), "no num_steps",
              call=lambda m, g, i, d: _train(m, g, i, d, progress=False))
_train_misuse("train_lr_zero", ("lr",), "lr=0", lr=0.0)
_train_misuse("train_lr_negative", ("lr",), "lr=-0.01", lr=-0.01)
_train_misuse("train_lr_nan", ("lr",), "lr=nan", lr=float("nan"))
_train_misuse("train_lr_string", ("lr",), "lr='0.01' (a string)", lr="0.01")
_train_misuse("train_num_particles_zero", ("num_particles",), "num_particles=0", num_particles=0)
_train_misuse("train_odd_particles_antithetic", ("num_particles", "antithetic"),
              "num_particles=3 with antithetic pairs", expect="either", num_particles=3, antithetic=True)
_train_misuse("train_recipe_unknown", ("recipe",), "recipe='fast'", recipe="fast")
_train_misuse("train_typo_option", ("num_step",), "num_step=3 (a typo)",
              call=lambda m, g, i, d: _train(m, g, i, d, num_step=3, progress=False))
_train_misuse("train_args_swapped", ("inputs", "data", "root_a"), "train(model, guide, data, inputs)",
              call=lambda m, g, i, d: _train(m, g, d, i, num_steps=3, progress=False), quick=True)
_train_misuse("train_guide_model_swapped", ("model", "guide"), "train(guide, model, ...)",
              call=lambda m, g, i, d: _train(g, m, i, d, num_steps=3, progress=False))
_train_misuse("train_checkpoint_every_zero", ("checkpoint_every",), "checkpoint_every=0",
              checkpoint_every=0)
_train_misuse("train_resume_without_checkpoint", ("checkpoint", "resume"), "resume=True without checkpoint=",
              resume=True)
_train_misuse("train_freeze_unknown_group", ("freeze",), "freeze=('bogus',)", freeze=("bogus",),
              freeze_fraction=0.5)
_train_misuse("train_freeze_fraction_above_1", ("freeze_fraction",), "freeze_fraction=1.5", freeze_fraction=1.5)
_train_misuse("train_warm_start_above_steps", ("warm_start",), "warm_start=10 with num_steps=3",
              expect="either", warm_start=10)
_train_misuse("train_patience_without_validation", ("patience", "validation"), "patience=5 without validation=",
              expect="either", patience=5)
_train_misuse("train_natural_gradient_above_1", ("natural_gradient",), "natural_gradient=2.0", natural_gradient=2.0)
_train_misuse("train_callbacks_not_callable", ("callbacks", "callable"), "callbacks=[1]", callbacks=[1])


def _other_guide(m, g, i, d):
    """Train with a guide built for another model."""
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    other, _ = model_and_guide(graph=nx.DiGraph([("root_a", "leaf_c")]))
    return _train(m, AutoStructuredGuide(other, name="other_guide"), i, d, num_steps=3, progress=False)


_train_misuse("train_guide_of_other_model", ("guide", "model"), "a guide built for another model",
              call=_other_guide)


def _half(m, g, i, d):
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    m = m.half()
    g = AutoStructuredGuide(m)
    res = _train(m, g, {k: v.half() for k, v in i.items()}, {k: v.half() for k, v in d.items()}, num_steps=3,
                 progress=False)
    return {"losses": res.losses, "pred": m.predict(g, {k: v.half() for k, v in i.items()}, num_samples=4)}


_train_misuse("train_model_half", ("half", "float16", "dtype"), "model.half() with float16 data", expect="either",
              call=_half)


def _dtype_mismatch(m, g, i, d):
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    m = m.float()
    g = AutoStructuredGuide(m)
    res = _train(m, g, i, d, num_steps=3, progress=False)    # float64 data, float32 model
    return {"losses": res.losses, "pred": m.predict(g, i, num_samples=4)}


_train_misuse("train_float32_model_float64_data", ("float", "dtype"), "a float32 model given float64 data",
              expect="either", call=_dtype_mismatch)


def _predict_misuse(id, names, what, expect="refuse", quick=False, call=None, forbid=(), **kw):
    """``model.predict(guide, inputs, **kw)`` after 3 steps (or ``call(model, guide, inputs, data)``)."""
    def run(ctx):
        model, guide, inputs, data = trained()
        ctx.start()
        if call is not None:
            return call(model, guide, inputs, data)
        return model.predict(guide, inputs, **kw)
    run.__doc__ = what
    CASES.append(Case(id=id, cls="misuse", entry="predict", run=run, names=names, expect=expect, quick=quick,
                      forbid=forbid, what=what))


_predict_misuse("predict_num_samples_zero", ("num_samples",), "num_samples=0", num_samples=0, quick=True)
_predict_misuse("predict_num_samples_negative", ("num_samples",), "num_samples=-5", num_samples=-5)
_predict_misuse("predict_num_samples_float", ("num_samples",), "num_samples=2.5", num_samples=2.5)
_predict_misuse("predict_batch_size_zero", ("batch_size",), "batch_size=0", num_samples=4, batch_size=0)
_predict_misuse("predict_unknown_node", ("nope_z",), "nodes=['nope_z']", num_samples=4, nodes=["nope_z"])
_predict_misuse("predict_nodes_string", ("nodes", "leaf_c"), "nodes='leaf_c' (a string, not a list)",
                expect="either", num_samples=4, nodes="leaf_c", forbid=("'l'",))
_predict_misuse("predict_data_without_latents", ("data", "latent"), "data= for a model without latent inputs",
                call=lambda m, g, i, d: m.predict(g, i, data=d, num_samples=4))
_predict_misuse("predict_guide_model_swapped", ("guide",), "predict(inputs, guide): the arguments swapped",
                call=lambda m, g, i, d: m.predict(i, g, num_samples=4))
_predict_misuse("predict_zero_rows", ("root_a", "rows", "cases"), "predict at zero rows", expect="either",
                call=lambda m, g, i, d: m.predict(g, {"root_a": i["root_a"][:0]}, num_samples=4))


def _untrained(m, g, i, d):
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    pyro.clear_param_store()
    m2, g2 = model_and_guide()
    return m2.predict(g2, i, num_samples=4)


_predict_misuse("predict_untrained_guide", ("guide", "train", "set up", "setup"),
                "predict with a guide that was never trained", expect="either", call=_untrained)


def _nan_guide_param(m, g, i, d):
    store = pyro.get_param_store()
    name = next(k for k in store.keys() if "loc" in k or "mean" in k)
    with torch.no_grad():
        store.get_param(name).view(-1)[0] = float("nan")
    return m.predict(g, i, num_samples=4)


_predict_misuse("predict_nan_guide_param", ("nan", "not finite", "non-finite"),
                "a NaN in one guide parameter (e.g. after a diverged run)", call=_nan_guide_param)


def _nan_kernel_param(m, g, i, d):
    with torch.no_grad():
        for name, p in m.named_parameters():
            if "lengthscale" in name:
                p.view(-1)[0] = float("nan")
                break
    return m.predict(g, i, num_samples=4)


_predict_misuse("predict_nan_kernel_param", ("nan", "lengthscale", "not finite", "non-finite"),
                "a NaN kernel length-scale", call=_nan_kernel_param)


# ================================================================================================================
# AutoStructuredGuide
# ================================================================================================================
def _guide_case(id, names, what, make, expect="refuse", cls="misuse", quick=False):
    def run(ctx):
        from pyro_dag.infer import train

        inputs, data = chain_data()
        model, _ = model_and_guide()
        pyro.clear_param_store()
        ctx.start()
        guide = make(model)
        res = train(model, guide, inputs, data, num_steps=3, progress=False)
        return {"losses": res.losses, "pred": model.predict(guide, inputs, num_samples=4)}
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="AutoStructuredGuide", run=run, names=names, expect=expect, quick=quick,
                      what=what))


def _asg(model, **kw):
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    return AutoStructuredGuide(model, **kw)


_guide_case("guide_precision_unknown", ("precision",), "precision='diagonal'",
            lambda m: _asg(m, precision="diagonal"), quick=True)
_guide_case("guide_backend_unknown", ("backend",), "backend='cuda'", lambda m: _asg(m, backend="cuda"))
_guide_case("guide_init_scale_zero", ("init_scale",), "init_scale=0", lambda m: _asg(m, init_scale=0.0))
_guide_case("guide_init_scale_negative", ("init_scale",), "init_scale=-1", lambda m: _asg(m, init_scale=-1.0))
_guide_case("guide_init_scale_nan", ("init_scale",), "init_scale=nan", lambda m: _asg(m, init_scale=float("nan")))
_guide_case("guide_init_scale_unknown_node", ("nope_z",), "init_scale={'nope_z': 0.1}",
            lambda m: _asg(m, init_scale={"nope_z": 0.1}))
_guide_case("guide_of_function", ("model",), "AutoStructuredGuide(a plain function with no sample sites)",
            lambda m: _asg(lambda *a, **k: None), expect="refuse")
_guide_case("guide_name_empty", ("name",), "name=''", lambda m: _asg(m, name=""), expect="either")
_guide_case("guide_conditioning_unknown", ("conditioning",), "conditioning='bogus'",
            lambda m: _asg(m, conditioning="bogus"))


def _guide_before_double(model):
    """The guide built on a float32 model that is then made float64."""
    from pyro_dag import DAGDGP

    m32 = DAGDGP(chain_graph())
    g = _asg(m32)
    m32.double()
    return g


_guide_case("guide_model_dtype_changed", ("dtype", "float", "double"),
            "a guide built before model.double() (trained on the float64 model)", _guide_before_double,
            expect="either")


# ================================================================================================================
# to_inference_data
# ================================================================================================================
def _idata_case(id, names, what, call, expect="refuse", cls="misuse", quick=False):
    def run(ctx):
        from pyro_dag import to_inference_data

        model, guide, inputs, data = trained()
        ctx.start()
        idata = call(to_inference_data, model, guide, inputs, data)
        return {g: {k: v.values for k, v in idata[g].data_vars.items()} for g in idata.groups()}
    run.__doc__ = what

    def good(res):
        return expect != "refuse"

    def wrong(res):
        if isinstance(res, dict) and expect != "refuse" and "posterior" not in res:
            return f"no posterior group (groups {sorted(res)})"
        return nonfinite(res)
    CASES.append(Case(id=id, cls=cls, entry="to_inference_data", run=run, names=names, expect=expect, quick=quick,
                      wrong=wrong, what=what))


_idata_case("idata_data_as_fourth_positional", ("nodes", "data"),
            "to_inference_data(model, guide, inputs, data): the order of train(model, guide, inputs, data), so the "
            "fourth argument is the data (it once landed in nodes=): a complete InferenceData is the good answer",
            lambda f, m, g, i, d: f(m, g, i, d), expect="accept", quick=True)
_idata_case("idata_num_samples_zero", ("num_samples",), "num_samples=0",
            lambda f, m, g, i, d: f(m, g, i, data=d, num_samples=0))
_idata_case("idata_num_samples_negative", ("num_samples",), "num_samples=-1",
            lambda f, m, g, i, d: f(m, g, i, data=d, num_samples=-1))
_idata_case("idata_unknown_node", ("nope_z",), "nodes=['nope_z']",
            lambda f, m, g, i, d: f(m, g, i, nodes=["nope_z"], data=d, num_samples=5))
_idata_case("idata_no_source", ("model", "mcmc"), "to_inference_data() with no model and no mcmc",
            lambda f, m, g, i, d: f())
_idata_case("idata_missing_inputs", ("inputs", "root_a"), "model and guide without inputs",
            lambda f, m, g, i, d: f(m, g, data=d, num_samples=5))
_idata_case("idata_unknown_data_node", ("nope_z",), "data with a node not in the graph",
            lambda f, m, g, i, d: f(m, g, i, data={**d, "nope_z": d["leaf_c"]}, num_samples=5))
_idata_case("idata_nan_inputs", ("root_a",), "NaN in the inputs",
            lambda f, m, g, i, d: f(m, g, with_value(i, "root_a", float("nan")), data=d, num_samples=5))
_idata_case("idata_no_data", ("data",), "a guide without data (no log_likelihood possible)",
            lambda f, m, g, i, d: f(m, g, i, num_samples=5), expect="either")
_idata_case("idata_mcmc_not_run", ("mcmc", "run"), "an MCMC object that was never run",
            lambda f, m, g, i, d: f(mcmc=_unrun_mcmc(m)))


def _unrun_mcmc(model):
    from pyro.infer import MCMC, NUTS

    return MCMC(NUTS(model), num_samples=2, warmup_steps=2)


# ================================================================================================================
# LatentSEM
# ================================================================================================================
def sem_parts(n=20):
    """The quadratic SEM of Silva & Gramacy (2010), renamed: latents lat_u -> lat_v, indicators ind_u1..3,
    ind_v1..3 (``(graph, indicators, anchors, frame)``)."""
    from pyro_dag.datasets.latent_sem import quadratic_sem

    d = quadratic_sem(n=n, seed=0)
    lat = {"X1": "lat_u", "X2": "lat_v"}
    col = {f"Y{k}": (f"ind_u{k}" if k <= 3 else f"ind_v{k - 3}") for k in range(1, 7)}
    graph = nx.relabel_nodes(d.graph, lat)
    indicators = {lat[x]: [col[c] for c in cs] for x, cs in d.indicators.items()}
    anchors = {lat[x]: col[a] for x, a in d.anchors.items()}
    return graph, indicators, anchors, d.data.rename(columns=col)


def sem_fit(frame, graph=None, indicators=None, anchors=None, steps=3, subsample_size=None, ctx=None, **kw):
    """Build, fit ``steps`` SVI steps and draw 5 posterior samples; returns the draws, the latent means and the
    standardised indicators."""
    from pyro_dag.sem import LatentSEM, guide_samples, latent_means, sem_guide

    g0, i0, a0, _ = sem_parts()
    sem = LatentSEM(graph or g0, indicators=indicators or i0, anchors=anchors or a0, num_inducing=5, **kw)
    guide = sem_guide(sem)
    svi = pyro.infer.SVI(sem, guide, pyro.optim.Adam({"lr": 0.02}), pyro.infer.Trace_ELBO())
    for _ in range(steps):
        svi.step(frame, subsample_size=subsample_size)
    draws = guide_samples(sem, guide, frame, num_samples=5)
    y, mask = sem.prepare(frame)
    return {"draws": draws, "means": latent_means(sem, draws).to_numpy(), "prepared": y, "mask": mask}


def prepared_wrong(res):
    """Standardised indicators all zero where the raw column varies: the standardisation collapsed."""
    y, mask = res["prepared"], res["mask"]
    for j in range(y.shape[1]):
        col = y[:, j][mask[:, j].bool()] if torch.is_tensor(mask) else y[:, j]
        if col.numel() > 1 and float(col.abs().max()) == 0.0:
            return f"indicator column {j} standardised to all zeros"
    return None


def _sem_case(id, names, what, mutate=None, expect="refuse", quick=False, cls="bad input", forbid=(), call=None,
              **fit_kw):
    def run(ctx):
        graph, ind, anc, frame = sem_parts()
        if mutate is not None:
            frame = mutate(frame)
        ctx.start()
        if call is not None:
            return call(ctx, graph, ind, anc, frame)
        return sem_fit(frame, **fit_kw)
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="LatentSEM", run=run, names=names, expect=expect, quick=quick,
                      forbid=forbid, wrong=wrong_if(lambda r: prepared_wrong(r) if isinstance(r, dict) and
                                                     "prepared" in r else None), what=what))


def _set(frame, col, value, rows=(0,)):
    f = frame.copy()
    for r in rows:
        f.loc[f.index[r], col] = value
    return f


_sem_case("sem_inf_value", ("ind_u2",), "+inf in an indicator", lambda f: _set(f, "ind_u2", float("inf")), quick=True)
_sem_case("sem_all_nan_column", ("ind_u2",), "an indicator column with every value missing",
          lambda f: f.assign(ind_u2=float("nan")))
_sem_case("sem_string_column", ("ind_u2",), "a string in an indicator column",
          lambda f: _set(f.astype({"ind_u2": object}), "ind_u2", "n/a"))
_sem_case("sem_overflow_1e200", ("ind_v2",), "an indicator column at 1e200 (its sd overflows)",
          lambda f: f.assign(ind_v2=f["ind_v2"] * 1e200), quick=True)
_sem_case("sem_overflow_1e300_value", ("ind_v2",), "one indicator value at 1e300",
          lambda f: _set(f, "ind_v2", 1e300))
_sem_case("sem_scale_1e-8", ("ind_v2",), "an indicator column at 1e-8 scale", lambda f: f.assign(
    ind_v2=f["ind_v2"] * 1e-8), expect="accept")
_sem_case("sem_scale_1e8", ("ind_v2",), "an indicator column at 1e8 scale", lambda f: f.assign(
    ind_v2=f["ind_v2"] * 1e8), expect="accept")
_sem_case("sem_missing_column", ("ind_v3",), "the DataFrame lacks an indicator column",
          lambda f: f.drop(columns=["ind_v3"]))
_sem_case("sem_extra_column", ("extra_col",), "an extra column not declared as an indicator",
          lambda f: f.assign(extra_col=1.0), expect="either")
_sem_case("sem_duplicated_column", ("ind_u2",), "a second column named ind_u2 (other values)",
          lambda f: pd.concat([f, f[["ind_u1"]].set_axis(["ind_u2"], axis=1)], axis=1))
_sem_case("sem_constant_indicator", ("ind_v2",), "a constant indicator column", lambda f: f.assign(ind_v2=3.0),
          expect="either")
_sem_case("sem_one_row", ("row", "case", "n = 1", "n=1"), "one row", lambda f: f.iloc[:1], forbid=("constant",))
_sem_case("sem_zero_rows", ("row", "case", "empty"), "zero rows", lambda f: f.iloc[:0])
_sem_case("sem_numpy_data", ("DataFrame", "data"), "a numpy array instead of a DataFrame", lambda f: f.to_numpy(),
          expect="either")
_sem_case("sem_columns_reordered", (), "the same DataFrame with its columns in another order",
          lambda f: f[list(f.columns)[::-1]], expect="accept")
_sem_case("sem_subsample_above_n", ("subsample_size",), "subsample_size=50 with 20 rows", cls="misuse",
          subsample_size=50, quick=True)
_sem_case("sem_subsample_zero", ("subsample_size",), "subsample_size=0", cls="misuse", subsample_size=0)
_sem_case("sem_subsample_negative", ("subsample_size",), "subsample_size=-3", cls="misuse", subsample_size=-3)


def _sem_decl(id, names, what, change, expect="refuse", quick=False, cls="bad input"):
    """``LatentSEM`` built from a changed declaration ``change(graph, indicators, anchors) -> (g, i, a, kw)``."""
    def run(ctx):
        from pyro_dag.sem import LatentSEM

        graph, ind, anc, frame = sem_parts()
        g, i, a, kw = change(graph, {k: list(v) for k, v in ind.items()}, dict(anc))
        ctx.start()
        sem = LatentSEM(g, indicators=i, anchors=a, **kw)
        if expect == "refuse":
            return sem
        return sem_fit(frame, graph=g, indicators=i, anchors=a, **kw)
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="LatentSEM", run=run, names=names, expect=expect, quick=quick, what=what))


_sem_decl("sem_anchor_not_indicator", ("ind_v1", "anchor"), "an anchor that is not one of its latent's indicators",
          lambda g, i, a: (g, i, {**a, "lat_u": "ind_v1"}, {}))
_sem_decl("sem_indicator_twice", ("ind_u3",), "one indicator listed under both latents",
          lambda g, i, a: (g, {**i, "lat_v": i["lat_v"] + ["ind_u3"]}, a, {}))
_sem_decl("sem_latent_cycle", ("lat_u", "lat_v", "cycle"), "a cycle lat_u -> lat_v -> lat_u",
          lambda g, i, a: (nx.DiGraph([("lat_u", "lat_v"), ("lat_v", "lat_u")]), i, a, {}))
_sem_decl("sem_one_indicator", ("lat_u",), "a latent with one indicator",
          lambda g, i, a: (g, {**i, "lat_u": ["ind_u1"]}, a, {}))
_sem_decl("sem_unknown_latent", ("lat_w",), "indicators for a latent not in the graph",
          lambda g, i, a: (g, {**i, "lat_w": ["ind_w1", "ind_w2", "ind_w3"]}, a, {}))
_sem_decl("sem_equations_bogus", ("equations",), "equations='cubic'", lambda g, i, a: (g, i, a, {"equations": "cubic"}),
          cls="misuse")
_sem_decl("sem_num_inducing_zero", ("num_inducing",), "num_inducing=0",
          lambda g, i, a: (g, i, a, {"num_inducing": 0}), cls="misuse")
_sem_decl("sem_exogenous_bogus", ("exogenous",), "exogenous='uniform'",
          lambda g, i, a: (g, i, a, {"exogenous": "uniform"}), cls="misuse")


def _sem_after_fit(call):
    """Fit 3 steps, then ``call(sem, guide, frame)`` is the call under test."""
    def run(ctx, graph, ind, anc, frame):
        from pyro_dag.sem import LatentSEM, sem_guide

        sem = LatentSEM(graph, indicators=ind, anchors=anc, num_inducing=5)
        guide = sem_guide(sem)
        svi = pyro.infer.SVI(sem, guide, pyro.optim.Adam({"lr": 0.02}), pyro.infer.Trace_ELBO())
        for _ in range(3):
            svi.step(frame)
        ctx.start()
        return call(sem, guide, frame)
    return run


def _gs(sem, guide, frame, **kw):
    from pyro_dag.sem import guide_samples

    return guide_samples(sem, guide, frame, **kw)


def _pll(sem, guide, frame, test):
    from pyro_dag.sem import predictive_log_likelihood

    return predictive_log_likelihood(sem, _gs(sem, guide, frame, num_samples=5), test, num_latent_samples=20)


_sem_case("sem_guide_samples_zero", ("num_samples",), "guide_samples(num_samples=0)", cls="misuse",
          call=_sem_after_fit(lambda s, g, f: _gs(s, g, f, num_samples=0)))
_sem_case("sem_guide_samples_subset", ("rows", "cases", "data"), "guide_samples on 5 of the 20 training rows",
          cls="misuse", expect="either", call=_sem_after_fit(lambda s, g, f: _gs(s, g, f.iloc[:5], num_samples=5)))
_sem_case("sem_guide_samples_other_rows", ("rows", "cases", "data"),
          "guide_samples on 30 rows after training on 20", cls="misuse", expect="either",
          call=_sem_after_fit(lambda s, g, f: _gs(s, g, pd.concat([f, f.iloc[:10]]), num_samples=5)))
_sem_case("sem_pll_nan_row", ("row", "missing", "nan"), "predictive_log_likelihood of a test row that is all NaN",
          cls="misuse", expect="either",
          call=_sem_after_fit(lambda s, g, f: _pll(s, g, f, f.iloc[:3].assign(**{c: float("nan") for c in f.columns}))))
_sem_case("sem_pll_missing_column", ("ind_v3",), "predictive_log_likelihood of test rows lacking a column",
          cls="misuse", call=_sem_after_fit(lambda s, g, f: _pll(s, g, f, f.iloc[:3].drop(columns=["ind_v3"]))))


# ================================================================================================================
# MultiFidelityEmulator
# ================================================================================================================
def mf_arrays(n_low=10, n_high=5, seed=0):
    r = np.random.default_rng(seed)
    Xl = r.random((n_low, 1))
    Xh = Xl[:n_high]
    return Xl, np.sin(8 * Xl[:, 0]), Xh, 2 * np.sin(8 * Xh[:, 0]) + Xh[:, 0]


def emulator(Xl, yl, Xh, yh, **kw):
    from pyro_dag.emulation import MultiFidelityEmulator

    return MultiFidelityEmulator({"lofi": (Xl, yl), "hifi": (Xh, yh)}, parents={"hifi": ["lofi"]}, **kw)


def _em_case(id, names, what, mutate=None, expect="refuse", quick=False, cls="bad input", fit=None, predict=None,
             forbid=(), wrong=None, max_work=0, good=None, **kw):
    """Build the two-fidelity emulator on ``mutate(Xl, yl, Xh, yh)``, fit 3 + 3 steps (``fit`` overrides), predict
    at 4 points (``predict(em)`` overrides)."""
    def run(ctx):
        arrays = mf_arrays()
        if mutate is not None:
            arrays = mutate(*arrays)
        setup_only = fit is not None or predict is not None
        if predict is not None:
            em = emulator(*arrays, **kw)
            em.fit(num_steps=3, pretrain_steps=3)
            ctx.start()
            return predict(em)
        ctx.start()
        em = emulator(*arrays, **kw)
        fit_kw = {"num_steps": 3, "pretrain_steps": 3, **(fit or {})}
        em.fit(**fit_kw)
        X_test = np.asarray(arrays[0], dtype=float).reshape(len(arrays[0]), -1)[:4]   # inside the designs' box
        return {"pred": em.predict(X_test, num_samples=8),
                "scale": {f: em.y_scale[f] for f in em.y_scale}, "work": ctx.work}
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="MultiFidelityEmulator", run=run, names=names, expect=expect,
                      quick=quick, forbid=forbid, wrong=wrong, max_work=max_work, what=what, good=good))


_em_case("em_string_y", ("lofi",), "a string among the low fidelity's outputs",
         lambda Xl, yl, Xh, yh: (Xl, np.array(list(yl[:-1]) + ["n/a"], dtype=object), Xh, yh), quick=True)
_em_case("em_nan_x", ("lofi",), "NaN in the low fidelity's design",
         lambda Xl, yl, Xh, yh: (np.where(np.arange(len(Xl))[:, None] == 0, np.nan, Xl), yl, Xh, yh))
_em_case("em_inf_y", ("hifi",), "+inf among the high fidelity's outputs",
         lambda Xl, yl, Xh, yh: (Xl, yl, Xh, np.where(np.arange(len(yh)) == 0, np.inf, yh)), quick=True)
_em_case("em_nan_y", ("hifi",), "a NaN among the high fidelity's outputs (missing run)",
         lambda Xl, yl, Xh, yh: (Xl, yl, Xh, np.where(np.arange(len(yh)) == 0, np.nan, yh)), expect="either")
_em_case("em_overflow_y", ("hifi",), "the high fidelity's outputs at 1e300",
         lambda Xl, yl, Xh, yh: (Xl, yl, Xh, yh * 1e300))
_em_case("em_overflow_x", ("lofi", "hifi"), "designs at 1e300",
         lambda Xl, yl, Xh, yh: (Xl * 1e300, yl, Xh * 1e300, yh))
_em_case("em_scale_y_1e8", ("hifi",), "outputs at 1e8", lambda Xl, yl, Xh, yh: (Xl, yl * 1e8, Xh, yh * 1e8),
         expect="accept")
_em_case("em_scale_y_1e-8", ("hifi",), "outputs at 1e-8", lambda Xl, yl, Xh, yh: (Xl, yl * 1e-8, Xh, yh * 1e-8),
         expect="accept")
_em_case("em_scale_x_1e-8", ("lofi",), "designs at 1e-8", lambda Xl, yl, Xh, yh: (Xl * 1e-8, yl, Xh * 1e-8, yh),
         expect="accept")
_em_case("em_dim_mismatch", ("hifi", "lofi"), "designs of 1 and 2 columns",
         lambda Xl, yl, Xh, yh: (Xl, yl, np.hstack([Xh, Xh]), yh))
_em_case("em_length_mismatch", ("hifi",), "5 designs and 4 outputs", lambda Xl, yl, Xh, yh: (Xl, yl, Xh, yh[:-1]))
_em_case("em_y_2d", ("hifi",), "outputs as [n, 1]", lambda Xl, yl, Xh, yh: (Xl, yl[:, None], Xh, yh[:, None]),
         expect="either")
_em_case("em_y_two_columns", ("hifi",), "outputs as [n, 2]",
         lambda Xl, yl, Xh, yh: (Xl, yl, Xh, np.stack([yh, yh], 1)))
_em_case("em_empty_fidelity", ("hifi",), "a fidelity with zero runs",
         lambda Xl, yl, Xh, yh: (Xl, yl, Xh[:0], yh[:0]))
_em_case("em_one_run", ("hifi",), "a fidelity with one run", lambda Xl, yl, Xh, yh: (Xl, yl, Xh[:1], yh[:1]),
         expect="either")
_em_case("em_constant_y", ("hifi",), "a constant high fidelity", lambda Xl, yl, Xh, yh: (Xl, yl, Xh, yh * 0 + 2.0),
         expect="either")
_em_case("em_x_1d", ("lofi",), "1-D designs [n]", lambda Xl, yl, Xh, yh: (Xl[:, 0], yl, Xh[:, 0], yh),
         expect="either")
_em_case("em_bounds_exclude_designs", ("bounds",), "bounds that exclude every design", bounds=[[5.0, 6.0]])
_em_case("em_bounds_wrong_shape", ("bounds",), "bounds of the wrong shape", bounds=[0.0, 1.0, 2.0])
_em_case("em_bounds_reversed", ("bounds",), "bounds with lower > upper", bounds=[[1.0, 0.0]])
_em_case("em_kernel_bogus", ("kernel",), "kernel='rbf'", cls="misuse", kernel="rbf")
_em_case("em_noise_zero", ("noise",), "noise=0", cls="misuse", noise=0.0)
_em_case("em_num_inducing_zero", ("num_inducing",), "num_inducing=0", cls="misuse", num_inducing=0)
def _no_steps(res):
    """``fit(num_steps=0, pretrain_steps=0)`` handled: no optimisation step taken."""
    return res["work"] == 0


_em_case("em_fit_num_steps_zero", ("num_steps",), "fit(num_steps=0, pretrain_steps=0): no step should be taken",
         cls="misuse", fit={"num_steps": 0, "pretrain_steps": 0}, expect="either", good=_no_steps)
_em_case("em_fit_num_steps_negative", ("num_steps",), "fit(num_steps=-5)", cls="misuse", fit={"num_steps": -5},
         quick=True)
_em_case("em_fit_lr_zero", ("lr",), "fit(lr=0)", cls="misuse", fit={"lr": 0.0})
_em_case("em_fit_pretrain_negative", ("pretrain_steps",), "fit(pretrain_steps=-1)", cls="misuse",
         fit={"pretrain_steps": -1})
_em_case("em_fit_mean_field_num_steps_zero", ("num_steps",), "fit(num_steps=0, pretrain_steps=0), mean-field guide",
         cls="misuse", fit={"num_steps": 0, "pretrain_steps": 0}, precision="mean_field", expect="either",
         good=_no_steps)


def _em_predict(**kw):
    return lambda em: em.predict(**kw)


_em_case("em_predict_num_samples_zero", ("num_samples",), "predict(num_samples=0)", cls="misuse",
         predict=_em_predict(X=np.zeros((2, 1)), num_samples=0))
_em_case("em_predict_wrong_dim", ("X must", "input dimension", "[n, 1]"), "predict at [n, 2] inputs", cls="misuse",
         predict=_em_predict(X=np.zeros((2, 2))))
_em_case("em_predict_nan_x", ("nan", "inputs['x']", "X has", "X contains"), "predict at a NaN input", cls="misuse",
         predict=_em_predict(X=np.array([[np.nan], [0.5]])))
_em_case("em_predict_unknown_fidelity", ("nope_z",), "predict(fidelities=['nope_z'])", cls="misuse",
         predict=_em_predict(X=np.zeros((2, 1)), fidelities=["nope_z"]))
_em_case("em_predict_outside_box", ("box", "outside", "bounds"), "predict far outside the designs' box",
         cls="misuse", predict=_em_predict(X=np.array([[50.0]]), num_samples=8))


def _em_parents(id, names, what, parents, quick=False, forbid=(), expect="refuse", good=None):
    def run(ctx):
        from pyro_dag.emulation import MultiFidelityEmulator

        Xl, yl, Xh, yh = mf_arrays()
        ctx.start()
        return MultiFidelityEmulator({"lofi": (Xl, yl), "hifi": (Xh, yh)}, parents=parents)
    run.__doc__ = what
    CASES.append(Case(id=id, cls="bad input", entry="MultiFidelityEmulator", run=run, names=names, quick=quick,
                      forbid=forbid, what=what, expect=expect, good=good))


_em_parents("em_parents_unknown", ("nope_z",), "parents naming an unknown fidelity", {"hifi": ["nope_z"]})
_em_parents("em_parents_cycle", ("lofi", "hifi", "cycle"), "parents forming a cycle",
            {"hifi": ["lofi"], "lofi": ["hifi"]})
_em_parents("em_parents_self", ("hifi",), "a fidelity refining itself", {"hifi": ["hifi"]})
_em_parents("em_parents_string", ("parents", "lofi"), "parents={'hifi': 'lofi'} (a string, not a list): one name "
            "is one parent (either answer is good: that, or a clear refusal)", {"hifi": "lofi"}, forbid=("'l'",),
            expect="either", good=lambda em: em.mf.parents["hifi"] == ["lofi"] or
            f"hifi refines {em.mf.parents['hifi']}, not ['lofi']")


# ================================================================================================================
# LaMP (pyro_dag.infer.lamp)
# ================================================================================================================
def lamp_parts(n=12):
    from pyro_dag import DAGDGP
    from pyro_dag.infer import LatentMAP

    g = torch.Generator().manual_seed(0)
    s = torch.rand(n, 1, generator=g, dtype=torch.float64)
    model = DAGDGP(nx.DiGraph([("root_a", "node_b"), ("node_b", "leaf_c")])).double()
    return model, LatentMAP, {"root_a": s}, {"leaf_c": torch.tanh(5 * (s - 0.5))}


def _lamp_case(id, names, what, mutate=None, expect="refuse", cls="bad input", quick=False, lamp_kw=None,
               call=None, **train_kw):
    """``train(model, LatentMAP(model), inputs, data, num_steps=3, recipe="lamp")`` on ``mutate(inputs, data)``,
    then predict (``call(model, lamp, inputs, data)`` replaces the prediction, after the fit)."""
    def run(ctx):
        from pyro_dag.infer import train

        model, LatentMAP, inputs, data = lamp_parts()
        if mutate is not None:
            inputs, data = mutate(inputs, data)
        if call is None:
            ctx.start()
        lamp = LatentMAP(model, **(lamp_kw or {}))
        res = train(model, lamp, inputs, data, **{"num_steps": 3, "recipe": "lamp", **train_kw})
        if call is not None:
            ctx.start()
            return call(ctx, model, lamp, inputs, data)
        return {"losses": res.losses, "pred": model.predict(lamp, inputs, num_samples=4)}
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="LaMP", run=run, names=names, expect=expect, quick=quick, what=what))


_lamp_case("lamp_nan_input", ("root_a",), "a NaN in the root's inputs",
           lambda i, d: (with_value(i, "root_a", float("nan")), d), quick=True)
_lamp_case("lamp_inf_data", ("leaf_c",), "+inf in the data", lambda i, d: (i, with_value(d, "leaf_c", float("inf"))))
_lamp_case("lamp_nan_data", ("leaf_c",), "a NaN (missing value) in the data",
           lambda i, d: (i, with_value(d, "leaf_c", float("nan"))), expect="either")
_lamp_case("lamp_overflow_data", ("leaf_c",), "data at 1e200", lambda i, d: (i, {"leaf_c": d["leaf_c"] * 1e200}))
_lamp_case("lamp_scale_1e8", ("leaf_c",), "data at 1e8", lambda i, d: (i, {"leaf_c": d["leaf_c"] * 1e8}),
           expect="accept")
_lamp_case("lamp_zero_rows", ("root_a", "rows", "cases", "empty"), "zero rows",
           lambda i, d: ({"root_a": i["root_a"][:0]}, {"leaf_c": d["leaf_c"][:0]}))
_lamp_case("lamp_two_rows", ("root_a", "rows", "cases"), "two rows",
           lambda i, d: ({"root_a": i["root_a"][:2]}, {"leaf_c": d["leaf_c"][:2]}), expect="either")
_lamp_case("lamp_constant_data", ("leaf_c",), "constant data", lambda i, d: (i, {"leaf_c": d["leaf_c"] * 0 + 1}),
           expect="either")
_lamp_case("lamp_kernel_bogus", ("kernel",), "kernel='periodic'", cls="misuse", lamp_kw={"kernel": "periodic"})
_lamp_case("lamp_nugget_negative", ("nugget",), "nugget=-1", cls="misuse", lamp_kw={"nugget": -1.0})
_lamp_case("lamp_num_steps_zero", ("num_steps", "num_epochs", "epochs"), "num_steps=0", cls="misuse",
           num_steps=0, expect="either")
_lamp_case("lamp_optim_args_unknown", ("bogus_field",), "optim_args={'bogus_field': 1}", cls="misuse",
           optim_args={"bogus_field": 1})
_lamp_case("lamp_checkpoint", ("checkpoint",), "train(recipe='lamp', checkpoint=...)", cls="misuse",
           checkpoint="lamp_checkpoint.pt", quick=True)
_lamp_case("lamp_predict_num_samples_zero", ("num_samples",), "predict(num_samples=0)", cls="misuse",
           call=lambda ctx, m, l, i, d: m.predict(l, i, num_samples=0))
_lamp_case("lamp_predict_nan_input", ("root_a",), "predict at a NaN input", cls="misuse",
           call=lambda ctx, m, l, i, d: m.predict(l, with_value(i, "root_a", float("nan")), num_samples=4))
_lamp_case("lamp_predict_unknown_node", ("nope_z",), "predict(nodes=['nope_z'])", cls="misuse",
           call=lambda ctx, m, l, i, d: m.predict(l, i, nodes=["nope_z"], num_samples=4))


def _lamp_wrong_guide(ctx):
    """train(recipe='lamp') with an AutoStructuredGuide"""
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    model, _, inputs, data = lamp_parts()
    ctx.start()
    return train(model, AutoStructuredGuide(model), inputs, data, num_steps=3, recipe="lamp")


CASES.append(Case(id="lamp_wrong_guide", cls="misuse", entry="LaMP", run=_lamp_wrong_guide,
                  names=("LatentMAP", "guide"), what="train(recipe='lamp') with an AutoStructuredGuide"))


def _lamp_save_before_fit(ctx):
    """lamp.save(path) before any fit"""
    model, LatentMAP, inputs, data = lamp_parts()
    ctx.start()
    return LatentMAP(model).save(ctx.path("lamp.pt"))


CASES.append(Case(id="lamp_save_before_fit", cls="misuse", entry="LaMP", run=_lamp_save_before_fit,
                  names=("fit", "save"), what="lamp.save(path) before any fit"))


# ================================================================================================================
# pyro_dag.structure: fit, exact_posterior, queries
# ================================================================================================================
def structure_frame(n=30, seed=0):
    r = np.random.default_rng(seed)
    p = r.normal(size=n)
    q = p + 0.3 * r.normal(size=n)
    return pd.DataFrame({"col_p": p, "col_q": q, "col_r": r.normal(size=n)})


def _edge_probs(post):
    return post.edge_probs()


def _structure_case(id, names, what, mutate=None, exact=False, expect="refuse", cls="bad input", quick=False,
                    forbid=(), wrong=None, **kw):
    """``structure.fit`` (5 steps) or ``exact_posterior`` on ``mutate(frame)``; returns the edge probabilities."""
    def run(ctx):
        import pyro_dag.structure as S

        X = structure_frame()
        if mutate is not None:
            X = mutate(X)
        ctx.start()
        if exact:
            post = S.exact_posterior(X, **kw)
        else:
            post = S.fit(X, **{"num_steps": 5, "progress": False, **kw})
        return {"edge_probs": post.edge_probs(), "names": list(post.node_names or [])}
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="structure.exact_posterior" if exact else "structure.fit", run=run,
                      names=names, expect=expect, quick=quick, forbid=forbid, wrong=wrong, what=what))


for _exact in (False, True):
    _p = "exact_" if _exact else "sfit_"
    _structure_case(_p + "nan", ("col_q",), "a NaN in a column", lambda X: _set(X, "col_q", float("nan")),
                    exact=_exact, quick=_exact)
    _structure_case(_p + "inf", ("col_q",), "+inf in a column", lambda X: _set(X, "col_q", float("inf")),
                    exact=_exact)
    _structure_case(_p + "string", ("col_q",), "a string in a column",
                    lambda X: _set(X.astype({"col_q": object}), "col_q", "n/a"), exact=_exact)
    _structure_case(_p + "overflow_1e300", ("col_r",), "a column at 1e300 (its sd overflows)",
                    lambda X: X.assign(col_r=X["col_r"] * 1e300), exact=_exact, quick=not _exact)
    _structure_case(_p + "constant", ("col_r",), "a constant column", lambda X: X.assign(col_r=2.0), exact=_exact,
                    expect="either")
    _structure_case(_p + "zero_rows", ("row", "sample", "empty"), "zero rows", lambda X: X.iloc[:0], exact=_exact)
    _structure_case(_p + "one_row", ("row", "sample"), "one row", lambda X: X.iloc[:1], exact=_exact,
                    expect="either")
    _structure_case(_p + "one_column", ("column", "variable", "node"), "one column", lambda X: X[["col_p"]],
                    exact=_exact, expect="either")
    _structure_case(_p + "duplicated_column", ("col_q",), "two columns named col_q",
                    lambda X: X.set_axis(["col_p", "col_q", "col_q"], axis=1), exact=_exact)
    _structure_case(_p + "likelihood_bogus", ("likelihood",), "likelihood='poisson'", exact=_exact, cls="misuse",
                    likelihood="poisson")
    _structure_case(_p + "node_names_length", ("node_names",), "node_names of the wrong length", exact=_exact,
                    cls="misuse", mutate=lambda X: X.to_numpy(), node_names=["a1", "b1"])
    _structure_case(_p + "edge_beliefs_shape", ("edge_beliefs",), "edge_beliefs of shape [2, 2] for 3 columns",
                    exact=_exact, cls="misuse", edge_beliefs=np.full((2, 2), 0.5))
    _structure_case(_p + "edge_beliefs_one", ("edge_beliefs",), "edge_beliefs with a 1.0 (outside (0, 1))",
                    exact=_exact, cls="misuse", edge_beliefs=np.array([[0.5, 1.0, 0.5]] * 3))
    _structure_case(_p + "edge_beliefs_cycle", ("edge_beliefs", "cycle"),
                    "edge_beliefs of 0.99 on col_p -> col_q and col_q -> col_p", exact=_exact, cls="misuse",
                    expect="either", edge_beliefs=np.array([[0.5, 0.99, 0.5], [0.99, 0.5, 0.5], [0.5, 0.5, 0.5]]))


def _scale_equivariant(factor, column="col_r"):
    """``exact_posterior`` of the data with ``column`` multiplied by ``factor`` must equal that of the data at unit
    scale (the model standardises the columns): a different answer is the overflow or underflow of the scale."""
    def run(ctx):
        import pyro_dag.structure as S

        X = structure_frame()
        ref = S.exact_posterior(X).edge_probs()
        ctx.start()
        got = S.exact_posterior(X.assign(**{column: X[column] * factor})).edge_probs()
        return {"ref": ref, "got": got}

    def test(res):
        d = float((res["ref"] - res["got"]).abs().max())
        return None if d < 1e-6 else f"edge probabilities differ by {d:.3g} from the same data at unit scale"
    return run, test


for _factor in (1e-8, 1e8, 1e-150):
    _run, _test = _scale_equivariant(_factor)
    CASES.append(Case(id=f"exact_scale_{_factor:g}", cls="bad input", entry="structure.exact_posterior", run=_run,
                      names=("col_r",), expect="accept", wrong=wrong_if(_test),
                      what=f"a column at {_factor:g} scale (must equal the unit-scale posterior)"))


def _exact_many(ctx):
    """exact_posterior with 25 columns (the documented limit is 20)"""
    import pyro_dag.structure as S

    X = pd.DataFrame(np.random.default_rng(0).normal(size=(30, 25)), columns=[f"v{k}" for k in range(25)])
    ctx.start()
    return S.exact_posterior(X).edge_probs()


CASES.append(Case(id="exact_too_many_columns", cls="misuse", entry="structure.exact_posterior", run=_exact_many,
                  names=("25 variables", "25 columns", "p ≤ 20", "p <= 20"),
                  what="exact_posterior with 25 columns (the documented limit is 20)"))


def _posterior(kind):
    import pyro_dag.structure as S

    X = structure_frame()
    if kind == "exact":
        return S.exact_posterior(X)
    return S.fit(X, num_steps=5, progress=False)


def _count_draws(post, ctx):
    """Count the DAGs ``post.sample`` draws as work (a query that fails after drawing them came late)."""
    real = post.sample

    def sample(num_samples=1000, *a, **k):
        ctx.work += int(num_samples)
        return real(num_samples, *a, **k)

    post.sample = sample
    return post


def _query_case(id, names, what, call, kinds=("exact", "fit"), expect="refuse", forbid=(), wrong=None, good=None):
    for kind in kinds:
        def run(ctx, kind=kind):
            post = _count_draws(_posterior(kind), ctx)
            ctx.start()
            return call(post)
        run.__doc__ = what
        CASES.append(Case(id=f"query_{kind}_{id}", cls="misuse", entry=f"structure queries ({kind})", run=run,
                          names=names, expect=expect, forbid=forbid, wrong=wrong, good=good, what=what))


_query_case("unknown_node", ("col_z",), "given={('col_p', 'col_z'): True}",
            lambda post: post.edge_probs(given={("col_p", "col_z"): True}))
_query_case("self_edge", ("col_p",), "given={('col_p', 'col_p'): True}",
            lambda post: post.edge_probs(given={("col_p", "col_p"): True}))
_query_case("cyclic_evidence", ("cycle", "col_p", "col_q"),
            "given: col_p -> col_q and col_q -> col_p both present (no DAG satisfies it)",
            lambda post: post.edge_probs(given={("col_p", "col_q"): True, ("col_q", "col_p"): True},
                                         num_samples=100_000),
            forbid=("draw more samples",))
_query_case("cyclic_evidence_map", ("cycle", "col_p", "col_q", "col_r"), "map_dag given a 3-cycle",
            lambda post: post.map_dag(given={("col_p", "col_q"): True, ("col_q", "col_r"): True,
                                             ("col_r", "col_p"): True}), forbid=("draw more samples",))
_query_case("index_out_of_range", ("index 5", "(5, 0)"), "given={(5, 0): True} with 3 nodes",
            lambda post: post.prob({(5, 0): True}))
_query_case("evidence_not_bool", ("0.5", "True", "bool"), "given={('col_p', 'col_q'): 0.5}",
            lambda post: post.prob({("col_p", "col_q"): 0.5}))
_query_case("evidence_list", ("given", "evidence", "dict"), "given=[('col_p', 'col_q')] (a list, not a dict)",
            lambda post: post.edge_probs(given=[("col_p", "col_q")]), expect="either")
_query_case("evidence_string", ("given", "evidence", "dict"), "given='col_p->col_q' (a string)",
            lambda post: post.edge_probs(given="col_p->col_q"), expect="either")
_query_case("num_samples_zero", ("num_samples",), "edge_probs(num_samples=0)",
            lambda post: post.edge_probs(num_samples=0), kinds=("fit",))
_query_case("sample_negative", ("num_samples",), "sample(-1)", lambda post: post.sample(-1))
_query_case("sample_zero", ("num_samples",), "sample(0)", lambda post: post.sample(0), expect="either")
_query_case("held_out_nan", ("nan", "X_test"), "held_out_log_likelihood on rows with NaN",
            lambda post: post.held_out_log_likelihood(np.array([[np.nan, 0.1, 0.2], [0.3, 0.1, 0.2]]),
                                                      num_samples=50))
_query_case("held_out_wrong_width", ("X_test",), "held_out_log_likelihood on 2 columns of 3",
            lambda post: post.held_out_log_likelihood(np.zeros((4, 2)), num_samples=50))
_query_case("held_out_dataframe_reordered", ("X_test", "DataFrame", "column"),
            "held_out_log_likelihood on a DataFrame with its columns reordered",
            lambda post: post.held_out_log_likelihood(structure_frame(seed=1)[["col_r", "col_q", "col_p"]],
                                                      num_samples=50), expect="either",
            wrong=lambda r: None)
_query_case("causal_effects_wrong_data", ("data",), "causal_effects(data=) with 2 columns",
            lambda post: post.causal_effects(data=np.zeros((10, 2)), num_samples=50))


def _map_tie(ctx):
    """exact_posterior of two strongly correlated columns: col_p -> col_q and col_q -> col_p are Markov
    equivalent (a tie); map_dag must say so"""
    import pyro_dag.structure as S

    X = structure_frame()[["col_p", "col_q"]]
    post = S.exact_posterior(X)
    ctx.start()
    return {"map": post.map_dag(), "P": post.edge_probs()}


def _tie_flagged(res):
    return False  # a returned DAG alone does not say it is one of a tie: only a warning (rule 3b) is a good answer


CASES.append(Case(id="query_exact_map_tie", cls="misuse", entry="structure queries (exact)", run=_map_tie,
                  names=("tie", "equivalent"), good=_tie_flagged,
                  what="map_dag of two Markov-equivalent DAGs (a tie): say so"))


# ================================================================================================================
# The command line: pyro-dag fit --csv, discover, fit multifidelity
# ================================================================================================================
def _csv_case(id, names, what, frame=None, extra=(), graph="root_a -> node_b -> leaf_c\n", expect="refuse",
              cls="bad input", quick=False, forbid=(), max_work=0, text=None):
    """``pyro-dag fit --csv`` on ``frame(chain_frame())`` (or the CSV ``text``) and ``graph``."""
    def run(ctx):
        data = text if text is not None else (frame(chain_frame()) if frame is not None else chain_frame())
        csv_path = write_csv(ctx, data)
        gpath = write_graph(ctx, graph)
        ctx.start()
        return cli(ctx, "fit", "--csv", csv_path, "--graph", gpath, *FIT_CSV, *extra)
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="pyro-dag fit --csv", run=run, names=names, expect=expect, quick=quick,
                      forbid=forbid, max_work=max_work, wrong=csv_outputs_wrong, after=out_broken, what=what))


def _fset(frame, col, value, rows=(0,)):
    f = frame.astype({col: object}) if isinstance(value, str) else frame.copy()
    for r in rows:
        f.loc[f.index[r], col] = value
    return f


_csv_case("csv_nan_input", ("root_a",), "an empty cell in the input column", lambda f: _fset(f, "root_a", np.nan),
          quick=True)
_csv_case("csv_inf_value", ("leaf_c",), "'inf' in a node column", lambda f: _fset(f, "leaf_c", np.inf))
_csv_case("csv_string_value", ("leaf_c",), "'abc' in a node column", lambda f: _fset(f, "leaf_c", "abc"))
_csv_case("csv_overflow_column", ("leaf_c",), "a node column at 1e300 (its sd overflows)",
          lambda f: f.assign(leaf_c=f["leaf_c"] * 1e300), quick=True)
_csv_case("csv_overflow_1e154", ("leaf_c",), "a node column at 1e155 (just past the overflow of its variance)",
          lambda f: f.assign(leaf_c=f["leaf_c"] * 1e155))
_csv_case("csv_float32_overflow", ("leaf_c",), "a node column at 1e39 (finite in float64, beyond float32)",
          lambda f: f.assign(leaf_c=f["leaf_c"] * 1e39), expect="either", forbid=("nan or inf",))
_csv_case("csv_scale_1e-8", ("leaf_c",), "a node column at 1e-8", lambda f: f.assign(leaf_c=f["leaf_c"] * 1e-8),
          expect="accept", forbid=("learning rate",))
_csv_case("csv_scale_1e8_input", ("root_a",), "the input column at 1e8", lambda f: f.assign(root_a=f["root_a"] * 1e8),
          expect="accept")
_csv_case("csv_constant_column", ("leaf_c",), "a constant node column", lambda f: f.assign(leaf_c=1.0))
_csv_case("csv_missing_column", ("leaf_c",), "the CSV lacks a node's column", lambda f: f.drop(columns=["leaf_c"]))
_csv_case("csv_extra_column", ("extra_col",), "a column that is not a node", lambda f: f.assign(extra_col=1.0))
_csv_case("csv_duplicated_header", ("node_b",), "two columns named node_b",
          text="root_a,node_b,node_b,leaf_c\n" + "".join(f"{a},{b},{b + 1},{c}\n" for a, b, c in
                                                           chain_frame().to_numpy()), forbid=("node_b.1",))
_csv_case("csv_header_only", ("row", "empty", "data.csv"), "a header row and no data rows",
          text="root_a,node_b,leaf_c\n")
_csv_case("csv_empty_file", ("empty", "data.csv", "header"), "an empty (0-byte) CSV", text="")
_csv_case("csv_three_rows", ("row",), "three rows (too few to hold some out)", lambda f: f.iloc[:3],
          expect="either")
_csv_case("csv_one_row", ("row",), "one row", lambda f: f.iloc[:1], forbid=("constant",))
_csv_case("csv_semicolon", ("column", "root_a", "header", "separ", "delimit"), "a semicolon-separated file",
          text="root_a;node_b;leaf_c\n" + "".join(f"{a};{b};{c}\n" for a, b, c in chain_frame().to_numpy()))
_csv_case("csv_all_missing_node", ("node_b",), "a node column with every cell empty",
          lambda f: f.assign(node_b=np.nan), expect="either")
_csv_case("csv_graph_cycle", ("cycle", "node_b", "leaf_c"), "a graph file with a cycle",
          graph="root_a -> node_b -> leaf_c\nleaf_c -> node_b\n")
_csv_case("csv_graph_syntax", ("line 2",), "a graph file with an unparsable line",
          graph="root_a -> node_b\nnode_b => leaf_c\n")
_csv_case("csv_graph_unknown_node", ("nope_z",), "a graph with a node that has no column",
          graph="root_a -> node_b -> leaf_c\nnope_z -> leaf_c\n")
_csv_case("csv_graph_empty", ("graph", "edge", "empty"), "an empty graph file", graph="")
_csv_case("csv_inputs_unknown", ("nope_z",), "--inputs naming a node not in the graph", cls="misuse",
          extra=("--inputs", "nope_z"))
_csv_case("csv_inputs_not_root", ("node_b",), "--inputs naming a non-root node", cls="misuse",
          extra=("--inputs", "node_b"), expect="either")
_csv_case("csv_latent_bad_spec", ("--latent", "h1"), "--latent h1 (no dimension or children)", cls="misuse",
          extra=("--latent", "h1"))
_csv_case("csv_latent_unknown_child", ("nope_z",), "--latent h1:1:nope_z", cls="misuse",
          extra=("--latent", "h1:1:nope_z"))
_csv_case("csv_test_fraction_above_1", ("--test-fraction",), "--test-fraction 1.5", cls="misuse",
          extra=("--test-fraction", 1.5), quick=True, forbid=("step size",))
_csv_case("csv_steps_negative", ("--steps",), "--steps -1", cls="misuse", extra=("--steps", -1))
_csv_case("csv_steps_zero", ("--steps",), "--steps 0", cls="misuse", extra=("--steps", 0), expect="either")
_csv_case("csv_folds_one", ("--folds",), "--folds 1", cls="misuse", extra=("--folds", 1))
_csv_case("csv_folds_above_rows", ("--folds", "rows"), "--folds 50 with 20 rows", cls="misuse",
          extra=("--folds", 50))
_csv_case("csv_lr_zero", ("--lr",), "--lr 0", cls="misuse", extra=("--lr", 0))
_csv_case("csv_num_inducing_zero", ("--num-inducing",), "--num-inducing 0", cls="misuse",
          extra=("--num-inducing", 0))


def _csv_files_case(id, names, what, csv=None, graph=None, extra=(), cls="bad input"):
    """``pyro-dag fit --csv CSV --graph GRAPH`` with paths built by ``csv(ctx)`` / ``graph(ctx)``."""
    def run(ctx):
        c = csv(ctx) if csv else write_csv(ctx, chain_frame())
        g = graph(ctx) if graph else write_graph(ctx)
        args = list(extra)
        if "__OUTFILE__" in args:  # an existing file where the output folder should go
            with open(ctx.path("taken"), "w") as f:
                f.write("not a folder\n")
            args[args.index("__OUTFILE__")] = ctx.path("taken")
        ctx.start()
        return cli(ctx, "fit", "--csv", c, "--graph", g, *FIT_CSV, *args)
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="pyro-dag fit --csv", run=run, names=names, wrong=csv_outputs_wrong,
                      after=out_broken, what=what))


_csv_files_case("csv_file_missing", ("missing.csv",), "--csv of a file that does not exist",
                csv=lambda ctx: ctx.path("missing.csv"))
_csv_files_case("csv_graph_missing", ("missing.txt",), "--graph of a file that does not exist",
                graph=lambda ctx: ctx.path("missing.txt"))
_csv_files_case("csv_is_directory", ("--csv", "adir"), "--csv of a directory",
                csv=lambda ctx: (os.makedirs(ctx.path("adir")), ctx.path("adir"))[1])
_csv_files_case("csv_binary_file", ("data.csv", "--csv", "utf", "decode", "encoding"),
                "--csv of a binary (gzip) file", csv=lambda ctx: _binary(ctx.path("data.csv")))
_csv_files_case("csv_out_is_file", ("--out", "taken"), "--out naming an existing file", cls="misuse",
                extra=("--out", "__OUTFILE__"))


def _binary(path):
    import gzip

    with gzip.open(path, "wb") as f:
        f.write(chain_frame().to_csv(index=False).encode())
    return path


def _multifidelity_case(id, names, what, extra, quick=False):
    def run(ctx):
        ctx.start()
        return cli(ctx, "fit", "multifidelity", "--problem", "forrester", "--steps", 2, *extra)
    run.__doc__ = what
    CASES.append(Case(id=id, cls="misuse", entry="pyro-dag fit multifidelity", run=run, names=names, quick=quick,
                      after=out_broken, what=what))


_multifidelity_case("mf_cli_csv_ignored", ("--csv",), "fit multifidelity --csv data.csv (an option it does not use)",
                    ("--csv", "data.csv"))
_multifidelity_case("mf_cli_checkpoint_ignored", ("--checkpoint",), "fit multifidelity --checkpoint DIR",
                    ("--checkpoint", "ckpt"))
_multifidelity_case("mf_cli_problem_unknown", ("--problem", "nope_z"), "fit multifidelity --problem nope_z",
                    ("--problem", "nope_z"))


def _discover_case(id, names, what, frame=None, extra=(), expect="refuse", cls="bad input", quick=False, forbid=(),
                   text=None, max_work=0):
    """``pyro-dag discover --csv`` (5 steps, 50 samples) on ``frame(structure_frame())`` or the CSV ``text``."""
    def run(ctx):
        data = text if text is not None else (frame(structure_frame()) if frame is not None else structure_frame())
        path = write_csv(ctx, data)
        ctx.start()
        return cli(ctx, "discover", "--csv", path, "--steps", 5, "--samples", 50, *extra)
    run.__doc__ = what
    CASES.append(Case(id=id, cls=cls, entry="pyro-dag discover", run=run, names=names, expect=expect, quick=quick,
                      forbid=forbid, max_work=max_work, wrong=discover_wrong, after=out_broken, what=what))


_discover_case("discover_nan", ("col_q",), "an empty cell", lambda f: _fset(f, "col_q", np.nan), quick=True)
_discover_case("discover_string", ("col_q",), "'abc' in a column", lambda f: _fset(f, "col_q", "abc"))
_discover_case("discover_overflow", ("col_r",), "a column at 1e300", lambda f: f.assign(col_r=f["col_r"] * 1e300))
_discover_case("discover_constant", ("col_r",), "a constant column", lambda f: f.assign(col_r=1.0), expect="either")
_discover_case("discover_duplicated_header", ("col_q",), "two columns named col_q",
               text="col_p,col_q,col_q\n" + "".join(f"{a},{b},{c}\n" for a, b, c in structure_frame().to_numpy()),
               forbid=("col_q.1",))
_discover_case("discover_header_only", ("row", "empty", "data.csv"), "a header row and no data rows",
               text="col_p,col_q,col_r\n")
_discover_case("discover_one_column", ("column", "variable"), "one column", lambda f: f[["col_p"]])
_discover_case("discover_given_unknown", ("col_z",), "--given 'col_p->col_z' (an unknown node)", cls="misuse",
               extra=("--given", "col_p->col_z"), quick=True)
_discover_case("discover_given_syntax", ("--given", "col_p=>col_q"), "--given 'col_p=>col_q' (unparsable)",
               cls="misuse", extra=("--given", "col_p=>col_q"))
_discover_case("discover_given_self", ("col_p",), "--given 'col_p->col_p' (a self-loop)", cls="misuse",
               extra=("--given", "col_p->col_p"))
_discover_case("discover_given_cycle", ("cycle", "col_p", "col_q"), "--given 'col_p->col_q,col_q->col_p'",
               cls="misuse", extra=("--given", "col_p->col_q,col_q->col_p"), forbid=("draw more samples",))
_discover_case("discover_steps_negative", ("--steps", "num_steps"), "--steps -5", cls="misuse",
               extra=("--steps", -5))
_discover_case("discover_samples_zero", ("--samples", "num_samples"), "--samples 0", cls="misuse",
               extra=("--samples", 0))
_discover_case("discover_particles_zero", ("--particles", "num_particles"), "--particles 0", cls="misuse",
               extra=("--particles", 0))
_discover_case("discover_exact_mlp", ("--exact", "mlp", "likelihood"), "--exact --likelihood mlp", cls="misuse",
               extra=("--exact", "--likelihood", "mlp"))
_discover_case("discover_expected_parents_negative", ("--expected-parents", "expected_parents"),
               "--expected-parents -1", cls="misuse", extra=("--expected-parents", -1))
_discover_case("discover_threads_zero", ("--threads",), "--threads 0", cls="misuse", extra=("--threads", 0))


def _discover_truth(id, names, what, truth):
    def run(ctx):
        path = write_csv(ctx, structure_frame())
        tpath = ctx.path("truth.csv")
        np.savetxt(tpath, truth, delimiter=",", fmt="%g")
        ctx.start()
        return cli(ctx, "discover", "--csv", path, "--truth", tpath, "--steps", 5, "--samples", 50)
    run.__doc__ = what
    CASES.append(Case(id=id, cls="bad input", entry="pyro-dag discover", run=run, names=names, wrong=discover_wrong,
                      after=out_broken, what=what))


_discover_truth("discover_truth_shape", ("--truth", "truth.csv"), "--truth of shape 2 x 2 for 3 columns",
                np.zeros((2, 2)))
_discover_truth("discover_truth_cyclic", ("--truth", "truth.csv", "cycle"), "--truth with a cycle",
                np.array([[0, 1, 0], [1, 0, 0], [0, 0, 0]]))
_discover_truth("discover_truth_not_binary", ("--truth", "truth.csv"), "--truth with a 0.5 entry",
                np.array([[0, 0.5, 0], [0, 0, 0], [0, 0, 0]]))


# ================================================================================================================
# Faults: checkpoints (train(checkpoint=..., resume=True)), saved fits, a full disk under every writer
# ================================================================================================================
def latent_chain_data(n=N):
    """The chain with node_b hidden (only leaf_c observed), so that training takes SVI steps (a fully observed
    chain is fitted exactly, without any)."""
    inputs, data = chain_data(n)
    return inputs, {"leaf_c": data["leaf_c"]}


def _ckpt_train(ctx, path, num_steps=4, every=2, model=None, **kw):
    """Train the latent chain with ``checkpoint=path``; returns ``(model, guide, result)``."""
    from pyro_dag.infer import train

    inputs, data = latent_chain_data()
    m, g = model if model is not None else model_and_guide()
    res = train(m, g, inputs, data, num_steps=num_steps, progress=False, checkpoint=path, checkpoint_every=every,
                **kw)
    return m, g, res


def _valid_checkpoint(ctx, name="other.pt", graph=None):
    """A real checkpoint of a 2-step run (of ``graph``), in a fresh parameter store."""
    path = ctx.path(name)
    _ckpt_train(ctx, path, num_steps=2, model=model_and_guide(graph) if graph is not None else None)
    pyro.clear_param_store()
    return path


def _write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return path


class _Foreign:
    """Not a checkpoint: a pickled object of a class from elsewhere."""

    def __init__(self):
        self.x = 1


def _bad_checkpoints():
    """``{case: (what, maker(ctx) -> path)}`` of files that are no checkpoint to resume from."""
    def truncated(ctx):
        p = _valid_checkpoint(ctx, "trunc.pt")
        with open(p, "rb") as f:
            data = f.read()
        return _write_bytes(p, data[: len(data) // 2])

    return {
        "corrupt": ("random bytes", lambda ctx: _write_bytes(ctx.path("ckpt.pt"), os.urandom(4096))),
        "truncated": ("a checkpoint cut at half its length", truncated),
        "empty": ("a 0-byte file", lambda ctx: _write_bytes(ctx.path("ckpt.pt"), b"")),
        "text": ("a text file", lambda ctx: _write_bytes(ctx.path("ckpt.pt"), b"step = 100\n")),
        "foreign_pickle": ("torch.save of an object of another class",
                           lambda ctx: (torch.save(_Foreign(), ctx.path("ckpt.pt")), ctx.path("ckpt.pt"))[1]),
        "other_dict": ("torch.save of a dict of tensors (not a checkpoint)",
                       lambda ctx: (torch.save({"w": torch.zeros(3)}, ctx.path("ckpt.pt")), ctx.path("ckpt.pt"))[1]),
        "other_model": ("a checkpoint of a model on another graph",
                        lambda ctx: _valid_checkpoint(ctx, graph=nx.DiGraph([("root_a", "node_b"),
                                                                             ("root_a", "leaf_c")]))),
        "saved_fit": ("a file of pyro_dag.persist.save (a saved fit, not a checkpoint)", lambda ctx: _saved_fit(ctx)),
    }


def _saved_fit(ctx, name="fit.pt"):
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    path = persist.save(ctx.path(name), model, guide, inputs, data)
    pyro.clear_param_store()
    return path


def _set_up():
    """A model and guide with the model's set-up (its pilot fits) done, so that it is not counted as work."""
    m, g = model_and_guide()
    m.setup(*latent_chain_data())
    return m, g


for _name, (_what, _make) in _bad_checkpoints().items():
    def _run(ctx, make=_make):
        path = make(ctx)
        model = _set_up()
        ctx.start()
        m, g, res = _ckpt_train(ctx, path, resume=True, model=model)
        return {"losses": res.losses}
    _run.__doc__ = f"resume from {_what}"
    CASES.append(Case(id=f"ckpt_resume_{_name}", cls="fault", entry="train(checkpoint=, resume=True)", run=_run,
                      names=("ckpt.pt", "trunc.pt", "other.pt", "fit.pt", "checkpoint"), forbid=("weights_only=False",),
                      quick=_name == "corrupt", what=_run.__doc__))


def _resume_settings(ctx):
    """resume a checkpoint written with lr=0.01 in a call with lr=0.02"""
    path = _valid_checkpoint(ctx, "other.pt")
    model = _set_up()
    ctx.start()
    return _ckpt_train(ctx, path, resume=True, lr=0.02, model=model)[2].losses


def _resume_missing(ctx):
    """resume=True with a checkpoint path that does not exist yet (documented: start fresh)"""
    ctx.start()
    return _ckpt_train(ctx, ctx.path("new", "ckpt.pt"), resume=True)[2].losses


def _checkpoint_under_file(ctx):
    """checkpoint= a path whose folder is a file"""
    _write_bytes(ctx.path("afile"), b"x")
    ctx.start()
    return _ckpt_train(ctx, ctx.path("afile", "ckpt.pt"))[2].losses


def _leftover_tmp(ctx):
    """temporary files of killed checkpoint writes, an hour old, beside the checkpoint: cleaned up?"""
    os.makedirs(ctx.path("run"))
    path = ctx.path("run", "ckpt.pt")
    for name in (".tmp-k1ll3d.pt", ".ckpt.tmp-k1ll3d.pt"):   # the temporary names of earlier and current writers
        _write_bytes(ctx.path("run", name), b"partial")
        os.utime(ctx.path("run", name), (1e9, 1e9))
    ctx.start()
    _ckpt_train(ctx, path)
    return {"left": sorted(f for f in os.listdir(ctx.path("run")) if "k1ll3d" in f)}


CASES += [
    Case(id="ckpt_resume_other_settings", cls="fault", entry="train(checkpoint=, resume=True)", run=_resume_settings,
         names=("lr",), what=_resume_settings.__doc__),
    Case(id="ckpt_resume_missing_file", cls="fault", entry="train(checkpoint=, resume=True)", run=_resume_missing,
         names=("ckpt.pt",), expect="accept", what=_resume_missing.__doc__),
    Case(id="ckpt_folder_is_file", cls="fault", entry="train(checkpoint=)", run=_checkpoint_under_file,
         names=("afile",), what=_checkpoint_under_file.__doc__),
    Case(id="ckpt_leftover_tmp_files", cls="fault", entry="train(checkpoint=)", run=_leftover_tmp,
         names=("k1ll3d",), good=lambda r: not r["left"], wrong=lambda r: None, what=_leftover_tmp.__doc__),
]


def _ckpt_full_disk(first):
    """A full disk at the first checkpoint write (``first``), or at the second one (the first must survive)."""
    def run(ctx):
        os.makedirs(ctx.path("run"))
        path = ctx.path("run", "ckpt.pt")
        budget = 0
        if not first:
            _ckpt_train(ctx, ctx.path("probe.pt"), num_steps=2)  # the size of one checkpoint
            budget = int(os.path.getsize(ctx.path("probe.pt")) * 1.5)
            pyro.clear_param_store()
        ctx.start()
        with full_disk(ctx, ctx.path("run"), budget=budget):
            _ckpt_train(ctx, path, num_steps=4, every=2)
        return None

    def after(ctx):
        left = [f for f in os.listdir(ctx.path("run")) if f != "ckpt.pt"]
        if left:
            return f"temporary files left: {left}"
        if not first:
            if not os.path.exists(ctx.path("run", "ckpt.pt")):
                return "the checkpoint of step 2 is gone"
            return broken_files(ctx.path("run"))
        return None
    return run, after


for _first in (True, False):
    _run, _after = _ckpt_full_disk(_first)
    _w = "the first checkpoint write" if _first else "the second checkpoint write (the first must survive)"
    CASES.append(Case(id=f"ckpt_full_disk_{'first' if _first else 'second'}", cls="fault", entry="train(checkpoint=)",
                      run=_run, after=_after, names=("no space", "ckpt.pt", "disk"), quick=not _first, max_work=None,
                      what=f"a full disk (ENOSPC) at {_w}"))


# ----------------------------------------------------------------------------------------- saved fits (persist)
def _persist_load(id, names, what, make, expect="refuse", forbid=("weights_only=False",), graph=None):
    def run(ctx):
        from pyro_dag import persist

        path = make(ctx)
        model, guide = model_and_guide(graph)
        ctx.start()
        persist.load(path, model, guide)
        return model.predict(guide, chain_data()[0], num_samples=4)
    run.__doc__ = what
    CASES.append(Case(id=id, cls="fault", entry="persist.load", run=run, names=names, expect=expect, forbid=forbid,
                      what=what))


_persist_load("persist_load_corrupt", ("fit.pt",), "load random bytes",
              lambda ctx: _write_bytes(ctx.path("fit.pt"), os.urandom(2048)))
_persist_load("persist_load_truncated", ("fit.pt",), "load a saved fit cut at half its length",
              lambda ctx: (lambda p: _write_bytes(p, open(p, "rb").read()[:os.path.getsize(p) // 2]))(_saved_fit(ctx)))
_persist_load("persist_load_empty", ("fit.pt",), "load a 0-byte file", lambda ctx: _write_bytes(ctx.path("fit.pt"), b""))
_persist_load("persist_load_missing", ("fit.pt",), "load a file that does not exist", lambda ctx: ctx.path("fit.pt"))
_persist_load("persist_load_checkpoint", ("other.pt", "checkpoint"), "load a training checkpoint as a saved fit",
              lambda ctx: _valid_checkpoint(ctx))
_persist_load("persist_load_other_graph", ("fit.pt", "graph", "leaf_c", "node_b"),
              "load a fit of the chain into a model of another graph", _saved_fit,
              graph=nx.DiGraph([("root_a", "node_b"), ("root_a", "leaf_c")]))


def _persist_roundtrip(ctx):
    """save, load into a fresh model and guide, predict with the same seed: identical predictions"""
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    pyro.set_rng_seed(1)
    before = model.predict(guide, inputs, num_samples=4)["leaf_c"].mean
    persist.save(ctx.path("fit.pt"), model, guide, inputs, data)
    pyro.clear_param_store()
    m2, g2 = model_and_guide()
    ctx.start()
    persist.load(ctx.path("fit.pt"), m2, g2)
    pyro.set_rng_seed(1)
    return {"before": before, "after": m2.predict(g2, inputs, num_samples=4)["leaf_c"].mean}


CASES.append(Case(id="persist_roundtrip", cls="fault", entry="persist.save/load", run=_persist_roundtrip, names=(),
                  expect="accept", wrong=wrong_if(lambda r: None if torch.equal(r["before"], r["after"]) else
                                                 "the loaded model predicts differently"),
                  what=_persist_roundtrip.__doc__))


def _persist_save_full_disk(ctx):
    """a full disk while a fit is saved over an earlier save: the earlier file must survive"""
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    os.makedirs(ctx.path("fits"))
    persist.save(ctx.path("fits", "fit.pt"), model, guide, inputs, data)
    ctx.start()
    with full_disk(ctx, ctx.path("fits"), budget=1000):
        persist.save(ctx.path("fits", "fit.pt"), model, guide, inputs, data)


CASES.append(Case(id="persist_save_full_disk", cls="fault", max_work=None, entry="persist.save", run=_persist_save_full_disk,
                  names=("no space", "fit.pt", "disk"), what=_persist_save_full_disk.__doc__,
                  after=lambda ctx: broken_files(ctx.path("fits")) or (
                      None if os.listdir(ctx.path("fits")) == ["fit.pt"] else
                      f"files left: {sorted(os.listdir(ctx.path('fits')))}")))


def _persist_save_no_inputs(ctx):
    """persist.save(path, model, guide) without the training inputs and data"""
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    ctx.start()
    return persist.save(ctx.path("fit.pt"), model, guide)


CASES.append(Case(id="persist_save_without_inputs", cls="misuse", entry="persist.save", run=_persist_save_no_inputs,
                  names=("inputs",), what=_persist_save_no_inputs.__doc__))


def _lamp_load_foreign(ctx):
    """LatentMAP.load of a saved DAGDGP fit (another kind of saved file)"""
    path = _saved_fit(ctx)
    model, LatentMAP, inputs, data = lamp_parts()
    ctx.start()
    return LatentMAP(model).load(path)


def _emulator_load_corrupt(ctx):
    """MultiFidelityEmulator.load of random bytes"""
    path = _write_bytes(ctx.path("em.pt"), os.urandom(2048))
    em = emulator(*mf_arrays())
    ctx.start()
    return em.load(path)


CASES += [
    Case(id="lamp_load_foreign", cls="fault", entry="LaMP", run=_lamp_load_foreign, names=("fit.pt",),
         forbid=("weights_only=False",), what=_lamp_load_foreign.__doc__),
    Case(id="em_load_corrupt", cls="fault", entry="MultiFidelityEmulator", run=_emulator_load_corrupt,
         names=("em.pt",), forbid=("weights_only=False",), what=_emulator_load_corrupt.__doc__),
]


# ----------------------------------------------------------------------------------------- full disk, every writer
def _full_disk_cli(id, entry, what, argv, match=None, budget=0, quick=False):
    """The command ``argv(ctx)`` with the output folder on a disk that fills after ``budget`` bytes (of the files
    whose name contains ``match``): it must fail naming the problem and leave no broken file."""
    def run(ctx):
        args = argv(ctx)
        ctx.start()
        with full_disk(ctx, ctx.path("out"), budget=budget, match=match):
            return cli(ctx, *args)
    run.__doc__ = what
    CASES.append(Case(id=id, cls="fault", entry=entry, run=run, after=out_broken, quick=quick, what=what,
                      names=("no space", "disk", match or "out"), wrong=lambda r: None, max_work=None))


def _csv_argv(ctx):
    return ["fit", "--csv", write_csv(ctx, chain_frame()), "--graph", write_graph(ctx), *FIT_CSV]


def _discover_argv(ctx):
    return ["discover", "--csv", write_csv(ctx, structure_frame()), "--steps", 5, "--samples", 50]


for _match in ("metrics.json", "predictions.csv", "figure.png"):
    _full_disk_cli(f"disk_full_csv_{_match.split('.')[0]}", "pyro-dag fit --csv",
                   f"fit --csv: the disk is full when {_match} is written", _csv_argv, match=_match,
                   quick=_match == "figure.png")
_full_disk_cli("disk_full_csv_mid_file", "pyro-dag fit --csv", "fit --csv: the disk fills after 3000 bytes of output",
               _csv_argv, budget=3000)
for _match in ("discover.json", "edge_probs.png", "posterior_graph.png"):
    _full_disk_cli(f"disk_full_discover_{_match.split('.')[0]}", "pyro-dag discover",
                   f"discover: the disk is full when {_match} is written", _discover_argv, match=_match)
_full_disk_cli("disk_full_collider", "pyro-dag fit collider", "fit collider: the disk is full when collider.png is "
               "written", lambda ctx: ["fit", "collider", "--steps", 2], match="collider.png")
_full_disk_cli("disk_full_multifidelity", "pyro-dag fit multifidelity", "fit multifidelity: the disk is full when "
               "its JSON is written", lambda ctx: ["fit", "multifidelity", "--problem", "forrester", "--steps", 2],
               match=".json")


def _em_save_full_disk(ctx):
    """MultiFidelityEmulator.save on a full disk"""
    em = emulator(*mf_arrays())
    em.fit(num_steps=3, pretrain_steps=3)
    os.makedirs(ctx.path("fits"))
    ctx.start()
    with full_disk(ctx, ctx.path("fits"), budget=500):
        return em.save(ctx.path("fits", "em.pt"))


CASES.append(Case(id="em_save_full_disk", cls="fault", max_work=None, entry="MultiFidelityEmulator", run=_em_save_full_disk,
                  names=("no space", "em.pt", "disk"), what=_em_save_full_disk.__doc__,
                  after=lambda ctx: None if not os.listdir(ctx.path("fits")) else
                  f"files left: {sorted(os.listdir(ctx.path('fits')))}"))


# ================================================================================================================
# Interruptions: KeyboardInterrupt inside a step. Good: the interrupt stops the call, and the state is consistent
# (no Pyro handler left on the stack, grad mode on, the thread count and default dtype as before, every parameter
# finite and none left frozen, the model still predicts finite values or refuses clearly, files whole).
# ================================================================================================================
def _interruption(id, entry, what, body, quick=False, after=None):
    """``body(ctx)`` raises an :class:`InjectedInterrupt` somewhere inside; returns a dict of extra problems
    (``check`` after the interrupt, e.g. predicting)."""
    def run(ctx):
        torch.set_num_threads(2)           # the library limits threads while it trains: is the count restored?
        facts = {"interrupted": False, "problems": []}
        try:
            check = body(ctx)
        except InjectedInterrupt:
            facts["interrupted"] = True
            check = ctx.notes.get("check")
        facts["problems"] += state_problems(ctx.notes.get("params"), threads=2)
        if check is not None and facts["interrupted"]:
            try:
                problem = check()
            except Exception as e:  # noqa: BLE001 - a clear refusal after an interrupt is fine; a raw one is poor
                problem = None
                if not _is_clear_error(e):
                    facts["poor"] = f"after the interrupt, a raw {type(e).__name__}: {e}"[:200]
            if problem:
                facts["problems"].append(problem)
        torch.set_num_threads(1)
        return facts
    run.__doc__ = what
    CASES.append(Case(id=id, cls="interruption", entry=entry, run=run, names=(), good=interrupted, wrong=facts_wrong,
                      after=after, quick=quick, what=what))


def _is_clear_error(e):
    return type(e).__module__.split(".")[0] == "pyro_dag" or isinstance(e, (ValueError, TypeError))


def _predicts_finite(model, guide, inputs):
    def check():
        return nonfinite(model.predict(guide, inputs, num_samples=4), "prediction after the interrupt")
    return check


def _train_interrupted(patch, steps=6, **kw):
    """Train the latent chain under ``patch()`` (which raises the interrupt); then it must still predict."""
    def body(ctx):
        from pyro_dag.infer import train

        inputs, data = latent_chain_data()
        model, guide = model_and_guide()
        ctx.notes["check"] = _predicts_finite(model, guide, inputs)
        model.setup(inputs, data)
        ctx.notes["params"] = list(model.named_parameters())
        with patch():
            train(model, guide, inputs, data, num_steps=steps, progress=False, **kw)
        return _predicts_finite(model, guide, inputs)
    return body


_interruption("int_train_adam_step", "train", "KeyboardInterrupt in the 3rd Adam step (gradients computed, before "
              "the update)", _train_interrupted(lambda: interrupt_optimizer_step(3)), quick=True)
_interruption("int_train_loss", "train", "KeyboardInterrupt inside a kernel evaluation during the loss",
              _train_interrupted(lambda: _interrupt_kernel(12)))
_interruption("int_train_pretrain", "train", "KeyboardInterrupt during node-wise pretraining (pretrain_steps=4)",
              _train_interrupted(lambda: interrupt_optimizer_step(2), pretrain_steps=4))
_interruption("int_train_freeze", "train", "KeyboardInterrupt while the inducing inputs and noise are frozen "
              "(freeze_fraction=0.5)", _train_interrupted(lambda: interrupt_optimizer_step(2), freeze_fraction=0.5))
_interruption("int_train_natural_gradient", "train", "KeyboardInterrupt inside a natural-gradient step",
              _train_interrupted(lambda: _interrupt_natural_gradient(2), natural_gradient_after=2))
_interruption("int_train_warm_start", "train", "KeyboardInterrupt during the mean-field warm start (warm_start=3)",
              _train_interrupted(lambda: interrupt_optimizer_step(2), warm_start=3))


def _interrupt_kernel(call):
    from pyro_dag.kernels import stationary

    return interrupt_at(stationary.RBF, "forward", call)


def _interrupt_natural_gradient(call):
    from pyro_dag.infer.natural_gaussian import GaussianNaturalGradient

    return interrupt_at(GaussianNaturalGradient, "step", call)


def _interrupted_checkpoint_write(ctx):
    """train with checkpoints, interrupted inside the second checkpoint write: the first survives whole"""
    os.makedirs(ctx.path("run"))
    inputs, data = latent_chain_data()
    model, guide = model_and_guide()
    ctx.notes["check"] = _predicts_finite(model, guide, inputs)
    real = torch.save
    count = {"n": 0}

    def save(obj, f, *a, **k):
        count["n"] += 1
        if count["n"] == 2:
            raise InjectedInterrupt("injected in the second checkpoint write")
        return real(obj, f, *a, **k)

    torch.save = save
    try:
        _ckpt_train(ctx, ctx.path("run", "ckpt.pt"), num_steps=6, every=2, model=(model, guide))
    finally:
        torch.save = real


_interruption("int_checkpoint_write", "train(checkpoint=)", _interrupted_checkpoint_write.__doc__,
              _interrupted_checkpoint_write,
              after=lambda ctx: broken_files(ctx.path("run")) or (
                  None if sorted(os.listdir(ctx.path("run"))) == ["ckpt.pt"] else
                  f"files in the checkpoint folder: {sorted(os.listdir(ctx.path('run')))}"))


def _resume_bitwise(ctx):
    """interrupted at step 5 of 6 with checkpoints every 2 steps, then resumed: the losses equal an uninterrupted
    run's bit for bit (a resumed run that silently differs is wrong)"""
    pyro.set_rng_seed(0)
    ref = _ckpt_train(ctx, ctx.path("ref.pt"), num_steps=6, every=2)[2].losses
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    path = ctx.path("ckpt.pt")
    try:
        with interrupt_optimizer_step(5):
            _ckpt_train(ctx, path, num_steps=6, every=2)
        return {"interrupted": False, "problems": []}
    except InjectedInterrupt:
        pass
    pyro.clear_param_store()
    pyro.set_rng_seed(123)                 # another seed: the checkpoint's random state must take over
    got = _ckpt_train(ctx, path, num_steps=6, every=2, resume=True)[2].losses
    same = len(ref) == len(got) and all(a == b for a, b in zip(ref, got))
    return {"interrupted": True, "problems": [] if same else [f"resumed losses {got} differ from {ref}"]}


CASES.append(Case(id="int_resume_bitwise", cls="interruption", entry="train(checkpoint=, resume=True)",
                  run=_resume_bitwise, names=(), good=interrupted, wrong=facts_wrong, what=_resume_bitwise.__doc__))


def _predict_interrupted(ctx):
    model, guide, inputs, data = trained()
    ctx.notes["check"] = _predicts_finite(model, guide, inputs)
    with _interrupt_kernel(3):
        model.predict(guide, inputs, num_samples=8)


_interruption("int_predict", "predict", "KeyboardInterrupt inside predict", _predict_interrupted)


def _structure_interrupted(ctx):
    import pyro_dag.structure as S

    with interrupt_optimizer_step(3):
        S.fit(structure_frame(), num_steps=10, progress=False)


_interruption("int_structure_fit", "structure.fit", "KeyboardInterrupt in the 3rd step of structure.fit",
              _structure_interrupted)


def _lamp_interrupted(ctx):
    from pyro_dag.infer import train

    model, LatentMAP, inputs, data = lamp_parts()
    lamp = LatentMAP(model)
    ctx.notes["check"] = lambda: nonfinite(model.predict(lamp, inputs, num_samples=4), "LaMP prediction")
    from pyro_dag.infer.lamp.row_adam import RowwiseAdam

    with interrupt_at(RowwiseAdam, "step", 3):      # LaMP's own row-wise Adam, not a torch.optim optimiser
        train(model, lamp, inputs, data, num_steps=10, recipe="lamp")


_interruption("int_lamp_fit", "LaMP", "KeyboardInterrupt in the 3rd step of a LaMP fit, then predict",
              _lamp_interrupted)


def _emulator_interrupted(ctx):
    em = emulator(*mf_arrays())
    ctx.notes["check"] = lambda: nonfinite(em.predict(np.linspace(0, 1, 3)[:, None], num_samples=4), "emulator")
    with interrupt_optimizer_step(5):
        em.fit(num_steps=5, pretrain_steps=3)


_interruption("int_emulator_fit", "MultiFidelityEmulator", "KeyboardInterrupt inside MultiFidelityEmulator.fit, "
              "then predict", _emulator_interrupted)


def _sem_interrupted(ctx):
    from pyro_dag.sem import LatentSEM, guide_samples, sem_guide

    graph, ind, anc, frame = sem_parts()
    sem = LatentSEM(graph, indicators=ind, anchors=anc, num_inducing=5)
    guide = sem_guide(sem)
    svi = pyro.infer.SVI(sem, guide, pyro.optim.Adam({"lr": 0.02}), pyro.infer.Trace_ELBO())
    ctx.notes["check"] = lambda: nonfinite(guide_samples(sem, guide, frame, num_samples=3), "SEM draws")
    with interrupt_optimizer_step(2):
        for _ in range(4):
            svi.step(frame)


_interruption("int_sem_svi", "LatentSEM", "KeyboardInterrupt in an SVI step of a LatentSEM, then draw",
              _sem_interrupted)


def _cli_fit_interrupted(ctx):
    args = ["fit", "--csv", write_csv(ctx, chain_frame()), "--graph", write_graph(ctx), *FIT_CSV]
    from matplotlib.figure import Figure

    with interrupt_at(Figure, "savefig", 1):
        cli(ctx, *args)


_interruption("int_cli_figure_write", "pyro-dag fit --csv", "KeyboardInterrupt while fit --csv writes figure.png: "
              "no partial file", _cli_fit_interrupted, after=out_broken)


def _persist_interrupted(ctx):
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    os.makedirs(ctx.path("fits"))
    persist.save(ctx.path("fits", "fit.pt"), model, guide, inputs, data)
    real = torch.save

    def save(obj, f, *a, **k):
        raise InjectedInterrupt("injected in torch.save")

    torch.save = save
    try:
        persist.save(ctx.path("fits", "fit.pt"), model, guide, inputs, data)
    finally:
        torch.save = real


_interruption("int_persist_save", "persist.save", "KeyboardInterrupt while a fit is saved over an earlier save: the "
              "earlier file survives whole", _persist_interrupted,
              after=lambda ctx: broken_files(ctx.path("fits")) or (
                  None if os.listdir(ctx.path("fits")) == ["fit.pt"] else
                  f"files left: {sorted(os.listdir(ctx.path('fits')))}"))


# the classes of issue 42 (files, concurrency, new inputs, scale): registered into CASES on import
import robustness_cases_files  # noqa: E402,F401
# the features of issues 41 and 43 (training options, persist, DeepRegression, LaMP, the emulator's choice)
import robustness_cases_features  # noqa: E402,F401
