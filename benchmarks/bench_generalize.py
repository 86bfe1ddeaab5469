"""Do PPA's curves generalize? Default and robust fits against the PCA of the same sample, on unseen pixels.

Cells are ``100 x e_PPA(k) / e_PCA(k)`` on pixels the fit never saw
(``model.evaluate(X).relative``), k = 1..d-1, summarised
over seeds: "mean k" is the mean over k (mean over seeds, and the worst
seed), "worst k" the largest value at any k (mean over seeds of each seed's
worst, and the worst seed), "k 1-10" the mean over the first ten k.

* ``synthetic``: :func:`ppa_xr.datasets.synthetic.make_curved_mixture`, 200
  bands, 8 curved materials, band-dependent noise; 5,000 pixels to fit and
  5,000 unseen; Gaussian noise, + 1% anomalous pixels, Student-t(2) noise.
* ``abu-beach-4``: the bundled 102-band ROSIS scene, random halves (5,000
  pixels each) and spatial halves (left/right, top/bottom, both directions).
* ``paper``: the UCI tables of the paper, normalised, random 50/50 splits.
* ``gd``: PPA-GD against the PCA-based fit on abu-beach-4 random halves:
  fit time ratio, held-out curve, and Property 2 in sample.

Run by hand: ``python benchmarks/bench_generalize.py [--seeds 4] [--only synthetic,abu,paper,gd]``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ppa_xr import PPA
from ppa_xr.datasets import UCI_TABLES, load_table, open_abu_beach
from ppa_xr.datasets.synthetic import make_curved_mixture

SETTINGS = {"default": {}, "robust": {"robust": True}}
SYNTHETIC = {"Gaussian noise": {}, "+ 1% anomalies": {"anomalies": 0.01}, "Student-t(2) noise": {"noise": "student"}}


def summary(curves: list[np.ndarray]) -> str:
    means, worsts = np.array([c.mean() for c in curves]), np.array([c.max() for c in curves])
    firsts = np.array([c[:10].mean() for c in curves])
    return f"{means.mean():.1f} ({means.max():.1f}) | {worsts.mean():.1f} ({worsts.max():.1f}) | {firsts.mean():.1f}"


def curves_of(splits, settings: dict) -> list[np.ndarray]:
    return [PPA(random_state=seed, **settings).fit(fit).evaluate(unseen).relative for seed, fit, unseen in splits]


def synthetic_splits(case: dict, seeds: int):
    for seed in range(seeds):
        data = make_curved_mixture(10_000, random_state=seed, **case).data
        yield seed, data[:5000], data[5000:]


def abu_splits(split: str, seeds: int):
    cube = open_abu_beach().reflectance.transpose("y", "x", "band").values.astype(np.float64)
    pixels = cube.reshape(-1, cube.shape[-1])
    for seed in range(seeds):
        if split == "random":
            order = np.random.default_rng(seed).permutation(len(pixels))
            yield seed, pixels[order[:5000]], pixels[order[5000:]]
        else:
            axis = 1 if split == "left/right" else 0
            halves = [h.reshape(-1, cube.shape[-1]) for h in np.array_split(cube, 2, axis=axis)]
            yield seed, halves[seed % 2], halves[1 - seed % 2]


def paper_splits(name: str, seeds: int):
    X = load_table(name).normalised()
    for seed in range(seeds):
        order = np.random.default_rng(seed).permutation(len(X))
        yield seed, X[order[: len(X) // 2]], X[order[len(X) // 2:]]


def table(title: str, rows: dict[str, callable], seeds: int) -> None:
    print(f"\n{title}; {seeds} seeds; mean k (worst seed) | worst k (worst seed) | k 1-10\n")
    print("| data | " + " | ".join(SETTINGS) + " |")
    print("|---|" + "---|" * len(SETTINGS))
    for name, splits in rows.items():
        print(f"| {name} | " + " | ".join(summary(curves_of(splits(seeds), s)) for s in SETTINGS.values()) + " |", flush=True)


def gd(seeds: int) -> None:
    print(f"\nPPA-GD on abu-beach-4 random halves (102 bands, 5,000 pixels); {seeds} seeds\n")
    print("| seed | fit GD / fit PCA-based | GD held out: mean k, worst k | PCA-based: mean k, worst k | GD in sample, worst k |")
    print("|---|---|---|---|---|")
    for seed, fit, unseen in abu_splits("random", seeds):
        times, models = [], []
        for leading in ("gd", "pca"):
            start = time.perf_counter()
            models.append(PPA(leading=leading, random_state=seed).fit(fit))
            times.append(time.perf_counter() - start)
        held = [m.evaluate(unseen).relative for m in models]
        inside = models[0].evaluate(fit).relative
        print(f"| {seed} | {times[0]:.2f} s / {times[1]:.2f} s = {times[0] / times[1]:.1f}x | {held[0].mean():.1f}, {held[0].max():.1f} | "
              f"{held[1].mean():.1f}, {held[1].max():.1f} | {inside.max():.2f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--only", default="synthetic,abu,paper,gd")
    args = parser.parse_args()
    parts = args.only.split(",")
    if "synthetic" in parts:
        table("Synthetic, 200 bands, 8 curved materials, 5,000 fit / 5,000 unseen",
              {name: (lambda s, c=case: synthetic_splits(c, s)) for name, case in SYNTHETIC.items()}, args.seeds)
    if "abu" in parts:
        table("abu-beach-4, 102 bands", {split: (lambda s, p=split: abu_splits(p, s)) for split in ("random", "left/right", "top/bottom")}, args.seeds)
    if "paper" in parts:
        table("The paper's UCI tables, random halves", {name: (lambda s, n=name: paper_splits(n, s)) for name in UCI_TABLES}, args.seeds)
    if "gd" in parts:
        gd(args.seeds)


if __name__ == "__main__":
    main()
