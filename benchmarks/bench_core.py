"""PPA vs scikit-learn PCA in the same process: fit on Sat, transform / inverse on 2e6 x 36 float32,
for the Sat model (degrees selected in 1..5) and for the worst case, ``degree=5`` on every step
(fitted on 100,000 rows of the curved 36-band table of ``bench_fit.py``).

Run by hand: ``python benchmarks/bench_core.py``. Prints best-of-N wall times
and the ratios PPA / PCA.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.decomposition import PCA

from bench_fit import curved_cube

from ppa_xr import PPA
from ppa_xr.datasets import load_table


def best_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pixels", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    X = load_table("Sat").data
    rows = []
    t_ppa = best_time(lambda: PPA(degree=(1, 2, 3, 4, 5), random_state=0).fit(X), args.repeat)
    for solver in ("auto", "full"):
        t_pca = best_time(lambda: PCA(svd_solver=solver).fit(X), args.repeat)
        rows.append((f"fit Sat 6435x36, degrees 1..5 (PCA svd_solver={solver})", t_ppa, t_pca))

    # a big float32 table drawn around the Sat distribution
    rng = np.random.default_rng(0)
    big = (X[rng.integers(0, len(X), args.pixels)] + rng.normal(0, 1, (args.pixels, X.shape[1]))).astype(np.float32)
    ppa = PPA(degree=(1, 2, 3, 4, 5), random_state=0).fit(X)
    pca = PCA().fit(X)
    R_ppa, R_pca = ppa.transform(big), pca.transform(big)
    rows.append((f"transform {args.pixels}x36 float32", best_time(lambda: ppa.transform(big), args.repeat), best_time(lambda: pca.transform(big), args.repeat)))
    rows.append((f"inverse   {args.pixels}x36 float32", best_time(lambda: ppa.inverse_transform(R_ppa), args.repeat), best_time(lambda: pca.inverse_transform(R_pca), args.repeat)))

    curved = curved_cube(100_000, 36)
    table = curved_cube(args.pixels, 36, seed=1, dtype=np.float32)
    every = PPA(degree=5).fit(curved)
    pca5 = PCA().fit(curved)
    R_every, R_pca5 = every.transform(table), pca5.transform(table)
    rows.append((f"transform {args.pixels}x36 float32, degree 5 on every step", best_time(lambda: every.transform(table), args.repeat),
                 best_time(lambda: pca5.transform(table), args.repeat)))
    rows.append((f"inverse   {args.pixels}x36 float32, degree 5 on every step", best_time(lambda: every.inverse_transform(R_every), args.repeat),
                 best_time(lambda: pca5.inverse_transform(R_pca5), args.repeat)))

    print(f"degrees selected on Sat: {' '.join(map(str, ppa.degrees_))}; curved table: {int(np.sum(every.degrees_ == 5))} of 35 steps at degree 5")
    print(f"{'case':<58} {'PPA s':>9} {'PCA s':>9} {'PPA/PCA':>8}")
    for name, a, b in rows:
        print(f"{name:<58} {a:9.4f} {b:9.4f} {a / b:8.2f}")


if __name__ == "__main__":
    main()
