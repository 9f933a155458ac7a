"""Cases of the bad-input battery for issue 42, in four classes: ``files`` (saved fits and checkpoints that must prove
what they hold: changed bytes, another precision or kernel, old formats, files of another kind), ``concurrency``
(one writer per checkpoint, two runs on one path, a failed write), ``new inputs`` (the inputs of the features of the
previous release: interventional effects of GP networks, the GP score's kernel, ``discover`` with the GP score, the
emulator's exact fit, the exact fit's interruption, zero rows) and ``scale`` (inputs and data at 1e-8 / 1e8 met by
kernels that start at unit scale). Registered into :data:`robustness_cases.CASES` when that module is imported.
"""
import errno
import json
import os
import subprocess
import sys

import networkx as nx
import numpy as np
import pyro
import torch

from robustness import Case, InjectedInterrupt
from robustness_cases import (CASES, _ckpt_train, _saved_fit, _set_up, chain_data, cli, emulator, full_disk,
                              latent_chain_data, mf_arrays, model_and_guide, rmse, trained, wrong_if, write_csv)


def _add(id, cls, entry, run, names, **kw):
    CASES.append(Case(id=id, cls=cls, entry=entry, run=run, names=names, what=(run.__doc__ or "").strip(), **kw))


def _flip8(path, tensor):
    """Write 1e300 over the first 8 bytes of ``tensor``'s data inside the torch file at ``path``."""
    raw = bytearray(open(path, "rb").read())
    at = raw.find(tensor.detach().cpu().reshape(-1)[:2].numpy().tobytes())
    assert at >= 0, "tensor not found in the file"
    raw[at:at + 8] = np.float64(1e300).tobytes()
    with open(path, "wb") as f:
        f.write(bytes(raw))


def _predict(model, guide):
    pyro.set_rng_seed(1)
    return model.predict(guide, chain_data()[0], num_samples=4)


# ================================================================================================== files
def _files_persist_flipped(ctx):
    """change 8 bytes inside a tensor of a persist.save file, then load it"""
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    path = persist.save(ctx.path("fit.pt"), model, guide, inputs, data)
    name, value = max(((k, v) for k, v in guide.state_dict().items() if v.dtype == torch.float64),
                      key=lambda kv: kv[1].numel())
    _flip8(path, value)
    pyro.clear_param_store()
    m2, g2 = model_and_guide()
    ctx.start()
    persist.load(path, m2, g2)
    return _predict(m2, g2)


_add("files_persist_flipped_bytes", "files", "persist.load", _files_persist_flipped, ("fit.pt", "checksum"),
     quick=True)


def _files_ckpt_flipped(ctx):
    """change 8 bytes inside a tensor of a training checkpoint, then resume from it"""
    from pyro_dag.infer.training import load_checkpoint

    path = ctx.path("ckpt.pt")
    _ckpt_train(ctx, path, num_steps=2)
    state = load_checkpoint(path)
    _, value = max(((k, v) for k, v in state["params"].items() if v.dtype == torch.float64),
                   key=lambda kv: kv[1].numel())
    _flip8(path, value)
    pyro.clear_param_store()
    model = _set_up()               # its pilot fits are not the call under test
    ctx.start()
    return _ckpt_train(ctx, path, num_steps=4, resume=True, model=model)[2].losses


_add("files_ckpt_flipped_bytes", "files", "train(checkpoint=, resume=True)", _files_ckpt_flipped,
     ("ckpt.pt", "checksum"))


def _files_precision(ctx):
    """a chordal fit loaded into AutoStructuredGuide(precision='full'): same names and shapes"""
    from pyro_dag import persist
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    path = _saved_fit(ctx)
    m2, _ = model_and_guide()
    g2 = AutoStructuredGuide(m2, precision="full")
    ctx.start()
    persist.load(path, m2, g2)
    return _predict(m2, g2)


_add("files_precision_mismatch", "files", "persist.load", _files_precision, ("precision",))


def _files_kernel(ctx):
    """a fit with RBF kernels loaded into a model with Matern52 kernels (same parameter names and shapes)"""
    from pyro_dag import persist
    from pyro_dag.kernels import Matern52

    path = _saved_fit(ctx)
    m2, g2 = model_and_guide(kernels={"node_b": Matern52(), "leaf_c": Matern52()})
    ctx.start()
    persist.load(path, m2, g2)
    return _predict(m2, g2)


_add("files_kernel_mismatch", "files", "persist.load", _files_kernel, ("Matern52", "kernels."))


def _files_train_over_fit(ctx):
    """train(..., checkpoint=<a file written by persist.save>) without resume"""
    path = _saved_fit(ctx)
    ctx.notes["before"] = open(path, "rb").read()
    ctx.start()
    _ckpt_train(ctx, path, num_steps=2)


def _fit_untouched(ctx):
    path = ctx.path("fit.pt")
    return None if open(path, "rb").read() == ctx.notes.get("before") else "the saved fit was overwritten"


_add("files_train_over_saved_fit", "files", "train(checkpoint=)", _files_train_over_fit, ("fit.pt",),
     after=_fit_untouched)


def _files_save_over_ckpt(ctx):
    """persist.save over a training checkpoint"""
    from pyro_dag import persist

    path = ctx.path("ckpt.pt")
    _ckpt_train(ctx, path, num_steps=2)
    ctx.notes["before"] = open(path, "rb").read()
    pyro.clear_param_store()
    model, guide, inputs, data = trained()
    ctx.start()
    persist.save(path, model, guide, inputs, data)


_add("files_save_over_checkpoint", "files", "persist.save", _files_save_over_ckpt, ("ckpt.pt", "checkpoint"),
     after=lambda ctx: None if open(ctx.path("ckpt.pt"), "rb").read() == ctx.notes.get("before")
     else "the checkpoint was overwritten")


def _files_missing_folder(ctx):
    """persist.save into a folder that does not exist yet: created, and the file loads"""
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    before = _predict(model, guide)["leaf_c"].mean
    ctx.start()
    path = persist.save(ctx.path("new", "sub", "fit.pt"), model, guide, inputs, data)
    pyro.clear_param_store()
    m2, g2 = model_and_guide()
    persist.load(path, m2, g2)
    return {"before": before, "after": _predict(m2, g2)["leaf_c"].mean}


_add("files_save_missing_folder", "files", "persist.save", _files_missing_folder, ("new",), expect="accept",
     wrong=wrong_if(lambda r: None if torch.equal(r["before"], r["after"]) else "the loaded fit predicts otherwise"))


def _old_format(ctx, **change):
    path = _saved_fit(ctx)
    state = torch.load(path, weights_only=True)
    for key in ("checksum", "precision", "modules", "fingerprint"):
        state.pop(key, None)
    state.update(version=1, **change)
    torch.save(state, path)
    return path


def _files_old_format(ctx):
    """a saved fit of format 1 (before checksums): loads, saying what it cannot verify"""
    from pyro_dag import persist

    path = _old_format(ctx)
    m2, g2 = model_and_guide()
    ctx.start()
    persist.load(path, m2, g2)
    return _predict(m2, g2)


_add("files_old_format_loads", "files", "persist.load", _files_old_format, ("format 1",), expect="accept")


def _files_bad_dtype(ctx):
    """a format-1 saved fit whose dtype entry was edited to 'int7'"""
    from pyro_dag import persist

    path = _old_format(ctx, dtype="int7")
    m2, g2 = model_and_guide()
    ctx.start()
    persist.load(path, m2, g2)
    return _predict(m2, g2)


_add("files_tampered_dtype", "files", "persist.load", _files_bad_dtype, ("int7", "dtype"))


def _files_emulator_runs(ctx):
    """an emulator built from other runs with the same bounds and summary statistics loads a saved one"""
    Xl, yl, Xh, yh = mf_arrays()
    em = emulator(Xl, yl, Xh, yh, num_inducing=5)
    em.fit(num_steps=3, pretrain_steps=2)
    path = em.save(ctx.path("em.pt"))
    pyro.clear_param_store()
    yh2 = yh.copy()
    yh2[[0, 1]] = yh2[[1, 0]]
    other = emulator(Xl, yl, Xh, yh2, num_inducing=5)
    ctx.start()
    other.load(path)
    return other.predict(Xh, num_samples=4, seed=0)


_add("files_emulator_other_runs", "files", "MultiFidelityEmulator", _files_emulator_runs, ("em.pt", "other runs"))


def _files_resume_past(ctx):
    """resume a checkpoint of step 4 with num_steps=2"""
    path = ctx.path("ckpt.pt")
    _ckpt_train(ctx, path, num_steps=4)
    pyro.clear_param_store()
    model = _set_up()
    ctx.start()
    return _ckpt_train(ctx, path, num_steps=2, resume=True, model=model)[2].losses


_add("files_resume_past_num_steps", "files", "train(checkpoint=, resume=True)", _files_resume_past, ("num_steps",))


def _files_cli_ckpt_mismatch(ctx):
    """fit --csv --checkpoint DIR, then the same command with another --lr: one line, no traceback"""
    from robustness_cases import chain_frame, write_graph

    csv, graph = write_csv(ctx, chain_frame()), write_graph(ctx)
    base = ["fit", "--csv", csv, "--graph", graph, "--steps", "4", "--pretrain-steps", "1", "--recipe", "paper",
            "--checkpoint", ctx.path("ckpt"), "--checkpoint-every", "2"]
    first = cli(ctx, *base)
    assert first.code == 0, first.stderr[-300:]
    ctx.start()
    return cli(ctx, *base, "--lr", "0.02")


_add("files_cli_checkpoint_mismatch", "files", "pyro-dag fit --csv", _files_cli_ckpt_mismatch, ("lr", "checkpoint"),
     max_work=None)


# ================================================================================================== concurrency
def _conc_second_writer(ctx):
    """a second process trains into a checkpoint that a first one is writing (holding its lock)"""
    path = ctx.path("ckpt.pt")
    lock = os.path.join(ctx.tmp, ".ckpt.pt.lock")
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, json, os, sys, time\n"
        f"fd = os.open({lock!r}, os.O_RDWR | os.O_CREAT)\n"
        "fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "os.write(fd, json.dumps({'pid': os.getpid(), 'host': 'here', 'since': 'now'}).encode())\n"
        "print('locked', flush=True)\n"
        "time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        ctx.start()
        return _ckpt_train(ctx, path, num_steps=2)[2].losses
    finally:
        holder.kill()
        holder.wait()


_add("conc_second_writer", "concurrency", "train(checkpoint=)", _conc_second_writer, ("in use", "ckpt.pt"),
     quick=True)


def _conc_other_data(ctx):
    """two runs on different data write one checkpoint path; the first resumes"""
    from pyro_dag.infer import train

    path = ctx.path("ckpt.pt")
    _ckpt_train(ctx, path, num_steps=2)
    pyro.clear_param_store()
    inputs, data = latent_chain_data()
    m, g = model_and_guide()
    train(m, g, inputs, {k: v * 2 + 1 for k, v in data.items()}, num_steps=2, progress=False, checkpoint=path,
          checkpoint_every=1)
    pyro.clear_param_store()
    model = _set_up()
    ctx.start()
    return _ckpt_train(ctx, path, num_steps=4, resume=True, model=model)[2].losses


_add("conc_other_data_resume", "concurrency", "train(checkpoint=, resume=True)", _conc_other_data,
     ("data", "ckpt.pt"))


def _deleted_open(ctx):
    left = []
    for fd in os.listdir("/proc/self/fd") if os.path.isdir("/proc/self/fd") else []:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(ctx.tmp) and target.endswith("(deleted)"):
            left.append(os.path.basename(target))
    return f"deleted files still open: {left}" if left else None


def _conc_failed_write(ctx):
    """a checkpoint write fails (a full disk): no temporary file left open or on disk"""
    os.makedirs(ctx.path("run"))
    ctx.start()
    with full_disk(ctx, ctx.path("run"), budget=0):
        _ckpt_train(ctx, ctx.path("run", "ckpt.pt"), num_steps=2, every=1)


_add("conc_failed_write_closes_temp", "concurrency", "train(checkpoint=)", _conc_failed_write, ("ckpt.pt",),
     max_work=None, after=lambda ctx: _deleted_open(ctx) or (
         None if not [f for f in os.listdir(ctx.path("run")) if ".tmp-" in f] else "temporary files left"))


# ================================================================================================== new inputs
_GP_POSTERIOR = {}


def _gp_posterior():
    from pyro_dag.structure import exact_posterior

    if "post" not in _GP_POSTERIOR:
        rng = np.random.default_rng(0)
        a = rng.uniform(-2, 2, 40)
        b = np.sin(2 * a) + 0.1 * rng.normal(size=40)
        c = b ** 2 + 0.1 * rng.normal(size=40)
        _GP_POSTERIOR["post"] = exact_posterior(np.c_[a, b, c], "gp", node_names=["col_a", "col_b", "col_c"])
    return _GP_POSTERIOR["post"]


def _effect(id, names, what, quick=False, expect="refuse", **kw):
    def run(ctx):
        from pyro_dag.structure.gp_effects import gp_interventional_effect

        post = _gp_posterior()
        call = dict(target="col_c", intervene="col_a", values=[0.5], num_dags=4, draws_per_dag=4)
        call.update(kw)
        ctx.start()
        return gp_interventional_effect(post, **call)
    run.__doc__ = what
    _add(id, "new inputs", "structure.gp_interventional_effect", run, names, quick=quick, expect=expect)


_effect("intv_value_inf", ("values", "inf"), "gp_interventional_effect(post, 2, 0, [inf])", quick=True,
        values=[float("inf")])
_effect("intv_value_nan", ("values", "nan"), "a NaN intervention value", values=[float("nan")])
_effect("intv_values_empty", ("values",), "no intervention values", values=[])
_effect("intv_value_string", ("values",), "a string intervention value", values=["abc"])
_effect("intv_index_bool", ("intervene",), "True as a node index", intervene=True)
_effect("intv_index_float", ("intervene",), "1.7 as a node index", intervene=1.7)
_effect("intv_num_dags_zero", ("num_dags",), "num_dags=0", num_dags=0)
_effect("intv_draws_per_dag_zero", ("draws_per_dag",), "draws_per_dag=0", draws_per_dag=0)
_effect("intv_value_far", ("col_a", "rescale"), "an intervention value of 1e6 (standardised data)", expect="either",
        values=[1e6])


def _gp_kernel_rbf(ctx):
    """exact_posterior(X, 'gp', gp_kernel='RBF') (upper case)"""
    from pyro_dag.structure import exact_posterior

    X = np.asarray(_gp_posterior().data)
    ctx.start()
    return exact_posterior(X, "gp", gp_kernel="RBF").edge_probs()


_add("gp_kernel_upper_case", "new inputs", "structure.exact_posterior", _gp_kernel_rbf, ("gp_kernel", "RBF"))


def _discover(id, what, extra, names, columns=3):
    def run(ctx):
        rng = np.random.default_rng(0)
        frame = {f"col_{k}": rng.normal(size=30) for k in range(columns)}
        import pandas as pd

        csv = write_csv(ctx, pd.DataFrame(frame))
        ctx.start()
        return cli(ctx, "discover", "--csv", csv, *extra)
    run.__doc__ = what
    _add(id, "new inputs", "pyro-dag discover", run, names, max_work=0)


_discover("discover_gp_steps", "discover --likelihood gp --steps 5 (the GP score has no steps)",
          ["--likelihood", "gp", "--steps", "5"], ("--steps",))
_discover("discover_gp_particles", "discover --likelihood gp --particles 4", ["--likelihood", "gp", "--particles", "4"],
          ("--particles",))
_discover("discover_exact_gp_17_columns", "discover --exact --likelihood gp on 17 columns",
          ["--exact", "--likelihood", "gp"], ("17", "16"), columns=17)


def _em_exact(id, what, names, **kw):
    def run(ctx):
        em = emulator(*mf_arrays(), num_inducing=5)
        ctx.start()
        em.fit(method="exact", **kw)
        return em.predict(mf_arrays()[2], num_samples=4, seed=0)
    run.__doc__ = what
    _add(id, "new inputs", "MultiFidelityEmulator", run, names)


_em_exact("em_exact_num_steps_negative", "fit(method='exact', num_steps=-5)", ("num_steps",), num_steps=-5)
_em_exact("em_exact_lr_nan", "fit(method='exact', lr=nan)", ("lr",), lr=float("nan"))


def _exact_fit_interrupted(ctx):
    """KeyboardInterrupt inside train's exact L-BFGS (collapse) phase, then predict"""
    from pyro_dag.infer import train
    from pyro_dag.infer.training import collapsed

    inputs, data = chain_data()
    model, guide = model_and_guide()
    # the exact fits run one node at a time by L-BFGS, or several together by batched BFGS (fit_exact_nodes, which
    # the chain's nodes take): the interrupt strikes in whichever runs, so that the case measures an interruption
    real, real_batch, calls = collapsed.lbfgs, collapsed.fit_exact_nodes, []

    def lbfgs(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise InjectedInterrupt("injected in L-BFGS")
        return real(*a, **k)

    def fit_exact_nodes(*a, **k):
        calls.append(1)
        raise InjectedInterrupt("injected in the batched exact fits")

    collapsed.lbfgs, collapsed.fit_exact_nodes = lbfgs, fit_exact_nodes
    try:
        train(model, guide, inputs, data, num_steps=2, progress=False, recipe="recommended")
    except InjectedInterrupt:
        pass
    else:
        raise AssertionError("the interrupt was not injected: the exact fits ran neither lbfgs nor fit_exact_nodes")
    finally:
        collapsed.lbfgs, collapsed.fit_exact_nodes = real, real_batch
    ctx.start()
    return model.predict(guide, inputs, num_samples=4)


_add("train_exact_fit_interrupted_predict", "new inputs", "predict", _exact_fit_interrupted, ("interrupted",))


def _zero_rows_no_data(ctx):
    """zero rows and no data"""
    from pyro_dag.infer import train

    model, guide = model_and_guide()
    ctx.start()
    train(model, guide, {"root_a": torch.zeros(0, 1, dtype=torch.float64)}, None, num_steps=2, progress=False)


_add("dgp_zero_rows_no_data", "new inputs", "DAGDGP+train", _zero_rows_no_data, ("root_a", "zero rows"))


def _cli_save(ctx):
    """fit --csv --save FILE: the file loads with persist.load and predicts"""
    from robustness_cases import chain_frame, write_graph

    from pyro_dag import persist

    csv, graph = write_csv(ctx, chain_frame()), write_graph(ctx)
    ctx.start()
    res = cli(ctx, "fit", "--csv", csv, "--graph", graph, "--steps", "3", "--pretrain-steps", "1", "--save",
              ctx.path("fit.pt"))
    assert res.code == 0, res.stderr[-300:]
    pyro.clear_param_store()
    m, g = model_and_guide()
    persist.load(ctx.path("fit.pt"), m, g)
    return _predict(m, g)


_add("cli_fit_save_loads", "new inputs", "pyro-dag fit --csv", _cli_save, ("fit.pt",), expect="accept",
     max_work=None)


# ================================================================================================== scale
def _scale(id, where, factor, quick=False):
    def run(ctx):
        from pyro_dag import kernels

        inputs, data = chain_data(n=30)

        def fit(i, d):
            from pyro_dag.infer import train

            pyro.clear_param_store()
            pyro.set_rng_seed(0)
            m, g = model_and_guide(kernels={"node_b": kernels.RBF(), "leaf_c": kernels.RBF()})
            train(m, g, i, d, num_steps=60, progress=False)
            return m.predict(g, i, num_samples=20)

        ref = fit(inputs, data)
        si, sd = (({"root_a": inputs["root_a"] * factor}, data) if where == "inputs"
                  else (inputs, {k: v * factor for k, v in data.items()}))
        ctx.start()
        got = fit(si, sd)
        back = 1.0 if where == "inputs" else factor
        return {"errors": {w: (rmse(ref[w].mean, data[w]), rmse(got[w].mean / back, data[w]), float(data[w].std()))
                           for w in data}}

    def test(res):
        for w, (e_ref, e_got, sd) in res["errors"].items():
            if e_got > 1.5 * e_ref + 0.1 * sd:
                return f"node {w}: RMSE {e_got:.3g} against {e_ref:.3g} at unit scale: trained to noise"
        return None

    run.__doc__ = f"the {where} at {factor:g} with RBF kernels passed in (unit starting length-scales), 60 steps"
    _add(id, "scale", "DAGDGP+train", run, ("rescale",), expect="either", wrong=wrong_if(test), quick=quick,
         max_work=None)


_scale("scale_user_kernels_inputs_1e-8", "inputs", 1e-8, quick=True)
_scale("scale_user_kernels_inputs_1e8", "inputs", 1e8)
_scale("scale_user_kernels_outputs_1e-8", "outputs", 1e-8)
_scale("scale_user_kernels_outputs_1e8", "outputs", 1e8)


def _noise_names_scale(ctx):
    """the noise warnings of train at outputs 1e8 (user kernels): do they name the scale, not only the run?"""
    import warnings

    from pyro_dag import kernels
    from pyro_dag.dgp.scale import ScaleWarning
    from pyro_dag.infer import train

    inputs, data = chain_data(n=30)
    m, g = model_and_guide(kernels={"node_b": kernels.RBF(), "leaf_c": kernels.RBF()})
    ctx.start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ScaleWarning)   # the set-up's own warning aside: the noise warnings alone
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            train(m, g, inputs, {k: v * 1e8 for k, v in data.items()}, num_steps=60, progress=False)
    noise = [str(w.message) for w in caught if "Noise" in w.category.__name__]
    return {"noise_warnings": noise}


_add("scale_noise_warning_names_scale", "scale", "DAGDGP+train", _noise_names_scale, ("standard deviation",),
     expect="accept", max_work=None,
     good=lambda r: True if not r["noise_warnings"] or all("rescale" in m for m in r["noise_warnings"])
     else "a noise warning blames the run, not the data scale")
