"""Print pip pins of the lowest versions pyproject.toml allows: each ``name>=X`` of ``[project]``'s
dependencies as ``name==X`` (extras kept), one a line, for ``pip install -r``. The CI's second step
installs them in a fresh environment and runs ``.ci/smoke.py``, so the bounds are the tested ones."""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

_BOUND = re.compile(r"^\s*([A-Za-z0-9_.\-]+(?:\[[^\]]*\])?)\s*>=\s*([0-9][0-9A-Za-z.]*)\s*$")


def pins(pyproject: Path) -> list[str]:
    """``name==X`` for each dependency of ``pyproject``; a dependency without a ``>=`` bound is an error."""
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    out = []
    for dep in deps:
        match = _BOUND.match(dep.split(";")[0])
        if match is None:
            raise SystemExit(f"{pyproject}: dependency {dep!r} has no single '>=' lower bound to pin")
        out.append(f"{match[1]}=={match[2]}")
    return out


if __name__ == "__main__":
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
    print("\n".join(pins(root / "pyproject.toml")))
