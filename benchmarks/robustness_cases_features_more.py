"""Cases of the bad-input battery for the features of issues 41 and 43, continued (``robustness_cases_features.py``
has the training options and :mod:`pyro_dag.persist`): ``DeepRegression(method=...)``, ``LatentMAP(init=...,
lengthscale=...)``, ``MultiFidelityEmulator.fit()``'s kernel choice and its saved record, and two processes on one
saved fit. Registered into :data:`robustness_cases.CASES` when that module is imported.
"""
import os
import subprocess
import sys

import numpy as np
import pyro
import torch

from robustness import Case
from robustness_cases import CASES, _interruption, emulator, interrupt_at, lamp_parts, mf_arrays, wrong_if

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def _add(id, cls, entry, run, names, **kw):
    CASES.append(Case(id=id, cls=cls, entry=entry, run=run, names=names, what=(run.__doc__ or "").strip(), **kw))


# ============================================================================================ DeepRegression
def _regression_data(n=16, d=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (n, d))
    return X, np.sin(3 * X[:, 0]) + 0.5 * X[:, 1:].sum(-1) + 0.05 * rng.normal(size=n)


def _deep_case(id, names, what, options=None, fit=None, predict=None, quick=False, expect="refuse",
               cls="new inputs"):
    """``DeepRegression(**options).fit(*fit(X, y))``, then ``predict(reg, X)`` (default: at 4 rows of X)."""
    def run(ctx):
        from pyro_dag.infer import DeepRegression

        X, y = _regression_data()
        if predict is None:
            ctx.start()
        reg = DeepRegression(**{"restarts": 1, **(options or {})})
        reg.fit(*(fit(X, y) if fit is not None else (X, y)))
        if predict is not None:
            ctx.start()
            return predict(reg, X)
        return reg.predict(X[:4])
    run.__doc__ = what
    _add(id, cls, "DeepRegression", run, names, quick=quick, expect=expect, max_work=None if predict else 0)


_deep_case("deep_reg_method_upper_case", ("method",), "DeepRegression(method='LINEAR')", {"method": "LINEAR"},
           quick=True)
_deep_case("deep_reg_method_none", ("method",), "DeepRegression(method=None)", {"method": None})
_deep_case("deep_reg_hidden_dims_zero", ("hidden_dims",), "DeepRegression(hidden_dims=0)", {"hidden_dims": 0})
_deep_case("deep_reg_seed_string", ("seed",), "DeepRegression(seed='a')", {"seed": "a"})
_deep_case("deep_reg_num_steps_with_linear", ("num_steps",), "DeepRegression(method='linear', num_steps=100): an "
           "option of method='svi'", {"method": "linear", "num_steps": 100}, cls="misuse", quick=True)
_deep_case("deep_reg_lamp_options_with_svi", ("lamp_options",), "DeepRegression(method='svi', lamp_options=...): an "
           "option of method='lamp'", {"method": "svi", "lamp_options": {"num_epochs": 5}}, cls="misuse")
_deep_case("deep_reg_fit_nan", ("row",), "DeepRegression().fit with a NaN in X", fit=lambda X, y: (
    np.where(np.arange(X.size).reshape(X.shape) == 2, np.nan, X), y))
_deep_case("deep_reg_fit_constant_y", ("y", "constant"), "DeepRegression().fit with a constant y", expect="either",
           fit=lambda X, y: (X, np.ones_like(y)))
_deep_case("deep_reg_predict_other_columns", ("columns", "[m, 2]"), "predict with 1 column after a fit on 2",
           predict=lambda reg, X: reg.predict(X[:3, :1]))
_deep_case("deep_reg_predict_nan", ("NaN",), "predict at a NaN input",
           predict=lambda reg, X: reg.predict(np.where(np.arange(6).reshape(3, 2) == 0, np.nan, X[:3])))


def _deep_reg_scale(ctx):
    """DeepRegression().fit with y at 1e8 (standardised inside): the same fit as at unit scale, times 1e8"""
    from pyro_dag.infer import DeepRegression

    X, y = _regression_data()
    unit = DeepRegression(restarts=1).fit(X, y).predict(X[:4])[0]
    ctx.start()
    big = DeepRegression(restarts=1).fit(X, y * 1e8).predict(X[:4])[0]
    return {"unit": unit, "big": big}


_add("deep_reg_y_1e8", "scale", "DeepRegression", _deep_reg_scale, ("rescale",), expect="accept", max_work=None,
     wrong=wrong_if(lambda r: None if torch.allclose(r["big"] / 1e8, r["unit"], rtol=1e-3, atol=1e-6) else
                    f"the fit at 1e8 predicts {(r['big'] / 1e8).tolist()} (scaled back) against {r['unit'].tolist()}"))


def _deep_reg_predict_before_fit(ctx):
    """DeepRegression().predict(X) before fit"""
    from pyro_dag.infer import DeepRegression

    ctx.start()
    return DeepRegression().predict(_regression_data()[0][:3])


_add("deep_reg_predict_before_fit", "misuse", "DeepRegression", _deep_reg_predict_before_fit, ("fit",))


def _deep_reg_refit_interrupted(ctx):
    """a fitted DeepRegression refitted on rescaled inputs, interrupted inside the linear layer's fit: then predict
    must refuse, or predict as the earlier fit did"""
    from pyro_dag.infer import DeepRegression
    from pyro_dag.infer.linear_hidden import LinearHiddenGP

    X, y = _regression_data()
    reg = DeepRegression(restarts=1).fit(X, y)
    before = reg.predict(X[:4])[0]

    def check():
        after = reg.predict(X[:4])[0]
        if not torch.allclose(after, before, rtol=1e-6, atol=1e-8):
            return "after the interrupted refit, predict mixes the two fits (other means, no refusal)"
        return None
    ctx.notes["check"] = check
    with interrupt_at(LinearHiddenGP, "fit", 1):
        reg.fit(X * 100, y)


_interruption("int_deep_reg_refit", "DeepRegression", _deep_reg_refit_interrupted.__doc__, _deep_reg_refit_interrupted)


# ============================================================================================ LatentMAP(init, lengthscale)
def _lamp_new(id, names, what, quick=False, **options):
    def run(ctx):
        model, LatentMAP, inputs, data = lamp_parts()
        ctx.start()
        return LatentMAP(model, **options)
    run.__doc__ = what
    _add(id, "new inputs", "LaMP", run, names, quick=quick)


_lamp_new("lamp_init_upper_case", ("init",), "LatentMAP(model, init='PCA')", quick=True, init="PCA")
_lamp_new("lamp_init_none", ("init",), "LatentMAP(model, init=None)", init=None)
_lamp_new("lamp_lengthscale_number", ("lengthscale",), "LatentMAP(model, lengthscale=0.5) (a value, not a kind)",
          lengthscale=0.5)
_lamp_new("lamp_lengthscale_upper_case", ("lengthscale",), "LatentMAP(model, lengthscale='ARD')", lengthscale="ARD")


def _lamp_saved(ctx, **options):
    from pyro_dag.infer import train

    model, LatentMAP, inputs, data = lamp_parts()
    lamp = LatentMAP(model, **options)
    train(model, lamp, inputs, data, num_steps=3, recipe="lamp")
    path = lamp.save(ctx.path("lamp.pt"))
    pyro.clear_param_store()
    return lamp, inputs, path


def _lamp_load_lengthscale(ctx):
    """a LaMP fit with lengthscale='ard' loaded into LatentMAP(lengthscale='isotropic')"""
    lamp, inputs, path = _lamp_saved(ctx)
    model, LatentMAP, _, _ = lamp_parts()
    ctx.start()
    return LatentMAP(model, lengthscale="isotropic").load(path).predict(inputs, num_samples=4)


def _lamp_load_init(ctx):
    """a LaMP fit started with init='pca' loaded into LatentMAP(init='exact'): the start does not change a fitted
    state, so it predicts as the saved fit"""
    lamp, inputs, path = _lamp_saved(ctx, init="pca")
    model, LatentMAP, _, _ = lamp_parts()
    ctx.start()
    loaded = LatentMAP(model, init="exact").load(path)
    return {"saved": lamp.predict(inputs, num_samples=4, seed=0)["leaf_c"].mean,
            "loaded": loaded.predict(inputs, num_samples=4, seed=0)["leaf_c"].mean}


def _lamp_load_other_graph(ctx):
    """a LaMP fit of root_a -> node_b -> leaf_c loaded into a LatentMAP of root_a -> leaf_c"""
    import networkx as nx

    from pyro_dag import DAGDGP
    from pyro_dag.infer import LatentMAP

    lamp, inputs, path = _lamp_saved(ctx)
    other = DAGDGP(nx.DiGraph([("root_a", "leaf_c")])).double()
    ctx.start()
    return LatentMAP(other).load(path).predict(inputs, num_samples=4)


_add("files_lamp_lengthscale_mismatch", "files", "LaMP", _lamp_load_lengthscale, ("lengthscale",))
_add("files_lamp_other_graph", "files", "LaMP", _lamp_load_other_graph, ("graph", "edges"))
_add("files_lamp_other_init", "files", "LaMP", _lamp_load_init, ("init",), expect="accept",
     wrong=wrong_if(lambda r: None if torch.equal(r["saved"], r["loaded"]) else "the loaded fit predicts otherwise"))


# ============================================================================================ the emulator's kernel choice
def _saved_auto_emulator(ctx):
    em = emulator(*mf_arrays())
    em.fit()
    path = em.save(ctx.path("em.pt"))
    pyro.clear_param_store()
    return em, path


def _rewritten_selection(id, names, what, change, quick=False):
    def run(ctx):
        from pyro_dag.fingerprint import checksum

        em, path = _saved_auto_emulator(ctx)
        state = torch.load(path, weights_only=True)
        del state["checksum"]
        change(state["auto"])
        state["checksum"] = checksum(state)
        torch.save(state, path)
        fresh = emulator(*mf_arrays())
        ctx.start()
        fresh.load(path)
        return fresh.predict(mf_arrays()[2], num_samples=4, seed=0)
    run.__doc__ = what
    _add(id, "files", "MultiFidelityEmulator", run, names, quick=quick, max_work=None)


_rewritten_selection("files_em_selection_unknown_kernel", ("rbf_x", "hifi"), "a saved fit() (kernel chosen by "
                     "cross-validation) rewritten to name the kernel 'rbf_x' for 'hifi'",
                     lambda a: a["chosen"].update(hifi="rbf_x"))
_rewritten_selection("files_em_selection_fidelity_missing", ("chosen", "hifi"), "a saved fit() whose record of the "
                     "chosen kernels lost 'hifi'", lambda a: a["chosen"].pop("hifi"))
_rewritten_selection("files_em_selection_extra_fidelity", ("chosen", "ghost"), "a saved fit() whose record of the "
                     "chosen kernels gained a fidelity 'ghost'", lambda a: a["chosen"].update(ghost="ar1"))
_rewritten_selection("files_em_selection_deterministic_string", ("deterministic",), "a saved fit() whose noise "
                     "decision for 'hifi' is the string 'yes'", lambda a: a["deterministic"].update(hifi="yes"))


def _auto_into_fixed_kernel(ctx):
    """a saved fit() (kernel chosen) loaded into an emulator built with kernel='nargp'"""
    em, path = _saved_auto_emulator(ctx)
    fresh = emulator(*mf_arrays(), kernel="nargp")
    ctx.start()
    fresh.load(path)
    return fresh.predict(mf_arrays()[2], num_samples=4, seed=0)


_add("files_em_auto_into_fixed_kernel", "files", "MultiFidelityEmulator", _auto_into_fixed_kernel, ("kernel",))


def _em_kernel(value):
    def run(ctx):
        ctx.start()
        return emulator(*mf_arrays(), kernel=value)
    run.__doc__ = f"MultiFidelityEmulator(..., kernel={value!r})"
    return run


_add("em_kernel_upper_case", "new inputs", "MultiFidelityEmulator", _em_kernel("NARGP"), ("kernel",))
_add("em_kernel_rbf", "new inputs", "MultiFidelityEmulator", _em_kernel("rbf"), ("kernel",))


def _em_few_refined_runs(n_high):
    def run(ctx):
        Xl, yl, Xh, yh = mf_arrays(n_high=n_high)
        em = emulator(Xl, yl, Xh, yh)
        ctx.start()
        em.fit()
        return {"chosen": em.selection.chosen, "pred": em.predict(np.linspace(0.1, 0.9, 4)[:, None],
                                                                  num_samples=4, seed=0)}
    run.__doc__ = (f"fit() with {n_high} high-fidelity run(s): the kernel chosen by 5-fold cross-validation on fewer "
                   "runs than folds")
    return run


for _n in (1, 2):
    _add(f"em_auto_{_n}_refined_run", "new inputs", "MultiFidelityEmulator", _em_few_refined_runs(_n), ("hifi",),
         expect="either", max_work=None)


def _em_selection_interrupted(ctx):
    from pyro_dag.emulation import selection

    em = emulator(*mf_arrays())
    ctx.notes["check"] = lambda: nonfinite_emulator(em)
    with interrupt_at(selection, "cv_residuals", 2):
        em.fit()


def nonfinite_emulator(em):
    from robustness import nonfinite

    return nonfinite(em.predict(np.linspace(0.1, 0.9, 3)[:, None], num_samples=4), "emulator prediction")


_interruption("int_em_kernel_selection", "MultiFidelityEmulator", "KeyboardInterrupt inside fit()'s cross-validation "
              "of the candidate kernels, then predict", _em_selection_interrupted)


# ============================================================================================ two processes, one saved fit
_WORKER = """
import os, sys
sys.path[:0] = [{root!r}, {here!r}]
import robustness, robustness_cases as rc
from pyro_dag import persist
model, guide, inputs, data = rc.trained()
print("ready", flush=True)
for _ in range({times}):
    persist.save({path!r}, model, guide, inputs, data)
"""


def _spawn(path, times):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    code = _WORKER.format(root=ROOT, here=HERE, times=times, path=path)
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)


def _two_savers(ctx):
    """two processes save fits to one path at once, 5 times each: the file left loads and no temporary file is left"""
    from pyro_dag import persist
    from robustness_cases import chain_data, model_and_guide

    path = ctx.path("fits", "fit.pt")
    os.makedirs(os.path.dirname(path))
    ctx.start()
    procs = [_spawn(path, 5) for _ in range(2)]
    errors = [p.communicate(timeout=100)[1] for p in procs]
    failed = [e.strip().splitlines()[-1] for p, e in zip(procs, errors) if p.returncode != 0]
    if failed:
        raise RuntimeError(f"a saving process failed: {failed[0]}")
    m2, g2 = model_and_guide()
    persist.load(path, m2, g2)
    return {"left": sorted(os.listdir(ctx.path("fits"))), "pred": m2.predict(g2, chain_data()[0], num_samples=4)}


def _load_while_saving(ctx):
    """one process saves a fit 20 times over while this one loads it 10 times: every load sees a whole file"""
    import time

    from pyro_dag import persist
    from robustness_cases import chain_data, model_and_guide

    path = ctx.path("fit.pt")
    model, guide, inputs, data = __import__("robustness_cases").trained()
    persist.save(path, model, guide, inputs, data)
    pyro.clear_param_store()
    ctx.start()
    saver = _spawn(path, 20)
    try:
        assert saver.stdout.readline().strip() == "ready", saver.stderr.read()[-300:]
        loads = 0
        for _ in range(10):
            pyro.clear_param_store()
            m2, g2 = model_and_guide()
            persist.load(path, m2, g2)
            loads += 1
            time.sleep(0.05)
        pred = m2.predict(g2, chain_data()[0], num_samples=4)
    finally:
        saver.communicate(timeout=100)
    return {"loads": loads, "pred": pred, "left": sorted(os.listdir(ctx.tmp))}


def _no_temporaries(r):
    left = [f for f in r["left"] if ".tmp-" in f]
    return f"temporary files left: {left}" if left else None


_add("conc_two_processes_save_one_path", "concurrency", "persist.save", _two_savers, (), expect="accept",
     max_work=None, wrong=wrong_if(_no_temporaries))
_add("conc_load_while_another_saves", "concurrency", "persist.load", _load_while_saving, (), expect="accept",
     max_work=None, wrong=wrong_if(_no_temporaries))
