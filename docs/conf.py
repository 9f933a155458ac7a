"""Sphinx configuration for pyro_dag."""
import os
import sys

sys.path.insert(0, os.path.abspath(".."))

project = "pyro_dag"
author = "pyro_dag developers"
release = "0.1.0"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "show-inheritance": False}
autodoc_mock_imports = []
nitpicky = False
html_theme = "alabaster"
exclude_patterns = ["_build"]
suppress_warnings = ["autodoc.import_object"]
