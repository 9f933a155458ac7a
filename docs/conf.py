"""Sphinx configuration for pyro_dag: user guide, API reference, tutorials rendered by sphinx-gallery."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.abspath(".."))

# The tutorials run during the build in their short mode (a few seconds each): set PYRO_DAG_QUICK=0 for the
# full-length versions. Their own figure files go to a scratch folder (sphinx-gallery keeps what it shows).
os.environ.setdefault("PYRO_DAG_QUICK", "1")
os.environ.setdefault("PYRO_DAG_TUTORIAL_OUT", tempfile.mkdtemp(prefix="pyro_dag_tutorials_"))
os.environ.setdefault("MPLBACKEND", "Agg")

project = "pyro_dag"
author = "pyro_dag developers"
release = "0.1.0"
extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": False}
nitpicky = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
suppress_warnings = ["autodoc.import_object"]

sphinx_gallery_conf = {
    "examples_dirs": ["../tutorials"],
    "gallery_dirs": ["auto_tutorials"],
    "filename_pattern": r"\.py$",  # execute every tutorial, not only plot_*.py
    "ignore_pattern": r"__init__\.py",
    "abort_on_example_error": True,
    "download_all_examples": False,
    "show_memory": False,
    "line_numbers": False,
}
