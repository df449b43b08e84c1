"""Sphinx configuration of the d2lrnn website; ``build.py`` runs Sphinx with it (``-c docs/site``)."""

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # autodoc reads this tree's d2lrnn, not an installed one

project = "d2lrnn"
author = "the d2lrnn developers"
copyright = "the d2lrnn developers; the book's text and figures are its authors'"
extensions = ["myst_parser", "sphinx_design", "sphinx.ext.autodoc", "sphinx.ext.mathjax", "sphinxarg.ext"]
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3
exclude_patterns = ["site.json"]
suppress_warnings = ["myst.header"]  # the notebooks start at level 1 and may skip a level

html_theme = "furo"
html_title = "d2lrnn"
html_static_path = [str(pathlib.Path(__file__).parent / "static")]
html_css_files = ["site.css"]
html_show_sourcelink = False
html_copy_source = False

# MathJax from the site itself (build.py copies it into _static/): nothing loads from elsewhere.
mathjax_path = "mathjax/tex-chtml.js"
mathjax3_config = {"options": {"enableMenu": False}}

autodoc_default_options = {"members": True, "undoc-members": False, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "none"
html_favicon = str(pathlib.Path(__file__).parent / "static/favicon.svg")
