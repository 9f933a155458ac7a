"""``pyro-dag fit multifidelity``: the multi-fidelity protocols of :mod:`pyro_dag.emulation.experiment` from the
command line (one problem, one protocol); prints the high fidelity's metrics and the Shapley shares where the
target has several parents, and writes the JSON and the figure to ``--out``. With ``--protocol published`` it
also scores an exact GP and linear regression fitted to the high fidelity's runs alone on the same test runs
(``"baselines"`` in the JSON), and warns (:class:`~pyro_dag.baselines.BaselineWarning`) when the emulator is not
better.
"""
import numpy as np

__all__ = ["run_multifidelity"]


def run_multifidelity(parser, args):
    """``pyro-dag fit multifidelity --problem P --protocol published|hf-scarce``: prints the high fidelity's
    metrics and writes the JSON and the figure to ``--out``."""
    from ..emulation.experiment import PROBLEMS, run_protocol
    from ..threads import limit_threads

    from .fit_data import DATA_OPTIONS

    for name in [n for n in DATA_OPTIONS if n != "pretrain_steps"] + ["checkpoint", "distributed"]:
        value = getattr(args, name, None)
        if value not in (None, [], False, 300 if name == "latent_steps" else None):
            what = ("a protocol runs many short fits, which are not checkpointed" if name == "checkpoint" else
                    "its data are the built-in problems (--problem)" if name == "csv" else
                    "it is for 'fit sachs' or 'fit --csv'")
            parser.error(f"argument --{name.replace('_', '-')}: not an option of 'fit multifidelity' ({what}); "
                         "drop it")
    if args.problem not in PROBLEMS:
        parser.error(f"argument --problem: choose from {', '.join(PROBLEMS)}, got {args.problem!r}")
    if args.guide == "full":
        parser.error("argument --guide: multifidelity takes chordal (DAG-SVI) or mean_field (DAG-VI)")
    steps = 1000 if args.steps is None else args.steps
    with limit_threads(args.threads):
        pretrain = 500 if getattr(args, "pretrain_steps", None) is None else args.pretrain_steps
        out = run_protocol(args.problem, args.protocol, precision=args.guide, steps=steps, pretrain_steps=pretrain,
                           seed=args.seed, out=args.out, progress=not args.no_progress)
    m = out["metrics"]
    baselines = _published_baselines(args, out) if args.protocol == "published" else None
    label = "DAG-SVI" if args.guide == "chordal" else "DAG-VI"
    es = f"  weighted ES {m['energy_score']:.4g}" if "energy_score" in m else ""
    print(f"multifidelity {args.problem} | {args.protocol} | {label}, {steps} steps | high fidelity RMSE "
          f"{m['rmse']:.4g}  N-RMSE {m['nrmse']:.3f}  CRPS {m['crps']:.4g}{es}  ({m['seconds']:.0f} s per fit)")
    if "shapley_mean_share" in out["result"]:
        r = out["result"]
        print(f"  Shapley shares of {r['shapley_players']}: mean {np.round(r['shapley_mean_share'], 3).tolist()}, "
              f"variance {np.round(r['shapley_variance_share'], 3).tolist()}")
    if baselines is not None:
        c = baselines["comparison"]
        scores = ", ".join(f"{k} {v['rmse']:.4g}" for k, v in baselines["baselines"].items())
        verdict = "better than the baselines" if c["better_than_baselines"] else f"NOT better than {c['best_baseline']}"
        print(f"  baselines on the high fidelity's runs alone: {scores}; emulator RMSE {c['rmse']:.4g}: {verdict}")
    print("  wrote " + ", ".join(out["paths"]))
    return 0


def _published_baselines(args, out):
    """An exact GP, linear regression and the training mean fitted to the high fidelity's training runs alone and
    scored on the published split's test runs (:func:`~pyro_dag.baselines.baseline_scores`), compared with the
    emulator's RMSE (:class:`~pyro_dag.baselines.BaselineWarning` unless the emulator is better); added to the JSON
    under ``"baselines"``."""
    from ..baselines import baseline_scores, compare_with_baselines
    from ..emulation.experiment import make_problem
    from ..outputs import write_json

    p = make_problem(args.problem, args.seed)
    X, y = p.train[p.target]
    base = baseline_scores(X, y[:, 0], p.test[0], p.test[1][:, 0], seed=args.seed)
    comparison = compare_with_baselines(f"multifidelity {args.problem}, high fidelity {p.target!r}",
                                        out["metrics"]["rmse"], base, tolerance=1.0)
    report = {"baselines": base, "comparison": comparison, "n_train": int(len(y)), "n_test": int(len(p.test[1])),
              "inputs": f"the training runs of the high fidelity {p.target!r} alone (no lower fidelity)"}
    out["result"]["baselines"] = report
    for path in out["paths"]:
        if path.endswith(".json"):
            write_json(path, out["result"], indent=2, default=float)     # atomically: the old file or the new one
    return report
