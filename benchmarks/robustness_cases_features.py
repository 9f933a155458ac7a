"""Cases of the bad-input battery for the features of issues 41 and 43 (issue 41's rule: each new feature brings new
inputs and new files, and the battery grows with it): ``train(noise_step=...)``, ``train(minibatch=...)``,
``DAGDGP(deterministic_amplitude=...)``, the ``exact_fit_nodes`` that :mod:`pyro_dag.persist` keeps,
``persist.load(dtype=..., map_location=...)``, ``DeepRegression(method=...)``, ``LatentMAP(init=...,
lengthscale=...)`` and the kernel choice of ``MultiFidelityEmulator.fit()`` with its saved record. Bad values go to
``new inputs``, contradictory options to ``misuse``, edited or mismatched files to ``files``, two processes on one
file to ``concurrency`` and ``KeyboardInterrupt`` inside the new steps to ``interruption``. Registered into
:data:`robustness_cases.CASES` when that module is imported.
"""
import numpy as np
import pyro
import torch

from robustness import Case, InjectedInterrupt
from robustness_cases import (CASES, _interruption, _lamp_case, _predicts_finite, _saved_fit, _set_up, chain_data,
                              facts_wrong, interrupt_at, interrupt_optimizer_step, interrupted, lamp_parts,
                              latent_chain_data, model_and_guide, trained, wrong_if)


def _add(id, cls, entry, run, names, **kw):
    CASES.append(Case(id=id, cls=cls, entry=entry, run=run, names=names, what=(run.__doc__ or "").strip(), **kw))


def _same_prediction(model, guide, model2, guide2):
    """``None`` when the two fits predict the same means at the chain's inputs with the same seed, else why not."""
    inputs = chain_data()[0]
    pyro.set_rng_seed(1)
    a = model.predict(guide, inputs, num_samples=4)
    pyro.set_rng_seed(1)
    b = model2.predict(guide2, inputs, num_samples=4)
    for w in a:
        if not torch.allclose(a[w].mean.double(), b[w].mean.double(), rtol=1e-4, atol=1e-5):
            return f"node {w}: the loaded fit predicts other means than the saved one"
    return None


# ============================================================================================ train(noise_step=)
def _train_case(id, cls, names, what, quick=False, expect="refuse", guide=None, latent_input=False, **options):
    """``train`` on the latent chain (set up first: its pilot fits are not the call under test) with ``options``."""
    def run(ctx):
        from pyro_dag.infer import train

        inputs, data = latent_chain_data()
        if latent_input:
            import networkx as nx

            from pyro_dag import DAGDGP
            from pyro_dag.infer.autoguide import AutoStructuredGuide

            model = DAGDGP(nx.DiGraph([("lat_z", "leaf_c"), ("root_a", "leaf_c")]), latent_inputs={"lat_z": 1})
            model = model.double()
            g = AutoStructuredGuide(model)
        else:
            model, g = _set_up()
        if guide == "autonormal":
            from pyro.infer.autoguide import AutoNormal

            g = AutoNormal(model)
        ctx.start()
        return train(model, g, inputs, data, **{"num_steps": 2, "progress": False, **options}).losses
    run.__doc__ = what
    _add(id, cls, "train", run, names, quick=quick, expect=expect)


_train_case("noise_step_string", "new inputs", ("noise_step",), "train(noise_step='yes')", quick=True,
            noise_step="yes")
_train_case("noise_step_int", "new inputs", ("noise_step",), "train(noise_step=1)", noise_step=1)
_train_case("noise_step_autonormal", "misuse", ("noise_step",), "train(model, AutoNormal(model), ..., "
            "noise_step=True): no structured guide to take the step with", guide="autonormal", noise_step=True,
            quick=True, recipe="adam")
_train_case("noise_step_distributed", "misuse", ("noise_step",), "train(noise_step=True, distributed=True)",
            noise_step=True, distributed=True)
_train_case("noise_step_latent_inputs", "misuse", ("noise_step",), "train(noise_step=True) on a model with latent "
            "inputs, where no node's noise can be stepped", expect="either", latent_input=True, noise_step=True)
_train_case("noise_step_auto_capitalised", "new inputs", ("noise_step",), "train(noise_step='Auto') (the default is "
            "'auto')", quick=True, noise_step="Auto")
_train_case("noise_step_auto_autonormal", "misuse", ("noise_step",), "train(model, AutoNormal(model), ..., "
            "noise_step='auto'): the default where no step can run, off without a word", guide="autonormal",
            noise_step="auto", quick=True, recipe="adam", expect="accept")
_train_case("noise_step_auto_distributed_one_process", "misuse", ("noise_step", "distributed"),
            "train(noise_step='auto', distributed=True) without a process group (the default is off there; the "
            "missing group is what to name)", noise_step="auto", distributed=True, expect="either")
_lamp_case("noise_step_lamp_recipe", ("noise_step",), "train(recipe='lamp', noise_step=True)", cls="misuse",
           noise_step=True)

# ============================================================================================ train(minibatch=)
_train_case("minibatch_int", "new inputs", ("minibatch",), "train(minibatch=512) (B is model_kwargs' subsample_size)",
            quick=True, minibatch=512)
_train_case("minibatch_true", "new inputs", ("minibatch",), "train(minibatch=True)", minibatch=True)
_train_case("minibatch_none", "new inputs", ("minibatch",), "train(minibatch=None)", minibatch=None)
_train_case("minibatch_upper_case", "new inputs", ("minibatch",), "train(minibatch='AUTO')", minibatch="AUTO")
_train_case("minibatch_false_with_subsample", "misuse", ("minibatch", "subsample_size"), "train(minibatch=False, "
            "model_kwargs={'subsample_size': 4}): full batch and minibatches at once", minibatch=False,
            model_kwargs={"subsample_size": 4})
for _size, _id, _why in ((100, "above_n", "above the 12 cases"), (0, "zero", "zero"), (float("nan"), "nan", "NaN"),
                         (2.5, "fraction", "not an integer")):
    _train_case(f"minibatch_subsample_{_id}", "misuse", ("subsample_size",),
                f"train(model_kwargs={{'subsample_size': {_size!r}}}): {_why}", model_kwargs={"subsample_size": _size})


def _resume_bitwise(id, what, num_steps, every, stop, patch=lambda: _no_patch(), **options):
    """Train ``num_steps`` steps with checkpoints every ``every``, interrupted in step ``stop``, then resumed with
    another seed: the losses must equal an uninterrupted run's bit for bit."""
    def run(ctx):
        from robustness_cases import _ckpt_train

        with patch():
            pyro.set_rng_seed(0)
            ref = _ckpt_train(ctx, ctx.path("ref.pt"), num_steps=num_steps, every=every, **options)[2].losses
            pyro.clear_param_store()
            pyro.set_rng_seed(0)
            try:
                with interrupt_optimizer_step(stop):
                    _ckpt_train(ctx, ctx.path("ckpt.pt"), num_steps=num_steps, every=every, **options)
                return {"interrupted": False, "problems": []}
            except InjectedInterrupt:
                pass
            pyro.clear_param_store()
            pyro.set_rng_seed(123)
            got = _ckpt_train(ctx, ctx.path("ckpt.pt"), num_steps=num_steps, every=every, resume=True,
                              **options)[2].losses
        same = len(ref) == len(got) and all(a == b for a, b in zip(ref, got))
        first = next((k for k, (a, b) in enumerate(zip(ref, got)) if a != b), None)
        return {"interrupted": True, "problems": [] if same else [f"resumed losses differ from step {first}"]}
    run.__doc__ = what
    _add(id, "interruption", "train(checkpoint=, resume=True)", run, (), good=interrupted, wrong=facts_wrong)


class _no_patch:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def _small_minibatch_rule():
    """The minibatch rule at 8 cases (minibatches of 4), so that the 12-case chain takes minibatch steps."""
    import contextlib

    from pyro_dag.infer.training import minibatch

    @contextlib.contextmanager
    def patch():
        old = minibatch.MINIBATCH_ABOVE, minibatch.MINIBATCH_SIZE
        minibatch.MINIBATCH_ABOVE, minibatch.MINIBATCH_SIZE = 8, 4
        try:
            yield
        finally:
            minibatch.MINIBATCH_ABOVE, minibatch.MINIBATCH_SIZE = old
    return patch()


_resume_bitwise("int_resume_bitwise_noise_step", "noise_step=True: interrupted at step 58 of 60 (a noise step after "
                "step 50), checkpoints every 20, resumed: the uninterrupted run's losses bit for bit", 60, 20, 58,
                noise_step=True)
_resume_bitwise("int_resume_bitwise_minibatch", "the minibatch rule's steps (4 of 12 cases): interrupted at step 5 "
                "of 6, checkpoints every 2, resumed: the uninterrupted run's losses bit for bit", 6, 2, 5,
                patch=_small_minibatch_rule)


def _noise_step_wrapped(ctx):
    """train(outer, AutoNormal(outer), ..., noise_step=True) where outer is a Pyro model holding the DAGDGP"""
    from pyro.infer.autoguide import AutoNormal
    from pyro.nn import PyroModule

    from pyro_dag.infer import train

    class Outer(PyroModule):
        def __init__(self, dgp):
            super().__init__()
            self.dgp = dgp

        def forward(self, inputs, data=None):
            return self.dgp(inputs, data)

    inputs, data = latent_chain_data()
    outer = Outer(model_and_guide()[0])      # set up inside the outer model (Pyro: not on its own first)
    ctx.start()
    return train(outer, AutoNormal(outer), inputs, data, num_steps=2, progress=False, noise_step=True,
                 recipe="adam").losses


_add("noise_step_wrapped_model", "misuse", "train", _noise_step_wrapped, ("noise_step",))


def _resume_other(option, saved, resumed):
    def run(ctx):
        from robustness_cases import _ckpt_train

        with _small_minibatch_rule():
            _ckpt_train(ctx, ctx.path("ckpt.pt"), num_steps=4, **{option: saved})
            pyro.clear_param_store()
            model = _set_up()
            ctx.start()
            return _ckpt_train(ctx, ctx.path("ckpt.pt"), num_steps=6, resume=True, model=model,
                               **{option: resumed})[2].losses
    run.__doc__ = f"resume a checkpoint written with {option}={saved!r} in a run with {option}={resumed!r}"
    _add(f"files_resume_other_{option}", "files", "train(checkpoint=, resume=True)", run, (option,))


_resume_other("minibatch", "auto", False)
_resume_other("noise_step", True, False)


def _noise_step_interrupted(ctx):
    from pyro_dag.infer import train
    from pyro_dag.infer.training import NoiseStep

    inputs, data = latent_chain_data()
    model, guide = _set_up()
    ctx.notes["check"] = _predicts_finite(model, guide, inputs)
    ctx.notes["params"] = list(model.named_parameters())
    with interrupt_at(NoiseStep, "__call__", 1):
        train(model, guide, inputs, data, num_steps=60, progress=False, noise_step=True)


_interruption("int_noise_step", "train(noise_step=True)", "KeyboardInterrupt inside the first noise step (step 50), "
              "then predict", _noise_step_interrupted)

# ============================================================================================ deterministic_amplitude
for _value, _id in (("LOO", "upper_case"), (None, "none"), (True, "bool"), (0.5, "number")):
    def _det_amp(ctx, value=_value):
        from pyro_dag import DAGDGP

        from robustness_cases import chain_graph

        ctx.start()
        return DAGDGP(chain_graph(), deterministic_amplitude=value)
    _det_amp.__doc__ = f"DAGDGP(graph, deterministic_amplitude={_value!r})"
    _add(f"det_amp_{_id}", "new inputs", "DAGDGP", _det_amp, ("deterministic_amplitude",), quick=_id == "upper_case")


def _loo_fit_into_ml(ctx):
    """a fit with deterministic_amplitude='loo' (the default) loaded into a model built with 'ml': it predicts as
    the saved fit (the scaled amplitudes are the saved values)"""
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    path = persist.save(ctx.path("fit.pt"), model, guide, inputs, data)
    m2, g2 = model_and_guide(deterministic_amplitude="ml")
    ctx.start()
    persist.load(path, m2, g2)
    return {"problem": _same_prediction(model, guide, m2, g2)}


_add("files_loo_fit_into_ml_model", "files", "persist.load", _loo_fit_into_ml, ("deterministic_amplitude",),
     expect="accept", wrong=lambda r: r["problem"])

# ============================================================================================ persist: exact_fit_nodes
def _rewritten(ctx, change, fresh_checksum=True):
    """A saved fit of the chain (its nodes fitted exactly) with ``change(state)`` applied; with a fresh checksum,
    as a tool that rewrites the file would leave it (the checksum alone cannot tell)."""
    from pyro_dag import persist
    from pyro_dag.fingerprint import checksum

    model, guide, inputs, data = trained()
    assert model.exact_fit_nodes, "the chain's nodes should have been fitted exactly"
    path = persist.save(ctx.path("fit.pt"), model, guide, inputs, data)
    state = torch.load(path, weights_only=True)
    del state["checksum"]
    change(state)
    if fresh_checksum:
        state["checksum"] = checksum(state)
    else:
        state["checksum"] = torch.load(path, weights_only=True)["checksum"]
    torch.save(state, path)
    pyro.clear_param_store()
    ctx.notes["saved"] = (model, guide)
    return path


def _exact_fit_nodes_case(id, names, what, change, fresh_checksum=True, quick=False, expect="refuse"):
    def run(ctx):
        from pyro_dag import persist

        path = _rewritten(ctx, change, fresh_checksum)
        m2, g2 = model_and_guide()
        ctx.start()
        persist.load(path, m2, g2)
        return {"exact_fit_nodes": sorted(m2.exact_fit_nodes), "problem": _same_prediction(*ctx.notes["saved"], m2, g2)}
    run.__doc__ = what
    _add(id, "files", "persist.load", run, names, quick=quick, expect=expect,
         wrong=lambda r: r["problem"] or (None if r["exact_fit_nodes"] else "the loaded model lost exact_fit_nodes"))


_exact_fit_nodes_case("files_exact_fit_nodes_changed", ("fit.pt", "checksum"), "a saved fit whose exact_fit_nodes "
                      "entry was edited (the checksum left as it was)", lambda s: s.update(exact_fit_nodes=[]),
                      fresh_checksum=False)
_exact_fit_nodes_case("files_exact_fit_nodes_unknown_node", ("ghost_z", "exact_fit_nodes"), "a rewritten saved fit "
                      "(fresh checksum) whose exact_fit_nodes names a node not in the graph",
                      lambda s: s.update(exact_fit_nodes=["ghost_z"]), quick=True)
_exact_fit_nodes_case("files_exact_fit_nodes_root", ("root_a",), "a rewritten saved fit whose exact_fit_nodes names "
                      "the root", lambda s: s.update(exact_fit_nodes=["root_a"]))
_exact_fit_nodes_case("files_exact_fit_nodes_string", ("exact_fit_nodes",), "a rewritten saved fit whose "
                      "exact_fit_nodes is the string 'leaf_c' (a set of its letters)",
                      lambda s: s.update(exact_fit_nodes="leaf_c"))
_exact_fit_nodes_case("files_exact_fit_nodes_removed", ("exact_fit_nodes",), "a rewritten saved fit without the "
                      "exact_fit_nodes entry (as before pyro_dag kept it)", lambda s: s.pop("exact_fit_nodes"),
                      expect="either")


# ============================================================================================ persist.load(dtype, map_location)
def _load_case(id, names, what, quick=False, expect="refuse", lamp=False, **options):
    def run(ctx):
        from pyro_dag import persist

        if lamp:
            from pyro_dag.infer import train

            model, LatentMAP, inputs, data = lamp_parts()
            fitted = LatentMAP(model)
            train(model, fitted, inputs, data, num_steps=3, recipe="lamp")
            path = fitted.save(ctx.path("lamp.pt"))
            ctx.start()
            return persist.load(path, LatentMAP(lamp_parts()[0]), **options).predict(inputs, num_samples=4)
        path = _saved_fit(ctx)
        m2, g2 = model_and_guide()
        ctx.start()
        persist.load(path, m2, g2, **options)
        return m2.predict(g2, chain_data()[0], num_samples=4)
    run.__doc__ = what
    _add(id, "new inputs", "persist.load", run, names, quick=quick, expect=expect)


_load_case("persist_load_dtype_string", ("dtype",), "persist.load(..., dtype='float64') (a string)", quick=True,
           dtype="float64")
_load_case("persist_load_dtype_half", ("dtype",), "persist.load(..., dtype=torch.float16)", dtype=torch.float16)
_load_case("persist_load_dtype_int", ("dtype",), "persist.load(..., dtype=torch.int64)", dtype=torch.int64)
_load_case("persist_load_dtype_numpy", ("dtype",), "persist.load(..., dtype=numpy.float64)", dtype=np.float64)
_load_case("persist_load_map_location_gpu", ("map_location",), "persist.load(..., map_location='gpu')",
           map_location="gpu")
_load_case("persist_load_map_location_mps", ("map_location",), "persist.load(..., map_location='mps') where this "
           "torch has no MPS", quick=True, expect="refuse" if not torch.backends.mps.is_available() else "either",
           map_location="mps")
_load_case("persist_load_map_location_cuda", ("map_location", "cuda"), "persist.load(..., map_location='cuda') "
           "(refused where there is no CUDA)", expect="refuse" if not torch.cuda.is_available() else "either",
           map_location="cuda")
_load_case("persist_load_map_location_dict", ("map_location",), "persist.load(..., map_location={'cuda:0': 'cpu'}) "
           "(torch.load's form)", map_location={"cuda:0": "cpu"})
_load_case("persist_load_map_location_meta", ("map_location", "meta"), "persist.load(..., map_location='meta')",
           map_location="meta")
_load_case("persist_load_lamp_dtype", ("dtype",), "persist.load(lamp_path, lamp, dtype=torch.float32)", lamp=True,
           dtype=torch.float32)


def _float32_load(ctx):
    """a float64 fit loaded with dtype=torch.float32: float32 predictions that agree with the saved ones"""
    from pyro_dag import persist

    model, guide, inputs, data = trained()
    path = persist.save(ctx.path("fit.pt"), model, guide, inputs, data)
    pyro.clear_param_store()
    m2, g2 = model_and_guide()
    ctx.start()
    persist.load(path, m2, g2, dtype=torch.float32)
    pyro.set_rng_seed(1)
    got = m2.predict(g2, {"root_a": inputs["root_a"].float()}, num_samples=64)
    pyro.set_rng_seed(1)
    ref = model.predict(guide, inputs, num_samples=64)
    return {"dtype": str(m2.dtype), "got": {w: got[w].mean.double() for w in got}, "ref": {w: ref[w].mean for w in ref},
            "sd": {w: float(ref[w].variance.sqrt().mean()) for w in ref}}


def _float32_wrong(r):
    if r["dtype"] != "torch.float32":
        return f"the model is {r['dtype']}, not float32"
    for w, mean in r["got"].items():
        err = float((mean - r["ref"][w]).abs().max())
        if err > 0.5 * r["sd"][w] + 1e-3:       # the draws differ between dtypes: within half a predictive sd
            return f"node {w}: float32 means differ by {err:.3g} (predictive sd {r['sd'][w]:.3g})"
    return None


_add("persist_load_float32", "new inputs", "persist.load", _float32_load, ("dtype",), expect="accept",
     wrong=wrong_if(_float32_wrong))

import robustness_cases_features_more  # noqa: E402,F401  (DeepRegression, LatentMAP, the emulator, concurrency)
import robustness_cases_candidates  # noqa: E402,F401  (train's candidate starts)
