"""Reproducible experiments behind the CLI, the tutorials and the benchmarks."""
