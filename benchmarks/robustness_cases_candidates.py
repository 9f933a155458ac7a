"""Cases of the bad-input battery for ``train``'s candidate starts (issue 41: ``candidate_starts`` /
``candidate_steps``, :mod:`pyro_dag.infer.training.candidates`): bad values (``new inputs``), options the candidates
cannot run with and options that would be silently ignored (``misuse``), ``KeyboardInterrupt`` inside a candidate and
inside the continuation, set beside an interrupted run without candidates (``interruption``), a callback that stops
a candidate, a non-finite loss inside one candidate and inside every one (``fault``), two processes training with
candidates in one directory (``concurrency``) and a fit trained with candidates saved and loaded (``files``).

Every case trains the latent chain of the battery (``root_a -> node_b -> leaf_c``, ``node_b`` hidden, 12 rows) for
``num_steps=8`` with candidates of ``candidate_steps=3`` unless it says otherwise. Registered into
:data:`robustness_cases.CASES` when that module is imported.
"""
import contextlib
import os
import subprocess
import sys

import pyro
import torch

from robustness import Case, InjectedInterrupt
from robustness_cases import (CASES, _interruption, _predicts_finite, _set_up, chain_data, interrupt_optimizer_step,
                              latent_chain_data, model_and_guide, wrong_if)

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STEPS, R = 8, 3


def _add(id, cls, entry, run, names, **kw):
    CASES.append(Case(id=id, cls=cls, entry=entry, run=run, names=names, what=(run.__doc__ or "").strip(), **kw))


def _summary(model, guide, res):
    """What a case returns from a finished run: its losses, the candidates' record (without their losses, which
    mark a candidate that was not weighed with NaN by design) and a prediction at the training inputs."""
    c = res.candidates
    return {"losses": res.losses, "stopped": res.stopped,
            "candidates": None if c is None else {k: v for k, v in c.items() if k != "losses"},
            "settings": {k: res.settings.get(k) for k in ("candidate_starts", "candidate_steps")},
            "pred": model.predict(guide, chain_data()[0], num_samples=4)}


def _train_case(id, cls, names, what, quick=False, expect="refuse", good=None, wrong=None, model=None, **options):
    """``train`` on the latent chain (set up first: its pilot fits are not the call under test) with ``options``."""
    def run(ctx):
        from pyro_dag.infer import train

        inputs, data = latent_chain_data()
        m, g = _set_up() if model is None else model()
        ctx.start()
        res = train(m, g, inputs, data, **{"num_steps": STEPS, "progress": False, **options})
        return _summary(m, g, res)
    run.__doc__ = what
    _add(id, cls, "train", run, names, quick=quick, expect=expect, good=good, wrong=wrong,
         max_work=0 if expect == "refuse" else None)


# ============================================================================================ bad values
for _value, _id in ((0, "zero"), (-1, "negative"), (1.5, "fraction"), ("yes", "string"), (True, "bool"),
                    (float("nan"), "nan"), ("AUTO", "upper_case"), (None, "none")):
    _train_case(f"cand_starts_{_id}", "new inputs", ("candidate_starts",), f"train(candidate_starts={_value!r})",
                quick=_id == "zero", candidate_starts=_value, candidate_steps=R)
_train_case("cand_starts_huge", "new inputs", ("candidate_starts",), "train(candidate_starts=10**9, "
            "candidate_steps=3): a billion candidates", candidate_starts=10 ** 9, candidate_steps=R)
for _value, _id in ((0, "zero"), (-5, "negative"), ("100", "string"), (2.5, "fraction"), (float("nan"), "nan"),
                    (True, "bool")):
    _train_case(f"cand_steps_{_id}", "new inputs", ("candidate_steps",), f"train(candidate_starts=2, "
                f"candidate_steps={_value!r})", candidate_starts=2, candidate_steps=_value)
_train_case("cand_steps_equal_num_steps", "new inputs", ("candidate_steps", "num_steps"), "train(candidate_starts=2, "
            "candidate_steps=8, num_steps=8): nothing left to continue", candidate_starts=2, candidate_steps=STEPS)
_train_case("cand_steps_above_num_steps", "new inputs", ("candidate_steps", "num_steps"), "train(candidate_starts=2, "
            "candidate_steps=20, num_steps=8)", quick=True, candidate_starts=2, candidate_steps=20)


def _kept_continued(r):
    """``good``: two candidates taken and the kept one continued to ``num_steps``."""
    c = r["candidates"]
    if c is None:
        return "no candidates were taken"
    return len(r["losses"]) == STEPS or f"{len(r['losses'])} losses for num_steps={STEPS}"


_train_case("cand_steps_half_num_steps", "new inputs", ("candidate_steps",), "train(candidate_starts=2, "
            "candidate_steps=4, num_steps=8): half the run (the most 'auto' allows)", expect="accept",
            good=_kept_continued, candidate_starts=2, candidate_steps=4)
_train_case("cand_steps_above_half", "new inputs", ("candidate_steps",), "train(candidate_starts=2, "
            "candidate_steps=6, num_steps=8): each candidate longer than the continuation", expect="either",
            good=_kept_continued, candidate_starts=2, candidate_steps=6)


def _ran_or_said(r):
    """``good`` of an option that may not apply: a clear warning is required (rule 3b); a silent run is poor."""
    return "accepted without a word: the candidate option had no effect"


_train_case("cand_steps_ignored_by_auto", "misuse", ("candidate_steps",), "train(candidate_steps=6, num_steps=8): "
            "'auto' takes candidates only when num_steps >= 2 * candidate_steps, so the option does nothing",
            expect="either", good=_ran_or_said, candidate_steps=6)
_train_case("cand_steps_with_one_start", "misuse", ("candidate_steps",), "train(candidate_starts=1, "
            "candidate_steps=3): no candidates, so candidate_steps does nothing", expect="either",
            good=_ran_or_said, candidate_starts=1, candidate_steps=R)


# ============================================================================================ combinations
def _observed_chain():
    m, g = model_and_guide()
    m.setup(*chain_data())
    return m, g


def _observed_case(id, what, **options):
    def run(ctx):
        from pyro_dag.infer import train

        inputs, data = chain_data()
        m, g = _observed_chain()
        ctx.start()
        return _summary(m, g, train(m, g, inputs, data, num_steps=STEPS, progress=False, candidate_starts=2,
                                    candidate_steps=R, **options))
    run.__doc__ = what
    _add(id, "misuse", "train", run, ("candidate_starts",), expect="either", max_work=None,
         good=lambda r: r["candidates"] is not None or "candidate_starts=2 asked for, none taken, without a word")


_observed_case("cand_no_hidden_nodes_collapsed", "train(candidate_starts=2) on the fully observed chain: every "
               "node is fitted exactly (collapse), no steps are left for the candidates")
_observed_case("cand_no_hidden_nodes_steps", "train(candidate_starts=2, collapse=False) on the fully observed chain: "
               "the candidates run on the nodes' steps", collapse=False)


def _checkpoint_case(id, what, **options):
    def run(ctx):
        from pyro_dag.infer import train

        inputs, data = latent_chain_data()
        m, g = _set_up()
        ctx.start()
        return _summary(m, g, train(m, g, inputs, data, num_steps=STEPS, progress=False, candidate_starts=2,
                                    candidate_steps=R, checkpoint=ctx.path("ckpt.pt"), **options))
    run.__doc__ = what
    _add(id, "misuse", "train(checkpoint=)", run, ("candidate_starts", "checkpoint"))


_checkpoint_case("cand_with_checkpoint", "train(candidate_starts=2, checkpoint=...)")
_checkpoint_case("cand_with_resume", "train(candidate_starts=2, checkpoint=..., resume=True) (no file yet)",
                 resume=True)


def _resume_other_count(ctx):
    """resume a checkpoint written with candidate_starts=1 in a run with candidate_starts=2"""
    from robustness_cases import _ckpt_train

    _ckpt_train(ctx, ctx.path("ckpt.pt"), num_steps=4, candidate_starts=1)
    pyro.clear_param_store()
    model = _set_up()
    ctx.start()
    m, g, res = _ckpt_train(ctx, ctx.path("ckpt.pt"), num_steps=STEPS, resume=True, model=model, candidate_starts=2,
                            candidate_steps=R)
    return _summary(m, g, res)


_add("cand_resume_other_count", "misuse", "train(checkpoint=, resume=True)", _resume_other_count,
     ("candidate_starts",))

_train_case("cand_with_validation", "misuse", ("candidate_starts", "validation"), "train(candidate_starts=2, "
            "validation=(inputs, data))", candidate_starts=2, candidate_steps=R, validation=latent_chain_data())
_train_case("cand_with_warm_start", "misuse", ("candidate_starts", "warm start", "warm_start"),
            "train(candidate_starts=2, warm_start=2)", candidate_starts=2, candidate_steps=R, warm_start=2)
_train_case("cand_with_pretraining", "misuse", ("candidate_starts", "pretrain"), "train(candidate_starts=2, "
            "pretrain_steps=2)", candidate_starts=2, candidate_steps=R, pretrain_steps=2)


def _distributed(ctx):
    """train(candidate_starts=2, distributed=True) in a process group of one (gloo): each process would pick its own
    candidate"""
    import torch.distributed as dist

    from pyro_dag.infer import train

    inputs, data = latent_chain_data()
    m, g = _set_up()
    dist.init_process_group("gloo", init_method=f"file://{ctx.path('group')}", rank=0, world_size=1)
    try:
        ctx.start()
        return _summary(m, g, train(m, g, inputs, data, num_steps=STEPS, progress=False, candidate_starts=2,
                                    candidate_steps=R, distributed=True))
    finally:
        dist.destroy_process_group()


_add("cand_with_distributed", "misuse", "train(distributed=True)", _distributed, ("candidate_starts",))


def _autonormal():
    from pyro.infer.autoguide import AutoNormal

    m, _ = _set_up()
    return m, AutoNormal(m)


_train_case("cand_with_autonormal", "misuse", ("candidate_starts", "AutoStructuredGuide"), "train(model, "
            "AutoNormal(model), candidate_starts=2)", candidate_starts=2, candidate_steps=R, model=_autonormal)
def _fixed_model():
    """The latent chain with every kernel hyperparameter and inducing input fixed (the paper's protocol, the
    Quickstart's): ``fixed_kernels='auto'`` then runs inside ``dgp.fixed_kernels()``."""
    from pyro_dag.utils import freeze

    m, g = _set_up()
    freeze(m.kernels)
    freeze(m.inducing)
    return m, g


_train_case("cand_with_fixed_kernels", "misuse", ("candidate_starts",), "train(candidate_starts=2) with every kernel "
            "and inducing input fixed: only q is learned ('auto' takes none), and the user asked for two",
            expect="either", good=_kept_continued, candidate_starts=2, candidate_steps=R, model=_fixed_model)
_train_case("cand_adam_recipe", "misuse", ("candidate_starts",), "train(recipe='adam', candidate_starts=2): the "
            "paper's recipe with candidates asked for", expect="accept", good=_kept_continued, recipe="adam",
            candidate_starts=2, candidate_steps=R)


def _lamp_candidates(ctx):
    """train(recipe='lamp', candidate_starts=2)"""
    from robustness_cases import lamp_parts

    from pyro_dag.infer import train

    model, LatentMAP, inputs, data = lamp_parts()
    ctx.start()
    return train(model, LatentMAP(model), inputs, data, num_steps=3, recipe="lamp", candidate_starts=2)


_add("cand_lamp_recipe", "misuse", "train(recipe='lamp')", _lamp_candidates, ("candidate_starts",))


# ============================================================================================ interruptions
def _interrupted_at(call, **options):
    """Train with candidates (K=2, R=3, 8 steps; the hidden-node start off, so the candidates are K=2 plain ones)
    with a KeyboardInterrupt in the ``call``-th Adam step; then the model must predict finite values."""
    def body(ctx):
        from pyro_dag.infer import train

        inputs, data = latent_chain_data()
        model, guide = _set_up()
        ctx.notes["params"] = list(model.named_parameters())
        ctx.notes["check"] = _predicts_finite(model, guide, inputs)
        kw = {"num_steps": STEPS, "progress": False, "candidate_starts": 2, "candidate_steps": R,
              "start_hidden": False, **options}
        with interrupt_optimizer_step(call):
            train(model, guide, inputs, data, **kw)
    return body


def _interruption_told(id, what, call, **options):
    """An interruption case whose ``KeyboardInterrupt`` must also say (a note) which candidate's state the model
    holds: without it the case is poor."""
    body = _interrupted_at(call, **options)

    def told_body(ctx):
        try:
            return body(ctx)
        except InjectedInterrupt as e:
            ctx.notes["told"] = "candidate" in " ".join(getattr(e, "__notes__", None) or [])
            raise
    _interruption(id, "train", what, told_body)
    case = CASES[-1]
    inner = case.run

    def run(ctx):
        facts = inner(ctx)
        if facts.get("interrupted") and not ctx.notes.get("told"):
            facts.setdefault("poor", "the interrupt does not say which candidate's state the model holds")
        return facts
    run.__doc__ = inner.__doc__
    case.run = run


_interruption("int_cand_plain_reference", "train", "reference: KeyboardInterrupt in the 5th Adam step of a run "
              "without candidates (candidate_starts=1), then predict",
              _interrupted_at(5, candidate_starts=1, candidate_steps=None))
_interruption_told("int_cand_in_second_candidate", "KeyboardInterrupt in the 2nd step of candidate 1 (Adam step 5; "
                   "candidate 0 finished), then predict; the interrupt must say the model holds candidate 1's "
                   "unfinished state", 5)
_interruption_told("int_cand_in_first_candidate", "KeyboardInterrupt in the 2nd step of candidate 0, then predict",
                   2)
_interruption("int_cand_in_continuation", "train", "KeyboardInterrupt in the continuation after the candidates "
              "(Adam step 8: step 2 after the kept candidate's 3), then predict", _interrupted_at(8))


def _callback_stop(ctx):
    """a callback that stops the run in the 2nd step of candidate 1: the run stops there and says so (result.stopped,
    result.candidates['kept'])"""
    from pyro_dag.infer import train

    inputs, data = latent_chain_data()
    model, guide = _set_up()
    calls = {"n": 0}

    def stop(s, loss):
        calls["n"] += 1
        return calls["n"] == R + 2

    ctx.start()
    res = train(model, guide, inputs, data, num_steps=STEPS, progress=False, candidate_starts=2, candidate_steps=R,
                start_hidden=False, callbacks=[stop])
    return _summary(model, guide, res)


def _stopped_said(r):
    c = r["candidates"]
    if r["stopped"] != "callback":
        return f"result.stopped is {r['stopped']!r}, not 'callback'"
    if c is None or c["kept"] != 1:
        return "result.candidates does not say that the stopped candidate 1 is the fit"
    return len(r["losses"]) == 2 or f"{len(r['losses'])} losses, not the stopped candidate's 2"


_add("cand_callback_stops_candidate", "interruption", "train(callbacks=)", _callback_stop, (), expect="accept",
     max_work=None, good=_stopped_said)


# ============================================================================================ non-finite losses
@contextlib.contextmanager
def _poison_steps(calls):
    """After the Adam steps numbered in ``calls`` (1-based, counting the calls that raise), set the guide's first
    parameter to NaN: the next step's loss or gradient is then non-finite (as a candidate that diverged). With
    ``R = 3``: calls 2, 5 and 8 are the 2nd steps of candidates 0, 1 and 2."""
    from pyro_dag.infer.training import phases

    real = phases.AdamPhase.step
    count = {"n": 0}

    def step(self, frozen):
        count["n"] += 1   # every call, those that raise included
        loss = real(self, frozen)
        if count["n"] in calls:
            with torch.no_grad():
                next(self.run.guide.parameters()).fill_(float("nan"))
        return loss

    phases.AdamPhase.step = step
    try:
        yield count
    finally:
        phases.AdamPhase.step = real


def _nonfinite_case(id, what, calls, expect, good=None, names=("candidate",)):
    def run(ctx):
        from pyro_dag.infer import train

        inputs, data = latent_chain_data()
        model, guide = _set_up()
        ctx.notes["model"] = (model, guide)
        ctx.start()
        with _poison_steps(calls):
            res = train(model, guide, inputs, data, num_steps=STEPS, progress=False, candidate_starts=3,
                        candidate_steps=R, start_hidden=False)
        return _summary(model, guide, res)
    run.__doc__ = what

    def after(ctx):
        """Whether or not train raised, the model must be left finite (it predicts finite values)."""
        if "model" not in ctx.notes:
            return None
        store = pyro.get_param_store()
        bad = [n for n in store.keys() if not bool(torch.isfinite(store.get_param(n).detach()).all())]
        return f"parameters left non-finite: {bad[:2]}" if bad else None
    _add(id, "fault", "train", run, names, expect=expect, good=good, after=after, max_work=None)


_nonfinite_case("cand_nonfinite_in_one_candidate", "a NaN loss in candidate 1 of 3 (its parameters diverge at its "
                "2nd step): the other two are weighed and one continued, and the user is told", {R + 2},
                expect="accept")
_nonfinite_case("cand_nonfinite_in_every_candidate", "a NaN loss in each of the 3 candidates: a clear error, and "
                "the model left at a finite state", {2, R + 2, 2 * R + 2}, expect="refuse",
                names=("candidate", "loss is nan", "nan"))


# ============================================================================================ two processes
_WORKER = """
import os, sys, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{root!r}, {here!r}]
import pyro, robustness, robustness_cases as rc
from pyro_dag import persist
from pyro_dag.infer import train
pyro.set_rng_seed({seed})
inputs, data = rc.latent_chain_data()
model, guide = rc.model_and_guide()
res = train(model, guide, inputs, data, num_steps=40, candidate_starts=2, candidate_steps=15, progress=False)
persist.save({path!r}, model, guide, inputs, data)
print("kept", res.candidates["kept"], res.losses[-1], flush=True)
"""


def _two_trainers(ctx):
    """two processes train the latent chain with candidate starts at once in one directory (40 steps, K=2, R=15)
    and each saves its fit there: both finish, and each saved fit loads and predicts"""
    from pyro_dag import persist

    env = dict(os.environ, OMP_NUM_THREADS="1")
    ctx.start()
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER.format(root=ROOT, here=HERE, seed=k,
                                                                     path=ctx.path(f"fit{k}.pt"))],
                              cwd=ctx.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for k in range(2)]
    outs = [p.communicate(timeout=110) for p in procs]
    failed = [e.strip().splitlines()[-1] for p, (_, e) in zip(procs, outs) if p.returncode != 0]
    if failed:
        raise RuntimeError(f"a training process failed: {failed[0]}")
    preds = {}
    for k in range(2):
        pyro.clear_param_store()
        m, g = model_and_guide()
        persist.load(ctx.path(f"fit{k}.pt"), m, g)
        preds[k] = m.predict(g, chain_data()[0], num_samples=4)
    return {"said": [o.strip() for o, _ in outs], "pred": preds, "left": sorted(os.listdir(ctx.tmp))}


def _no_temporaries(r):
    left = [f for f in r["left"] if ".tmp-" in f]
    return f"temporary files left: {left}" if left else None


_add("conc_cand_two_trainers_one_dir", "concurrency", "train+persist.save", _two_trainers, (), expect="accept",
     max_work=None, wrong=wrong_if(_no_temporaries))


# ============================================================================================ saved fits
def _save_load(ctx):
    """a fit trained with candidate starts (K=2, R=3) saved with persist.save and loaded into a new model: it
    predicts as the saved one"""
    from robustness_cases_features import _same_prediction

    from pyro_dag import persist
    from pyro_dag.infer import train

    inputs, data = latent_chain_data()
    model, guide = _set_up()
    res = train(model, guide, inputs, data, num_steps=STEPS, progress=False, candidate_starts=2, candidate_steps=R)
    path = persist.save(ctx.path("fit.pt"), model, guide, inputs, data)
    pyro.clear_param_store()
    m2, g2 = model_and_guide()
    ctx.start()
    persist.load(path, m2, g2)
    return {"kept": res.candidates["kept"], "problem": _same_prediction(model, guide, m2, g2)}


_add("files_cand_save_load", "files", "persist.save/load", _save_load, (), expect="accept", max_work=None,
     wrong=lambda r: r["problem"])
