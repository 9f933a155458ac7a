"""The problem zoo's quick mode (benchmarks/zoo.py) on two tiny problems: every row scored, the JSON schema, and the
summary table."""
import importlib.util
import json
import math
import os

import pytest

ZOO = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "zoo.py")


def _zoo():
    spec = importlib.util.spec_from_file_location("zoo_benchmark", ZOO)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_zoo_quick(tmp_path):
    pytest.importorskip("scipy")
    zoo = _zoo()
    out = tmp_path / "zoo_quick.json"
    zoo.main(["--quick", "--only", "step1d", "latent_chain", "--methods", "default", "exact_gp", "linear", "mean",
              "--out", str(out)])
    res = json.loads(out.read_text())
    assert res["schema"] == zoo.SCHEMA and res["quick"] is True
    assert set(res["problems"]) == {"step1d", "latent_chain"}
    assert res["problems"]["latent_chain"]["hidden"] == ["h"]
    rows = res["rows"]
    assert {(r["problem"], r["method"]) for r in rows} == {
        (p, m) for p in ("step1d", "latent_chain") for m in ("default", "exact_gp", "linear", "mean")}
    for r in rows:
        assert "error" not in r, r
        for k in ("rmse", "nlpd", "crps", "cpu_seconds"):
            assert math.isfinite(r[k]), (r["problem"], r["method"], k)
        assert r["seed"] == 0
    default = [r for r in rows if r["method"] == "default"]
    assert all("y" in r["noise_variances"] and r["noise_variances"]["y"] > 0 for r in default)
    mean = {r["problem"]: r["rmse"] for r in rows if r["method"] == "mean"}
    assert all(0.5 < v < 2.0 for v in mean.values())       # standardised units: the training mean's RMSE is ~1
    md = zoo.summary_markdown(res)
    assert "### Overview" in md and "### step1d (nonsmooth)" in md and "| exact_gp |" in md


def test_zoo_problem_registry():
    zoo = _zoo()
    assert len(zoo.PROBLEMS) >= 14
    kinds = {k for k, _ in zoo.PROBLEMS.values()}
    assert kinds == {"smooth", "nonsmooth", "noisy", "latent", "multifidelity", "tabular"}
    import torch

    x = torch.tensor([[0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573]], dtype=torch.float64)
    assert float(zoo.hartmann6(x)) == pytest.approx(-3.32237, abs=1e-4)   # the global minimum


def test_zoo_generated_latent_draws(tmp_path):
    """``--generated latent --draws A-B --seeds ...``: one problem per draw (the same data on every stream), rows with
    PICP95 beside RMSE, and the share of runs / draws meeting each target."""
    pytest.importorskip("scipy")
    zoo = _zoo()
    out = tmp_path / "zoo_generated_quick.json"
    zoo.main(["--quick", "--generated", "latent", "--draws", "100-101", "--seeds", "0-1", "--methods", "exact_gp",
              "linear", "mean", "--out", str(out)])
    res = json.loads(out.read_text())
    assert set(res["problems"]) == {"gen-latent-100", "gen-latent-101"}
    assert res["generated"]["draws"] == [100, 101] and res["generated"]["streams"] == [0, 1]
    assert len(res["code"]["tree"]) == 40 and all(r["code_tree"] == res["code"]["tree"] for r in res["rows"])
    assert len(res["rows"]) == 2 * 2 * 3
    for r in res["rows"]:
        assert 0.0 <= r["picp95"] <= 1.0 and r["mean_sd"] > 0
    # the data depend on the draw only: the mean predictor is the same on both streams
    means = [r["rmse"] for r in res["rows"] if r["problem"] == "gen-latent-100" and r["method"] == "mean"]
    assert means[0] == means[1]
    shares = zoo.generated_targets(res, method="exact_gp")
    runs_met, runs, draws_met, draws = shares["latent"]["per_target"]["not worse than the training mean"]
    assert (runs, draws) == (4, 2) and 0 <= runs_met <= 4
    assert "PICP95 in [0.88, 0.99]" in shares["latent"]["per_target"]
    assert zoo.parse_range("0,3,5-7") == [0, 3, 5, 6, 7]


def test_picp_is_the_coverage_of_the_central_interval():
    """PICP95 of a Gaussian predictive counts the observations inside mean ± 1.96 sd; the mixture's from its CDF."""
    import torch

    zoo = _zoo()
    mean, var = torch.zeros(5), torch.ones(5)
    y = torch.tensor([0.0, 1.9, -1.95, 2.0, -3.0])
    rmse, nlpd, crps, picp, sd = zoo._gauss_scores(mean, var, y)
    assert picp == pytest.approx(3 / 5) and sd == pytest.approx(1.0)
    loc = torch.zeros(4, 5, dtype=torch.float64)
    out = zoo._mixture_scores(loc, torch.ones(4, 5, dtype=torch.float64), 0.0, y.double())
    assert out[3] == pytest.approx(3 / 5) and out[4] == pytest.approx(1.0)
    assert zoo.picp_flag([0.80]).startswith("PICP95 0.80 < 0.88") and zoo.picp_flag([0.95]) == ""
    assert "under-confident" in zoo.picp_flag([1.0])
