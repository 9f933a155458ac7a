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


def test_fit_multifidelity_full_disk_names_the_file(tmp_path, capsys, monkeypatch):
    """A full disk at the figure: exit 1 naming it and the complete JSON; no partial figure is left."""
    import errno

    from matplotlib.figure import Figure

    def full_disk(self, path, **kwargs):
        open(path, "wb").close()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", full_disk)
    rc = main(["fit", "multifidelity", "--problem", "forrester", "--steps", "2", "--pretrain-steps", "2",
               "--guide", "mean_field", "--out", str(tmp_path), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 1 and "multifidelity_forrester_published.png (No space left on device)" in err
    assert "written completely: multifidelity_forrester_published.json" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["multifidelity_forrester_published.json"]


@pytest.mark.parametrize("extra, option", [(["--checkpoint", "ck"], "--checkpoint"), (["--csv", "d.csv"], "--csv"),
                                           (["--folds", "3"], "--folds"), (["--latent", "h:1:a"], "--latent")])
def test_fit_multifidelity_refuses_options_it_would_ignore(tmp_path, capsys, extra, option):
    with pytest.raises(SystemExit) as e:
        main(["fit", "multifidelity", "--problem", "forrester", "--out", str(tmp_path / "o")] + extra)
    assert e.value.code == 2
    assert f"argument {option}: not an option of 'fit multifidelity'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()
