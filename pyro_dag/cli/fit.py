"""``pyro-dag fit``: fit a DAG-DGP to a built-in data set or to your own CSV file.

:func:`add_parser` declares every option (each checked when the command line is parsed, with the types of
:mod:`pyro_dag.cli.arguments`); :func:`run` fills in the recipe's defaults and hands the run to its data set:
``collider`` here (:mod:`pyro_dag.experiments.collider`), ``sachs`` and ``--csv`` in :mod:`pyro_dag.cli.fit_data`,
``multifidelity`` in :mod:`pyro_dag.cli.fit_multifidelity`.
"""
import argparse

from .arguments import (non_negative_int, output_dir, positive_float, positive_int, prepare_output_dir, torch_device,
                        unit_interval)
from .fit_data import DATA_OPTIONS, add_data_arguments, run_data
from .fit_multifidelity import run_multifidelity

__all__ = ["add_parser", "run"]

EXAMPLES = """examples:
  pyro-dag fit --csv data.csv --graph graph.txt                 # your own data: one column per node
  pyro-dag fit --csv data.csv --graph graph.txt --inputs A,B --test-fraction 0.2 --save fit.pt
  pyro-dag fit collider --steps 3000 --out runs/collider        # the DAG-DGP paper's latent collider
  pyro-dag fit sachs --task extrapolation --seed 1
  pyro-dag fit multifidelity --problem forrester
"""


def add_parser(subparsers):
    """Register the ``fit`` sub-command on an ``argparse`` sub-parser collection."""
    fit = subparsers.add_parser(
        "fit", help="fit a DAG-DGP to your own CSV file (--csv FILE --graph FILE) or a built-in data set",
        description="Fit a DAG deep GP (Perlino et al. 2026, arXiv:2607.09645) with SVI and DAGELBO to your own\n"
                    "CSV file or to a built-in data set; writes held-out metrics (JSON), predictions (CSV) and a\n"
                    "figure to --out.",
        epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    data = fit.add_argument_group("data")
    model = fit.add_argument_group("model")
    training = fit.add_argument_group("training")
    outputs = fit.add_argument_group("outputs")
    data.add_argument("dataset", nargs="?", choices=["collider", "sachs", "multifidelity"], default=None,
                     help="built-in data set: collider, sachs (the DAG-DGP paper's protein-signalling regression) or "
                          "multifidelity (simulator hierarchies, see --problem); omit it with --csv")
    data.add_argument("--problem", default="graphical",
                     help="multifidelity: graphical (default), forrester, borehole, branin, currin, park, hartmann3")
    data.add_argument("--protocol", choices=["published", "hf-scarce", "pooled"], default="published",
                     help="multifidelity: the published split (default), 5-fold CV over the high-fidelity runs, or "
                          "the pooled joint 10-fold protocol (weighted energy score)")
    training.add_argument("--steps", type=positive_int, default=None,
                     help="optimisation steps in all (default 3000 for collider, the recipe's for sachs, 2000 for "
                          "--csv)")
    model.add_argument("--guide", choices=["chordal", "full", "mean_field"], default="chordal",
                     help="variational family: chordal (DAG-SVI, default), full, or mean_field (DAG-VI)")
    model.add_argument("--backend", choices=["auto", "dense", "sparse"], default="auto",
                     help="structured-guide backend (default auto)")
    training.add_argument("--seed", type=non_negative_int, default=0, help="optimisation seed (default 0)")
    data.add_argument("--data-seed", type=non_negative_int, default=0, help="seed of the generated data (default 0)")
    training.add_argument("--device", type=torch_device, default="cpu",
                     help="torch device: cpu, cuda or cuda:N (default cpu)")
    training.add_argument("--num-particles", type=positive_int, default=4, help="ancestral samples per step (default 4)")
    training.add_argument("--lr", type=positive_float, default=None,
                     help="Adam learning rate, > 0 (default 0.01; sachs: the recipe's, 1e-3 for paper)")
    training.add_argument("--sampler", choices=["conditional", "joint"], default="conditional",
                     help="DAGELBO sampler for the structured guide (default conditional, the paper's, less CPU "
                          "time per unit of gradient precision on every model measured; joint: cheaper steps on "
                          "deep graphs, 1.3-12x its gradient variance in the measurements)")
    training.add_argument("--recipe", choices=["recommended", "paper"], default="recommended",
                     help="training schedule. recommended (default): antithetic sample pairs; for chordal/full "
                          "guides a cold start and, after 1000 Adam steps, natural-gradient steps on the whole "
                          "posterior; mean_field: Adam only. "
                          "paper: the DAG-DGP paper's protocol (Adam only, plain samples, 1000 mean-field "
                          "warm-start steps for structured guides). The options below override either.")
    training.add_argument("--antithetic", action=argparse.BooleanOptionalAction, default=None,
                     help="draw the ancestral samples in antithetic pairs (eps, -eps); unbiased, less gradient "
                          "variance (needs an even --num-particles; default: on with --recipe recommended)")
    training.add_argument("--natural-gradient", type=unit_interval, default=None, metavar="GAMMA",
                     help="after --natural-gradient-after Adam steps, train the whole Gaussian guide with "
                          "natural-gradient steps of size GAMMA in (0, 1] (0 = Adam only; default: 0.01 for "
                          "chordal/full guides with --recipe recommended, else 0)")
    training.add_argument("--natural-gradient-after", type=non_negative_int, default=1000,
                     help="Adam steps before the natural-gradient steps take over (default 1000)")
    training.add_argument("--warm-start", type=non_negative_int, default=None,
                     help="for chordal/full guides: the first N of the steps train a mean-field guide that then "
                          "initialises the structured one (0 = cold start; default: 1000 with --recipe paper, "
                          "0 with --recipe recommended)")
    outputs.add_argument("--out", type=output_dir, default="pyro_dag_out",
                     help="output directory, created if needed (default ./pyro_dag_out)")
    outputs.add_argument("--checkpoint", type=output_dir, default=None, metavar="DIR",
                     help="save the training state (parameters, optimiser, counters, random-number state) to "
                          "DIR/train_checkpoint.pt every --checkpoint-every steps, atomically; if DIR already holds "
                          "one, continue from it (the same command resumes a killed run, with the same numbers)")
    outputs.add_argument("--checkpoint-every", type=positive_int, default=100, metavar="K",
                     help="steps between checkpoints (default 100)")
    training.add_argument("--threads", type=positive_int, default=1,
                     help="CPU threads for torch and BLAS during the fit (default 1: these problems are small, and "
                          "extra threads under background load make each step much slower)")
    outputs.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    training.add_argument("--distributed", action="store_true",
                     help="with --csv, under torchrun: shard the training rows over the processes and train "
                          "data-parallel (torch.distributed: gloo on CPU, nccl on GPU), e.g. 'torchrun "
                          "--nproc_per_node=2 -m pyro_dag.cli fit --csv data.csv --graph g.txt --distributed'; "
                          "rank 0 writes the outputs")
    outputs.add_argument("--save", default=None, metavar="FILE",
                         help="with --csv: also save the fitted model and guide to FILE (pyro_dag.persist.save; read "
                              "it back with pyro_dag.persist.load, see the guide's 'Saving a fit')")
    add_data_arguments(data, model, training)
    fit.set_defaults(func=run, subparser=fit)
    return fit


def _resolve_fit_options(parser, args):
    """Fill the recipe's defaults in and check the options that depend on each other (before any training)."""
    recommended = args.recipe == "recommended"
    structured = args.guide != "mean_field"
    if args.antithetic is None:
        args.antithetic = recommended
    if args.natural_gradient is None:
        args.natural_gradient = 0.01 if (recommended and structured) else 0.0
    if args.warm_start is None:
        args.warm_start = 0 if recommended else 1000
    if args.antithetic and args.num_particles % 2:
        parser.error(f"argument --num-particles: --antithetic pairs the samples, so --num-particles must be even, "
                     f"got {args.num_particles} (or pass --no-antithetic)")
    args.warm_start = min(args.warm_start, args.steps - 1)
    return args


def run(args):
    """Execute ``pyro-dag fit`` (see the module docstring); returns the exit status."""
    parser = args.subparser
    if args.save is not None and args.csv is None:
        parser.error("argument --save: saves a fit of your own data; use it with 'fit --csv FILE --graph FILE'")
    if args.dataset == "multifidelity":
        return run_multifidelity(parser, args)
    if args.distributed and args.csv is None:
        parser.error("argument --distributed: shards the rows of your own data over processes; use it with "
                     "'fit --csv FILE --graph FILE' under torchrun")
    if args.dataset != "collider":
        return run_data(args)
    return _run_collider(parser, args)


def _check_collider_only(parser, args):
    for name in DATA_OPTIONS:
        value = getattr(args, name)
        if value != (300 if name == "latent_steps" else [] if name == "latent" else None):
            parser.error(f"argument --{name.replace('_', '-')}: not an option of 'fit collider' (it is for 'fit "
                         "sachs' or 'fit --csv')")


def _run_collider(parser, args):
    """``pyro-dag fit collider``."""
    from ..experiments.collider import fit_collider, save_collider_outputs
    from ..threads import limit_threads

    _check_collider_only(parser, args)
    args.steps = 3000 if args.steps is None else args.steps
    args.lr = 0.01 if args.lr is None else args.lr
    _resolve_fit_options(parser, args)
    prepare_output_dir(parser, args.out)
    if args.checkpoint is not None:
        prepare_output_dir(parser, args.checkpoint, option="--checkpoint")
    with limit_threads(args.threads):
        result = fit_collider(steps=args.steps, precision=args.guide, backend=args.backend, seed=args.seed,
                              device=args.device, num_particles=args.num_particles, lr=args.lr,
                              progress=not args.no_progress, dataset_seed=args.data_seed,
                              warm_start=args.warm_start, sampler=args.sampler,
                              antithetic=args.antithetic, natural_gradient=args.natural_gradient,
                              natural_gradient_after=args.natural_gradient_after, num_threads=args.threads,
                              checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                              resume=args.checkpoint is not None)
        metrics_path, fig_path = save_collider_outputs(result, args.out)
    m = result["metrics"]
    schedule = (f"{args.natural_gradient_after} Adam + natural-gradient steps (γ {args.natural_gradient})"
                if args.natural_gradient and args.steps > args.natural_gradient_after else "Adam")
    print(f"latent collider | recipe={args.recipe}: {schedule}, antithetic={'on' if args.antithetic else 'off'}, "
          f"warm start {args.warm_start}")
    if result["train"].resumed_from:
        print(f"latent collider | resumed from the checkpoint in {args.checkpoint} after step "
              f"{result['train'].resumed_from}")
    print(f"latent collider | guide={m['structure']} ({m['backend']}) steps={m['steps']} "
          f"time={m['train_seconds']:.1f}s final ELBO={m['final_elbo']:.1f}")
    print(f"  child w3 RMSE  train {m['rmse_train']:.4f}  held-out {m['rmse_test']:.4f}")
    print(f"  child w3 CRPS  train {m['crps_train']:.4f}  held-out {m['crps_test']:.4f}")
    print(f"  explaining-away: mean |corr(w1, w2)| {m['mean_abs_corr']:.3f}, parent variance {m['parent_var']:.4f}")
    print(f"  wrote {metrics_path} and {fig_path}")
    return 0
