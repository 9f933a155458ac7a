"""Gradient variance of DAGELBO vs Pyro's Trace_ELBO on the same guide (the latent collider).

Both estimate the same ELBO (tested in tests/infer/test_elbo.py); DAGELBO samples node values by marginal
ancestral sampling and integrates the Gaussian likelihood in closed form, Trace_ELBO samples the inducing
outputs and then the node values. We report the total variance (sum over all guide parameters) of the
gradient with 4 samples per step for each, and their ratio, at two points: the guide's initialisation and
after 500 DAG-VI training steps.

Both parts also measure DAGELBO with antithetic sample pairs (``antithetic=True``: the same 4 samples as 2
pairs ``(ε, -ε)``).

Second part, DAG-SVI (chordal guide): DAGELBO's two samplers for structured guides, ``"conditional"`` (the
paper's Algorithm 2) and ``"joint"`` (one joint draw of the inducing outputs per case), next to Trace_ELBO, on
the collider (at initialisation and after 500 chordal training steps) and on a depth-4 binary tree of
``tree_scaling.py`` (30 GP nodes; after 100 training steps). Besides the variance we time each gradient, so
that ``variance × seconds`` compares the work needed for a given gradient precision.

    python benchmarks/gradient_variance.py
"""
import argparse
import time

import pyro
import torch
from common import one_thread, write_json, write_readme_section
from pyro.infer import SVI, Trace_ELBO

from pyro_dag.datasets import collider
from pyro_dag.experiments.collider import collider_model
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide


def gradient_samples(elbo, model, guide, inputs, data, n, timed=False):
    """``n`` gradient draws ``[n, P]``; with ``timed`` also the wall-clock and CPU seconds per draw."""
    params = list(guide.parameters())
    out = []
    t, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        loss = elbo.differentiable_loss(model, guide, inputs, data)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        out.append(torch.cat([torch.zeros(p.numel(), dtype=p.dtype) if g is None else g.reshape(-1)
                              for g, p in zip(grads, params)]))
    seconds, cpu = (time.perf_counter() - t) / n, (time.process_time() - c) / n
    return (torch.stack(out), seconds, cpu) if timed else torch.stack(out)


def structured_rows(repeats):
    """Conditional vs joint sampler vs Trace_ELBO for a chordal guide."""
    import os
    import sys

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tree_scaling as ts

    from pyro_dag import DAGDGP

    rows = []
    ds = collider(0)
    problems = [("collider", lambda: collider_model(ds), ds.inputs, ds.data, {"w3": 0.01}, [0, 500])]
    g, tin, tdata = ts.make_problem(4)
    problems.append(("tree depth 4", lambda: DAGDGP(g, num_inducing=20).double(), tin, tdata, 1.0, [100]))
    for name, make, inputs, data, init_scale, stages in problems:
        pyro.set_rng_seed(0)
        pyro.clear_param_store()
        model = make()
        guide = AutoStructuredGuide(model, precision="chordal", backend="sparse", init_scale=init_scale)
        guide(inputs, data)
        done = 0
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
        for stage in stages:
            for _ in range(stage - done):
                svi.step(inputs, data)
            done = stage
            row = {"problem": name, "train_steps": stage}
            for key, elbo in [("conditional", DAGELBO(num_particles=4)),
                              ("conditional_sqrt", DAGELBO(num_particles=4)),
                              ("antithetic", DAGELBO(num_particles=4, antithetic=True)),
                              ("joint", DAGELBO(num_particles=4, sampler="joint")),
                              ("trace_elbo", Trace_ELBO(num_particles=4, vectorize_particles=True))]:
                # the conditional sampler's square-root form: the same estimator (same draws to rounding)
                family = guide.family
                saved = getattr(family, "conditioning", None)
                if saved is not None:
                    family.conditioning = "square_root" if key == "conditional_sqrt" else "factor"
                try:
                    grads, seconds, cpu = gradient_samples(elbo, model, guide, inputs, data, repeats, timed=True)
                finally:
                    if saved is not None:
                        family.conditioning = saved
                row[f"var_{key}"] = grads.var(0).sum().item()
                row[f"seconds_{key}"] = seconds
                row[f"cpu_seconds_{key}"] = cpu
            rows.append(row)
            print(row, flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--train-steps", type=int, default=500)
    parser.add_argument("--part", choices=["all", "structured"], default="all")
    args = parser.parse_args()
    one_thread()
    if args.part == "structured":
        import json
        import os

        from common import RESULTS

        stored = json.load(open(os.path.join(RESULTS, "gradient_variance.json")))
        rows = stored["rows"]
        args.repeats = stored["settings"]["repeats"]
        args.train_steps = stored["settings"]["train_steps"]
        structured = structured_rows(args.repeats)
        return report(args, rows, structured)
    ds = collider(0)
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    model = collider_model(ds)
    guide = AutoStructuredGuide(model, precision="mean_field", init_scale={"w3": 0.01})
    guide(ds.inputs, ds.data)
    rows = []
    for stage in ("init", "trained"):
        if stage == "trained":
            svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
            for _ in range(args.train_steps):
                svi.step(ds.inputs, ds.data)
        ours = gradient_samples(DAGELBO(num_particles=4), model, guide, ds.inputs, ds.data, args.repeats)
        anti = gradient_samples(DAGELBO(num_particles=4, antithetic=True), model, guide, ds.inputs, ds.data,
                                args.repeats)
        theirs = gradient_samples(Trace_ELBO(num_particles=4, vectorize_particles=True), model, guide, ds.inputs,
                                  ds.data, args.repeats)
        v_ours, v_theirs = ours.var(0).sum().item(), theirs.var(0).sum().item()
        rows.append({"stage": stage, "total_grad_var_dagelbo": v_ours, "total_grad_var_trace_elbo": v_theirs,
                     "ratio_trace_over_dagelbo": v_theirs / v_ours,
                     "total_grad_var_dagelbo_antithetic": anti.var(0).sum().item()})
        print(rows[-1], flush=True)
    report(args, rows, structured_rows(args.repeats))


def report(args, rows, structured):
    write_json("gradient_variance", {"settings": {"repeats": args.repeats, "num_particles": 4,
                                                  "train_steps": args.train_steps, "guide": "mean_field"},
                                     "rows": rows, "structured": structured})
    lines = ["## Gradient variance: DAGELBO vs Trace_ELBO (latent collider, DAG-VI guide)", "",
             f"`python benchmarks/gradient_variance.py` ({args.repeats} gradient draws of each estimator, 4 samples "
             "each, same guide; total variance summed over all guide parameters).", "",
             "| guide state | DAGELBO | DAGELBO, antithetic pairs | Trace_ELBO | Trace_ELBO / DAGELBO |",
             "|---|---|---|---|---|"]
    for r in rows:
        anti = r.get("total_grad_var_dagelbo_antithetic")
        lines.append(f"| {r['stage']} | {r['total_grad_var_dagelbo']:.3g} | "
                     f"{'-' if anti is None else format(anti, '.3g')} | {r['total_grad_var_trace_elbo']:.3g} | "
                     f"{r['ratio_trace_over_dagelbo']:.1f}× |")
    lines += ["", "DAG-SVI (chordal guide, sparse backend): total gradient variance and CPU seconds per gradient "
                  "(`time.process_time`; wall-clock in `results/gradient_variance.json`) of DAGELBO's samplers and "
                  "Trace_ELBO (4 samples each). The conditional sampler is run in both forms of its sparse state "
                  "(*square root*, the default, and *factor*, the previous default, "
                  "`AutoStructuredGuide(..., conditioning=\"factor\")`: the same estimator, so the same variance up "
                  "to Monte Carlo error; the antithetic pairs run in factor form). *work* = variance × CPU seconds relative to the conditional sampler in "
                  "factor form (lower is better); *joint work vs sq. root* relative to the default square-root form. Ran under load (other tenants on 2 "
                  "cores): compare within a row.", "",
              "| problem | trained steps | conditional (factor) | conditional (square root) | conditional, antithetic "
              "pairs | joint | Trace_ELBO | joint / cond. variance | joint work | joint work vs sq. root | "
              "Trace_ELBO work |", "|---|---|---|---|---|---|---|---|---|---|---|"]

    def sec(r, k):
        return r.get(f"cpu_seconds_{k}", r[f"seconds_{k}"])

    def cell(r, k):
        return f"{r[f'var_{k}']:.3g} ({sec(r, k) * 1e3:.0f} ms)" if f"var_{k}" in r else "-"

    for r in structured:
        work = {k: r[f"var_{k}"] * sec(r, k) for k in ("conditional", "conditional_sqrt", "joint", "trace_elbo")
                if f"var_{k}" in r}
        vs_sqrt = f"{work['joint'] / work['conditional_sqrt']:.2f}" if "conditional_sqrt" in work else "-"
        lines.append(f"| {r['problem']} | {r['train_steps']} | {cell(r, 'conditional')} | "
                     f"{cell(r, 'conditional_sqrt')} | {cell(r, 'antithetic')} | {cell(r, 'joint')} | "
                     f"{cell(r, 'trace_elbo')} | {r['var_joint'] / r['var_conditional']:.2f} | "
                     f"{work['joint'] / work['conditional']:.2f} | {vs_sqrt} | "
                     f"{work['trace_elbo'] / work['conditional']:.2f} |")
    write_readme_section("gradient-variance", "\n".join(lines))


if __name__ == "__main__":
    main()
