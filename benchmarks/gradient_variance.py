"""Gradient variance of DAGELBO vs Pyro's Trace_ELBO on the same guide (the latent collider).

Both estimate the same ELBO (tested in tests/test_elbo.py); DAGELBO samples node values by marginal
ancestral sampling and integrates the Gaussian likelihood in closed form, Trace_ELBO samples the inducing
outputs and then the node values. We report the total variance (sum over all guide parameters) of the
gradient with 4 samples per step for each, and their ratio, at two points: the guide's initialisation and
after 500 DAG-VI training steps.

    python benchmarks/gradient_variance.py
"""
import argparse

import pyro
import torch
from common import one_thread, write_json, write_readme_section
from pyro.infer import SVI, Trace_ELBO

from pyro_dag.datasets.collider import collider, collider_model
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide


def gradient_samples(elbo, model, guide, inputs, data, n):
    params = list(guide.parameters())
    out = []
    for _ in range(n):
        loss = elbo.differentiable_loss(model, guide, inputs, data)
        out.append(torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, params)]))
    return torch.stack(out)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--train-steps", type=int, default=500)
    args = parser.parse_args()
    one_thread()
    ds = collider(0)
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    model = collider_model(ds)
    guide = AutoStructuredGuide(model, structure="mean_field", init_scale={"w3": 0.01})
    guide(ds.inputs, ds.data)
    rows = []
    for stage in ("init", "trained"):
        if stage == "trained":
            svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
            for _ in range(args.train_steps):
                svi.step(ds.inputs, ds.data)
        ours = gradient_samples(DAGELBO(num_particles=4), model, guide, ds.inputs, ds.data, args.repeats)
        theirs = gradient_samples(Trace_ELBO(num_particles=4, vectorize_particles=True), model, guide, ds.inputs,
                                  ds.data, args.repeats)
        v_ours, v_theirs = ours.var(0).sum().item(), theirs.var(0).sum().item()
        rows.append({"stage": stage, "total_grad_var_dagelbo": v_ours, "total_grad_var_trace_elbo": v_theirs,
                     "ratio_trace_over_dagelbo": v_theirs / v_ours})
        print(rows[-1], flush=True)
    write_json("gradient_variance", {"settings": {"repeats": args.repeats, "num_particles": 4,
                                                  "train_steps": args.train_steps, "guide": "mean_field"},
                                     "rows": rows})
    lines = ["## Gradient variance: DAGELBO vs Trace_ELBO (latent collider, DAG-VI guide)", "",
             f"`python benchmarks/gradient_variance.py` ({args.repeats} gradient draws of each estimator, 4 samples "
             "each, same guide; total variance summed over all guide parameters).", "",
             "| guide state | DAGELBO | Trace_ELBO | Trace_ELBO / DAGELBO |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['stage']} | {r['total_grad_var_dagelbo']:.3g} | {r['total_grad_var_trace_elbo']:.3g} | "
                     f"{r['ratio_trace_over_dagelbo']:.1f}× |")
    write_readme_section("gradient-variance", "\n".join(lines))


if __name__ == "__main__":
    main()
