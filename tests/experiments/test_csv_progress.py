"""``pyro-dag fit --csv`` reports the stages after training on stderr (the prediction of every row, the baselines),
as the set-up and the training do, and ``--no-progress`` turns them off."""
import numpy as np
import pandas as pd
import pytest

import pyro_dag.progress
from pyro_dag import DAGDGP
from pyro_dag.cli import main


def _write_chain(tmp_path, n=60):
    """``x -> a -> b`` with small noise (as tests/experiments/test_csv.py)."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=n)
    a = 2 * x + 0.05 * rng.normal(size=n)
    b = np.sin(a) + 0.05 * rng.normal(size=n)
    csv, g = tmp_path / "data.csv", tmp_path / "graph.txt"
    pd.DataFrame({"x": x, "a": a, "b": b}).to_csv(csv, index=False)
    g.write_text("x -> a\na -> b\n")
    return str(csv), str(g)


@pytest.fixture
def many_chunks(monkeypatch):
    """Every bar shown at once, and the prediction cut into many chunks (as on 10⁵ rows)."""
    monkeypatch.setattr(pyro_dag.progress, "SETUP_PROGRESS_DELAY", 0.0)
    monkeypatch.setattr(DAGDGP, "predict_chunk_elements", 2 ** 12)


def _run(tmp_path, extra):
    csv, g = _write_chain(tmp_path)
    return main(["fit", "--csv", csv, "--graph", g, "--steps", "3", "--pretrain-steps", "1",
                 "--out", str(tmp_path / "out")] + extra)


def test_prediction_and_baselines_report_progress(tmp_path, capsys, many_chunks):
    assert _run(tmp_path, []) == 0
    err = capsys.readouterr().err
    assert "prediction: " in err and "row" in err
    assert "baselines of node 'a' (exact GP, linear)" in err and "baselines of node 'b'" in err


def test_no_progress_hides_them(tmp_path, capsys, many_chunks):
    assert _run(tmp_path, ["--no-progress"]) == 0
    err = capsys.readouterr().err
    assert "prediction" not in err and "baselines" not in err
