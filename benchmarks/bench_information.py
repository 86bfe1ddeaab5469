"""Entropy and multi-information estimates against known truth.

1. Marginal entropies (bits) of Gaussian, uniform, lognormal, Student-t(3) and
   x^3-of-Gaussian samples, whose true entropies are known in closed form or by
   change of variables, with both estimators: the error per marginal.
2. Gaussian data with a known covariance ``C``: PCA removes exactly the total
   correlation ``TC = 1/2 (sum log diag C - log det C)``. The PCA fitted on
   ``n`` samples is measured on the same samples (in sample) and on ``n``
   others (held out); the table gives the estimate minus TC, in bits.
3. Quantized bands: the Gaussian of 2. (d = 10) and the same dependence with
   uniform marginals (a Gaussian copula), each band quantized to L equal cells
   over its range, n = 50,000 to fit a PCA and 50,000 held out: the
   dequantized estimate against the true TC (Gaussian, percent) or the
   estimate before quantization (uniform, bits: its total can be near 0), mean
   and worst of 5 covariances.
4. The cost of ``information_report`` (computed: totals, per-component curves
   and the four per-pixel maps) against one forward transform of the same
   pixels, on a curved 198-band table (``bench_fit.curved_cube``).

Run by hand: ``python benchmarks/bench_information.py [--max-n 1000000] [--dims 10 36 100 198] [--only report,quantized,truth]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import betaln, digamma

from ppa_xr import PPA
from ppa_xr.information import ESTIMATORS, information_report, marginal_entropy, multi_information_reduction

LN2 = np.log(2)
GAUSS = 0.5 * np.log2(2 * np.pi * np.e)
TRUTH = {
    "Gaussian": GAUSS,
    "uniform": 0.0,
    "lognormal": GAUSS,
    "Student-t(3)": (2 * (digamma(2) - digamma(1.5)) + np.log(np.sqrt(3)) + betaln(1.5, 0.5)) / LN2,
    "x^3 of Gaussian": GAUSS + (np.log(3) - (np.euler_gamma + np.log(2))) / LN2,
}


def marginal_table(sizes: list[int]) -> None:
    print("Marginal entropy error (estimate - truth, bits), mean of 3 samples")
    print("| n | estimator | " + " | ".join(TRUTH) + " |")
    print("|---|---|" + "---|" * len(TRUTH))
    for n in sizes:
        errors = {e: [] for e in ESTIMATORS}
        for seed in range(3):
            rng = np.random.default_rng(seed)
            z = rng.normal(size=(n, 5))
            X = np.column_stack([z[:, 0], rng.uniform(size=n), np.exp(z[:, 2]), rng.standard_t(3, size=n), z[:, 4] ** 3])
            for e in ESTIMATORS:
                errors[e].append(marginal_entropy(X, e) - np.array(list(TRUTH.values())))
        for e, values in errors.items():
            print(f"| {n:.0e} | {e} | " + " | ".join(f"{v:+.3f}" for v in np.mean(values, axis=0)) + " |", flush=True)


def gaussian(d: int, n: int, seed: int) -> tuple[np.ndarray, float]:
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d)) / np.sqrt(d) + np.eye(d)
    cov = A @ A.T
    tc = 0.5 * (np.sum(np.log(np.diag(cov))) - np.linalg.slogdet(cov)[1]) / LN2
    return rng.standard_normal((n, d)) @ np.linalg.cholesky(cov).T, tc


def total_correlation_table(dims: list[int], sizes: list[int]) -> None:
    print("\nGaussian total correlation TC removed by PCA: estimate - TC in bits (spacing estimator);")
    print("bias formula d (d - 1) / (4 n ln 2) for the in-sample excess")
    print("| d | n | TC (bits) | in sample | held out | held out % of TC | formula | seconds |")
    print("|---|---|---|---|---|---|---|---|")
    for d in dims:
        for n in sizes:
            start = time.perf_counter()
            X, tc = gaussian(d, 2 * n, d)
            pca = PPA(degree=1).fit(X[:n])
            inside = multi_information_reduction(X[:n], pca.transform(X[:n])).total
            held = multi_information_reduction(X[n:], pca.transform(X[n:])).total
            formula = d * (d - 1) / (4 * n * LN2)
            print(f"| {d} | {n:.0e} | {tc:.2f} | {inside - tc:+.3f} | {held - tc:+.3f} | {100 * (held - tc) / tc:+.2f} "
                  f"| {formula:.3f} | {time.perf_counter() - start:.0f} |", flush=True)


def quantized_table(levels=(4096, 256, 64, 16), seeds: int = 5) -> None:
    from scipy.stats import norm

    print("\nQuantized bands, d = 10: dequantized estimate minus reference (mean over 5 covariances; worst)")
    print("| marginals | reference | " + " | ".join(f"L = {L}" for L in levels) + " |")
    print("|---|---|" + "---|" * len(levels))
    for name in ("Gaussian", "uniform"):
        errors = {L: [] for L in levels}
        for seed in range(seeds):
            X, tc = gaussian(10, 100_000, seed)
            if name == "uniform":
                X = norm.cdf(X / X.std(axis=0))
                tc = multi_information_reduction(X[50_000:], PPA(degree=1).fit(X[:50_000])).total
            low, high = X.min(axis=0), X.max(axis=0)
            for L in levels:
                Q = np.minimum(np.floor((X - low) / (high - low) * L), L - 1)
                estimate = multi_information_reduction(Q[50_000:], PPA(degree=1).fit(Q[:50_000])).total
                errors[L].append(100 * (estimate / tc - 1) if name == "Gaussian" else estimate - tc)
        reference = "true TC, % of it" if name == "Gaussian" else "estimate unquantized, bits (total)"
        digits = 1 if name == "Gaussian" else 3
        cells = [f"{np.mean(e):+.{digits}f} ({max(e, key=abs):+.{digits}f})" for e in errors.values()]
        print(f"| {name} | {reference} | " + " | ".join(cells) + " |", flush=True)


def report_cost(sizes: list[tuple[int, int]], repeat: int = 3) -> None:
    """``information_report`` on a dask-backed (pixel, band) cube: the report itself (its sample, densities,
    totals and per-k curves; the maps stay lazy) and computed with its four per-pixel maps."""
    import xarray as xr
    from bench_fit import best_time, curved_cube

    print("\n| pixels x bands | forward transform | report (maps lazy) | ratio | report computed with maps | ratio |")
    print("|---|---|---|---|---|---|")
    for n, d in sizes:
        X = curved_cube(2 * n, d)
        model = PPA(random_state=0).fit(X[:n])
        cube = xr.DataArray(X[n:], dims=("pixel", "band")).chunk({"pixel": n // 4})
        t_forward, _ = best_time(lambda: cube.ppa.transform(model, check=False).compute(), repeat)
        t_lazy, _ = best_time(lambda: information_report(cube, model, n_samples=n), repeat)
        t_report, _ = best_time(lambda: information_report(cube, model, n_samples=n).compute(), repeat)
        print(f"| {n} x {d} | {t_forward:.3f} s | {t_lazy:.3f} s | {t_lazy / t_forward:.1f}x | {t_report:.3f} s "
              f"| {t_report / t_forward:.1f}x |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--max-n", type=int, default=1_000_000)
    parser.add_argument("--dims", type=int, nargs="+", default=[10, 36, 100, 198])
    parser.add_argument("--only", default="report,quantized,truth", help="parts to run (comma separated)")
    args = parser.parse_args()
    parts = args.only.split(",")
    if "report" in parts:
        report_cost([(10_000, 198), (100_000, 36)])
    if "quantized" in parts:
        quantized_table()
    if "truth" in parts:
        sizes = [n for n in (10_000, 100_000, 1_000_000) if n <= args.max_n]
        marginal_table(sizes)
        total_correlation_table(args.dims, sizes)


if __name__ == "__main__":
    main()
