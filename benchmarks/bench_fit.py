"""Fit cost against scikit-learn's PCA in the same process, on curved data of growing size.

The data: 3 uniform latents through sines, cosines and squares into ``d``
bands, plus 5% noise (a stand-in for a hyperspectral cube's smooth spectra).
PPA fits with candidate degrees 1..5 (the default), and its held-out
reconstruction error on another draw is printed beside PCA's
(``100 x e_PPA / e_PCA``, mean and worst over k).

Run by hand: ``python benchmarks/bench_fit.py [--sizes 200000x36 200000x198] [--repeat 3]``.
BLAS threads are reported; PCA runs with numpy's default threads, PPA's kernels
hold scipy's BLAS at one thread (docs/performance.md).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_info

from ppa_xr import PPA
from ppa_xr.evaluation import relative_error_curve


def curved_cube(n: int, d: int, seed: int = 0, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, (n, 3))
    waves = np.linspace(0.5, 3.0, d)
    X = np.sin(np.outer(t[:, 0], waves)) + np.cos(np.outer(t[:, 1], waves)) * 0.5 + np.outer(t[:, 2] ** 2, np.sqrt(waves))
    X += 0.05 * X.std() * rng.normal(size=(n, d))
    return X.astype(dtype)


def best_time(fn, repeat: int) -> tuple[float, object]:
    best, result = np.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=["200000x36", "200000x198"])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print("BLAS:", "; ".join(f"{i['internal_api']} {i['num_threads']} threads ({i['filepath'].split('/')[-1]})" for i in threadpool_info() if i["user_api"] == "blas"))
    print("| n x d | PPA fit (s) | PCA() fit (s) | ratio | curved steps | held-out e_PPA/e_PCA mean (worst) |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        n, d = (int(v) for v in size.split("x"))
        X, unseen = curved_cube(n, d), curved_cube(20_000, d, seed=1)
        t_pca, _ = best_time(lambda: PCA().fit(X), args.repeat)
        t_ppa, model = best_time(lambda: PPA(random_state=0).fit(X), args.repeat)
        curve = relative_error_curve(model, unseen)
        print(f"| {n} x {d} | {t_ppa:.2f} | {t_pca:.3f} | {t_ppa / t_pca:.1f}x | {int(np.sum(model.degrees_ > 1))} of {d - 1} "
              f"| {curve.mean():.1f} ({curve.max():.1f}) |", flush=True)


if __name__ == "__main__":
    main()
