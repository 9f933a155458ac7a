"""Which of DAGELBO's samplers gives a gradient of a given precision for less CPU time, by depth?

DAGELBO has two samplers for structured (chordal) guides: ``"conditional"`` (the DAG-DGP paper's Algorithm 2,
Perlino et al. 2026, arXiv:2607.09645, App. E.3; its cost per node grows with the node's elimination-tree path) and
``"joint"`` (one joint draw of the inducing outputs per case, sinks Rao-Blackwellised; cost per node independent of
depth, more gradient variance). Both estimate the same ELBO. For each problem we train a chordal guide (sparse
backend) for a few steps with the conditional sampler (Adam, lr 0.01, 4 samples), then draw gradients of the
ELBO with each sampler (4 samples each, the two samplers interleaved in blocks, alternating which goes first) and
report the total gradient variance over the guide's parameters, the CPU seconds per ELBO + gradient (median of
the blocks' means) and the *work* = variance × CPU seconds, whose ratio joint / conditional says which sampler
reaches a given gradient precision sooner. Mean field's CPU seconds per ELBO + gradient (a mean-field guide of the
same model, 4 samples) are timed in the same blocks as the reference of the cost target.

Problems: the binary trees of ``tree_scaling.py`` (depth 2..7: 6..254 GP nodes, 20 inducing points per node, 20
cases, leaves observed; Gaussian noise learned from variance 0.1, unit kernels), chains of the same construction
(one child per node) and the latent collider (the paper's fixed model, at initialisation and after 500 steps, as
in ``gradient_variance.py``).

    python benchmarks/sampler_work.py [--depths 2 3 4 5 6 7] [--chains 3 6] [--draws 64]
"""
import argparse
import json
import os
import sys
import time

import pyro
import torch
from common import RESULTS, code_state_after, one_thread, write_json, write_readme_section
from pyro.infer import SVI

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tree_scaling as ts  # noqa: E402

from pyro_dag import DAGDGP  # noqa: E402
from pyro_dag.datasets import collider  # noqa: E402
from pyro_dag.experiments.collider import collider_model  # noqa: E402
from pyro_dag.infer import DAGELBO  # noqa: E402
from pyro_dag.infer.autoguide import AutoStructuredGuide  # noqa: E402

NAME = "sampler_work"
NUM_PARTICLES = 4


def chain_problem(length, n=20, seed=0):
    """A chain ``X -> c1 -> ... -> c<length>`` built like ``tree_scaling.make_problem`` (one child per node): one-parent
    GP draws by random Fourier features, squashed by tanh; the last node observed with N(0, 0.05²) noise."""
    import networkx as nx

    gen = torch.Generator().manual_seed(seed)
    g = nx.DiGraph([("X", "c1")] + [(f"c{k}", f"c{k + 1}") for k in range(1, length)])
    X = torch.rand(n, 2, dtype=torch.float64, generator=gen) * 4 - 2
    value = X
    for k in range(1, length + 1):
        f = ts.rff_draw(value, 1.2 if k == 1 else 0.9, gen)
        value = torch.tanh(f + 0.05 * torch.randn(f.shape, dtype=f.dtype, generator=gen))
    return g, {"X": X}, {f"c{length}": value + 0.05 * torch.randn(n, 1, dtype=torch.float64, generator=gen)}


def problems(args):
    out = []
    for depth in args.depths:
        out.append((f"tree depth {depth}", "tree", depth, lambda d=depth: ts.make_problem(d), 1.0, [args.train_steps]))
    for length in args.chains:
        out.append((f"chain length {length}", "chain", length, lambda k=length: chain_problem(k), 1.0,
                    [args.train_steps]))
    if args.collider:
        ds = collider(0)
        out.append(("collider", "collider", 2, lambda: (ds, ds.inputs, ds.data), {"w3": 0.01}, [0, 500]))
    return out


def structure(model, guide):
    """Structural counts of the model and of the guide's elimination tree (what a rule can read without running)."""
    post = guide.inducing_posterior()
    f = post.factor
    paths = [len(f.path(w)) for w in model.gp_nodes]
    return {"gp_nodes": len(model.gp_nodes), "sinks": sum(model.graph.out_degree(w) == 0 for w in model.gp_nodes),
            "path_blocks": sum(paths), "mean_path": sum(paths) / len(paths), "max_path": max(paths),
            "inducing_dim": post.size}


def draws(elbo, model, guide, inputs, data, n):
    """``n`` gradient draws ``[n, P]`` and the CPU seconds per draw."""
    params = list(guide.parameters())
    out = []
    c = time.process_time()
    for _ in range(n):
        loss = elbo.differentiable_loss(model, guide, inputs, data)
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        out.append(torch.cat([torch.zeros(p.numel(), dtype=p.dtype) if g is None else g.reshape(-1)
                              for g, p in zip(grads, params)]))
    return torch.stack(out), (time.process_time() - c) / n


def measure(name, kind, size, make, init_scale, stages, args):
    rows = []
    pyro.set_rng_seed(0)
    pyro.clear_param_store()
    if kind == "collider":
        ds, inputs, data = make()
        model = collider_model(ds)
    else:
        g, inputs, data = make()
        # the noise and kernels of the pre-rule defaults (noise variance 0.1, learned; unit kernels), as in
        # gradient_variance.py's tree row: with the noise rule (noise="auto") the pilot GP on the root fits the
        # 20 leaves' cases almost exactly, and after 100 steps the ELBO is still about -4e8, its gradients ~1e8
        model = DAGDGP(g, num_inducing=20, noise="learned", kernel_init="default").double()
    model.setup(inputs, data)
    guide = AutoStructuredGuide(model, precision="chordal", backend="sparse", init_scale=init_scale, name="chordal")
    guide(inputs, data)
    mf = AutoStructuredGuide(model, precision="mean_field", init_scale=init_scale, name="mf")
    mf(inputs, data)
    svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=NUM_PARTICLES))
    done = 0
    for stage in stages:
        for _ in range(stage - done):
            svi.step(inputs, data)
        done = stage
        row = {"problem": name, "kind": kind, "size": size, "train_steps": stage, **structure(model, guide)}
        grads = {"conditional": [], "joint": []}
        secs = {"conditional": [], "joint": [], "mean_field": []}
        blocks = max(1, args.draws // args.block)
        pyro.set_rng_seed(1)
        for b in range(blocks):
            order = ["conditional", "joint"] if b % 2 == 0 else ["joint", "conditional"]
            for key in order + ["mean_field"]:
                if key == "mean_field":
                    _, s = draws(DAGELBO(num_particles=NUM_PARTICLES), model, mf, inputs, data, 1)
                else:
                    gr, s = draws(DAGELBO(num_particles=NUM_PARTICLES, sampler=key), model, guide, inputs, data,
                                  args.block)
                    grads[key].append(gr)
                secs[key].append(s)
        var = {}
        for key in ("conditional", "joint"):
            gr = torch.cat(grads[key])
            var[key] = gr.var(0)
            row[f"var_{key}"] = var[key].sum().item()
            row[f"draws_{key}"] = gr.shape[0]
        # the total is dominated by the parameters with the largest gradients; Adam scales each coordinate, so also
        # the geometric mean over coordinates of the per-coordinate variance ratio
        both = (var["conditional"] > 0) & (var["joint"] > 0)
        row["var_ratio_geomean"] = (var["joint"][both] / var["conditional"][both]).log().mean().exp().item()
        for key, s in secs.items():
            row[f"cpu_s_{key}"] = sorted(s)[len(s) // 2]
        row["work_ratio"] = (row["var_joint"] * row["cpu_s_joint"]) / (row["var_conditional"] *
                                                                        row["cpu_s_conditional"])
        row["load"] = os.getloadavg()[0]
        row["code"] = code_state_after()   # with the modules this process ran
        rows.append(row)
        print(row, flush=True)
    return rows


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--depths", type=int, nargs="*", default=[2, 3, 4, 5, 6, 7])
    parser.add_argument("--chains", type=int, nargs="*", default=[3, 6])
    parser.add_argument("--no-collider", dest="collider", action="store_false")
    parser.add_argument("--draws", type=int, default=64, help="gradient draws per sampler")
    parser.add_argument("--block", type=int, default=8, help="draws per timing block")
    parser.add_argument("--train-steps", type=int, default=100)
    parser.add_argument("--merge", action="store_true", help="keep the stored rows of problems not run now")
    args = parser.parse_args()
    one_thread()
    rows = []
    for spec in problems(args):
        rows += measure(*spec, args)
    path = os.path.join(RESULTS, f"{NAME}.json")
    if args.merge and os.path.exists(path):
        ran = {r["problem"] for r in rows}
        rows = [r for r in json.load(open(path))["rows"] if r["problem"] not in ran] + rows
    order = {"tree": 0, "chain": 1, "collider": 2}
    rows.sort(key=lambda r: (order[r["kind"]], r["size"], r["train_steps"]))
    settings = {"draws": args.draws, "block": args.block, "train_steps": args.train_steps,
                "num_particles": NUM_PARTICLES, "guide": "chordal, sparse backend", "lr": 0.01}
    write_json(NAME, {"settings": settings, "rows": rows})
    write_readme_section(NAME, "")


if __name__ == "__main__":
    main()
