"""Scenes that differ from the fitting sample: spatial splits, the shift warning's false alarms, pooled fits.

Cells are ``100 x e_PPA(k) / e_PCA(k)`` (the PCA of the same fitting sample)
on pixels the fit never saw, k = 1..d-1, as in ``bench_generalize.py``:
"mean k" and "worst k" as mean over seeds (worst seed).

* ``spatial``: fit on one half of a bundled cube (``cube.ppa.fit``), apply to
  the other half (``cube.ppa.evaluate`` on all its pixels): abu-beach-4 (102
  bands, 5,000 pixels per half, all fitted), the Landsat 8 sample (10 bands,
  20,000 sampled pixels per fit) and the ERSST sample (36 months as features,
  ocean cells; north/south, east/west); settings: default, ``robust=True``,
  and ``degree=1`` (PCA: what to use where curves must not be trusted across
  scenes). "warned" counts the seeds on which the shift check
  (``model.evaluate(X).worse_at()``, what ``transform`` and the report run)
  flags PPA as worse at some k.
* ``alarms``: false alarms of the shift check on random splits, where the
  fitting and the applied pixels come from the same distribution: the share of
  (table, seed) pairs on which it fires, checking every k on 5,000 unseen rows.
* ``pooled``: one model fitted on both halves (:func:`ppa_xr.fit_pooled`),
  evaluated on the unseen pixels of each half.

Run by hand: ``python benchmarks/bench_shift.py [--seeds 3] [--only spatial,alarms,pooled]``.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
import xarray as xr

import ppa_xr
from ppa_xr import PPA
from ppa_xr.datasets import UCI_TABLES, load_table, open_abu_beach, open_ersst_sample, open_landsat8_sample
from ppa_xr.datasets.synthetic import make_curved_mixture

SETTINGS = {"default": {}, "robust": {"robust": True}, "PCA": {"degree": 1}}


def cubes() -> dict[str, tuple[xr.DataArray, str, int | None]]:
    """name -> (cube, feature dim, pixels sampled per fit)."""
    sst = open_ersst_sample().sst.load()
    return {
        "abu-beach-4": (open_abu_beach().reflectance.load(), "band", None),
        "Landsat 8": (open_landsat8_sample().load(), "band", 20_000),
        "ERSST": (sst, "time", None),
    }


def halves(cube: xr.DataArray, name: str):
    """(split name, fitting half, applied half) for both directions of two cuts."""
    rows, cols = ("lat", "lon") if name == "ERSST" else ("y", "x")
    cuts = {"top/bottom" if rows == "y" else "north/south": rows, "left/right" if cols == "x" else "east/west": cols}
    for label, dim in cuts.items():
        a, b = cube.isel({dim: slice(0, cube.sizes[dim] // 2)}), cube.isel({dim: slice(cube.sizes[dim] // 2, None)})
        first, second = label.split("/")
        yield f"{first} -> {second}", a, b
        yield f"{second} -> {first}", b, a


def summary(curves: list[np.ndarray]) -> str:
    means, worsts = np.array([c.mean() for c in curves]), np.array([c.max() for c in curves])
    return f"{means.mean():.1f} ({means.max():.1f}) | {worsts.mean():.1f} ({worsts.max():.1f})"


def spatial(seeds: int) -> None:
    print("\n## Spatial splits: fit on one half, apply to the other (mean k | worst k, mean over seeds (worst seed); warned)\n")
    print("| cube | split | " + " | ".join(SETTINGS) + " |")
    print("|---|---|" + "---|" * len(SETTINGS))
    totals = {name: [] for name in SETTINGS}
    for name, (cube, dim, n) in cubes().items():
        for split, fit_half, apply_half in halves(cube, name):
            cells = []
            for setting, params in SETTINGS.items():
                curves, warned = [], 0
                for seed in range(seeds):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")  # scale and short-sample warnings: the table says enough
                        model = fit_half.ppa.fit(dim, n_samples=n, random_state=seed, **params)
                        report = apply_half.ppa.evaluate(model, n_samples=1_000_000, dim=dim, random_state=seed)
                    curves.append(report.relative_error.values)
                    warned += bool(report.attrs["worse_at"])
                totals[setting] += curves
                cells.append(f"{summary(curves)}; {warned}/{seeds}")
            print(f"| {name} | {split} | " + " | ".join(cells) + " |", flush=True)
    print("| all | | " + " | ".join(summary(c) for c in totals.values()) + " |")


def random_tables(seed: int):
    """(name, fitting rows, unseen rows) of random splits of every table and cube."""
    for name, (cube, dim, n) in cubes().items():
        X = cube.transpose(..., dim).values.reshape(-1, cube.sizes[dim]).astype(np.float64)
        X = X[np.isfinite(X).all(axis=1)]
        order = np.random.default_rng(seed).permutation(len(X))
        fit = min(n or len(X) // 2, len(X) // 2)
        yield name, X[order[:fit]], X[order[fit:][:5000]]
    for table in UCI_TABLES:
        X = load_table(table).normalised()
        order = np.random.default_rng(seed).permutation(len(X))
        yield table, X[order[: len(X) // 2]], X[order[len(X) // 2 :][:5000]]
    data = make_curved_mixture(10_000, random_state=seed).data
    yield "synthetic 200 bands", data[:5000], data[5000:]


def alarms(seeds: int) -> None:
    print("\n## Shift check on random splits: false alarms (share of table x seed on which it fires, every k checked)\n")
    fired = {setting: [] for setting in ("default", "robust")}
    for seed in range(seeds):
        for name, fit, unseen in random_tables(seed):
            for setting in fired:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    model = PPA(random_state=seed, **SETTINGS[setting]).fit(fit)
                worse = model.evaluate(unseen).worse_at()
                fired[setting].append(len(worse) > 0)
                if len(worse):
                    print(f"  fired: {name}, seed {seed}, {setting}, k = {worse.tolist()}")
    for setting, flags in fired.items():
        print(f"| {setting} | {sum(flags)} of {len(flags)} = {100 * np.mean(flags):.1f}% |")


def pooled(seeds: int) -> None:
    print("\n## One model pooled over both halves, on the unseen pixels of each half (mean k | worst k)\n")
    print("| cube | cut | setting | first half | second half |")
    print("|---|---|---|---|---|")
    for name, (cube, dim, n) in cubes().items():
        splits = list(halves(cube, name))
        total = int(np.isfinite(cube).all(dim).sum())
        for split, a, b in splits[::2]:
            for setting in ("default", "robust"):
                curves = {0: [], 1: []}
                for seed in range(seeds):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        model = ppa_xr.fit_pooled([a, b], dim, n_samples=n or total // 2, random_state=seed, **SETTINGS[setting])
                        for i, half in enumerate((a, b)):
                            curves[i].append(half.ppa.evaluate(model, n_samples=1_000_000, dim=dim).relative_error.values)
                print(f"| {name} | {split.replace(' -> ', ' + ')} | {setting} | {summary(curves[0])} | {summary(curves[1])} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", default="spatial,alarms,pooled")
    args = parser.parse_args()
    for part in args.only.split(","):
        {"spatial": spatial, "alarms": alarms, "pooled": pooled}[part](args.seeds if part != "alarms" else 3 * args.seeds)


if __name__ == "__main__":
    main()
