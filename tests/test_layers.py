"""The package's structure: folders are layers, imports point down, no circles (through package ``__init__``
files too), the core needs numpy, scipy and numba alone, every function stays simple, the types check, and what is
taken from scikit-learn's private parts works with the installed version."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ppa_xr"
#: each layer, and the layers it may import (its own included); the top is every module outside these folders
#: modules that import nothing of ppa_xr, which every layer may use
LEAVES = ("ppa_xr._version", "ppa_xr._atomic")
LAYERS = {"core": {"core"}, "model": {"core", "model"}, "cube": {"core", "model", "cube"}, "datasets": {"core", "datasets"}}


def _modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imported(module: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules ``module`` imports, at any depth of its code: ``from .x import y`` names module
    ``x`` (or ``x.y`` where that is a module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        else:
            continue
        found |= {name for name in names if name in known}
    return found


def _edges() -> dict[str, set[str]]:
    """Module -> the modules it runs when imported: each one it imports, and every package on the way to
    that one which is not a package of the importer itself (those are being imported already)."""
    modules = _modules()
    known = set(modules)
    edges = {}
    for module, path in modules.items():
        own = {".".join(module.split(".")[:i]) for i in range(1, module.count(".") + 1)}
        targets = set()
        for name in _imported(module, path, known):
            parts = name.split(".")
            targets |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)} - own - {module}
        edges[module] = targets
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on.add(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_no_import_circles_not_even_through_package_inits():
    assert _cycles(_edges()) == []


def test_the_checker_finds_a_circle_through_an_init():
    edges = {"p": {"p.a"}, "p.a": {"p.b"}, "p.b": set(), "q": {"q.c"}, "q.c": {"p", "p.b"}}
    assert _cycles(edges) == []
    edges["p.b"] = {"q.c"}  # p.b -> q -> q.c -> p (its __init__ runs p.a -> p.b)
    edges["p.b"] |= {"q"}
    assert _cycles(edges)


def test_layers_import_only_downwards():
    """A module of a layer imports its own layer and those below; the leaves (the version, atomic file writes), which
    import nothing of ppa_xr, anyone may use."""
    wrong = [f"{module} -> {target}" for module, targets in _edges().items() if (layer := _layer(module))
             for target in targets if target not in LEAVES and _layer(target) not in LAYERS[layer]]
    assert wrong == []
    assert not any(target.startswith("ppa_xr") for leaf in LEAVES for target in _edges().get(leaf, ()))


def test_core_imports_no_xarray_dask_or_pandas():
    banned = {"xarray", "dask", "pandas", "rioxarray", "sklearn", "distributed", "zarr", "h5py"}
    found = []
    for path in sorted((PACKAGE / "core").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            found += [f"{path.name}: {name}" for name in names if name.split(".")[0] in banned]
    assert found == []


def test_core_is_importable_with_numpy_scipy_and_numba_alone():
    """Every core module imports in a process where every other third-party package is refused (numba compiles
    the per-pixel loops of :mod:`ppa_xr.core.compiled`)."""
    script = f"""
import importlib, importlib.abc, pkgutil, sys, types
REFUSED = {{"xarray", "dask", "pandas", "sklearn", "rioxarray", "rasterio", "zarr", "h5py", "h5netcdf", "filelock", "tqdm",
           "threadpoolctl", "distributed", "matplotlib", "psutil"}}
class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in REFUSED:
            raise ImportError("refused: " + name)
sys.meta_path.insert(0, Refuse())
package = types.ModuleType("ppa_xr")
package.__path__ = [{str(PACKAGE)!r}]  # the package without its __init__, which loads every layer
sys.modules["ppa_xr"] = package
core = importlib.import_module("ppa_xr.core")
for info in pkgutil.iter_modules(core.__path__):
    importlib.import_module("ppa_xr.core." + info.name)
print(sorted(name for name in sys.modules if name.startswith("ppa_xr.")))
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    loaded = eval(run.stdout)
    assert "ppa_xr.core.ppa" in loaded and all(name.startswith("ppa_xr.core") for name in loaded)


def test_the_estimator_is_imported_at_its_first_use():
    """``import ppa_xr`` (what a dask worker runs to unpickle a task of the cube layer) imports neither scikit-learn nor
    the estimator (0.4 s of a 1.1 s import), nor scipy.ndimage (the fit's); ``ppa_xr.PPA`` and ``load_model`` are
    there all the same, from the package and from ``ppa_xr.model``."""
    script = """
import sys, ppa_xr
print(sorted(m for m in ("sklearn", "ppa_xr.model.estimator", "scipy.ndimage", "matplotlib") if m in sys.modules))
from ppa_xr import PPA, load_model
from ppa_xr.model import PPA as same, load_model as same_load
print(PPA is same is ppa_xr.PPA, load_model is same_load, {"PPA", "load_model"} <= set(dir(ppa_xr)), PPA.__module__, "sklearn" in sys.modules)
"""
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.split("\n")[:2] == ["[]", "True True True ppa_xr.model.estimator True"], run.stdout
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        __import__("ppa_xr").nothing


#: the most independent paths a function may have (McCabe's cyclomatic complexity, as radon counts it)
MAX_COMPLEXITY = 15


def test_no_function_is_too_complex():
    from radon.complexity import cc_visit

    above = [f"{path.relative_to(ROOT)}:{block.lineno} {block.fullname} ({block.complexity})"
             for path in sorted(PACKAGE.rglob("*.py")) for block in cc_visit(path.read_text()) if block.complexity > MAX_COMPLEXITY]
    assert above == []


def test_types_check():
    run = subprocess.run([sys.executable, "-m", "mypy", "ppa_xr"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert run.returncode == 0, run.stdout[-5000:]


def test_the_scikit_learn_parts_ppa_xr_uses_exist_in_the_installed_version(tmp_path):
    from sklearn.utils.estimator_checks import check_estimator  # noqa: F401

    from ppa_xr import PPA
    from ppa_xr.model import _sklearn

    model = PPA(degree=1).fit([[0.0, 1.0], [1.0, 0.5], [2.0, 2.5], [3.0, 1.0]])
    widget = _sklearn.html_widget(model)
    assert "<div" in widget and "degree" in widget
    assert list(model.set_output(transform="default").get_feature_names_out()) == ["ppa0", "ppa1"]
    _sklearn.set_outputs(model, 1)
    assert list(model.get_feature_names_out()) == ["ppa0"]
    assert "PPA, fitted" in model._repr_html_()


@pytest.mark.parametrize("name", sorted(n for n, m in vars(__import__("ppa_xr").PPA).items() if not n.startswith("_")
                                         and (isinstance(m, (property, classmethod, staticmethod)) or callable(m) and hasattr(m, "__code__"))))
def test_every_public_method_of_ppa_has_numpydoc_sections(name):
    import inspect

    from ppa_xr import PPA

    member = inspect.getattr_static(PPA, name)
    doc = inspect.getdoc(getattr(PPA, name)) or ""
    assert doc, f"{name} has no docstring"
    if isinstance(member, property):
        return  # a property's docstring says what it is
    function = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
    takes = [p for p in inspect.signature(function).parameters if p not in ("self", "cls")]
    if takes:
        assert "Parameters\n----------" in doc, f"{name}: no Parameters section"
    assert "Returns\n-------" in doc, f"{name}: no Returns section"
