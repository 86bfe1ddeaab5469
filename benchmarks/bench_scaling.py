"""Scaling curves, PPA beside PCA through the same path on the same data:

* fit time against the sample size n (d = 36) and the band count d (n = 100,000),
  ppa_xr's ``PPA`` against scikit-learn's ``PCA()``;
* lazy transform throughput (pixels/s) against the chunk size, ppa_xr's
  ``.ppa.transform`` against a plain ``map_blocks`` projection (36 x 2048 x 2048
  float32 in memory, threaded scheduler);
(the out-of-core run is ``bench_xarray.py out-of-core``).

    python benchmarks/bench_scaling.py [--quick]
    python benchmarks/bench_scaling.py --plot-only    # redraw the figure from the recorded JSON
    python benchmarks/bench_scaling.py --fit-only     # rerun the fit curves, keep the other recorded results

Writes ``benchmarks/results/scaling.json`` and ``docs/img/scaling.png``, and
prints the tables. The machine and its BLAS threads are printed; PCA uses
numpy's default threads for the fit and one thread per dask task for the
projection.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import dask
import numpy as np
from bench_fit import curved_cube
from common import best_time, interleaved, machine
from bench_xarray import pca_projection, synthetic_cube
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits

import ppa_xr  # noqa: F401
from ppa_xr import PPA

ROOT = Path(__file__).resolve().parent.parent


def fit_curve(sizes: list[tuple[int, int]], repeat: int) -> list[dict]:
    rows = []
    for n, d in sizes:
        X = curved_cube(n, d)
        t_pca, _ = best_time(lambda X=X: PCA().fit(X), repeat)
        t_ppa, model = best_time(lambda X=X: PPA(random_state=0).fit(X), repeat)
        rows.append({"n": n, "d": d, "ppa_s": t_ppa, "pca_s": t_pca, "curved": int(np.sum(model.degrees_ > 1))})
        print(f"| {n} | {d} | {t_ppa:.2f} | {t_pca:.3f} | {t_ppa / t_pca:.1f}x | {rows[-1]['curved']} |", flush=True)
    return rows


def _discard(arr) -> None:
    """Compute every chunk and keep nothing (a one-element result per chunk)."""
    arr.data.map_blocks(lambda b: np.zeros((1,) * b.ndim, b.dtype), chunks=(1,) * arr.ndim).sum().compute()


def chunk_curve(size: int, chunks: list[int], repeat: int) -> list[dict]:
    rows = []
    model = None
    for chunk in chunks:
        cube = synthetic_cube(size, chunk).persist()
        model = model or cube.ppa.fit(n_samples=200_000, random_state=0)
        with threadpool_limits(limits=1, user_api="blas"):
            times = interleaved({
                "pca": lambda cube=cube: _discard(pca_projection(cube, model.pca_)),
                "ppa": lambda cube=cube: _discard(cube.ppa.transform(model)),
                "checked": lambda cube=cube: _discard(cube.ppa.transform(model, check=True)),  # the check first
            }, repeat)
        t_pca, t_ppa, t_checked = (min(times[key]) for key in ("pca", "ppa", "checked"))
        pixels = size * size
        rows.append({"chunk": chunk, "ppa_px_s": pixels / t_ppa, "pca_px_s": pixels / t_pca, "checked_px_s": pixels / t_checked})
        print(f"| {chunk} x {chunk} | {pixels / t_ppa / 1e6:.1f} | {pixels / t_pca / 1e6:.1f} | {t_ppa / t_pca:.2f} "
              f"| {pixels / t_checked / 1e6:.1f} |", flush=True)
        del cube
    return rows


def plot(results: dict, path: Path) -> None:
    import matplotlib.pyplot as plt

    panels = 3
    fig, axes = plt.subplots(1, panels, figsize=(4.2 * panels, 3.6), constrained_layout=True)
    for ax, key, var, label in ((axes[0], "fit_n", "n", "sample size n (d = 36)"), (axes[1], "fit_d", "d", "bands d (n = 100,000)")):
        rows = results[key]
        x = [r[var] for r in rows]
        ax.loglog(x, [r["ppa_s"] for r in rows], "o-", label="PPA fit (ppa_xr)")
        ax.loglog(x, [r["pca_s"] for r in rows], "s--", label="PCA() fit (scikit-learn)")
        ax.set(xlabel=label, ylabel="fit time (s)", title=f"Fit time against {var}")
        ax.legend(fontsize=8)
    rows = results["chunks"]
    x = [r["chunk"] for r in rows]
    axes[2].semilogx(x, [r["ppa_px_s"] / 1e6 for r in rows], "o-", label="PPA .ppa.transform")
    axes[2].semilogx(x, [r["pca_px_s"] / 1e6 for r in rows], "s--", label="PCA map_blocks projection")
    axes[2].set(xlabel="chunk side (pixels)", ylabel="throughput (Mpixel/s)", title="Lazy transform, 36 bands", ylim=(0, None))
    axes[2].set_xticks(x, [str(c) for c in x])
    axes[2].minorticks_off()
    axes[2].legend(fontsize=8)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, one repeat (a smoke run)")
    parser.add_argument("--plot-only", action="store_true", help="redraw the figure from the recorded JSON")
    parser.add_argument("--fit-only", action="store_true", help="rerun the fit curves only, keeping the recorded others")
    args = parser.parse_args()
    name = "scaling_quick" if args.quick else "scaling"
    record, figure = ROOT / "benchmarks" / "results" / f"{name}.json", ROOT / "docs" / "img" / f"{name}.png"
    if args.plot_only:
        plot(json.loads(record.read_text()), figure)
        return
    repeat = 1 if args.quick else 3
    ns = [10_000, 30_000, 100_000] if args.quick else [10_000, 30_000, 100_000, 300_000, 1_000_000]
    ds = [10, 32, 64] if args.quick else [10, 32, 64, 128, 256]
    print(machine())
    print("| n | d | PPA fit (s) | PCA() fit (s) | ratio | curved steps |\n|---|---|---|---|---|---|")
    results = json.loads(record.read_text()) if args.fit_only else {}
    results |= {"fit_n": fit_curve([(n, 36) for n in ns], repeat), "fit_d": fit_curve([(100_000, d) for d in ds], repeat)}
    if args.fit_only:
        record.write_text(json.dumps(results, indent=1))
        plot(results, figure)
        return
    print("\n| chunks | PPA (Mpx/s) | PCA projection (Mpx/s) | time ratio | PPA with the shift check (Mpx/s) |\n|---|---|---|---|---|")
    with dask.config.set(scheduler="threads"):
        results["chunks"] = chunk_curve(1024 if args.quick else 2048, [128, 256, 512, 1024], repeat)
    record.parent.mkdir(exist_ok=True)
    record.write_text(json.dumps(results, indent=1))
    plot(results, figure)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"total {time.perf_counter() - start:.0f} s")
