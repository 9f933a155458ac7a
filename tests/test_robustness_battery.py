"""The bad-input battery (benchmarks/robustness.py): its rules on synthetic outcomes, its case registry, and a few
cases of its quick mode end to end (the JSON schema and the summary), so that the runner cannot rot."""
import json
import os
import sys
import warnings

import pytest

BENCHMARKS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks")


@pytest.fixture(scope="module")
def rb():
    sys.path.insert(0, BENCHMARKS)
    try:
        import robustness
        yield robustness
    finally:
        sys.path.remove(BENCHMARKS)


def _case(rb, **kw):
    return rb.Case(id="t", run=lambda ctx: None, **{"cls": "bad input", "entry": "test", "names": ("leaf_c",), **kw})


def _ctx(rb, tmp_path, work=0):
    return rb.Ctx(tmp=str(tmp_path), work=work)


def test_rules_on_errors(rb, tmp_path):
    import numpy as np

    from pyro_dag.dgp.inputs import DAGInputError

    ctx = _ctx(rb, tmp_path)
    clear = DAGInputError("data['leaf_c'] contains inf")
    assert rb.classify(_case(rb), ctx, exc=clear)[0] == "clear"
    assert rb.classify(_case(rb), ctx, exc=DAGInputError("something is wrong"))[0] == "poor"       # names nothing
    assert rb.classify(_case(rb, forbid=("use float64",)), ctx,
                       exc=DAGInputError("leaf_c overflows: use float64"))[0] == "poor"          # misleading
    assert rb.classify(_case(rb), _ctx(rb, tmp_path, work=3), exc=clear)[1].startswith("raised after the work")
    assert rb.classify(_case(rb, max_work=None), _ctx(rb, tmp_path, work=3), exc=clear)[0] == "clear"
    assert rb.classify(_case(rb, expect="accept"), ctx, exc=clear) == ("poor", "a valid input refused")
    try:
        np.linalg.cholesky(-np.eye(2))                  # raised inside numpy: raw, even if it named the input
    except Exception as e:  # noqa: BLE001
        outcome, reason = rb.classify(_case(rb, names=("matrix",)), ctx, exc=e)
    assert outcome == "poor" and reason.startswith("raw")
    assert rb.classify(_case(rb), ctx, exc=RuntimeError("leaf_c"))[0] == "poor"                   # not a clear type
    cli_case = _case(rb, entry="pyro-dag fit --csv")
    assert rb.classify(cli_case, ctx, exc=ValueError("leaf_c"))[1].startswith("the command crashed")
    usage = "usage: pyro-dag fit [--steps STEPS] [--leaf_c]\npyro-dag fit: error: argument --lr: must be > 0"
    res = rb.CLIResult(code=2, stdout="", stderr=usage)
    assert rb.classify(cli_case, ctx, result=res)[0] == "poor"            # the usage block does not count as naming
    assert rb.classify(_case(rb, names=("--lr",)), ctx, result=res)[0] == "clear"


def test_rules_on_results_warnings_and_files(rb, tmp_path):
    import torch

    ctx = _ctx(rb, tmp_path)
    nan = {"leaf_c": torch.tensor([1.0, float("nan")])}
    assert rb.classify(_case(rb), ctx, result=nan) == ("silently wrong", "result['leaf_c'] has non-finite values")
    assert rb.classify(_case(rb), ctx, result={"x": torch.ones(2)})[0] == "poor"           # garbage accepted
    assert rb.classify(_case(rb, expect="accept"), ctx, result={"x": torch.ones(2)})[0] == "clear"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("node 'leaf_c' is constant", UserWarning)
    assert rb.classify(_case(rb), ctx, result=nan, caught=caught) == ("clear", "warned, naming the input")
    assert rb.classify(_case(rb, forbid=("constant",)), ctx, result=nan, caught=caught)[0] == "poor"
    assert rb.classify(_case(rb, good=lambda r: "why not"), ctx, result={"x": 1.0}) == ("poor", "why not")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "figure.png").write_bytes(b"")
    (tmp_path / "out" / "metrics.json").write_text("{\"a\": ")
    after = _case(rb, after=lambda c: rb.broken_files(os.path.join(c.tmp, "out")))
    outcome, reason = rb.classify(after, ctx, exc=OSError(28, "No space left on device"))
    assert outcome == "silently wrong" and "figure.png at 0 bytes" in reason and "metrics.json unreadable" in reason


def test_registry(rb):
    from robustness_cases import all_cases

    cases = all_cases()
    counted = [c for c in cases if c.cls != "control"]
    assert len(counted) >= 150
    assert {c.cls for c in counted} == set(rb.CLASSES)
    assert len({c.id for c in cases}) == len(cases)
    quick = rb.select(cases, quick=True)
    assert 10 <= len(quick) < len(cases) and {c.cls for c in quick} >= set(rb.CLASSES)
    entries = {c.entry.split(" (")[0] for c in counted}
    for e in ("DAGDGP+train", "predict", "AutoStructuredGuide", "MultiFidelityEmulator", "LatentSEM", "LaMP",
              "structure.fit", "structure.exact_posterior", "to_inference_data", "pyro-dag fit --csv",
              "pyro-dag discover"):
        assert e in entries, e


def test_quick_cases_end_to_end(rb, tmp_path):
    out = tmp_path / "robustness_quick.json"
    only = ["dgp_nan_input", "graph_cycle", "train_num_steps_negative", "exact_nan", "ckpt_resume_corrupt",
            "csv_test_fraction_above_1"]
    assert rb.main(["--quick", "--only", *only, "--out", str(out), "--no-readme"]) == 0
    res = json.loads(out.read_text())
    assert res["schema"] == rb.SCHEMA and res["quick"] is True
    rows = {r["id"]: r for r in res["rows"]}
    assert set(rows) == set(only)
    for r in rows.values():
        assert set(r) >= {"id", "class", "entry", "outcome", "reason", "exception", "message", "seconds"}
        assert r["outcome"] in rb.OUTCOMES, r
        assert len(r["message"]) <= 200
    assert rows["dgp_nan_input"]["outcome"] == "clear" and rows["dgp_nan_input"]["exception"] == "DAGInputError"
    assert rows["graph_cycle"]["outcome"] == "clear"
    s = res["summary"]
    assert s["cases"] == len(only) and sum(s["totals"].values()) == len(only) and not s["battery_errors"]


def test_issue_42_classes_end_to_end(rb, tmp_path):
    """A case of each class issue 42 added (files, concurrency, new inputs, scale) runs and comes out clear."""
    out = tmp_path / "robustness_42.json"
    only = ["files_persist_flipped_bytes", "files_train_over_saved_fit", "conc_second_writer", "intv_value_inf",
            "discover_gp_steps", "em_exact_lr_nan", "dgp_zero_rows_no_data"]
    assert rb.main(["--only", *only, "--out", str(out), "--no-readme"]) == 0
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == set(only)
    assert {r["class"] for r in rows.values()} >= {"files", "concurrency", "new inputs"}
    assert {i: r["outcome"] for i, r in rows.items() if r["outcome"] != "clear"} == {}


def test_issue_41_43_features_end_to_end(rb, tmp_path):
    """Quick cases of the features of issues 41 and 43 (a rewritten saved fit's exact_fit_nodes, noise_step with a
    guide that cannot take it, an option of another DeepRegression method, a bad deterministic_amplitude) run and
    come out clear: each was accepted without a word, or silently dropped, before the library refused it."""
    out = tmp_path / "robustness_41.json"
    only = ["files_exact_fit_nodes_unknown_node", "noise_step_autonormal", "deep_reg_num_steps_with_linear",
            "det_amp_upper_case"]
    assert rb.main(["--quick", "--only", *only, "--out", str(out), "--no-readme"]) == 0
    rows = {r["id"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == set(only)
    assert {i: (r["outcome"], r["reason"]) for i, r in rows.items() if r["outcome"] != "clear"} == {}
    assert "ghost_z" in rows["files_exact_fit_nodes_unknown_node"]["message"]
