"""``pyro-dag discover --given``: the conditional edge table, MAP DAG and heat map; evidence-string parsing."""
import json

import numpy as np
import pytest

from pyro_dag.cli import main
from pyro_dag.structure import exact_posterior
from pyro_dag.structure.evidence import parse_evidence_string


@pytest.fixture
def csv(tmp_path):
    rng = np.random.default_rng(0)
    a = rng.normal(size=300)
    b = 0.9 * a + 0.5 * rng.normal(size=300)
    c = -0.9 * b + 0.5 * rng.normal(size=300)
    np.savetxt(tmp_path / "d.csv", np.stack([a, b, c], 1), delimiter=",", header="a,b,c", comments="")
    return tmp_path / "d.csv", np.stack([a, b, c], 1)


def test_parse_evidence_string():
    assert parse_evidence_string("A->B, !C->D,0->2") == {("A", "B"): True, ("C", "D"): False, (0, 2): True}
    for bad, match in (("A-B", "not an edge"), ("A->", "not an edge"), ("A->B,!A->B", "contradictory"),
                       ("  ", "needs edges")):
        with pytest.raises(ValueError, match=match):
            parse_evidence_string(bad)


def test_discover_exact_given_prints_and_stores_the_exact_conditionals(tmp_path, csv, capsys):
    path, X = csv
    out = tmp_path / "out"
    assert main(["discover", "--csv", str(path), "--exact", "--given", "a->b,!c->b", "--out", str(out),
                 "--samples", "100", "--no-progress"]) == 0
    res = json.loads((out / "discover.json").read_text())
    ref = exact_posterior(X, expected_parents=1.5, node_names=["a", "b", "c"])
    ev = {("a", "b"): True, ("c", "b"): False}
    np.testing.assert_allclose(res["given"]["edge_probs"], ref.edge_probs(given=ev).numpy(), rtol=1e-5, atol=1e-6)
    assert res["given"]["prob"] == pytest.approx(ref.prob(ev), rel=1e-5)
    assert res["given"]["map_dag"][0][1] == 1.0 and res["given"]["map_dag"][2][1] == 0.0
    assert (out / "edge_probs_given.png").stat().st_size > 5000
    text = capsys.readouterr().out
    assert "conditional edge probabilities" in text and "MAP DAG given the evidence: a->b" in text


def test_discover_given_from_fit_samples_and_bad_evidence(tmp_path, csv, capsys):
    path, _ = csv
    out = tmp_path / "out"
    assert main(["discover", "--csv", str(path), "--given", "!a->c", "--steps", "20", "--particles", "4",
                 "--samples", "200", "--out", str(out), "--no-progress"]) == 0
    assert "(from 1000 samples)" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="unknown node 'zz'"):
        main(["discover", "--csv", str(path), "--exact", "--given", "a->zz", "--out", str(out), "--no-progress"])
    with pytest.raises(SystemExit, match="self-loop"):
        main(["discover", "--csv", str(path), "--exact", "--given", "a->a", "--out", str(out), "--no-progress"])



def test_discover_full_disk_names_the_file_and_leaves_no_partial_one(tmp_path, csv, capsys, monkeypatch):
    import errno

    from matplotlib.figure import Figure

    real = Figure.savefig

    def savefig(self, path, **kwargs):                  # the disk fills at the posterior graph
        if "posterior_graph" not in str(path):
            return real(self, path, **kwargs)
        open(path, "wb").close()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Figure, "savefig", savefig)
    out = tmp_path / "out"
    assert main(["discover", "--csv", str(csv[0]), "--exact", "--out", str(out), "--samples", "50",
                 "--no-progress"]) == 1
    err = capsys.readouterr().err
    assert "posterior_graph.png (No space left on device)" in err
    assert "written completely: edge_probs.png; not written: posterior_graph.png, discover.json" in err
    assert sorted(p.name for p in out.iterdir()) == ["edge_probs.png"]


@pytest.mark.parametrize("given, message", [("a->zz", "zz"), ("a-b", "not an edge"), ("a->a", "self-loop"),
                                            ("a->b,b->c,c->a", "required edges form a cycle")])
def test_discover_checks_given_before_the_fit(tmp_path, csv, monkeypatch, given, message):
    """--given was parsed after the fit and the figures: a typo cost the whole run."""
    import pyro_dag.structure.fitting

    def no_fit(*args, **kwargs):
        raise AssertionError("the fit ran before --given was checked")

    monkeypatch.setattr(pyro_dag.structure.fitting, "fit", no_fit)
    with pytest.raises(SystemExit, match=f"--given: .*{message}"):
        main(["discover", "--csv", str(csv[0]), "--given", given, "--out", str(tmp_path / "o"), "--no-progress"])


def test_discover_names_a_duplicated_header(tmp_path, capsys):
    """It used to fit a node per column and report edges like B->B."""
    path = tmp_path / "dup.csv"
    path.write_text("a,b,b\n1,2,3\n2,3,5\n3,5,4\n4,4,8\n")
    with pytest.raises(SystemExit, match="column 'b' appears 2 times in the header"):
        main(["discover", "--csv", str(path), "--exact", "--out", str(tmp_path / "o")])
    path.write_text("a,b\n1,2\n2,3\n3,1e39\n")
    with pytest.raises(SystemExit, match=r"columns \['b'\] hold values beyond float32's range"):
        main(["discover", "--csv", str(path), "--exact", "--out", str(tmp_path / "o")])


@pytest.mark.parametrize("cell, message", [("", r"column 'b' has an empty cell \(a missing value\) on line 3"),
                                           ("abc", r"column 'b' holds 'abc' on line 3, which is not a number")])
def test_discover_names_the_column_of_a_cell_that_is_not_a_number(tmp_path, cell, message):
    """numpy's message named the column by index ('column 2') and called an empty cell a string."""
    path = tmp_path / "bad.csv"
    path.write_text(f"a,b,c\n1,2,3\n2,{cell},4\n3,4,5\n")
    with pytest.raises(SystemExit, match=message):
        main(["discover", "--csv", str(path), "--exact", "--out", str(tmp_path / "o")])


def test_discover_refuses_a_constant_column_and_a_cyclic_truth(tmp_path, csv):
    """A constant column ended in the fit's ValueError (a traceback); a cyclic --truth was scored."""
    path = tmp_path / "const.csv"
    path.write_text("a,b,c\n1,2,3\n2,2,4\n3,2,5\n")
    with pytest.raises(SystemExit, match="column 'b' is constant"):
        main(["discover", "--csv", str(path), "--exact", "--out", str(tmp_path / "o")])
    truth = tmp_path / "truth.csv"
    truth.write_text("0,1,0\n1,0,0\n0,0,0\n")
    with pytest.raises(SystemExit, match=r"--truth .*the true graph has a cycle \(a -> b -> a\)"):
        main(["discover", "--csv", str(csv[0]), "--truth", str(truth), "--exact", "--out", str(tmp_path / "o")])


def test_discover_with_the_gp_score_is_its_exact_posterior_and_answers_given(tmp_path, csv, capsys):
    path, X = csv
    out = tmp_path / "out"
    assert main(["discover", "--csv", str(path), "--likelihood", "gp", "--given", "a->b", "--out", str(out),
                 "--samples", "100", "--no-progress"]) == 0
    res = json.loads((out / "discover.json").read_text())
    ref = exact_posterior(X, "gp", expected_parents=1.5, node_names=["a", "b", "c"])
    np.testing.assert_allclose(res["edge_probs"], ref.edge_probs().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(res["given"]["edge_probs"], ref.edge_probs(given={("a", "b"): True}).numpy(),
                               rtol=1e-5, atol=1e-6)
    assert res["settings"]["method"] == "exact" and res["settings"]["gp_fits"] > 0
    assert "likelihood=gp" in capsys.readouterr().out


def test_discover_refuses_options_that_an_exact_score_ignores(tmp_path, csv):
    """Issue 42: --likelihood gp ignored --steps / --particles (the API refuses them); --exact on more columns than
    the GP score handles gave a traceback."""
    path, X = csv
    out = str(tmp_path / "out")
    for extra in (["--likelihood", "gp", "--steps", "5"], ["--likelihood", "gp", "--particles", "4"],
                  ["--exact", "--steps", "5"]):
        with pytest.raises(SystemExit, match="drop --(steps|particles)"):
            main(["discover", "--csv", str(path), *extra, "--out", out, "--no-progress"])
    wide = tmp_path / "wide.csv"
    rng = np.random.default_rng(0)
    np.savetxt(wide, rng.normal(size=(30, 17)), delimiter=",", header=",".join(f"c{i}" for i in range(17)),
               comments="")
    with pytest.raises(SystemExit, match="--exact with --likelihood gp handles at most 16 variables; the data have 17"):
        main(["discover", "--csv", str(wide), "--exact", "--likelihood", "gp", "--out", out, "--no-progress"])
