"""The latent collider with default kernels on every run (issue 41, item 1): data seeds x optimisation streams.

The paper's collider (Perlino et al. 2026, arXiv:2607.09645, Sec. 4.1) built as a new user would, with no kernel or
noise given: ``DAGDGP(ds.graph)``, ``AutoStructuredGuide(model)`` (chordal) and ``train(..., num_steps=N)``. Each run
is scored at ``--at`` steps along the way (the held-out child error of the parameters at that step, without the
final best-iterate restoration, so a conservative reading of what ``train(num_steps=that)`` returns) and at the end
(what ``train`` returned). Reported per run: held-out RMSE of the noise-free child against the truth and against
the training mean's, the child's learned noise sd against the truth (0.015), PICP95 / CRPS / NLPD of the held-out
noisy observations, the parents' posterior variance and mean |corr(w1, w2)|, CPU seconds, and whether the run was
restored to its best window or its natural-gradient phase was stopped. ``--mean-field`` adds mean-field runs for the
explaining-away comparison.

    python benchmarks/collider_default_streams.py --data-seeds 0-4 --streams 0-4 --steps 3000 --at 1500
"""
import argparse
import json
import os
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from common import one_thread, write_json  # noqa: E402

TRUE_NOISE_SD = 0.015


def _span(text):
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def _score(model, guide, ds, num_samples=300):
    import torch

    from pyro_dag.experiments.collider import collider_metrics
    from pyro_dag.metrics.regression import node_metrics

    rng = torch.get_rng_state()
    with torch.no_grad():
        m = collider_metrics(model, guide, ds, ds.inputs, num_samples=num_samples)
        pred = model.predict(guide, ds.inputs, num_samples=num_samples)
    torch.set_rng_state(rng)   # scoring along the way must not change the run's random stream
    test = ~ds.train_mask
    noise_var = float(model.likelihoods["w3"].variance.detach())
    y = ds.y_full[test, 0] if ds.y_full.dim() == 2 else ds.y_full[test]
    cal = node_metrics(pred["w3"].loc[:, test, 0], pred["w3"].var[:, test, 0], noise_var, y)
    train_mean = ds.data["w3"][ds.train_mask].mean()
    mean_rmse = float((ds.truth["w3"][test] - train_mean).pow(2).mean().sqrt())
    return {"rmse_test": m["rmse_test"], "mean_predictor_rmse": mean_rmse, "noise_sd": noise_var ** 0.5,
            "noise_factor": noise_var ** 0.5 / TRUE_NOISE_SD, "parent_var": m["parent_var"],
            "mean_abs_corr": m["mean_abs_corr"], "picp95": cal["picp"], "crps": cal["crps"], "nlpd": cal["nlpd"]}


def run_one(data_seed, stream, steps, at, precision, child_kernel="default", noise_step=None, refine=0):
    import pyro
    import torch

    from pyro_dag import DAGDGP
    from pyro_dag.datasets import collider
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    pyro.clear_param_store()
    pyro.set_rng_seed(stream)
    ds = collider(seed=data_seed)
    kernels = None
    if child_kernel == "sum":   # the child's kernel on w1 + w2 (the data's structure), hyperparameters learned
        from pyro_dag import kernels as k
        kernels = {"w3": k.SumInput(k.RBF())}
    model = DAGDGP(ds.graph, kernels=kernels).double()
    guide = AutoStructuredGuide(model, precision=precision)
    along = {}

    def score_along(step, loss):
        if step in at:
            along[step] = _score(model, guide, ds)
        return False

    t = time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        extra = {} if noise_step is None else {"noise_step": noise_step}   # None: the library's default
        result = train(model, guide, ds.inputs, ds.data, num_steps=steps, progress=False, callbacks=[score_along],
                       **extra)
    cpu = time.process_time() - t
    final = _score(model, guide, ds)
    refined = None
    if refine:
        # the posterior refined with every kernel hyperparameter and noise held at the fit's values (the recipe of
        # docs/guide/natural_gradients.rst): a second train call, whose natural-gradient phase no longer moves with
        # the hyperparameters; no candidates or hidden-node start (the fit is the start)
        from pyro_dag.utils import freeze
        freeze(model.kernels)
        freeze(model.likelihoods)
        t2 = time.process_time()
        with warnings.catch_warnings(record=True) as caught2:
            warnings.simplefilter("always")
            second = train(model, guide, ds.inputs, ds.data, num_steps=refine, progress=False, candidate_starts=1,
                           start_hidden=False)
        refined = {"steps": refine, "cpu_s": time.process_time() - t2, "final": _score(model, guide, ds),
                   "final_loss": second.losses[-1], "natural_gradient_stopped": second.natural_gradient_stopped,
                   "restored_step": second.restored_step, "warnings": sorted({w.category.__name__ for w in caught2})}
    return {"data_seed": data_seed, "stream": stream, "steps": steps, "precision": precision, "refined": refined,
            "child_kernel": child_kernel, "noise_step": result.settings.get("noise_step"),
            "noise_step_option": "default" if noise_step is None else noise_step, "cpu_s": cpu,
            "final": final, "along": {str(k): v for k, v in along.items()}, "restored_step": result.restored_step,
            "natural_gradient_stopped": result.natural_gradient_stopped,
            "started_nodes": result.started_nodes, "final_loss": result.losses[-1],
            "noise_steps": result.noise_steps, "rollbacks": [list(r) for r in result.rollbacks],
            "fallback": result.fallback, "candidates": result.candidates,
            "min_window_loss": min(sum(result.losses[i:i + 50]) / 50 for i in range(0, len(result.losses) - 49, 50)),
            "warnings": sorted({w.category.__name__ for w in caught})}


def exact_baseline(data_seed):
    """The baseline a user already has: an exact GP (:class:`~pyro_dag.baselines.ExactGP`) of the child on both roots,
    fitted to the observed cases; its held-out RMSE against the noise-free child, its PICP95 / CRPS / NLPD of the held-out
    noisy observations, its noise sd and log evidence."""
    import torch

    from pyro_dag.baselines import ExactGP
    from pyro_dag.datasets import collider
    from pyro_dag.metrics.regression import node_metrics

    ds = collider(seed=data_seed)
    X = torch.cat([ds.inputs["x1"], ds.inputs["x2"]], -1)
    y = ds.data["w3"][:, 0]
    keep = torch.isfinite(y)
    t = time.process_time()
    gp = ExactGP(restarts=3).fit(X[keep], y[keep])
    mean, var = gp.predict(X[~keep])
    cpu = time.process_time() - t
    cal = node_metrics(mean.unsqueeze(0), var.unsqueeze(0), float(gp.noise_variance), ds.y_full[~keep, 0],
                       num_noise_draws=500)
    rmse = float((mean - ds.truth["w3"][~keep, 0]).pow(2).mean().sqrt())
    return {"data_seed": data_seed, "rmse_test": rmse, "noise_sd": float(gp.noise_variance) ** 0.5,
            "log_evidence": float(gp.log_marginal_likelihood), "picp95": cal["picp"], "crps": cal["crps"],
            "nlpd": cal["nlpd"], "cpu_s": cpu}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-seeds", default="0-4")
    p.add_argument("--streams", default="0-4")
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--at", type=int, nargs="*", default=[1500])
    p.add_argument("--precision", default="chordal")
    p.add_argument("--child-kernel", choices=["default", "sum"], default="default",
                   help="the child's kernel: the default, or SumInput(RBF()) on w1 + w2 with learned hyperparameters "
                        "(the explaining-away comparison)")
    p.add_argument("--noise-step", choices=["default", "auto", "on", "off"], default="default",
                   help="train(noise_step=...): the library's default, 'auto', True or False")
    p.add_argument("--refine", type=int, default=0,
                   help="then hold every kernel hyperparameter and noise and train this many more steps (the "
                        "explaining-away recipe of docs/guide/natural_gradients.rst); the run's 'refined' record")
    p.add_argument("--name", default="collider_default_streams")
    p.add_argument("--append", action="store_true", help="add the runs to the JSON's existing ones")
    p.add_argument("--baseline", action="store_true",
                   help="only fit the exact-GP baseline on each data set (collider_exact_gp_baseline.json)")
    args = p.parse_args(argv)
    one_thread()
    if args.baseline:
        rows = [exact_baseline(d) for d in _span(args.data_seeds)]
        for r in rows:
            print(f"data {r['data_seed']}: exact GP held-out {r['rmse_test']:.3f} noise sd {r['noise_sd']:.4f} "
                  f"PICP {r['picp95']:.2f} log evidence {r['log_evidence']:.1f}")
        write_json("collider_exact_gp_baseline", {"runs": rows})
        return
    path = os.path.join(HERE, "results", f"{args.name}.json")
    runs = []
    if args.append and os.path.exists(path):
        with open(path) as f:
            runs = json.load(f)["runs"]
    for d in _span(args.data_seeds):
        for s in _span(args.streams):
            row = run_one(d, s, args.steps, set(args.at), args.precision, args.child_kernel,
                          {"default": None, "auto": "auto", "on": True, "off": False}[args.noise_step], args.refine)
            runs.append(row)
            f = row["final"]
            print(f"data {d} stream {s} {args.precision} {args.steps}: held-out {f['rmse_test']:.3f} "
                  f"(mean {f['mean_predictor_rmse']:.3f}) noise x{f['noise_factor']:.1f} var {f['parent_var']:.3f} "
                  f"|corr| {f['mean_abs_corr']:.2f} PICP {f['picp95']:.2f} cpu {row['cpu_s']:.0f} "
                  f"along {[(k, round(v['rmse_test'], 3)) for k, v in row['along'].items()]} "
                  f"restored {row['restored_step']} ng_stopped {row['natural_gradient_stopped']} "
                  f"noise steps {row['noise_steps']} rollbacks {len(row['rollbacks'])} "
                  f"fallback {None if row['fallback'] is None else row['fallback'].get('kept')} "
                  f"candidates {row['candidates']}", flush=True)
            if row["refined"]:
                g = row["refined"]["final"]
                print(f"  refined {args.refine}: held-out {g['rmse_test']:.3f} noise x{g['noise_factor']:.1f} var "
                      f"{g['parent_var']:.3f} |corr| {g['mean_abs_corr']:.2f} PICP {g['picp95']:.2f} ng_stopped "
                      f"{row['refined']['natural_gradient_stopped']}", flush=True)
            write_json(args.name, {"runs": runs, "targets": {"rmse_test": 0.1, "noise_factor": 10,
                                                             "parent_var": 0.05, "mean_abs_corr": 0.3}})
    print("wrote", path)


if __name__ == "__main__":
    main()
