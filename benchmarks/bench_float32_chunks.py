"""Float32 cubes bit for bit under any chunking: what single-precision BLAS does, and what computing in float64 costs.

Part 1: how often a column of ``A (m x k) @ B (k x n)`` float32 (scipy's OpenBLAS through
``blas.matmul_into``, one BLAS thread) gets other bits than in one call of 20,000 columns, by
the call's column count and the column's start (the shift): the dependence that makes float32
kernels give other bits in another chunking. float64 rows for contrast.

Part 2: the lazy transform of ``bench_parallel.py``'s cube (36 bands x side^2 float32, 512^2
chunks in memory, dask's threaded scheduler) three ways: float32 kernels on sgemm (the previous
path, :func:`path`), each block upcast and computed in float64 then rounded once
(:func:`float64_blocks`), and float32 kernels on the compiled point product (the library's); interleaved in one process against a ``map_blocks``
projection: wall and process CPU seconds. Models: degree=1, PPA (1..5) and degree=5 (a
polynomial on every step, ``bench_xarray.py lazy``'s worst case).

Run by hand: ``python benchmarks/bench_float32_chunks.py [--side 1536] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import dask
import dask.array as dsa
import numpy as np
from bench_parallel import curved_cube
from common import interleaved, machine, ratio, runs

from ppa_xr import PPA
from ppa_xr.core import blas, kernels


PATHS = ("sgemm", "float64", "compiled")


def sgemm_dependence() -> None:
    rng = np.random.default_rng(0)
    print("| dtype | m x k | " + " | ".join(f"n={n}, shift {s}" for n in (16, 64, 4096) for s in (0, 5)) + " |")
    print("|---|---|" + "---|" * 6)
    with blas.single_thread:
        for dtype in (np.float32, np.float64):
            for m, k in ((36, 36), (12, 12), (5, 15), (36, 6), (3, 36)):
                a, b = rng.normal(size=(m, k)).astype(dtype), rng.normal(size=(k, 20000)).astype(dtype)
                ref = np.empty((m, 20000), dtype)
                blas.matmul_into(a, b, ref)
                cells = []
                for n in (16, 64, 4096):
                    for shift in (0, 5):
                        c = np.empty((m, n), dtype)
                        blas.matmul_into(a, b[:, shift : shift + n], c)
                        cells.append(f"{np.mean(c != ref[:, shift : shift + n]):.1%}")
                print(f"| {np.dtype(dtype).name} | {m} x {k} | " + " | ".join(cells) + " |")


def _blas_points(a, b, c, alpha, beta):
    """float32 points through sgemm, the products padded to whole groups as float64's are (the previous path)."""
    if c.shape[1] % blas.POINT_GROUP:
        blas._padded_columns(a, b, c, alpha, beta)
    else:
        blas.matmul_into(a, b, c, alpha, beta)


@contextlib.contextmanager
def path(name: str):
    """``"sgemm"``: float32 points through single-precision BLAS (the previous path); else the compiled product."""
    product = blas._point_product
    if name == "sgemm":
        blas._point_product = _blas_points
    try:
        yield
    finally:
        blas._point_product = product


def float64_blocks(model, data: dsa.Array) -> dsa.Array:
    """The float64 alternative: each block of ``kernels.BLOCK`` pixels of a (band, y, x) chunk upcast, mapped by
    the float64 kernel and rounded to float32 once."""
    params, k = model.params_, model.n_components_

    def chunk(b: np.ndarray) -> np.ndarray:
        cols = b.reshape(b.shape[0], -1)
        out = np.empty((k, cols.shape[1]), np.float32)
        for start in range(0, cols.shape[1], kernels.BLOCK):
            part = cols[:, start : start + kernels.BLOCK].astype(np.float64)
            out[:, start : start + part.shape[1]] = kernels.forward(part.T, params, k, threads=1).T
        return out.reshape((k,) + b.shape[1:])

    return data.map_blocks(chunk, chunks=((k,),) + data.chunks[1:], dtype=np.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", type=int, default=1536)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--scheduler", default="threads", choices=["threads", "sync"])
    parser.add_argument("--no-characterise", action="store_true", help="skip part 1")
    args = parser.parse_args()
    print(machine())
    if not args.no_characterise:
        print("\nShare of float32 GEMM outputs whose bits differ from one 20,000-column call (one BLAS thread)")
        sgemm_dependence()
    cube = curved_cube(args.side)
    sample = cube.ppa.sample(n_samples=50_000, random_state=0)
    models = {"degree=1": PPA(degree=1).fit(sample), "PPA (1..5)": PPA(degree=(1, 2, 3, 4, 5), random_state=0).fit(sample),
              "degree=5": PPA(degree=5, random_state=0).fit(sample)}
    pca = models["degree=1"].pca_
    V, offset = pca.components_.astype(np.float32), (pca.components_ @ pca.mean_).astype(np.float32)
    data = cube.chunk({"y": 512, "x": 512})

    def projection():
        return dsa.map_blocks(lambda b: np.tensordot(V, b, axes=(1, 0)) - offset[:, None, None], data.data, dtype=np.float32).compute()

    def transform(model, name: str, cube=data):
        def run():
            if name == "float64":
                return float64_blocks(model, cube.data).compute()
            with path(name):
                return cube.ppa.transform(model, check=False).data.compute()
        return run

    cases = {"projection": projection}
    for label, model in models.items():
        cases |= {f"{label} {name}": transform(model, name) for name in PATHS}
    print("\nEach path against itself in 333 x 500 chunks (share of values with other bits), and against the sgemm path")
    odd = cube.chunk({"y": 333, "x": 500})
    for label, model in models.items():  # the paths agree to float32 rounding
        ref = cases[f"{label} sgemm"]()
        for name in PATHS:
            got = cases[f"{label} {name}"]()
            print(f"{label}, {name}: other chunks {np.mean(transform(model, name, odd)() != got):.2%}; "
                  f"max |diff| / max |output| against sgemm {np.abs(got - ref).max() / np.abs(ref).max():.1e}")
    print(f"\n{cube.sizes['band']} x {args.side}^2 float32, 512^2 chunks in memory, {args.scheduler} scheduler; "
          "every interleaved run, ratio: best (worst round)")
    with dask.config.set(scheduler=args.scheduler):
        cpu: dict[str, list[float]] = {}
        start = time.perf_counter()
        wall = interleaved(cases, args.repeat, cpu)
    print(f"({time.perf_counter() - start:.0f} s)")
    print("| case | wall (s) | wall / projection | CPU (s) | CPU / projection | wall / sgemm path | CPU / sgemm path |")
    print("|---|---|---|---|---|---|---|")
    for name in cases:
        label = name.rsplit(" ", 1)[0]
        against = (f"| {ratio(wall[name], wall[label + ' sgemm'])} | {ratio(cpu[name], cpu[label + ' sgemm'])}"
                   if name != "projection" else "| |")
        print(f"| {name} | {runs(wall[name])} | {ratio(wall[name], wall['projection'])} | {runs(cpu[name])} "
              f"| {ratio(cpu[name], cpu['projection'])} {against} |")


if __name__ == "__main__":
    main()
