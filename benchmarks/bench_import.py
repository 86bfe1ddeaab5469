"""What ``import ppa_xr`` costs a fresh process, two copies of the package side by side (interleaved runs).

    python benchmarks/bench_import.py BEFORE_ROOT AFTER_ROOT [--runs 7] [--stale CACHE_FILES_DIR]

Each root holds a ``ppa_xr`` folder (a checkout, or ``git archive lead ppa_xr | tar -x -C BEFORE_ROOT``). Each copy
gets its own ``NUMBA_CACHE_DIR``, warmed first by one session that fits, saves and transforms a small cube (the
loops it compiles are cached), so every timed run starts with a warm numba cache. ``--stale`` copies numba cache
files of earlier versions of ``compiled.py`` (a long-used install's ``__pycache__``) beside the warm ones.

Three cases, each a fresh interpreter, the copies in turn round after round:

* ``python -c "import ppa_xr"``: the wall time of the process (its start included);
* ``worker``: the time of ``import ppa_xr`` alone in a process that imported distributed, xarray and dask.array
  first, as a dask worker has when it unpickles its first task of ppa_xr;
* ``import + transform + fill``: the process's wall time to import, load a saved model, transform a 4 x 64 x 64 cube
  and fill its gaps (the fill's compiled loops loaded from the cache at their first call).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_WARM = """
import numpy as np, xarray as xr, ppa_xr
rng = np.random.default_rng(0)
t = rng.uniform(-1, 1, (4096,))
X = np.stack([t, t**2, t**3 + 0.1 * rng.normal(size=t.size), 0.2 * rng.normal(size=t.size)], axis=0).reshape(4, 64, 64)
da = xr.DataArray(X, dims=("band", "y", "x")).chunk({{"y": 32}})
model = da.ppa.fit(n_components=3, random_state=0)
model.save({model!r})
da.ppa.transform(model).compute()
da.where(np.abs(da) < 0.9).ppa.fill(model).compute()
"""

_WORKER = """
import time, distributed, xarray, dask.array
start = time.perf_counter()
import ppa_xr
print(time.perf_counter() - start)
"""

_TRANSFORM = """
import numpy as np, xarray as xr, ppa_xr
rng = np.random.default_rng(1)
da = xr.DataArray(rng.normal(size=(4, 64, 64)), dims=("band", "y", "x")).chunk({{"y": 32}})
model = ppa_xr.load_model({model!r})
da.ppa.transform(model).compute()
da.where(np.abs(da) < 2).ppa.fill(model).compute()
"""


def _run(root: Path, cache: Path, code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "NUMBA_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, env=env, check=True)


def _timed(root: Path, cache: Path, code: str, cwd: Path, inside: bool) -> float:
    """The wall time of a fresh interpreter running ``code`` (``inside``: the time it prints)."""
    start = time.perf_counter()
    run = _run(root, cache, code, cwd)
    return float(run.stdout.strip().splitlines()[-1]) if inside else time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--stale", type=Path, help="a folder of numba cache files (compiled.*.nbi/.nbc) of earlier versions")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="ppa_xr-import-bench-"))
    roots = {"before": args.before.resolve(), "after": args.after.resolve()}
    caches = {name: scratch / f"cache-{name}" for name in roots}
    models = {name: str(scratch / f"model-{name}.nc") for name in roots}
    for name, root in roots.items():
        _run(root, caches[name], _WARM.format(model=models[name]), scratch)
        if args.stale is not None:
            (folder,) = caches[name].glob("core_*")
            for path in args.stale.glob("compiled.*.nb[ic]"):
                if not (folder / path.name).exists():
                    shutil.copy(path, folder / path.name)
        files = sum(1 for _ in caches[name].rglob("*.nb[ic]"))
        size = sum(p.stat().st_size for p in caches[name].rglob("*.nb[ic]")) / 2**20
        print(f"{name}: {root / 'ppa_xr'}, numba cache {files} files, {size:.1f} MiB")
    cases = {"python -c 'import ppa_xr'": ("import ppa_xr", False), "worker: import ppa_xr after distributed": (_WORKER, True),
             "import + load_model + transform + fill": (None, False)}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.runs):
        for case, (code, inside) in cases.items():
            for name, root in roots.items():
                source = _TRANSFORM.format(model=models[name]) if code is None else code
                times.setdefault((case, name), []).append(_timed(root, caches[name], source, scratch, inside))
    print(f"{args.runs} runs of each, interleaved; load average {os.getloadavg()[0]:.2f} at the end; seconds")
    for case in cases:
        for name in roots:
            t = times[(case, name)]
            print(f"{case:42s} {name:6s} best {min(t):.3f}  median {statistics.median(t):.3f}  runs {', '.join(f'{x:.3f}' for x in t)}")
        print(f"{'':42s} after/before: best {min(times[(case, 'after')]) / min(times[(case, 'before')]):.2f}, median "
              f"{statistics.median(times[(case, 'after')]) / statistics.median(times[(case, 'before')]):.2f}")
    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
