"""Noise-adjusted PPA against MNF and PCA: denoising a scene whose clean signal is known, and the noise estimate.

* ``denoise``: :func:`ppa_xr.datasets.synthetic.make_noisy_scene` (96 x 96
  pixels, 150 bands, 3 smooth curved latent factors, noise std varying 10x
  across bands). The noise covariance is estimated from shift differences of
  the whole cube; each method is fitted on 4,000 random pixels, its number of
  components k chosen on 2,000 others against the clean signal, and its
  error measured on the remaining 3,216 pixels: the squared error to the
  clean signal summed over bands, mean per pixel. Methods: PCA, MNF
  (``PPA(degree=1, noise_cov=N)``), noise-adjusted PPA (default and
  ``robust=True``). Mean over seeds (worst seed), and the curves of seed 0.
* ``estimate``: the shift-difference noise estimate against the true noise
  (estimated / true standard deviation per band, median and worst band), on
  the smooth scene and on one with sharp edges (``edges=True``).

Run by hand: ``python benchmarks/bench_mnf.py [--seeds 4] [--only denoise,estimate]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ppa_xr import PPA
from ppa_xr.datasets.synthetic import make_noisy_scene
from ppa_xr.cube.noise import shift_difference_covariance
from ppa_xr.cube.inputs import feature_array

K_MAX = 15


def methods(noise_cov: np.ndarray, seed: int) -> dict[str, PPA]:
    return {
        "PCA": PPA(degree=1),
        "MNF": PPA(degree=1, noise_cov=noise_cov),
        "noise-adjusted PPA": PPA(noise_cov=noise_cov, random_state=seed),
        "noise-adjusted PPA, robust": PPA(noise_cov=noise_cov, robust=True, random_state=seed),
    }


def errors(model: PPA, X: np.ndarray, S: np.ndarray) -> np.ndarray:
    """Squared error to the clean signal, summed over bands, mean per pixel, for k = 1..K_MAX."""
    return np.array([np.mean(np.sum((model.reconstruct(X, k) - S) ** 2, axis=1)) for k in range(1, K_MAX + 1)])


def denoise(seeds: int) -> None:
    best, curves, times = {}, {}, {}
    for seed in range(seeds):
        scene = make_noisy_scene(96, 96, random_state=seed)
        X = scene.cube.transpose("y", "x", "band").values.reshape(-1, 150)
        S = scene.signal.transpose("y", "x", "band").values.reshape(-1, 150)
        noise_cov = shift_difference_covariance(feature_array(scene.cube, "band"))
        order = np.random.default_rng(seed).permutation(len(X))
        fit, val, test = order[:4000], order[4000:6000], order[6000:]
        for name, model in methods(noise_cov, seed).items():
            start = time.perf_counter()
            model.fit(X[fit])
            times.setdefault(name, []).append(time.perf_counter() - start)
            k = int(np.argmin(errors(model, X[val], S[val]))) + 1
            curve = errors(model, X[test], S[test])
            best.setdefault(name, []).append((curve[k - 1], k))
            if seed == 0:
                curves[name] = curve
    print("\n## Denoising: error to the clean signal on unseen pixels at the validated k\n")
    print("| method | error, mean over seeds (worst) | k chosen per seed | fit time |")
    print("|---|---|---|---|")
    for name, values in best.items():
        e = np.array([v[0] for v in values])
        print(f"| {name} | {e.mean():.5f} ({e.max():.5f}) | {', '.join(str(v[1]) for v in values)} | {np.mean(times[name]):.2f} s |")
    print("\nSeed 0, error by k:\n")
    print("| method | " + " | ".join(f"k={k}" for k in range(1, 9)) + " |")
    print("|---|" + "---|" * 8)
    for name, curve in curves.items():
        print(f"| {name} | " + " | ".join(f"{v:.4f}" for v in curve[:8]) + " |")


def estimate(seeds: int) -> None:
    print("\n## Shift-difference noise estimate: estimated / true noise std per band (median, worst band; mean over seeds)\n")
    print("| scene | median | worst |")
    print("|---|---|---|")
    for edges in (False, True):
        medians, worsts = [], []
        for seed in range(seeds):
            scene = make_noisy_scene(96, 96, edges=edges, random_state=seed)
            ratio = np.sqrt(np.diag(shift_difference_covariance(feature_array(scene.cube, "band")))) / scene.noise_std
            medians.append(np.median(ratio))
            worsts.append(ratio.max())
        print(f"| {'sharp edges' if edges else 'smooth'} | {np.mean(medians):.3f} | {np.mean(worsts):.3f} ({np.max(worsts):.3f}) |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--only", default="denoise,estimate")
    args = parser.parse_args()
    for part in args.only.split(","):
        {"denoise": denoise, "estimate": estimate}[part](args.seeds)


if __name__ == "__main__":
    main()
