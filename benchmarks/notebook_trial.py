"""A newcomer's notebook trial of README.md and every docs/*.md page with python code blocks.

Each page becomes one notebook, one cell per python block a reader sees (the ``<!-- invisible-code-block:
python -->`` assertions are left out: a reader does not paste them), executed by nbclient in a fresh Jupyter
kernel of the running python, TWICE in the same scratch folder (the second run finds the files the first
one wrote, as a reader re-running a notebook does). Checked in each run:

- no cell errors;
- a cell whose last statement is a call to ``plot_*`` shows exactly one ``image/png`` (not only
  ``<Figure size ...>``, and not twice through pyplot's inline backend);
- a cell whose last statement is a call to ``summary_table`` shows ``text/markdown`` or ``text/html``;
- a cell whose value is a model (its text starts with ``PPA``) shows ``text/html``;
- a bare name (a model) before the cell's last statement, or a ``plot_*`` / ``summary_table`` call that is
  not the cell's last value (printed, saved, assigned and left), is reported: a notebook shows only a
  cell's last value (``hidden_values`` of tests/test_doc_snippets.py, which holds every page to it);
- any other cell value that prints as ``<Figure size ...>`` without an image is reported.

How to run it, as a newcomer would (a clean clone and a fresh venv; pip takes minutes)::

    git clone /work/main /tmp/trial_clone && python3 -m venv /tmp/trial_venv
    /tmp/trial_venv/bin/python -m pip install "/tmp/trial_clone[test]" nbclient ipykernel nbformat
    /tmp/trial_venv/bin/python /tmp/trial_clone/benchmarks/notebook_trial.py [--scratch DIR] [PAGE ...]

Last, a notebook of every display helper as a cell's value (``HELPER_CELLS``: the model, its PCA,
``plot_scree``, ``plot_principal_curves``, ``summary_table``, ``plot_report``) runs the same way.

The kernel is ``python3`` of the running interpreter (ipykernel's native kernel spec); the script checks
that it resolves to this venv. It prints one line per page and run, and exits 1 if anything failed.
"""

from __future__ import annotations

import argparse
import ast
import re
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.test_doc_snippets import hidden_values  # noqa: E402  (the same rule the tests hold the pages to)
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?:\{code-block\}[ \t]*|\{code\}[ \t]*)?python[ \t]*\n(?P<body>.*?)^(?P=indent)(?P=fence)[ \t]*$", re.MULTILINE | re.DOTALL)
INVISIBLE = re.compile(r"<!--\s*invisible-code-block:\s*python.*?-->", re.DOTALL)
SKIP_NEXT = re.compile(r"<!--\s*skip:\s*next")
FIGURE_CALL = re.compile(r"^plot_")
TABLE_CALL = {"summary_table"}


def pages() -> list[Path]:
    found = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [page for page in found if FENCE.search(INVISIBLE.sub("", page.read_text()))]


def visible_blocks(text: str) -> list[str]:
    """The python blocks a reader sees, in order; a block after ``<!-- skip: next ... -->`` is left out."""
    text = INVISIBLE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    blocks, last_end = [], 0
    for match in FENCE.finditer(text):
        between = text[last_end : match.start()]
        last_end = match.end()
        if SKIP_NEXT.search(between.strip().splitlines()[-1] if between.strip() else ""):
            continue
        body = match.group("body")
        indent = match.group("indent")
        blocks.append("\n".join(line[len(indent) :] if line.startswith(indent) else line for line in body.splitlines()))
    return blocks


def last_expression(source: str) -> tuple[str, str] | None:
    """('call', name) or ('name', name) for the cell's last statement when it is an expression."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return None
    value = tree.body[-1].value
    if isinstance(value, ast.Call):
        func = value.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        return ("call", name)
    if isinstance(value, ast.Name):
        return ("name", value.id)
    return None


def _is_table(output) -> bool:
    plain = str(output.data.get("text/plain", ""))
    if "image/png" in output.data or plain.lstrip().startswith(("PPA", "<xarray")):
        return False
    return "text/markdown" in output.data or "<table" in str(output.data.get("text/html", ""))


def check_cell(index: int, cell) -> tuple[list[str], int, int]:
    """(problems, figures shown, tables shown) for one executed cell."""
    problems: list[str] = [f"cell {index}: {text!r} is not the cell's last value: a notebook does not show it" for text in hidden_values(cell.source)]
    shown = [o for o in cell.outputs if o.output_type in ("execute_result", "display_data")]
    errors = [o for o in cell.outputs if o.output_type == "error"]
    for error in errors:
        problems.append(f"cell {index}: {error.ename}: {error.evalue}")
    images = sum("image/png" in o.data for o in shown)
    tables = sum(_is_table(o) for o in shown)
    kind = last_expression(cell.source)
    result = [o for o in shown if o.output_type == "execute_result"]
    plain = result[0].data.get("text/plain", "") if result else ""
    if kind and kind[0] == "call" and FIGURE_CALL.match(kind[1]) and images != 1:
        problems.append(f"cell {index}: {kind[1]}(...) shows {images} PNG images, text {[o.data.get('text/plain') for o in shown]}")
    if kind and kind[0] == "call" and kind[1] in TABLE_CALL and not (result and {"text/markdown", "text/html"} & set(result[0].data)):
        problems.append(f"cell {index}: {kind[1]}(...) shows no markdown/html, only {plain[:60]!r}")
    if plain.lstrip().startswith("PPA") and "text/html" not in result[0].data:
        problems.append(f"cell {index}: a model shows no text/html")
    if plain.startswith("<Figure size") and "image/png" not in result[0].data:
        problems.append(f"cell {index}: a figure shown as {plain!r} without an image")
    if images > 1:
        problems.append(f"cell {index}: {images} PNG images (a figure drawn twice?)")
    return problems, images, tables


#: every display helper as a cell's value, on the bundled Sat table: the ones no page shows as a cell's value
HELPER_CELLS = [
    "import ppa_xr\nfrom ppa_xr.datasets import load_table\n\nX = load_table(\"Sat\").data\nmodel = ppa_xr.PPA(degree=(1, 2), random_state=0).fit(X[:3000])",
    "model",
    "model.pca_",
    "ppa_xr.view.plot_scree(model)",
    "ppa_xr.geometry.plot_principal_curves(model, X[:500], pairs=[(0, 1), (1, 2)])",
    "report = ppa_xr.information.information_report(X[3000:], model, n_components=2).compute()\nppa_xr.information.summary_table(report)",
    "ppa_xr.information.plot_report(report)",
]


def run_page(page: Path, scratch: Path, runs: int = 2) -> list[dict]:
    """Run ``page`` (a markdown page, or ``helpers`` for :data:`HELPER_CELLS`) ``runs`` times in one folder."""
    import nbclient
    import nbformat

    sources = HELPER_CELLS if page.name == "helpers" else visible_blocks(page.read_text())
    folder = scratch / page.stem
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    results = []
    for run in range(1, runs + 1):
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in sources])
        start = time.perf_counter()
        client = nbclient.NotebookClient(notebook, timeout=900, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(folder)}})
        client.execute()
        problems, figures, tables = [], 0, 0
        for index, cell in enumerate(notebook.cells, 1):
            cell_problems, images, shown_tables = check_cell(index, cell)
            problems += cell_problems
            figures += images
            tables += shown_tables
        nbformat.write(notebook, folder / f"run{run}.ipynb")
        results.append({"page": page.relative_to(ROOT).as_posix(), "run": run, "cells": len(sources), "errors": sum(any(o.output_type == "error" for o in c.outputs) for c in notebook.cells), "figures": figures, "tables": tables, "problems": problems, "seconds": time.perf_counter() - start})
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", help="pages relative to the repository root, or helpers (default: all with python blocks, then helpers)")
    parser.add_argument("--scratch", default="/tmp/notebook_trial", help="folder for the notebooks' working directories")
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args()
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec("python3")
    executable = spec.argv[0]
    if executable not in ("python", sys.executable) and Path(executable).resolve() != Path(sys.executable).resolve():
        print(f"the python3 kernel runs {executable}, not this interpreter {sys.executable}", file=sys.stderr)
        return 2
    chosen = [ROOT / page for page in args.pages] if args.pages else [*pages(), ROOT / "helpers"]
    failed = False
    for page in chosen:
        for result in run_page(page, Path(args.scratch), args.runs):
            failed |= bool(result["problems"])
            print(f"{result['page']:28s} run {result['run']}: cells {result['cells']:2d}, errors {result['errors']}, figures {result['figures']}, tables {result['tables']}, {result['seconds']:.0f} s", flush=True)
            for problem in result["problems"]:
                print(f"    {problem}", flush=True)
    return int(failed)


if __name__ == "__main__":
    sys.exit(main())
