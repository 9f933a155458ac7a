"""``pyro-dag fit multifidelity``: the multi-fidelity protocols of :mod:`pyro_dag.emulation.experiment` from the
command line (one problem, one protocol); prints the high fidelity's metrics and the Shapley shares where the
target has several parents, and writes the JSON and the figure to ``--out``.
"""
import numpy as np

__all__ = ["run_multifidelity"]


def run_multifidelity(parser, args):
    """``pyro-dag fit multifidelity --problem P --protocol published|hf-scarce``: prints the high fidelity's
    metrics and writes the JSON and the figure to ``--out``."""
    from ..emulation.experiment import PROBLEMS, run_protocol
    from ..threads import limit_threads

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
    label = "DAG-SVI" if args.guide == "chordal" else "DAG-VI"
    es = f"  weighted ES {m['energy_score']:.4g}" if "energy_score" in m else ""
    print(f"multifidelity {args.problem} | {args.protocol} | {label}, {steps} steps | high fidelity RMSE "
          f"{m['rmse']:.4g}  N-RMSE {m['nrmse']:.3f}  CRPS {m['crps']:.4g}{es}  ({m['seconds']:.0f} s per fit)")
    if "shapley_mean_share" in out["result"]:
        r = out["result"]
        print(f"  Shapley shares of {r['shapley_players']}: mean {np.round(r['shapley_mean_share'], 3).tolist()}, "
              f"variance {np.round(r['shapley_variance_share'], 3).tolist()}")
    print("  wrote " + ", ".join(out["paths"]))
    return 0
