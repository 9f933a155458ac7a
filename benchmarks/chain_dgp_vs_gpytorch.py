"""Two-layer chain deep GP: pyro_dag DAG-VI vs GPyTorch's DeepGP, same architecture, in one run.

x (1-D) → h (1 hidden dim) → y (observed), zero mean functions, RBF kernels with a learned variance,
M inducing points per layer (whitened, full-covariance Cholesky posteriors), 4 samples per ELBO, float64,
Adam lr 0.01, one thread. Reports seconds per ELBO+gradient+optimiser step for both (median of interleaved
blocks) and their ratio, and the test NLPD of both after the same number of steps.

    python benchmarks/chain_dgp_vs_gpytorch.py            # full run (writes JSON + README table)
    python benchmarks/chain_dgp_vs_gpytorch.py --quick    # smoke run

GPyTorch is an optional benchmark peer: ``pip install -c constraints.txt ".[bench]"``.
"""
import argparse
import math
import time

import networkx as nx
import pyro
import torch
from common import one_thread, write_json, write_readme_section

from pyro_dag import DAGDGP, kernels
from pyro_dag.gp.likelihoods import Gaussian
from pyro_dag.infer import DAGELBO
from pyro_dag.infer.autoguide import AutoStructuredGuide

NOISE = 0.1


def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, generator=g, dtype=torch.float64) * 4 - 2
    f = torch.where(x < 0, torch.sin(3 * x), 0.7 + 0.3 * torch.cos(5 * x))  # a kink a single GP finds hard
    y = f + NOISE * torch.randn(n, 1, generator=g, dtype=torch.float64)
    return x, y


def pyro_dag_setup(x, y, M):
    pyro.clear_param_store()
    model = DAGDGP(nx.DiGraph([("x", "h"), ("h", "y")]), kernels={"h": kernels.RBF(), "y": kernels.RBF()},
                   num_inducing=M, likelihoods={"y": Gaussian(0.1)}).to(dtype=x.dtype, device=x.device)
    guide = AutoStructuredGuide(model, structure="mean_field")
    svi = pyro.infer.SVI(model, guide, pyro.optim.Adam({"lr": 0.01}), DAGELBO(num_particles=4))
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


def run_cell(n, M, steps, seed, blocks=5):
    x, y = make_data(n, seed)
    xt, yt = make_data(1000, seed + 1000)
    torch.manual_seed(seed)
    ours_step, ours_nlpd = pyro_dag_setup(x, y, M)
    torch.manual_seed(seed)
    gp_step, gp_nlpd = gpytorch_setup(x, y, M)
    per_block = max(1, steps // blocks)
    t_ours, t_gp = [], []
    done = 0
    while done < steps:  # interleave blocks so that background load hits both equally
        k = min(per_block, steps - done)
        t = time.perf_counter()
        for _ in range(k):
            ours_step()
        t_ours.append((time.perf_counter() - t) / k)
        t = time.perf_counter()
        for _ in range(k):
            gp_step()
        t_gp.append((time.perf_counter() - t) / k)
        done += k
    s_ours = sorted(t_ours)[len(t_ours) // 2]
    s_gp = sorted(t_gp)[len(t_gp) // 2]
    return {"n": n, "M": M, "steps": steps, "seconds_per_step_pyro_dag": s_ours,
            "seconds_per_step_gpytorch": s_gp, "ratio_pyro_dag_over_gpytorch": s_ours / s_gp,
            "test_nlpd_pyro_dag": ours_nlpd(xt, yt), "test_nlpd_gpytorch": gp_nlpd(xt, yt)}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    one_thread()
    steps = 20 if args.quick else args.steps
    cells = [(500, 20), (500, 64), (2000, 20), (2000, 64)]
    rows = []
    for n, M in cells:
        row = run_cell(n, M, steps, args.seed)
        rows.append(row)
        print({k: (round(v, 5) if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    name = "chain_dgp_vs_gpytorch" + ("_quick" if args.quick else "")
    path = write_json(name, {"settings": {"steps": steps, "samples": 4, "dtype": "float64", "lr": 0.01,
                                          "seed": args.seed}, "rows": rows})
    print("wrote", path)
    if not args.quick:
        lines = ["## Two-layer chain DGP: pyro_dag DAG-VI vs GPyTorch DeepGP",
                 "",
                 f"`python benchmarks/chain_dgp_vs_gpytorch.py` ({steps} Adam steps, lr 0.01, 4 samples, float64, "
                 "1-D input, 1 hidden dim, one thread; seconds per ELBO+gradient+optimiser step, median of "
                 "interleaved blocks; test NLPD on 1000 held-out points after the same steps).",
                 "",
                 "| n | M | pyro_dag s/step | GPyTorch s/step | ratio | NLPD pyro_dag | NLPD GPyTorch |",
                 "|---|---|---|---|---|---|---|"]
        for r in rows:
            lines.append(f"| {r['n']} | {r['M']} | {r['seconds_per_step_pyro_dag'] * 1e3:.1f} ms | "
                         f"{r['seconds_per_step_gpytorch'] * 1e3:.1f} ms | {r['ratio_pyro_dag_over_gpytorch']:.2f} | "
                         f"{r['test_nlpd_pyro_dag']:.3f} | {r['test_nlpd_gpytorch']:.3f} |")
        write_readme_section("chain-dgp-vs-gpytorch", "\n".join(lines))


if __name__ == "__main__":
    main()
