"""The documentation site builds with warnings as errors and every reference to a ppa_xr object resolved
(``nitpicky``): every page, the API reference from the docstrings, the CLI reference from the parser, and the
examples gallery run in fast mode. It works offline: MathJax is served from the site itself. The code blocks
of the pages are run by ``test_doc_snippets.py``."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: the changelog is the one page that tells the project's history
HISTORY_PAGES = {"changelog.html"}
#: words of a development log, which the user pages must not use
DEVELOPMENT_LOG = re.compile(r"\b(rounds?|issues?)\b|\btargets?\b[^.]*\bnot met\b|\bnot met\b", re.IGNORECASE)


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The site, built from a copy of docs/ (the build writes generated pages and the gallery next to its
    sources), offline, with warnings as errors."""
    tmp_path = tmp_path_factory.mktemp("docs")
    env = {k: v for k, v in os.environ.items() if k != "PPA_XR_DOCS_INTERSPHINX"} | {"MPLBACKEND": "Agg", "PPA_XR_ROOT": str(ROOT)}
    source = tmp_path / "docs"
    shutil.copytree(ROOT / "docs", source, ignore=shutil.ignore_patterns("_build", "generated", "auto_examples", "sg_execution_times.rst"))
    before = sorted(p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*"))
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
           str(source), str(tmp_path / "html")]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-5000:]
    assert sorted(p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*")) == before  # nothing written into the repository
    return tmp_path / "html"


def _pages(html: Path):
    return [p for p in html.rglob("*.html") if not {"_modules", "_sources", "_static"} & set(p.relative_to(html).parts)]


def _text(page: Path) -> str:
    """A page's article as text, without its code blocks."""
    body = page.read_text()
    body = body[body.find('<article'):body.find('</article>')] if '<article' in body else body
    body = re.sub(r"<pre.*?</pre>", " ", body, flags=re.S)
    return re.sub(r"<[^>]+>", " ", body)


def test_docs_site_builds_without_warnings(site):
    for page in ("index", "getting_started", "raster_guide", "method", "geometry", "cli", "paper", "performance", "api", "changelog"):
        assert (site / f"{page}.html").is_file(), page
    cli = (site / "cli.html").read_text()
    assert "--match-bands" in cli and "--scheduler" in cli  # generated from argparse
    assert (site / "generated" / "ppa_xr.PPA.html").is_file()
    gallery = (site / "auto_examples" / "paper_tables.html").read_text()
    assert "fast mode" in gallery  # the example ran at build time and its output is on the page


def test_maths_render_offline(site):
    """MathJax comes with the site (sphinx-mathjax-offline), never from a CDN; no page loads anything remote."""
    assert (site / "_static" / "mathjax" / "tex-chtml.js").stat().st_size > 100_000
    method = (site / "method.html").read_text()
    assert 'src="_static/mathjax/tex-chtml.js' in method and r"\Delta I" in method
    for page in ("information", "fidelity"):  # their equations are maths, not ASCII in code spans
        text = (site / f"{page}.html").read_text()
        assert "_static/mathjax/tex-chtml.js" in text and text.count('class="math') >= 5, page
    remote = re.compile(r"""<(?:script|img|iframe)[^>]*\ssrc=["']?(?:https?:)?//|<link[^>]*\shref=["']?(?:https?:)?//""")
    loading = [str(page.relative_to(site)) for page in _pages(site) if remote.search(page.read_text())]
    assert not loading, f"pages loading remote resources: {loading}"


def test_pages_are_a_reference_not_a_development_log(site):
    """The guide pages and the gallery say what the library does, how well and its limits; the history is on
    the changelog page. (The API pages are the docstrings', where "round" is a verb.)"""
    guides = [site / f"{page.stem}.html" for page in (ROOT / "docs").glob("*.md")] + list((site / "auto_examples").glob("*.html"))
    assert len(guides) > 20
    found = {}
    for page in guides:
        if page.name not in HISTORY_PAGES and (match := DEVELOPMENT_LOG.search(_text(page))):
            found[str(page.relative_to(site))] = match.group(0)
    assert not found, found
    assert "validation=&quot;transfer&quot;" not in (site / "fidelity.html").read_text().split("Why there is no")[0]
    index = (site / "index.html").read_text()
    assert 'href="changelog.html"' in index


def test_api_pages_render_their_sections(site):
    """The accessor's pages list the parameters a user passes (not the cube the accessor passes), and the
    estimator's page its Parameters and Attributes as numpydoc fields."""
    fit = (site / "generated" / "xarray.DataArray.ppa.fit.html").read_text()
    assert "<strong>dim</strong>" in fit and "<strong>n_samples</strong>" in fit and "<strong>obj</strong>" not in fit
    ppa = (site / "generated" / "ppa_xr.PPA.html").read_text()
    fields = re.findall(r'<dt class="field-\w+">(\w+)<span class="colon">', ppa)
    assert {"Parameters", "Attributes"} <= set(fields), fields
    for name in ("degree", "robust", "noise_cov", "params_", "degrees_", "fit_error_ratio_"):
        assert f"<strong>{name}</strong>" in ppa, name
    assert not re.search(r"\*\*[A-Za-z_]\w*\*\*", _text(site / "generated" / "ppa_xr.PPA.html"))  # no bold markup left unrendered
    assert "bd-sidebar-secondary" in ppa and "bd-sidebar-secondary" not in fit  # the methods' contents on class pages only
    for accessor in ("PPADataArrayAccessor", "PPADatasetAccessor"):  # the class pages list and link every method
        page = (site / "generated" / f"ppa_xr.cube.accessor.{accessor}.html").read_text()
        for name in ("fit", "sample", "transform", "evaluate", "inverse_transform", "reconstruct", "reconstruction_error", "information_report"):
            assert f'href="xarray.DataArray.ppa.{name}.html#xarray.DataArray.ppa.{name}"' in page, (accessor, name)
    for page in ("ppa_xr.PPA", "ppa_xr.core.Spec", "ppa_xr.geometry.principal_grid"):  # guide pages are links, not paths
        assert not re.search(r"docs/\w+\.md", _text(site / "generated" / f"{page}.html")), page


def test_gallery_examples_are_cells_with_their_output(site):
    """Each example is a sequence of text, code and its figures and output; no build folder is printed."""
    for page in sorted((site / "auto_examples").glob("*.html")):
        if page.name == "index.html":
            continue
        body = page.read_text()
        assert body.count('class="highlight-Python') >= 2, page.name  # code cells, not one script
        assert re.search(r'<img[^>]*src="../_images/sphx_glr_', body), page.name  # its figures, under the cells that draw them
        assert "ppa_xr_gallery_" not in body and "/tmp/" not in body, page.name


def test_accessor_methods_carry_the_documentation_they_delegate_to():
    import xarray as xr

    import ppa_xr  # noqa: F401  (registers .ppa)
    from ppa_xr.cube import fitting, maps

    cube = xr.DataArray([[[0.0]]], dims=("band", "y", "x"))
    assert fitting.fit.__doc__.strip().splitlines()[0] in cube.ppa.fit.__doc__
    methods = ["fit", "sample", "transform", "evaluate", "inverse_transform", "reconstruct", "reconstruction_error", "score_samples", "fill",
               "information_report"]
    for name in methods:
        doc = getattr(cube.ppa, name).__doc__
        assert "Parameters\n----------" in doc and "obj :" not in doc, name  # the cube is the accessor's, not a parameter
    assert "check=True" in cube.ppa.transform.__doc__ and maps.transform.__doc__.strip().splitlines()[0] in cube.ppa.transform.__doc__
    assert "held_out" in cube.ppa.information_report.__doc__ and len(cube.ppa.evaluate.__doc__.splitlines()) > 5
    for accessor in (type(cube.ppa), type(cube.to_dataset(dim="band").ppa)):  # the class lists its methods, before its Parameters
        listed = re.findall(r":meth:`~xarray\.DataArray\.ppa\.(\w+)`", accessor.__doc__.split("Parameters\n")[0])
        assert listed == methods


def _api_objects():
    """Every object the API reference (docs/api.rst) documents, with its dotted name."""
    import importlib
    import re

    module = None
    for line in (ROOT / "docs" / "api.rst").read_text().splitlines():
        if match := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = match.group(1)
        elif (match := re.match(r"^   ([A-Za-z_][\w.]*)$", line)) and module:
            obj = importlib.import_module(module)
            for part in match.group(1).split("."):
                obj = getattr(obj, part) if hasattr(obj, part) else importlib.import_module(f"{obj.__name__}.{part}")
            yield f"{module}.{match.group(1)}", obj


def _lacking(objects) -> list[str]:
    """``name: sections`` for each (name, object) whose docstring lacks the numpydoc sections its page needs:
    Parameters where it takes any, Returns where it is not a class."""
    import inspect

    lacking = []
    for name, obj in objects:
        doc = inspect.getdoc(obj) or ""
        try:
            takes = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
        except (TypeError, ValueError):
            takes = []
        missing = [section for section, needed in (("Parameters", bool(takes)), ("Returns", not inspect.isclass(obj)))
                   if needed and f"{section}\n{'-' * len(section)}" not in doc]
        lacking += [f"{name}: {', '.join(missing)}"] if missing else []
    return lacking


def test_every_api_page_has_parameters_and_returns():
    lacking = _lacking(_api_objects())
    assert not lacking, "API pages without numpydoc sections:\n" + "\n".join(lacking)
    assert len(list(_api_objects())) > 60


def test_every_public_name_has_parameters_and_returns():
    """What the public modules export (``__all__``) carries its numpydoc sections, as the API pages do."""
    import importlib
    import inspect

    modules = [importlib.import_module(name) for name in ("ppa_xr", "ppa_xr.information", "ppa_xr.geometry", "ppa_xr.cube", "ppa_xr.datasets", "ppa_xr.core")]
    exported = [(f"{module.__name__}.{name}", getattr(module, name)) for module in modules for name in module.__all__]
    lacking = _lacking((name, obj) for name, obj in exported if inspect.isfunction(obj) or inspect.isclass(obj))
    assert not lacking, "public names without numpydoc sections:\n" + "\n".join(lacking)


def _public_callables():
    """(name, function) for what the public modules export (``__all__``: functions, and the public methods of
    classes, their ``__init__`` included), and the ``.ppa`` accessor's methods."""
    import importlib
    import inspect

    from ppa_xr.cube.accessor import _PPAAccessor

    modules = [importlib.import_module(name) for name in ("ppa_xr", "ppa_xr.information", "ppa_xr.geometry", "ppa_xr.cube", "ppa_xr.datasets")]
    owners = [(f"{module.__name__}.{name}", getattr(module, name)) for module in modules for name in module.__all__]
    for name, obj in owners + [("xarray.DataArray.ppa", _PPAAccessor)]:
        if inspect.isfunction(obj):
            yield name, obj
        elif inspect.isclass(obj) and obj.__module__.startswith("ppa_xr."):
            for method, member in vars(obj).items():
                function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
                if (not method.startswith("_") or method == "__init__") and inspect.isfunction(function):
                    yield f"{name}.{method}", function


def test_every_public_callable_has_type_hints():
    """Each parameter (but ``self`` and ``cls``) and the return of every public function and method is hinted, as
    ``inspect.signature`` shows them (PPA's ``__init__`` takes its hints from the Spec it is made of)."""
    import inspect

    lacking = []
    for name, function in _public_callables():
        signature = inspect.signature(function)
        unhinted = [p.name for p in signature.parameters.values() if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
        unhinted += ["return"] if signature.return_annotation is inspect.Signature.empty else []
        lacking += [f"{name}: {', '.join(unhinted)}"] if unhinted else []
    assert not lacking, "public callables without type hints:\n" + "\n".join(lacking)


def test_the_accessor_methods_take_and_give_what_they_delegate_to():
    """``cube.ppa.<method>`` is one delegation: its parameters (after the cube), their hints and defaults, and its return
    hint are those of the function it calls."""
    import inspect

    from ppa_xr.cube import accessor, fitting, maps, report, sampling, shift

    delegates = {"fit": fitting.fit, "sample": sampling.sample_valid_pixels, "transform": maps.transform, "evaluate": shift.evaluate,
                 "inverse_transform": maps.inverse_transform, "reconstruct": maps.reconstruct, "reconstruction_error": maps.reconstruction_error,
                 "score_samples": maps.score_samples, "fill": maps.fill, "information_report": report.information_report}
    assert set(delegates) == {name for name in vars(accessor._PPAAccessor) if not name.startswith("_")}
    for name, function in delegates.items():
        ours, theirs = (inspect.signature(f) for f in (getattr(accessor._PPAAccessor, name), function))
        shown = [[(p.name, p.kind, p.annotation, p.default) for p in list(s.parameters.values())[1:]] for s in (ours, theirs)]
        assert shown[0] == shown[1] and ours.return_annotation == theirs.return_annotation, name


def test_the_public_methods_of_exported_classes_have_numpydoc_sections():
    """Parameters where a public method of a class the public modules export (PPA, FeatureLabels, the information
    measures' densities and look-ups, Table) or of the accessor takes any, Returns always, as the API pages of functions
    have them (an ``__init__``'s parameters are in its class's docstring)."""
    import inspect

    lacking = _lacking((name, function) for name, function in _public_callables() if "." in function.__qualname__ and not name.endswith(".__init__"))
    assert not lacking, "public methods without numpydoc sections:\n" + "\n".join(lacking)
    unfilled = [name for name, function in _public_callables() if re.search(r"^\s*\{\{\w+\}\}$", inspect.getdoc(function) or "", re.M)]
    assert not unfilled, f"docstrings with a shared part left unfilled (no @shared): {unfilled}"
