"""The BLAS the kernels run on: scipy's library, one thread while kernels run, GEMM without the GIL.

The kernels parallelise over pixels themselves (or dask does), so their
GEMMs must (a) run on one BLAS thread each, without changing what the user
set for the rest of the session, and (b) release the GIL, or two tasks of a
threaded dask scheduler take turns instead of running at once (measured:
``scipy.linalg.blas.sgemm`` in two Python threads took 0.40 s for what one
thread did in 0.36 s; numpy's ``matmul`` scales). So :func:`matmul_into`
calls ``cblas_?gemm`` of scipy's bundled BLAS through ``ctypes``, which
releases the GIL, on any strided operands with one unit stride (so results
can go straight into a view of the output). Where that library exports no
CBLAS (another BLAS build), ``scipy.linalg.blas`` does the same work,
holding the GIL.
"""

from __future__ import annotations

import ctypes
import itertools
import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path

import numpy as np
import scipy
from scipy.linalg import blas as scipy_blas

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112
_AFFIXES = list(itertools.product(("", "scipy_"), ("", "64_", "_64")))


@lru_cache(maxsize=1)
def _controller():
    """The process's thread pools (threadpoolctl's ``ThreadpoolController``), found once: the scan of the loaded
    libraries costs about 2 ms. Imported here, so the core imports with numpy, scipy and numba alone."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def every_blas_on_one_thread():
    """A context holding every BLAS of the process (numpy's too) at one thread, as ``threadpool_limits(1,
    user_api="blas")`` does, without scanning the libraries again: the fit's many small products."""
    return on_threads(1)


def product_threads() -> int:
    """The BLAS threads for one large product of a fit (its covariance, which ``PCA()`` makes at the default
    threads too): the caller's count (the user's ``threadpool_limits``, else numpy's default), at most the
    cores that the other processes' load leaves to this one (``cores - (load - own) + 1``, ``own`` this process's
    share of the load average, :func:`own_load`, and the 1 its own thread), where the fit runs in the process's main
    thread while no kernel holds the BLAS (:data:`single_thread`); 1 elsewhere (a dask task, whose siblings share
    the cores). A busy machine gets one thread: threads that wait for cores spin (measured: 2.5x the wall time of
    one thread at load 8 on 2 cores). The product's rounding does not depend on the count (GEMM and SYRK split
    their output among the threads, not their sums)."""
    if threading.current_thread() is not threading.main_thread() or not single_thread.idle():
        return 1
    caller = min((lib.num_threads for lib in _controller().select(user_api="blas").lib_controllers), default=1)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    now, cpu = time.monotonic(), time.process_time()
    try:
        others = os.getloadavg()[0] - own_load(_OWN, now, cpu)
    except (AttributeError, OSError):  # no load average (Windows has no os.getloadavg)
        others = 0.0
    _OWN[:] = [(t, c) for t, c in _OWN if now - t < 5 * LOAD_TAU][-64:] + [(now, cpu)]
    return max(1, min(caller, int(cores - max(others, 0.0) + 1.5)))


#: the time constant of the 1-minute load average (Linux averages the runnable tasks with weight ``exp(-t / 60 s)``)
LOAD_TAU = 60.0

#: this process's CPU time (all its threads) at moments since ppa_xr was imported: (monotonic s, CPU s)
_OWN: list[tuple[float, float]] = [(time.monotonic(), time.process_time())]


def own_load(samples: Sequence[tuple[float, float]], now: float, cpu: float) -> float:
    """This process's share of the 1-minute load average: the cores its threads kept busy (CPU time over wall
    time) between the ``samples`` ``(t, cpu)`` and ``(now, cpu)``, weighted as the load average weighs them,
    ``sum_i rate_i (exp(-(now - t_(i+1)) / tau) - exp(-(now - t_i) / tau))``. Without it, a fit right after the
    process's own work (the fit before, a benchmark's warm-up) read that work as another process's and took one
    thread: ``degree=1`` at 1.9x ``PCA()`` instead of 1.5x, at load 1.6-1.9 with nothing else running."""
    times = np.array([t for t, _ in samples] + [now])
    spent = np.diff([c for _, c in samples] + [cpu])
    rates = spent / np.maximum(np.diff(times), 1e-9)
    weights = np.exp(-(now - times) / LOAD_TAU)
    return float(np.sum(rates * np.diff(weights)))


def pair_threads() -> int:
    """2 where two independent passes may run side by side (:func:`product_threads` leaves two cores), else 1: on a busy
    machine two threads of memory-bound passes cost more CPU time than one after the other (the report's, measured: 2-7 ms
    of 100 at load 7-10 on 2 cores)."""
    return min(product_threads(), 2)


def both(first: Callable[[], object], second: Callable[[], object], threads: int) -> list:
    """``[first(), second()]``: where ``threads > 1`` (:func:`pair_threads`), ``second`` on one worker thread
    (:func:`_worker`, made once per process: a thread pool's start per call cost more than a d x d x d product below
    100 features) while ``first`` runs on this one (their products and the kernels release the GIL): the same results
    as one after the other, where the two write apart. On the worker itself, one after the other."""
    if threads < 2 or threading.current_thread().name.startswith(_WORKER_NAME):
        return [first(), second()]
    later = _worker().submit(second)
    try:
        result = first()
    finally:
        other = later.result()  # waited for even where ``first`` raised: nothing runs on after the call
    return [result, other]


_WORKER_NAME = "ppa_xr-pair"
_WORKERS: list[ThreadPoolExecutor] = []


def _worker() -> ThreadPoolExecutor:
    """The worker thread of :func:`both`, started at its first use; a forked child starts its own."""
    if not _WORKERS:
        _WORKERS.append(ThreadPoolExecutor(1, thread_name_prefix=_WORKER_NAME))
    return _WORKERS[0]


if hasattr(os, "register_at_fork"):  # the parent's thread does not exist in a child
    os.register_at_fork(after_in_child=_WORKERS.clear)


class _Here(Executor):
    """An executor that runs each call at once on the caller's thread (``map`` runs them all at its call, in order):
    a thread pool's ``submit`` and ``map`` where no second core is free."""

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Future:  # noqa: D102 (Executor's)
        future: Future = Future()
        future.set_result(fn(*args, **kwargs))
        return future


@contextmanager
def side_by_side(threads: int) -> Iterator[Executor]:
    """Independent passes run side by side: a pool of ``threads`` threads where ``threads > 1``
    (:func:`pair_threads`), else an executor that runs each one at once on this thread (a busy machine: the same
    work one after the other). Its ``submit`` and ``map`` give the same results either way where the passes
    write apart (numpy's sorts and the kernels release the GIL). :func:`both` is the case of two calls."""
    if threads < 2:
        yield _Here()
        return
    with ThreadPoolExecutor(threads) as pool:
        yield pool


def in_order(func: Callable[[int], object], starts: Sequence[int], threads: int) -> Iterator:
    """``func(start)`` of each of ``starts``, in their order, ``threads`` at a time on as many Python threads (each
    product inside on one BLAS thread, numpy's releasing the GIL): the results are those of one thread, bit for
    bit, where ``func``'s calls write apart; at most ``threads`` results are held at once."""
    if threads <= 1:
        yield from map(func, starts)
        return
    with ThreadPoolExecutor(threads) as pool:
        for lo in range(0, len(starts), threads):
            yield from pool.map(func, starts[lo:lo + threads])


def on_threads(threads: int):
    """A context holding every BLAS at ``threads`` threads (:func:`product_threads`), as ``threadpool_limits``
    does, without scanning the libraries again."""
    return _controller().limit(limits=threads, user_api="blas")


@lru_cache(maxsize=1)
def _libraries() -> tuple:
    """threadpoolctl's controllers of the BLAS behind ``scipy.linalg.blas``: scipy's bundled OpenBLAS
    where numpy and scipy ship separate libraries (the PyPI wheels), so numpy's BLAS is never touched;
    where they are one library (conda), that library."""
    controller = _controller().select(user_api="blas")
    scipy_dirs = (Path(scipy.__file__).parent, Path(scipy.__file__).parent.parent / "scipy.libs")
    own = [lib["filepath"] for lib in controller.info() if any(d in Path(lib["filepath"]).parents for d in scipy_dirs)]
    return tuple((controller.select(filepath=own) if own else controller).lib_controllers)


@lru_cache(maxsize=1)
def _thread_counts() -> tuple[tuple[Callable[[], int], Callable[[int], object]], ...]:
    """Get and set of each library's thread count, callable from any thread. A pthreads OpenBLAS is set
    through its own functions: threadpoolctl lets only the first thread that sets one change it later, so
    a set from a dask worker thread would turn the user's own ``threadpool_limits`` into a silent no-op."""
    return tuple(_thread_count_functions(lib) for lib in _libraries())


@lru_cache(maxsize=None)
def _dynlib(filepath: str) -> ctypes.CDLL:
    """The already loaded library at ``filepath`` (threadpoolctl's ``filepath``), opened again without
    loading anything (``RTLD_NOLOAD``): its exported functions, on every threadpoolctl version."""
    return ctypes.CDLL(filepath, mode=getattr(os, "RTLD_NOLOAD", ctypes.DEFAULT_MODE))


def _thread_count_functions(lib) -> tuple[Callable[[], int], Callable[[int], object]]:
    if lib.internal_api == "openblas" and lib.threading_layer != "openmp":
        for prefix, suffix in _AFFIXES:
            get = getattr(_dynlib(lib.filepath), f"{prefix}openblas_get_num_threads{suffix}", None)
            if get is not None:
                return get, getattr(_dynlib(lib.filepath), f"{prefix}openblas_set_num_threads{suffix}")
    return lib.get_num_threads, lib.set_num_threads


class _SingleThread:
    """Hold scipy's BLAS at one thread while any kernel runs, and give back the user's setting when
    the last concurrent kernel ends (dask's threads share one count), so no change outlives a
    computation. BLAS threads on block-sized GEMMs only wait and spin (measured: up to 15x slower)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active = 0
        self._saved: list[int] = []

    def __enter__(self) -> None:
        with self._lock:
            if self._active == 0:
                self._saved = [get() for get, _ in _thread_counts()]
                for _, set_threads in _thread_counts():
                    set_threads(1)
            self._active += 1

    def idle(self) -> bool:
        """Whether no kernel holds the BLAS now."""
        return self._active == 0

    def __exit__(self, *exc) -> None:
        with self._lock:
            self._active -= 1
            if self._active == 0:
                for (_, set_threads), n in zip(_thread_counts(), self._saved):
                    set_threads(n)


single_thread = _SingleThread()


def _cblas(name: str, dtype: np.dtype, signature: Callable[[type, type], list]):
    """``cblas_<s|d><name>`` of scipy's BLAS with its ctypes signature (given the integer and scalar types), or None."""
    letter, scalar = ("s", ctypes.c_float) if dtype == np.float32 else ("d", ctypes.c_double)
    for lib in _libraries():
        for prefix, suffix in _AFFIXES:
            func = getattr(_dynlib(lib.filepath), f"{prefix}cblas_{letter}{name}{suffix}", None)
            if func is not None:
                func.argtypes = signature(ctypes.c_int64 if suffix else ctypes.c_int32, scalar)
                func.restype = None
                return func
    return None


@lru_cache(maxsize=2)
def _cblas_gemm(dtype: np.dtype):
    """``cblas_?gemm``, or None."""
    return _cblas("gemm", dtype, lambda i, f: [ctypes.c_int, ctypes.c_int, ctypes.c_int, i, i, i, f, ctypes.c_void_p, i, ctypes.c_void_p, i, f, ctypes.c_void_p, i])


@lru_cache(maxsize=2)
def _cblas_omatcopy(dtype: np.dtype):
    """OpenBLAS's ``cblas_?omatcopy`` (an extension), or None."""
    return _cblas("omatcopy", dtype, lambda i, f: [ctypes.c_int, ctypes.c_int, i, i, f, ctypes.c_void_p, i, ctypes.c_void_p, i])


def copy_into(src: np.ndarray, dst: np.ndarray) -> None:
    """``dst[...] = src`` for 2-D arrays. A row-major ``src`` into a column-major ``dst`` (a pixel-major
    output of band-major rows) is a transposing copy, which numpy does element by element at about 6x
    the cost of a plain copy; OpenBLAS's blocked ``omatcopy`` does it, where the library has one."""
    if src.shape != dst.shape or src.ndim != 2:
        raise ValueError(f"copy_into needs two 2-D arrays of one shape, got {src.shape} and {dst.shape}")
    rows, cols = src.shape
    item = src.itemsize
    func = _cblas_omatcopy(src.dtype) if src.dtype == dst.dtype and src.dtype in (np.float32, np.float64) else None
    if (
        func is not None and rows > 1 and cols > 1 and src.strides[1] == item and dst.strides[0] == item
        and src.strides[0] % item == 0 and dst.strides[1] % item == 0 and src.strides[0] >= cols * item and dst.strides[1] >= rows * item
    ):
        func(_ROW_MAJOR, _TRANS, rows, cols, 1.0, src.ctypes.data, src.strides[0] // item, dst.ctypes.data, dst.strides[1] // item)
    else:
        dst[...] = src


def _operand(x: np.ndarray) -> tuple[np.ndarray, int, int]:
    """``x`` as a row-major BLAS operand: (array, transpose flag, leading dimension); copied when its
    strides fit neither row nor column major."""
    rows, cols = x.shape
    size = x.itemsize
    if cols == 1 or x.strides[1] == size:
        lead = x.strides[0] // size if rows > 1 else cols
        if x.strides[0] % size == 0 and lead >= cols:
            return x, _NO_TRANS, max(lead, 1)
    if rows == 1 or x.strides[0] == size:
        lead = x.strides[1] // size if cols > 1 else rows
        if x.strides[1] % size == 0 and lead >= rows:
            return x, _TRANS, max(lead, 1)
    return _operand(np.ascontiguousarray(x))


POINT_GROUP = 64  # a multiple of every BLAS kernel's unroll: points counted in whole groups get one arithmetic


def matmul_into(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float = 1.0, beta: float = 0.0, points: int | None = None) -> None:
    """``c = alpha a @ b + beta c`` in place, for 2-D float arrays of one dtype with any strides that
    BLAS can address (``c`` may be a strided view of a larger output). Releases the GIL.

    ``points``: the axis of ``c`` whose entries are independent points (pixels). BLAS rounds the
    last ``count % unroll`` points of a call with other kernels, so the same point would get other
    bits in another chunking; the count's remainder modulo :data:`POINT_GROUP` is computed in a
    zero-padded group instead, and every point gets the bits of a whole group whatever the count
    (exact for float64 at one BLAS thread, as the kernels run; single precision BLAS also rounds by
    the call's size).
    """
    m, n = c.shape
    k = a.shape[1]
    if m == 0 or n == 0:
        return
    if points == 0:  # points as rows: c^T = b^T a^T has them as columns
        matmul_into(b.T, a.T, c.T, alpha, beta, points=1)
        return
    if points == 1 and n % POINT_GROUP:
        _padded_columns(a, b, c, alpha, beta)
        return
    func = _cblas_gemm(c.dtype)
    if func is None:
        result = scipy_blas.get_blas_funcs("gemm", dtype=c.dtype)(alpha, a, b, beta=beta, c=c, overwrite_c=1)
        if not np.shares_memory(result, c):  # the wrapper had to copy ``c``: write the result back
            c[...] = result
        return
    c_op, c_trans, ldc = _operand(c)
    if c_op is not c:
        raise ValueError("matmul_into needs an output BLAS can address (one unit stride)")
    if c_trans == _TRANS:  # a column-major c: compute c^T = b^T a^T, which is row-major
        matmul_into(b.T, a.T, c.T, alpha, beta)
        return
    a_op, a_trans, lda = _operand(a)
    b_op, b_trans, ldb = _operand(b)
    func(_ROW_MAJOR, a_trans, b_trans, m, n, k, alpha, a_op.ctypes.data, lda, b_op.ctypes.data, ldb, beta, c.ctypes.data, ldc)


def _padded_columns(a: np.ndarray, b: np.ndarray, c: np.ndarray, alpha: float, beta: float) -> None:
    """:func:`matmul_into` with the columns beyond the last whole :data:`POINT_GROUP` computed in a zero-padded
    group (buffers in the operands' own memory order, so that BLAS takes the path of the whole groups)."""
    n = c.shape[1]
    whole = n - n % POINT_GROUP
    if whole:
        matmul_into(a, b[:, :whole], c[:, :whole], alpha, beta)
    group, out = _zeros_like(b, POINT_GROUP), _zeros_like(c, POINT_GROUP)
    group[:, : n - whole] = b[:, whole:]
    if beta:
        out[:, : n - whole] = c[:, whole:]
    matmul_into(a, group, out, alpha, beta)
    c[:, whole:] = out[:, : n - whole]


def _zeros_like(x: np.ndarray, columns: int) -> np.ndarray:
    """Zeros of ``x``'s rows and ``columns`` columns, in ``x``'s memory order (column-major where its first axis has a unit stride)."""
    return np.zeros((x.shape[0], columns), x.dtype, order="F" if x.shape[0] > 1 and x.strides[0] == x.itemsize else "C")
