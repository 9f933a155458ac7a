"""``pyro-dag fit sachs`` and ``pyro-dag fit --csv FILE --graph FILE``: the options of the two data sets with
real data (:func:`add_data_arguments`) and their run (:func:`run_data`), which checks the options that depend on
each other before any training, then fits the DAG-DGP paper's Sachs regression
(:mod:`pyro_dag.experiments.sachs`) or your own data (:mod:`pyro_dag.experiments.csv`), prints the held-out
metrics and writes the outputs.
"""
import os
import sys

from .arguments import fraction, non_negative_int, positive_int, prepare_output_dir

__all__ = ["DATA_OPTIONS", "add_data_arguments", "run_data"]

#: The ``dest`` names of the options of :func:`add_data_arguments` (``pyro-dag fit collider`` refuses them).
DATA_OPTIONS = ("task", "csv", "graph", "inputs", "latent", "test_fraction", "pretrain_steps", "num_inducing",
                "latent_steps", "predict", "folds")


def add_data_arguments(fit, model=None, training=None):
    """Options of ``pyro-dag fit sachs`` and ``pyro-dag fit --csv`` (on the ``data``, ``model`` and ``training``
    argument groups of ``fit --help``, when given)."""
    model = fit if model is None else model
    training = fit if training is None else training
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
    model.add_argument("--latent", action="append", default=[], metavar="NAME:DIM:CHILD,CHILD",
                     help="with --csv: add a latent input (hidden confounder) NAME of dimension DIM feeding the "
                          "children; repeatable (e.g. --latent h1:1:PKA --latent h2:1:Raf). The children's observed "
                          "test values are used to infer it for the test rows")
    fit.add_argument("--test-fraction", type=fraction, default=None,
                     help="with --csv: share of rows held out at random, in (0, 1) (default 0.2)")
    training.add_argument("--pretrain-steps", type=non_negative_int, default=None,
                     help="sachs / --csv: node-wise pretraining steps (default: the recipe's; 200 for --csv)")
    model.add_argument("--num-inducing", type=positive_int, default=None,
                     help="with --csv: inducing points per node (default: every training row up to 512 for a node "
                          "whose parents are measured, which is fitted exactly, and up to 64 otherwise)")
    training.add_argument("--latent-steps", type=positive_int, default=300,
                     help="sachs / --csv: steps of the test cases' latent-input fit (default 300)")
    fit.add_argument("--predict", choices=["propagate", "one-step"], default=None,
                     help="with --csv: how the held-out rows are predicted. propagate (default): from the inputs "
                          "through the DAG, so measured intermediate columns are not used at test time; one-step: "
                          "each node from the measured values of its parents in the same row (rows with a missing "
                          "or latent parent fall back to propagation)")
    fit.add_argument("--folds", type=positive_int, default=None, metavar="K",
                     help="with --csv: K-fold cross-validation over the rows (K >= 2, the folds fixed by --seed) "
                          "instead of one --test-fraction split; metrics.json gets a 'folds' section with every "
                          "fold's metrics and their mean and sd")


def run_data(args):
    """``pyro-dag fit sachs`` and ``pyro-dag fit --csv FILE --graph FILE``."""
    from ..threads import limit_threads

    parser = args.subparser
    if args.csv is None and args.dataset is None:
        parser.error("give a built-in data set (collider, sachs) or your own data with --csv FILE --graph FILE")
    if args.csv is not None and args.dataset is not None:
        parser.error(f"argument --csv: fits your own data, so drop the data set {args.dataset!r}")
    if args.csv is None:
        for name in ("graph", "inputs", "latent", "test_fraction", "num_inducing", "predict", "folds"):
            if getattr(args, name) not in (None, []):
                parser.error(f"argument --{name.replace('_', '-')}: an option of 'fit --csv', not of 'fit sachs'")
        if args.guide == "full":
            parser.error("argument --guide: sachs compares chordal (DAG-SVI) and mean_field (DAG-VI)")
    else:
        if args.graph is None:
            parser.error("argument --csv: needs --graph FILE (the DAG over the CSV's columns)")
        if args.task is not None:
            parser.error("argument --task: an option of 'fit sachs', not of 'fit --csv'")
        if args.folds is not None:
            if args.folds < 2:
                parser.error(f"argument --folds: K-fold cross-validation needs K >= 2, got {args.folds}")
            if args.test_fraction is not None:
                parser.error("argument --folds: each fold holds out 1/K of the rows; drop --test-fraction")
            if args.distributed:
                parser.error("argument --folds: the K fits run one after another in one process; drop "
                             "--distributed")
        for option, path in (("--csv", args.csv), ("--graph", args.graph)):
            if not os.path.isfile(path):
                parser.error(f"argument {option}: {path} is not a file")
    prepare_output_dir(parser, args.out)
    if args.checkpoint is not None:
        prepare_output_dir(parser, args.checkpoint, option="--checkpoint")
    if args.csv is None:
        from ..experiments.sachs import fit_sachs, save_sachs_outputs

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
        from ..experiments.csv import CSVInputError, fit_csv, save_csv_outputs
        from ..graph import DAGStructureError

        inputs = None if args.inputs is None else [s.strip() for s in args.inputs.split(",") if s.strip()]
        if args.save is not None:
            _check_save(parser, args)
        rank = 0
        if args.distributed:
            from ..infer.distributed import DistributedSetupError, init_process_group

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
                                 precision=args.guide, num_inducing=args.num_inducing or "auto",
                                 lr=0.01 if args.lr is None else args.lr,
                                 recipe="adam" if args.recipe == "paper" else "recommended",
                                 latent_steps=args.latent_steps, progress=not args.no_progress,
                                 checkpoint=args.checkpoint, checkpoint_every=args.checkpoint_every,
                                 num_threads=args.threads, distributed=args.distributed,
                                 prediction=args.predict or "propagate", folds=args.folds,
                                 report=(lambda line: print(line, flush=True)) if args.folds else None)
                paths = list(save_csv_outputs(result, args.out)) if rank == 0 else []
                if args.save is not None and rank == 0:
                    paths.append(_save_fit(args.save, result))
            if args.distributed:
                import torch.distributed

                torch.distributed.destroy_process_group()
                if rank != 0:
                    return 0
        except (CSVInputError, DAGStructureError, FileNotFoundError) as e:
            print(f"pyro-dag fit: error: {e}", file=sys.stderr)
            return 2
        _print_csv_report(args, result["metrics"])
    print("  wrote " + ", ".join(paths))
    return 0


def _check_save(parser, args):
    """``--save FILE``, checked before the fit: one fit (not --folds), a file path, never over another kind."""
    import os

    from ..persist import file_kind

    if args.folds is not None:
        parser.error("argument --save: --folds fits K models, one per fold; drop --save or --folds")
    if os.path.isdir(args.save):
        parser.error(f"argument --save: {args.save!r} is a directory; pass a file path (e.g. "
                     f"{os.path.join(args.save, 'fit.pt')!r})")
    kind = file_kind(args.save)
    if kind is not None and kind != "a saved DAGDGP":
        parser.error(f"argument --save: {args.save!r} already holds {kind}; pass another path")


def _save_fit(path, result):
    """Save the fitted model and guide with their training rows (:func:`pyro_dag.persist.save`); returns ``path``."""
    from ..persist import save

    p = result["problem"]
    train_rows = ~p.test_rows
    save(path, result["model"], result["guide"], p.tensors(train_rows, p.inputs), p.tensors(train_rows, p.nodes))
    return str(path)


def _print_csv_report(args, m):
    """The summary of ``pyro-dag fit --csv``: the split or the folds, the prediction mode, per node the held-out
    metrics and the comparison with the best baseline."""
    folds = m.get("folds")
    if folds is None:
        rows = f"{m['n_train']} training / {m['n_test']} test rows"
    else:
        rows = f"{folds['k']}-fold cross-validation over {m['n_rows']} rows (mean ± sd over the folds)"
    print(f"{args.csv} | {rows} | guide {args.guide} | {m['pretrain_steps']} pretraining + {m['num_steps']} steps, "
          f"{m['train_seconds']:.0f} s")
    print(f"  predictions ({m['prediction'].replace('_', '-')}): {m['predictions']}")
    for w, met in m["per_node"].items():
        note = "  (used to infer the latent inputs)" if met["used_to_infer_latent"] else ""
        rmse = f"{met['rmse']:.3f}"
        if folds is not None:
            rmse += f" ± {folds['per_node'][w]['rmse']['sd']:.3f}"
        extra = f"  propagate {met['rmse_propagate']:.3f}" if "rmse_propagate" in met else ""
        print(f"  {w:>12}: RMSE {rmse} (data units {met['rmse_data_units']:.4g})  CRPS {met['crps']:.3f}  "
              f"PICP {met['picp']:.2f}{extra}{note}")
        cmp = met.get("vs_baselines")
        if cmp is not None:
            verdict = ("no worse than the baselines" if cmp["better_than_baselines"] else
                       f"WORSE than {cmp['best_baseline']} by more than {100 * (m['baselines']['tolerance'] - 1):.0f} %")
            print(f"  {'':>12}  vs baselines: DAG-DGP {cmp['rmse']:.3f}, best {cmp['best_baseline']} "
                  f"{cmp['best_baseline_rmse']:.3f} (ratio {cmp['ratio']:.2f}): {verdict}")
    print(f"  average: RMSE {m['average']['rmse']:.3f}  CRPS {m['average']['crps']:.3f}")
