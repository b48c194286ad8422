"""Sphinx configuration of the jetastar documentation site.

Build it with ``python -m sphinx -W --keep-going -n -b html docs docs/_build/html`` (CONTRIBUTING.md);
``tests/test_docs.py`` runs the same build in the test suite.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

from jetastar_docs import FACES  # noqa: E402

import jetastar  # noqa: E402

# The notebooks are executed during the build (their outputs are not stored in the repository). The
# test suite builds them at the small sizes below, which keep the build within CI's budget; set these
# variables before building to render the full-size studies.
for _name, _value in (("JETASTAR_NB_JETS", "16"), ("JETASTAR_NB_MAX_LEAVES", "8"),
                      ("JETASTAR_NB_LARGE_JETS", "2"), ("JETASTAR_NB_FIT_JETS", "120"),
                      ("TQDM_DISABLE", "1")):
    os.environ.setdefault(_name, _value)
# figures are shown inline in the rendered notebooks, whatever backend the calling process chose
# (the test suite runs with MPLBACKEND=Agg, under which a kernel draws nothing)
os.environ.pop("MPLBACKEND", None)

project = "jetastar"
author = "jetastar developers"
copyright = "jetastar developers"
release = jetastar.__version__
version = release

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "jetastar_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "_inventories", "_templates", "_ext", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
root_doc = "index"
nitpicky = True

# MyST markdown
myst_enable_extensions = ["dollarmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# notebooks: executed on every build, an error in a cell fails the build
# (JETASTAR_DOCS_EXECUTE=off: a quick build without notebook outputs, for editing the text)
nb_execution_mode = os.environ.get("JETASTAR_DOCS_EXECUTE", "force")
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_execution_timeout = 600
nb_merge_streams = True

# API reference
autosummary_generate = [f"api/{face}.rst" for face in FACES]
autosummary_generate_overwrite = True
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
autodoc_default_options = {"show-inheritance": True}
python_maximum_signature_line_length = 88
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_custom_sections = [("Raises", "params_style")]

# Cross-references to the packages jetastar's users already know. The build machine has no internet,
# so the inventories are read from docs/_inventories/ (see its README.md) and never downloaded.
_INV = DOCS / "_inventories"
intersphinx_mapping = {
    "python": ("https://docs.python.org/3/", str(_INV / "python.inv")),
    "numpy": ("https://numpy.org/doc/stable/", str(_INV / "numpy.inv")),
    "scipy": ("https://docs.scipy.org/doc/scipy/", str(_INV / "scipy.inv")),
    "awkward": ("https://awkward-array.org/doc/main/", str(_INV / "awkward.inv")),
    "uproot": ("https://uproot.readthedocs.io/en/latest/", str(_INV / "uproot.inv")),
    "vector": ("https://vector.readthedocs.io/en/latest/", str(_INV / "vector.inv")),
    "matplotlib": ("https://matplotlib.org/stable/", str(_INV / "matplotlib.inv")),
}

html_theme = "furo"
html_title = f"jetastar {release}"
html_static_path: list[str] = []
