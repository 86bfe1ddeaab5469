"""Defaults that hold on unseen pixels: today's default fit, the robust fit and the validated selection, against
the PCA of the same sample, on the half of every dataset the fit never saw.

Every cell is ``100 x e_PPA(k) / e_PCA(k)`` on the unseen half (``k = 1..d-1``,
``ppa_xr.core.errors.compare_errors``), errors below ``1e-9`` of the unseen
half's total variance counting as equal (ratio 100: Segmentation is rank
deficient, and its last k compare rounding noise). Per dataset and setting,
over the seeds: "mean k" is the mean over k, "worst k" the largest value at any
k, each as the mean over seeds and (in brackets) the worst seed.

Data (random 50/50 splits, seeds 0..seeds-1, the fit's ``random_state`` = the seed):

* ``abu-beach-4``: the bundled 102-band ROSIS scene, 10,000 px;
* ``Landsat``: the bundled Landsat 8 sample, 10 bands, pixels with a nodata 0 dropped;
* the paper's five UCI tables, normalised to [0, 1] as in the paper;
* ``synthetic + 1% anomalies`` / ``synthetic Student-t(2)``: 200-band
  :func:`~ppa_xr.datasets.synthetic.make_curved_mixture` draws of 10,000 px
  (``random_state`` = seed), the first 5,000 fitted, the last 5,000 unseen
  (as benchmarks/bench_generalize.py).

Settings: ``today`` is the default fit before the validated selection
(``configuration="fixed"``: degrees chosen per step, nothing else), ``robust``
``PPA(robust=True, configuration="fixed")``, ``new`` the default ``PPA()``
(``configuration="validated"``, :mod:`ppa_xr.core.candidates`). ``--gd`` adds
PPA-GD (``leading="gd"``) with today's and the new selection; the targets
compare it with the PCA-based ``new``.

Fit times: today's default against the new one (and the new one without its last curve's shrinkage,
``unshrunk``), interleaved in this process (one warm-up each, then ``--repeat`` rounds), on Sat (6,435 x 36; as stored, and scaled to [0, 1]
per feature as in the accuracy runs), on curved mixtures of 20,000 x 198, 200,000 x 36 and
200,000 x 198, and on the shared hyperspectral scenes where ``../shared/bench/scenes.py`` is at
hand (``--tables`` picks some).

Run by hand: ``python benchmarks/bench_defaults.py [--seeds 3] [--only abu,landsat,uci,synthetic] [--gd] [--no-times]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
from common import machine, ratio, runs

from ppa_xr import PPA
from ppa_xr.datasets import UCI_TABLES, load_table, open_abu_beach, open_landsat8_sample
from ppa_xr.datasets.synthetic import make_curved_mixture
from ppa_xr.core import shrink
from ppa_xr.core.errors import compare_errors

#: errors below this fraction of the unseen half's total variance count as equal (ratio 100)
EQUAL = 1e-9
FIXED = {"configuration": "fixed"}
SETTINGS = {"today": dict(FIXED), "robust": {**FIXED, "robust": True}, "new": {}}
GD_SETTINGS = {"GD today": {**FIXED, "leading": "gd"}, "GD new": {"leading": "gd"}}


def held_out_curve(model: PPA, unseen: np.ndarray) -> np.ndarray:
    """``100 e_PPA(k) / e_PCA(k)`` on ``unseen``, k = 1..d-1, errors below EQUAL of its total variance floored."""
    comparison = compare_errors(model.params_, unseen)
    centred = unseen - unseen.mean(axis=0)
    floor = EQUAL * np.mean(np.einsum("ij,ij->i", centred, centred))
    return 100 * np.maximum(comparison.ppa, floor) / np.maximum(comparison.pca, floor)


def random_halves(X: np.ndarray, seeds: int):
    for seed in range(seeds):
        order = np.random.default_rng(seed).permutation(len(X))
        yield seed, X[order[: len(X) // 2]], X[order[len(X) // 2:]]


def abu(seeds: int):
    cube = open_abu_beach().reflectance.transpose("y", "x", "band").values.astype(np.float64)
    return random_halves(cube.reshape(-1, cube.shape[-1]), seeds)


def landsat(seeds: int):
    cube = open_landsat8_sample().values
    pixels = cube.reshape(cube.shape[0], -1).T.astype(np.float64)
    return random_halves(pixels[(pixels != 0).all(axis=1)], seeds)


def uci(name: str):
    return lambda seeds: random_halves(load_table(name).normalised(), seeds)


def synthetic(case: dict):
    def splits(seeds: int):
        for seed in range(seeds):
            data = make_curved_mixture(10_000, random_state=seed, **case).data
            yield seed, data[:5000], data[5000:]
    return splits


DATASETS = {"abu-beach-4": ("abu", abu), "Landsat": ("landsat", landsat)}
DATASETS |= {name: ("uci", uci(name)) for name in UCI_TABLES}
DATASETS |= {"synthetic + 1% anomalies": ("synthetic", synthetic({"anomalies": 0.01})),
             "synthetic Student-t(2)": ("synthetic", synthetic({"noise": "student"}))}


def summary(curves: list[np.ndarray]) -> tuple[float, float, float, float]:
    means, worsts = np.array([c.mean() for c in curves]), np.array([c.max() for c in curves])
    return means.mean(), means.max(), worsts.mean(), worsts.max()


def cell(s: tuple[float, float, float, float]) -> str:
    return f"{s[0]:.1f} ({s[1]:.1f}) / {s[2]:.1f} ({s[3]:.1f})"


def clocked(cases: dict, repeat: int) -> dict[str, tuple[list[float], list[float]]]:
    """Wall and CPU seconds of every run: one warm-up each, then ``repeat`` rounds calling the cases in turn
    (as :func:`common.interleaved`). The CPU time (this process, BLAS held at one thread by the fit) is the
    steadier figure on a loaded machine."""
    for fn in cases.values():
        fn()
    times = {name: ([], []) for name in cases}
    for _ in range(repeat):
        for name, fn in cases.items():
            wall, cpu = time.perf_counter(), time.process_time()
            fn()
            times[name][0].append(time.perf_counter() - wall)
            times[name][1].append(time.process_time() - cpu)
    return times


def scenes() -> dict[str, np.ndarray]:
    """The shared hyperspectral scenes' pixels, where ``../shared/bench/scenes.py`` is at hand (none otherwise)."""
    found = [path for path in (os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench"), "/work/shared/bench")
             if os.path.exists(os.path.join(path, "scenes.py"))]
    if not found:
        return {}
    sys.path.insert(0, found[0])
    from scenes import SCENES, pixels  # noqa: PLC0415 (optional data)
    return {f"{name} scene, {len(X)} x {X.shape[1]}": X for name in ("samson (156)", "urban-sub (162)", "moffett (184)")
            for X in [pixels(SCENES[name]())]}


def time_tables(which: str) -> dict[str, np.ndarray]:
    tables = {"Sat 6435 x 36": lambda: load_table("Sat").data, "Sat scaled to [0, 1]": lambda: load_table("Sat").normalised(),
              "curved mixture 20000 x 198": lambda: make_curved_mixture(20_000, n_bands=198, random_state=0).data,
              "curved mixture 200000 x 36": lambda: make_curved_mixture(200_000, n_bands=36, random_state=0).data,
              "curved mixture 200000 x 198": lambda: make_curved_mixture(200_000, n_bands=198, random_state=0).data}
    chosen = {name: load() for name, load in tables.items() if which == "all" or name in which.split(",")}
    return chosen | (scenes() if which in ("all", "scenes") or "scene" in which else {})


def fit_times(repeat: int, which: str = "all") -> None:
    print("\nFit time, today's default against the new one, interleaved (seconds of every run; new / today: best (worst round))\n")
    print("| table | today wall (s) | new wall (s) | new / today, wall | new / today, CPU | unshrunk / today, CPU | choice | load |")
    print("|---|---|---|---|---|---|---|---|")
    for name, X in time_tables(which).items():
        times = clocked({"today": lambda: PPA(random_state=0, **SETTINGS["today"]).fit(X),
                         "new": lambda: PPA(random_state=0).fit(X), "unshrunk": lambda: unshrunk(X)}, repeat)
        choice = getattr(PPA(random_state=0).fit(X), "configuration_", None)
        print(f"| {name} | {runs(times['today'][0])} | {runs(times['new'][0])} | {ratio(times['new'][0], times['today'][0])} "
              f"| {ratio(times['new'][1], times['today'][1])} | {ratio(times['unshrunk'][1], times['today'][1])} | {choice} "
              f"| {os.getloadavg()[0]:.1f} |", flush=True)


def unshrunk(X: np.ndarray) -> PPA:
    """The default fit without its last curve's shrinkage (``ppa_xr.core.shrink.SHRINK`` off): what the shrinkage costs."""
    shrink.SHRINK = False
    try:
        return PPA(random_state=0).fit(X)
    finally:
        shrink.SHRINK = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--only", default="abu,landsat,uci,synthetic")
    parser.add_argument("--settings", default=",".join(SETTINGS), help="of: " + ",".join(SETTINGS))
    parser.add_argument("--gd", action="store_true", help="PPA-GD too (today's and the new selection)")
    parser.add_argument("--no-times", action="store_true")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tables", default="all", help="the timed tables: all, scenes, or names joined by commas")
    parser.add_argument("--save", help="write every curve and choice to this JSON file")
    args = parser.parse_args()
    print(machine())
    settings = {name: SETTINGS[name] for name in args.settings.split(",") if name}
    if args.gd:
        settings |= GD_SETTINGS
    parts = args.only.split(",")
    print(f"\n100 x e_PPA(k) / e_PCA(k) on the unseen half; {args.seeds} seeds; "
          "mean k: mean over seeds (worst seed) / worst k: mean over seeds (worst seed)\n")
    print("| data | " + " | ".join(settings) + " |")
    print("|---|" + "---|" * len(settings))
    saved: dict = {}
    for name, (part, splits) in DATASETS.items():
        if part not in parts:
            continue
        cells = []
        for setting, options in settings.items():
            curves, choices, seconds, inside = [], [], [], []
            for seed, fit, unseen in splits(args.seeds):
                start = time.perf_counter()
                model = PPA(random_state=seed, **options).fit(fit)
                seconds.append(time.perf_counter() - start)
                curves.append(held_out_curve(model, unseen))
                choices.append(getattr(model, "configuration_", None))
                inside.append(float(compare_errors(model.params_, fit).relative.max()))  # Property 2: never above 100 in sample
            cells.append(cell(summary(curves)))
            saved.setdefault(name, {})[setting] = {"curves": [c.tolist() for c in curves], "choices": choices, "seconds": seconds,
                                                   "in_sample_worst": inside}
        print(f"| {name} | " + " | ".join(cells) + " |", flush=True)
        for setting, v in saved[name].items():
            if any(c is not None and c.get("validated") for c in v["choices"]):
                shown = ", ".join(f"robust={c['robust']} max_curved={c['max_curved']}" for c in v["choices"])
                print(f"|   {setting}: chose {shown}; in sample, worst k {max(v['in_sample_worst']):.6f} |", flush=True)
    if args.save:
        with open(args.save, "w") as fh:
            json.dump(saved, fh)
    if not args.no_times:
        fit_times(args.repeat, args.tables)


if __name__ == "__main__":
    main()
