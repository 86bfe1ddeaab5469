"""The lazy path under dask's schedulers: ppa_xr's transform against a plain map_blocks projection, side by side.

Cube: 36 bands x 1536 x 1536 float32 with curved bands (bands 2..36 carry
random multiples of ``b1^2`` and ``b1^3``), chunks of 512 x 512, held three ways:
in memory (``.chunk()``: dask hands each task a strided slice), in a zarr
store and in a tiled GeoTIFF (each chunk read contiguous). Models: PCA
(``degree=1``) and PPA (degrees 1..5), both fitted on 50,000 sampled pixels.
The baseline is ``dask.array.map_blocks`` of ``V x - V mean`` with the fitted
PCA, BLAS threads as the user has them. Schedulers: threads (all cores),
threads on one worker thread, synchronous, and a ``distributed.LocalCluster``
of 2 single-threaded worker processes. Every run is listed (one warm-up,
then 3 interleaved rounds); the ratio is ppa_xr / projection in the same
process, best (worst round).

Thread scaling, last: 1 -> 2 dask threads with every BLAS at one thread,
so that the projection cannot use the second core inside its one task.

``--dtype uint16`` (or another integer type): the same cube with each band scaled to 1,000..60,000 of
uint16 and rounded, the realistic case of digital numbers; ppa_xr computes it in float32 and gives float32.
Two projections then: ``V`` in float32 (numpy computes ``uint16 @ float32`` in float32, float32 out) and
``V`` in float64 as scikit-learn fits it (``uint16 @ float64`` is float64, float64 out).

Run by hand: ``python benchmarks/bench_parallel.py [--side 1536] [--repeat 3] [--sources memory zarr GeoTIFF]
[--schedulers threads "threads 1" sync cluster] [--no-scaling] [--dtype uint16]``.
"""

from __future__ import annotations

import argparse
import contextlib
import tempfile
import warnings
from functools import partial
from pathlib import Path

import dask
import dask.array as dsa
import numpy as np
import xarray as xr
from common import interleaved, machine, ratio, runs

from ppa_xr import PPA


def curved_cube(side: int, d: int = 36, dtype: str = "float32") -> xr.DataArray:
    rng = np.random.default_rng(0)
    data = rng.normal(size=(d, side, side)).astype(np.float32)
    data[1:] += (data[0] ** 2)[None] * rng.normal(size=(d - 1, 1, 1)).astype(np.float32)
    data[1:] += 0.3 * (data[0] ** 3)[None] * rng.normal(size=(d - 1, 1, 1)).astype(np.float32)
    if np.dtype(dtype).kind in "iu":  # digital numbers: each band scaled to 1,000..60,000 (of uint16) and rounded
        low, high = data.min(axis=(1, 2), keepdims=True), data.max(axis=(1, 2), keepdims=True)
        top = min(60_000, np.iinfo(dtype).max)
        data = np.round(top // 60 + (data - low) / (high - low) * (top - top // 60)).astype(dtype)
    coords = {"band": np.arange(1, d + 1), "y": np.arange(side, 0, -1.0), "x": np.arange(side, dtype=float)}
    return xr.DataArray(data, dims=("band", "y", "x"), coords=coords, name="cube")


#: "threads 1": the threaded scheduler on one worker thread (thread scaling = its time / "threads"'s)
SCHEDULERS = ("threads", "threads 1", "sync", "cluster")


@contextlib.contextmanager
def scheduled(name: str):
    """The scheduler of a row: dask's threads (all cores, or one), synchronous, or a LocalCluster of
    2 single-threaded workers (processes)."""
    if name == "cluster":
        from distributed import Client, LocalCluster

        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, Client(cluster):
            yield
        return
    settings = {"scheduler": "threads", "num_workers": 1} if name == "threads 1" else {"scheduler": name}
    with dask.config.set(**settings):
        yield


def sources(cube: xr.DataArray, folder: Path) -> dict[str, xr.DataArray]:
    import rioxarray

    cube.to_dataset().to_zarr(folder / "cube.zarr", mode="w", encoding={"cube": {"chunks": (cube.sizes["band"], 512, 512)}})
    cube.rio.write_crs("EPSG:32632").rio.to_raster(folder / "cube.tif", tiled=True, blockxsize=512, blockysize=512)
    return {
        "memory (.chunk)": cube.chunk({"y": 512, "x": 512}),
        "zarr": xr.open_zarr(folder / "cube.zarr")["cube"],
        "GeoTIFF": rioxarray.open_rasterio(folder / "cube.tif", chunks={"band": -1, "x": 512, "y": 512}),
    }


def scaling(cube: xr.DataArray, models: dict, V: np.ndarray, offset: np.ndarray, repeat: int) -> None:
    """1 -> 2 dask threads with every BLAS at one thread (the projection's numpy BLAS too, or its "1 thread"
    row would use both cores), the cube in memory; each result reduced chunk by chunk (compute alone) and
    computed into one array (as a user gets it)."""
    from threadpoolctl import threadpool_limits

    source = cube.chunk({"y": 512, "x": 512})
    data = source.transpose("band", "y", "x").data
    makers = {"projection": lambda: dsa.map_blocks(lambda b: np.tensordot(V, b, axes=(1, 0)) - offset[:, None, None], data, dtype=np.float32)}
    makers |= {label: (lambda m=m: source.ppa.transform(m, check=False).data) for label, m in models.items()}
    reduced = lambda arr: arr.map_blocks(lambda b: b[:1, :1, :1], chunks=(1, 1, 1)).sum().compute()  # noqa: E731
    print("\nThread scaling, BLAS at one thread everywhere, memory cube: seconds of each run on 1 and 2 dask threads")
    print("| result | map | 1 thread (s) | 2 threads (s) | scaling: best (worst round) |\n|---|---|---|---|---|")
    with threadpool_limits(limits=1, user_api="blas"):
        for mode, finish in (("reduced per chunk", reduced), ("computed", lambda arr: arr.compute())):
            cases = {}
            for label, make in makers.items():
                for workers in (1, 2):
                    cases[(label, workers)] = lambda make=make, w=workers: _on_threads(w, lambda: finish(make()))
            times = interleaved(cases, repeat)
            for label in makers:
                one, two = times[(label, 1)], times[(label, 2)]
                print(f"| {mode} | {label} | {runs(one)} | {runs(two)} | {ratio(one, two, worst=min)} |", flush=True)


def _on_threads(workers: int, fn):
    with dask.config.set(scheduler="threads", num_workers=workers):
        return fn()


def main() -> None:
    warnings.filterwarnings("ignore", message="Sending large graph")  # the in-memory cube travels to the cluster with its graph
    warnings.filterwarnings("ignore", message="Consolidated metadata")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=1536)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--sources", nargs="+", default=["memory", "zarr", "GeoTIFF"], help="cube sources to run (first word)")
    parser.add_argument("--schedulers", nargs="+", default=list(SCHEDULERS), choices=SCHEDULERS)
    parser.add_argument("--no-scaling", action="store_true", help="skip the thread-scaling section")
    parser.add_argument("--dtype", default="float32", help="the cube's dtype: float32, or an integer type (digital numbers)")
    args = parser.parse_args()
    print(machine())
    cube = curved_cube(args.side, dtype=args.dtype)
    sample = cube.ppa.sample(n_samples=50_000, random_state=0)
    models = {"degree=1": PPA(degree=1).fit(sample), "PPA (1..5)": PPA(degree=(1, 2, 3, 4, 5), random_state=0).fit(sample)}
    pca = models["degree=1"].pca_
    V, offset = pca.components_.astype(np.float32), (pca.components_ @ pca.mean_).astype(np.float32)
    print(f"{cube.sizes['band']} x {args.side} x {args.side} {args.dtype}, chunks 512 x 512; PPA curved steps: "
          f"{int((models['PPA (1..5)'].degrees_ > 1).sum())}")
    V64, offset64 = pca.components_, pca.components_ @ pca.mean_  # the projection a float64 PCA gives an integer cube
    integer = np.dtype(args.dtype).kind in "iu"
    print("\nSeconds of each interleaved run; ratio to the projection: best (worst round)")
    extra = " projection, V float64 (s) | degree=1 / it | PPA / it |" if integer else ""
    print(f"| source | scheduler | projection (s) | degree=1 (s) | ratio | PPA (1..5) (s) | ratio |{extra}")
    print("|---|---|---|---|---|---|---|" + "---|---|---|" * integer)
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in sources(cube, Path(tmp)).items():
            if name.split()[0] not in args.sources:
                continue
            data = source.transpose("band", "y", "x").data

            def projection(data=data, V=V, offset=offset):
                return dsa.map_blocks(lambda b: np.tensordot(V, b, axes=(1, 0)) - offset[:, None, None], data,
                                      dtype=np.result_type(V, data)).compute()

            cases = {"projection": projection} | {label: (lambda m=m, s=source: s.ppa.transform(m, check=False).data.compute())
                                                  for label, m in models.items()}
            if integer:
                cases["projection64"] = partial(projection, V=V64, offset=offset64)
            for scheduler in args.schedulers:
                cpu: dict[str, list[float]] = {}
                with scheduled(scheduler):
                    times = interleaved(cases, args.repeat, cpu)  # every run sees the same machine state as its baseline
                base = times["projection"]
                if integer:  # process CPU time (this process's threads; not a cluster's workers), which other load sways less
                    cpu = {case: values[-args.repeat:] for case, values in cpu.items()}
                    print(f"CPU s, {name}, {scheduler}: " + "; ".join(f"{case} {runs(values)}" for case, values in cpu.items())
                          + f"; degree=1 / projection {ratio(cpu['degree=1'], cpu['projection'])}, PPA / projection "
                          f"{ratio(cpu['PPA (1..5)'], cpu['projection'])}, degree=1 / V float64 {ratio(cpu['degree=1'], cpu['projection64'])}, "
                          f"PPA / V float64 {ratio(cpu['PPA (1..5)'], cpu['projection64'])}", flush=True)
                row = (f"| {name} | {scheduler} | {runs(base)} | {runs(times['degree=1'])} | {ratio(times['degree=1'], base)} "
                       f"| {runs(times['PPA (1..5)'])} | {ratio(times['PPA (1..5)'], base)} |")
                if integer:
                    base64 = times["projection64"]
                    row += f" {runs(base64)} | {ratio(times['degree=1'], base64)} | {ratio(times['PPA (1..5)'], base64)} |"
                print(row, flush=True)
    if not args.no_scaling:
        scaling(cube, models, V, offset, args.repeat)


if __name__ == "__main__":
    main()
