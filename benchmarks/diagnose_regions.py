"""Regional change on the shared scenes' checkerboards: what the whole-fit validation read, and where the excess sits.

For each checkerboard split (``scenes.fit_checkerboard``, the accessor with spatial groups) of a scene: the default fit's
configuration, the validation's verdict of the chosen candidate (held-out mean, worst kept k, and its ratio at the
unseen worst kept k with the standard error), the unseen tiles' ratios (worst kept k, the k, mean over kept k), how the
excess at that k is spread over the unseen 10 x 10 tiles (share of tiles whose PPA error is above PCA's there, share of
the excess carried by the worst tile), the curved steps (step, degree) of the validation's half-size fits and of the
final fit, and, for the worst tile, where its rows lie along each curved step (scaled projection ``t`` against the
fitted range and the Tukey far-out fences) and its PCA error against the unseen mean.

``loto``: the final fit's configuration refitted (numpy, ``configuration="fixed"``, ``max_curved`` as chosen) on the
fitted tiles with one left out in turn, read on the left-out tile at the unseen split's kept k: its worst kept k and
the ratio pooled over the left-out tiles (each tile's PCA the baseline), against the same fit on every fitted tile read
on the unseen tiles: whether regions of the fitting sample left out whole show the excess the unseen regions have.

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_regions.py SCENE SEEDS [loto]`` (``PPA_SCENES`` as in
bench_scenes.py).
"""
from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import xarray as xr
from bench_scenes import scenes

from ppa_xr import PPA
from ppa_xr.core import candidates, kernels
from ppa_xr.core.errors import compare_errors_and_forward

SELECT, FIT = candidates.select, candidates._Validation._fit


def _steps(params) -> list[tuple[int, int]]:
    return [(int(p), int(params.degrees[p])) for p in params.curved_steps()]


def _worst_tile(m, tr: np.ndarray, te: np.ndarray, rows: np.ndarray, k: int, worst: np.ndarray) -> dict:
    """Where the worst tile's rows lie along each curved step, and its PCA error against the unseen mean."""
    P = m.params_
    out = {"pca_error_over_mean_at_k": round(float(rows[worst].mean() / rows.mean()), 2)}
    for p in P.curved_steps():
        t_fit = (kernels.forward(tr, P)[:, p] - P.center[p]) / P.scale[p]
        t = ((kernels.forward(te, P)[:, p] - P.center[p]) / P.scale[p])[worst]
        q1, q3 = np.percentile(t_fit, [25, 75])
        out[f"step {p}"] = {"fitted_range": [round(float(t_fit.min()), 2), round(float(t_fit.max()), 2)],
                            "fences": [round(float(q1 - 3 * (q3 - q1)), 2), round(float(q3 + 3 * (q3 - q1)), 2)],
                            "tile_t_quartiles": [round(float(v), 2) for v in np.percentile(t, [0, 25, 50, 75, 100])],
                            "tile_beyond_range": round(float(np.mean((t < t_fit.min()) | (t > t_fit.max()))), 3)}
    return out


def loto(cube: np.ndarray, seed: int, max_curved: int, std: bool) -> dict:
    """Leave one fitted tile out (module docstring)."""
    h, w, _ = cube.shape
    yy, xx = np.meshgrid(np.arange(h) // 10, np.arange(w) // 10, indexing="ij")
    keep = np.random.default_rng(seed).integers(0, 2, (yy.max() + 1, xx.max() + 1)).astype(bool)[yy, xx]
    ok = np.isfinite(cube).all(-1)
    tr, tiles, te = cube[keep & ok], (yy * (xx.max() + 1) + xx)[keep & ok], cube[~keep & ok]
    kw = {"standardize": True} if std else {}

    def curves(model, rows):
        return kernels.error_curve(rows, model.params_).mean(0)[:-1], kernels.error_curve(rows, model.params_.pca()).mean(0)[:-1]

    scale = scenes.pixels(cube).std(0) if std else 1.0  # a standardizing model's errors are in standardized units
    whole = PPA(random_state=0, max_curved=max_curved, configuration="fixed", **kw).fit(tr)
    e, ep = curves(whole, te)
    kept = ep >= 1e-3 * np.mean(np.sum(((te - te.mean(0)) / scale) ** 2, 1))
    pooled, pooled_pca, per_tile = np.zeros_like(e), np.zeros_like(e), []
    for t in np.unique(tiles):
        m = PPA(random_state=0, max_curved=max_curved, configuration="fixed", **kw).fit(tr[tiles != t])
        a, b = curves(m, tr[tiles == t])
        pooled += a * np.sum(tiles == t)
        pooled_pca += b * np.sum(tiles == t)
        per_tile.append(round(float((100 * a / b)[kept].max()), 1))
    r, ru = 100 * pooled / pooled_pca, 100 * e / ep
    return {"max_curved": max_curved, "unseen": {"worst_kept": round(float(ru[kept].max()), 2), "k": int(np.argmax(np.where(kept, ru, 0))) + 1},
            "left_out_pooled": {"worst_kept": round(float(r[kept].max()), 2), "k": int(np.argmax(np.where(kept, r, 0))) + 1,
                                "mean_kept": round(float(r[kept].mean()), 2)},
            "left_out_tiles_worst_kept": sorted(per_tile)}


def main() -> None:
    warnings.simplefilter("ignore")
    name, seeds, left_out = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3:] == ["loto"]
    cube = scenes.SCENES[name]()
    std = name in scenes.STANDARDIZE
    h, w, _ = cube.shape
    yy, xx = np.meshgrid(np.arange(h) // 10, np.arange(w) // 10, indexing="ij")
    tile_id = (yy * (xx.max() + 1) + xx)
    for seed in seeds:
        found, half = [], []
        candidates.select = lambda *a, **k: found.append(SELECT(*a, **k)) or found[-1]
        candidates._Validation._fit = lambda self, i, robust: half.append((robust, FIT(self, i, robust))) or half[-1][1]
        try:
            m, te = scenes.fit_checkerboard(cube, seed, **({"standardize": True} if std else {}))
        finally:
            candidates.select, candidates._Validation._fit = SELECT, FIT
        keep = np.random.default_rng(seed).integers(0, 2, (yy.max() + 1, xx.max() + 1)).astype(bool)[yy, xx]
        ids = tile_id[~keep]
        ids = ids[np.isfinite(cube[~keep]).all(1)]
        X = scenes.pixels(cube)
        worst_kept, worst_any, mean_kept, nk = scenes.user_k_metrics(m, te, X.std(0) if std else None)
        e, ep = np.asarray(m.reconstruction_mse(te))[:-1], np.asarray(m.pca_.reconstruction_mse(te))[:-1]
        z = (te - te.mean(0)) / (X.std(0) if std else 1.0)
        total = np.mean(np.sum(z ** 2, 1))
        kept = ep >= 1e-3 * total
        r = 100 * e / ep
        k = int(np.argmax(np.where(kept, r, 0))) + 1
        _, _, _, ppa_rows, pca_rows = compare_errors_and_forward(m.params_, te, kept=k)
        excess = ppa_rows - pca_rows
        tiles = np.unique(ids)
        per_tile = np.array([excess[ids == t].sum() for t in tiles])
        per_tile_ratio = np.array([100 * ppa_rows[ids == t].sum() / pca_rows[ids == t].sum() for t in tiles])
        out = {"scene": name, "seed": seed, "configuration": {a: str(b) for a, b in m.configuration_.items()},
               "unseen": {"worst_kept": round(worst_kept, 2), "k": k, "kept": nk, "worst_any": round(worst_any, 2), "mean_kept": round(mean_kept, 2)},
               "tiles": {"n": len(tiles), "above_pca": round(float(np.mean(per_tile > 0)), 2),
                         "top_tile_share": round(float(per_tile.max() / excess.sum()), 2) if excess.sum() > 0 else None,
                         "ratio_per_tile": sorted(round(float(v), 1) for v in per_tile_ratio)},
               "curved_steps": {"final": _steps(m.params_), "half_fits": [(robust, _steps(p)) for robust, p in half]},
               "worst_tile": _worst_tile(m, cube[keep & np.isfinite(cube).all(-1)], te, pca_rows, k, ids == tiles[np.argmax(per_tile)])}
        if found and found[-1] is not None and found[-1].verdicts:
            sel = found[-1]
            key = (sel.choice["robust"], None if sel.choice["max_curved"] is None or sel.choice["max_curved"] == sel.curved.get(sel.choice["robust"]) else sel.choice["max_curved"])
            v = sel.verdicts.get(key)
            out["validation"] = {"curved": sel.curved, "verdicts": {str(kk): {"mean": round(vv.mean, 2), "worst_kept": round(vv.worst, 2),
                                 "at_k": round(float(vv.relative[k - 1]), 2), "se_at_k": round(float(vv.se[k - 1]), 2)} for kk, vv in sel.verdicts.items()},
                                 "chosen": str(key), "chosen_found": v is not None}
        if left_out:
            out["loto"] = loto(cube, seed, len(m.params_.curved_steps()), std)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
