"""The user-facing entry points: the CLI main job, the tutorials and the Sphinx docs."""
import json
import os
import subprocess
import sys

import pytest

from pyro_dag.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("sampler,extra", [("conditional", []), ("joint", []), ("conditional", ["--antithetic"]),
                                           ("conditional", ["--warm-start", "0", "--natural-gradient", "0.01",
                                                            "--natural-gradient-after", "20"]),
                                           ("conditional", ["--recipe", "paper"])])
def test_cli_fit_collider_writes_json_and_png(tmp_path, capsys, sampler, extra):
    assert main(["fit", "collider", "--steps", "30", "--out", str(tmp_path), "--no-progress",
                 "--sampler", sampler] + extra) == 0
    metrics = json.loads((tmp_path / "collider_metrics.json").read_text())
    for key in ["rmse_train", "rmse_test", "crps_train", "crps_test", "mean_abs_corr", "parent_var", "final_elbo"]:
        assert key in metrics
    assert (tmp_path / "collider.png").stat().st_size > 10_000
    assert "child w3 RMSE" in capsys.readouterr().out


def test_cli_rejects_bad_options(tmp_path):
    with pytest.raises(SystemExit):
        main(["fit", "collider", "--guide", "nonsense"])
    with pytest.raises(SystemExit):
        main(["fit", "collider", "--sampler", "exact"])
    with pytest.raises(SystemExit, match="--steps"):
        main(["fit", "collider", "--steps", "0", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--num-particles must be even"):
        main(["fit", "collider", "--antithetic", "--num-particles", "3", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--no-antithetic"):  # the recommended recipe pairs the samples
        main(["fit", "collider", "--num-particles", "3", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--natural-gradient"):
        main(["fit", "collider", "--natural-gradient", "2", "--out", str(tmp_path)])


@pytest.mark.parametrize("script", ["collider.py"])
def test_tutorial_runs_in_quick_mode(script, tmp_path):
    env = dict(os.environ, PYRO_DAG_QUICK="1", PYRO_DAG_TUTORIAL_OUT=str(tmp_path), MPLBACKEND="Agg",
               OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tutorials", script)], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any(p.suffix == ".png" for p in tmp_path.iterdir())


def test_sphinx_docs_build_without_warnings(tmp_path):
    pytest.importorskip("sphinx.cmd.build")  # a bare namespace package named sphinx is not enough
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "-b", "html", os.path.join(ROOT, "docs"),
                           str(tmp_path / "html")], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (tmp_path / "html" / "api.html").exists()
