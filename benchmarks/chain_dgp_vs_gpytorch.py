"""Two-layer chain deep GP: pyro_dag DAG-VI vs GPyTorch's DeepGP, same architecture, in one run.

x (1-D) → h (1 hidden dim) → y (observed), zero mean functions, RBF kernels with a learned variance,
M inducing points per layer (whitened, full-covariance Cholesky posteriors), 4 samples per ELBO, float64,
Adam lr 0.01 (one ``torch.optim.Adam`` over all parameters on both sides: GPyTorch's, and pyro_dag's
:class:`~pyro_dag.infer.training.JointAdam`), one thread. Reports seconds per ELBO+gradient+optimiser step for both
(median of interleaved blocks) and their ratio, and the held-out NLPD of both after the same number of steps.

pyro_dag runs twice from the same data: *like for like* starts where GPyTorch's model starts (the same inducing
inputs, a linspace over the inputs for h and over [-2, 2] for y; kernel variances and length-scales at
GPyTorch's initial softplus(0) = 0.693; the whitened posteriors at the prior's scale, GPyTorch's identity
Cholesky factor) and is the one timed; *defaults* starts from pyro_dag's own defaults (k-means++ / Sobol inducing
inputs, kernel hyperparameters 1, the data-driven initial scale of the observed node's posterior).

    python benchmarks/chain_dgp_vs_gpytorch.py            # full run (writes JSON + README table)
    python benchmarks/chain_dgp_vs_gpytorch.py --quick    # smoke run

GPyTorch is an optional benchmark peer: ``pip install -c constraints.txt ".[bench]"``.
"""
import argparse
import json
import math
import os
import time

import networkx as nx
import pyro
import torch
from common import RESULTS, one_thread, write_json, write_readme_section

from pyro_dag import DAGDGP, kernels
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide
from pyro_dag.infer.training import JointAdam

NOISE = 0.1


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
    f = torch.where(x < 0, torch.sin(3 * x), 0.7 + 0.3 * torch.cos(5 * x))  # a kink a single GP finds hard
    y = f + NOISE * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return x, y


GPYTORCH_INIT = math.log(2.0)  # softplus(0): GPyTorch's initial outputscale and length-scale


def gpytorch_inducing(x, M):
    """The inducing inputs the GPyTorch model starts from: ``{layer: [M, 1]}``."""
    return {"h": torch.linspace(float(x.min()), float(x.max()), M, dtype=x.dtype).unsqueeze(-1),
            "y": torch.linspace(-2, 2, M, dtype=x.dtype).unsqueeze(-1)}


def pyro_dag_setup(x, y, M, like_for_like=True):
    pyro.clear_param_store()
    if like_for_like:
        kern = {w: kernels.RBF(variance=GPYTORCH_INIT, lengthscale=GPYTORCH_INIT) for w in ("h", "y")}
        extra, init_scale = {"inducing_inputs": gpytorch_inducing(x, M)}, 1.0
    else:
        kern, extra, init_scale = {"h": kernels.RBF(), "y": kernels.RBF()}, {}, None
    model = DAGDGP(nx.DiGraph([("x", "h"), ("h", "y")]), kernels=kern, num_inducing=M,
                   likelihoods={"y": Gaussian(0.1)}, **extra).to(dtype=x.dtype, device=x.device)
    guide = AutoStructuredGuide(model, precision="mean_field", init_scale=init_scale)
    svi = JointAdam(model, guide, DAGELBO(num_particles=4), {"lr": 0.01})
    inputs, data = {"x": x}, {"y": y}
    svi.step(inputs, data)  # set-up outside the timed region

    def step():
        svi.step(inputs, data)

    def nlpd(xt, yt):
        with torch.no_grad():
            p = model.predict(guide, {"x": xt}, nodes=["y"], num_samples=64)["y"]
            var = p.var + model.likelihoods["y"].variance
            lp = torch.distributions.Normal(p.loc, var.sqrt()).log_prob(yt)
            return -(torch.logsumexp(lp, 0) - math.log(lp.shape[0])).mean().item()

    return step, nlpd


def gpytorch_setup(x, y, M):
    import gpytorch
    from gpytorch.models.deep_gps import DeepGP, DeepGPLayer, DeepLikelihood  # noqa: F401
    from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy

    class Layer(DeepGPLayer):
        def __init__(self, input_dims, output_dims, z):
            batch = torch.Size([]) if output_dims is None else torch.Size([output_dims])
            z = z if output_dims is None else z.expand(output_dims, *z.shape).clone()
            dist = CholeskyVariationalDistribution(M, batch_shape=batch)
            strat = VariationalStrategy(self, z, dist, learn_inducing_locations=True)
            super().__init__(strat, input_dims, output_dims)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(batch_shape=batch),
                                                             batch_shape=batch)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    zx = torch.linspace(float(x.min()), float(x.max()), M, dtype=x.dtype).unsqueeze(-1)
    zh = torch.linspace(-2, 2, M, dtype=x.dtype).unsqueeze(-1)

    class TwoLayer(DeepGP):
        def __init__(self):
            super().__init__()
            self.hidden = Layer(1, 1, zx)
            self.last = Layer(1, None, zh)
            self.likelihood = gpytorch.likelihoods.GaussianLikelihood()

        def forward(self, inputs):
            return self.last(self.hidden(inputs))

    model = TwoLayer().to(dtype=x.dtype, device=x.device)
    model.likelihood.noise = 0.1
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    mll = gpytorch.mlls.DeepApproximateMLL(gpytorch.mlls.VariationalELBO(model.likelihood, model, x.shape[0]))
    yy = y.squeeze(-1)

    def step():
        with gpytorch.settings.num_likelihood_samples(4):
            opt.zero_grad()
            loss = -mll(model(x), yy)
            loss.backward()
            opt.step()

    def nlpd(xt, yt):
        with torch.no_grad(), gpytorch.settings.num_likelihood_samples(64):
            pred = model.likelihood(model(xt))
            lp = pred.log_prob(yt.squeeze(-1)) if False else torch.distributions.Normal(
                pred.mean, pred.variance.sqrt()).log_prob(yt.squeeze(-1))
            return -(torch.logsumexp(lp, 0) - math.log(lp.shape[0])).mean().item()

    step()
    return step, nlpd


def run_cell(n, M, steps, seed, blocks=5, checkpoints=(200,)):
    x, y = make_data(n, seed)
    xt, yt = make_data(1000, seed + 1000)
    torch.manual_seed(seed)
    ours_step, ours_nlpd = pyro_dag_setup(x, y, M, like_for_like=True)
    torch.manual_seed(seed)
    gp_step, gp_nlpd = gpytorch_setup(x, y, M)
    torch.manual_seed(seed)
    def_step, def_nlpd = pyro_dag_setup(x, y, M, like_for_like=False)
    per_block = max(1, steps // blocks)
    t_ours, t_gp = [], []
    done = 1  # each set-up made one step
    nlpd_at = {}
    while done < steps:  # interleave blocks so that background load hits both equally
        k = min(per_block, steps - done, *[c - done for c in checkpoints if c > done])
        t = time.perf_counter()
        for _ in range(k):
            ours_step()
        t_ours.append((time.perf_counter() - t) / k)
        t = time.perf_counter()
        for _ in range(k):
            gp_step()
        t_gp.append((time.perf_counter() - t) / k)
        for _ in range(k):
            def_step()
        done += k
        if done in checkpoints:
            nlpd_at[done] = (ours_nlpd(xt, yt), gp_nlpd(xt, yt), def_nlpd(xt, yt))
    s_ours = sorted(t_ours)[len(t_ours) // 2]
    s_gp = sorted(t_gp)[len(t_gp) // 2]
    row = {"n": n, "M": M, "steps": steps, "seconds_per_step_pyro_dag": s_ours,
           "seconds_per_step_gpytorch": s_gp, "ratio_pyro_dag_over_gpytorch": s_ours / s_gp,
           "test_nlpd_pyro_dag": ours_nlpd(xt, yt), "test_nlpd_gpytorch": gp_nlpd(xt, yt),
           "test_nlpd_pyro_dag_defaults": def_nlpd(xt, yt), "load": os.getloadavg()[0]}
    for c, (a, b, d) in nlpd_at.items():
        row[f"test_nlpd_pyro_dag_at_{c}"], row[f"test_nlpd_gpytorch_at_{c}"] = a, b
        row[f"test_nlpd_pyro_dag_defaults_at_{c}"] = d
    return row


FINDINGS = (
    "Why the same architecture learned more slowly per step (measured with this script's data, 200 steps, "
    "seeds 0-3 at n = 2000, M = 64 and 0-1 at n = 500, M = 20; NLPD, lower is better): not the mean function "
    "(both models have zero means here; GPyTorch with a linear mean on the hidden layer, as in its deep-GP example, "
    "reached -0.021 to -0.031 at n = 500, M = 20 against -0.043 to -0.054 with zero means), but where the two start. "
    "pyro_dag's defaults give the observed node's whitened posterior the data-driven initial scale "
    "(1 + n σ² / (M τ²))^(-1/2) (0.06 here) and place the inducing inputs by k-means++ on the inputs and by Sobol "
    "quantiles of N(0, 1) for the hidden layer: 200 steps from there gave 0.00 to 0.10 at n = 2000, M = 64 "
    "(GPyTorch -0.09 to -0.12), and one of two seeds at n = 500, M = 20 was still at 0.28 after 1000 steps. "
    "Starting at the prior's scale alone made it worse (0.25 to 0.36), and GPyTorch's inducing inputs alone too "
    "(0.15 to 0.35); both together gave -0.03 to 0.00, and with GPyTorch's initial kernel hyperparameters "
    "(softplus(0) = 0.693 instead of 1) -0.02 to 0.00. The rest of the gap at 200 steps comes from the whitening "
    "direction: with the lower Cholesky factor, as GPyTorch whitens, the like-for-like start reached -0.06 to -0.08; "
    "pyro_dag whitens with the upper factor because its structured (chordal) guides need it (see "
    "pyro_dag.gp.conditional), so that choice stays. Small random initial means (GPyTorch's N(0, 1e-3)) made no "
    "difference. The library defaults are unchanged: the data-driven scale is what keeps the latent collider from "
    "stalling, and no single change was better on both problems.")

SPEED = (
    "Per step, pyro_dag computes the RBF cross-covariance K(X, Z) as one fused op with a hand-written backward "
    "(pyro_dag.ops.rbf), and each mean-field node's predictive mean and variance as one op "
    "(pyro_dag.ops.predictive.whitened_moments): the whitened interpolation vectors by one triangular solve over all "
    "(sample, case) rows, then a m and a^T S a with S = L L^T; its backward takes the factor's gradient from "
    "A^T diag(g) A, which the gradient of S needs anyway, instead of an [M, S n] x [S n, M] product, and sums the "
    "interpolation vectors' gradients in one pass. What is left at n = 2000 is one solve and one [S n, M] x [M, M] "
    "product each way; much of the rest is page faults on fresh [S, n, M] tensors (GPyTorch's step allocates "
    "about twice as many; with glibc's trim threshold raised both steps take ~35 ms at M = 64). Forming the predictive "
    "variance as k + K_xz R^-T (S - I) R^-1 K_zx without the solve would save another product, but it differs from "
    "the solve by up to 3e-6 relative in float64 on these problems' ill-conditioned K(Z, Z) (M = 64 in 1-D), so "
    "pyro_dag keeps the solve.")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--cells", default="500x20,500x64,2000x20,2000x64")
    parser.add_argument("--readme-only", action="store_true", help="rewrite the README section from the stored JSON")
    args = parser.parse_args()
    if args.readme_only:
        write_readme(json.load(open(os.path.join(RESULTS, "chain_dgp_vs_gpytorch.json"))))
        return
    one_thread()
    # two pyro_dag models train side by side: each keeps its own parameters (not Pyro's global store)
    pyro.settings.set(module_local_params=True)
    steps = 20 if args.quick else args.steps
    cells = [tuple(int(v) for v in c.split("x")) for c in args.cells.split(",")]
    checkpoints = (200,) if steps > 200 else ()
    load_before = os.getloadavg()[0]
    rows = []
    for n, M in cells:
        row = run_cell(n, M, steps, args.seed, blocks=args.blocks, checkpoints=checkpoints)
        rows.append(row)
        print({k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    name = "chain_dgp_vs_gpytorch" + ("_quick" if args.quick else "")
    path = write_json(name, {"settings": {"steps": steps, "samples": 4, "dtype": "float64", "lr": 0.01,
                                          "seed": args.seed, "blocks": args.blocks, "optimiser": "one torch Adam"},
                             "rows": rows, "load_before": load_before, "load_after": os.getloadavg()[0]})
    print("wrote", path)
    if not args.quick:
        write_readme(json.load(open(path)))


def write_readme(payload):
    """The README section from a results payload (``--readme-only`` rewrites it from the stored JSON)."""
    rows, st = payload["rows"], payload["settings"]
    steps = st["steps"]
    checkpoints = (200,) if steps > 200 else ()
    loads = [payload.get("load_before", rows[0]["load"])] + [r["load"] for r in rows]
    at = f" ({checkpoints[0]} / {steps} steps)" if checkpoints else ""
    lines = ["## Two-layer chain DGP: pyro_dag DAG-VI vs GPyTorch DeepGP",
             "",
             f"`python benchmarks/chain_dgp_vs_gpytorch.py` ({steps} Adam steps, lr 0.01, one `torch.optim.Adam` "
             "over all parameters on both sides, 4 samples, float64, 1-D input, 1 hidden dim, one thread, seed "
             f"{st['seed']}; seconds per ELBO+gradient+optimiser step, median of {st['blocks']} interleaved blocks; "
             "test NLPD on 1000 held-out points after the same steps). *like for like*: pyro_dag started where "
             "GPyTorch starts (its inducing inputs, kernel hyperparameters and prior-scale posteriors; the row "
             "timed); *defaults*: pyro_dag's own initialisation. Ran under load (1-minute load average "
             f"{min(loads):.1f}-{max(loads):.1f} on 2 cores, other tenants); the ratio is what to compare. "
             "Target: ratio ≤ 0.8 and NLPD at or below GPyTorch's.",
             "",
             f"| n | M | pyro_dag s/step | GPyTorch s/step | ratio | NLPD like for like{at} | NLPD GPyTorch{at} "
             f"| NLPD pyro_dag defaults{at} |",
             "|---|---|---|---|---|---|---|---|"]

    def pair(r, key):
        c = checkpoints[0] if checkpoints else None
        first = f"{r[f'{key}_at_{c}']:.3f} / " if c else ""
        return first + f"{r[key]:.3f}"

    for r in rows:
        lines.append(f"| {r['n']} | {r['M']} | {r['seconds_per_step_pyro_dag'] * 1e3:.1f} ms | "
                     f"{r['seconds_per_step_gpytorch'] * 1e3:.1f} ms | {r['ratio_pyro_dag_over_gpytorch']:.2f} | "
                     f"{pair(r, 'test_nlpd_pyro_dag')} | {pair(r, 'test_nlpd_gpytorch')} | "
                     f"{pair(r, 'test_nlpd_pyro_dag_defaults')} |")
    lines += ["", SPEED, "", FINDINGS]
    write_readme_section("chain-dgp-vs-gpytorch", "\n".join(lines))

if __name__ == "__main__":
    main()
