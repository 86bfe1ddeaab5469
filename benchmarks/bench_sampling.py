"""The sampling pass of a fit against a dask reduction of the same cube, as the chunk count grows.

Cubes are dask random arrays (a fixed seed; nothing read from disk), float32:

* 4 bands in 16 x 16-pixel chunks, 1600^2 (10,000 chunks), 3200^2 (40,000)
  and 5056^2 (99,856) pixels: ``cube.ppa.fit(dim="band", degree=1,
  configuration="fixed", n_samples=5000)`` against ``cube.mean().compute()``,
  interleaved in this process (one warm-up each, then ``--repeat`` rounds);
  the largest cube (``--largest``) is fitted once, for its time only;
* 36 bands of 1536^2 pixels in 512^2 chunks, random and in memory
  (``.chunk`` of a numpy array): ``sample_valid_pixels`` of 100,000 pixels
  against ``.sum().compute()``.

Every run is listed, with the ratio of the best runs' CPU times (this process, all threads: less disturbed by
other work on a shared machine than the wall times) and the load average before and after each case.
Run from a checkout: ``PYTHONPATH=. python benchmarks/bench_sampling.py [--sides 1600,3200] [--largest 5056]
[--repeat 2] [--no-bands36]`` (without ``PYTHONPATH`` the installed ppa_xr is measured; the first line says which).
"""

from __future__ import annotations

import argparse
import os
import time

import dask.array as dsa
import numpy as np
import xarray as xr
from common import interleaved, machine, ratio, runs

import ppa_xr  # noqa: F401  (the .ppa accessor)
from ppa_xr.cube.sampling import sample_valid_pixels


def load() -> str:
    """The 1, 5 and 15 minute load averages."""
    return "load " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def small_chunks_cube(side: int, bands: int = 4, chunk: int = 16) -> xr.DataArray:
    """``bands`` x ``side``^2 float32 uniform values in ``chunk``^2-pixel chunks (all bands in each chunk)."""
    data = dsa.random.default_rng(0).random((bands, side, side), chunks=(bands, chunk, chunk), dtype=np.float32)
    return xr.DataArray(data, dims=("band", "y", "x"))


def fit(cube: xr.DataArray) -> object:
    return cube.ppa.fit(dim="band", degree=1, configuration="fixed", n_samples=5000, random_state=0)


def chunk_count(side: int, repeat: int) -> None:
    """The fit against ``mean()`` on a 4-band cube in 16^2 chunks."""
    cube = small_chunks_cube(side)
    chunks = cube.data.npartitions
    before, cpu = load(), {}
    times = interleaved({"mean": lambda: cube.mean().compute(), "fit": lambda: fit(cube)}, repeat, cpu)
    print(f"| 4 x {side}^2, 16^2 chunks | {chunks:,} | {runs(times['mean'])} | {runs(times['fit'])} | "
          f"{ratio(times['fit'], times['mean'])} | {ratio(cpu['fit'], cpu['mean'])} | {before}; after: {load()} |", flush=True)


def largest(side: int) -> None:
    """One fit of the largest cube, timed."""
    cube = small_chunks_cube(side)
    before, before_cpu = time.perf_counter(), time.process_time()
    fit(cube)
    print(f"| 4 x {side}^2, 16^2 chunks | {cube.data.npartitions:,} | | fit once: {time.perf_counter() - before:.1f} s "
          f"(CPU {time.process_time() - before_cpu:.1f} s) | | | {load()} |", flush=True)


def bands36(repeat: int) -> None:
    """``sample_valid_pixels`` of 100,000 pixels against ``.sum()``: 36 x 1536^2 float32, 512^2 chunks."""
    shape, chunks = (36, 1536, 1536), (36, 512, 512)
    random = xr.DataArray(dsa.random.default_rng(0).random(shape, chunks=chunks, dtype=np.float32), dims=("band", "y", "x"))
    memory = xr.DataArray(np.random.default_rng(0).random(shape, dtype=np.float32), dims=("band", "y", "x")).chunk(
        {"band": -1, "y": 512, "x": 512})
    for name, cube in (("dask random", random), ("in memory (.chunk)", memory)):
        before, cpu = load(), {}
        times = interleaved({"sum": lambda: cube.sum().compute(),
                             "sample": lambda: sample_valid_pixels(cube, "band", n_samples=100_000, random_state=0)}, repeat, cpu)
        print(f"| 36 x 1536^2, 512^2 chunks, {name} | {cube.data.npartitions} | {runs(times['sum'])} | {runs(times['sample'])} | "
              f"{ratio(times['sample'], times['sum'])} | {ratio(cpu['sample'], cpu['sum'])} | {before}; after: {load()} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sides", default="1600,3200", help="sides of the 4-band cubes in 16^2 chunks, compared with mean()")
    parser.add_argument("--largest", type=int, default=5056, help="side of the cube fitted once (0: none)")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--no-bands36", action="store_true", help="leave out the 36-band cube")
    args = parser.parse_args()
    print(machine())
    print(f"ppa_xr {ppa_xr.__version__} from {os.path.dirname(ppa_xr.__file__)}")
    print("| cube | chunks | mean().compute() (s) | fit, n_samples=5000 (s) | fit / mean: best (worst round) | CPU time fit / mean | load average |")
    print("|---|---|---|---|---|---|---|")
    for side in (int(s) for s in args.sides.split(",") if s):
        chunk_count(side, args.repeat)
    if args.largest:
        largest(args.largest)
    if not args.no_bands36:
        print("\n| cube | chunks | sum().compute() (s) | sample_valid_pixels, 100,000 (s) | sample / sum: best (worst round) | CPU time sample / sum | "
              "load average |")
        print("|---|---|---|---|---|---|---|")
        bands36(args.repeat)


if __name__ == "__main__":
    main()
