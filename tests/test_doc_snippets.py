"""Every Python code block of README.md and docs/*.md runs, on the bundled data.

The blocks are found and evaluated by Sybil's Markdown (README) and MyST (docs/) parsers. A page's blocks
run in order in one namespace, as a reader pastes them into one notebook, in a fresh temporary working
directory (the blocks write models and rasters next to themselves). What a block shows is checked by an
assertion in an invisible block after it, which GitHub and the site do not render::

    <!-- invisible-code-block: python
    assert model.n_features_in_ == 10
    -->

A block that cannot run here (it needs the reader's own files) is marked, with the reason, by::

    <!-- skip: next "reason" -->

Such blocks are the exception: each one is listed in ``NOT_RUN`` below, so a new one fails until it is
listed, and a block that is no longer marked fails until it is taken off.
"""

from __future__ import annotations

import ast
import re
import unittest
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.example import NotEvaluated
from sybil.parsers.markdown import PythonCodeBlockParser as MarkdownPython
from sybil.parsers.markdown import SkipParser as MarkdownSkip
from sybil.parsers.myst import PythonCodeBlockParser as MystPython
from sybil.parsers.myst import SkipParser as MystSkip

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]

#: (page, line of the block's fence) -> the reason its marker gives: the blocks that do not run. None today:
#: every block runs on the bundled data (a block on "your own scene" names the bundled one and says how to
#: open yours in a comment).
NOT_RUN: dict[tuple[str, int], str] = {}

#: a block that writes a file: a reader re-running its cell must not be refused (``overwrite=True``, ``mode="w"``)
_WRITES = re.compile(r"\.save\(|to_raster\(|write_cube\(|to_zarr\(|to_netcdf\(|savefig\(")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[ \t]*(\{code-block\}[ \t]*|\{code\}[ \t]*)?python\b(?P<rest>[^\n]*)$", re.MULTILINE)


def _parsers(page: str) -> list:
    if page.startswith("docs/"):
        return [MystPython(), MystSkip()]
    return [MarkdownPython(), MarkdownSkip()]


def _line(document, example) -> int:
    return document.text.count("\n", 0, example.region.start) + 1


@pytest.mark.parametrize("page", PAGES)
def test_page_code_blocks_run(page, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    text = (ROOT / page).read_text()
    # a fence whose info string says more than "python" would be left out silently: none may
    assert not [m.group(0) for m in _FENCE.finditer(text) if m.group("rest").strip()], f"{page}: a python block with an info string"
    monkeypatch.chdir(tmp_path)
    document = Sybil(_parsers(page)).parse(ROOT / page)
    ran, skipped, writers = 0, {}, []
    for example in document.examples():
        line = _line(document, example)
        try:
            example.evaluate()
        except NotEvaluated:
            pass
        except unittest.SkipTest as skip:
            skipped[(page, line)] = str(skip)
        except Exception as error:
            raise AssertionError(f"{page}, the block at line {line} failed: {type(error).__name__}: {error}") from error
        else:
            ran += example.region.evaluator is not None and "skip" not in type(example.region.evaluator).__name__.lower()
            writers += [example] if isinstance(example.parsed, str) and _WRITES.search(example.parsed) else []
    for example in writers:  # run again, as a reader re-runs a notebook's cells: the files they wrote exist now
        try:
            example.evaluate()
        except Exception as error:
            raise AssertionError(f"{page}, the block at line {_line(document, example)} fails when run again: {type(error).__name__}: {error}") from error
    assert skipped == {key: reason for key, reason in NOT_RUN.items() if key[0] == page}
    blocks = len([m for m in _FENCE.finditer(text)])
    assert not blocks or ran >= blocks - len(skipped), f"{page}: {ran} of {blocks} python blocks ran, {len(skipped)} skipped"


def test_most_blocks_run():
    """Blocks that need the reader's own files are the exception, not the rule."""
    total = sum(len(list(_FENCE.finditer((ROOT / page).read_text()))) for page in PAGES)
    assert total >= 15 and len(NOT_RUN) <= total // 5, (total, NOT_RUN)


#: a call whose value a page shows as a figure or a table
_SHOWN_CALL = re.compile(r"^(plot_\w*|summary_table)$")


def _called(node: ast.AST) -> str:
    func = node.func if isinstance(node, ast.Call) else None
    return (func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")) if func is not None else ""


def hidden_values(source: str) -> list[str]:
    """What a block promises to show that a notebook cell of it never shows: a bare name (a model) before the
    last statement, or a ``plot_*`` / ``summary_table`` call that is neither the last statement's value nor
    assigned to the name that is (printed, saved, or followed by more statements). A notebook shows only a
    cell's last value."""
    body = ast.parse(source).body
    last = body[-1].value if body and isinstance(body[-1], ast.Expr) else None
    shown = {id(last)} | {id(s.value) for s in body if isinstance(s, ast.Assign) and isinstance(last, ast.Name) and [getattr(t, "id", None) for t in s.targets] == [last.id]}
    hidden = [ast.get_source_segment(source, s.value) or "?" for s in body[:-1] if isinstance(s, ast.Expr) and isinstance(s.value, ast.Name)]
    calls = [node for node in ast.walk(ast.Module(body=body, type_ignores=[])) if _SHOWN_CALL.match(_called(node))]
    return hidden + [ast.get_source_segment(source, node) or "?" for node in calls if id(node) not in shown]


@pytest.mark.parametrize("page", PAGES)
def test_each_model_figure_and_table_is_a_blocks_last_value(page):
    """Pasted into a notebook, a block shows its last value only: a model, figure or table must end its block
    (``benchmarks/notebook_trial.py`` runs every page in Jupyter and checks what each cell shows)."""
    document = Sybil(_parsers(page)).parse(ROOT / page)
    visible = [e for e in document.examples() if isinstance(e.parsed, str) and document.text[e.region.start : e.region.start + 3] in ("```", "~~~")]
    hidden = {_line(document, e): hidden_values(e.parsed) for e in visible}
    assert not {line: values for line, values in hidden.items() if values}, f"{page}: values a notebook does not show (block line: values)"
