"""``benchmarks/README.md`` is what ``benchmarks/report.py`` makes of ``benchmarks/results/*.json``.

Fast: the report reads the JSON only (no benchmark runs, no torch).
"""
import importlib.util
import os
import re
import shutil

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


def test_committed_readme_is_generated_from_the_results(report, tmp_path):
    out = tmp_path / "README.md"
    report.write(str(out))
    with open(README, encoding="utf-8") as f:
        committed = f.read()
    assert out.read_text(encoding="utf-8") == committed, \
        "benchmarks/README.md differs from what the JSON gives: run python benchmarks/report.py"


def test_generation_is_deterministic(report, generated):
    assert report.generate()[0] == generated[0]


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
