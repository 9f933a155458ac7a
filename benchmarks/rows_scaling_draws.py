"""How many predictive draws does an observed chain need? ``model.predict`` of the rows-scaling problem's 2000
held-out rows with 20, 100 and 200 draws (two prediction seeds each) after the default fit of the observed chain
``x -> h -> y`` on 2·10⁴ rows (data seed 0): the leaf is predicted from ``x`` by sampling ``h``, so its predictive is
a mixture over the draws, and too few draws make it too narrow. Quality only (no timing).

    python benchmarks/rows_scaling_draws.py
"""
import os
import sys
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from common import one_thread, write_json, write_readme_section  # noqa: E402
from rows_scaling import GRAPHS, make_problem  # noqa: E402


def main():
    """Fit once, predict with each number of draws, write ``results/rows_scaling_draws.json``."""
    import networkx as nx
    import pyro

    from pyro_dag import DAGDGP
    from pyro_dag.infer import train
    from pyro_dag.infer.autoguide import AutoStructuredGuide
    from pyro_dag.metrics.regression import node_metrics

    one_thread()
    warnings.simplefilter("ignore")
    (x, xt), h, (y, yt), (_, Ey) = make_problem("xhy", 20000, 0)
    pyro.set_rng_seed(0)
    model = DAGDGP(nx.DiGraph(GRAPHS["xhy"]), seed=0).double()
    guide = AutoStructuredGuide(model)
    train(model, guide, {"x": x}, {"h": h[0], "y": y}, num_steps=1000, progress=False)
    noise = float(model.likelihoods["y"].variance.detach().reshape(-1)[0])
    rows = []
    for draws in (20, 100, 200):
        for rep in range(2):
            pyro.set_rng_seed(rep)
            pred = model.predict(guide, {"x": xt}, nodes="y", num_samples=draws)
            loc, var = pred["y"].loc[..., 0], pred["y"].var[..., 0]
            m = {k: v for k, v in node_metrics(loc, var, noise, yt[:, 0], seed=0).items() if isinstance(v, float)}
            rows.append(dict(draws=draws, predict_seed=rep, **m,
                             rmse_f=float((loc.mean(0) - Ey[:, 0]).pow(2).mean().sqrt())))
            print(rows[-1], flush=True)
    write_json("rows_scaling_draws", {"rows": rows, "case": "xhy", "n": 20000, "data_seed": 0, "num_steps": 1000,
                                      "load": list(os.getloadavg())})
    write_readme_section("rows_scaling_draws", None)


if __name__ == "__main__":
    main()
