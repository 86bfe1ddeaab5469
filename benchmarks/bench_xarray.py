"""The lazy xarray/dask path against a PCA projection through the same path, same cube, same chunks.

    python benchmarks/bench_xarray.py lazy        # (a) 36-band float32 4096 x 4096, 1024 x 1024 chunks
    python benchmarks/bench_xarray.py lazy --degree 5   # (a) with a degree-5 polynomial on every step
    python benchmarks/bench_xarray.py out-of-core # (b) > 8 GB zarr cube -> zarr, peak RSS watched
    python benchmarks/bench_xarray.py out-of-core --schedulers threads cluster  # (b) also on a 2-worker LocalCluster

Both print the machine, every run's wall time and the ratios to a baseline:
the PCA of the same sample (``model.pca_``) applied as a plain
``dask.array.map_blocks`` projection ``V (x - mean)`` on the band-first
chunks (one GEMM per chunk), the cheapest lazy PCA there is. Every BLAS is
held at one thread per task on both sides (on a LocalCluster the workers
start with one BLAS thread), and the runs are interleaved.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import dask
import dask.array as dsa
import numpy as np
import xarray as xr
from common import interleaved, machine, ratio, runs
from threadpoolctl import threadpool_limits

import ppa_xr  # noqa: F401
from ppa_xr import PPA


def curved_block(block_info=None, bands: int = 36, seed: int = 0) -> np.ndarray:
    """A chunk of a synthetic curved 36-band cube: bands are smooth nonlinear functions of two latents."""
    loc = block_info[None]["array-location"]
    shape = tuple(stop - start for start, stop in loc[1:])
    rng = np.random.default_rng([seed, loc[1][0], loc[2][0]])
    t, s = rng.uniform(-1, 1, (2,) + shape).astype(np.float32)
    freq = np.linspace(0.5, 3, bands, dtype=np.float32)[:, None, None]
    out = np.sin(freq * t) + 0.5 * (freq * s) ** 2 * t + 0.05 * rng.standard_normal((bands,) + shape, dtype=np.float32)
    return (1000 + 500 * out).astype(np.float32)


def synthetic_cube(size: int, chunk: int, bands: int = 36) -> xr.DataArray:
    data = dsa.map_blocks(curved_block, chunks=((bands,), (chunk,) * (size // chunk), (chunk,) * (size // chunk)), dtype=np.float32, bands=bands)
    return xr.DataArray(data, dims=("band", "y", "x"), coords={"band": [f"b{i}" for i in range(bands)]}, name="cube")


def _project(block: np.ndarray, rotation: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """``V x - V mean`` on a band-first chunk: one GEMM, no copy of the input."""
    bands = block.shape[0]
    return (rotation @ block.reshape(bands, -1) - offset).reshape((rotation.shape[0],) + block.shape[1:])


def pca_projection(cube: xr.DataArray, pca: PPA) -> xr.DataArray:
    """The baseline: a plain ``map_blocks`` projection on the PCA of the same sample."""
    rotation = pca.components_.astype(np.float32)
    data = cube.data.map_blocks(_project, rotation, (rotation @ pca.mean_.astype(np.float32))[:, None], dtype=np.float32)
    return xr.DataArray(data, dims=("component", "y", "x"))


def pca_inverse(scores: xr.DataArray, pca: PPA) -> xr.DataArray:
    rotation = pca.components_.astype(np.float32)
    data = scores.data.map_blocks(_project, rotation.T, -pca.mean_.astype(np.float32)[:, None], dtype=np.float32)
    return xr.DataArray(data, dims=("band", "y", "x"))


def lazy(args: argparse.Namespace) -> None:
    cube = synthetic_cube(args.size, args.chunk).persist()  # in memory, so every path reads the same chunks
    degree = args.degree[0] if len(args.degree) == 1 else tuple(args.degree)  # 5: a polynomial on every step, the worst case
    ppa = cube.ppa.fit(n_samples=200_000, random_state=0, degree=degree)
    straight = cube.ppa.fit(n_samples=200_000, random_state=0, degree=1)
    pca = ppa.pca_
    print(machine())
    print(f"cube {dict(cube.sizes)} float32 ({cube.nbytes / 2**30:.1f} GiB), chunks {cube.data.chunksize}; PPA degrees {ppa.degrees_.tolist()}")
    print("baseline: map_blocks projection V (x - mean) with numpy's BLAS held at 1 thread per dask task (2 tasks at once)")
    s_ppa, s_pca = cube.ppa.transform(ppa).persist(), pca_projection(cube, pca).persist()
    store = lambda arr: arr.data.map_blocks(lambda b: np.zeros((1,) * b.ndim), chunks=(1,) * arr.ndim).sum().compute()  # noqa: E731
    with threadpool_limits(limits=1, user_api="blas"):
        times = interleaved({
            "PCA projection (map_blocks baseline)": lambda: store(pca_projection(cube, pca)),
            "PPA transform (ppa_xr)": lambda: store(cube.ppa.transform(ppa, check=False)),
            "PPA degree=1, i.e. PCA (ppa_xr)": lambda: store(cube.ppa.transform(straight, check=False)),
            "PCA inverse (map_blocks baseline)": lambda: store(pca_inverse(s_pca, pca)),
            "PPA inverse (ppa_xr)": lambda: store(s_ppa.ppa.inverse_transform(ppa)),
        }, args.repeat)
    print("| case | seconds of each interleaved run | ratio to its baseline: best (worst round) |\n|---|---|---|")
    for label, t in times.items():
        base = times["PCA inverse (map_blocks baseline)" if "inverse" in label else "PCA projection (map_blocks baseline)"]
        print(f"| {label} | {runs(t)} | {ratio(t, base)} |")


def _peak_rss_of(cmd: list[str]) -> tuple[int, float]:
    """Run ``cmd`` and sample the resident memory of it and its children every 50 ms."""
    import psutil

    proc = subprocess.Popen(cmd)
    ps, peak = psutil.Process(proc.pid), 0
    while proc.poll() is None:
        try:
            rss = ps.memory_info().rss + sum(c.memory_info().rss for c in ps.children(recursive=True))
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.05)
    return proc.returncode, peak / 2**30


def out_of_core(args: argparse.Namespace) -> dict[tuple[str, str], dict[str, float]]:
    """Times and peak RSS per (``ppa``/``pca``, scheduler)."""
    work = args.workdir or tempfile.mkdtemp(prefix="ppa_xr_bench_")
    src, dst, model = os.path.join(work, "cube.zarr"), os.path.join(work, "out.zarr"), os.path.join(work, "model.nc")
    try:
        cube = synthetic_cube(args.size, args.chunk)
        print(machine())
        print(f"writing {cube.nbytes / 2**30:.2f} GiB input zarr ({dict(cube.sizes)}, chunks {cube.data.chunksize}) to {work}", flush=True)
        start = time.perf_counter()
        cube.to_dataset().to_zarr(src, mode="w", encoding={"cube": {"compressors": None}}, consolidated=False)
        print(f"  written in {time.perf_counter() - start:.1f} s", flush=True)
        print("| scheduler | PPA transform (s) | PCA projection (s) | PPA / PCA: best (worst round) | peak RSS PPA / PCA (GiB) |")
        print("|---|---|---|---|---|")
        results = {}
        for scheduler in args.schedulers:
            for round_ in range(args.repeat + 1):  # interleaved, each PPA run beside a PCA run; round 0 warms the page cache
                for kind in ("ppa", "pca"):
                    out = os.path.join(work, f"{kind}_{scheduler}.json")
                    rc, peak = _peak_rss_of([sys.executable, __file__, "_apply", src, dst, model, kind, scheduler, out])
                    assert rc == 0, f"{kind} run on {scheduler} failed"
                    with open(out) as f:
                        result = json.load(f) | {"peak_rss_gib": peak}
                    if round_:
                        results.setdefault((kind, scheduler), []).append(result)
            ppa, pca = results["ppa", scheduler], results["pca", scheduler]
            print(f"| {scheduler} | {runs([r['apply_s'] for r in ppa])} | {runs([r['apply_s'] for r in pca])} "
                  f"| {ratio([r['apply_s'] for r in ppa], [r['apply_s'] for r in pca])} "
                  f"| {max(r['peak_rss_gib'] for r in ppa):.2f} / {max(r['peak_rss_gib'] for r in pca):.2f} |", flush=True)
        return results
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _apply(src: str, dst: str, model_path: str, kind: str, scheduler: str) -> dict[str, float]:
    """Child process: fit on a sample of the zarr cube, transform it lazily to zarr, on
    dask's threads or on a 2-worker ``distributed.LocalCluster`` (one thread each)."""
    if scheduler == "cluster":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as cluster, Client(cluster):
            return _apply(src, dst, model_path, kind, "distributed")
    if scheduler != "distributed":  # the threaded scheduler: numpy's BLAS on one thread per task, as the kernels hold
        with threadpool_limits(limits=1, user_api="blas"):  # scipy's (a LocalCluster's workers start with 1 thread)
            return _apply_here(src, dst, model_path, kind, scheduler)
    return _apply_here(src, dst, model_path, kind, scheduler)


def _apply_here(src: str, dst: str, model_path: str, kind: str, scheduler: str) -> dict[str, float]:
    cube = xr.open_zarr(src, consolidated=False)["cube"]
    start = time.perf_counter()
    model = cube.ppa.fit(n_samples=200_000, random_state=0, degree=(1, 2, 3, 4, 5) if kind == "ppa" else 1)
    fit_s = time.perf_counter() - start
    scores = cube.ppa.transform(model) if kind == "ppa" else pca_projection(cube, model)
    start = time.perf_counter()
    scores.to_dataset(name="scores").to_zarr(dst, mode="w", encoding={"scores": {"compressors": None}}, consolidated=False)
    apply_s = time.perf_counter() - start
    print(f"  {kind.upper()} on {scheduler}: fit on sample {fit_s:.1f} s, transform {cube.nbytes / 2**30:.2f} GiB zarr -> zarr {apply_s:.1f} s", flush=True)
    return {"fit_s": fit_s, "apply_s": apply_s}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "_apply":
        with dask.config.set(scheduler="threads"):
            result = _apply(*sys.argv[2:7])
        with open(sys.argv[7], "w") as f:
            json.dump(result, f)
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="case", required=True)
    a = sub.add_parser("lazy")
    a.add_argument("--size", type=int, default=4096)
    a.add_argument("--chunk", type=int, default=1024)
    a.add_argument("--repeat", type=int, default=3)
    a.add_argument("--degree", type=int, nargs="+", default=[1, 2, 3, 4, 5], help="PPA degree or candidates (default 1..5, selected)")
    b = sub.add_parser("out-of-core")
    b.add_argument("--size", type=int, default=7680)  # 36 x 7680^2 x 4 B = 7.9 GiB = 8.5 GB
    b.add_argument("--chunk", type=int, default=512)
    b.add_argument("--workdir")
    b.add_argument("--keep", action="store_true")
    b.add_argument("--schedulers", nargs="+", choices=["threads", "cluster"], default=["threads"])
    b.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    with dask.config.set(scheduler="threads"):
        (lazy if args.case == "lazy" else out_of_core)(args)


if __name__ == "__main__":
    main()
