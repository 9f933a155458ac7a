"""The ``pyro-dag`` command line (placeholder; the full CLI lands with the DAG-DGP foundation)."""
import argparse


def build_parser():
    parser = argparse.ArgumentParser(prog="pyro-dag", description="Deep GPs and structure learning on DAGs.")
    sub = parser.add_subparsers(dest="command", required=True)
    # Each pillar registers its own sub-commands (one function each, no cross-imports at module load).
    from .structure.cli import add_parser as add_discover_parser

    add_discover_parser(sub)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
