"""The documentation site builds with warnings as errors: every page, the API reference from the
docstrings, the CLI reference from the parser, and the examples gallery run in fast mode."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_docs_site_builds_without_warnings(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PPA_XR_DOCS_INTERSPHINX"} | {"MPLBACKEND": "Agg", "PPA_XR_ROOT": str(ROOT)}  # offline
    source = tmp_path / "docs"  # a copy: the build writes generated pages and the gallery next to its sources
    shutil.copytree(ROOT / "docs", source, ignore=shutil.ignore_patterns("_build", "generated", "auto_examples", "sg_execution_times.rst"))
    before = sorted(p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*"))
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d", str(tmp_path / "doctrees"),
           str(source), str(tmp_path / "html")]
    run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-5000:]
    assert sorted(p.relative_to(ROOT) for p in (ROOT / "docs").rglob("*")) == before  # nothing written into the repository
    html = tmp_path / "html"
    for page in ("index", "getting_started", "raster_guide", "method", "geometry", "cli", "paper", "performance", "api"):
        assert (html / f"{page}.html").is_file(), page
    cli = (html / "cli.html").read_text()
    assert "--match-bands" in cli and "--scheduler" in cli  # generated from argparse
    assert (html / "generated" / "ppa_xr.PPA.html").is_file()
    gallery = (html / "auto_examples" / "paper_tables.html").read_text()
    assert "fast mode" in gallery  # the example ran at build time and its output is on the page


def test_accessor_methods_carry_the_documentation_they_delegate_to():
    import xarray as xr

    import ppa_xr  # noqa: F401  (registers .ppa)
    from ppa_xr.cube import fitting, maps

    cube = xr.DataArray([[[0.0]]], dims=("band", "y", "x"))
    assert fitting.fit.__doc__.strip().splitlines()[0] in cube.ppa.fit.__doc__
    assert "check=True" in cube.ppa.transform.__doc__ and maps.transform.__doc__.strip().splitlines()[0] in cube.ppa.transform.__doc__
    assert "held_out" in cube.ppa.information_report.__doc__ and len(cube.ppa.evaluate.__doc__.splitlines()) > 5


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


def test_every_api_page_has_parameters_and_returns():
    import inspect

    lacking = []
    for name, obj in _api_objects():
        doc = inspect.getdoc(obj) or ""
        try:
            takes = [p for p in inspect.signature(obj).parameters if p not in ("self", "cls")]
        except (TypeError, ValueError):
            takes = []
        missing = [section for section, needed in (("Parameters", bool(takes)), ("Returns", not inspect.isclass(obj)))
                   if needed and f"{section}\n{'-' * len(section)}" not in doc]
        if missing:
            lacking.append(f"{name}: {', '.join(missing)}")
    assert not lacking, "API pages without numpydoc sections:\n" + "\n".join(lacking)
    assert len(list(_api_objects())) > 60
