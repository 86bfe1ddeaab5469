"""What the benchmarks share: interleaved timing, the machine's state, flop counts and the GEMM rate."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import numpy as np
from threadpoolctl import threadpool_info

from ppa_xr.core import blas


def best_time(fn: Callable[[], object], repeat: int) -> tuple[float, object]:
    """Best wall time of ``repeat`` calls, and the last result."""
    best, result = np.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def interleaved(cases: dict[str, Callable[[], object]], repeat: int = 3, cpu: dict[str, list[float]] | None = None) -> dict[str, list[float]]:
    """Every run of every case: one warm-up each, then ``repeat`` rounds calling the cases in turn,
    so that each sees the same machine state as its baseline. ``cpu``: filled with each run's CPU time
    (this process, all its threads), which other work on a shared machine disturbs less than the wall time."""
    for fn in cases.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - start)
            if cpu is not None:
                cpu.setdefault(name, []).append(time.process_time() - start_cpu)
    return times


def runs(times: list[float]) -> str:
    """``"0.123, 0.125, 0.131"``: every run, in order."""
    return ", ".join(f"{t:.3f}" for t in times)


def ratio(ours: list[float], theirs: list[float], worst=max) -> str:
    """``best (worst)``: the ratio of the best runs of two interleaved cases, and the worst per-round ratio
    (``worst=min`` where a higher ratio is better, as for a speed-up)."""
    r = np.array(ours) / np.array(theirs)
    return f"{min(ours) / min(theirs):.2f} ({worst(r):.2f})"


def machine() -> str:
    """Cores, load and every BLAS with its thread count, as one line."""
    blas_libs = "; ".join(
        f"{i['internal_api']} {i['version']} at {i['num_threads']} threads ({os.path.basename(i['filepath'])})"
        for i in threadpool_info() if i["user_api"] == "blas"
    )
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"machine: {os.cpu_count()} cores, load {load:.2f}, numpy {np.__version__}; BLAS: {blas_libs}"


def gemm_rate(dtype=np.float32, repeat: int = 3) -> float:
    """Single-thread GEMM flops per second at the kernels' block shape (36 x 36 times 36 x 16384), through
    the CBLAS the kernels call."""
    a, b, c = np.ones((36, 36), dtype), np.ones((36, 16384), dtype), np.empty((36, 16384), dtype)
    with blas.single_thread:
        seconds, _ = best_time(lambda: [blas.matmul_into(a, b, c) for _ in range(100)], repeat)
    return 100 * 2 * 36 * 36 * 16384 / seconds


def forward_flops(degrees: np.ndarray) -> float:
    """Per pixel: the rotation and each curved step's correction of the later components."""
    d = len(degrees) + 1
    return 2 * d * d + sum(2 * int(g) * (d - 1 - p) for p, g in enumerate(degrees) if g > 1)


def inverse_flops(degrees: np.ndarray) -> float:
    """Per pixel: one GEMM with the rotation stacked on every curved step's coefficients."""
    d = len(degrees) + 1
    return 2 * d * (d + sum(int(g) for g in degrees if g > 1))
