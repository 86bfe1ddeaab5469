"""How close each lazy kernel gets to this machine's physical limit.

Measures the machine (memory bandwidth of a large copy; single-thread sgemm
rate at the kernels' shape, 36 x 36 times 36 x 16384, through the same CBLAS
the kernels call), then runs each case through the lazy path on a 36-band
float32 cube in memory (threaded scheduler, one task per core) and prints
flops and bytes per pixel, the time the limit allows,
``max(flops / (rate x cores), bytes / bandwidth)``, the measured time and the
fraction of the limit reached.

    python benchmarks/bench_limits.py [--size 2048] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os

import dask
import numpy as np
from common import best_time, forward_flops, gemm_rate, inverse_flops
from bench_xarray import pca_inverse, pca_projection, synthetic_cube
from threadpoolctl import threadpool_limits

import ppa_xr  # noqa: F401
from ppa_xr.core import blas


def bandwidth(repeat: int) -> float:
    """Bytes per second of a 1 GiB copy (read + write)."""
    src = np.ones(2**28, np.float32)
    dst = src.copy()  # touched: no page faults in the timed copies
    return 2 * src.nbytes / best_time(lambda: np.copyto(dst, src), repeat)[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    bw, rate = bandwidth(args.repeat), gemm_rate(repeat=args.repeat)
    print(f"machine: {cores} cores, copy bandwidth {bw / 1e9:.1f} GB/s, sgemm {rate / 1e9:.1f} GFLOP/s per thread at 36 x 36 x 16384")
    cube = synthetic_cube(args.size, 1024).persist()
    pixels = args.size**2
    selected = cube.ppa.fit(n_samples=200_000, random_state=0)
    every = cube.ppa.fit(n_samples=200_000, random_state=0, degree=5)
    straight = cube.ppa.fit(n_samples=200_000, random_state=0, degree=1)
    scores = {name: cube.ppa.transform(m).persist() for name, m in (("selected", selected), ("every", every))}
    pca_scores = pca_projection(cube, selected.pca_).persist()
    store = lambda arr: arr.data.map_blocks(lambda b: np.zeros((1,) * b.ndim, b.dtype), chunks=(1,) * arr.ndim).sum().compute()  # noqa: E731
    cases = [
        ("PCA projection (map_blocks)", lambda: store(pca_projection(cube, selected.pca_)), 2 * 36 * 36),
        ("PCA inverse (map_blocks)", lambda: store(pca_inverse(pca_scores, selected.pca_)), 2 * 36 * 36),
        ("ppa_xr degree=1", lambda: store(cube.ppa.transform(straight)), forward_flops(straight.degrees_)),
        (f"ppa_xr PPA ({int(np.sum(selected.degrees_ > 1))} curved steps)", lambda: store(cube.ppa.transform(selected)), forward_flops(selected.degrees_)),
        ("ppa_xr PPA inverse", lambda: store(scores["selected"].ppa.inverse_transform(selected)), inverse_flops(selected.degrees_)),
        ("ppa_xr degree 5 on every step", lambda: store(cube.ppa.transform(every)), forward_flops(every.degrees_)),
        ("ppa_xr inverse, degree 5 on every step", lambda: store(scores["every"].ppa.inverse_transform(every)), inverse_flops(every.degrees_)),
    ]
    bytes_per_pixel = 2 * 36 * 4  # read 36 float32 bands, write 36 float32 values
    print(f"\n{args.size} x {args.size} x 36 float32, chunks 1024^2, threaded scheduler; {bytes_per_pixel} bytes per pixel moved")
    print("| case | flops / pixel | limit | measured | of the limit |\n|---|---|---|---|---|")
    with dask.config.set(scheduler="threads"), threadpool_limits(limits=1, user_api="blas"):
        for name, fn, flops in cases:
            limit = max(flops * pixels / (rate * cores), bytes_per_pixel * pixels / bw)
            seconds, _ = best_time(fn, args.repeat)
            print(f"| {name} | {flops:.0f} | {limit:.3f} s | {seconds:.3f} s | {100 * limit / seconds:.0f}% |", flush=True)


if __name__ == "__main__":
    main()
