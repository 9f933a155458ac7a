"""The default path by number of rows (issue 43, item 5): ``DAGDGP(graph)`` + ``AutoStructuredGuide(model)`` +
``train(...)`` on 2·10⁴ and 2·10⁵ rows, against exact GPs of the leaf on the inputs.

Problems, drawn fresh per seed (a generator not used to choose any default): ``x ~ U(-2, 2)``; each GP node is a
random-feature draw of an RBF GP (50 random Fourier features, length-scale ``U(0.3, 0.8)`` in its standardised
input) plus Gaussian noise of sd ``U(0.1, 0.3)`` (the function standardised first). Cases:

* ``xy``: ``x -> y`` observed;
* ``xhy``: ``x -> h -> y``, ``h`` observed (an observed chain);
* ``hidden``: ``x -> h -> y``, only ``y`` observed (``num_steps`` joint steps).

The 2·10⁴-row problem is the first 2·10⁴ rows of the 2·10⁵-row one; both are scored on the same 2000 held-out rows
(the leaf ``y`` predicted from ``x``, as the default prediction propagates): RMSE against the noisy ``y`` and
against ``E[y | x]`` (``rmse_f``; through a noisy ``h`` by Monte Carlo), CRPS, NLPD and PICP95 of the predictive
with the learned noise. Peers on the same rows: :class:`~pyro_dag.baselines.ExactGP` of ``y`` on ``x`` with its
default subset of 2000 rows (``exact_gp_subset``), and the exact GP on all 2·10⁴ rows (``exact_gp_all``: the
hyperparameters of that 2000-row fit, the posterior of every row: one Cholesky of the 2·10⁴ Gram matrix, in place).

Each run is a fresh process, one thread; CPU seconds from ``DAGDGP(graph)`` to the end of ``train`` (``fit_cpu_s``),
and of the prediction of the held-out rows (``predict_cpu_s``); peak resident memory.

    flock /tmp/pyro_dag_bench.lock nice python benchmarks/rows_scaling.py --cases xy --seeds 0-4 --resume
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from common import CODE_AT_START, RESULTS, subprocess_result, write_json, write_readme_section  # noqa: E402

GRAPHS = {"xy": [("x", "y")], "xhy": [("x", "h"), ("h", "y")], "hidden": [("x", "h"), ("h", "y")]}
N_TEST = 2000


def make_problem(case, n, seed):
    """``(x [n+N_TEST, 1], h, y, Ey)``: inputs, the middle node (or ``None``), the leaf, and ``E[y | x]``."""
    import math

    import torch

    g = torch.Generator().manual_seed(1000 + seed)

    def draw_function():
        ls = float(torch.empty(()).uniform_(0.3, 0.8, generator=g))
        omega = torch.randn(50, generator=g, dtype=torch.float64) / ls
        phase = torch.rand(50, generator=g, dtype=torch.float64) * 2 * math.pi
        amp = torch.randn(50, generator=g, dtype=torch.float64)
        noise = float(torch.empty(()).uniform_(0.1, 0.3, generator=g))
        return lambda u: (math.sqrt(2 / 50) * amp * torch.cos(u * omega + phase)).sum(-1, keepdim=True), noise

    total = 200000 + N_TEST   # every n shares the same first rows and the same test rows (the last N_TEST)
    x = torch.rand(total, 1, generator=g, dtype=torch.float64) * 4 - 2
    f1, s1 = draw_function()
    f2, s2 = draw_function()
    if case == "xy":
        fx = f1(x / 2)
        loc, sd = fx.mean(), fx.std()
        Ey = (fx - loc) / sd
        y = Ey + s1 * torch.randn(total, 1, generator=g, dtype=torch.float64)
        h = None
    else:
        fh = f1(x / 2)
        fh = (fh - fh.mean()) / fh.std()
        h = fh + s1 * torch.randn(total, 1, generator=g, dtype=torch.float64)
        hl, hs = h.mean(), h.std()
        fy = f2((h - hl) / hs)
        loc, sd = fy.mean(), fy.std()
        y = (fy - loc) / sd + s2 * torch.randn(total, 1, generator=g, dtype=torch.float64)
        eps = torch.randn(64, 1, 1, generator=g, dtype=torch.float64)   # E[y | x] through the noisy h, by MC
        Ey = torch.cat([((f2((fh[i:i + 4096] + s1 * eps - hl) / hs) - loc) / sd).mean(0)
                        for i in range(0, total, 4096)])
    train = torch.arange(n)
    test = torch.arange(total - N_TEST, total)
    pick = (lambda t: None if t is None else (t[train], t[test]))
    return pick(x), pick(h), pick(y), pick(Ey)


WORKER = r"""
import json, os, resource, sys, time, warnings
os.environ["OMP_NUM_THREADS"] = "1"
import torch
torch.set_num_threads(1)
sys.path.insert(0, {here!r})
from rows_scaling import make_problem, GRAPHS
from pyro_dag.metrics.regression import node_metrics, crps_gaussian, nlpd_gaussian, picp
case, n, seed, method, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
(x, xt), h, (y, yt), (_, Ey) = make_problem(case, n, seed)
out = {{}}
cpu = time.process_time
if method == "default":
    import networkx as nx, pyro
    from pyro_dag import DAGDGP
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide
    pyro.set_rng_seed(seed)
    data = {{"y": y}} if case in ("xy", "hidden") else {{"h": h[0], "y": y}}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = cpu()
        model = DAGDGP(nx.DiGraph(GRAPHS[case]), seed=seed).double()
        guide = AutoStructuredGuide(model)
        r = train(model, guide, {{"x": x}}, data, num_steps=steps, progress=False)
        out["fit_cpu_s"] = cpu() - t0
    out["messages"] = sorted({{str(w.message).split(";")[0][:160] for w in caught
                               if type(w.message).__name__ == "ScaledDefaultWarning"}})
    out["stopped"] = r.stopped
    out["minibatch"] = r.settings.get("minibatch")
    out["steps_taken"] = len(r.losses)
    out["num_inducing"] = dict(model.num_inducing)
    t0 = cpu()
    pred = model.predict(guide, {{"x": xt}}, nodes="y", num_samples=100)
    out["predict_cpu_s"] = cpu() - t0
    noise = float(model.likelihoods["y"].variance.detach().reshape(-1)[0])
    loc, var = pred["y"].loc[..., 0], pred["y"].var[..., 0]
    out.update(node_metrics(loc, var, noise, yt[:, 0], seed=seed))
    out["rmse_f"] = float((loc.mean(0) - Ey[:, 0]).pow(2).mean().sqrt())
elif method == "cli":   # pyro-dag fit --csv on the n rows (its own 80/20 split; the held-out rows are its test rows)
    import contextlib, functools, io, tempfile
    import numpy as np
    import pyro_dag.experiments.csv as csv_module
    import pyro_dag.infer as infer_module
    from pyro_dag import DAGDGP
    from pyro_dag.cli import main as cli_main
    folder = tempfile.mkdtemp(prefix="rows_scaling_")
    cols = {{"x": x[:, 0], "y": y[:, 0]}} if h is None else {{"x": x[:, 0], "h": h[0][:, 0], "y": y[:, 0]}}
    np.savetxt(os.path.join(folder, "data.csv"), np.stack([c.numpy() for c in cols.values()], 1), delimiter=",",
               header=",".join(cols), comments="")
    with open(os.path.join(folder, "graph.txt"), "w") as fh:
        fh.write("\n".join(f"{{a}} -> {{b}}" for a, b in GRAPHS[case]) + "\n")
    data_csv, graph_txt, out_dir = (os.path.join(folder, k) for k in ("data.csv", "graph.txt", "out"))
    phases = {{}}

    def timed(owner, name, label):   # CPU seconds of the command's phases (the command runs in this process)
        inner = getattr(owner, name)

        @functools.wraps(inner)
        def wrapper(*args, **kwargs):
            t0 = cpu()
            try:
                return inner(*args, **kwargs)
            finally:
                phases[label] = phases.get(label, 0.0) + cpu() - t0
        setattr(owner, name, wrapper)

    timed(infer_module, "train", "train")
    timed(DAGDGP, "predict", "predict")
    timed(csv_module, "csv_baselines", "baselines")
    timed(csv_module, "save_csv_outputs", "files")
    # as a user runs it: the command's default steps (0: its default), progress shown (stderr kept, below)
    argv = ["fit", "--csv", data_csv, "--graph", graph_txt, "--threads", "1", "--out", out_dir]
    argv += ["--steps", str(steps)] if steps else []
    err, std = io.StringIO(), io.StringIO()
    t0 = cpu()
    with warnings.catch_warnings(), contextlib.redirect_stderr(err), contextlib.redirect_stdout(std):
        warnings.simplefilter("always")
        rc = cli_main(argv)
    out["fit_cpu_s"] = cpu() - t0
    out["phases_cpu_s"] = phases
    stderr = err.getvalue()
    out["messages"] = sorted({{line.split("ScaledDefaultWarning: ")[1][:160] for line in stderr.splitlines()
                               if "ScaledDefaultWarning: " in line}})
    # what the user saw while it ran: the progress bars' names and the lines printed (tqdm redraws with \r)
    seen = [part.strip() for part in stderr.splitlines() if part.strip()]
    out["progress"] = sorted({{part.split(":")[0][:60] if "it/s" in part or "s/it" in part or "%|" in part
                               else part[:120] for part in seen if "Warning" not in part and "warn" not in part}})[:30]
    out["stdout"] = std.getvalue()[-1500:]
    if rc != 0:
        out["error"] = (stderr.strip().splitlines() or ["failed"])[-1][:300]
    else:
        met = json.load(open(os.path.join(out_dir, "metrics.json")))["per_node"]["y"]
        out.update({{k: met[k] for k in ("rmse", "crps", "nlpd", "picp")}}, rmse_f=None, predict_cpu_s=None,
                   baselines={{k: v["rmse"] for k, v in met.get("baselines", {{}}).items()}})
else:   # the exact GP of y on x: type-II ML on a random subset (ExactGP's default of 2000 rows, or --exact-fit-rows)
    from pyro_dag.baselines import ExactGP
    import numpy as np, scipy.linalg as sl
    z = 1.959963984540054

    def scores(mean, var):
        scale = var.sqrt()
        return dict(rmse=float((mean - yt[:, 0]).pow(2).mean().sqrt()),
                    crps=float(crps_gaussian(mean, scale, yt[:, 0])), nlpd=float(nlpd_gaussian(mean, scale, yt[:, 0])),
                    picp=float(picp(mean - z * scale, mean + z * scale, yt[:, 0])),
                    rmse_f=float((mean - Ey[:, 0]).pow(2).mean().sqrt()))

    t0 = cpu()
    gp = ExactGP(seed=seed, max_exact=steps).fit(x, y[:, 0])
    out["subset"] = dict(scores(*gp.predict(xt, include_noise=True)), fit_cpu_s=cpu() - t0, rows=min(n, steps))
    # the same hyperparameters, the posterior of every one of the n rows (one Cholesky of the n x n Gram matrix)
    t0 = cpu()
    Xs, ys = (x - gp._lo) / gp._span, ((y[:, 0] - gp._y_mean) / gp._y_sd).numpy()
    ls, sf2, sn2 = gp.log_lengthscale.exp(), float(gp.log_signal.exp()), gp.noise_fraction
    K = np.empty((n, n))
    for i in range(0, n, 2000):
        K[i:i + 2000] = (sf2 * torch.exp(-0.5 * torch.cdist(Xs[i:i + 2000] / ls, Xs / ls) ** 2)).numpy()
    K[np.diag_indices(n)] += sn2
    L = sl.cholesky(K, lower=True, overwrite_a=True, check_finite=False)
    alpha = sl.cho_solve((L, True), ys, check_finite=False)
    Xt = (xt - gp._lo) / gp._span
    Ks = (sf2 * torch.exp(-0.5 * torch.cdist(Xt / ls, Xs / ls) ** 2)).numpy()
    mean = Ks @ alpha
    v = sl.solve_triangular(L, Ks.T, lower=True, check_finite=False)
    var_f = np.clip(sf2 - (v * v).sum(0), 1e-12, None)
    del K, L, v
    mean = float(gp._y_mean) + float(gp._y_sd) * torch.from_numpy(mean)
    var = float(gp._y_sd) ** 2 * torch.from_numpy(var_f + sn2)
    out["all"] = dict(scores(mean, var), fit_cpu_s=out["subset"]["fit_cpu_s"] + cpu() - t0, rows=n)
out.setdefault("peak_rss_mib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
print("RESULT " + json.dumps(out), flush=True)
"""


def _range(text):
    out = []
    for part in text.split(","):
        a, _, b = part.partition("-")
        out.extend(range(int(a), int(b or a) + 1))
    return out


def run_one(case, n, seed, method, steps, timeout):
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    code = WORKER.format(here=HERE)
    try:
        p = subprocess.run([sys.executable, "-c", code, case, str(n), str(seed), method, str(steps)], env=env,
                           capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout} s"}
    return subprocess_result(p)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", default=["xy", "xhy", "hidden"], choices=sorted(GRAPHS))
    ap.add_argument("--sizes", nargs="+", type=int, default=[20000, 200000])
    ap.add_argument("--seeds", default="0-4")
    ap.add_argument("--methods", nargs="+", default=["default", "exact"], choices=["default", "exact", "cli"],
                    help="default: the library's default path at each size; exact: the exact GPs of y on x on "
                         "--exact-rows rows (type-II ML on a random --exact-fit-rows of them); cli: pyro-dag fit "
                         "--csv on the rows at each size (its own 80/20 split and baselines)")
    ap.add_argument("--steps", type=int, default=None, help="train's num_steps (only the hidden case takes steps; "
                    "default 1000) or pyro-dag fit's --steps (default: the command's own)")
    ap.add_argument("--exact-rows", type=int, default=20000)
    ap.add_argument("--exact-fit-rows", type=int, default=2000, help="ExactGP's max_exact (its default: 2000)")
    ap.add_argument("--timeout", type=int, default=1500)
    ap.add_argument("--resume", action="store_true", help="keep the rows of the JSON measured on this tree")
    args = ap.parse_args()
    if "cli" in args.methods and len(args.methods) > 1:
        ap.error("--methods cli runs alone (its rows go to results/rows_scaling_cli.json)")
    name = "rows_scaling_cli" if args.methods == ["cli"] else "rows_scaling"
    path = os.path.join(RESULTS, f"{name}.json")
    rows = []
    if args.resume and os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
        # the exact GPs do not depend on the library's tree; the default path's rows do
        rows = [r for r in old.get("rows", []) if r["method"] not in ("default", "cli")
                or r.get("tree") == CODE_AT_START.get("tree")]
    done = {(r["case"], r["n"], r["seed"], r["method"]) for r in rows if "error" not in r}

    def record(row):
        nonlocal rows
        key = (row["case"], row["n"], row["seed"], row["method"])
        rows = [r for r in rows if (r["case"], r["n"], r["seed"], r["method"]) != key] + [row]
        print(json.dumps({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()
                          if k not in ("tree", "messages", "num_inducing")}), flush=True)
        write_json(name, {"rows": rows, "n_test": N_TEST, "load": list(os.getloadavg())})

    for case in args.cases:
        for seed in _range(args.seeds):
            for method in args.methods:
                if method == "exact":
                    n = args.exact_rows
                    if (case, n, seed, "exact_gp_all") in done:
                        continue
                    res = run_one(case, n, seed, "exact", args.exact_fit_rows, args.timeout)
                    base = dict(case=case, seed=seed, steps=None)
                    if "error" in res:
                        record(dict(base, n=n, method="exact_gp_all", **res))
                        continue
                    sub = res.pop("subset")
                    record(dict(base, n=n, method="exact_gp_all", **res.pop("all"), peak_rss_mib=res["peak_rss_mib"],
                                fit_rows=sub["rows"]))
                    record(dict(base, n=sub["rows"], method="exact_gp_subset", **sub, fit_rows=sub["rows"]))
                    continue
                for n in args.sizes:
                    if (case, n, seed, method) in done:
                        continue
                    steps = args.steps if args.steps is not None else (0 if method == "cli" else 1000)
                    res = run_one(case, n, seed, method, steps, args.timeout)
                    record(dict(case=case, n=n, seed=seed, method=method, steps=steps or None,
                                tree=CODE_AT_START.get("tree"), **res))
    write_readme_section("rows_scaling", None)


if __name__ == "__main__":
    main()
