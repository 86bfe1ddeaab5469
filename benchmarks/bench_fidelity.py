"""Out-of-sample fidelity on the bundled Landsat 8 scene: fit on one half, apply to the other.

For each split (left -> right, right -> left, top -> bottom, bottom -> top)
and seed, PPA is fitted through the xarray path on sampled pixels of the
fitting half, and the reconstruction error of every valid pixel of the other
half is compared with the PCA of the same fitting sample (``model.pca_``), as
``100 * e_PPA(k) / e_PCA(k)`` (``model.evaluate(X).relative``).

Two ways of validating the degrees are compared side by side on the same samples:

* ``blocks``: the default, whole spatial blocks held out (``groups`` from the sampler);
* ``random``: the same sample with rows held out at random (no ``groups``),
  where held-out neighbours share the fitting pixels' spatial autocorrelation.

Run by hand: ``python benchmarks/bench_fidelity.py [--seeds 10] [--n-samples 20000]``.
"""

from __future__ import annotations

import argparse

import numpy as np

from ppa_xr import PPA
from ppa_xr.datasets import open_landsat8_sample


def halves(cube, split: str):
    dim = "x" if split in ("left", "right") else "y"
    first, second = cube.isel({dim: slice(0, cube.sizes[dim] // 2)}), cube.isel({dim: slice(cube.sizes[dim] // 2, None)})
    return (first, second) if split in ("left", "top") else (second, first)


def pixels(cube) -> np.ndarray:
    X = cube.transpose("y", "x", "band").values.reshape(-1, cube.sizes["band"]).astype(np.float64)
    return X[np.isfinite(X).all(axis=1)]


def run(seeds: int, n_samples: int) -> dict[tuple[str, str], np.ndarray]:
    cube = open_landsat8_sample(masked=True)
    results = {}
    for split in ("left", "right", "top", "bottom"):
        fit_half, apply_half = halves(cube, split)
        unseen = pixels(apply_half)
        for how in ("blocks", "random"):
            curves = []
            for seed in range(seeds):
                X, groups = fit_half.ppa.sample(n_samples=n_samples, random_state=seed, return_groups=True)
                model = PPA(random_state=seed).fit(X, groups=groups if how == "blocks" else None)
                curves.append(model.evaluate(unseen).relative)
            results[(split, how)] = np.array(curves)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--n-samples", type=int, default=20_000)
    args = parser.parse_args()
    results = run(args.seeds, args.n_samples)
    print(f"100 x e_PPA / e_PCA on the unseen half, by retained components k; {args.seeds} seeds, {args.n_samples} samples")
    print("(mean over seeds; 'worst' = the largest single-seed value at any k)\n")
    print("| fit on -> apply to | validation | mean over k | worst k (mean) | worst (any seed) | k = 1 .. d-1 |")
    print("|---|---|---|---|---|---|")
    for (split, how), curves in results.items():
        other = {"left": "right", "right": "left", "top": "bottom", "bottom": "top"}[split]
        mean = curves.mean(axis=0)
        print(f"| {split} -> {other} | {how} | {mean.mean():.1f} | {mean.max():.1f} | {curves.max():.1f} | "
              + " ".join(f"{v:.1f}" for v in mean) + " |")


if __name__ == "__main__":
    main()
