"""pyro_dag.experiments.csv and ``pyro-dag fit --csv``: your own data from the command line."""
import json
import warnings
import os

import numpy as np
import pandas as pd
import pytest

from pyro_dag.cli import main
from pyro_dag.experiments.csv import CSVInputError, fit_csv, load_csv_problem, parse_latent


def chain_frame(n=120, seed=0):
    """``x -> a -> b``: ``a = 2 x + noise``, ``b = sin(2 a) + noise`` (noise sd 0.05)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    a = 2 * x + 0.05 * rng.normal(size=n)
    b = np.sin(a) + 0.05 * rng.normal(size=n)
    return pd.DataFrame({"x": x, "a": a, "b": b})


def write(tmp_path, frame, graph="x -> a\na -> b\n"):
    csv, g = tmp_path / "data.csv", tmp_path / "graph.txt"
    frame.to_csv(csv, index=False)
    g.write_text(graph)
    return str(csv), str(g)


def test_parse_latent():
    assert parse_latent("h:2:PKA,Raf") == ("h", 2, ["PKA", "Raf"])
    assert parse_latent(" h1 : 1 : PKA ") == ("h1", 1, ["PKA"])
    for bad in ("h:2", "h:x:PKA", "h:0:PKA", "h:2:"):
        with pytest.raises(CSVInputError, match="--latent"):
            parse_latent(bad)


def test_problem_split_and_standardisation(tmp_path):
    csv, g = write(tmp_path, chain_frame())
    p = load_csv_problem(csv, g, test_fraction=0.25, seed=3)
    assert p.inputs == ["x"] and p.nodes == ["a", "b"] and int(p.test_rows.sum()) == 30
    tr = p.tensors(~p.test_rows, ["a"])["a"]
    assert abs(float(tr.mean())) < 1e-12 and abs(float(tr.std()) - 1) < 1e-12
    q = load_csv_problem(csv, g, test_fraction=0.25, seed=3)
    assert (p.test_rows == q.test_rows).all()


@pytest.mark.parametrize("edit, graph, kwargs, fragment", [
    (lambda f: f.assign(c=1.0), None, {}, r"column\(s\) \['c'\].*not nodes of the graph"),
    (lambda f: f.drop(columns="b"), None, {}, r"node\(s\) \['b'\].*no column"),
    (lambda f: f.assign(b=2.5), None, {}, "column 'b' is constant"),
    (lambda f: f.assign(b=f["b"] * 1e300), None, {}, "column 'b' .*reaches .* overflows float64.*rescale the column"),
    (lambda f: f.assign(a=f["a"] * 1e160), None, {}, "column 'a' .*reaches .* overflows float64.*rescale the column"),
    (lambda f: f.assign(b=f["b"].astype(object).where(f.index != 4, "12,5kg")), None, {},
     "column 'b' is not numeric: row 6 .*'12,5kg'"),
    (lambda f: f.assign(x=f["x"].where(f.index != 7)), None, {},
     r"input column 'x' has missing values \(row\(s\) \[9\]"),
    (None, "x -> a\na -> b\nb -> a\n", {}, "cycle"),
    (None, None, {"inputs": ["a"]}, "'a', which has parents"),
    (None, None, {"latent": ["x:1:a"]}, "also a column"),
    (None, None, {"latent": ["h:1:zz"]}, "child 'zz' is not a node"),
    (None, None, {"latent": ["h:1:a"], "inputs": ["x", "h"]}, "'h', which is a latent input"),
    (None, None, {"test_fraction": 1.5}, "test-fraction"),
])
def test_bad_input_names_the_fix(tmp_path, edit, graph, kwargs, fragment):
    frame = chain_frame()
    frame = edit(frame) if edit else frame
    csv, g = write(tmp_path, frame, graph or "x -> a\na -> b\n")
    with pytest.raises(ValueError, match=fragment):      # CSVInputError, or DAGStructureError for the graph
        load_csv_problem(csv, g, **kwargs)


def test_graph_parse_error_carries_the_line(tmp_path):
    from pyro_dag.graph.io import GraphParseError

    csv, g = write(tmp_path, chain_frame(), "x -> a\na => b\n")
    with pytest.raises(GraphParseError, match="line 2"):
        load_csv_problem(csv, g)


def test_missing_values_in_observed_nodes_are_masked(tmp_path):
    frame = chain_frame()
    frame.loc[::7, "b"] = np.nan
    csv, g = write(tmp_path, frame)
    r = fit_csv(csv, g, num_steps=5, pretrain_steps=2, num_samples=20, seed=1)
    n_test_b = r["metrics"]["per_node"]["b"]["n_test"]
    p = r["problem"]
    assert n_test_b == int((~np.isnan(frame["b"].to_numpy()[p.test_rows])).sum()) < int(p.test_rows.sum())


def test_fit_csv_learns_the_chain(tmp_path):
    csv, g = write(tmp_path, chain_frame(n=150))
    r = fit_csv(csv, g, num_steps=300, pretrain_steps=100, num_samples=50, num_inducing=12, seed=0)
    m = r["metrics"]["per_node"]
    # a = 2x (+ small noise) is nearly deterministic given the input; a constant predictor has RMSE ~1
    assert m["a"]["rmse"] < 0.2
    assert m["b"]["rmse"] < 0.6
    assert m["a"]["rmse_data_units"] == pytest.approx(m["a"]["rmse"] * r["problem"].std["a"])


def test_cli_fit_csv_writes_metrics_predictions_and_figure(tmp_path, capsys):
    frame = chain_frame(n=80)
    csv, g = write(tmp_path, frame)
    out = tmp_path / "out"
    rc = main(["fit", "--csv", csv, "--graph", g, "--latent", "h:1:a", "--steps", "4", "--pretrain-steps", "2",
               "--latent-steps", "3", "--test-fraction", "0.25", "--no-progress", "--out", str(out)])
    assert rc == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["per_node"]) == {"a", "b"} and metrics["n_test"] == 20
    assert metrics["per_node"]["a"]["used_to_infer_latent"] and metrics["unseen_nodes"] == ["b"]
    pred = pd.read_csv(out / "predictions.csv")
    assert list(pred.columns) == ["row", "split", "a", "a_mean", "a_sd", "b", "b_mean", "b_sd"]
    assert len(pred) == 80 and (pred["split"] == "test").sum() == 20
    assert np.allclose(pred["a"], frame["a"])
    assert os.path.getsize(out / "figure.png") > 1000
    assert "average: RMSE" in capsys.readouterr().out


def test_cli_errors(tmp_path, capsys):
    csv, g = write(tmp_path, chain_frame().assign(extra=0.0))
    assert main(["fit", "--csv", csv, "--graph", g, "--out", str(tmp_path / "o")]) == 2
    assert "'extra'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "--csv", csv, "--out", str(tmp_path / "o")])      # no --graph
    assert "--graph" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "collider", "--csv", csv, "--graph", g])
    with pytest.raises(SystemExit):
        main(["fit", "--out", str(tmp_path / "o")])                    # neither a data set nor --csv
    with pytest.raises(SystemExit):
        main(["fit", "sachs", "--graph", g])
    assert "fit --csv" in capsys.readouterr().err


def test_cli_refuses_a_column_whose_standard_deviation_overflows(tmp_path, capsys):
    """It used to report RMSE 0.0 for the column (every standardised value 0), write infinite sds and exit 0."""
    csv, g = write(tmp_path, chain_frame(n=40).assign(b=lambda f: f["b"] * 1e300))
    out = tmp_path / "o"
    assert main(["fit", "--csv", csv, "--graph", g, "--steps", "2", "--no-progress", "--out", str(out)]) == 2
    assert "column 'b'" in capsys.readouterr().err and not (out / "metrics.json").exists()


def test_cli_full_disk_while_writing_the_figure(tmp_path, capsys, monkeypatch):
    """A full disk at the figure used to leave figure.png at 0 bytes beside complete JSON and CSV, and exit 0."""
    import errno

    from matplotlib.figure import Figure

    def full_disk(self, path, **kwargs):
        with open(path, "wb") as f:
            f.write(b"")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    csv, g = write(tmp_path, chain_frame(n=40))
    out = tmp_path / "out"
    rc = main(["fit", "--csv", csv, "--graph", g, "--latent", "h:1:a", "--steps", "2", "--pretrain-steps", "1",
               "--latent-steps", "1", "--no-progress", "--out", str(out)])
    err = capsys.readouterr().err
    assert rc == 1
    assert "could not write" in err and "figure.png (No space left on device)" in err
    assert "written completely: metrics.json, predictions.csv; not written: figure.png" in err
    assert sorted(os.listdir(out)) == ["metrics.json", "predictions.csv"]         # no empty figure, no temporary
    assert json.loads((out / "metrics.json").read_text())["n_test"] == 8


def test_header_only_zero_rows_and_a_repeated_column_are_named(tmp_path):
    g = tmp_path / "graph.txt"
    g.write_text("x -> a\na -> b\n")
    csv = tmp_path / "data.csv"
    csv.write_text("x,a,b\n")
    with pytest.raises(CSVInputError, match=r"has a header row \(x, a, b\) but no data rows"):  # was an IndexError
        load_csv_problem(str(csv), str(g))
    with pytest.raises(CSVInputError, match="no data rows"):
        load_csv_problem(chain_frame().iloc[:0], str(g))
    csv.write_text("x,a,a\n1,2,3\n2,3,4\n3,4,5\n")             # was: node 'b' has no column (columns ... 'a.1')
    with pytest.raises(CSVInputError, match="column 'a' appears 2 times in the header"):
        load_csv_problem(str(csv), str(g))


def test_cli_fit_sachs_writes_json_and_figure(tmp_path, capsys):
    out = tmp_path / "sachs"
    rc = main(["fit", "sachs", "--task", "interpolation", "--seed", "1", "--guide", "mean_field", "--steps", "3",
               "--pretrain-steps", "2", "--latent-steps", "3", "--no-progress", "--out", str(out)])
    assert rc == 0
    m = json.loads((out / "sachs_metrics.json").read_text())
    assert m["task"] == "interpolation" and m["seed"] == 1 and m["method"] == "dag_vi"
    assert len(m["per_node"]) == 9 and m["averaged_nodes"]["unseen"] == ["Mek", "Erk", "Akt", "P38", "Jnk", "PIP3",
                                                                          "PIP2"]
    assert os.path.getsize(out / "sachs.png") > 1000
    assert "9-node average" in capsys.readouterr().out


# ------------------------------------------------------------------ prediction modes, baselines, folds
def informative_chain(n=100, seed=0):
    """``x -> a -> b`` where ``a`` is mostly independent of ``x`` (``a = 0.3 x + N(0, 1)``) and ``b = sin(1.5 a)``
    (+ noise sd 0.05): the measured ``a`` explains ``b``, the input ``x`` hardly does."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    a = 0.3 * x + rng.normal(size=n)
    b = np.sin(1.5 * a) + 0.05 * rng.normal(size=n)
    return pd.DataFrame({"x": x, "a": a, "b": b})


def test_cli_one_step_beats_propagation_when_the_intermediate_column_is_informative(tmp_path, capsys):
    from pyro_dag.baselines import BaselineWarning

    csv, g = write(tmp_path, informative_chain())
    out = tmp_path / "out"
    # b's parent a is measured in every row, so train fits b exactly on its collapsed bound (its inputs are observed):
    # one step from the measured a is then as good as the exact GP on the parents, and no baseline warning names b
    # (before the exact fit, joint training fitted b to the latent values of a and the report warned)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = main(["fit", "--csv", csv, "--graph", g, "--predict", "one-step", "--steps", "150",
                   "--pretrain-steps", "100", "--num-inducing", "12", "--no-progress", "--out", str(out)])
    assert rc == 0
    assert not [w for w in caught if issubclass(w.category, BaselineWarning) and "node 'b'" in str(w.message)]
    m = json.loads((out / "metrics.json").read_text())
    assert m["prediction"] == "one_step" and m["intermediate_columns"] == ["a"]
    b = m["per_node"]["b"]
    assert b["one_step_fraction"] == 1.0
    assert b["rmse"] < 0.8 * b["rmse_propagate"], b          # one step sees a; propagation only x
    assert b["rmse_propagate"] > 0.9                            # x says next to nothing about b
    # the baselines on the same rows: on b's parents (a) the baselines are good, on the input x they are not
    base = b["baselines"]
    assert set(base) == {"exact_gp_on_inputs", "linear_on_inputs", "exact_gp_on_parents", "linear_on_parents",
                         "mean"}
    assert b["baseline_features"] == {"inputs": ["x"], "parents": ["a"]}
    assert base["exact_gp_on_parents"]["rmse"] < 0.5 * base["exact_gp_on_inputs"]["rmse"]
    assert base["mean"]["n_test"] == m["n_test"] == 20
    assert m["baselines"]["per_node"]["b"]["best_baseline"] == "exact_gp_on_parents"
    assert b["rmse"] <= 1.1 * base["exact_gp_on_parents"]["rmse"], b
    assert "b" not in m["baselines"]["nodes_worse_than_a_baseline"]
    text = capsys.readouterr().out
    assert "predictions (one-step)" in text and "vs baselines" in text and "propagate" in text
    pred = pd.read_csv(out / "predictions.csv")
    assert list(pred.columns) == ["row", "split", "a", "a_mean", "a_sd", "b", "b_mean", "b_sd"]


def test_default_mode_is_propagate_and_says_so(tmp_path, capsys):
    csv, g = write(tmp_path, chain_frame(n=60))
    out = tmp_path / "out"
    assert main(["fit", "--csv", csv, "--graph", g, "--steps", "3", "--pretrain-steps", "2", "--no-progress",
                 "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["prediction"] == "propagate" and "rmse_propagate" not in m["per_node"]["b"]
    assert "not used at test time" in m["predictions"]
    text = capsys.readouterr().out
    assert "predictions (propagate)" in text and "['a'] are not used at test time" in text


def test_baseline_warning_when_linear_is_clearly_better(tmp_path):
    from pyro_dag.baselines import BaselineWarning

    rng = np.random.default_rng(0)
    x = rng.normal(size=80)
    frame = pd.DataFrame({"x": x, "y": 2 * x + 0.01 * rng.normal(size=80)})
    csv, g = write(tmp_path, frame, "x -> y\n")
    # one Adam step (the "adam" recipe has no exact fit of y, whose input is observed): a poor fit on purpose
    with pytest.warns(BaselineWarning, match="node 'y'"):
        r = fit_csv(csv, g, num_steps=1, pretrain_steps=0, num_samples=10, num_inducing=4, recipe="adam")
    m = r["metrics"]
    cmp = m["per_node"]["y"]["vs_baselines"]
    assert not cmp["better_than_baselines"] and cmp["best_baseline"].startswith(("linear", "exact_gp"))
    assert m["per_node"]["y"]["baselines"]["linear_on_inputs"]["rmse"] < 0.05
    assert m["baselines"]["nodes_worse_than_a_baseline"] == ["y"]
    assert m["baselines"]["average_rmse"]["dag_dgp"] == pytest.approx(m["per_node"]["y"]["rmse"])


def test_folds_output_structure(tmp_path):
    frame = chain_frame(n=60)
    csv, g = write(tmp_path, frame)
    r = fit_csv(csv, g, num_steps=3, pretrain_steps=2, num_samples=10, num_inducing=6, folds=3,
                prediction="one-step")
    m = r["metrics"]
    f = m["folds"]
    assert f["k"] == 3 and len(f["per_fold"]) == 3 and len(r["fold_results"]) == 3
    assert m["n_test"] == [20, 20, 20] and sum(m["n_test"]) == m["n_rows"] == 60
    tests = np.stack([fr["problem"].test_rows for fr in r["fold_results"]])
    assert (tests.sum(0) == 1).all()                                   # every row held out exactly once
    for w in ("a", "b"):
        rmse = f["per_node"][w]["rmse"]
        assert len(rmse["per_fold"]) == 3
        assert rmse["mean"] == pytest.approx(np.mean(rmse["per_fold"]))
        assert rmse["sd"] == pytest.approx(np.std(rmse["per_fold"], ddof=1))
        assert m["per_node"][w]["rmse"] == pytest.approx(rmse["mean"])
        for b in ("exact_gp_on_inputs", "linear_on_inputs", "exact_gp_on_parents", "linear_on_parents", "mean"):
            s = f["per_node"][w]["baselines"][b]["rmse"]
            assert len(s["per_fold"]) == 3 and s["sd"] >= 0
            assert m["per_node"][w]["baselines"][b]["rmse"] == pytest.approx(s["mean"])
        assert "rmse_propagate" in f["per_node"][w]
    assert set(m["baselines"]["per_node"]) == {"a", "b"}
    # the same folds again (fixed seed), and a different seed moves them
    again = load_csv_problem(csv, g, seed=0, fold=(1, 3))
    assert (again.test_rows == r["fold_results"][1]["problem"].test_rows).all()
    assert not (load_csv_problem(csv, g, seed=1, fold=(1, 3)).test_rows == again.test_rows).all()
    with pytest.raises(CSVInputError, match="--folds"):
        fit_csv(csv, g, folds=1)


def test_cli_folds_writes_fold_section(tmp_path, capsys):
    frame = chain_frame(n=45)
    csv, g = write(tmp_path, frame)
    out = tmp_path / "out"
    assert main(["fit", "--csv", csv, "--graph", g, "--folds", "3", "--steps", "2", "--pretrain-steps", "1",
                 "--num-inducing", "5", "--no-progress", "--out", str(out)]) == 0
    m = json.loads((out / "metrics.json").read_text())
    assert m["folds"]["k"] == 3 and m["prediction"] == "propagate"
    assert set(m["folds"]["per_node"]) == {"a", "b"} and "sd" in m["folds"]["per_node"]["b"]["rmse"]
    pred = pd.read_csv(out / "predictions.csv")
    assert list(pred.columns) == ["row", "fold", "a", "a_mean", "a_sd", "b", "b_mean", "b_sd"]
    assert sorted(pred["fold"].unique()) == [0, 1, 2] and pred["b_mean"].notna().all()
    assert os.path.getsize(out / "figure.png") > 1000
    printed = capsys.readouterr().out
    assert "3-fold cross-validation over 45 rows" in printed
    # progress: one line per fold as it ends, and each fold's CPU seconds in the fold section
    assert [line.split(":")[0] for line in printed.splitlines() if line.startswith("fold ")] == \
        ["fold 1/3", "fold 2/3", "fold 3/3"]
    assert len(m["folds"]["fold_cpu_seconds"]) == 3 and all(s > 0 for s in m["folds"]["fold_cpu_seconds"])


@pytest.mark.parametrize("extra, message", [
    (["--folds", "1"], "--folds: K-fold cross-validation needs K >= 2"),
    (["--folds", "3", "--test-fraction", "0.3"], "drop --test-fraction"),
    (["--predict", "sideways"], "--predict: invalid choice"),
])
def test_cli_refuses_bad_fold_and_predict_options(tmp_path, capsys, extra, message):
    csv, g = write(tmp_path, chain_frame())
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--csv", csv, "--graph", g, "--out", str(tmp_path / "o")] + extra)
    assert exc.value.code == 2 and message in capsys.readouterr().err


def test_cli_predict_and_folds_are_csv_options(tmp_path, capsys):
    for dataset in ("sachs", "collider"):
        with pytest.raises(SystemExit):
            main(["fit", dataset, "--predict", "one-step", "--out", str(tmp_path / "o")])
        assert "--predict" in capsys.readouterr().err


@pytest.mark.parametrize("rows", [1, 2])
def test_too_few_rows_are_named_as_such(tmp_path, rows):
    """One row was reported as "column 'x' is constant"."""
    csv, g = write(tmp_path, chain_frame().iloc[:rows], "x -> a\na -> b\n")
    with pytest.raises(CSVInputError, match=rf"has {rows} data row\(s\): too few rows .*at least 3") as exc:
        load_csv_problem(csv, g)
    assert "constant" not in str(exc.value)


@pytest.mark.parametrize("value", ["1.5", "0", "1", "nan"])
def test_cli_test_fraction_outside_0_1_is_called_a_fraction(tmp_path, capsys, value):
    """The message said "must be a step size in (0, 1] (0: off)", the wording of --natural-gradient."""
    csv, g = write(tmp_path, chain_frame())
    with pytest.raises(SystemExit) as exc:
        main(["fit", "--csv", csv, "--graph", g, "--out", str(tmp_path / "o"), "--test-fraction", value])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"--test-fraction: must be a fraction strictly between 0 and 1 (e.g. 0.2), got " \
        f"{value}" in err and "step size" not in err


def test_cli_fit_csv_save_writes_a_fit_that_persist_load_reads(tmp_path, capsys):
    """Issue 42: ``--save`` writes a fit that :func:`pyro_dag.persist.load` reads; checked before the fit."""
    import networkx as nx
    import torch

    from pyro_dag import DAGDGP, persist
    from pyro_dag.infer.autoguide import AutoStructuredGuide

    csv, g = write(tmp_path, chain_frame(n=40))
    saved = tmp_path / "fits" / "fit.pt"
    rc = main(["fit", "--csv", csv, "--graph", g, "--steps", "3", "--pretrain-steps", "1", "--no-progress",
               "--out", str(tmp_path / "out"), "--save", str(saved)])
    assert rc == 0 and str(saved) in capsys.readouterr().out
    graph = nx.DiGraph([("x", "a"), ("a", "b")])
    model = DAGDGP(graph).double()
    guide = AutoStructuredGuide(model)
    persist.load(saved, model, guide)
    pred = model.predict(guide, {"x": torch.linspace(-1, 1, 5, dtype=torch.float64)[:, None]}, num_samples=4)
    assert bool(torch.isfinite(pred["b"].mean).all())
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    with pytest.raises(SystemExit):
        main(["fit", "--csv", csv, "--graph", g, "--steps", "3", "--out", str(tmp_path / "o2"), "--save", str(notes)])
    assert "already holds a file that is not a torch file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fit", "collider", "--save", str(tmp_path / "c.pt")])
    assert "use it with 'fit --csv FILE --graph FILE'" in capsys.readouterr().err


def test_cli_fit_help_is_grouped_with_examples(capsys):
    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = capsys.readouterr().out
    for group in ("data:", "model:", "training:", "outputs:", "examples:"):
        assert group in text, group
    assert "pyro-dag fit --csv data.csv --graph graph.txt" in text
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "your own CSV file" in capsys.readouterr().out
