"""The numpy core against scikit-learn's PCA in the same process, and its efficiency against its flop count.

1. Transform and inverse of a float32 table (2e6 x 36 drawn around Sat) with
   the Sat model (degrees selected in 1..5) and with ``degree=5`` on every
   step (fitted on 100,000 rows of the curved table of ``bench_fit.py``),
   against ``PCA().fit`` on the same rows **in float32**, so that its
   transform stays float32 as ours does. Both at the machine's threads: the
   kernels run one thread per core over pixels, scikit-learn numpy's BLAS.
2. Efficiency: every degree mix on one thread (kernels ``threads=1``, BLAS at
   one thread), 500,000 x 36 float32. The time the flop count implies is
   ``flops per pixel x pixels / rate``, ``rate`` the measured single-thread
   sgemm rate at the kernels' block shape; efficiency = measured / implied
   (1.00: as fast as its GEMMs at full speed; target at most 1.25). A plain
   numpy projection ``x V^T - V mean`` at one BLAS thread is the reference:
   it streams the same bytes.

Every run is listed; the runs of a case and its baseline are interleaved.

Run by hand: ``python benchmarks/bench_core.py [--pixels 2000000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse

import numpy as np
from bench_fit import curved_cube
from common import forward_flops, gemm_rate, interleaved, inverse_flops, machine, ratio, runs
from sklearn.decomposition import PCA
from threadpoolctl import threadpool_limits

from ppa_xr import PPA
from ppa_xr.core import blas, kernels
from ppa_xr.datasets import load_table


def against_pca(pixels: int, repeat: int) -> None:
    X = load_table("Sat").data
    rng = np.random.default_rng(0)
    table = (X[rng.integers(0, len(X), pixels)] + rng.normal(0, 1, (pixels, X.shape[1]))).astype(np.float32)
    curved = curved_cube(100_000, 36)
    curved_table = curved_cube(pixels, 36, seed=1, dtype=np.float32)
    print(f"\n1. Against scikit-learn's PCA fitted in float32, {pixels} x 36 float32: seconds of each run; PPA / PCA best (worst)")
    print("| case | PPA (s) | PCA (s) | PPA / PCA |\n|---|---|---|---|")
    for name, ppa, pca, data in (
        ("Sat model", PPA(degree=(1, 2, 3, 4, 5), random_state=0).fit(X), PCA().fit(X.astype(np.float32)), table),
        ("degree 5 on every step", PPA(degree=5).fit(curved), PCA().fit(curved.astype(np.float32)), curved_table),
    ):
        R_ppa, R_pca = ppa.transform(data), pca.transform(data)
        assert R_pca.dtype == np.float32 and R_ppa.dtype == np.float32
        times = interleaved({
            "ppa forward": lambda: ppa.transform(data), "pca forward": lambda: pca.transform(data),
            "ppa inverse": lambda: ppa.inverse_transform(R_ppa), "pca inverse": lambda: pca.inverse_transform(R_pca),
        }, repeat)
        curved_steps = int(np.sum(ppa.degrees_ > 1))
        for step in ("forward", "inverse"):
            ours, theirs = times[f"ppa {step}"], times[f"pca {step}"]
            print(f"| {step}, {name} ({curved_steps} curved steps) | {runs(ours)} | {runs(theirs)} | {ratio(ours, theirs)} |", flush=True)


def efficiency(repeat: int) -> None:
    rate = gemm_rate()
    curved = curved_cube(100_000, 36)
    table = curved_cube(500_000, 36, seed=1, dtype=np.float32)
    models = {f"degree={g} on every step": PPA(degree=g).fit(curved) for g in (1, 2, 3, 5)}
    models["degrees 1..5 selected (Sat)"] = PPA(degree=(1, 2, 3, 4, 5), random_state=0).fit(load_table("Sat").data)
    print(f"\n2. Efficiency on one thread, 500,000 x 36 float32; sgemm {rate / 1e9:.1f} GFLOP/s per thread at 36 x 36 x 16384")
    print("| degrees | curved steps | map | flops / pixel | flops / PCA's | implied (s) | measured (s) | time / PCA's | efficiency (worst) |")
    print("|---|---|---|---|---|---|---|---|---|")
    pca = models["degree=1 on every step"]
    V, shift = pca.components_.astype(np.float32), (pca.components_ @ pca.mean_).astype(np.float32)
    with threadpool_limits(limits=1, user_api="blas"):
        plain = interleaved({"projection": lambda: np.subtract(table @ V.T, shift)}, repeat)["projection"]
    implied = 2 * 36 * 36 * len(table) / rate
    print(f"| plain projection, numpy at one BLAS thread | 0 | forward | {2 * 36 * 36} | 1.00 | {implied:.3f} | {runs(plain)} | - "
          f"| {min(plain) / implied:.2f} ({max(plain) / implied:.2f}) |", flush=True)
    pca_time = {}
    for name, model in models.items():
        params = model.params_.cast(np.float32)
        R = kernels.forward(table, params, threads=1)
        with blas.single_thread:
            times = interleaved({"forward": lambda: kernels.forward(table, params, threads=1),
                                 "inverse": lambda: kernels.inverse(R, params, threads=1)}, repeat)
        for step, count in (("forward", forward_flops), ("inverse", inverse_flops)):
            flops = count(model.degrees_)
            implied = flops * len(table) / rate
            pca_time.setdefault(step, min(times[step]))  # degree=1 comes first
            print(f"| {name} | {int(np.sum(model.degrees_ > 1))} | {step} | {flops:.0f} | {flops / (2 * 36 * 36):.2f} | {implied:.3f} "
                  f"| {runs(times[step])} | {min(times[step]) / pca_time[step]:.2f} | {min(times[step]) / implied:.2f} ({max(times[step]) / implied:.2f}) |",
                  flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pixels", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(machine())
    against_pca(args.pixels, args.repeat)
    efficiency(args.repeat)


if __name__ == "__main__":
    main()
