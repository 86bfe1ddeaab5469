"""Gap filling: fidelity against the best linear fill and temporal interpolation on real scenes, and speed per chunk.

    PYTHONPATH=. python benchmarks/bench_fill.py [fidelity|speed|all]

Fidelity protocol (``../shared`` scenes, read with ``../shared/bench/scenes.py``'s loaders):

* multispectral (Landsat 5, BigEarthNet Sentinel-2 patches) and MODIS NDVI: complete pixels split at random in
  halves (seeds 0, 1, 2); PPA fitted on one half; on the other a random quarter of each pixel's bands hidden (at
  least one kept); MSE of the hidden values against ``best_linear_fill`` (the conditional mean under the
  training half's mean and covariance) and, for time series, per-pixel temporal interpolation;
* the eo-learn NDVI series (68 dates, no pixel clear on every date): pixels split at random in halves; the fit
  with ``missing="fill"`` on one half; on the other, clear values hidden under the scene's own cloud masks
  rolled by half the scene (in y and x); the linear baseline is the same EM fit with ``degree=1`` (no complete
  training pixel exists for ``best_linear_fill``'s covariance).

Results go to ``benchmarks/results/fill.txt``.
"""

from __future__ import annotations

import glob
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "shared", "bench"))
sys.path.insert(0, "/work/shared/bench")

from ppa_xr import PPA  # noqa: E402
from ppa_xr.core import kernels  # noqa: E402
from ppa_xr.core.fill import fill  # noqa: E402

SEEDS = (0, 1, 2)
#: the share of clear pixels a date of the cloudy series needs to be kept
MIN_CLEAR = 0.05
RESULTS = os.path.join(HERE, "results", "fill.txt")


def bigearthnet() -> np.ndarray:
    """The BigEarthNet patches at 20 m as (pixels, 10): the six 20 m bands and the four 10 m ones averaged 2 x 2."""
    import rasterio

    from scenes import DATA

    rows = []
    for folder in sorted(glob.glob(os.path.join(DATA, "ms_s2_bigearthnet", "s2-tiny", "*"))):
        bands = []
        for name in ("B02", "B03", "B04", "B08", "B05", "B06", "B07", "B8A", "B11", "B12"):
            with rasterio.open(glob.glob(os.path.join(folder, f"*_{name}.tif"))[0]) as src:
                a = src.read(1).astype(np.float64)
            if a.shape[0] == 120:
                a = a.reshape(60, 2, 60, 2).mean(axis=(1, 3))
            bands.append(a)
        rows.append(np.stack(bands, -1).reshape(-1, 10))
    return np.concatenate(rows)


def hide_quarter(X: np.ndarray, seed: int) -> np.ndarray:
    """Observed entries: a random quarter of each row's values hidden (rounded), at least one kept."""
    rng = np.random.default_rng(seed + 100)
    d = X.shape[1]
    hide = max(1, int(round(d / 4)))
    order = np.argsort(rng.random(X.shape), axis=1)
    observed = np.ones(X.shape, bool)
    np.put_along_axis(observed, order[:, :hide], False, axis=1)
    return observed


def temporal(X: np.ndarray, observed: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Per-pixel linear interpolation in time of the observed values (the nearest observed value beyond the ends)."""
    out = np.array(X, dtype=np.float64)
    for i in range(len(X)):
        o = observed[i]
        if o.any() and not o.all():
            out[i, ~o] = np.interp(times[~o], times[o], X[i, o])
    return out


def mse(filled: np.ndarray, truth: np.ndarray, hidden: np.ndarray) -> float:
    return float(np.mean((filled - truth)[hidden] ** 2))


def complete_scene(name: str, X: np.ndarray, times: np.ndarray | None, out: list[str]) -> list[float]:
    """The random-quarter protocol on complete pixels; returns PPA/best-linear MSE ratios per seed."""
    from scenes import best_linear_fill, random_halves

    ratios = []
    for seed in SEEDS:
        train, test = random_halves(X, seed)
        test = test[:5000]
        observed = hide_quarter(test, seed)
        gappy = np.where(observed, test, np.nan)
        model = PPA(random_state=0).fit(train)
        start = time.perf_counter()
        ppa = model.fill(gappy)
        seconds = time.perf_counter() - start
        linear = best_linear_fill(train, gappy, observed)
        e_ppa, e_lin, e_pca = mse(ppa, test, ~observed), mse(linear, test, ~observed), mse(model.pca_.fill(gappy), test, ~observed)
        k_fills = {k: mse(model.fill(gappy, n_components=k), test, ~observed) / e_lin for k in range(2, min(X.shape[1], 6))}
        line = (f"{name:28s} seed {seed}: PPA fill MSE / best linear {e_ppa / e_lin:6.3f}  (its PCA's {e_pca / e_lin:6.3f}; "
                f"k-manifold fills {', '.join(f'k={k}: {v:.3f}' for k, v in k_fills.items())}; degrees {model.degrees_.tolist()}; "
                f"{len(test)} pixels in {seconds:.2f} s)")
        if times is not None:
            e_time = mse(temporal(gappy, observed, times), test, ~observed)
            line += f"\n{'':28s}         RMSE / temporal interpolation {np.sqrt(e_ppa / e_time):6.3f}, best linear's {np.sqrt(e_lin / e_time):6.3f}"
        print(line, flush=True)
        out.append(line)
        ratios.append(e_ppa / e_lin)
    return ratios


def no_complete_pixel(name: str, X: np.ndarray, out: list[str]) -> None:
    """A stack with no complete pixel: each training pixel loses one band at random and a quarter of the others;
    the fill of a model fitted with missing='fill' on it against that of a model fitted on the complete pixels."""
    from scenes import random_halves

    for seed in SEEDS:
        train, test = random_halves(X, seed)
        test = test[:3000]
        rng = np.random.default_rng(seed + 200)
        gaps = rng.random(train.shape) < 0.25
        gaps[np.arange(len(train)), rng.integers(0, X.shape[1], len(train))] = True
        observed = hide_quarter(test, seed)
        gappy = np.where(observed, test, np.nan)
        filled_fit = PPA(random_state=0).fit(np.where(gaps, np.nan, train), missing="fill")
        complete_fit = PPA(random_state=0).fit(train)
        ratio = mse(filled_fit.fill(gappy), test, ~observed) / mse(complete_fit.fill(gappy), test, ~observed)
        line = f"{name:28s} seed {seed}: no complete training pixel, fill MSE of the missing='fill' model / the complete-pixel model's {ratio:6.3f}"
        print(line, flush=True)
        out.append(line)


def cloudy_series(out: list[str]) -> None:
    """The eo-learn NDVI series: fit with missing='fill', hide clear values under the rolled cloud masks."""
    import json

    from scenes import DATA

    folder = os.path.join(DATA, "ts_s2_ndvi_eolearn")
    ndvi = np.load(os.path.join(folder, "NDVI.npy"))[..., 0].astype(np.float64)  # (t, y, x)
    clear = np.load(os.path.join(folder, "IS_VALID.npy"))[..., 0] & (np.load(os.path.join(folder, "CLM.npy"))[..., 0] == 0)
    with open(os.path.join(folder, "timestamps.json")) as f:
        stamps = json.load(f)
    times = np.array([np.datetime64(s[:19]) for s in stamps]).astype("datetime64[D]").astype(float)
    dates = clear.mean(axis=(1, 2)) >= MIN_CLEAR  # a date clear nowhere (or almost) cannot be learnt: left out
    ndvi, clear, times = ndvi[dates], clear[dates], times[dates]
    out.append(f"eo-learn NDVI: {int(dates.sum())} of {len(dates)} dates have at least {MIN_CLEAR:.0%} clear pixels and are kept; "
               f"{clear.mean():.0%} of their pixel-dates are clear, no pixel is clear on every date: {not clear.all(axis=0).any()}")
    print(out[-1])
    t, h, w = ndvi.shape
    rolled = np.roll(clear, (h // 2, w // 2), axis=(1, 2))
    X = np.moveaxis(np.where(clear, ndvi, np.nan), 0, -1).reshape(-1, t)
    truth = np.moveaxis(ndvi, 0, -1).reshape(-1, t)
    hidden_all = np.moveaxis(clear & ~rolled, 0, -1).reshape(-1, t)
    for seed in SEEDS:
        order = np.random.default_rng(seed).permutation(len(X))
        train, test = order[: len(X) // 2], order[len(X) // 2 :]
        observed = np.isfinite(X[test]) & ~hidden_all[test]
        keep = observed.any(axis=1) & hidden_all[test].any(axis=1)
        test, observed = test[keep], observed[keep]
        gappy = np.where(observed, truth[test], np.nan)
        hidden = hidden_all[test]
        start = time.perf_counter()
        model = PPA(random_state=0).fit(X[train], missing="fill")
        fit_seconds = time.perf_counter() - start
        linear = PPA(random_state=0, degree=1).fit(X[train], missing="fill")
        e_ppa, e_lin = mse(model.fill(gappy), truth[test], hidden), mse(linear.fill(gappy), truth[test], hidden)
        e_time = mse(temporal(gappy, observed, times), truth[test], hidden)
        line = (f"{'eo-learn NDVI (68 dates)':28s} seed {seed}: RMSE PPA / linear (EM, degree 1) {np.sqrt(e_ppa / e_lin):6.3f}, "
                f"PPA / temporal interpolation {np.sqrt(e_ppa / e_time):6.3f}, linear / temporal {np.sqrt(e_lin / e_time):6.3f} "
                f"(RMSE PPA {np.sqrt(e_ppa):.4f}; {int(hidden.sum())} hidden values of {len(test)} pixels; degrees "
                f"{model.degrees_[:8].tolist()}...; fit with missing='fill' in {fit_seconds:.1f} s)")
        print(line, flush=True)
        out.append(line)


def fidelity(out: list[str]) -> None:
    from scenes import SCENES, pixels

    warnings.simplefilter("ignore")
    summary = []
    for name, X, times in (
        ("Landsat 5 (7 bands)", pixels(SCENES["landsat5 (7)"]()), None),
        ("BigEarthNet S2 (10 bands)", bigearthnet(), None),
        ("MODIS NDVI (23 dates)", pixels(SCENES["modis-ndvi (23)"]()), np.arange(23) * 16.0),
    ):
        ratios = complete_scene(name, X, times, out)
        summary.append(f"{name}: mean {np.mean(ratios):.3f}, worst {np.max(ratios):.3f}")
    no_complete_pixel("Landsat 5 (7 bands)", pixels(SCENES["landsat5 (7)"]()), out)
    no_complete_pixel("BigEarthNet S2 (10 bands)", bigearthnet(), out)
    cloudy_series(out)
    out.append("summary (PPA fill MSE / best linear, over seeds): " + "; ".join(summary))
    print(out[-1])


def speed(out: list[str]) -> None:
    """Fill against transform on the same 36-band float32 chunk (256 x 256 pixels, 10% of values missing), interleaved."""
    sys.path.insert(0, HERE)
    sys.path.insert(0, os.path.join(HERE, ".."))
    from common import interleaved, machine
    from tests.conftest import curved_sample

    model = PPA(random_state=0).fit(curved_sample(20000, d=36, seed=0))
    X = curved_sample(256 * 256, d=36, seed=1).astype(np.float32)
    gappy = np.where(np.random.default_rng(0).random(X.shape) < 0.1, np.float32(np.nan), X)
    cpu: dict[str, list[float]] = {}
    times = interleaved({"transform": lambda: kernels.forward(gappy, model.params_, threads=1),
                         "fill": lambda: fill(gappy, model.params_)}, repeat=7, cpu=cpu)

    def stats(t: dict[str, list[float]], what: str) -> str:
        return (f"{what}: transform min {min(t['transform']):.4f} / median {np.median(t['transform']):.4f} s, fill min "
                f"{min(t['fill']):.4f} / median {np.median(t['fill']):.4f} s, ratio of the minima {min(t['fill']) / min(t['transform']):.1f}x, "
                f"of the medians {np.median(t['fill']) / np.median(t['transform']):.1f}x")

    line = (f"speed: 256 x 256 x 36 float32 chunk, 10% missing, degrees {model.degrees_.tolist()[:4]}..., 7 interleaved rounds;\n  "
            f"{stats(times, 'wall')} (per round: {', '.join(f'{f / t:.1f}' for f, t in zip(times['fill'], times['transform']))})\n  "
            f"{stats(cpu, 'process CPU')}\n{machine()}")
    print(line, flush=True)
    out.append(line)


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    lines: list[str] = []
    if which == "cloudy":
        cloudy_series(lines)
    if which == "incomplete":
        from scenes import SCENES, pixels

        warnings.simplefilter("ignore")
        no_complete_pixel("Landsat 5 (7 bands)", pixels(SCENES["landsat5 (7)"]()), lines)
        no_complete_pixel("BigEarthNet S2 (10 bands)", bigearthnet(), lines)
    if which in ("fidelity", "all"):
        fidelity(lines)
    if which in ("speed", "all"):
        speed(lines)
    if which == "all":
        os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
        with open(RESULTS, "w") as f:
            f.write("\n".join(lines) + "\n")
