"""How close each lazy kernel gets to this machine's physical limit.

Measures the machine (memory bandwidth of a large copy; single-thread sgemm
rate at the kernels' shape, 36 x 36 times 36 x 16384, through the same CBLAS
the kernels call), then runs each case through the lazy path on 36-band float32 cubes in
memory (2048^2 in 1024^2 chunks, and the parallel benchmark's 1536^2 in
512^2 chunks; threaded scheduler, one task per core), interleaved, and prints
flops and bytes per pixel, the time the limit allows,
``max(flops / (rate x cores), bytes / bandwidth)``, the measured time and the
fraction of the limit reached.

    python benchmarks/bench_limits.py [--cubes 2048x1024 1536x512] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os

import dask
import numpy as np
from common import best_time, forward_flops, gemm_rate, interleaved, inverse_flops, machine, runs
from bench_xarray import pca_inverse, pca_projection, synthetic_cube
from threadpoolctl import threadpool_limits

import ppa_xr  # noqa: F401


def bandwidth(repeat: int) -> float:
    """Bytes per second of a 1 GiB copy (read + write)."""
    src = np.ones(2**28, np.float32)
    dst = src.copy()  # touched: no page faults in the timed copies
    return 2 * src.nbytes / best_time(lambda: np.copyto(dst, src), repeat)[0]


def limits(size: int, chunk: int, rate: float, bw: float, repeat: int) -> None:
    """Every case on one cube and chunking: flops and bytes per pixel, the limit, every run, the share of the limit."""
    cores = os.cpu_count() or 1
    cube = synthetic_cube(size, chunk).persist()
    pixels = size**2
    selected = cube.ppa.fit(n_samples=200_000, random_state=0)
    every = cube.ppa.fit(n_samples=200_000, random_state=0, degree=5)
    straight = cube.ppa.fit(n_samples=200_000, random_state=0, degree=1)
    scores = {name: cube.ppa.transform(m, check=False).persist() for name, m in (("selected", selected), ("every", every))}
    pca_scores = pca_projection(cube, selected.pca_).persist()
    store = lambda arr: arr.data.map_blocks(lambda b: np.zeros((1,) * b.ndim, b.dtype), chunks=(1,) * arr.ndim).sum().compute()  # noqa: E731
    cases = {
        "PCA projection (map_blocks)": (lambda: store(pca_projection(cube, selected.pca_)), 2 * 36 * 36),
        "PCA inverse (map_blocks)": (lambda: store(pca_inverse(pca_scores, selected.pca_)), 2 * 36 * 36),
        "ppa_xr degree=1": (lambda: store(cube.ppa.transform(straight, check=False)), forward_flops(straight.degrees_)),
        f"ppa_xr PPA ({int(np.sum(selected.degrees_ > 1))} curved steps)": (lambda: store(cube.ppa.transform(selected, check=False)), forward_flops(selected.degrees_)),
        "ppa_xr PPA inverse": (lambda: store(scores["selected"].ppa.inverse_transform(selected)), inverse_flops(selected.degrees_)),
        "ppa_xr degree 5 on every step": (lambda: store(cube.ppa.transform(every, check=False)), forward_flops(every.degrees_)),
        "ppa_xr inverse, degree 5 on every step": (lambda: store(scores["every"].ppa.inverse_transform(every)), inverse_flops(every.degrees_)),
    }
    bytes_per_pixel = 2 * 36 * 4  # read 36 float32 bands, write 36 float32 values
    print(f"\n{size} x {size} x 36 float32, chunks {chunk}^2, threaded scheduler; {bytes_per_pixel} bytes per pixel moved")
    print("| case | flops / pixel | limit | seconds of each run | of the limit: best (worst) |\n|---|---|---|---|---|")
    with dask.config.set(scheduler="threads"), threadpool_limits(limits=1, user_api="blas"):
        times = interleaved({name: fn for name, (fn, _) in cases.items()}, repeat)
    for name, (_, flops) in cases.items():
        limit = max(flops * pixels / (rate * cores), bytes_per_pixel * pixels / bw)
        t = times[name]
        print(f"| {name} | {flops:.0f} | {limit:.3f} s | {runs(t)} | {100 * limit / min(t):.0f}% ({100 * limit / max(t):.0f}%) |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cubes", nargs="+", default=["2048x1024", "1536x512"], help="side x chunk of each cube")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    bw, rate = bandwidth(args.repeat), gemm_rate(repeat=args.repeat)
    print(f"copy bandwidth {bw / 1e9:.1f} GB/s, sgemm {rate / 1e9:.1f} GFLOP/s per thread at 36 x 36 x 16384")
    for cube in args.cubes:
        size, chunk = (int(v) for v in cube.split("x"))
        limits(size, chunk, rate, bw, args.repeat)


if __name__ == "__main__":
    main()
