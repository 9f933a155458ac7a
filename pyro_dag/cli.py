"""The ``pyro-dag`` command line.

* ``pyro-dag fit collider`` -- fit a DAG-DGP to the built-in latent-collider data (digest-000 §4.1), print
  a summary, and write metrics (JSON) and a figure (PNG) to ``--out``.
* ``pyro-dag discover ...`` -- Bayesian structure learning (see :mod:`pyro_dag.structure`).
"""
import argparse
import importlib.util
import sys


def _add_fit_parser(sub):
    fit = sub.add_parser("fit", help="fit a DAG-DGP to a built-in data set",
                         description="Fit a DAG deep GP with SVI and DAGELBO to a built-in data set.")
    fit.add_argument("dataset", choices=["collider"], help="built-in data set")
    fit.add_argument("--steps", type=int, default=3000, help="optimisation steps in all (default 3000)")
    fit.add_argument("--guide", choices=["chordal", "full", "mean_field"], default="chordal",
                     help="variational family: chordal (DAG-SVI, default), full, or mean_field (DAG-VI)")
    fit.add_argument("--backend", choices=["auto", "dense", "sparse"], default="auto",
                     help="structured-guide backend (default auto)")
    fit.add_argument("--seed", type=int, default=0, help="optimisation seed (default 0)")
    fit.add_argument("--data-seed", type=int, default=0, help="seed of the generated data (default 0)")
    fit.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default cpu)")
    fit.add_argument("--num-particles", type=int, default=4, help="ancestral samples per step (default 4)")
    fit.add_argument("--lr", type=float, default=0.01, help="Adam learning rate (default 0.01)")
    fit.add_argument("--sampler", choices=["conditional", "joint"], default="conditional",
                     help="DAGELBO sampler for the structured guide (default conditional, the paper's; joint: "
                          "cheaper steps on deep graphs, more gradient variance)")
    fit.add_argument("--recipe", choices=["recommended", "paper"], default="recommended",
                     help="training schedule. recommended (default): antithetic sample pairs; for chordal/full "
                          "guides a cold start and, after 1000 Adam steps, natural-gradient steps on the whole "
                          "posterior (the best collider results in benchmarks/README.md); mean_field: Adam only. "
                          "paper: the DAG-DGP paper's protocol (Adam only, plain samples, 1000 mean-field "
                          "warm-start steps for structured guides). The options below override either.")
    fit.add_argument("--antithetic", action=argparse.BooleanOptionalAction, default=None,
                     help="draw the ancestral samples in antithetic pairs (eps, -eps); unbiased, less gradient "
                          "variance (needs an even --num-particles; default: on with --recipe recommended)")
    fit.add_argument("--natural-gradient", type=float, default=None, metavar="GAMMA",
                     help="after --natural-gradient-after Adam steps, train the whole Gaussian guide with "
                          "natural-gradient steps of size GAMMA (0 = Adam only; default: 0.01 for chordal/full "
                          "guides with --recipe recommended, else 0)")
    fit.add_argument("--natural-gradient-after", type=int, default=1000,
                     help="Adam steps before the natural-gradient steps take over (default 1000)")
    fit.add_argument("--warm-start", type=int, default=None,
                     help="for chordal/full guides: the first N of the steps train a mean-field guide that then "
                          "initialises the structured one (0 = cold start; default: 1000 with --recipe paper, "
                          "0 with --recipe recommended)")
    fit.add_argument("--out", default="pyro_dag_out", help="output directory (default ./pyro_dag_out)")
    fit.add_argument("--threads", type=int, default=1,
                     help="CPU threads for torch (default 1: these problems are small, and extra threads under "
                          "background load make each step much slower)")
    fit.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    fit.set_defaults(func=_run_fit)


def _run_fit(args):
    import torch

    from .experiments.collider import fit_collider, save_collider_outputs

    torch.set_num_threads(max(1, args.threads))
    if args.steps < 1:
        raise SystemExit("--steps must be >= 1")
    recommended = args.recipe == "recommended"
    structured = args.guide != "mean_field"
    if args.antithetic is None:
        args.antithetic = recommended
    if args.natural_gradient is None:
        args.natural_gradient = 0.01 if (recommended and structured) else 0.0
    if args.warm_start is None:
        args.warm_start = 0 if recommended else 1000
    if args.antithetic and args.num_particles % 2:
        raise SystemExit(f"--antithetic pairs the samples: --num-particles must be even, got {args.num_particles} "
                         "(or pass --no-antithetic)")
    if not 0 <= args.natural_gradient <= 1:
        raise SystemExit(f"--natural-gradient is a step size in (0, 1] (0: off), got {args.natural_gradient}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit(f"--device {args.device}: CUDA is not available on this machine; use --device cpu")
    result = fit_collider(steps=args.steps, structure=args.guide, backend=args.backend, seed=args.seed,
                          device=args.device, num_particles=args.num_particles, lr=args.lr,
                          progress=not args.no_progress, dataset_seed=args.data_seed,
                          warm_start=min(args.warm_start, args.steps - 1), sampler=args.sampler,
                          antithetic=args.antithetic, natural_gradient=args.natural_gradient,
                          natural_gradient_after=args.natural_gradient_after)
    metrics_path, fig_path = save_collider_outputs(result, args.out)
    m = result["metrics"]
    schedule = (f"{args.natural_gradient_after} Adam + natural-gradient steps (γ {args.natural_gradient})"
                if args.natural_gradient and args.steps > args.natural_gradient_after else "Adam")
    print(f"latent collider | recipe={args.recipe}: {schedule}, antithetic={'on' if args.antithetic else 'off'}, "
          f"warm start {min(args.warm_start, args.steps - 1)}")
    print(f"latent collider | guide={m['structure']} ({m['backend']}) steps={m['steps']} "
          f"time={m['train_seconds']:.1f}s final ELBO={m['final_elbo']:.1f}")
    print(f"  child w3 RMSE  train {m['rmse_train']:.4f}  held-out {m['rmse_test']:.4f}")
    print(f"  child w3 CRPS  train {m['crps_train']:.4f}  held-out {m['crps_test']:.4f}")
    print(f"  explaining-away: mean |corr(w1, w2)| {m['mean_abs_corr']:.3f}, parent variance {m['parent_var']:.4f}")
    print(f"  wrote {metrics_path} and {fig_path}")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(prog="pyro-dag", description="Deep GPs and structure learning on DAGs.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_fit_parser(sub)
    if importlib.util.find_spec("pyro_dag.structure.cli") is not None:
        from .structure.cli import add_parser as add_discover_parser

        add_discover_parser(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
