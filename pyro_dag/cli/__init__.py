"""The ``pyro-dag`` command line.

* ``pyro-dag fit collider`` -- fit a DAG-DGP to the built-in latent-collider data of the DAG-DGP paper
  (Perlino et al. 2026, arXiv:2607.09645, App. G.3), print a summary, and write metrics (JSON) and a figure
  (PNG) to ``--out``;
* ``pyro-dag fit sachs --task interpolation|extrapolation --seed K`` -- the DAG-DGP paper's Sachs
  protein-signalling regression (Sec. 6; :mod:`pyro_dag.experiments.sachs`): metrics JSON and a figure;
* ``pyro-dag fit --csv data.csv --graph graph.txt [--inputs A,B] [--latent h:2:C,D] [--test-fraction 0.2]`` --
  your own data (:mod:`pyro_dag.experiments.csv`): per-node held-out metrics (JSON), predictions (CSV), figure;
* ``pyro-dag discover ...`` -- Bayesian structure learning (see :mod:`pyro_dag.structure`).

One module per sub-command: :mod:`pyro_dag.cli.fit` (with :mod:`pyro_dag.cli.fit_data` for ``sachs`` and
``--csv`` and :mod:`pyro_dag.cli.fit_multifidelity` for ``multifidelity``) and :mod:`pyro_dag.cli.discover`;
``python -m pyro_dag.cli`` runs the command too (as ``torchrun`` needs).

Every option is checked when the command line is parsed, before any training starts (``--out`` included):
a bad value exits with status 2 and a message naming the option. The argument types
(:func:`positive_int`, :func:`non_negative_int`, :func:`positive_float`, :func:`unit_interval`,
:func:`torch_device`, :func:`output_dir`; :mod:`pyro_dag.cli.arguments`) are shared by the sub-commands.
"""
import argparse
import sys

from . import discover, fit
from .arguments import non_negative_int, output_dir, positive_float, positive_int, torch_device, unit_interval

__all__ = ["main", "build_parser", "positive_int", "non_negative_int", "positive_float", "unit_interval",
           "torch_device", "output_dir"]


def build_parser():
    """The ``pyro-dag`` argument parser (sub-commands ``fit`` and ``discover``)."""
    parser = argparse.ArgumentParser(prog="pyro-dag", description="Deep GPs and structure learning on DAGs.")
    sub = parser.add_subparsers(dest="command", required=True)
    fit.add_parser(sub)
    discover.add_parser(sub)
    return parser


def main(argv=None):
    """Run ``pyro-dag`` with ``argv`` (default ``sys.argv[1:]``); returns the exit status. Bad options exit
    with status 2 (``SystemExit``) and a message on stderr naming the option; an output file that cannot be
    written (a full disk) returns 1 with a message naming it and the files of the run that were written
    (:class:`pyro_dag.outputs.OutputError`); a checkpoint that cannot be resumed from returns 2 with a message
    naming it (:class:`pyro_dag.infer.training.checkpoint.CheckpointError`, and a ``--save`` file that cannot be
    written, :class:`pyro_dag.persist.SavedFileError`)."""
    from ..outputs import OutputError

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except OutputError as e:
        print(f"pyro-dag {args.command}: error: {e}", file=sys.stderr)
        return 1
    except ValueError as e:
        from ..infer.training.checkpoint import CheckpointError  # here: it loads torch and Pyro
        from ..persist import SavedFileError

        if not isinstance(e, (CheckpointError, SavedFileError)):
            raise
        print(f"pyro-dag {args.command}: error: {e}", file=sys.stderr)
        return 2
