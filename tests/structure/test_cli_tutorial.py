"""``pyro-dag discover`` and the structure-learning tutorial."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from pyro_dag.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_discover_csv_with_truth(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = rng.normal(size=300)
    b = 0.9 * a + 0.5 * rng.normal(size=300)
    c = -0.9 * b + 0.5 * rng.normal(size=300)
    np.savetxt(tmp_path / "d.csv", np.stack([a, b, c], 1), delimiter=",", header="a,b,c", comments="")
    np.savetxt(tmp_path / "t.csv", np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]]), delimiter=",")
    out = tmp_path / "out"
    assert main(["discover", "--csv", str(tmp_path / "d.csv"), "--truth", str(tmp_path / "t.csv"), "--steps", "30",
                 "--particles", "4", "--samples", "200", "--out", str(out), "--no-progress"]) == 0
    res = json.loads((out / "discover.json").read_text())
    assert res["nodes"] == ["a", "b", "c"] and np.array(res["edge_probs"]).shape == (3, 3)
    assert {"auroc", "expected_shd", "expected_f1", "brier"} <= set(res["metrics"]["dag"])
    assert (out / "edge_probs.png").stat().st_size > 5000 and (out / "posterior_graph.png").stat().st_size > 5000
    assert "DAG level" in capsys.readouterr().out


def test_discover_sachs_smoke(tmp_path, capsys):
    assert main(["discover", "sachs", "--likelihood", "linear", "--steps", "3", "--particles", "3", "--samples",
                 "100", "--out", str(tmp_path), "--no-progress"]) == 0
    res = json.loads((tmp_path / "discover.json").read_text())
    assert len(res["nodes"]) == 11 and "metrics" in res
    assert "CPDAG level" in capsys.readouterr().out


def test_discover_sachs_exact_bge(tmp_path, capsys):
    """--exact computes the exact posterior of the same model (seconds for Sachs' 11 variables)."""
    assert main(["discover", "sachs", "--exact", "--likelihood", "bge", "--samples", "200", "--out",
                 str(tmp_path)]) == 0
    res = json.loads((tmp_path / "discover.json").read_text())
    P = np.array(res["edge_probs"])
    assert P.shape == (11, 11) and res["settings"]["method"] == "exact" and np.isfinite(res["settings"]["log_evidence"])
    assert res["metrics"]["dag"]["auroc"] > 0.6  # measured 0.70 against the consensus DAG
    assert "particles=exact" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="can score exactly"):
        main(["discover", "sachs", "--exact", "--likelihood", "mlp", "--out", str(tmp_path)])


def test_discover_rejects_bad_input(tmp_path):
    with pytest.raises(SystemExit, match="exactly one"):
        main(["discover"])
    with pytest.raises(SystemExit, match="no such file"):
        main(["discover", "--csv", str(tmp_path / "missing.csv")])
    with pytest.raises(SystemExit, match="--steps"):
        main(["discover", "sachs", "--steps", "0"])


def test_structure_tutorial_quick_mode(tmp_path):
    """The tutorial in its short mode prints that every sample is acyclic and saves its figure. Where the docs build
    runs (sphinx and sphinx-gallery installed), it executes the same script in the same mode and
    test_sphinx_docs_build_without_warnings checks both: the script is not run twice (10 CPU s)."""
    try:
        import sphinx.cmd.build  # noqa: F401
        import sphinx_gallery  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the docs build (test_sphinx_docs_build_without_warnings) runs this tutorial and checks its output")
    env = dict(os.environ, PYRO_DAG_QUICK="1", PYRO_DAG_TUTORIAL_OUT=str(tmp_path), MPLBACKEND="Agg",
               OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tutorials", "structure_learning.py")], env=env,
                          cwd=str(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "all samples acyclic: True" in proc.stdout
    assert (tmp_path / "structure_edge_probs.png").exists()


def test_discover_checks_inputs_and_output_before_training(tmp_path, monkeypatch):
    import pyro_dag.structure.fitting as fitting

    def no_training(*args, **kwargs):
        raise AssertionError("discover started training before rejecting its input")

    monkeypatch.setattr(fitting, "fit", no_training)
    good = tmp_path / "d.csv"
    np.savetxt(good, np.random.default_rng(0).normal(size=(20, 3)), delimiter=",", header="a,b,c", comments="")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cases = [
        (["--csv", str(good), "--out", str(blocker)], "--out .*not a directory"),
        (["--csv", str(good), "--out", str(blocker / "sub")], "--out .*cannot write"),
        (["--csv", str(tmp_path)], "is a directory"),
        (["--csv", str(good), "--truth", str(tmp_path / "none.csv")], "--truth .*no such file"),
        (["--csv", str(good), "--threads", "0"], "--threads must be >= 1"),
        (["--csv", str(good), "--seed", "-1"], "--seed must be >= 0"),
        (["--csv", str(good), "--expected-parents", "0"], "--expected-parents must be a positive"),
        (["--csv", str(good), "--expected-parents", "nan"], "--expected-parents must be a positive"),
        (["--csv", str(good), "--device", "tpu"], "--device tpu"),
        (["--csv", str(good), "--samples", "0"], "--samples must be >= 1"),
    ]
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    header_only = tmp_path / "header.csv"
    header_only.write_text("a,b,c\n")
    one_column = tmp_path / "one.csv"
    one_column.write_text("a\n1\n2\n")
    bad_truth = tmp_path / "truth.csv"
    bad_truth.write_text("0,2,0\n0,0,1\n0,0,0\n")
    cases += [
        (["--csv", str(empty)], "the file is empty"),
        (["--csv", str(header_only)], "only a header row"),
        (["--csv", str(one_column)], "at least 2"),
        (["--csv", str(good), "--truth", str(bad_truth)], "entries must be 0 or 1"),
    ]
    for argv, message in cases:
        with pytest.raises(SystemExit, match=message):
            main(["discover", "--no-progress", "--out", str(tmp_path / "out")] + argv)
