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
    "sphinx-mathjax-offline",  # MathJax 3 from the package, copied into _static: the maths renders offline
    "sphinx.ext.viewcode",
    "sphinx_gallery.gen_gallery",
    "sphinxarg.ext",
    "sphinx_autosummary_accessors",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py", "auto_examples/*.zip"]
import sphinx_autosummary_accessors  # noqa: E402  (its templates: DataArray.ppa.fit pages)

templates_path = ["_templates", sphinx_autosummary_accessors.templates_path]
myst_enable_extensions = ["dollarmath", "amsmath", "html_image"]  # <img width="100%">: figures link to their full size
myst_heading_anchors = 3
suppress_warnings = ["config.cache"]
mathjax_path = "mathjax/tex-chtml.js"  # sphinx-mathjax-offline's copy, never a CDN (the docs test checks)

# every reference to a ppa_xr object must resolve (a misspelt or moved name fails the build); the other
# projects' objects resolve only through intersphinx, which needs their inventories from the network
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|np|scipy|xarray|xr|dask|distributed|pandas|sklearn|matplotlib|rioxarray|rasterio|pathlib|os|typing"
               r"|collections|threadpoolctl|tqdm)(\..+)?"),
]

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
        "gap_filling": out,
    }[name]


_shown: set[Path] = set()


def _saved_figures(block, block_vars, gallery_conf) -> str:
    """An image scraper for the figures an example saves into its output folder (the examples write PNG
    files, as a user running them from the command line gets them, and show nothing): copied into the
    gallery, so its page shows each figure under the cell that wrote it, and its thumbnail the first.
    Each is scaled to the article's width and links to its full size."""
    rst = ""
    for png in sorted((_gallery_output / Path(block_vars["src_file"]).stem).rglob("*.png")):
        if png not in _shown:
            _shown.add(png)
            image = Path(next(block_vars["image_path_iterator"]))
            shutil.copyfile(png, image)
            target = image.relative_to(gallery_conf["src_dir"]).as_posix()
            rst += f"\n\n.. image:: /{target}\n   :alt: {png.stem.replace('_', ' ')}\n   :scale: 100\n   :class: sphx-glr-single-img\n"
    return rst


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
    "write_computation_times": False,  # its page loads jQuery and DataTables from CDNs; the site works offline
}

html_theme = "pydata_sphinx_theme"
html_title = "ppa_xr"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "header_links_before_dropdown": 4,  # the rest under "More": one row at 1280 px
    "navbar_persistent": ["search-button"],  # a search icon: the search field wrapped the header onto a second row at 1280 px
    "navbar_align": "left",
    # the page's own sections are listed under it in the left column (sidebar-site-nav.html); a right-hand
    # column only on the API pages, where a class's methods are worth a table of contents (it is left out
    # of any page without sections, e.g. a function's)
    "secondary_sidebar_items": {"generated/*": ["page-toc"]},
}
html_static_path = ["_static"]
html_css_files = ["ppa_xr.css"]  # a narrower navigation column, so the article gets the width
# guide pages list every page (the theme's section navigation would be empty there); the API reference and the
# gallery list their own entries
html_sidebars = {"*": ["sidebar-site-nav"], "api": ["sidebar-nav-bs"], "generated/*": ["sidebar-nav-bs"], "auto_examples/*": ["sidebar-nav-bs"]}


def _public_bases(app, name, obj, options, bases) -> None:
    """"Bases:" names the public classes only: a private base (the accessors' shared ``_PPAAccessor``) is
    replaced by its own bases, so no line points at a page that does not exist."""
    public = []
    for base in bases:
        while getattr(base, "__name__", "").startswith("_") and base is not object:
            base = base.__bases__[0]
        public.append(base)
    bases[:] = public


def _class_pages_only(app, pagename, templatename, context, doctree) -> None:
    """The right-hand table of contents only on an API page that documents a class (its methods); a
    function's page would list the function alone, and the article takes the width instead."""
    from sphinx import addnodes

    if pagename.startswith("generated/") and doctree is not None and not any(
            node.get("objtype") in ("class", "exception") for node in doctree.findall(addnodes.desc)):
        context["secondary_sidebar_items"] = []


def setup(app) -> None:
    app.connect("autodoc-process-bases", _public_bases)
    app.connect("html-page-context", _class_pages_only, priority=900)  # after the theme sets the items
