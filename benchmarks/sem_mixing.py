"""MCMC mixing of identified vs unidentified measurement models (Silva & Gramacy 2010, arXiv:1002.4802, Sec. 5,
Figs. 4-5): split-EPSR (Gelman-Rubin R-hat, ``pyro.ops.stats.split_gelman_rubin``) of every latent value across
chains, for the identified sparse measurement model (one latent parent per indicator, one anchor per latent) and
the dense unidentified one (every indicator on every latent, no fixed coefficient, ``check_identifiability=False``).

Data: :func:`pyro_dag.datasets.latent_sem.consumer_like_sem` (the paper's Consumer DAG X1 -> X2, X1 -> X3,
X2 -> X3, X2 -> X4, four indicators each; a synthetic stand-in for the Consumer data, which is not shipped),
``--n`` cases. NUTS (JIT), ``--chains`` chains, ``--warmup`` / ``--samples``, ``--num-inducing`` pseudo-inputs per
GP. Chain ``c`` has seed ``c`` in both models and the same starting latent values in both: the anchors' averages of
the standardised indicators (:meth:`~pyro_dag.sem.LatentSEM.initial_latent_values` of the identified model), each
value ``v`` perturbed by ``0.5 (|v| + 0.1) N(0, 1)`` (over-dispersed starts, as EPSR asks); the other sites start at
each model's own ``init_loc_fn``, jittered the same way. The chains of the two models alternate, so a run that is cut
short has the same chains for both.

    python benchmarks/sem_mixing.py [--n 333] [--chains 5] [--warmup 150 --samples 150] [--num-inducing 10]

Each finished chain is saved under ``--chain-dir`` (latent draws, seconds, CPU seconds, divergences) and reused by a
later run with the same settings, so the study resumes. Writes the per-case EPSR values to the JSON and boxplots per
latent (the paper's Fig. 5) to ``results/sem_mixing.png``.
"""
import argparse
import os
import time
import warnings

import numpy as np
import torch
from pyro.ops.stats import split_gelman_rubin

from common import RESULTS, one_thread, write_json, write_readme_section
from sem_common import fit_nuts

from pyro_dag.datasets.latent_sem import consumer_like_sem
from pyro_dag.sem import LatentSEM

KINDS = {"identified": lambda data: {"anchors": data.anchors},
         "dense": lambda data: {"measurement": "dense", "check_identifiability": False}}


def build(kind, data, args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LatentSEM(data.graph, data.indicators, **KINDS[kind](data), num_inducing=args.num_inducing)


def latent_starts(data, args, chain):
    """``{"X.x": [n]}``: chain ``chain``'s starting latent values, shared by both models."""
    model = build("identified", data, args)
    model(data.data)  # fit the standardisation
    gen = torch.Generator().manual_seed(1000 + chain)
    return {f"{x}.x": v + 0.5 * (v.abs() + 0.1) * torch.randn(v.shape, generator=gen, dtype=v.dtype)
            for x, v in model.initial_latent_values().items()}


def run_chain(kind, chain, data, args):
    """One NUTS chain of one model, loaded from ``--chain-dir`` when a run with the same settings saved it."""
    tag = f"{kind}_n{args.n}_M{args.num_inducing}_d{args.max_tree_depth}_w{args.warmup}_s{args.samples}_c{chain}"
    path = os.path.join(args.chain_dir, tag + ".pt")
    if os.path.exists(path):
        return torch.load(path)
    model = build(kind, data, args)
    cpu = time.process_time()
    samples, secs, mcmc = fit_nuts(model, data.data, warmup=args.warmup, num_samples=args.samples, seed=chain,
                                   jitter=0.5, max_tree_depth=args.max_tree_depth,
                                   init_values=latent_starts(data, args, chain))
    out = {"x": torch.stack([samples[f"{x}.x"] for x in model.latents], -1),  # [S, n, V]
           "latents": list(model.latents), "seconds": secs, "cpu_seconds": time.process_time() - cpu,
           "divergences": len(mcmc.diagnostics()["divergences"]["chain 0"]),
           "step_size": float(mcmc.kernel.step_size)}
    os.makedirs(args.chain_dir, exist_ok=True)
    torch.save(out, path)
    print(kind, "chain", chain, f"{secs:.0f} s, {out['cpu_seconds']:.0f} CPU s, {out['divergences']} divergences",
          flush=True)
    return out


def epsr(chains, args):
    """Per-latent summary of the split EPSR of each case's latent value over ``chains`` (dicts from :func:`run_chain`)."""
    x = torch.stack([c["x"] for c in chains])  # [C, S, n, V]
    r = split_gelman_rubin(x, chain_dim=0, sample_dim=1).numpy()  # [n, V]
    out = {lat: {"median": float(np.median(r[:, v])), "q90": float(np.quantile(r[:, v], 0.9)),
                 "frac_above_1.1": float((r[:, v] > 1.1).mean()), "epsr": r[:, v].tolist()}
           for v, lat in enumerate(chains[0]["latents"])}
    draws = len(chains) * (args.warmup + args.samples)
    out["_run"] = {"seconds_per_chain": [c["seconds"] for c in chains],
                   "cpu_seconds_per_chain": [c["cpu_seconds"] for c in chains],
                   "cpu_seconds_per_draw": sum(c["cpu_seconds"] for c in chains) / draws,
                   "divergences_per_chain": [c["divergences"] for c in chains],
                   "step_size_per_chain": [c["step_size"] for c in chains]}
    return out


def boxplots(res, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lats = [k for k in res["identified"] if not k.startswith("_")]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2), sharey=True)
    for ax, kind in zip(axes, ("identified", "dense")):
        ax.boxplot([res[kind][lat]["epsr"] for lat in lats], showfliers=True)
        ax.set_xticks(range(1, len(lats) + 1), lats)
        ax.axhline(1.1, color="grey", ls="--", lw=0.8)
        ax.set_title(f"{kind} measurement model")
    axes[0].set_ylabel("split EPSR of latent values")
    axes[0].set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=333)
    p.add_argument("--chains", type=int, default=5)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--samples", type=int, default=150)
    p.add_argument("--num-inducing", type=int, default=10)
    p.add_argument("--max-tree-depth", type=int, default=6)
    p.add_argument("--chain-dir", default="/tmp/sem_mixing_chains", help="where finished chains are kept")
    p.add_argument("--note", default="", help="a sentence printed with the table (e.g. the machine load)")
    args = p.parse_args()
    one_thread()
    torch.set_default_dtype(torch.float64)
    data = consumer_like_sem(n=args.n, seed=0)
    chains = {kind: [] for kind in KINDS}
    for c in range(args.chains):  # alternate the models, so that a cut run has the same chains for both
        for kind in KINDS:
            chains[kind].append(run_chain(kind, c, data, args))
    res = {kind: epsr(chains[kind], args) for kind in KINDS}
    write_json("sem_mixing", {"args": vars(args), "results": res})
    boxplots(res, f"{RESULTS}/sem_mixing.png")
    rows = ["| measurement model | latent | median EPSR | 90 % quantile | fraction > 1.1 |", "|---|---|---|---|---|"]
    for kind, per in res.items():
        for lat, v in per.items():
            if lat.startswith("_"):
                continue
            rows.append(f"| {kind} | {lat} | {v['median']:.3f} | {v['q90']:.3f} | {v['frac_above_1.1']:.2f} |")
    run = {kind: res[kind]["_run"] for kind in KINDS}
    text = f"""### Latent SEMs: MCMC mixing, identified vs dense measurement model (`benchmarks/sem_mixing.py`)

Silva & Gramacy (2010, arXiv:1002.4802, Sec. 5, Figs. 4-5) protocol on a synthetic stand-in for the Consumer data
(4 latents, DAG X1→X2, X1→X3, X2→X3, X2→X4, four indicators each, n = {args.n}): split-EPSR of every latent value
over {args.chains} NUTS chains per model ({args.warmup} warm-up + {args.samples} draws, max tree depth
{args.max_tree_depth}, M = {args.num_inducing}; chain c has seed c and the same over-dispersed starting latent values
in both models), summarised per latent over the {args.n} cases. Boxplots: `results/sem_mixing.png`. CPU seconds per
NUTS iteration (warm-up included): identified {run["identified"]["cpu_seconds_per_draw"]:.3f}, dense
{run["dense"]["cpu_seconds_per_draw"]:.3f}. NUTS divergences per chain (draws after warm-up): identified
{run["identified"]["divergences_per_chain"]}, dense {run["dense"]["divergences_per_chain"]}. Adapted step sizes:
identified {", ".join(f"{v:.3f}" for v in run["identified"]["step_size_per_chain"])}; dense
{", ".join(f"{v:.3f}" for v in run["dense"]["step_size_per_chain"])}.
Reproduce: `python benchmarks/sem_mixing.py --n {args.n} --chains {args.chains} --warmup {args.warmup} --samples
{args.samples} --num-inducing {args.num_inducing} --max-tree-depth {args.max_tree_depth}`.

""" + "\n".join(rows) + (f"\n\n{args.note}" if args.note else "")
    write_readme_section("sem-mixing", text)


if __name__ == "__main__":
    main()
