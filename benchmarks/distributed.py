"""Data-parallel minibatch SVI on torch.distributed (gloo, CPU): 1 vs 2 processes on a synthetic DAG.

The DAG x1, x2 -> a -> b (a, b observed; a a latent-input-free two-layer DAG-DGP) with n = 200 000 cases; each
process holds n / R of them (``pyro_dag.infer.distributed.shard``) and draws minibatches of ``--batch`` cases
from its shard (so R processes see R x batch cases per step), one thread per process, Adam steps of
``train(..., distributed=True)``. Measured per configuration: seconds per step (median of the timed steps after
the warm-up), throughput (cases per second, all processes together), and the peak resident memory of each
process (``ru_maxrss``). Configurations: one plain process (no process group), one gloo process, two gloo
processes. The machine's load average is recorded before and after: on a shared machine the ratio is a
lower bound on what dedicated cores give.

    python benchmarks/distributed.py [--n 200000] [--batch 512] [--steps 20] [--warmup 5] [--repeats 3]

The configurations run interleaved, ``--repeats`` times each; the table gives the median over the repeats of
each run's median step time, and the fastest run.
"""
import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from common import one_thread, write_json, write_readme_section  # noqa: E402


def data(n, seed=0):
    import torch

    g = torch.Generator().manual_seed(seed)
    x1 = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
    x2 = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
    a = torch.sin(1.5 * x1) + 0.5 * x2 + 0.1 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    b = torch.tanh(2 * a) + 0.1 * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return {"x1": x1, "x2": x2}, {"a": a, "b": b}


def worker(args, out):
    one_thread()
    import networkx as nx
    import pyro
    import torch

    from pyro_dag import DAGDGP
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide
    from pyro_dag.infer.distributed import init_process_group, shard

    distributed = "RANK" in os.environ
    rank, world = init_process_group("gloo") if distributed else (0, 1)
    pyro.set_rng_seed(rank)
    t0 = time.perf_counter()
    inputs, obs = data(args.n)
    if distributed:
        inputs, obs = shard(inputs, obs)
    graph = nx.DiGraph([("x1", "a"), ("x2", "a"), ("a", "b")])
    model = DAGDGP(graph, num_inducing=args.num_inducing).double()
    guide = AutoStructuredGuide(model, init_scale=0.1)
    stamps = []
    setup = time.perf_counter() - t0
    result = train(model, guide, inputs, obs, num_steps=args.warmup + args.steps, recipe="adam", lr=0.01,
                   distributed=distributed, progress=False, model_kwargs={"subsample_size": args.batch},
                   callbacks=[lambda s, loss: stamps.append(time.perf_counter()) and False])
    step_times = sorted(b - a for a, b in zip(stamps[args.warmup - 1:], stamps[args.warmup:]))
    record = {"rank": rank, "world_size": world, "distributed": distributed, "shard_cases": len(obs["a"]),
              "setup_seconds": setup, "median_step_seconds": step_times[len(step_times) // 2],
              "final_loss": result.losses[-1],
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump(record, f)
    if distributed:  # the communication of one step alone: one all-reduce of the global gradients and the loss
        size = sum(p.numel() for _, p in pyro.get_param_store().named_parameters())
        buf = torch.zeros(size + 1, dtype=torch.float64)
        times = []
        for _ in range(50):
            t = time.perf_counter()
            torch.distributed.all_reduce(buf)
            times.append(time.perf_counter() - t)
        record["allreduce_elements"] = size + 1
        record["allreduce_median_seconds"] = sorted(times)[len(times) // 2]
        with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
            json.dump(record, f)
        torch.distributed.destroy_process_group()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_config(args, world, distributed):
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", out] + _pass_through(args)
        port = _free_port()
        procs = []
        for rank in range(world):
            env = dict(os.environ, OMP_NUM_THREADS="1")
            if distributed:
                env.update(RANK=str(rank), WORLD_SIZE=str(world), LOCAL_RANK=str(rank), MASTER_ADDR="127.0.0.1",
                           MASTER_PORT=str(port))
            procs.append(subprocess.Popen(cmd, env=env))
        for p in procs:
            if p.wait() != 0:
                raise RuntimeError(f"a worker of the {world}-process run failed (exit {p.returncode})")
        ranks = [json.load(open(os.path.join(out, f"rank{r}.json"))) for r in range(world)]
    step = max(r["median_step_seconds"] for r in ranks)
    return {"processes": world, "distributed": distributed, "cases_per_step": world * args.batch,
            "median_step_seconds": step, "throughput_cases_per_second": world * args.batch / step,
            "peak_rss_mib_per_process": [r["peak_rss_mib"] for r in ranks],
            "setup_seconds": [r["setup_seconds"] for r in ranks], "shard_cases": [r["shard_cases"] for r in ranks],
            "final_loss": ranks[0]["final_loss"], "allreduce_elements": ranks[0].get("allreduce_elements"),
            "allreduce_median_seconds": max(r.get("allreduce_median_seconds") or 0.0 for r in ranks)}


def _pass_through(args):
    return ["--n", str(args.n), "--batch", str(args.batch), "--steps", str(args.steps), "--warmup",
            str(args.warmup), "--num-inducing", str(args.num_inducing)]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200_000)
    parser.add_argument("--batch", type=int, default=512, help="minibatch per process")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--num-inducing", type=int, default=16)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-readme", action="store_true", help="a trial: print, write neither README nor JSON")
    parser.add_argument("--render", action="store_true", help="rewrite the README section from the saved JSON")
    args = parser.parse_args()
    if args.render:
        with open(os.path.join(HERE, "results", "distributed.json")) as f:
            return write_readme_section("distributed", render(json.load(f)))
    if args.worker is not None:
        return worker(args, args.worker)
    load_before = os.getloadavg()
    configs = [(1, False), (1, True), (2, True)]
    raw = {c: [] for c in configs}
    for _ in range(args.repeats):
        for c in configs:
            raw[c].append(run_config(args, *c))
    load_after = os.getloadavg()
    runs = []
    for c in configs:
        reps = raw[c]
        times = sorted(r["median_step_seconds"] for r in reps)
        ar = sorted(r["allreduce_median_seconds"] for r in reps)
        run = dict(reps[0], median_step_seconds=times[len(times) // 2], fastest_step_seconds=times[0],
                   allreduce_median_seconds=ar[len(ar) // 2],
                   repeat_step_seconds=[r["median_step_seconds"] for r in reps],
                   peak_rss_mib_per_process=[max(r["peak_rss_mib_per_process"][k] for r in reps)
                                             for k in range(c[0])])
        run["throughput_cases_per_second"] = run["cases_per_step"] / run["median_step_seconds"]
        run["fastest_throughput_cases_per_second"] = run["cases_per_step"] / run["fastest_step_seconds"]
        runs.append(run)
    ratio = runs[2]["throughput_cases_per_second"] / runs[1]["throughput_cases_per_second"]
    ratio_fastest = runs[2]["fastest_throughput_cases_per_second"] / runs[1]["fastest_throughput_cases_per_second"]
    payload = {"n": args.n, "batch_per_process": args.batch, "timed_steps": args.steps, "warmup": args.warmup,
               "num_inducing": args.num_inducing, "runs": runs, "throughput_ratio_2_vs_1": ratio,
               "throughput_ratio_2_vs_1_fastest_runs": ratio_fastest, "repeats": args.repeats,
               "load_average_before": load_before, "load_average_after": load_after, "cores": os.cpu_count()}
    text = render(payload)
    print(text)
    if not args.no_readme:
        print(f"wrote {write_json('distributed', payload)}")
        write_readme_section("distributed", text)


def render(d):
    """The README section from the JSON payload (``--render`` re-renders the saved results)."""
    runs = d["runs"]
    rows = ["| processes | process group | cases / step | s / step (median; fastest run) | cases / s (median) | "
            "peak RSS per process (MiB) |", "|---|---|---|---|---|---|"]
    for r in runs:
        rows.append(f"| {r['processes']} | {'gloo' if r['distributed'] else 'none'} | {r['cases_per_step']} | "
                    f"{r['median_step_seconds']:.3f}; {r['fastest_step_seconds']:.3f} | "
                    f"{r['throughput_cases_per_second']:.0f} | "
                    f"{', '.join(f'{m:.0f}' for m in r['peak_rss_mib_per_process'])} |")
    rss1, rss2 = runs[1]["peak_rss_mib_per_process"][0], max(runs[2]["peak_rss_mib_per_process"])
    return (f"### Data-parallel SVI (`benchmarks/distributed.py`)\n\n"
            f"Synthetic DAG x1, x2 → a → b, n = {d['n']} cases sharded over the processes, minibatch "
            f"{d['batch_per_process']} cases per process, {d['num_inducing']} inducing points per node, Adam steps "
            f"of `train(..., distributed=True)`, float64, one thread per process; each run's median of "
            f"{d['timed_steps']} steps after {d['warmup']} warm-up steps, {d['repeats']} interleaved runs per "
            f"configuration.\n\n" + "\n".join(rows) +
            f"\n\nThroughput ratio, 2 vs 1 gloo processes: **{d['throughput_ratio_2_vs_1']:.2f}×** (median runs; "
            f"{d['throughput_ratio_2_vs_1_fastest_runs']:.2f}× between the fastest runs). **Measured on a "
            f"{d['cores']}-core machine shared with other jobs** (load average {d['load_average_before'][0]:.1f} "
            f"before, {d['load_average_after'][0]:.1f} after, per minute): the processes competed with other work "
            f"for the two cores, so this ratio says little about dedicated cores (not measured here; the per-step "
            f"communication is one all-reduce of a flat buffer of the global gradients and the loss: "
            f"{runs[2]['allreduce_elements']} float64 numbers, {1e3 * runs[2]['allreduce_median_seconds']:.2f} ms "
            f"alone with 2 processes, against {1e3 * runs[2]['median_step_seconds']:.0f} ms per step). One process "
            f"in a gloo group: {1e3 * runs[1]['median_step_seconds']:.0f} ms per step, without a group "
            f"{1e3 * runs[0]['median_step_seconds']:.0f} ms. Peak resident memory per process is "
            f"mostly the interpreter and torch (about 335 MiB in a trial run at n = 2 000); the rest grows with "
            f"the process's "
            f"shard ({rss1:.0f} MiB with all {d['n']} cases, {rss2:.0f} MiB with half).\n")

if __name__ == "__main__":
    main()
