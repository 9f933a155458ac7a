"""The prior-collapse diagnostics of pyro_dag.diagnostics against the theory-validation simulations of
Perlino et al. 2026 (arXiv:2607.09645, App. G.2, Fig. 3 a-b), at reduced Monte Carlo sizes.

(a) Theorem 1: a layered DAG (depth 60, width 16), one root coordinate with r(a) = 0, r(b) = 0.3; each node picks
    one parent uniformly in the previous slice; non-separating nodes have an SE kernel on the parent (variance 1,
    length-scale 1), separating nodes add an SE root component (same hyperparameters, Remark 2); exactly s
    separating nodes per slice. Statistic: the fraction of slices l in [30, 60) with M_l > ε = 0.3, against the
    bound 1 - (1 - p_ε)^s of :func:`pyro_dag.diagnostics.theorem1_bound` with v⋆ = 2(1 - exp(-0.3²/2)).
(b) Prop. 4: product (SE) fusion, depth 50, width 128, variance 1, parent length-scale 2.0, root length-scale 0.8,
    root gap 1.0, in-degree k in {1, 2, 4, 8} (k consecutive parents with wrap-around): the Monte Carlo
    C_l = E||Δ_w||² (the same for every node of a slice here, pooled over them) against the recursion bound of
    :func:`pyro_dag.diagnostics.product_fusion_recursion`.

Usage: ``python benchmarks/prior_collapse.py [--realisations 300] [--draws 400]``.
"""
import argparse
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import write_json, write_readme_section  # noqa: E402
from pyro_dag.diagnostics import product_fusion_recursion, theorem1_bound  # noqa: E402


def fig3a(s, realisations, depth=60, width=16, burn=30, eps=0.3, seed=0):
    rng = np.random.default_rng(seed + s)
    ra, rb = 0.0, 0.3
    k_root = math.exp(-(ra - rb) ** 2 / 2)
    fa = np.full((realisations, width), ra)
    fb = np.full((realisations, width), rb)
    hits = []
    sep = np.arange(width) < s
    for level in range(depth):
        par = rng.integers(0, width, size=(realisations, width))
        pa, pb = np.take_along_axis(fa, par, 1), np.take_along_axis(fb, par, 1)
        k = np.exp(-(pa - pb) ** 2 / 2)
        var = np.where(sep, 2.0, 1.0)
        rho = np.clip(np.where(sep, k + k_root, k) / var, -1, 1)
        z1, z2 = rng.standard_normal((2, realisations, width))
        fa = np.sqrt(var) * z1
        fb = np.sqrt(var) * (rho * z1 + np.sqrt(1 - rho ** 2) * z2)
        if level >= burn:
            hits.append(np.abs(fa - fb).max(1) > eps)
    return np.mean(hits, axis=0)


def fig3b(k, draws, depth=50, width=128, lengthscale=2.0, root_ls=0.8, gap=1.0, seed=0):
    """Product SE fusion over k parents == SE on the concatenation: Δ_w | parents ~ N(0, 2(1 - κ(ϱ²)))."""
    rng = np.random.default_rng(seed + k)
    var0 = 2 * (1 - math.exp(-gap ** 2 / (2 * root_ls ** 2)))
    delta = math.sqrt(var0) * rng.standard_normal((draws, width))  # first antichain from the two fixed roots
    c_mc, c_bound = [float((delta ** 2).mean())], [var0]
    idx = (np.arange(width)[:, None] + np.arange(k)[None, :]) % width
    for _ in range(1, depth):
        rho2 = (delta[:, idx] ** 2).sum(-1)
        delta = np.sqrt(2 * (1 - np.exp(-rho2 / (2 * lengthscale ** 2)))) * rng.standard_normal((draws, width))
        c_mc.append(float((delta ** 2).mean()))  # the nodes are exchangeable: pool them (a max over noisy
        # per-node means would be biased upwards)
        c_bound.append(float(product_fusion_recursion(c_bound[-1], 1, 1.0, lengthscale, k)))
    return c_mc, c_bound


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--realisations", type=int, default=300, help="per s (the paper: 1500)")
    p.add_argument("--draws", type=int, default=400, help="MC draws for (b) (the paper: 2400)")
    args = p.parse_args()
    v_star = 2 * (1 - math.exp(-0.3 ** 2 / 2))
    a = []
    for s in range(11):
        rho = fig3a(s, args.realisations)
        a.append({"s": s, "mean": float(rho.mean()), "std": float(rho.std()),
                  "bound": float(theorem1_bound(0.3, v_star, s))})
    b = {}
    for k in (1, 2, 4, 8):
        c_mc, c_bound = fig3b(k, args.draws)
        b[k] = {"C_mc": c_mc, "C_bound": c_bound,
                "bound_holds": bool(all(m <= bd * 1.05 + 1e-3 for m, bd in zip(c_mc, c_bound)))}
    res = {"fig3a": a, "fig3b": {str(k): v for k, v in b.items()}, "realisations": args.realisations,
           "draws": args.draws}
    write_json("prior_collapse", res)
    lines = ["### Prior-collapse diagnostics against Perlino et al. 2026, Fig. 3 (a, b)", "",
             f"`python benchmarks/prior_collapse.py --realisations {args.realisations} --draws {args.draws}` "
             "(the paper: 1500 realisations, 2400 draws).", "",
             "(a) Theorem 1: fraction of slices 30-59 with M_l > 0.3 (mean ± sd over realisations) against "
             "`theorem1_bound(0.3, v⋆, s)`:", "", "| s | " + " | ".join(str(r["s"]) for r in a) + " |",
             "|---|" + "---|" * len(a),
             "| simulated | " + " | ".join(f"{r['mean']:.2f}±{r['std']:.2f}" for r in a) + " |",
             "| bound | " + " | ".join(f"{r['bound']:.2f}" for r in a) + " |", "",
             "(b) Prop. 4, product SE fusion: C_l = E||Δ_w||² at depths 1, 5, 10, 49 (Monte Carlo / "
             "`product_fusion_recursion` bound):", "", "| k | l = 1 | l = 5 | l = 10 | l = 49 |",
             "|---|---|---|---|---|"]
    for k, v in b.items():
        lines.append(f"| {k} | " + " | ".join(f"{v['C_mc'][i]:.3f} / {v['C_bound'][i]:.3f}" for i in (1, 5, 10, 49))
                     + " |")
    write_readme_section("prior_collapse", "\n".join(lines))
    for r in a:
        print(r)
    for k, v in b.items():
        print(k, [round(v["C_mc"][i], 3) for i in (1, 5, 10, 49)], [round(v["C_bound"][i], 3) for i in (1, 5, 10, 49)])


if __name__ == "__main__":
    main()
