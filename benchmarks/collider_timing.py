"""Seconds for 3000 collider steps with one CPU thread (issue 3 target: ≤ 30 s for DAG-SVI), per optimiser.

Same model and guide as ``benchmarks/collider.py`` (float64, 4 samples, dense backend, inside
``model.fixed_kernels()`` as ``fit_collider`` runs): seconds per step of
an Adam step and of a ``GaussianNaturalGradient`` step, measured side by side in one process (after 20 warm-up
steps, then the median of 3 chunks of ``--steps`` timed steps each), and the implied time of the paper's protocol (3000 Adam steps) and of
the recommended schedule (1000 Adam + 2000 natural-gradient steps, antithetic pairs).

    python benchmarks/collider_timing.py [--steps 300]
"""
import argparse
import statistics
import time

import pyro
import torch
from pyro.infer import SVI

from common import one_thread, write_json, write_readme_section
from pyro_dag.datasets.collider import collider, collider_model
from pyro_dag.infer import DAGELBO, GaussianNaturalGradient
from pyro_dag.infer.autoguide import AutoStructuredGuide

CASES = [("mean_field", False), ("chordal", False), ("chordal", True)]


def seconds_per_step(step, n, repeats=3):
    """Median over ``repeats`` chunks of ``n`` steps (this machine's timings vary by ±10 % run to run)."""
    for _ in range(5):
        step()
    chunks = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(n):
            step()
        chunks.append((time.perf_counter() - t) / n)
    return statistics.median(chunks)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    one_thread()
    ds = collider(seed=0)
    rows = []
    for structure, antithetic in CASES:
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = collider_model(ds)
        guide = AutoStructuredGuide(model, structure=structure, backend="dense", init_scale={"w3": 0.01})
        elbo = DAGELBO(num_particles=4, antithetic=antithetic)
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), elbo)
        for _ in range(20):
            svi.step(ds.inputs, ds.data)
        with model.fixed_kernels():  # as fit_collider: the kernels are frozen, K(Z, Z) is factorised once
            adam = seconds_per_step(lambda: svi.step(ds.inputs, ds.data), args.steps)
            ng = GaussianNaturalGradient(model, guide, elbo, step_size=0.001)
            nat = seconds_per_step(lambda: ng.step(ds.inputs, ds.data), args.steps)
        row = {"structure": structure, "antithetic": antithetic, "adam_ms": adam * 1e3, "natural_ms": nat * 1e3,
               "s_3000_adam": 3000 * adam, "s_1000_adam_2000_natural": 1000 * adam + 2000 * nat}
        rows.append(row)
        print(row, flush=True)
    write_json("collider_timing", {"settings": vars(args), "rows": rows, "load_after": __import__("os").getloadavg()[0]})
    lines = ["### Collider: seconds for 3000 steps (one thread)", "",
             "`python benchmarks/collider_timing.py` (one process, one thread; steady-state seconds per step inside "
             "`model.fixed_kernels()`, times 3000). Target (issue 3): 3000 DAG-SVI steps in ≤ 30 s. Whole runs of "
             "`fit_collider` also pay for set-up and for the first steps, which are slower: 29.4-39.3 s (five runs) for the recommended recipe and 34.9 s for 3000 Adam steps from a cold start (`pyro-dag fit collider` and `pyro-dag fit collider --recipe paper --warm-start 0`, both cores idle; repeated runs of one command vary by up to a third on this machine).", "",
             "| guide | antithetic | Adam ms / step | natural-gradient ms / step | 3000 Adam steps (s) | "
             "1000 Adam + 2000 natural (s) |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['structure']} | {'yes' if r['antithetic'] else 'no'} | {r['adam_ms']:.2f} | "
                     f"{r['natural_ms']:.2f} | {r['s_3000_adam']:.1f} | {r['s_1000_adam_2000_natural']:.1f} |")
    write_readme_section("collider-timing", "\n".join(lines))


if __name__ == "__main__":
    main()
