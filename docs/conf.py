"""Sphinx configuration of the ppa_xr documentation site.

Build: ``python -m pip install ".[docs]" && python -m sphinx -W -b html docs docs/_build/html``
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import ppa_xr

ROOT = Path(os.environ.get("PPA_XR_ROOT") or Path(__file__).resolve().parent.parent)  # the tests build a copy of docs/

smartquotes = False  # "--fast" stays two hyphens in copied commands
project = "ppa_xr"
author = "ppa_xr developers"
copyright = "2026, ppa_xr developers"
version = release = ppa_xr.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "sphinxarg.ext",
    "sphinx_autosummary_accessors",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip"]
import sphinx_autosummary_accessors  # noqa: E402  (its templates: DataArray.ppa.fit pages)

templates_path = ["_templates", sphinx_autosummary_accessors.templates_path]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3
suppress_warnings = ["myst.xref_missing", "config.cache"]  # method notes link to repository files (benchmarks/, tests/) by path

autosummary_generate = True
autodoc_typehints = "none"  # numpydoc shows the signature; type hints stay in the code
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_validation_checks: set[str] = set()

intersphinx_mapping = {
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable", None),
    "xarray": ("https://docs.xarray.dev/en/stable", None),
    "dask": ("https://docs.dask.org/en/stable", None),
    "sklearn": ("https://scikit-learn.org/stable", None),
}
# links into those projects' docs need their inventories from the network: opt in with
# PPA_XR_DOCS_INTERSPHINX=1, so that a build without network (CI, a laptop offline) passes with -W
intersphinx_timeout = 5
if not os.environ.get("PPA_XR_DOCS_INTERSPHINX"):
    intersphinx_mapping = {}

_gallery_output = Path(tempfile.mkdtemp(prefix="ppa_xr_gallery_"))


def _fast_argv(gallery_conf, script_vars) -> list[str]:
    """Examples run at build time in their fast mode, writing their files outside the source tree."""
    name = Path(script_vars["src_file"]).stem
    out = ["--output-dir", str(_gallery_output / name)]
    return {
        "paper_tables": ["--fast", *out],
        "metric_knn": ["--fast", *out],
        "helix_curvatures": ["--fast", *out],
        "principal_curves": out,
        "tails_extrapolation": ["--realisations", "1", *out],
        "hyperspectral_mnf": out,
        "report_figure": out,
        "landsat_workflow": out,
        "cluster_outputs": out,
    }[name]


_shown: set[Path] = set()


def _saved_figures(block, block_vars, gallery_conf) -> str:
    """An image scraper for the figures an example saves into its output folder (the examples write PNG
    files, as a user running them from the command line gets them, and show nothing): copied into the
    gallery, so its page and its thumbnail show them."""
    from sphinx_gallery.scrapers import figure_rst

    images = []
    for png in sorted((_gallery_output / Path(block_vars["src_file"]).stem).rglob("*.png")):
        if png not in _shown:
            _shown.add(png)
            images.append(next(block_vars["image_path_iterator"]))
            shutil.copyfile(png, images[-1])
    return figure_rst(images, gallery_conf["src_dir"])


sphinx_gallery_conf = {
    "image_scrapers": (_saved_figures,),  # every example saves its figures; pyplot's scraper would show them twice
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r".*\.py",
    "reset_argv": _fast_argv,
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "matplotlib_animations": False,
}

html_theme = "pydata_sphinx_theme"
html_title = "ppa_xr"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 4,  # the rest under "More": one row at 1280 px
    "navbar_persistent": ["search-button"],  # a search icon: the search field wrapped the header onto a second row at 1280 px
    "navbar_align": "left",
}
html_static_path: list[str] = []
# guide pages list every page (the theme's section navigation would be empty there); the API reference and the
# gallery list their own entries
html_sidebars = {"*": ["sidebar-site-nav"], "api": ["sidebar-nav-bs"], "generated/*": ["sidebar-nav-bs"], "auto_examples/*": ["sidebar-nav-bs"]}
