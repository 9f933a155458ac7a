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
