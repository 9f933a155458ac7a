"""How close is `fit` to the exact posterior of its own model? (Collapsed likelihoods, p ≤ 14.)

For the collapsed likelihoods `pyro_dag.structure.exact_posterior` gives the exact edge posterior of the model
`fit` approximates, so the approximation error can be measured directly: mean and max |P_fit - P_exact| over the
off-diagonal entries, and the share of the exact posterior's order mass held by the orders `fit` mixes over.
One fit per problem (fit's defaults); its posterior is read two ways, which share the training run (recording
the visited orders draws no random numbers):

* `history`: fit's default, the distinct orders the particles visited over the last half of the run, each
  weighted by its exact score (`order_history=0.5`, `StructurePosterior.support`);
* `final`: the particles' final orders only, weighted by the same score (`order_history=0`).

Problems: ER p = 10 (linear and nonlinear data, 5 seeds, the data of `structure_er.py`, linear likelihood) and
Sachs (folds 0-2 of `structure_sachs.py`, BGe likelihood). Edge probabilities from 4000 posterior draws.

    python benchmarks/structure_fit_vs_exact.py            # about 20 min on one core

Results: benchmarks/results/structure_fit_vs_exact.json and the README table.
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import structure_common as sc  # noqa: E402


def compare(x, truth, likelihood, seed):
    import numpy as np
    import torch

    from pyro_dag.metrics import auroc
    from pyro_dag.structure import exact_posterior, fit

    exact = exact_posterior(x, likelihood=likelihood)
    P_exact = exact.edge_probs().numpy()
    t0 = time.perf_counter()
    post = fit(torch.as_tensor(x, dtype=torch.float32), likelihood=likelihood, seed=seed, progress=False)
    wall = time.perf_counter() - t0
    off = ~np.eye(x.shape[1], dtype=bool)
    out = {"time_s": wall, "exact_auroc": auroc(P_exact, truth)}
    visited = post.visited
    for name in ("history", "final"):
        post.visited = visited if name == "history" else None
        r, w = post.support("order")
        P = post.edge_probs(4000, seed=0, weighting="order").cpu().double().numpy()
        orders = torch.argsort(-r, -1).tolist()
        out[name] = {
            "orders": len(orders),
            "ess": float(1.0 / (w.double() ** 2).sum()),
            "order_mass": float(sum(np.exp(exact.order_log_prob(o)) for o in orders)),
            "mae": float(np.abs(P - P_exact)[off].mean()),
            "max_err": float(np.abs(P - P_exact)[off].max()),
            "auroc": auroc(P, truth),
        }
    post.visited = visited
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cpu", type=int, default=0, help="core to pin to (-1: no pinning)")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--folds", type=int, nargs="*", default=[0, 1, 2])
    args = ap.parse_args()
    sc.single_thread(None if args.cpu < 0 else args.cpu)
    import numpy as np
    import torch

    from pyro_dag.datasets import sachs, sachs_graph
    from structure_er import data_for
    from structure_sachs import splits

    runs = {}
    for mech in ("linear", "nonlinear"):
        for r in range(args.seeds):
            x, truth, seed = data_for(10, mech, r, 1000, 2.0)
            runs[f"er10-{mech}-s{r}"] = compare(x, truth, "linear", seed)
            print(f"er10-{mech}-s{r}", json.dumps(runs[f"er10-{mech}-s{r}"]), flush=True)
    x_all = sachs(dtype=torch.float64).data.numpy()
    truth = sachs_graph("cdt").numpy()
    tr = splits()
    for i in args.folds:
        x = x_all[tr[i]]
        x = (x - x.mean(0)) / x.std(0)
        runs[f"sachs-fold{i}"] = compare(x, truth, "bge", i)
        print(f"sachs-fold{i}", json.dumps(runs[f"sachs-fold{i}"]), flush=True)
    os.makedirs(sc.RESULTS, exist_ok=True)
    with open(os.path.join(sc.RESULTS, "structure_fit_vs_exact.json"), "w") as f:
        json.dump({"env": sc.environment(), "settings": vars(args), "runs": runs}, f, indent=1)

    groups = {"ER p = 10, linear data (5 seeds)": "er10-linear", "ER p = 10, nonlinear data (5 seeds)": "er10-nonlinear",
              f"Sachs, BGe (folds {', '.join(map(str, args.folds))})": "sachs"}
    lines = ["### `fit` against the exact posterior of its own model", "",
             "Reproduce: `python benchmarks/structure_fit_vs_exact.py` (one core, about 20 min). One `fit` per problem "
             "(defaults; linear likelihood on ER, BGe on Sachs) read two ways: `history` (default) mixes over the "
             "distinct orders the particles visited over the last half of the run, `final` over their final orders "
             "only, both weighted by the exact order score. |P - P_exact|: mean and max over off-diagonal entries "
             "(4000 draws); order mass: the exact posterior probability of the orders mixed over; ESS of the order "
             "weights. Mean over seeds/folds.", "",
             "| problem | read | orders | ESS | order mass | mean abs err | max abs err | AUROC % | exact AUROC % | fit s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for label, prefix in groups.items():
        rows = [v for k, v in runs.items() if k.startswith(prefix)]
        if not rows:
            continue
        for name in ("history", "final"):
            m = {k: float(np.mean([r[name][k] for r in rows])) for k in rows[0][name]}
            lines.append(f"| {label} | {name} | {m['orders']:.0f} | {m['ess']:.1f} | {m['order_mass']:.3g} | "
                         f"{m['mae']:.3f} | {m['max_err']:.3f} | {100 * m['auroc']:.1f} | "
                         f"{100 * np.mean([r['exact_auroc'] for r in rows]):.1f} | "
                         f"{np.mean([r['time_s'] for r in rows]):.0f} |")
    text = "\n".join(lines)
    print(text)
    sc.write_readme_block("fit-vs-exact", text)


if __name__ == "__main__":
    main()
