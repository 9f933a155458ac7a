"""Peak memory of ``DAGDGP.predict`` at n = 20000 cases and S = 200 samples.

Latent collider (3 GP nodes, 16 inducing inputs each, float64), an untrained ``AutoStructuredGuide``
(prediction cost does not depend on the guide's values). Peak resident memory is per process, so run one
configuration per process::

    python benchmarks/predict_memory.py                            # default chunking, chordal guide
    python benchmarks/predict_memory.py --batch-size 20000         # all cases in one chunk
    python benchmarks/predict_memory.py --structure mean_field

The returned tensors (samples, loc, var ``[S, n, 1]`` and the moments, for all 3 nodes) take 276 MiB.
"""
import argparse
import resource
import time

import networkx as nx
import pyro
import torch

from pyro_dag import DAGDGP, kernels
from pyro_dag.infer.autoguide import AutoStructuredGuide


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=int, default=None, help="cases per chunk (default: predict's)")
    parser.add_argument("--structure", default="chordal", choices=["chordal", "mean_field"])
    parser.add_argument("--n", type=int, default=20000)
    parser.add_argument("--samples", type=int, default=200)
    args = parser.parse_args()
    torch.set_num_threads(1)
    pyro.set_rng_seed(0)
    g = nx.DiGraph([("x1", "w1"), ("x2", "w2"), ("w1", "w3"), ("w2", "w3")])
    model = DAGDGP(g, kernels={"w3": kernels.SumInput(kernels.RBF(lengthscale=0.6))}, num_inducing=16).double()
    train = {"x1": torch.randn(50, 1, dtype=torch.float64), "x2": torch.randn(50, 1, dtype=torch.float64)}
    data = {"w3": torch.randn(50, 1, dtype=torch.float64)}
    model.setup(train, data)
    guide = AutoStructuredGuide(model, precision=args.structure)
    guide(train, data)
    new = {"x1": torch.randn(args.n, 1, dtype=torch.float64), "x2": torch.randn(args.n, 1, dtype=torch.float64)}
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start = time.perf_counter()
    pred = model.predict(guide, new, num_samples=args.samples, batch_size=args.batch_size)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    returned = sum(t.numel() * t.element_size() for p in pred.values() for t in p if t is not None) / 2**20
    print(f"structure={args.structure} n={args.n} S={args.samples} batch_size={args.batch_size}: peak RSS "
          f"{peak:.0f} MiB (before predict {before:.0f} MiB; returned tensors {returned:.0f} MiB), {seconds:.1f} s")


if __name__ == "__main__":
    main()
