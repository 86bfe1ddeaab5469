"""Fit cost against the number of features d, beside scikit-learn's PCA, in one process.

The data: correlated Gaussian, ``X = G M`` with ``G`` (n x d) standard normal
and ``M`` a standard normal d x d matrix whose row ``k`` is scaled by
``1 / (1 + k)`` (a spectrum over many decades, as in the issue that asked for
this benchmark). For each d: ``PCA()`` (numpy's default BLAS threads),
``PCA()`` held at one thread (the like-for-like compute: the fit holds every
BLAS at one thread), ``PPA(degree=1)``, ``PPA(configuration="fixed")``
(candidate degrees 1..5, the options as given) and ``PPA()`` (the default: the
same, after validating its configuration on held-out groups), one warm-up each, then ``--repeat`` rounds calling them in turn; every run is
listed, and ratios are best (worst round) against ``PCA()``. Beside them, the BLAS threads each timed
``PPA(degree=1)`` run took (``ppa_xr.core.blas.product_threads``: one where other processes' load, the 1-minute load
average less this process's share, leaves no core idle), so a run on one thread reads as one; a slow run on two threads
is system time faulting in fresh memory (0.04-0.08 s at 20,000 x 425, in any round).

Memory: the peak of each fit call as ``tracemalloc`` sees it (numpy's
allocations are traced), beyond the input, which exists before the call; in
a pass of its own, so tracing does not slow the timed runs. Beside it,
``ppa_xr.core.ppa.fit_memory``'s estimate, which the estimator compares with
the memory available before it starts a fit.

    python benchmarks/bench_features.py [--n 20000] [--features 100 200 425 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import tracemalloc
from collections.abc import Callable

import numpy as np
from common import interleaved, machine, ratio, runs
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits

from ppa_xr import PPA
from ppa_xr.core import blas
from ppa_xr.core.ppa import fit_memory


def correlated_gaussian(n: int, d: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, d)) @ (rng.standard_normal((d, d)) / (1.0 + np.arange(d))[:, None])


def peak_bytes(fit: Callable[[], object]) -> int:
    """The largest traced allocation total during ``fit()``, beyond what was allocated before it."""
    tracemalloc.start()
    try:
        fit()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def pca_one_thread(X: np.ndarray) -> PCA:
    with threadpool_limits(1):
        return PCA().fit(X)


def recorded_threads(fit: Callable[[], object], taken: list[int | None]) -> Callable[[], object]:
    """``fit``, appending to ``taken`` the threads :func:`~ppa_xr.core.blas.product_threads` gave its first call (None: no call)."""
    def run() -> object:
        choose, given = blas.product_threads, []
        blas.product_threads = lambda: given.append(choose()) or given[-1]
        try:
            return fit()
        finally:
            blas.product_threads = choose
            taken.append(given[0] if given else None)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--features", type=int, nargs="+", default=[100, 200, 425, 1000])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    print(f"n = {args.n}; seconds of each interleaved run; PPA / PCA(): best (worst round); memory: tracemalloc peak beyond "
          "the input, in multiples of the input's size (8 n d bytes)")
    print("| d | PCA() (s) | PCA(), one thread (s) | PPA(degree=1) (s) | / PCA() | / one thread | fixed (s) | / PCA() | / one thread "
          "| PPA() (s) | / PCA() | / one thread | curved | memory: PCA() | PPA(degree=1) | fixed | PPA() | PPA() estimate | load "
          "| PPA(degree=1) threads |")
    print("|" + "---|" * 20)
    for d in args.features:
        X = correlated_gaussian(args.n, d)
        cases = {
            "pca": lambda X=X: PCA().fit(X), "pca1": lambda X=X: pca_one_thread(X),
            "linear": recorded_threads(lambda X=X: PPA(degree=1, random_state=0).fit(X), taken := []),
            "fixed": lambda X=X: PPA(configuration="fixed", random_state=0).fit(X), "ppa": lambda X=X: PPA(random_state=0).fit(X),
        }
        times = interleaved(cases, args.repeat)
        size = X.nbytes
        memory = {name: peak_bytes(fit) / size for name, fit in cases.items() if name != "pca1"}
        model = PPA(random_state=0).fit(X)
        estimate = fit_memory(*X.shape, model._get_spec()) / size
        cells = [runs(times["pca"]), runs(times["pca1"])]
        for name in ("linear", "fixed", "ppa"):
            cells += [runs(times[name]), ratio(times[name], times["pca"]), ratio(times[name], times["pca1"])]
        cells += [f"{int(np.sum(model.degrees_ > 1))} of {d - 1}", *(f"{memory[name]:.2f}x" for name in ("pca", "linear", "fixed", "ppa")),
                  f"{estimate:.2f}x", f"{os.getloadavg()[0]:.1f}", ", ".join(map(str, taken[1:1 + args.repeat]))]
        print(f"| {d} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
