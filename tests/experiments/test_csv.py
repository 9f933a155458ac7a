"""pyro_dag.experiments.csv and ``pyro-dag fit --csv``: your own data from the command line."""
import json
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
