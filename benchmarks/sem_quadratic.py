"""Synthetic quadratic GPSEM-LV problem (Silva & Gramacy 2010, arXiv:1002.4802, Sec. 5, Fig. 3).

Data (the paper's, fully specified): ``X1 ~ N(0, 1)``, ``X2 = 4 X1² + ζ``, six indicators ``Y1..Y3 = X1 + ε``,
``Y4..Y6 = X2 + ε`` (all noises ``N(0, 1)``), N = 150, ``Y1`` / ``Y4`` anchors; GPSEM-LV with M = 50
pseudo-inputs (Gaussian empirical prior). Metric: ``corr(E[X2 | data], E[X1 | data]²)`` over the 150 cases
(target ≥ 0.9), plus the correlations of the posterior-mean latents with the true ones.

Methods:

* ``svi``: :func:`pyro_dag.sem.guides.sem_guide` (AutoStructuredGuide over the globals, point pseudo-inputs, one
  joint Gaussian per case over its latents; ``--local mean_field --pseudo-inputs random`` is the earlier guide), Trace_ELBO, ClippedAdam (lr 0.02 decayed to 0.002), ``--steps`` full-batch steps, 200 guide
  draws;
* ``nuts``: NUTS (JIT), ``--warmup`` / ``--samples``, max tree depth 7, one chain;
* ``gplvm``: ``pyro.contrib.gp.models.GPLVM`` (2 latent dimensions, sparse with 50 inducing points, ARD RBF,
  PCA initialisation, 3000 Adam steps); its latents are identified up to rotation, so the metric is reported
  for the axis order with the higher value and for the best rotation.

    python benchmarks/sem_quadratic.py [--seeds 0] [--steps 5000] [--warmup 300 --samples 300] [--keep]

``--keep`` keeps the results of methods (and seeds) not run now from the existing JSON, so a table can combine
an expensive NUTS run with a later SVI run; the JSON records which run each entry came from (``"run"``).
"""
import json
import os
import argparse
import time

import numpy as np
import torch

from common import RESULTS, one_thread, write_json, write_readme_section
from sem_common import best_rotation_quadratic_corr, fit_gplvm, fit_nuts, fit_svi

from pyro_dag.datasets.latent_sem import quadratic_sem
from pyro_dag.sem import LatentSEM
from pyro_dag.sem.predict import latent_means


# measured remarks on the committed run (seed 0), printed under the table
NOTE = """

Exact: the same statistic for the exact posterior means under the true parameters (grid over X1, X2 integrated in
closed form), the reference for every inference method (a short chain can land slightly above it by chance, as
NUTS on seed 1 does: 0.9863 vs 0.9856). Target (≥ 0.9) met with both inference paths on all three seeds:
SVI 0.919 / 0.971 / 0.907 (mean 0.932), NUTS 0.964 / 0.986 / 0.949 (mean 0.966). NUTS on seed 0 is the earlier run
(300 + 300, load about 14); seeds 1 and 2 ran 150 + 150 for time (load 4-6, nice 5), and seed 1 reproduced its
value to every printed digit in a second run. Every NUTS chain had divergent transitions after warm-up (50 of 300,
36 and 39 of 150), so these are single short chains with a warning, not a converged reference; the exact column is
the reference. The SVI guide changed before this run: the earlier `sem_guide` (independent `AutoNormal` per-case
latents and a Gaussian q over the 50 pseudo-inputs) gave 0.896 on seed 0 (0.899 after 10 000 steps); with the
per-case joint Gaussian alone 0.899 (3000 steps) and with point pseudo-inputs as well 0.916 at 1500 steps and 0.919 at
5000. Why: the ELBO's structural term E_q[(x2 - f(x1))²] / (2 υ_ζ) carries the spread of f over q(x̄, u) and,
with factorised locals, f'(x1)² Var_q(x1); the fit absorbs it in υ_ζ (0.26-0.32 on the standardised scale against
the true 0.03), which weakens what X2's indicators say about X1 (correlation of E[X1] with the true X1: 0.92 vs
0.95 for the exact posterior). Seconds: wall-clock on the shared 2-core machine under load (SVI at a load average
of about 6-8), one thread; not a speed comparison. The GPLVM does not recover the quadratic."""


RUN = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def exact_posterior_corr(data):
    """``corr(E[X2 | y], E[X1 | y]²)`` under the true parameters: a grid over X1 (4001 points on [-5, 5]) with X2
    integrated out in closed form (the three X2 indicators' mean is ``N(X2, 1/3)``, ``X2 | X1 ~ N(4 X1², 1)``)."""
    Y = data.data.to_numpy()
    g = np.linspace(-5, 5, 4001)
    ybar = Y[:, 3:].mean(1)
    lp = -0.5 * g[None] ** 2 - 0.5 * ((Y[:, :3, None] - g[None, None]) ** 2).sum(1)
    lp = lp - 0.5 * (ybar[:, None] - 4 * g[None] ** 2) ** 2 / (1 + 1 / 3)
    w = np.exp(lp - lp.max(1, keepdims=True))
    w /= w.sum(1, keepdims=True)
    ex1 = (w * g).sum(1)
    ex2 = (w * (4 * g[None] ** 2 + 3 * ybar[:, None]) / 4).sum(1)  # E[X2 | X1, y] = (4 X1² + 3 ybar) / 4
    return float(np.corrcoef(ex2, ex1 ** 2)[0, 1])


def metrics(X1, X2, truth):
    return {"corr_X2_X1sq": float(np.corrcoef(X2, X1 ** 2)[0, 1]),
            "corr_X1_true": float(np.corrcoef(X1, truth["X1"])[0, 1]),
            "corr_X2_true": float(np.corrcoef(X2, truth["X2"])[0, 1])}


def run(seed, args):
    data = quadratic_sem(n=150, seed=seed)
    out = {"oracle_corr_X2_X1sq": float(np.corrcoef(data.latents["X2"], data.latents["X1"] ** 2)[0, 1]),
           "exact_posterior_corr_X2_X1sq": exact_posterior_corr(data)}
    make = lambda: LatentSEM(data.graph, data.indicators, data.anchors, num_inducing=args.num_inducing,
                             pseudo_input_prior=args.pseudo_input_prior)
    if "svi" in args.methods:
        model = make()
        samples, secs = fit_svi(model, data.data, num_steps=args.steps, seed=seed,
                                guide_kwargs={"local": args.local, "pseudo_inputs": args.pseudo_inputs})
        m = latent_means(model, samples)
        out["svi"] = dict(metrics(m["X1"].to_numpy(), m["X2"].to_numpy(), data.latents), seconds=secs,
                          run=RUN, guide={"local": args.local, "pseudo_inputs": args.pseudo_inputs, "steps": args.steps})
        print(seed, "svi", out["svi"], flush=True)
    if "nuts" in args.methods:
        model = make()
        samples, secs, mcmc = fit_nuts(model, data.data, warmup=args.warmup, num_samples=args.samples, seed=seed)
        m = latent_means(model, samples)
        div = int(mcmc.diagnostics()["divergences"]["chain 0"].__len__())
        out["nuts"] = dict(metrics(m["X1"].to_numpy(), m["X2"].to_numpy(), data.latents), seconds=secs,
                           divergences=div, run=RUN, warmup=args.warmup, samples=args.samples)
        print(seed, "nuts", out["nuts"], flush=True)
    if "gplvm" in args.methods:
        Y = torch.as_tensor(data.data.to_numpy(), dtype=torch.float64)
        Y = (Y - Y.mean(0)) / Y.std(0)
        gplvm = fit_gplvm(Y, num_inducing=50, seed=seed)
        Z = gplvm.X_loc.detach().numpy()
        axis = max(float(np.corrcoef(Z[:, j], Z[:, 1 - j] ** 2)[0, 1]) for j in (0, 1))
        out["gplvm"] = {"corr_X2_X1sq": axis, "corr_best_rotation": best_rotation_quadratic_corr(Z), "run": RUN}
        print(seed, "gplvm", out["gplvm"], flush=True)
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seeds", type=int, nargs="+", default=[0])
    p.add_argument("--steps", type=int, default=5000)
    p.add_argument("--warmup", type=int, default=300)
    p.add_argument("--samples", type=int, default=300)
    p.add_argument("--num-inducing", type=int, default=50)
    p.add_argument("--pseudo-input-prior", default="gaussian", choices=["gaussian", "space_filling"])
    p.add_argument("--methods", nargs="+", default=["svi", "nuts", "gplvm"])
    p.add_argument("--local", default="joint", choices=["joint", "mean_field"])
    p.add_argument("--pseudo-inputs", default="point", choices=["point", "random"])
    p.add_argument("--keep", action="store_true")
    p.add_argument("--render-only", action="store_true", help="rebuild the README table from the JSON")
    args = p.parse_args()
    one_thread()
    torch.set_default_dtype(torch.float64)
    path = os.path.join(RESULTS, "sem_quadratic.json")
    if args.render_only:
        saved = json.load(open(path))
        results, args = saved["results"], argparse.Namespace(**saved["args"])
        for s, r in results.items():
            r.setdefault("exact_posterior_corr_X2_X1sq", exact_posterior_corr(quadratic_sem(n=150, seed=int(s))))
        with open(path, "w") as fh:
            json.dump(saved, fh, indent=2)
        render(results, args)
        return
    results = {str(s): run(s, args) for s in args.seeds}
    if args.keep and os.path.exists(path):
        old = json.load(open(path))["results"]
        for s, r in old.items():
            new = results.setdefault(s, {"oracle_corr_X2_X1sq": r["oracle_corr_X2_X1sq"]})
            for k, v in r.items():
                if k not in new:  # a method's entry (dict) is tagged with its run; a statistic (float) is kept as is
                    new[k] = dict(v, run=v.get("run", "earlier run")) if isinstance(v, dict) else v
        results = dict(sorted(results.items(), key=lambda kv: int(kv[0])))
    write_json("sem_quadratic", {"args": vars(args), "results": results})
    render(results, args)


def render(results, args):
    rows = ["| seed | oracle | exact | SVI corr(X2, X1²) | NUTS corr(X2, X1²) | NUTS warm-up + draws (divergent) "
            "| GPLVM (axes / best rotation) | SVI s | NUTS s |",
            "|---|---|---|---|---|---|---|---|---|"]
    for s, r in results.items():
        sv, nu, gl = r.get("svi", {}), r.get("nuts", {}), r.get("gplvm", {})
        f = lambda d, k: f"{d[k]:.3f}" if k in d else "–"
        # the first NUTS run (seed 0) predates the warmup / samples fields; it ran 300 + 300
        size = f"{nu.get('warmup', 300)} + {nu.get('samples', 300)} ({nu['divergences']})" if nu else "–"
        rows.append(f"| {s} | {r['oracle_corr_X2_X1sq']:.3f} | {r['exact_posterior_corr_X2_X1sq']:.3f} | {f(sv, 'corr_X2_X1sq')} | {f(nu, 'corr_X2_X1sq')} | "
                    f"{size} | {f(gl, 'corr_X2_X1sq')} / {f(gl, 'corr_best_rotation')} | {f(sv, 'seconds')[:-2]} | "
                    f"{f(nu, 'seconds')[:-2]} |")
    text = f"""### GPSEM-LV: synthetic quadratic (`benchmarks/sem_quadratic.py`)

Silva & Gramacy (2010, arXiv:1002.4802, Sec. 5, Fig. 3): N = 150, X2 = 4 X1² + noise, three indicators per latent,
M = {args.num_inducing} pseudo-inputs. Metric: correlation of the posterior-mean X2 with the squared posterior-mean
X1 over the 150 cases (target ≥ 0.9); "oracle" is the same statistic on the true latents. SVI: `sem_guide`,
{args.steps} full-batch ClippedAdam steps (lr 0.02 → 0.002), 200 guide draws (per-case latents: one joint Gaussian
per case; pseudo-inputs: point estimates). NUTS: one chain per seed (warm-up + draws in the table), max tree
depth 7, JIT. GPLVM: `pyro.contrib.gp.models.GPLVM`, 2 latent dimensions, 50 inducing
points, 3000 Adam steps; its latents are identified only up to rotation, so the statistic is given for the better
axis order and for the best rotation. One thread, float64.

""" + "\n".join(rows) + NOTE
    write_readme_section("sem-quadratic", text)


if __name__ == "__main__":
    main()
