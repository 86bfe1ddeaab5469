"""Fit cost against scikit-learn's PCA in the same process, on curved data of growing size.

The data: 3 uniform latents through sines, cosines and squares into ``d``
bands, plus 5% noise (a stand-in for a hyperspectral cube's smooth spectra).
PPA fits with candidate degrees 1..5 (the default), and its held-out
reconstruction error on another draw is printed beside PCA's
(``100 x e_PPA / e_PCA``, mean and worst over k). Sat (6,435 x 36, degrees
1..5) is timed against ``PCA(svd_solver="full")``; its held-out curve comes
from a fit on a random 80%.

Run by hand: ``python benchmarks/bench_fit.py [--sizes 200000x36 200000x198] [--repeat 3]``.
The machine and its BLAS threads are printed; PCA runs with numpy's default
threads, PPA's kernels hold scipy's BLAS at one thread (docs/performance.md).
Every run is listed, interleaved with the baseline's.
"""

from __future__ import annotations

import argparse
from functools import partial

import numpy as np
from sklearn.decomposition import PCA
from common import interleaved, machine, ratio, runs

from ppa_xr import PPA
from ppa_xr.datasets import load_table


def curved_cube(n: int, d: int, seed: int = 0, dtype=np.float64) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, (n, 3))
    waves = np.linspace(0.5, 3.0, d)
    X = np.sin(np.outer(t[:, 0], waves)) + np.cos(np.outer(t[:, 1], waves)) * 0.5 + np.outer(t[:, 2] ** 2, np.sqrt(waves))
    X += 0.05 * X.std() * rng.normal(size=(n, d))
    return X.astype(dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="*", default=["200000x36", "200000x198"], help="curved tables n x d (none: Sat only)")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    print("Seconds of each interleaved run; PPA / PCA: best (worst round)")
    print("| table | PPA fit (s) | baseline fit (s) | PPA / baseline | curved steps | held-out e_PPA/e_PCA mean (worst) |")
    print("|---|---|---|---|---|---|")
    sat = load_table("Sat").data
    tables = [(f"{size} curved, vs PCA()", curved_cube(*(int(v) for v in size.split("x"))), PCA, {}) for size in args.sizes]
    tables.append(("Sat 6435x36, degrees 1..5, vs PCA(svd_solver='full')", sat, partial(PCA, svd_solver="full"), {"degree": (1, 2, 3, 4, 5)}))
    for name, X, baseline, options in tables:
        times = interleaved({"ppa": lambda: PPA(random_state=0, **options).fit(X), "pca": lambda: baseline().fit(X)}, args.repeat)
        if "curved" in name:
            model, unseen = PPA(random_state=0, **options).fit(X), curved_cube(20_000, X.shape[1], seed=1)
        else:  # a table has no second draw: its held-out curve comes from a fit on a random 80%
            rows = np.random.default_rng(0).permutation(len(X))
            cut = int(0.8 * len(X))
            model, unseen = PPA(random_state=0, **options).fit(X[rows[:cut]]), X[rows[cut:]]
        curve = model.evaluate(unseen).relative
        print(f"| {name} | {runs(times['ppa'])} | {runs(times['pca'])} | {ratio(times['ppa'], times['pca'])} "
              f"| {int(np.sum(model.degrees_ > 1))} of {X.shape[1] - 1} | {curve.mean():.1f} ({curve.max():.1f}) |", flush=True)


if __name__ == "__main__":
    main()
