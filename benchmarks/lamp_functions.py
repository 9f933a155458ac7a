"""LaMP-DGP against doubly-stochastic VI, pyro_dag's DAG-VI and a single GP on the ten simulators of
Chang & Sung (2026), "Efficient Deep Gaussian Process Surrogates via Mini-Batch Latent MAP Estimation", Sec. 5.1.

Per cell (function, n, replication): independent randomized Latin-hypercube training (n) and test (1000) designs,
inputs mapped to the unit cube, responses standardised by the training mean and sd (test responses with the same
two numbers); every method sees the same cell. Methods:

* ``lamp``  -- :class:`pyro_dag.infer.lamp.LatentMAP` on the chain ``x -> w (D = d) -> y``, the paper's protocol
  (:meth:`LaMPSettings.paper`: full batch for n <= 100, else mini-batch; g = 1e-4 fixed, or estimated when noisy),
  exact linked-GP prediction (n <= 1000);
* ``dsvi``  -- GPyTorch's two-layer deep GP with the paper's DSVI-GPyTorch settings (App. C.2): D = d, SE (ARD)
  kernels, linear hidden mean, constant output mean, 100 inducing points per GP initialised N(0, 1) and learned,
  Adam lr 1e-2, batch min(n, 10000), 2000 epochs if n < 500 else 1000, 1 MC sample in training and 100 in
  prediction, hidden white-noise variance initialised at 2e-6 and learned, observation noise 1e-4 fixed
  (deterministic) or learned (noisy);
* ``dagvi`` -- pyro_dag's own two-layer DAG-VI: a DAGDGP chain ``x -> w (d) -> y`` (zero-mean sparse GPs, ARD RBF,
  100 inducing points per node), a mean-field :class:`AutoStructuredGuide`, the library's recommended
  ``pyro_dag.infer.train`` recipe with the same number of steps as DSVI's epochs; Gaussian noise 1e-4 fixed
  (deterministic) or learned (noisy); 100 posterior samples in prediction;
* ``gp``    -- a single stationary GP (GPyTorch ExactGP, constant mean, ARD RBF with a scale, type-II maximum
  likelihood by 300 Adam steps at lr 0.05, noise learned with a 1e-6 floor).

Metrics on the standardised scale: RMSE of the predictive mean and CRPS (closed-form Gaussian CRPS for LaMP's and
the GP's Gaussian predictives; sample CRPS from 1000 draws of the 100-component mixtures of DSVI and DAG-VI),
against the noise-free test responses; seconds of training + prediction. One thread, float64.

    python benchmarks/lamp_functions.py --functions schaffer --n 500 --methods lamp dsvi dagvi gp
    python benchmarks/lamp_functions.py                       # the grid: 10 functions x n in {100, 500, 1000}
    python benchmarks/lamp_functions.py --noisy --functions park g4
    python benchmarks/lamp_functions.py --collider            # the non-chain DAG: LaMP vs DAG-VI vs DAG-SVI
    python benchmarks/lamp_functions.py --report              # tables from the saved cells only

Every (cell, method) is one JSON file under ``benchmarks/results/lamp_functions/``; existing files are skipped
(resumable; failed ones are run again), and ``--report`` rebuilds ``benchmarks/results/lamp_functions.json``
and the README section.
"""
import argparse
import glob
import json
import os
import subprocess
import time
import zlib

import networkx as nx
import pyro
import torch
from common import RESULTS, environment, one_thread, write_json, write_readme_section

from pyro_dag import DAGDGP, kernels
from pyro_dag.datasets import TEST_FUNCTIONS, add_noise, get_test_function
from pyro_dag.gp import Gaussian
from pyro_dag.metrics import crps_gaussian, crps_samples, rmse
from pyro_dag.utils import freeze

CELLS = os.path.join(RESULTS, "lamp_functions")
METHODS = ("lamp", "dsvi", "dagvi", "gp")
NUM_TEST = 1000
DTYPE = torch.float64


# ---------------------------------------------------------------------------------------------------- the cell
def cell_seed(name, n, rep, noisy):
    """The same designs for every method: a seed from the cell's key only."""
    return zlib.crc32(f"{name}|{n}|{rep}|{int(noisy)}".encode()) % (2 ** 31)


def make_cell(name, n, rep, noisy=False):
    """Training and test data of one cell: unit-cube inputs, standardised responses."""
    f = get_test_function(name)
    g = torch.Generator().manual_seed(cell_seed(name, n, rep, noisy))
    x, xt = f.design(n, g), f.design(NUM_TEST, g)
    y, yt = f(x), f(xt)
    if noisy:
        y = add_noise(y, f.signal_sd(), ratio=0.01, generator=g)
    box = f.box()
    unit = lambda z: (z - box[:, 0]) / (box[:, 1] - box[:, 0])  # noqa: E731
    mu, sd = y.mean(), y.std()
    return {"x": unit(x), "y": (y - mu) / sd, "xt": unit(xt), "yt": (yt - mu) / sd, "d": f.dim}


def mixture_samples(locs, variances, per_component, generator):
    """``[S * per_component, m]`` draws from the equal-weight mixture of ``N(locs[s], variances[s])``."""
    eps = torch.randn((per_component,) + tuple(locs.shape), generator=generator, dtype=locs.dtype)
    return (locs + variances.clamp_min(0).sqrt() * eps).reshape(-1, locs.shape[-1])


# ---------------------------------------------------------------------------------------------------- methods
def run_lamp(cell, noisy, seed):
    from pyro_dag.infer.lamp import LatentMAP

    d = cell["d"]
    model = DAGDGP(nx.DiGraph([("x", "w"), ("w", "y")]), output_dims={"w": d}).double()
    lamp = LatentMAP(model, kernel="rbf", lengthscale="isotropic", nugget="estimate" if noisy else 1e-4)
    history = lamp.fit({"x": cell["x"]}, {"y": cell["y"]}, seed=seed)
    pred = lamp.predict({"x": cell["xt"]}, nodes=["y"], num_samples=0)["y"]
    extra = {"best_epoch": history.best_epoch, "best_validation": history.best_validation,
             "fit_seconds": history.seconds, "num_train": history.num_train}
    return {"mean": pred.y_mean[:, 0], "var": pred.y_variance[:, 0]}, extra


def run_dsvi(cell, noisy, seed):
    import gpytorch
    from gpytorch.models.deep_gps import DeepGP, DeepGPLayer
    from gpytorch.variational import CholeskyVariationalDistribution, VariationalStrategy

    x, y, xt, d = cell["x"], cell["y"][:, 0], cell["xt"], cell["d"]
    n, M = x.shape[0], 100
    torch.manual_seed(seed)

    class Layer(DeepGPLayer):
        def __init__(self, input_dims, output_dims, mean, white):
            batch = torch.Size([]) if output_dims is None else torch.Size([output_dims])
            z = torch.randn(batch + torch.Size([M, input_dims]), dtype=DTYPE)  # N(0, 1) inducing inputs
            dist = CholeskyVariationalDistribution(M, batch_shape=batch)
            super().__init__(VariationalStrategy(self, z, dist, learn_inducing_locations=True), input_dims,
                             output_dims)
            self.mean_module = (gpytorch.means.LinearMean(input_dims, batch_shape=batch) if mean == "linear"
                                else gpytorch.means.ConstantMean(batch_shape=batch))
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(batch_shape=batch, ard_num_dims=input_dims), batch_shape=batch)
            # the hidden layer's white-noise kernel (initialised at 2e-6 and learned)
            self.white = None
            if white:
                self.raw_white = torch.nn.Parameter(torch.zeros(batch, dtype=DTYPE))
                self.white = gpytorch.constraints.GreaterThan(1e-10)
                self.raw_white.data = self.white.inverse_transform(torch.full(batch, 2e-6, dtype=DTYPE))

        def forward(self, z):
            covar = self.covar_module(z)
            if self.white is not None:  # σ_w² δ(z, z'): a diagonal on the joint [inducing, data] covariance
                covar = covar.add_diagonal(self.white.transform(self.raw_white).unsqueeze(-1))
            return gpytorch.distributions.MultivariateNormal(self.mean_module(z), covar)

    class TwoLayer(DeepGP):
        def __init__(self):
            super().__init__()
            self.hidden = Layer(d, d, "linear", True)
            self.last = Layer(d, None, "constant", False)
            self.likelihood = gpytorch.likelihoods.GaussianLikelihood(
                noise_constraint=gpytorch.constraints.GreaterThan(1e-8))

        def forward(self, inputs):
            return self.last(self.hidden(inputs))

    model = TwoLayer().to(DTYPE)
    model.likelihood.noise = 1e-4
    if not noisy:
        model.likelihood.raw_noise.requires_grad_(False)
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.Adam(params, lr=1e-2)
    mll = gpytorch.mlls.DeepApproximateMLL(gpytorch.mlls.VariationalELBO(model.likelihood, model, n))
    epochs = 2000 if n < 500 else 1000
    batch = min(n, 10000)
    model.train()
    g = torch.Generator().manual_seed(seed)
    with gpytorch.settings.num_likelihood_samples(1):
        for _ in range(epochs):
            perm = torch.randperm(n, generator=g)
            for lo in range(0, n, batch):
                idx = perm[lo:lo + batch]
                opt.zero_grad()
                loss = -mll(model(x[idx]), y[idx])
                loss.backward()
                opt.step()
    model.eval()
    with torch.no_grad(), gpytorch.settings.num_likelihood_samples(100):
        pred = model.likelihood(model(xt))  # 100 components, observation noise included
        locs, variances = pred.mean, pred.variance  # [100, m]
    mean = locs.mean(0)
    samples = mixture_samples(locs, variances, 10, torch.Generator().manual_seed(seed + 1))
    return {"mean": mean, "samples": samples}, {"epochs": epochs, "noise": float(model.likelihood.noise)}


def dagvi_model(graph, d_hidden, observed, noisy, num_inducing=100):
    kern = {v: kernels.RBF(ard=True) for v in graph.nodes if graph.in_degree(v) > 0}
    model = DAGDGP(graph, kernels=kern, num_inducing=num_inducing, output_dims=d_hidden,
                   likelihoods={v: Gaussian(variance=1e-2 if noisy else 1e-4) for v in observed}).double()
    if not noisy:
        freeze(model.likelihoods)
    return model


def run_dagvi(cell, noisy, seed):
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    n, d = cell["x"].shape[0], cell["d"]
    model = dagvi_model(nx.DiGraph([("x", "w"), ("w", "y")]), {"w": d}, ["y"], noisy)
    guide = AutoStructuredGuide(model, precision="mean_field")
    steps = 2000 if n < 500 else 1000
    train(model, guide, {"x": cell["x"]}, {"y": cell["y"]}, num_steps=steps, progress=False)
    with torch.no_grad():
        p = model.predict(guide, {"x": cell["xt"]}, nodes=["y"], num_samples=100)["y"]
        noise = model.likelihoods["y"].variance
        locs, variances = p.loc[..., 0], p.var[..., 0] + noise  # [100, m]
    samples = mixture_samples(locs, variances, 10, torch.Generator().manual_seed(seed + 1))
    return {"mean": p.mean[:, 0], "samples": samples}, {"steps": steps, "noise": float(noise)}


EXACT_GP_MAX = 1000  # above: the single GP is Titsias' (2009) SGPR, 300 exact Cholesky steps at n = 5000 do not fit
GP_INDUCING = 500


def run_gp(cell, noisy, seed):
    """The single stationary GP: exact for ``n <= EXACT_GP_MAX``; above, the collapsed sparse GP of Titsias (2009,
    "Variational learning of inducing variables in sparse Gaussian processes", GPyTorch's ``InducingPointKernel``)
    with ``GP_INDUCING`` inducing inputs initialised at a random subset of the training inputs and learned."""
    import gpytorch

    x, y, xt, d = cell["x"], cell["y"][:, 0], cell["xt"], cell["d"]
    torch.manual_seed(seed)
    sparse = x.shape[0] > EXACT_GP_MAX

    class Exact(gpytorch.models.ExactGP):
        def __init__(self, likelihood):
            super().__init__(x, y, likelihood)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=d))
            if sparse:
                z = x[torch.randperm(x.shape[0], generator=torch.Generator().manual_seed(seed))[:GP_INDUCING]]
                self.covar_module = gpytorch.kernels.InducingPointKernel(self.covar_module, z.clone(), likelihood)

        def forward(self, z):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(z), self.covar_module(z))

    likelihood = gpytorch.likelihoods.GaussianLikelihood(noise_constraint=gpytorch.constraints.GreaterThan(1e-6))
    model = Exact(likelihood).to(DTYPE)
    scale = model.covar_module.base_kernel if sparse else model.covar_module
    scale.base_kernel.lengthscale = 0.3
    likelihood.noise = 1e-3
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    model.train()
    with gpytorch.settings.cholesky_jitter(double_value=1e-8), gpytorch.settings.max_cholesky_size(100000):
        for _ in range(300):
            opt.zero_grad()
            loss = -mll(model(x), y)
            loss.backward()
            opt.step()
        model.eval()
        with torch.no_grad(), gpytorch.settings.fast_pred_var(False):
            pred = likelihood(model(xt))
    kind = f"sgpr-{GP_INDUCING}" if sparse else "exact"
    return {"mean": pred.mean, "var": pred.variance}, {"noise": float(likelihood.noise), "gp_kind": kind}


RUNNERS = {"lamp": run_lamp, "dsvi": run_dsvi, "dagvi": run_dagvi, "gp": run_gp}


def score(pred, yt):
    yt = yt[:, 0]
    out = {"rmse": float(rmse(pred["mean"], yt))}
    if "var" in pred:
        out["crps"] = float(crps_gaussian(pred["mean"], pred["var"].clamp_min(1e-30).sqrt(), yt))
        out["crps_kind"] = "gaussian"
    else:
        out["crps"] = float(crps_samples(pred["samples"], yt))
        out["crps_kind"] = "samples"
    return out


def cell_path(name, n, rep, noisy, method):
    return os.path.join(CELLS, f"{name}{'_noisy' if noisy else ''}_n{n}_r{rep}_{method}.json")


def run_one(name, n, rep, noisy, method):
    path = cell_path(name, n, rep, noisy, method)
    if os.path.exists(path):
        saved = json.load(open(path))
        if "rmse" in saved:  # done; a failed cell is run again
            return saved
    cell = make_cell(name, n, rep, noisy)
    seed = cell_seed(name, n, rep, noisy)
    start, cpu_start = time.perf_counter(), time.process_time()
    try:
        pred, extra = RUNNERS[method](cell, noisy, seed)
        row = dict(score(pred, cell["yt"]), seconds=time.perf_counter() - start,
                   cpu_seconds=time.process_time() - cpu_start, **extra)
    except Exception as err:  # a failed method is a result too (reported, not hidden)
        row = {"error": f"{type(err).__name__}: {err}", "seconds": time.perf_counter() - start,
               "cpu_seconds": time.process_time() - cpu_start}
    row.update(function=name, n=n, rep=rep, noisy=noisy, method=method, load=os.getloadavg()[0])
    os.makedirs(CELLS, exist_ok=True)
    with open(path, "w") as f:
        json.dump(dict(row, environment=environment()), f, indent=2)
    return row


# ---------------------------------------------------------------------------------------------------- collider
def run_collider(method, seed=0):
    """The latent collider of the DAG-DGP paper (pyro_dag.datasets.collider): only ``w3`` observed (at 119 of
    165 cases); RMSE/CRPS of ``w3`` against the noise-free child on all cases and on the held-out ones."""
    from pyro_dag.datasets import collider
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    path = os.path.join(CELLS, f"collider_{method}.json")
    if os.path.exists(path):
        return json.load(open(path))
    ds = collider(seed=0)
    y = ds.data["w3"]
    mask = torch.isfinite(y[:, 0])
    mu, sd = y[mask].mean(), y[mask].std()
    data = {"w3": (y - mu) / sd}
    truth = (ds.truth["w3"] - mu) / sd
    start = time.perf_counter()
    pyro.clear_param_store()
    pyro.set_rng_seed(seed)
    if method == "lamp":
        from pyro_dag.infer.lamp import LatentMAP

        model = DAGDGP(ds.graph).double()
        lamp = LatentMAP(model, nugget="estimate")
        try:
            lamp.fit(ds.inputs, data, seed=seed)
        except ValueError as err:  # e.g. repeated root values of a hidden node: recorded, not hidden
            row = {"method": method, "error": f"{type(err).__name__}: {err}", "seconds": time.perf_counter() - start}
            os.makedirs(CELLS, exist_ok=True)
            with open(path, "w") as f:
                json.dump(dict(row, environment=environment()), f, indent=2)
            return row
        p = lamp.predict(ds.inputs, nodes=["w3"], num_samples=0)["w3"]
        mean, var = p.mean[:, 0], p.variance[:, 0]
        samples = None
    else:
        kern = {"w1": kernels.RBF(), "w2": kernels.RBF(), "w3": kernels.SumInput(kernels.RBF())}
        model = DAGDGP(ds.graph, kernels=kern, likelihoods={"w3": Gaussian(variance=1e-2)},
                       num_inducing={"w1": 15, "w2": 15, "w3": 49}).double()
        guide = AutoStructuredGuide(model, precision="mean_field" if method == "dagvi" else "chordal")
        train(model, guide, ds.inputs, data, num_steps=3000, progress=False)
        with torch.no_grad():
            p = model.predict(guide, ds.inputs, nodes=["w3"], num_samples=500)["w3"]
        mean = p.mean[:, 0]
        samples = p.samples[..., 0]
    seconds = time.perf_counter() - start
    t = truth[:, 0]
    row = {"method": method, "seconds": seconds}
    for part, sel in (("all", torch.ones_like(mask)), ("held_out", ~mask)):
        row[f"rmse_{part}"] = float(rmse(mean[sel], t[sel]))
        row[f"crps_{part}"] = float(crps_gaussian(mean[sel], var[sel].sqrt(), t[sel]) if samples is None
                                    else crps_samples(samples[:, sel], t[sel]))
    os.makedirs(CELLS, exist_ok=True)
    with open(path, "w") as f:
        json.dump(dict(row, environment=environment()), f, indent=2)
    return row


# ---------------------------------------------------------------------------------------------------- report
NAMES = {"lamp": "LaMP-DGP", "dsvi": "DSVI-GPyTorch", "dagvi": "DAG-VI", "gp": "single GP", "dagsvi": "DAG-SVI"}


def load_rows():
    rows = []
    for p in sorted(glob.glob(os.path.join(CELLS, "*.json"))):
        r = json.load(open(p))
        if "function" in r:
            rows.append(r)
    return rows


def _mean(v):
    return sum(v) / len(v) if v else float("nan")


def _loads(rows):
    """``{(noisy, n, method): [load, ...]}`` over the cells that ran (not the collider rows)."""
    out = {}
    for r in rows:
        if "load" in r and "n" in r:
            out.setdefault((r["noisy"], r["n"], r["method"]), []).append(r["load"])
    return out


def _ratios(rows, key):
    """LaMP / DSVI-GPyTorch ratios of ``key`` (``"seconds"`` or ``"cpu_seconds"``) per cell (function, n, rep)
    where both ran in the same run: ``{(noisy, n): [ratio, ...]}``."""
    by = {}
    for r in rows:
        if r["method"] in ("lamp", "dsvi") and "rmse" in r and key in r:
            by.setdefault((r["noisy"], r["n"], r["function"], r["rep"]), {})[r["method"]] = r[key]
    out = {}
    for (noisy, n, _, _), v in by.items():
        if len(v) == 2:
            out.setdefault((noisy, n), []).append(v["lamp"] / v["dsvi"])
    return {k: sorted(v) for k, v in out.items()}


def _ratio_text(v):
    return (f"median {v[len(v) // 2]:.2f}, range {v[0]:.2f}-{v[-1]:.2f}, {sum(x <= 1.0 for x in v)} of {len(v)} "
            "at or below 1.0")


def report():
    rows = load_rows()
    write_json("lamp_functions", {"rows": rows})
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    lines = ["## LaMP-DGP on the ten simulators of Chang & Sung (2026)", "",
             "`python benchmarks/lamp_functions.py` (see its docstring for every method's settings). Cells: "
             "function × n × replication; the same randomized-LHS designs for every method; inputs on the unit "
             "cube, responses standardised by the training mean and sd; 1000 test points; RMSE and CRPS on the "
             "standardised scale (against the noise-free test response), seconds of training + prediction "
             "(wall-clock, and in parentheses CPU seconds, `time.process_time`, for the cells that recorded it); "
             "one thread, float64, on a 2-core machine shared with other work "
             f"(at report time: `{uptime}`; each cell's JSON records the 1-min load when it ran). At n = 5000 "
             f"LaMP predicts with the Nyström first layer + local GP (n_Q = 1000, k = 100; Sec. 4.4) and the "
             f"single GP is a sparse GP (Titsias 2009 SGPR, {GP_INDUCING} learned inducing inputs, the same 300 "
             "Adam steps): the exact GP's 300 Cholesky steps at n = 5000 do not fit the time.", ""]
    grid = {}
    for r in rows:
        grid.setdefault((r["function"], r["noisy"], r["n"]), {}).setdefault(r["method"], []).append(r)
    keys = sorted(grid, key=lambda k: (k[1], list(TEST_FUNCTIONS).index(k[0]), k[2]))
    methods = [m for m in METHODS if any(m in grid[k] for k in keys)]
    head = " | ".join(f"{NAMES[m]} RMSE / CRPS / s" for m in methods)
    lines += [f"| function | n | reps | {head} |", "|---|---|---|" + "---|" * len(methods)]
    summary = {}
    for k in keys:
        cells = []
        reps = max(len(v) for v in grid[k].values())
        for m in methods:
            rs = [r for r in grid[k].get(m, []) if "rmse" in r]
            errs = [r for r in grid[k].get(m, []) if "error" in r]
            if rs:
                vals = (_mean([r["rmse"] for r in rs]), _mean([r["crps"] for r in rs]),
                        _mean([r["seconds"] for r in rs]))
                summary.setdefault(k, {})[m] = vals
                cpu = [r["cpu_seconds"] for r in rs if "cpu_seconds" in r]
                cpu_text = f" ({_mean(cpu):.0f})" if len(cpu) == len(rs) else ""
                rep_text = f" [{len(rs)}]" if len(rs) != reps else ""
                cells.append(f"{vals[0]:.4f} / {vals[1]:.4f} / {vals[2]:.0f}{cpu_text}{rep_text}")
            else:
                cells.append("failed" if errs else "–")
        name = k[0] + (" (noisy)" if k[1] else "")
        lines.append(f"| {name} | {k[2]} | {reps} | " + " | ".join(cells) + " |")
    det = [r for r in rows if not r["noisy"]]
    per_n = {}
    for r in det:
        per_n.setdefault(r["n"], {}).setdefault(r["function"], set()).add(r["rep"])
    ran = "; ".join(f"n = {n}: {len(fs)} function(s), replications " + ", ".join(
        f"{sorted(reps)} for {sum(1 for v in fs.values() if v == reps)}" for reps in sorted(
            {frozenset(v) for v in fs.values()}, key=sorted)) for n, fs in sorted(per_n.items()))
    noisy = sorted({(r["function"], r["n"]) for r in rows if r["noisy"]})
    lines += ["", "Means over the replications run (the `reps` column; `[k]` where a method has fewer). `–`: not "
              "run; `failed`: the method raised (message in the cell's JSON).", "",
              "**What ran against the paper's protocol** (Sec. 5.1: n ∈ {100, 500, 1000} for all ten functions, "
              "n = 5000 for three, 10 replications in the paper, 3 asked here, noisy Park and G): " + ran
              + f"; noisy cells (noise sd 0.01 of the signal sd, App. E; nugget estimated by LaMP, noise learned by "
              f"DSVI-GPyTorch and the GP): {', '.join(f'{f} n = {n}' for f, n in noisy) or 'none'}. "
              "Every method that ran used its full settings (no epochs reduced); the rest of the grid did not fit "
              "the time on the shared 2-core machine. n = 5000 was planned for Schaffer (d = 2), Park (d = 4) and "
              "G (d = 4), the three cheapest (LaMP's and DSVI's cost grows with d) and the ones that carry the "
              f"single-GP targets (Schaffer, G); it ran for {', '.join(sorted(per_n.get(5000, {}))) or 'none'} "
              "(one Schaffer cell of the three methods costs about "
              f"{sum(r.get('cpu_seconds', 0) for r in det if r['n'] == 5000 and r['function'] == 'schaffer'):.0f}"
              " CPU s). DAG-VI was dropped after n = 500 as "
              "the slowest method (2-12× DSVI's time) and outside the targets.", "",
              "**Load when each cell ran** (1-min load average, min-max per n and method; time ratios are "
              "like-for-like only where the loads match): "
              + "; ".join(f"{'noisy ' if noisy_ else ''}n = {n} {NAMES[m]}: {min(ls):.1f}-{max(ls):.1f}"
                          for (noisy_, n, m), ls in sorted(_loads(rows).items(),
                                                           key=lambda kv: (kv[0][0], kv[0][1],
                                                                           METHODS.index(kv[0][2])))) + ". "
              "The replication-0 n = 500 cells of LaMP, DSVI-GPyTorch and the GP were re-run on a quiet machine "
              "after LaMP started conditioning on the validation cases (condition_on_validation, the library's "
              "default); DAG-VI's n = 500 cells ran earlier, under load. The n = 100, noisy and replication ≥ 1 "
              "cells ran under `nice -n 10` (accuracy cells) beside other work, so their wall-clock is inflated by "
              f"waiting (up to {max(r['seconds'] / r['cpu_seconds'] for r in rows if r.get('cpu_seconds')):.0f}× "
              "their CPU seconds); their CPU seconds are not. The n = 5000 cells ran "
              "at normal priority, the three methods one after another in one process (the timing comparison at "
              "that size). DAG-VI at n = 100 was not run (its n = 500 cells cost 2-12× DSVI's time).", "",
              "DSVI-GPyTorch's Oakley–O'Hagan cell at n = 1000 (RMSE 1.03, the training mean) is a failed fit of "
              "the peer with the paper's settings, not investigated; LaMP's win in that cell is no evidence for "
              "LaMP.", "",
              "**Targets** (deterministic functions; a function counts on the mean RMSE over its replications):",
              ""]
    for n in sorted(per_n):
        fs = [k for k in summary if k[2] == n and not k[1] and {"lamp", "dsvi"} <= set(summary[k])]
        wins = [k[0] for k in fs if summary[k]["lamp"][0] <= summary[k]["dsvi"][0]]
        if n in (500, 1000):
            verdict = "met" if len(wins) >= 7 else ("missed" if len(fs) == 10 or len(fs) - len(wins) > 3 else
                                                     "open (not all functions run)")
            target = f"; target ≥ 7 of 10: **{verdict}**"
        else:
            target = " (no target at this n)"
        per_rep = []
        for rep in sorted({r["rep"] for r in det if r["n"] == n}):
            got = {(r["function"], r["method"]): r["rmse"] for r in det if r["n"] == n and r["rep"] == rep
                   and "rmse" in r}
            both = [f for f in TEST_FUNCTIONS if (f, "lamp") in got and (f, "dsvi") in got]
            per_rep.append(f"replication {rep}: {sum(got[(f, 'lamp')] <= got[(f, 'dsvi')] for f in both)} of "
                           f"{len(both)}")
        lines.append(f"* n = {n}: LaMP RMSE ≤ DSVI-GPyTorch on {len(wins)} of {len(fs)} functions run "
                     f"({', '.join(wins) or 'none'}){target}. Per replication: {'; '.join(per_rep)}.")
    for f in ("schaffer", "g4", "g6"):
        parts = []
        for k in sorted(summary, key=lambda k: k[2]):
            if k[0] == f and not k[1] and {"lamp", "gp"} <= set(summary[k]):
                a, b = summary[k]["lamp"][0], summary[k]["gp"][0]
                parts.append(f"n = {k[2]}: {a:.4f} vs {b:.4f} ({'met' if a <= b else 'missed'})")
        if parts:
            lines.append(f"* {f}: LaMP RMSE ≤ single GP: " + "; ".join(parts) + ".")
    wall, cpu = _ratios(rows, "seconds"), _ratios(rows, "cpu_seconds")
    small = sorted(x for (noisy_, n), v in wall.items() if not noisy_ and n <= 1000 for x in v)
    if small:
        lines.append(f"* wall-clock LaMP / DSVI-GPyTorch at n ≤ 1000 over {len(small)} cells (function, n, "
                     f"replication): {_ratio_text(small)}; target ≤ 1.0 in every cell: "
                     f"**{'met' if small[-1] <= 1.0 else 'missed'}**. Per n (wall-clock; CPU seconds where "
                     "recorded): " + "; ".join(
                         f"{'noisy ' if noisy_ else ''}n = {n}: wall {_ratio_text(v)}"
                         + (f", CPU {_ratio_text(cpu[(noisy_, n)])}" if (noisy_, n) in cpu else "")
                         for (noisy_, n), v in sorted(wall.items())) + ".")
        small_cpu = sorted(x for (noisy_, n), v in cpu.items() if not noisy_ and n <= 1000 for x in v)
        if small_cpu:
            lines.append(f"* on CPU seconds (not distorted by `nice` or waiting), LaMP / DSVI-GPyTorch at n ≤ 1000 over "
                         f"the {len(small_cpu)} cells that recorded them: {_ratio_text(small_cpu)}.")
    noisy_keys = [k for k in summary if k[1] and {"lamp", "dsvi", "gp"} <= set(summary[k])]
    if noisy_keys:
        lines.append("* noisy variants (no target in the issue beyond running them): " + "; ".join(
            f"{k[0]} n = {k[2]}: LaMP {summary[k]['lamp'][0]:.4f}, DSVI-GPyTorch {summary[k]['dsvi'][0]:.4f}, "
            f"single GP {summary[k]['gp'][0]:.4f}" for k in sorted(noisy_keys, key=lambda k: (
                list(TEST_FUNCTIONS).index(k[0]), k[2]))) + ".")
    gaps = [r for r in rows if r["method"] == "lamp" and r.get("best_validation") and "rmse" in r
            and r["rmse"] > 1.5 * r["best_validation"]]
    if gaps:
        lines.append("* LaMP cells whose test RMSE exceeds 1.5× the validation score LaMP kept (its own hold-out, "
                     "Sec. 5.1): " + "; ".join(f"{r['function']}{' (noisy)' if r['noisy'] else ''} n = {r['n']} "
                                               f"r{r['rep']}: validation {r['best_validation']:.4f} at epoch "
                                               f"{r['best_epoch']}, test {r['rmse']:.4f}" for r in gaps) + ".")
    late = [r for r in rows if r["method"] == "lamp" and r.get("best_epoch") and "rmse" in r
            and r["best_epoch"] >= 0.95 * (5000 if r["n"] <= 100 else 1000)]
    if late:
        lines.append("* LaMP cells whose kept iterate is in the last 5% of the paper's epoch budget (5000 full batch, "
                     "1000 mini-batch; the validation score was still improving when training stopped): "
                     + "; ".join(f"{r['function']}{' (noisy)' if r['noisy'] else ''} n = {r['n']} r{r['rep']} "
                                 f"(epoch {r['best_epoch']})" for r in sorted(late, key=lambda r: (r["n"], r["rep"])))
                     + ".")
    lines += ["", "**Why the accuracy targets are missed (measured)**: the joint optimum of LaMP's objective over the "
              "latent values W and the length-scales is degenerate: `-½ log|K + εI|` rewards a first layer so "
              "smooth that most eigenvalues sit at the jitter ε; full-batch L-BFGS from W = X on G (d = 4) "
              "moves the first-layer length-scale from 0.56 to 1.3-3.1 and L_n from -3.4 to -10.8 while "
              "the test RMSE rises from 0.33 to 0.51. The method works only through the validation-based choice of "
              "the iterate (`best_epoch` in each JSON), and with a tiny jitter (1e-6) the first mini-batch epoch "
              "raises L_n by 49 on the same problem (1e-3 is the library's default; see `LatentMAP`'s `jitter` "
              "docstring for the sweep)."]
    coll = {}
    for p in sorted(glob.glob(os.path.join(CELLS, "collider_*.json"))):
        r = json.load(open(p))
        coll[r["method"]] = r
    if coll:
        lines += ["", "**Beyond the paper: a non-chain DAG** — the latent collider `x1 → w1 → w3 ← w2 ← x2` "
                  "(`pyro_dag.datasets.collider(seed=0)`, only `w3` observed, at 119 of 165 cases; standardised by "
                  "the observed mean and sd). LaMP: `LatentMAP(DAGDGP(graph), nugget='estimate')`, the paper's "
                  "protocol, isotropic RBF on the concatenated parents; DAG-VI (mean field) and DAG-SVI (chordal): "
                  "the README Quickstart's model (RBF kernels, `SumInput` child, 15/15/49 inducing points) with "
                  "*learned* kernels and noise, `train(..., num_steps=3000)`. Error of `w3` against the noise-free "
                  "child.", "",
                  "| method | RMSE all | RMSE held out | CRPS all | CRPS held out | s |", "|---|---|---|---|---|---|"]
        for m in ("lamp", "dagvi", "dagsvi"):
            if m in coll and "error" in coll[m]:
                lines.append(f"| {NAMES[m]} | refused: {coll[m]['error'][:200]} | | | | |")
            elif m in coll:
                r = coll[m]
                lines.append(f"| {NAMES[m]} | {r['rmse_all']:.4f} | {r['rmse_held_out']:.4f} | {r['crps_all']:.4f}"
                             f" | {r['crps_held_out']:.4f} | {r['seconds']:.0f} |")
    write_readme_section("lamp-functions", "\n".join(lines))
    print("\n".join(lines))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", nargs="+", default=list(TEST_FUNCTIONS), choices=list(TEST_FUNCTIONS))
    parser.add_argument("--n", type=int, nargs="+", default=[100, 500, 1000])
    parser.add_argument("--reps", type=int, nargs="+", default=[0], help="replication indices, e.g. 0 1 2")
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--noisy", action="store_true", help="the 0.01 noise variant (App. E)")
    parser.add_argument("--collider", action="store_true", help="the non-chain DAG row instead of the grid")
    parser.add_argument("--report", action="store_true", help="only rebuild the JSON and README from saved cells")
    args = parser.parse_args()
    one_thread()
    if not args.report:
        if args.collider:
            for m in ("lamp", "dagvi", "dagsvi"):
                print(run_collider(m), flush=True)
        else:
            for rep in args.reps:
                for n in args.n:
                    for name in args.functions:
                        for m in args.methods:
                            r = run_one(name, n, rep, args.noisy, m)
                            print({k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()
                                   if k != "environment"}, flush=True)
    report()


if __name__ == "__main__":
    main()
