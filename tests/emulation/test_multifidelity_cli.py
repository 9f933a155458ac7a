"""``pyro-dag fit multifidelity``: a short run writes its JSON and figure; a bad problem is refused by name."""
import json

import pytest

from pyro_dag.cli import main


def test_fit_multifidelity_writes_json_and_figure(tmp_path, capsys):
    rc = main(["fit", "multifidelity", "--problem", "forrester", "--steps", "5", "--pretrain-steps", "20",
               "--guide", "mean_field", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    result = json.loads((tmp_path / "multifidelity_forrester_published.json").read_text())
    assert result["protocol"] == "published" and set(result["metrics"]) == {"rmse", "nrmse", "crps", "seconds"}
    assert (tmp_path / "multifidelity_forrester_published.png").exists()
    assert "high fidelity RMSE" in capsys.readouterr().out


def test_fit_multifidelity_bad_problem(capsys):
    with pytest.raises(SystemExit) as e:
        main(["fit", "multifidelity", "--problem", "nope"])
    assert e.value.code == 2
    assert "--problem: choose from" in capsys.readouterr().err
