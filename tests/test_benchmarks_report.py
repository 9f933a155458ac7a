"""``benchmarks/README.md`` is what ``benchmarks/report.py`` makes of ``benchmarks/results/*.json``.

Fast: the report reads the JSON only (no benchmark runs, no torch).
"""
import importlib.util
import json
import os
import re
import shutil
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "benchmarks", "README.md")


@pytest.fixture(scope="module")
def report():
    spec = importlib.util.spec_from_file_location("pyro_dag_benchmarks_report",
                                                  os.path.join(ROOT, "benchmarks", "report.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated(report):
    return report.generate()


def _committed():
    with open(README, encoding="utf-8") as f:
        return f.read()


def test_committed_readme_is_generated_from_the_results(report):
    """The committed README is what the JSON give, for the library tree it says it was generated for (whether that
    tree is still the current one is the next test's question)."""
    committed = _committed()
    tree = report.readme_tree(committed)
    assert tree and len(tree) == 40, "benchmarks/README.md names no library tree: run python benchmarks/report.py"
    assert report.generate(tree=tree)[0] == committed, \
        "benchmarks/README.md differs from what the JSON gives: run python benchmarks/report.py"


def test_committed_readme_marks_staleness_against_the_current_library(report):
    """The README's stale / current marks are those of the library tree in the checkout: a commit that changes
    pyro_dag/ regenerates it (python benchmarks/report.py), so sections measured on the old tree read as stale. While
    the library has uncommitted edits the tree in the README cannot match a commit yet, so the test waits for the
    commit."""
    ts = report._tree_state()
    state = ts.code_state()
    if state["modified"]:
        pytest.skip("the library has uncommitted changes: " + ", ".join(state["modified"][:5]))
    assert report.readme_tree(_committed()) == report.current_tree() == state["committed_tree"], \
        ("benchmarks/README.md was generated for another library tree than pyro_dag/ now has: run "
         "python benchmarks/report.py so that the sections measured on the old tree are marked stale")


def test_generation_is_deterministic(report, generated):
    assert report.generate()[0] == generated[0]


def _git(cwd, *args):
    import subprocess

    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_library_tree_hash_is_git_tree_of_the_folder_on_disk(report, tmp_path):
    """``tree_state.working_tree_hash`` is git's tree id of the folder as it is on disk: equal to ``git rev-parse
    HEAD:pyro_dag`` when clean, and, with uncommitted edits (a change, a new file, a deletion; ignored files left
    out), equal to the tree those edits get once committed."""
    import shutil

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    ts = report._tree_state()
    repo = tmp_path / "repo"
    (repo / "pyro_dag" / "sub").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / "pyro_dag" / "__init__.py").write_text("x = 1\n")
    (repo / "pyro_dag" / "sub" / "a.py").write_text("a = 2\n")
    (repo / "pyro_dag" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(repo / "pyro_dag" / "run.sh", 0o755)
    (repo / "other.py").write_text("outside the library\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    clean = ts.working_tree_hash(str(repo))
    assert clean == _git(repo, "rev-parse", "HEAD:pyro_dag")
    (repo / "other.py").write_text("changed outside the library\n")
    (repo / "pyro_dag" / "__pycache__").mkdir()
    (repo / "pyro_dag" / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    assert ts.working_tree_hash(str(repo)) == clean
    state = ts.code_state(str(repo))
    assert state["tree"] == state["committed_tree"] == clean and state["modified"] == []
    (repo / "pyro_dag" / "sub" / "a.py").write_text("a = 3\n")
    (repo / "pyro_dag" / "new.py").write_text("n = 1\n")
    (repo / "pyro_dag" / "run.sh").unlink()
    dirty = ts.working_tree_hash(str(repo))
    state = ts.code_state(str(repo))
    assert dirty != clean and state["tree"] == dirty and state["committed_tree"] == clean
    assert sorted(state["modified"]) == ["pyro_dag/new.py", "pyro_dag/run.sh", "pyro_dag/sub/a.py"]
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "two")
    assert _git(repo, "rev-parse", "HEAD:pyro_dag") == dirty == ts.working_tree_hash(str(repo))
    # a frozen copy (git archive) outside any checkout hashes the same as the commit
    copy = tmp_path / "copy"
    shutil.copytree(repo / "pyro_dag", copy / "pyro_dag")
    assert ts.code_state(str(repo), library_path=str(copy / "pyro_dag"))["tree"] == dirty


def test_staleness_of_a_section(report):
    cur, old = "a" * 40, "b" * 40
    assert report.staleness([(cur, None, True)], cur)[0] == "current"
    status, line = report.staleness([(old, "c" * 40, True)], cur)
    assert status == "stale" and "**Stale:**" in line and "bbbbbbbbbb" in line and "aaaaaaaaaa" in line
    status, line = report.staleness([(cur, None, True), (None, None, False)], cur)
    assert status == "not recorded" and "part of its rows" in line
    assert report.staleness([(None, None, False)], cur)[0] == "not recorded"
    # a commit whose library tree differs, uncommitted edits unknown: stale; the same tree: not recorded
    assert report.staleness([(old, "d" * 40, False)], cur)[0] == "stale"
    assert report.staleness([(cur, "d" * 40, False)], cur)[0] == "not recorded"
    # mixed rows: some measured on the current tree, some on an old one
    status, line = report.staleness([(cur, None, True), (old, None, True)], cur)
    assert status == "stale" and "some of it on the current tree" in line


def test_measurement_states_read_every_record(report):
    cur = "a" * 40
    assert report.measurement_states({"code": {"tree": cur, "commit": "c", "modified": []}}) == [
        (cur, "c", True, None)]
    assert report.measurement_states({"rows": [{"x": 1}]}) == [(None, None, False, None)]
    rows = {"rows": [{"code_tree": cur}, {"code_tree": cur}, {"rmse": 1.0}]}
    assert report.measurement_states(rows) == sorted({(cur, None, True, None), (None, None, False, None)}, key=str)
    # the modules the measuring process ran; none usable when it started other processes
    used = {"modules": ["pyro_dag/b.py", "pyro_dag/__init__.py"], "spawned": False}
    assert report.measurement_states({"code": {"tree": cur, "commit": "c", "used": used}}) == [
        (cur, "c", True, ("pyro_dag/__init__.py", "pyro_dag/b.py"))]
    used["spawned"] = True
    assert report.measurement_states({"code": {"tree": cur, "commit": "c", "used": used}}) == [
        (cur, "c", True, None)]
    rows = {"rows": [{"code_tree": cur, "code_used": {"modules": ["pyro_dag/a.py"], "spawned": False}},
                     {"code_tree": cur}]}
    assert report.measurement_states(rows) == sorted({(cur, None, True, ("pyro_dag/a.py",)),
                                                      (cur, None, True, None)}, key=str)


def test_sections_are_marked_stale_or_current_from_their_json(report, tmp_path):
    """A section whose JSON record the current tree reads as current, one with another tree as stale, one without a
    record as "tree not recorded"; the stale sections are listed at the top of the README."""
    results = tmp_path / "results"
    shutil.copytree(report.RESULTS, results)
    cur, old = "1" * 40, "2" * 40

    def stamp(name, tree):
        path = results / name
        data = json.loads(path.read_text())
        data["code"] = {"tree": tree, "commit": "0" * 40, "modified": []}
        path.write_text(json.dumps(data))
    stamp("gradient_variance.json", cur)
    stamp("collider_timing.json", old)
    text, _ = report.generate(str(results), tree=cur)
    assert report.readme_tree(text) == cur
    grad = text.split("### Is DAGELBO's gradient better than Trace_ELBO's?")[1].split("\n### ")[0]
    assert "*Measured on the current library tree `1111111111`.*" in grad
    timing = text.split("### How long does a collider fit take? (collider timing)")[1].split("\n### ")[0]
    assert "**Stale:** measured on library tree `2222222222`" in " ".join(timing.split())
    head = text.split("**Contents.**")[0]
    stale_list = [line for line in head.split("\n\n") if line.startswith("Stale (measured on another")][0]
    assert "How long does a collider fit take? (collider timing)" in stale_list
    assert "Is DAGELBO's gradient better" not in stale_list
    sachs = text.split("### Does DAG-SVI reproduce the paper's Sachs regression?")[1].split("\n### ")[0]
    assert "**Tree not recorded" in sachs


def test_every_results_file_is_reported_or_listed(report, generated):
    _, used = generated
    assert report.unaccounted(used) == [], \
        "results files that no section reads: report them or list them in NOT_REPORTED with the reason"
    files = set(report.results_files())
    for name, reason in report.NOT_REPORTED.items():
        assert name in files, f"NOT_REPORTED lists {name}, which is not in benchmarks/results"
        assert name not in used, f"{name} is both reported and listed as not reported"
        assert reason.strip()
    for folder in report.PER_RUN_FOLDERS:
        assert os.path.isdir(os.path.join(report.RESULTS, folder)), folder
    assert all(os.path.exists(os.path.join(report.RESULTS, n)) for n in used)


def test_quick_results_are_not_required(report, tmp_path):
    """A ``*_quick.json`` (a smoke run) is neither reported nor required to be listed."""
    results = tmp_path / "results"
    shutil.copytree(report.RESULTS, results)
    (results / "gradient_variance_quick.json").write_text("{}")
    text, used = report.generate(str(results))
    assert "gradient_variance_quick.json" not in used
    assert report.unaccounted(used, str(results)) == []
    assert text == report.generate()[0]


def test_one_summary_table_per_section(generated):
    text, _ = generated
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    assert len(sections) >= 20
    for section in sections:
        title = section.splitlines()[0]
        assert section.count("\n|---") == 1, f"section {title!r} should have exactly one table"
        assert "Reproduce: `python benchmarks/" in section, f"section {title!r} has no command"


def test_tables_are_well_formed(generated):
    text, _ = generated
    table = []
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            table.append(line)
            continue
        if table:
            widths = {len(row.strip().strip("|").split(" | ")) for row in table if not row.startswith("|---")}
            widths |= {row.count("---") for row in table if row.startswith("|---")}
            assert len(widths) == 1, f"a table with rows of different widths: {table[0]}"
            table = []


def test_readme_states_it_is_generated(generated):
    text, _ = generated
    assert "do not edit by hand" in text.splitlines()[2]
    assert "`bench` extra" in text and "one intra-op thread" in text


def test_every_nuts_mixing_run_is_a_row(report, generated):
    text, _ = generated
    runs = [n for n in report.results_files() if n.startswith("nuts_mixing_")]
    section = text.split("### NUTS mixing")[1].split("\n### ")[0]
    rows = [line for line in section.splitlines() if line.startswith("| chain") or line.startswith("| collider")]
    assert len(rows) == len(runs) > 0


def test_readme_quickstart_claim_is_a_measurement(generated):
    """The README's Quickstart sentence points at the section that holds its numbers."""
    text, _ = generated
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    for title in ("Does the README Quickstart hold on every optimisation seed?",
                  "Does the Quickstart's recipe hold on other collider data sets?"):
        assert f"### {title}" in text
        assert title in " ".join(readme.split())
    quick = text.split("### Does the README Quickstart hold on every optimisation seed?")[1].split("\n### ")[0]
    assert "holds on every seed: yes" in " ".join(quick.split())


def test_calibration_cells_show_what_the_json_recorded(report):
    assert report.calib_cell({"picp95": 0.951, "crps": 0.0123, "nlpd": -1.5}) == "0.95 / 0.0123 / -1.5"
    assert report.calib_cell({"crps_test": [0.02, 0.001]}) == "n.r. / 0.02 / n.r."
    assert report.calib_cell({"picp": 0.9}, crps=None) == "0.90 / n.r."
    assert report.picp_cell([0.8, 0.84]).endswith("**(outside)**") and report.picp_cell([0.95]) == "0.95"
    assert report.picp_cell([None]) == "not recorded"


def test_generated_zoo_section_reports_the_share_of_draws(report, tmp_path):
    """A ``zoo_generated.json`` becomes a section whose table gives, per target, the runs and the draws meeting it."""
    results = tmp_path / "results"
    shutil.copytree(report.RESULTS, results)
    rows = []
    for draw, (d_rmse, gp_rmse, picp) in {100: (0.10, 0.10, 0.95), 101: (0.30, 0.10, 0.70)}.items():
        for seed in (0, 1):
            p = f"gen-latent-{draw}"
            rows += [{"problem": p, "seed": seed, "method": "default", "rmse": d_rmse, "picp95": picp, "crps": 0.1,
                      "nlpd": 0.0, "noise_variances": {"y": 0.01}, "cpu_seconds": 1.0},
                     {"problem": p, "seed": seed, "method": "exact_gp", "rmse": gp_rmse, "picp95": 0.95,
                      "noise_variances": {"y": 0.01}, "cpu_seconds": 1.0},
                     {"problem": p, "seed": seed, "method": "mean", "rmse": 1.0, "cpu_seconds": 0.0}]
    problems = {f"gen-latent-{k}": {"kind": "latent", "targets": ["y"], "noise_truth": {"y": 0.01}, "hidden": ["h1"]}
                for k in (100, 101)}
    (results / "zoo_generated.json").write_text(json.dumps({
        "rows": rows, "problems": problems, "generated": {"draws": [100, 101], "streams": [0, 1]},
        "code": {"tree": "3" * 40, "commit": "0" * 40, "modified": []}}))
    text, used = report.generate(str(results), tree="3" * 40)
    assert "zoo_generated.json" in used
    sec = text.split("### Do the defaults hold on random problems drawn from a seed")[1].split("\n### ")[0]
    assert "| latent | not worse than the training mean | 4/4 (100%) | 2/2 (100%) |" in sec
    assert "| latent | RMSE <= 1.2x the exact GP | 2/4 (50%) | 1/2 (50%) |" in sec
    assert "| latent | PICP95 in [0.88, 0.99] | 2/4 (50%) | 1/2 (50%) |" in sec
    assert "*Measured on the current library tree `3333333333`.*" in sec


def test_a_tree_that_differs_in_docstrings_and_comments_only_measured_the_same_code(report, tmp_path):
    """``tree_state.same_code``: a tree whose Python files differ from the folder on disk only in docstrings,
    comments and layout ran the same code (the report then calls its numbers current); any other change (code, a
    file added, a non-Python file) is a different library."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    ts = report._tree_state()
    assert ts.code_of('"""doc"""\ndef f(x):  # why\n    """what"""\n    return x\n') == ts.code_of(
        "def f(x):\n\n    return x\n")
    assert ts.code_of("def f(x):\n    return x\n") != ts.code_of("def f(x):\n    return x + 1\n")
    assert ts.code_of("def f(x):\n    return 'a'\n") != ts.code_of("def f(x):\n    return 'b'\n")  # not a docstring
    repo = tmp_path / "repo"
    (repo / "pyro_dag").mkdir(parents=True)
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    (repo / "pyro_dag" / "a.py").write_text('"""A module."""\ndef f(x):\n    return 2 * x  # double\n')
    (repo / "pyro_dag" / "data.txt").write_text("1\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    measured = _git(repo, "rev-parse", "HEAD:pyro_dag")
    assert ts.same_code(measured, root=str(repo)) is True
    (repo / "pyro_dag" / "a.py").write_text('"""The module, reworded."""\ndef f(x):\n\n    return 2 * x\n')
    ts._SAME_CODE.clear()
    assert ts.same_code(measured, root=str(repo)) is True
    (repo / "pyro_dag" / "a.py").write_text('"""A module."""\ndef f(x):\n    return 3 * x\n')
    ts._SAME_CODE.clear()
    assert ts.same_code(measured, root=str(repo)) is False
    (repo / "pyro_dag" / "a.py").write_text('"""A module."""\ndef f(x):\n    return 2 * x  # double\n')
    (repo / "pyro_dag" / "data.txt").write_text("2\n")
    ts._SAME_CODE.clear()
    assert ts.same_code(measured, root=str(repo)) is False
    (repo / "pyro_dag" / "data.txt").write_text("1\n")
    (repo / "pyro_dag" / "new.py").write_text("n = 1\n")
    ts._SAME_CODE.clear()
    assert ts.same_code(measured, root=str(repo)) is False
    assert ts.same_code("0" * 40, root=str(repo)) is None   # a tree git does not have
    # a measurement that loaded only some modules: a change elsewhere leaves it current, in them it does not
    (repo / "pyro_dag" / "new.py").unlink()
    (repo / "pyro_dag" / "b.py").write_text("b = 1\n")
    ts._SAME_CODE.clear()
    assert ts.same_code(measured, root=str(repo)) is False
    assert ts.same_code(measured, root=str(repo), modules=["pyro_dag/a.py"]) is True
    assert ts.same_code(measured, root=str(repo), modules=["pyro_dag/a.py", "pyro_dag/b.py"]) is False
    (repo / "pyro_dag" / "data.txt").write_text("2\n")       # data files count whatever was loaded
    ts._SAME_CODE.clear()
    assert ts.same_code(measured, root=str(repo), modules=["pyro_dag/a.py"]) is False
    (repo / "pyro_dag" / "data.txt").write_text("1\n")
    (repo / "pyro_dag" / "a.py").unlink()                      # a module it ran that is gone
    ts._SAME_CODE.clear()
    assert ts.same_code(measured, root=str(repo), modules=["pyro_dag/a.py"]) is False


def test_library_used_lists_the_loaded_modules_and_notices_other_processes(report):
    """``tree_state.library_used``: the library's files this process loaded, relative to the package's parent, and
    whether it started another process since ``watch_processes`` (git and tar do not count: the benchmarks' own
    helpers run them). ``common.write_json`` records it."""
    import subprocess

    ts = report._tree_state()
    ts.watch_processes()
    ts.watch_processes()                                      # idempotent
    import pyro_dag.gp.amplitude  # noqa: F401

    used = ts.library_used()
    assert "pyro_dag/__init__.py" in used["modules"] and "pyro_dag/gp/amplitude.py" in used["modules"]
    assert all(m.startswith("pyro_dag/") and m.endswith(".py") for m in used["modules"])
    was = ts._SPAWNED["any"]
    try:
        ts._SPAWNED["any"] = False
        subprocess.run(["git", "--version"], capture_output=True)
        assert ts.library_used()["spawned"] is False
        subprocess.run([sys.executable, "-c", "pass"], capture_output=True)
        assert ts.library_used()["spawned"] is True
        ts._SPAWNED["any"] = False
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        assert ts.library_used()["spawned"] is True
    finally:
        ts._SPAWNED["any"] = was


def test_a_section_measured_before_a_change_to_modules_it_did_not_load_stays_current(report, monkeypatch):
    cur, old = "a" * 40, "b" * 40
    mods = ("pyro_dag/a.py",)
    monkeypatch.setattr(report, "same_code", lambda measured, tree, modules=None: modules == mods)
    status, line = report.staleness([(old, None, True, mods)], cur)
    assert status == "current" and "modules the measurement did not load" in line
    assert report.staleness([(old, None, True, None)], cur)[0] == "stale"
    # the same tree recorded once with its modules and once without: the record without decides
    assert report.staleness([(old, None, True, mods), (old, None, True, None)], cur)[0] == "stale"
