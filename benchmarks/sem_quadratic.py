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
NOTE = '\n\nNUTS had 50 divergent transitions out of 300 draws (the whitened pseudo-functions and the per-case latents form a funnel-like geometry; not reparameterised here). Seconds are wall-clock on the shared 2-core machine under a load average of about 14 (several times the CPU time). Against the target: NUTS meets it (0.964), SVI misses it narrowly (0.896; 10000 steps gave 0.899 and the space-filling pseudo-input prior 0.899 in runs outside this table); the GPLVM does not recover the quadratic.'


RUN = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())


def metrics(X1, X2, truth):
    return {"corr_X2_X1sq": float(np.corrcoef(X2, X1 ** 2)[0, 1]),
            "corr_X1_true": float(np.corrcoef(X1, truth["X1"])[0, 1]),
            "corr_X2_true": float(np.corrcoef(X2, truth["X2"])[0, 1])}


def run(seed, args):
    data = quadratic_sem(n=150, seed=seed)
    out = {"oracle_corr_X2_X1sq": float(np.corrcoef(data.latents["X2"], data.latents["X1"] ** 2)[0, 1])}
    make = lambda: LatentSEM(data.structure, data.indicators, data.anchors, num_inducing=args.num_inducing,
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
    args = p.parse_args()
    one_thread()
    torch.set_default_dtype(torch.float64)
    results = {str(s): run(s, args) for s in args.seeds}
    path = os.path.join(RESULTS, "sem_quadratic.json")
    if args.keep and os.path.exists(path):
        old = json.load(open(path))["results"]
        for s, r in old.items():
            new = results.setdefault(s, {"oracle_corr_X2_X1sq": r["oracle_corr_X2_X1sq"]})
            for k, v in r.items():
                if k not in new:
                    new[k] = dict(v, run=v.get("run", "earlier run"))
        results = dict(sorted(results.items(), key=lambda kv: int(kv[0])))
    write_json("sem_quadratic", {"args": vars(args), "results": results})
    rows = ["| seed | oracle | SVI corr(X2, X1²) | NUTS corr(X2, X1²) | GPLVM (axes / best rotation) | SVI s | NUTS s |",
            "|---|---|---|---|---|---|---|"]
    for s, r in results.items():
        sv, nu, gl = r.get("svi", {}), r.get("nuts", {}), r.get("gplvm", {})
        f = lambda d, k: f"{d[k]:.3f}" if k in d else "–"
        rows.append(f"| {s} | {r['oracle_corr_X2_X1sq']:.3f} | {f(sv, 'corr_X2_X1sq')} | {f(nu, 'corr_X2_X1sq')} | "
                    f"{f(gl, 'corr_X2_X1sq')} / {f(gl, 'corr_best_rotation')} | {f(sv, 'seconds')[:-2]} | "
                    f"{f(nu, 'seconds')[:-2]} |")
    text = f"""### GPSEM-LV: synthetic quadratic (`benchmarks/sem_quadratic.py`)

Silva & Gramacy (2010, arXiv:1002.4802, Sec. 5, Fig. 3): N = 150, X2 = 4 X1² + noise, three indicators per latent,
M = {args.num_inducing} pseudo-inputs. Metric: correlation of the posterior-mean X2 with the squared posterior-mean
X1 over the 150 cases (target ≥ 0.9); "oracle" is the same statistic on the true latents. SVI: `sem_guide`,
{args.steps} full-batch ClippedAdam steps (lr 0.02 → 0.002), 200 guide draws (per-case latents: one joint Gaussian
per case; pseudo-inputs: point estimates). NUTS: one chain, {args.warmup} warm-up +
{args.samples} draws, max tree depth 7, JIT. GPLVM: `pyro.contrib.gp.models.GPLVM`, 2 latent dimensions, 50 inducing
points, 3000 Adam steps; its latents are identified only up to rotation, so the statistic is given for the better
axis order and for the best rotation. One thread, float64.

""" + "\n".join(rows) + NOTE
    write_readme_section("sem-quadratic", text)


if __name__ == "__main__":
    main()
