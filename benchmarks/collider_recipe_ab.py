"""A/B of the collider recipe's training time: a baseline commit's code against the working tree's, side by side.

What ``pyro-dag fit collider`` trains (``fit_collider`` with the recommended recipe: 3000 steps, chordal guide,
antithetic pairs, 1000 Adam then natural-gradient steps with ``γ = 0.01``, one thread, seed 0). The baseline
commit is checked out as a git worktree (``git worktree add --detach /tmp/ab_base <commit>``, made here if missing),
and each repeat runs the recipe once in a fresh process per side (``PYTHONPATH`` = the tree, so each side imports
its own ``pyro_dag``), the sides alternating and their order swapped every repeat, one at a time, one thread each.
Per run: the training seconds ``fit_collider`` reports (the step loop, first steps included, as the CLI prints
them), the seconds of the whole ``fit_collider`` call, CPU seconds, the per-step times of the Adam and the
natural-gradient phases (medians over their steps, from a timer around ``TrainingRun._one_step``), the tensor
operations dispatched in one step of each phase (counted in a step left out of the timing) and the final losses and
metrics, which must agree between the sides to rounding.

    python benchmarks/collider_recipe_ab.py [--base 68e81be] [--repeats 5] [--steps 3000]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

#: The commit before the speed-ups of issue 36 (part 3): the collider recipe as it was trained then.
BASELINE = "68e81be8a9a4a1adb458309d15a0214034b61242"

WORKER = r"""
import json, os, statistics, sys, time
import torch
torch.set_num_threads(1)
import pyro_dag
from pyro_dag.experiments.collider import fit_collider
from pyro_dag.infer.training import run as run_module

from torch.utils._python_dispatch import TorchDispatchMode

steps, after = int(sys.argv[1]), int(sys.argv[2])
stamps, ops = [], {}
one_step = run_module.TrainingRun._one_step
counted = {after // 2: "adam", after + (steps - after) // 2: "natural_gradient"}


class CountOps(TorchDispatchMode):
    # tensor operations dispatched in one step (forward, backward and update), the step's overhead measure
    n = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        CountOps.n += 1
        return func(*args, **(kwargs or {}))


def timed(self, s):
    if s in counted:                      # (not timed: the counting mode slows the step down)
        CountOps.n = 0
        with CountOps():
            loss = one_step(self, s)
        ops[counted[s]] = CountOps.n
        stamps.append(float("nan"))
        return loss
    t = time.perf_counter()
    loss = one_step(self, s)
    stamps.append(time.perf_counter() - t)
    return loss

run_module.TrainingRun._one_step = timed
cpu, wall = time.process_time(), time.perf_counter()
res = fit_collider(steps=steps, precision="chordal", backend="auto", seed=0, num_particles=4, lr=0.01,
                   progress=False, num_eval_samples=500, antithetic=True, natural_gradient=0.01,
                   natural_gradient_after=after, num_threads=1)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
m = res["metrics"]
adam = [x for x in stamps[1:after] if x == x]
ng = [x for x in stamps[after:] if x == x]
print("RESULT " + json.dumps({
    "tree": os.path.dirname(os.path.dirname(pyro_dag.__file__)), "train_seconds": m["train_seconds"],
    "fit_seconds": wall, "fit_cpu_seconds": cpu, "first_step_s": stamps[0], "ops_per_step": ops,
    "adam_ms": 1e3 * statistics.median(adam) if adam else None, "ng_ms": 1e3 * statistics.median(ng) if ng else None,
    "final_elbo": m["final_elbo"], "last_loss": res["losses"][-1],
    "rmse_train": m["rmse_train"], "rmse_test": m["rmse_test"], "parent_var": m["parent_var"],
    "mean_abs_corr": m["mean_abs_corr"]}))
"""


def summary(payload):
    """The line of a run kept in the history of later runs: commits, ratios, final ELBOs and load."""
    keys = ("baseline_commit", "new_commit", "new_tree_dirty", "ratio_new_over_baseline", "final_elbo", "load_before",
            "load_after")
    out = {k: payload[k] for k in keys}
    out["repeats"] = len(payload["runs"]["new"])
    out["steps"] = payload["settings"]["steps"]
    return out


def with_history(payload, previous):
    """``payload`` with ``history``: the summaries of the earlier runs in ``previous`` (the JSON this run replaces,
    or ``None``) of the same recipe and baseline, oldest first (this machine's load moves a ratio by a tenth from one
    run to the next, so the spread of the runs is part of the result)."""
    history = []
    if previous is not None and previous.get("baseline_commit") == payload["baseline_commit"] and \
            previous["settings"]["steps"] == payload["settings"]["steps"]:
        history = list(previous.get("history", [])) + [summary(previous)]
    return dict(payload, history=history)


def ensure_worktree(path, commit):
    """The baseline's worktree at ``path`` (created detached at ``commit`` when missing)."""
    if not os.path.exists(os.path.join(path, "pyro_dag", "__init__.py")):
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", path, commit], check=True)
    head = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], check=True, capture_output=True,
                          text=True).stdout.strip()
    if not head.startswith(commit[:7]):
        raise SystemExit(f"{path} is at {head}, not {commit}: remove it (git worktree remove {path}) or pass --worktree")
    return head


def run_side(tree, steps, after):
    env = dict(os.environ, PYTHONPATH=tree, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-c", WORKER, str(steps), str(after)], env=env, cwd="/tmp",
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"the run in {tree} failed:\n{out.stderr[-3000:]}")
    line = next(x for x in out.stdout.splitlines() if x.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    if os.path.realpath(result["tree"]) != os.path.realpath(tree):
        raise SystemExit(f"the run for {tree} imported pyro_dag from {result['tree']}")
    return result


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", default=BASELINE, help="baseline commit (default: before issue 36's speed-ups)")
    ap.add_argument("--worktree", default="/tmp/ab_base", help="where the baseline's worktree is (made if missing)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--after", type=int, default=1000, help="Adam steps before the natural-gradient steps")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "collider_recipe_ab.json"))
    args = ap.parse_args()
    base_head = ensure_worktree(args.worktree, args.base)
    new_head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no", "pyro_dag"],
                                check=True, capture_output=True, text=True).stdout.strip())
    sides = {"baseline": args.worktree, "new": ROOT}
    load_before = os.getloadavg()
    runs = {k: [] for k in sides}
    for rep in range(args.repeats):
        order = list(sides) if rep % 2 == 0 else list(sides)[::-1]
        for k in order:
            r = run_side(sides[k], args.steps, args.after)
            runs[k].append(r)
            print(rep, k, {x: round(v, 4) if isinstance(v, float) else v for x, v in r.items() if x != "tree"},
                  flush=True)
    load_after = os.getloadavg()
    med = {k: {f: statistics.median(r[f] for r in rs) for f in
               ("train_seconds", "fit_seconds", "fit_cpu_seconds", "first_step_s", "adam_ms", "ng_ms")}
           for k, rs in runs.items()}
    ratio = {f: med["new"][f] / med["baseline"][f] for f in med["new"]}
    ops = {k: rs[0]["ops_per_step"] for k, rs in runs.items()}
    final = {k: rs[0]["final_elbo"] for k, rs in runs.items()}
    payload = {
        "settings": vars(args), "baseline_commit": base_head, "new_commit": new_head, "new_tree_dirty": dirty,
        "recipe": "fit_collider(steps, chordal, antithetic, natural_gradient=0.01 after --after Adam steps, seed 0, "
                  "num_threads=1), as pyro-dag fit collider",
        "runs": runs, "median": med, "ratio_new_over_baseline": ratio, "ops_per_step": ops,
        "final_elbo": final, "final_elbo_rel_diff": abs(final["new"] - final["baseline"]) / abs(final["baseline"]),
        "deterministic_within_side": {k: len({r["final_elbo"] for r in rs}) == 1 for k, rs in runs.items()},
        "load_before": load_before, "load_after": load_after,
    }
    sys.path.insert(0, HERE)
    from common import write_json, write_readme_section

    previous = None
    if os.path.exists(args.out):
        with open(args.out) as f:
            previous = json.load(f)
    payload = with_history(payload, previous)
    if os.path.abspath(args.out) == os.path.join(HERE, "results", "collider_recipe_ab.json"):
        write_json("collider_recipe_ab", payload)
        write_readme_section("collider-recipe-ab", "")
    else:
        with open(args.out, "w") as f:
            json.dump(payload, f, indent=2)
    print("median", json.dumps(med, indent=1))
    print("ratio new/baseline", json.dumps(ratio, indent=1))
    print("final ELBO", final, "load", load_before, load_after)


if __name__ == "__main__":
    main()
