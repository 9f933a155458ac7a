"""AutoStructuredGuide on a plain Pyro model (no DAGDGP): a three-level linear-Gaussian hierarchy.

``mu ~ N(0, 1)``; group means ``m_g ~ N(mu, 1)`` (G sites); sub-group means ``s_gk ~ N(m_g, 0.5²)``
(G·K sites); six observations per sub-group ``y ~ N(s_gk, 0.3²)``. The posterior is Gaussian with a
tree-structured precision, so the chordal structured guide, Pyro's AutoGaussian and AutoMultivariateNormal
all contain it: each should reach the exact log evidence. We report -ELBO after the same number of Trace_ELBO
steps (estimated with 2000 particles), the exact -log p(y), and milliseconds per step, in one run.

    python benchmarks/generic_hierarchical.py [--groups 5] [--subgroups 4] [--steps 2000]
"""
import argparse
import time

import pyro
import pyro.distributions as dist
import torch
from common import one_thread, write_json, write_readme_section
from pyro.infer import SVI, Trace_ELBO
from pyro.infer.autoguide import AutoGaussian, AutoMultivariateNormal

from pyro_dag.infer.autoguide import AutoStructuredGuide


def make_model(G, K, n=6, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ys = torch.randn(G, K, n, generator=gen)  # float32: AutoGaussian fails in float64 (pyro 1.9.2)

    def model():
        mu = pyro.sample("mu", dist.Normal(torch.tensor(0.0), 1.0))
        for a in range(G):
            m = pyro.sample(f"m{a}", dist.Normal(mu, 1.0))
            for b in range(K):
                s = pyro.sample(f"s{a}_{b}", dist.Normal(m, 0.5))
                with pyro.plate(f"obs{a}_{b}", n):
                    pyro.sample(f"y{a}_{b}", dist.Normal(s, 0.3), obs=ys[a, b])

    # exact evidence: y = A z + noise with z = (mu, m, s) jointly Gaussian
    nz = 1 + G + G * K
    C = torch.zeros(nz, nz, dtype=torch.float64)  # z = C e, e ~ N(0, I)
    C[0, 0] = 1.0
    for a in range(G):
        C[1 + a] = C[0]
        C[1 + a, 1 + a] = 1.0
        for b in range(K):
            i = 1 + G + a * K + b
            C[i] = C[1 + a]
            C[i, i] = 0.5
    A = torch.zeros(G * K * n, nz, dtype=torch.float64)
    for a in range(G):
        for b in range(K):
            A[(a * K + b) * n:(a * K + b + 1) * n, 1 + G + a * K + b] = 1.0
    cov = A @ C @ C.T @ A.T + 0.09 * torch.eye(G * K * n, dtype=torch.float64)
    evidence = torch.distributions.MultivariateNormal(torch.zeros(G * K * n, dtype=torch.float64), cov)
    return model, -evidence.log_prob(ys.reshape(-1).double()).item()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", type=int, default=5)
    parser.add_argument("--subgroups", type=int, default=4)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    one_thread()
    model, exact = make_model(args.groups, args.subgroups)
    guides = {
        "AutoStructuredGuide (chordal, dense)": lambda: AutoStructuredGuide(model, backend="dense"),
        "AutoStructuredGuide (chordal, sparse)": lambda: AutoStructuredGuide(model, backend="sparse"),
        "AutoGaussian": lambda: AutoGaussian(model),
        "AutoMultivariateNormal": lambda: AutoMultivariateNormal(model),
    }
    rows = []
    for name, make in guides.items():
        pyro.clear_param_store()
        pyro.set_rng_seed(0)
        guide = make()
        svi = SVI(model, guide, pyro.optim.Adam({"lr": 0.02}), Trace_ELBO())
        svi.step()
        t = time.perf_counter()
        for _ in range(args.steps):
            svi.step()
        ms = (time.perf_counter() - t) / args.steps * 1e3
        with torch.no_grad():
            neg_elbo = Trace_ELBO(num_particles=2000, vectorize_particles=True).loss(model, guide)
        rows.append({"guide": name, "neg_elbo": neg_elbo, "ms_per_step": ms, "gap_to_exact": neg_elbo - exact})
        print(rows[-1], flush=True)
    write_json("generic_hierarchical", {"settings": vars(args), "exact_neg_log_evidence": exact, "rows": rows})
    latent = 1 + args.groups + args.groups * args.subgroups
    lines = ["## AutoStructuredGuide on a plain Pyro model (no DAGDGP)", "",
             f"`python benchmarks/generic_hierarchical.py`: three-level linear-Gaussian hierarchy, {latent} scalar "
             f"latent sites, {args.steps} Trace_ELBO steps (Adam lr 0.02, one thread); -ELBO estimated with 2000 "
             f"particles; exact -log p(y) = {exact:.3f}.", "",
             "| guide | -ELBO | gap to exact | ms / step |", "|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['guide']} | {r['neg_elbo']:.3f} | {r['gap_to_exact']:.3f} | {r['ms_per_step']:.1f} |")
    lines += ["", "Every guide runs with its default initialisation. AutoStructuredGuide's defaults on a non-DAGDGP model "
              "are AutoMultivariateNormal's (`init_loc_fn=init_to_median`, `init_scale=0.1`) since the Pyro-conformance "
              "work; with the earlier defaults (`init_to_sample`, `init_scale=1.0`) its rows read 608.462 (gap 0.714). "
              "Milliseconds are side by side in one run; absolute values depend on the machine's load."]
    write_readme_section("generic-hierarchical", "\n".join(lines))


if __name__ == "__main__":
    main()
