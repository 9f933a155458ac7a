"""TracedNUTS and CompiledNUTS against Pyro's NUTS on the models of ``nuts_mixing.py``: seconds per potential
gradient and per short chain, side by side in one process (ratios; the machine's absolute speed varies between runs).

For each model, (1) the potential energy and its gradient at the chain's initial point, eager
(``NUTS(model).potential_fn``), traced (``TracedNUTS``) and compiled (``CompiledNUTS``), timed in interleaved rounds
(minimum over rounds of the mean over calls), with the largest difference of each gradient from the eager one, and
the seconds CompiledNUTS took to record, compile and check the potential; (2) one short chain of each from the same
MAP start and seed: the traced potential is the eager one bit for bit and its gradient equal to rounding (the trace
replays the plain composition of the library's fused operations), so the two chains take the same trajectory until
rounding parts them, and the ratio of their CPU seconds is the speed-up NUTS sees, its own Python bookkeeping
included. The compiled potential differs from the eager one by rounding (about 1e-11), enough for a
trajectory to part from the eager one after some transitions; its chain CPU seconds include the compilation.

Issue 43 asks for a potential gradient within 3x one ``DAGELBO`` gradient on the same model: in the same interleaved
rounds, one ``DAGELBO().loss_and_grads`` of the variational counterpart (the same graph, data, inducing points and
likelihoods, ``sample_f=False``, no hyperpriors, ``AutoStructuredGuide(model)``, the guide's parameters after one
call), in a parameter store of its own (``ParamStoreDict.scope``).

Usage::

    python benchmarks/traced_nuts.py              # the three models, 5 rounds x 100 gradients, chains 1 x (60 + 30)
"""
import argparse
import os
import sys
import time

import pyro
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import one_thread, write_json, write_readme_section  # noqa: E402
from nuts_mixing import chain_model, chain_problem, collider_model, collider_problem, run_nuts  # noqa: E402

MODELS = {
    "chain (a, b)": lambda sample_f=True: _chain(observe_hidden=True, sample_f=sample_f),
    "chain (b)": lambda sample_f=True: _chain(observe_hidden=False, sample_f=sample_f),
    "collider (w1, w2, w3)": lambda sample_f=True: _collider(sample_f=sample_f),
}


def _samplers():
    from pyro.infer import NUTS

    from pyro_dag.infer import CompiledNUTS, TracedNUTS

    return {"eager": NUTS, "traced": TracedNUTS, "compiled": CompiledNUTS}


SAMPLERS = _samplers()


def _chain(observe_hidden, sample_f=True):
    graph, inputs, data = chain_problem(observe_hidden=observe_hidden)
    model = chain_model(graph, {"a": 10, "b": 8}, "weakly_informative" if sample_f else None,
                        collapse="inducing" if sample_f else "values", observe_hidden=observe_hidden,
                        sample_f=sample_f)
    return model, inputs, data


def _collider(sample_f=True):
    graph, inputs, data, _ = collider_problem(observe_hidden=True)
    model = collider_model(graph, {"w1": 7, "w2": 6, "w3": 8}, "weakly_informative" if sample_f else None,
                           collapse="inducing", observe_hidden=True, sample_f=sample_f)
    return model, inputs, data


def elbo_gradient(make):
    """``(step, scope)``: one ``DAGELBO`` loss and gradient of the variational counterpart of ``make``'s model
    (``make(sample_f=False)``, ``AutoStructuredGuide``), its parameters in the store state ``scope`` (enter it with
    ``pyro.get_param_store().scope(scope)`` around each call)."""
    from pyro_dag.infer import DAGELBO
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    with pyro.get_param_store().scope() as scope:
        model, inputs, data = make(sample_f=False)
        model.setup(inputs, data)
        guide = AutoStructuredGuide(model)
        elbo = DAGELBO()
        pyro.set_rng_seed(0)
        elbo.loss_and_grads(model, guide, inputs, data)   # creates the guide's parameters
        params = [p for _, p in pyro.get_param_store().named_parameters()]

    def step():
        elbo.loss_and_grads(model, guide, inputs, data)
        for p in params:
            p.grad = None
    return step, scope


def gradient_seconds(model, inputs, data, rounds, calls, elbo_step=None):
    """Seconds per potential gradient of each sampler (and per ``DAGELBO`` gradient, ``elbo_step`` from
    :func:`elbo_gradient`), the minimum over interleaved rounds of the mean over ``calls`` calls."""
    from pyro.ops.integrator import potential_grad

    kernels = {}
    for name, cls in SAMPLERS.items():
        pyro.set_rng_seed(0)
        kernels[name] = cls(model)
        kernels[name].setup(0, inputs, data)
    compile_s = kernels["compiled"].compile_seconds
    if not kernels["compiled"].compiled:
        raise SystemExit("the compiled potential failed its check (see the warning)")
    z = kernels["eager"].initial_params
    layout = kernels["compiled"]._layout  # CompiledNUTS's potential takes one vector per mass-matrix block
    args = {name: layout.to_blocks(z) if name == "compiled" else z for name in kernels}
    best = {name: float("inf") for name in kernels}
    grads = {}
    for _ in range(rounds):
        for name, kernel in kernels.items():
            with torch.jit.optimized_execution(False):
                t = time.process_time()
                for _ in range(calls):
                    grads[name], _ = potential_grad(kernel.potential_fn, args[name])
                best[name] = min(best[name], (time.process_time() - t) / calls)
        if elbo_step is not None:
            step, scope = elbo_step
            with pyro.get_param_store().scope(scope):
                t = time.process_time()
                for _ in range(calls):
                    step()
                best["dagelbo"] = min(best.get("dagelbo", float("inf")), (time.process_time() - t) / calls)
    grads["compiled"] = layout.to_sites(grads["compiled"])
    diff = {name: max(float((grads["eager"][k] - grads[name][k]).abs().max()) for k in z) for name in grads}
    return best, diff, compile_s


def main():
    one_thread()
    import torch._inductor.config as inductor_config

    inductor_config.compile_threads = 1  # compile in this process: its CPU time is counted
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--warmup", type=int, default=60)
    p.add_argument("--draws", type=int, default=30)
    args = p.parse_args()
    rows = {}
    for label, make in MODELS.items():
        model, inputs, data = make()
        model.setup(inputs, data)
        sec, diff, compile_s = gradient_seconds(model, inputs, data, args.rounds, args.calls,
                                                elbo_step=elbo_gradient(make))
        chain = {}
        for name in SAMPLERS:
            model, inputs, data = make()  # a fresh model: every chain starts from the same MAP
            model.setup(inputs, data)
            runs, stats, _, cpu, _ = run_nuts(model, inputs, data, 1, args.warmup, args.draws, 8,
                                              jit=name == "traced", compile=name == "compiled", target_accept=0.9)
            chain[name] = {
                "cpu_s": cpu[0], "tree_depth_sum": int(sum(r["tree_depth"] for r in stats.records)),
                "draws_sum": float(sum(v.double().sum() for v in runs[0].get_samples().values()))}
        rows[label] = {"gradient_ms": {k: 1e3 * v for k, v in sec.items()}, "max_gradient_diff": diff,
                       "compile_seconds": compile_s, "chain": chain,
                       "same_trajectory": {name: chain["eager"]["draws_sum"] == chain[name]["draws_sum"]
                                           for name in ("traced", "compiled")}}
        print(label, rows[label], flush=True)
    res = {"rounds": args.rounds, "calls": args.calls, "warmup": args.warmup, "draws": args.draws, "models": rows}
    write_json("traced_nuts", res)
    lines = ["### TracedNUTS and CompiledNUTS against Pyro's NUTS: CPU seconds per gradient and per chain", "",
             f"`python benchmarks/traced_nuts.py` (one thread; potential and gradient at the initial point, the "
             f"minimum over {args.rounds} interleaved rounds of the mean over {args.calls} calls; then one chain of "
             f"each, 1 × ({args.warmup} + {args.draws}), target acceptance 0.9, from the same MAP start and seed; "
             "models as in `nuts_mixing.py` with `collapse=\"inducing\"` and hyperpriors; compilation in this process, "
             "its time in the compiled chain's CPU seconds; compile s: wall seconds to record, compile and check the "
             "potential, with TorchInductor's on-disk cache as the earlier runs left it, so mostly cached):", "",
             "| model (observed) | ms per gradient, NUTS | TracedNUTS (ratio) | CompiledNUTS (ratio) | max gradient "
             "difference, traced / compiled | compile s (wall) | CPU s per chain, NUTS | TracedNUTS (ratio) | "
             "CompiledNUTS (ratio) | same trajectory as NUTS, traced / compiled |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    yes = {True: "yes", False: "no"}
    for label, r in rows.items():
        g, c, d, same = r["gradient_ms"], r["chain"], r["max_gradient_diff"], r["same_trajectory"]
        lines.append(f"| {label} | {g['eager']:.2f} | {g['traced']:.2f} ({g['eager'] / g['traced']:.1f}x) | "
                     f"{g['compiled']:.2f} ({g['eager'] / g['compiled']:.1f}x) | {d['traced']:.1e} / "
                     f"{d['compiled']:.1e} | {r['compile_seconds']:.0f} | {c['eager']['cpu_s']:.1f} | "
                     f"{c['traced']['cpu_s']:.1f} ({c['eager']['cpu_s'] / c['traced']['cpu_s']:.1f}x) | "
                     f"{c['compiled']['cpu_s']:.1f} ({c['eager']['cpu_s'] / c['compiled']['cpu_s']:.1f}x) | "
                     f"{yes[same['traced']]} / {yes[same['compiled']]} |")
    write_readme_section("traced_nuts", "\n".join(lines))


if __name__ == "__main__":
    main()
