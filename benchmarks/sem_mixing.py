"""MCMC mixing of identified vs unidentified measurement models (Silva & Gramacy 2010, arXiv:1002.4802, Sec. 5,
Figs. 4-5): split-EPSR (Gelman-Rubin R-hat, ``pyro.ops.stats.split_gelman_rubin``) of every latent value across
chains, for the identified sparse measurement model (one latent parent per indicator, one anchor per latent) and
the dense unidentified one (every indicator on every latent, no fixed coefficient, ``check_identifiability=False``).

Data: :func:`pyro_dag.datasets.latent_sem.consumer_like_sem` (the paper's Consumer DAG X1 -> X2, X1 -> X3,
X2 -> X3, X2 -> X4, four indicators each; a synthetic stand-in for the Consumer data, which is not shipped),
``--n`` cases. NUTS (JIT), ``--chains`` chains from jittered starting points (each chain its own seed), ``--warmup``
/ ``--samples``, ``--num-inducing`` pseudo-inputs per GP.

    python benchmarks/sem_mixing.py [--n 333] [--chains 5] [--warmup 200 --samples 200] [--num-inducing 20]

Writes the per-case EPSR values to the JSON and boxplots per latent (the paper's Fig. 5) to
``results/sem_mixing.png``.
"""
import argparse
import warnings

import numpy as np
import torch
from pyro.ops.stats import split_gelman_rubin

from common import RESULTS, one_thread, write_json, write_readme_section
from sem_common import fit_nuts

from pyro_dag.datasets.latent_sem import consumer_like_sem
from pyro_dag.sem import LatentSEM


def epsr(model_kwargs, data, args):
    chains, secs_all, divs = [], [], []
    for c in range(args.chains):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = LatentSEM(data.structure, data.indicators, **model_kwargs, num_inducing=args.num_inducing)
        samples, secs, mcmc = fit_nuts(model, data.data, warmup=args.warmup, num_samples=args.samples, seed=c,
                                       jitter=0.5, max_tree_depth=args.max_tree_depth)
        secs_all.append(secs)
        divs.append(len(mcmc.diagnostics()["divergences"]["chain 0"]))
        chains.append(torch.stack([samples[f"{x}.x"] for x in model.latents], -1))  # [S, n, V]
        print("chain", c, model_kwargs.get("measurement", "sparse"), f"{secs:.0f}s", flush=True)
    x = torch.stack(chains)  # [C, S, n, V]
    r = split_gelman_rubin(x, chain_dim=0, sample_dim=1).numpy()  # [n, V]
    out = {lat: {"median": float(np.median(r[:, v])), "q90": float(np.quantile(r[:, v], 0.9)),
                 "frac_above_1.1": float((r[:, v] > 1.1).mean()), "epsr": r[:, v].tolist()}
           for v, lat in enumerate(model.latents)}
    out["_run"] = {"seconds_per_chain": secs_all, "divergences_per_chain": divs}
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
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--samples", type=int, default=200)
    p.add_argument("--num-inducing", type=int, default=20)
    p.add_argument("--max-tree-depth", type=int, default=6)
    p.add_argument("--note", default="", help="a sentence printed with the table (e.g. the machine load)")
    args = p.parse_args()
    one_thread()
    torch.set_default_dtype(torch.float64)
    data = consumer_like_sem(n=args.n, seed=0)
    res = {"identified": epsr({"anchors": data.anchors}, data, args),
           "dense": epsr({"measurement": "dense", "check_identifiability": False}, data, args)}
    write_json("sem_mixing", {"args": vars(args), "results": res})
    boxplots(res, f"{RESULTS}/sem_mixing.png")
    rows = ["| measurement model | latent | median EPSR | 90 % quantile | fraction > 1.1 |", "|---|---|---|---|---|"]
    for kind, per in res.items():
        for lat, v in per.items():
            if lat.startswith("_"):
                continue
            rows.append(f"| {kind} | {lat} | {v['median']:.3f} | {v['q90']:.3f} | {v['frac_above_1.1']:.2f} |")
    text = f"""### Latent SEMs: MCMC mixing, identified vs dense measurement model (`benchmarks/sem_mixing.py`)

Silva & Gramacy (2010, arXiv:1002.4802, Sec. 5, Figs. 4-5) protocol on a synthetic stand-in for the Consumer data
(4 latents, DAG X1→X2, X1→X3, X2→X3, X2→X4, four indicators each, n = {args.n}): split-EPSR of every latent value
over {args.chains} NUTS chains ({args.warmup} warm-up + {args.samples} draws, jittered starts, M = {args.num_inducing}),
summarised per latent over the {args.n} cases. Boxplots: `results/sem_mixing.png`. NUTS divergences per chain:
identified {res["identified"]["_run"]["divergences_per_chain"]}, dense {res["dense"]["_run"]["divergences_per_chain"]}.
{args.note}

""" + "\n".join(rows)
    write_readme_section("sem-mixing", text)


if __name__ == "__main__":
    main()
