"""The default sampler on large binary trees against mean field (issue 43): what ``train`` picks and what it costs.

``train`` builds ``DAGELBO(num_particles=S)`` for a structured guide and its size rule
(:func:`pyro_dag.infer.training.sampler_rule.choose_sampler`) switches the sampler from ``"conditional"`` (Perlino,
Hamelijnck, Johansen & Damoulas 2026, arXiv:2607.09645, Algorithm 2) to ``"joint"`` when the conditional sampler's
square-root state would exceed :data:`~pyro_dag.infer.training.sampler_rule.CONDITIONAL_STATE_BUDGET` bytes per
step. On ``tree_scaling.py``'s binary trees (20 cases, 20 inducing points per node, the DAGDGP defaults, chordal guide
on the sparse backend) this records, for ``S = 1`` and ``S = 4`` (train's default) samples, the sampler the rule
picks and the CPU seconds of one ELBO + gradient of mean field, of the picked sampler and of the other one (the
conditional sampler only where its state is within the budget, else its state is reported: it is what the rule
avoids). Methods are interleaved, one warm-up call each, median of the rounds, one thread.

    flock /tmp/pyro_dag_bench.lock python benchmarks/sampler_rule_trees.py [--depths 7 8 9] [--samples 1 4]
"""
import argparse
import os
import sys
import time
import warnings

import pyro
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import code_state_after, one_thread, write_json, write_readme_section  # noqa: E402
from tree_scaling import make_problem  # noqa: E402

from pyro_dag import DAGDGP  # noqa: E402
from pyro_dag.infer import DAGELBO  # noqa: E402
from pyro_dag.infer.autoguide import AutoStructuredGuide  # noqa: E402
from pyro_dag.infer.training.sampler_rule import CONDITIONAL_STATE_BUDGET, choose_sampler  # noqa: E402

NAME = "sampler_rule_trees"


def one_call(model, guide, inputs, data, samples, sampler):
    """CPU seconds of one ELBO + gradient with ``samples`` samples and ``sampler``."""
    elbo = DAGELBO(num_particles=samples, sampler=sampler)
    params = list(guide.parameters())
    t = time.process_time()
    loss = elbo.differentiable_loss(model, guide, inputs, data)
    torch.autograd.grad(loss, params)
    return time.process_time() - t


def measure(depth, samples, repeats):
    g, inputs, data = make_problem(depth)
    pyro.clear_param_store()
    pyro.set_rng_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DAGDGP(g, num_inducing=20).double()
        model.setup(inputs, data)
    mf = AutoStructuredGuide(model, precision="mean_field", name="mf")
    mf(inputs, data)
    st = AutoStructuredGuide(model, precision="chordal", backend="sparse", name="chordal")
    st(inputs, data)
    n = next(iter(inputs.values())).shape[0]
    elbo = DAGELBO(num_particles=samples)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        picked = choose_sampler(elbo, st.family, n)
    state = st.family.conditional_state_bytes(samples, n)
    row = {"depth": depth, "gp_nodes": len(model.gp_nodes), "samples": samples, "picked": picked,
           "conditional_state_mib": state / 2 ** 20, "budget_mib": CONDITIONAL_STATE_BUDGET / 2 ** 20,
           "message": str(caught[0].message) if caught else None}
    methods = {"mean_field": lambda: one_call(model, mf, inputs, data, samples, "conditional"),
               "joint": lambda: one_call(model, st, inputs, data, samples, "joint")}
    if state <= CONDITIONAL_STATE_BUDGET:
        methods["conditional"] = lambda: one_call(model, st, inputs, data, samples, "conditional")
    for call in methods.values():   # warm-up
        call()
    keys = list(methods)
    cpus = {k: [] for k in keys}
    for rep in range(repeats):
        for k in keys[rep % len(keys):] + keys[:rep % len(keys)]:
            cpus[k].append(methods[k]())
    for k in keys:
        row[f"{k}_cpu_s"] = sorted(cpus[k])[len(cpus[k]) // 2]
    row["picked_over_mean_field"] = row[f"{picked}_cpu_s"] / row["mean_field_cpu_s"]
    row["load"] = list(os.getloadavg())
    row["code"] = code_state_after()   # with the modules this process ran
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", type=int, nargs="+", default=[7, 8, 9])
    ap.add_argument("--samples", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-readme", action="store_true")
    args = ap.parse_args()
    one_thread()
    rows = []
    for depth in args.depths:
        for samples in args.samples:
            row = measure(depth, samples, args.repeats)
            print(row, flush=True)
            rows.append(row)
    write_json(NAME, {"rows": rows, "settings": vars(args)})
    if not args.no_readme:
        write_readme_section(NAME, None)


if __name__ == "__main__":
    main()
