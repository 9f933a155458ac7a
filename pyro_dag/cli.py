"""The ``pyro-dag`` command line.

* ``pyro-dag fit collider`` -- fit a DAG-DGP to the built-in latent-collider data of the DAG-DGP paper
  (Perlino et al. 2026, arXiv:2607.09645, App. G.3), print a summary, and write metrics (JSON) and a figure
  (PNG) to ``--out``;
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
    fit.add_argument("dataset", choices=["collider"], help="built-in data set")
    fit.add_argument("--steps", type=positive_int, default=3000, help="optimisation steps in all (default 3000)")
    fit.add_argument("--guide", choices=["chordal", "full", "mean_field"], default="chordal",
                     help="variational family: chordal (DAG-SVI, default), full, or mean_field (DAG-VI)")
    fit.add_argument("--backend", choices=["auto", "dense", "sparse"], default="auto",
                     help="structured-guide backend (default auto)")
    fit.add_argument("--seed", type=non_negative_int, default=0, help="optimisation seed (default 0)")
    fit.add_argument("--data-seed", type=non_negative_int, default=0, help="seed of the generated data (default 0)")
    fit.add_argument("--device", type=torch_device, default="cpu",
                     help="torch device: cpu, cuda or cuda:N (default cpu)")
    fit.add_argument("--num-particles", type=positive_int, default=4, help="ancestral samples per step (default 4)")
    fit.add_argument("--lr", type=positive_float, default=0.01, help="Adam learning rate, > 0 (default 0.01)")
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
