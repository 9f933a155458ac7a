"""The documents a user reads.

* The README's code runs as written: the Quickstart (``examples/quickstart.py``) at full length, printing what the
  README says it prints. The user guide's examples (``examples/guide/*.py``, every one included by a guide page)
  run as written too, in order, in one process.
* The README and ``docs/quickstart.rst`` show the same Quickstart, the user guide includes the example files, and
  the README links every guide page.
* The Sphinx docs (user guide, API reference, tutorials executed by sphinx-gallery in their short mode) build with
  ``-W``.
* The README, the docs and the tutorials cite papers, not notes that users do not have.
"""
import os
import re
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README = os.path.join(ROOT, "README.md")
QUICKSTART = os.path.join(ROOT, "examples", "quickstart.py")
GUIDE_EXAMPLES = ["dgp", "inference", "natural_gradients", "training", "latent_inputs", "pyro_interop",
                  "mcmc_arviz", "structure", "structure_queries", "metrics", "lamp", "emulation", "latent_sem"]
GUIDE_PAGES = GUIDE_EXAMPLES + ["cli"]

# What the README promises about the Quickstart's output (measured on 5 seeds by benchmarks/quickstart.py).
QUICKSTART_CLAIM = ("a child RMSE below 0.01 on the observed cases and below 0.02 on the held-out cases, "
                    "a posterior variance of each parent between 0.14 and 0.17, and a final ELBO above 180")
QUICKSTART_PATTERNS = {
    "rmse_observed": r"child RMSE: observed cases ([0-9.]+)",
    "rmse_held_out": r"held out ([0-9.]+)",
    "var_w1": r"variance ([0-9.]+) \(w1\)",
    "var_w2": r"([0-9.]+) \(w2\)",
    "final_elbo": r"final ELBO (-?[0-9.]+)",
}
# The documented examples run with every UserWarning an error (the library's own, e.g. a ParamStoreCollisionWarning:
# an example must not teach code that warns), but for ArviZ's data-dependent Pareto-k warning of its LOO example.
STRICT_WARNINGS = ["-W", "error::UserWarning", "-W", "ignore:Estimated shape parameter of Pareto:UserWarning"]
# The subprocesses' timeout only catches a hang (idle 2-core machine: 18-52 s wall). Under pytest-xdist on a machine
# loaded by other work the docs build took 903 s of wall time for 54 CPU s, so the guard is generous.
HANG_GUARD_S = 2400
FORBIDDEN = [r"\.\./shared", r"digest-?\d", r"\bissue \d", r"\bpitfall"]


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def _rel(path):
    return os.path.relpath(path, ROOT)


def readme_python_blocks():
    """The ```python blocks of README.md, in order."""
    return re.findall(r"```python\n(.*?)```", _read(README), re.S)


def guide_example_sources():
    """The user guide's examples (``examples/guide/*.py``) in the order in which they continue one another."""
    return [_read(os.path.join(ROOT, "examples", "guide", f"{name}.py")) for name in GUIDE_EXAMPLES]


def _env(**extra):
    return dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MPLBACKEND="Agg", **extra)


def _parse_quickstart(stdout):
    out = {}
    for key, pattern in QUICKSTART_PATTERNS.items():
        match = re.search(pattern, stdout)
        assert match is not None, f"the Quickstart printed no {key}:\n{stdout}"
        out[key] = float(match.group(1))
    return out


# ---------------------------------------------------------------------------------------------------- the README
def test_readme_quickstart_is_examples_quickstart():
    blocks = readme_python_blocks()
    assert blocks, "README.md has no ```python block"
    assert blocks[0] == _read(QUICKSTART), \
        "the README Quickstart and examples/quickstart.py differ: copy one onto the other"


def test_readme_has_no_second_copy_of_the_guide_examples():
    """The README shows the Quickstart only; the capability examples live in the guide (included from
    ``examples/guide``), so a hand-copied block in the README could drift from them."""
    blocks = readme_python_blocks()
    assert len(blocks) == 1, f"README.md has {len(blocks)} ```python blocks; only the Quickstart belongs there"


def test_readme_links_every_guide_page():
    readme = _read(README)
    for page in GUIDE_PAGES + ["distributed"]:
        assert f"(docs/guide/{page}.rst)" in readme, f"README.md does not link docs/guide/{page}.rst"
    assert "(benchmarks/README.md)" in readme


def test_docs_include_the_same_examples():
    quickstart = _read(os.path.join(ROOT, "docs", "quickstart.rst"))
    assert ".. literalinclude:: ../examples/quickstart.py" in quickstart
    assert "code-block" not in quickstart  # no second, hand-copied version of the Quickstart
    included = set()
    for page in GUIDE_PAGES:
        text = _read(os.path.join(ROOT, "docs", "guide", f"{page}.rst"))
        included |= set(re.findall(r"literalinclude:: \.\./\.\./examples/guide/(\w+)\.py", text))
    assert included == set(GUIDE_EXAMPLES)
    on_disk = {f[:-3] for f in os.listdir(os.path.join(ROOT, "examples", "guide")) if f.endswith(".py")}
    assert on_disk == set(GUIDE_EXAMPLES), "every examples/guide/*.py is a guide example that runs here"


def test_parse_quickstart_output():
    text = ("child RMSE: observed cases 0.0080, held out 0.0151\n"
            "parents' posterior variance 0.154 (w1), 0.156 (w2)\nfinal ELBO -192.1\n")
    assert _parse_quickstart(text) == {"rmse_observed": 0.008, "rmse_held_out": 0.0151, "var_w1": 0.154,
                                       "var_w2": 0.156, "final_elbo": -192.1}
    with pytest.raises(AssertionError, match="final_elbo"):
        _parse_quickstart(text.replace("final ELBO", "ELBO"))


@pytest.mark.early
def test_readme_quickstart_runs_and_prints_what_the_readme_says():
    """The Quickstart at full length (15-20 s on one core), warnings as errors: its numbers meet the README's
    sentence."""
    for path in (README, os.path.join(ROOT, "docs", "quickstart.rst")):
        assert QUICKSTART_CLAIM in " ".join(_read(path).split()), \
            f"{_rel(path)}: the sentence about the Quickstart's output changed; update this test"
    proc = subprocess.run([sys.executable, *STRICT_WARNINGS, QUICKSTART], env=_env(), cwd=ROOT, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = _parse_quickstart(proc.stdout)
    assert got["rmse_observed"] < 0.01, proc.stdout
    assert got["rmse_held_out"] < 0.02, proc.stdout
    assert 0.14 < got["var_w1"] < 0.17 and 0.14 < got["var_w2"] < 0.17, proc.stdout
    assert got["final_elbo"] > 180, proc.stdout


@pytest.mark.early
def test_guide_examples_run_as_written(tmp_path):
    """The guide's examples continue one another: run them in order in one process (warnings as errors)."""
    source = "\n".join(guide_example_sources())
    proc = subprocess.run([sys.executable, *STRICT_WARNINGS, "-c", source], env=_env(), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.splitlines()
    assert lines[0] == "torch.Size([50, 400, 1]) torch.Size([400, 1])"  # predict: samples, mean
    assert "torch.Size([1, 20])" in lines  # median(): constrained and site-shaped
    assert "torch.Size([10, 400, 1])" in lines  # Predictive through Pyro's AutoNormal
    assert "(1, 20, 1, 5)" in lines  # NUTS -> ArviZ
    groups = lines.index("['log_likelihood', 'observed_data', 'posterior', 'posterior_predictive', 'sample_stats']")
    assert float(lines[groups + 1]) <= 1.05  # the two chains' largest R-hat (1.01 with these seeds)


# ------------------------------------------------------------------------------------ references users can follow
def _user_documents():
    paths = [README]
    for folder in ("docs", "tutorials", "examples", "pyro_dag"):  # the shipped package and its docstrings too
        for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, folder)):
            dirnames[:] = [d for d in dirnames if not d.startswith(("_build", "auto_", ".", "__pycache__"))]
            paths += [os.path.join(dirpath, f) for f in filenames if f.endswith((".py", ".rst", ".md", ".txt"))]
    return paths


@pytest.mark.parametrize("path", _user_documents(), ids=_rel)
def test_user_documents_cite_papers_not_internal_notes(path):
    text = _read(path)
    for pattern in FORBIDDEN:
        match = re.search(pattern, text, re.I)
        assert match is None, (f"{_rel(path)} mentions {match.group(0)!r}, which users do not have: cite the "
                               "paper (authors, year, title, arXiv id)")


# ------------------------------------------------------------------------------------------ tutorials and Sphinx
@pytest.mark.parametrize("script", ["collider.py", "structure_learning.py", "multifidelity.py", "latent_sem.py",
                                    "mcmc_arviz.py"])
def test_tutorials_are_sphinx_gallery_scripts_with_a_short_mode(script):
    text = _read(os.path.join(ROOT, "tutorials", script))
    assert text.startswith('"""'), "sphinx-gallery needs a docstring with the title first"
    assert 'os.environ.get("PYRO_DAG_QUICK")' in text
    assert "[markdown]" not in text  # sphinx-gallery renders comment blocks as reStructuredText


@pytest.mark.parametrize("script", ["collider.py", "structure_learning.py", "multifidelity.py", "latent_sem.py",
                                    "mcmc_arviz.py"])
def test_tutorial_runs_in_short_mode(script, tmp_path):
    """Without sphinx-gallery the docs build below cannot execute the tutorials: run them here instead."""
    try:
        import sphinx_gallery  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("the docs build (test_sphinx_docs_build_without_warnings) executes the tutorials")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "tutorials", script)], cwd=str(tmp_path),
                          env=_env(PYRO_DAG_QUICK="1", PYRO_DAG_TUTORIAL_OUT=str(tmp_path)),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert any(p.suffix == ".png" for p in tmp_path.iterdir())


@pytest.mark.early
def test_sphinx_docs_build_without_warnings(tmp_path):
    """The user guide, the API reference and the tutorials (executed by sphinx-gallery in the short mode that
    docs/conf.py sets) build with -W. The sources are copied so that the gallery's generated pages stay out of
    the working tree."""
    pytest.importorskip("sphinx.cmd.build")  # a bare namespace package named sphinx is not enough
    pytest.importorskip("sphinx_gallery")
    for folder in ("docs", "tutorials", "examples", "pyro_dag"):  # the shipped package and its docstrings too
        shutil.copytree(os.path.join(ROOT, folder), tmp_path / folder,
                        ignore=shutil.ignore_patterns("_build", "auto_tutorials", "__pycache__"))
    out = tmp_path / "html"
    figures = tmp_path / "tutorial_out"  # the tutorials' own figure files (docs/conf.py: a scratch folder otherwise)
    figures.mkdir()
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-q", "-W", "--keep-going", "-b", "html",
                           str(tmp_path / "docs"), str(out)],
                          env=_env(PYTHONPATH=ROOT, PYRO_DAG_TUTORIAL_OUT=str(figures)), cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pages = ["index", "quickstart", "api"] + [f"guide/{name}" for name in GUIDE_PAGES]
    tutorials = ["collider", "structure_learning", "multifidelity", "latent_sem", "mcmc_arviz"]
    for page in pages + [f"auto_tutorials/{t}" for t in tutorials]:
        assert (out / f"{page}.html").exists(), page
    for script in tutorials:  # the gallery ran the script and kept its figure
        assert f"sphx_glr_{script}_001.png" in (out / "auto_tutorials" / f"{script}.html").read_text()
    # what tests/structure/test_cli_tutorial.py checks of the structure tutorial's short mode when it runs it itself
    assert "all samples acyclic: True" in (out / "auto_tutorials" / "structure_learning.html").read_text()
    assert (figures / "structure_edge_probs.png").exists()
    api = (out / "api.html").read_text()
    for name in ["DAGDGP", "AutoStructuredGuide", "DAGELBO", "GaussianNaturalGradient", "exact_posterior",
                 "structure_metrics", "limit_threads"]:
        assert name in api, name
