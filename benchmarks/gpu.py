"""CPU (one thread) vs CUDA on the same machine, in one run: the DAG-DGP step, the tree ELBO and the structure fit.

Run where a GPU is present (the project's CI machines have none). Three sections, each timed side by side:

* ``chain``: the two-layer chain DGP of ``chain_dgp_vs_gpytorch.py`` (M = 64, 4 samples, float64), seconds per
  ELBO + gradient + Adam step for pyro_dag DAG-VI and GPyTorch's DeepGP on ``cpu`` and ``cuda`` for growing n;
* ``tree``: one ELBO + gradient on the binary trees of ``tree_scaling.py`` (mean field, chordal sparse, chordal
  dense) on ``cuda``;
* ``structure``: seconds per SVI-DAG step of ``pyro_dag.structure.fit`` on ER p = 20 (linear and mlp likelihood,
  float32) on ``cpu`` and ``cuda``.

    python benchmarks/gpu.py --out DIR          # run (JSON into DIR/gpu.json, merged per section)
    python benchmarks/gpu.py --table-only       # README table from benchmarks/results/gpu.json
"""
import argparse
import json
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import RESULTS, environment, one_thread, write_readme_section  # noqa: E402


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def per_step(step, device, steps, blocks=3):
    """Median over ``blocks`` of the mean seconds per call (after one warm-up call)."""
    step()
    sync(device)
    out = []
    for _ in range(blocks):
        t = time.perf_counter()
        for _ in range(steps):
            step()
        sync(device)
        out.append((time.perf_counter() - t) / steps)
    return sorted(out)[len(out) // 2]


def chain_section(ns, cpu_max_n, dut="cuda"):
    import chain_dgp_vs_gpytorch as chain

    rows = []
    for n in ns:
        for dev in ["cpu", dut]:
            if dev == "cpu" and n > cpu_max_n:
                continue
            device = torch.device(dev)
            x, y = chain.make_data(n, 0)
            x, y = x.to(device), y.to(device)
            steps = 20 if dev != "cpu" or n <= 2000 else 3
            row = {"n": n, "M": 64, "device": dev}
            torch.manual_seed(0)
            ours, _ = chain.pyro_dag_setup(x, y, 64)
            row["pyro_dag_s"] = per_step(ours, device, steps)
            try:
                torch.manual_seed(0)
                peer, _ = chain.gpytorch_setup(x, y, 64)
                row["gpytorch_s"] = per_step(peer, device, steps)
            except ImportError:
                pass
            rows.append(row)
            print("chain", row, flush=True)
    return rows


def tree_section(depths, max_dense_depth, budget_s, dut="cuda", conditional_limit_s=8.0, max_dense_cond_depth=5):
    import pyro
    import tree_scaling as ts

    from pyro_dag import DAGDGP
    from pyro_dag.infer import DAGELBO
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    device = torch.device(dut)
    rows = []
    t_start = time.perf_counter()
    for depth in depths:
        if time.perf_counter() - t_start > budget_s:
            print("tree: time budget spent, stopping before depth", depth, flush=True)
            break
        g, inputs, data = ts.make_problem(depth)
        inputs = {k: v.to(device) for k, v in inputs.items()}
        data = {k: v.to(device) for k, v in data.items()}
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        model = DAGDGP(g, num_inducing=20).double().to(device)
        model.setup(inputs, data)
        row = {"depth": depth, "gp_nodes": len(model.gp_nodes), "device": dut}

        def timer(guide, sampler="conditional"):
            elbo = DAGELBO(num_particles=1, sampler=sampler)
            params = list(guide.parameters())

            def call():
                loss = elbo.differentiable_loss(model, guide, inputs, data)
                torch.autograd.grad(loss, params, allow_unused=True)
            return per_step(call, device, 1, blocks=2)

        mf = AutoStructuredGuide(model, precision="mean_field", name="mf")
        mf(inputs, data)
        row["mean_field_s"] = timer(mf)
        st = AutoStructuredGuide(model, precision="chordal", backend="sparse", name="chordal")
        st(inputs, data)
        row["chordal_sparse_joint_s"] = timer(st, "joint")
        if depth <= max_dense_depth:
            st.family.backend = "dense"
            row["chordal_dense_joint_s"] = timer(st, "joint")
            if depth <= max_dense_cond_depth:  # Algorithm 1's state grows with every drawn node: slow
                row["chordal_dense_s"] = timer(st)
            st.family.backend = "sparse"
        if not rows or rows[-1].get("chordal_sparse_s", float("inf")) < conditional_limit_s:
            row["chordal_sparse_s"] = timer(st)
        rows.append(row)
        print("tree", row, flush=True)
    return rows


def structure_section(p, likelihoods, steps, dut="cuda"):
    import numpy as np

    from pyro_dag.datasets import sample_sem
    from pyro_dag.structure import fit

    d = sample_sem(p, 1000, graph="er", mechanism="linear", num_edges=2 * p, seed=100 * p, standardize=True)
    rows = []
    for lik in likelihoods:
        for dev in ["cpu", dut]:
            n_steps = steps[lik]
            times = []

            def callback(*args, **kwargs):
                sync(torch.device(dev))
                times.append(time.perf_counter())
            t0 = time.perf_counter()
            post = fit(d.data, likelihood=lik, num_steps=n_steps, progress=False, device=torch.device(dev),
                       callback=callback)
            total = time.perf_counter() - t0
            # seconds per step from the callback clock (after the first 10% of the steps: set-up excluded)
            k = max(1, len(times) // 10)
            s_step = (times[-1] - times[k]) / max(1, len(times) - 1 - k) if len(times) > k + 1 else total / n_steps
            probs = np.asarray(post.edge_probs().detach().cpu())
            rows.append({"p": p, "likelihood": lik, "device": dev, "steps": n_steps, "seconds_per_step": s_step,
                         "total_s": total, "edge_prob_mean": float(probs.mean())})
            print("structure", rows[-1], flush=True)
    return rows


def table(res):
    lines = ["## CPU (one thread) vs CUDA on the same machine",
             "",
             "`python benchmarks/gpu.py --out DIR` on a machine with a GPU (" + res.get("environment", {}).get(
                 "gpu", "?") + f", torch {res.get('environment', {}).get('torch', '?')}); CPU numbers there with "
             "one thread. Not run by CI (no GPU).", ""]
    chain = res.get("chain")
    if chain:
        lines += ["Chain DGP (M = 64, 4 samples, float64), seconds per ELBO + gradient + Adam step:", "",
                  "| n | device | pyro_dag | GPyTorch | ratio |", "|---|---|---|---|---|"]
        for r in chain:
            gp = r.get("gpytorch_s")
            lines.append(f"| {r['n']} | {r['device']} | {r['pyro_dag_s'] * 1e3:.1f} ms | "
                         + (f"{gp * 1e3:.1f} ms | {r['pyro_dag_s'] / gp:.2f} |" if gp else "— | — |"))
        lines.append("")
    tree = res.get("tree")
    if tree:
        import tree_scaling as ts

        lines += ["Binary trees on CUDA (20 inducing points per node, S = 1, float64), one ELBO + gradient "
                  "(*cond.* = the paper's Algorithms 1/2, *joint* = `DAGELBO(sampler=\"joint\")`):", ""]
        lines += ts.markdown_table(tree)
        lines.append("")
    st = res.get("structure")
    if st:
        lines += ["Structure fit, ER p = 20, n = 1000 (float32), seconds per SVI-DAG step:", "",
                  "| likelihood | device | steps | s/step |", "|---|---|---|---|"]
        for r in st:
            lines.append(f"| {r['likelihood']} | {r['device']} | {r['steps']} | {r['seconds_per_step'] * 1e3:.1f} ms |")
    if res.get("note"):
        lines += ["", res["note"]]
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=RESULTS)
    ap.add_argument("--sections", nargs="+", default=["chain", "structure", "tree"])
    ap.add_argument("--chain-n", type=int, nargs="+", default=[2000, 20000, 200000])
    ap.add_argument("--chain-cpu-max-n", type=int, default=20000)
    ap.add_argument("--tree-depths", type=int, nargs="+", default=[3, 5, 7, 9])
    ap.add_argument("--tree-max-dense-depth", type=int, default=7)
    ap.add_argument("--tree-budget-s", type=float, default=120)
    ap.add_argument("--tree-max-dense-cond-depth", type=int, default=5)
    ap.add_argument("--structure-steps", type=int, nargs=2, default=[100, 40], help="linear, mlp")
    ap.add_argument("--table-only", action="store_true")
    ap.add_argument("--device", default="cuda", help="the device compared with the CPU ('cpu' = dry run)")
    args = ap.parse_args()
    path = os.path.join(args.out, "gpu.json")
    res = json.load(open(path)) if os.path.exists(path) else {}
    if args.table_only:
        write_readme_section("gpu", table(res))
        print(table(res))
        return
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit("no CUDA device: this benchmark compares the CPU with a GPU")
    one_thread()
    os.makedirs(args.out, exist_ok=True)
    env = environment()
    env["gpu"] = torch.cuda.get_device_name(0) if args.device == "cuda" else args.device
    res["environment"] = env
    for section in args.sections:
        t = time.perf_counter()
        if section == "chain":
            res["chain"] = chain_section(args.chain_n, args.chain_cpu_max_n, args.device)
        elif section == "tree":
            res["tree"] = tree_section(args.tree_depths, args.tree_max_dense_depth, args.tree_budget_s, args.device,
                                       max_dense_cond_depth=args.tree_max_dense_cond_depth)
        elif section == "structure":
            res["structure"] = structure_section(20, ["linear", "mlp"],
                                                 dict(zip(["linear", "mlp"], args.structure_steps)), args.device)
        print(f"{section}: {time.perf_counter() - t:.0f} s", flush=True)
        with open(path, "w") as f:
            json.dump(res, f, indent=2)
    print(table(res))


if __name__ == "__main__":
    main()
