"""The ``pyro-dag`` command line.

* ``pyro-dag fit collider`` -- fit a DAG-DGP to the built-in latent-collider data of the DAG-DGP paper
  (Perlino et al. 2026, arXiv:2607.09645, App. G.3), print a summary, and write metrics (JSON) and a figure
  (PNG) to ``--out``;
* ``pyro-dag fit sachs --task interpolation|extrapolation --seed K`` -- the DAG-DGP paper's Sachs
  protein-signalling regression (Sec. 6; :mod:`pyro_dag.experiments.sachs`): metrics JSON and a figure;
* ``pyro-dag fit --csv data.csv --graph graph.txt [--inputs A,B] [--latent h:2:C,D] [--test-fraction 0.2]`` --
  your own data (:mod:`pyro_dag.experiments.csv`): per-node held-out metrics (JSON), predictions (CSV), figure;
* ``pyro-dag discover ...`` -- Bayesian structure learning (see :mod:`pyro_dag.structure`).

Every option is checked when the command line is parsed, before any training starts (``--out`` included):
a bad value exits with status 2 and a message naming the option. The argument types below
(:func:`positive_int`, :func:`non_negative_int`, :func:`positive_float`, :func:`unit_interval`,
:func:`torch_device`, :func:`output_dir`) are shared by the sub-commands.
"""
import argparse
import importlib.util
import math
import os
import sys
import tempfile

__all__ = ["main", "build_parser", "positive_int", "non_negative_int", "positive_float", "unit_interval",
           "torch_device", "output_dir"]


def _int(text):
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text):
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_int(text):
    """``argparse`` type: an integer ``>= 1``."""
    value = _int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer (>= 1), got {text}")
    return value


def non_negative_int(text):
    """``argparse`` type: an integer ``>= 0``."""
    value = _int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer (>= 0), got {text}")
    return value


def positive_float(text):
    """``argparse`` type: a finite number ``> 0`` (NaN and inf are refused)."""
    value = _float(text)
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text}")
    return value


def unit_interval(text):
    """``argparse`` type: a step size in ``[0, 1]`` (0 switches the step off)."""
    value = _float(text)
    if not 0 <= value <= 1:  # also refuses NaN
        raise argparse.ArgumentTypeError(f"must be a step size in (0, 1] (0: off), got {text}")
    return value


def torch_device(text):
    """``argparse`` type: ``cpu``, ``cuda`` or ``cuda:N``, CUDA only where it is available; returns the string."""
    kind, _, index = text.partition(":")
    if kind not in ("cpu", "cuda") or (index and (kind == "cpu" or not index.isdigit())):
        raise argparse.ArgumentTypeError(f"{text!r} is not supported: use cpu, cuda or cuda:N")
    if kind == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise argparse.ArgumentTypeError(f"{text}: CUDA is not available on this machine; use cpu")
        if index and int(index) >= torch.cuda.device_count():
            raise argparse.ArgumentTypeError(f"{text}: this machine has {torch.cuda.device_count()} CUDA "
                                             f"device(s) (cuda:0 to cuda:{torch.cuda.device_count() - 1})")
    return text


def output_dir(text):
    """``argparse`` type: a directory that exists and is writable, or that can be created (its nearest existing
    ancestor is a writable directory). Nothing is created here."""
    if not text:
        raise argparse.ArgumentTypeError("is empty; give a directory")
    path = os.path.abspath(text)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"{text} exists and is not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise argparse.ArgumentTypeError(f"{text} is not writable")
        return text
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{text} cannot be created: {parent} is not writable")
    return text


def _prepare_output_dir(parser, path, option="--out"):
    """Create ``path`` and write a probe file in it, so that an unwritable output fails before training."""
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as e:
        parser.error(f"argument {option}: {path} is not writable ({e.strerror or e})")


def _add_fit_parser(sub):
    fit = sub.add_parser("fit", help="fit a DAG-DGP to a built-in data set",
                         description="Fit a DAG deep GP with SVI and DAGELBO to a built-in data set.")
    fit.add_argument("dataset", nargs="?", choices=["collider", "sachs", "multifidelity"], default=None,
                     help="built-in data set: collider, sachs (the DAG-DGP paper's protein-signalling regression) or "
                          "multifidelity (simulator hierarchies, see --problem); omit it with --csv")
    fit.add_argument("--problem", default="graphical",
                     help="multifidelity: graphical (default), forrester, borehole, branin, currin, park, hartmann3")
    fit.add_argument("--protocol", choices=["published", "hf-scarce", "pooled"], default="published",
                     help="multifidelity: the published split (default), 5-fold CV over the high-fidelity runs, or "
                          "the pooled joint 10-fold protocol (weighted energy score)")
    fit.add_argument("--steps", type=positive_int, default=None,
                     help="optimisation steps in all (default 3000 for collider, the recipe's for sachs, 2000 for "
                          "--csv)")
    fit.add_argument("--guide", choices=["chordal", "full", "mean_field"], default="chordal",
                     help="variational family: chordal (DAG-SVI, default), full, or mean_field (DAG-VI)")
    fit.add_argument("--backend", choices=["auto", "dense", "sparse"], default="auto",
                     help="structured-guide backend (default auto)")
    fit.add_argument("--seed", type=non_negative_int, default=0, help="optimisation seed (default 0)")
    fit.add_argument("--data-seed", type=non_negative_int, default=0, help="seed of the generated data (default 0)")
    fit.add_argument("--device", type=torch_device, default="cpu",
                     help="torch device: cpu, cuda or cuda:N (default cpu)")
    fit.add_argument("--num-particles", type=positive_int, default=4, help="ancestral samples per step (default 4)")
    fit.add_argument("--lr", type=positive_float, default=None,
                     help="Adam learning rate, > 0 (default 0.01; sachs: the recipe's, 1e-3 for paper)")
    fit.add_argument("--sampler", choices=["conditional", "joint"], default="conditional",
                     help="DAGELBO sampler for the structured guide (default conditional, the paper's; joint: "
                          "cheaper steps on deep graphs, more gradient variance)")
    fit.add_argument("--recipe", choices=["recommended", "paper"], default="recommended",
                     help="training schedule. recommended (default): antithetic sample pairs; for chordal/full "
                          "guides a cold start and, after 1000 Adam steps, natural-gradient steps on the whole "
                          "posterior; mean_field: Adam only. "
                          "paper: the DAG-DGP paper's protocol (Adam only, plain samples, 1000 mean-field "
                          "warm-start steps for structured guides). The options below override either.")
    fit.add_argument("--antithetic", action=argparse.BooleanOptionalAction, default=None,
                     help="draw the ancestral samples in antithetic pairs (eps, -eps); unbiased, less gradient "
                          "variance (needs an even --num-particles; default: on with --recipe recommended)")
    fit.add_argument("--natural-gradient", type=unit_interval, default=None, metavar="GAMMA",
                     help="after --natural-gradient-after Adam steps, train the whole Gaussian guide with "
                          "natural-gradient steps of size GAMMA in (0, 1] (0 = Adam only; default: 0.01 for "
                          "chordal/full guides with --recipe recommended, else 0)")
    fit.add_argument("--natural-gradient-after", type=non_negative_int, default=1000,
                     help="Adam steps before the natural-gradient steps take over (default 1000)")
    fit.add_argument("--warm-start", type=non_negative_int, default=None,
                     help="for chordal/full guides: the first N of the steps train a mean-field guide that then "
                          "initialises the structured one (0 = cold start; default: 1000 with --recipe paper, "
                          "0 with --recipe recommended)")
    fit.add_argument("--out", type=output_dir, default="pyro_dag_out",
                     help="output directory, created if needed (default ./pyro_dag_out)")
    fit.add_argument("--checkpoint", type=output_dir, default=None, metavar="DIR",
                     help="save the training state (parameters, optimiser, counters, random-number state) to "
                          "DIR/train_checkpoint.pt every --checkpoint-every steps, atomically; if DIR already holds "
                          "one, continue from it (the same command resumes a killed run, with the same numbers)")
    fit.add_argument("--checkpoint-every", type=positive_int, default=100, metavar="K",
                     help="steps between checkpoints (default 100)")
    fit.add_argument("--threads", type=positive_int, default=1,
                     help="CPU threads for torch and BLAS during the fit (default 1: these problems are small, and "
                          "extra threads under background load make each step much slower)")
    fit.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    fit.add_argument("--distributed", action="store_true",
                     help="with --csv, under torchrun: shard the training rows over the processes and train "
                          "data-parallel (torch.distributed: gloo on CPU, nccl on GPU), e.g. 'torchrun "
                          "--nproc_per_node=2 -m pyro_dag.cli fit --csv data.csv --graph g.txt --distributed'; "
                          "rank 0 writes the outputs")
    _add_data_arguments(fit)
    fit.set_defaults(func=_run_fit, subparser=fit)


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


def _run_fit(args):
    from .experiments.collider import fit_collider, save_collider_outputs
    from .threads import limit_threads

    parser = args.subparser
    if args.dataset == "multifidelity":
        from .emulation.experiment import run_multifidelity_cli

        return run_multifidelity_cli(parser, args)
    if args.distributed and args.csv is None:
        parser.error("argument --distributed: shards the rows of your own data over processes; use it with "
                     "'fit --csv FILE --graph FILE' under torchrun")
    if args.dataset != "collider":
        return _run_fit_data(args)
    _check_collider_only(parser, args)
    args.steps = 3000 if args.steps is None else args.steps
    args.lr = 0.01 if args.lr is None else args.lr
    _resolve_fit_options(parser, args)
    _prepare_output_dir(parser, args.out)
    if args.checkpoint is not None:
        _prepare_output_dir(parser, args.checkpoint, option="--checkpoint")
    with limit_threads(args.threads):
        result = fit_collider(steps=args.steps, structure=args.guide, backend=args.backend, seed=args.seed,
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


_DATA_OPTIONS = ("task", "csv", "graph", "inputs", "latent", "test_fraction", "pretrain_steps", "num_inducing",
                 "latent_steps")


def _add_data_arguments(fit):
    """Options of ``pyro-dag fit sachs`` and ``pyro-dag fit --csv``."""
    fit.add_argument("--task", choices=["interpolation", "extrapolation"], default=None,
                     help="sachs: interpolation (random 80/20 split) or extrapolation (test on both 10%% tails of a "
                          "random projection of the standardised PKC, Plcg; default)")
    fit.add_argument("--csv", default=None, metavar="FILE",
                     help="fit your own data: a CSV file with one column per graph node (header = node names)")
    fit.add_argument("--graph", default=None, metavar="FILE",
                     help="with --csv: the DAG, as an edge list ('a -> b' per line), a bnlearn model string "
                          "('[A][B|A]'), or a .gml / .graphml file")
    fit.add_argument("--inputs", default=None, metavar="A,B",
                     help="with --csv: the observed roots (comma-separated; default every root of the graph)")
    fit.add_argument("--latent", action="append", default=[], metavar="NAME:DIM:CHILD,CHILD",
                     help="with --csv: add a latent input (hidden confounder) NAME of dimension DIM feeding the "
                          "children; repeatable (e.g. --latent h1:1:PKA --latent h2:1:Raf). The children's observed "
                          "test values are used to infer it for the test rows")
    fit.add_argument("--test-fraction", type=unit_interval, default=None,
                     help="with --csv: share of rows held out at random, in (0, 1) (default 0.2)")
    fit.add_argument("--pretrain-steps", type=non_negative_int, default=None,
                     help="sachs / --csv: node-wise pretraining steps (default: the recipe's; 200 for --csv)")
    fit.add_argument("--num-inducing", type=positive_int, default=None,
                     help="with --csv: inducing points per node (default 32)")
    fit.add_argument("--latent-steps", type=positive_int, default=300,
                     help="sachs / --csv: steps of the test cases' latent-input fit (default 300)")


def _check_collider_only(parser, args):
    for name in _DATA_OPTIONS:
        value = getattr(args, name)
        if value != (300 if name == "latent_steps" else [] if name == "latent" else None):
            parser.error(f"argument --{name.replace('_', '-')}: not an option of 'fit collider' (it is for 'fit "
                         "sachs' or 'fit --csv')")


def _run_fit_data(args):
    """``pyro-dag fit sachs`` and ``pyro-dag fit --csv FILE --graph FILE``."""
    from .threads import limit_threads

    parser = args.subparser
    if args.csv is None and args.dataset is None:
        parser.error("give a built-in data set (collider, sachs) or your own data with --csv FILE --graph FILE")
    if args.csv is not None and args.dataset is not None:
        parser.error(f"argument --csv: fits your own data, so drop the data set {args.dataset!r}")
    if args.csv is None:
        for name in ("graph", "inputs", "latent", "test_fraction", "num_inducing"):
            if getattr(args, name) not in (None, []):
                parser.error(f"argument --{name.replace('_', '-')}: an option of 'fit --csv', not of 'fit sachs'")
        if args.guide == "full":
            parser.error("argument --guide: sachs compares chordal (DAG-SVI) and mean_field (DAG-VI)")
    else:
        if args.graph is None:
            parser.error("argument --csv: needs --graph FILE (the DAG over the CSV's columns)")
        if args.task is not None:
            parser.error("argument --task: an option of 'fit sachs', not of 'fit --csv'")
        if args.test_fraction is not None and not 0 < args.test_fraction < 1:
            parser.error(f"argument --test-fraction: must be in (0, 1), got {args.test_fraction}")
        for option, path in (("--csv", args.csv), ("--graph", args.graph)):
            if not os.path.isfile(path):
                parser.error(f"argument {option}: {path} is not a file")
    _prepare_output_dir(parser, args.out)
    if args.checkpoint is not None:
        _prepare_output_dir(parser, args.checkpoint, option="--checkpoint")
    if args.csv is None:
        from .experiments.sachs import fit_sachs, save_sachs_outputs

        method = "dag_svi" if args.guide == "chordal" else "dag_vi"
        task = args.task or "extrapolation"
        with limit_threads(args.threads):
            result = fit_sachs(task, args.seed, method, recipe=args.recipe, num_steps=args.steps,
                               pretrain_steps=args.pretrain_steps, num_particles=args.num_particles, lr=args.lr,
                               latent_steps=args.latent_steps, progress=not args.no_progress,
                               checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every)
            paths = save_sachs_outputs(result, args.out)
        a, u = result["all"], result["unseen"]
        print(f"sachs {task} | seed {args.seed} | {method} | recipe {args.recipe}: {result['pretrain_steps']} "
              f"pretraining + {result['num_steps']} joint steps, {result['seconds_train']:.0f} s")
        print(f"  9-node average: RMSE {a['rmse']:.3f}  CRPS {a['crps']:.3f}  NLPD {a['nlpd']:.3f}  "
              f"PICP {a['picp']:.3f}")
        print(f"  7 nodes other than PKA, Raf: RMSE {u['rmse']:.3f}  CRPS {u['crps']:.3f}")
    else:
        from .experiments.csv import CSVInputError, fit_csv, save_csv_outputs
        from .graph import DAGStructureError

        inputs = None if args.inputs is None else [s.strip() for s in args.inputs.split(",") if s.strip()]
        rank = 0
        if args.distributed:
            from .infer.distributed import DistributedSetupError, init_process_group

            try:
                rank, _ = init_process_group()
            except DistributedSetupError as e:
                parser.error(f"argument --distributed: {e}")
        try:
            with limit_threads(args.threads):
                result = fit_csv(args.csv, args.graph, inputs=inputs, latent=args.latent,
                                 test_fraction=0.2 if args.test_fraction is None else args.test_fraction,
                                 seed=args.seed, num_steps=2000 if args.steps is None else args.steps,
                                 pretrain_steps=200 if args.pretrain_steps is None else args.pretrain_steps,
                                 structure=args.guide, num_inducing=args.num_inducing or 32,
                                 lr=0.01 if args.lr is None else args.lr,
                                 recipe="adam" if args.recipe == "paper" else "recommended",
                                 latent_steps=args.latent_steps, progress=not args.no_progress,
                                 checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                                 num_threads=args.threads, distributed=args.distributed)
                paths = save_csv_outputs(result, args.out) if rank == 0 else []
            if args.distributed:
                import torch.distributed

                torch.distributed.destroy_process_group()
                if rank != 0:
                    return 0
        except (CSVInputError, DAGStructureError, FileNotFoundError) as e:
            print(f"pyro-dag fit: error: {e}", file=sys.stderr)
            return 2
        m = result["metrics"]
        print(f"{args.csv} | {m['n_train']} training / {m['n_test']} test rows | guide {args.guide} | "
              f"{m['pretrain_steps']} pretraining + {m['num_steps']} steps, {m['train_seconds']:.0f} s")
        for w, met in m["per_node"].items():
            note = "  (used to infer the latent inputs)" if met["used_to_infer_latent"] else ""
            print(f"  {w:>12}: RMSE {met['rmse']:.3f} (data units {met['rmse_data_units']:.4g})  "
                  f"CRPS {met['crps']:.3f}  PICP {met['picp']:.2f}{note}")
        print(f"  average: RMSE {m['average']['rmse']:.3f}  CRPS {m['average']['crps']:.3f}")
    print("  wrote " + ", ".join(paths))
    return 0


def build_parser():
    """The ``pyro-dag`` argument parser (sub-commands ``fit`` and, where installed, ``discover``)."""
    parser = argparse.ArgumentParser(prog="pyro-dag", description="Deep GPs and structure learning on DAGs.")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_fit_parser(sub)
    if importlib.util.find_spec("pyro_dag.structure.cli") is not None:
        from .structure.cli import add_parser as add_discover_parser

        add_discover_parser(sub)
    return parser


def main(argv=None):
    """Run ``pyro-dag`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status. Bad options exit
    with status 2 (``SystemExit``) and a message on stderr naming the option."""
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
