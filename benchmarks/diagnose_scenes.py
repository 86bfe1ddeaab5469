"""Why the default fit reads above its PCA on unseen pixels: the diagnoses behind benchmarks/results/scenes/README.md.

* ``edge``: Pageblocks, random halves, seed 2 (the table's 112.4 at a kept k): the share of the excess over PCA at the
  worst kept k carried by the unseen rows with the largest excess, for the default fit and for every step's polynomial
  fitted on its projections' Tukey far-out fences (``ppa_xr.core.basis.fences``, the variant ``fenced`` of
  bench_scenes.py).
* ``verdicts``: the Sentinel-2 NDVI series (68 dates), checkerboard seed 1 (111.7 at a kept k): the whole-fit
  validation's verdict of every candidate on the fit's own sample against the chosen fit's held-out ratio.
* ``modis``: the same verdicts on the MODIS NDVI series (23 dates), checkerboard seed 1 (105.9 at a kept k).
* ``variance``: the same split, fits of ``max_curved`` 1 and 2 on random halves of the fitted pixels, read on the other
  half and on the unseen tiles, at k = 1 and at the worst kept k.
* ``steps``: the default's failing checkerboards (MODIS seeds 1 and 0, Sentinel-2 NDVI seed 0; one curved step each):
  which rows and which step carry the excess at the worst kept k on the unseen tiles (the rows with the largest excess;
  rows beyond the step's fitted range, its Tukey far-out fences, ``|t| > 0.8``), and the curve scaled by ``lambda``
  toward the straight step: with the later steps as fitted, and with them refitted (the PCA of the scaled residual).
* ``shrink``: the least-squares shrinkage of the curved step, ``lambda* = <r, c> / ||c||^2`` (``r`` the rows' state
  before the correction ``c``), on the unseen tiles against the whole fit, and on held-out halves of the fitted tiles
  (fits on the other half) against the unseen tiles.
* ``crossfit``: the curve of a ``max_curved=1`` fit scaled by ``lambda`` with the later steps refitted, ``lambda`` chosen
  on the fitted tiles alone: fits on 4 random halves of the tiles, each read on the other half at its kept k, averaged;
  the lowest mean over the kept k among the ``lambda`` whose worst kept k is within 101; then read on the unseen tiles.

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_scenes.py [edge] [verdicts] [modis] [variance] [steps] [shrink] [crossfit] [urban]`` (``PPA_SCENES`` as in
bench_scenes.py).
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
from bench_scenes import scenes, variant

from ppa_xr import PPA
from ppa_xr.core import candidates, kernels
from ppa_xr.datasets import load_table


def edge() -> None:
    tr, te = scenes.random_halves(load_table("Pageblocks").normalised(), 2)
    for v in ("base", "fenced"):
        with variant(v):
            m = PPA(random_state=0).fit(tr)
        e, ep = np.asarray(m.reconstruction_mse(te))[:-1], np.asarray(m.pca_.reconstruction_mse(te))[:-1]
        total = np.mean(np.sum((te - te.mean(0)) ** 2, 1))
        kept = ep >= 1e-3 * total
        k = int(np.argmax(np.where(kept, e / ep, 0))) + 1
        rows = np.sum((te - m.reconstruct(te, k)) ** 2, 1) - np.sum((te - m.pca_.reconstruct(te, k)) ** 2, 1)
        top = np.sort(rows)[::-1]
        print(f"Pageblocks seed 2 {v}: {m.configuration_}, worst kept k = {k}, ratio {100 * e[k - 1] / ep[k - 1]:.1f}; of "
              f"{len(te)} unseen rows, the 5 / 20 / 50 with the largest excess carry {100 * top[:5].sum() / rows.sum():.0f}% / "
              f"{100 * top[:20].sum() / rows.sum():.0f}% / {100 * top[:50].sum() / rows.sum():.0f}% of the net excess", flush=True)


def _ndvi(scene: str = "ndvi-eolearn (68)"):
    cube = scenes.SCENES[scene]()
    h, w, _ = cube.shape
    yy, xx = np.meshgrid(np.arange(h) // 10, np.arange(w) // 10, indexing="ij")
    keep = np.random.default_rng(1).integers(0, 2, (yy.max() + 1, xx.max() + 1)).astype(bool)[yy, xx]
    tr, te = cube[keep], cube[~keep]
    return cube, tr[np.isfinite(tr).all(1)], te[np.isfinite(te).all(1)]


def _ratios(m: PPA, X: np.ndarray) -> np.ndarray:
    return 100 * np.asarray(m.reconstruction_mse(X))[:-1] / np.asarray(m.pca_.reconstruction_mse(X))[:-1]


def verdicts(scene: str = "ndvi-eolearn (68)") -> None:
    cube, _, _ = _ndvi(scene)
    seen = {}
    select = candidates.select

    def spy(*args, **kwargs):
        seen["selection"] = select(*args, **kwargs)
        return seen["selection"]

    candidates.select = spy
    try:
        m, te = scenes.fit_checkerboard(cube, 1)
    finally:
        candidates.select = select
    r = _ratios(m, te)
    total = np.mean(np.sum((te - te.mean(0)) ** 2, 1))
    kept = np.asarray(m.pca_.reconstruction_mse(te))[:-1] >= 1e-3 * total
    worst = int(np.argmax(np.where(kept, r, 0)))
    print(f"{scene} checkerboard seed 1: chosen {m.configuration_}; on the unseen tiles the worst kept k = {worst + 1} of "
          f"{kept.sum()} kept reads {r[worst]:.1f}, k = 1 {r[0]:.1f}")
    for key, v in seen["selection"].verdicts.items():
        print(f"  validation verdict {key}: admitted {v.admitted}, mean {v.mean:.2f}, worst k {np.argmax(v.relative) + 1} at "
              f"{v.relative.max():.1f} (se {v.se[np.argmax(v.relative)]:.1f}), k = {worst + 1} at {v.relative[worst]:.1f} (se {v.se[worst]:.1f})", flush=True)


def variance() -> None:
    _, tr, te = _ndvi()
    for capped in (1, 2):
        m = PPA(random_state=0, configuration="fixed", max_curved=capped).fit(tr)
        r = _ratios(m, te)
        print(f"NDVI checkerboard seed 1, max_curved={capped}, all {len(tr)} fitted pixels: unseen tiles k=1 {r[0]:.1f}, k=58 {r[57]:.1f}")
        for s in range(4):
            order = np.random.default_rng(s).permutation(len(tr))
            a, b = tr[order[: len(tr) // 2]], tr[order[len(tr) // 2:]]
            m = PPA(random_state=0, configuration="fixed", max_curved=capped).fit(a)
            ru, rb = _ratios(m, te), _ratios(m, b)
            print(f"  random half {s}: other half k=1 {rb[0]:.1f}, k=58 {rb[57]:.1f}; unseen tiles k=1 {ru[0]:.1f}, k=58 {ru[57]:.1f}", flush=True)


def _checkerboard(scene: str, seed: int):
    """The fitted pixels, their 10 x 10 tiles, and the unseen pixels of ``scenes.fit_checkerboard``'s split."""
    cube = scenes.SCENES[scene]()
    h, w, _ = cube.shape
    yy, xx = np.meshgrid(np.arange(h) // 10, np.arange(w) // 10, indexing="ij")
    keep = np.random.default_rng(seed).integers(0, 2, (yy.max() + 1, xx.max() + 1)).astype(bool)[yy, xx]
    ok = np.isfinite(cube).all(-1)
    return cube, cube[keep & ok], (yy * (xx.max() + 1) + xx)[keep & ok], cube[~keep & ok]


def _scaled(params, factors: np.ndarray):
    """The map with each step's polynomial (biases and coefficients, forward and inverse) times ``factors`` (d-1,)."""
    arrays = params.arrays()
    for name in ("forward_bias", "forward", "inverse_bias", "inverse"):
        arrays[name] = arrays[name] * np.reshape(factors, (-1,) + (1,) * (arrays[name].ndim - 1))
    return type(params)(**arrays, tails=params.tails)


def _refitted(params, lam: float, tr: np.ndarray, te: np.ndarray) -> np.ndarray:
    """Unseen error curve (d-1,) of the map whose one curved step (step 0) is scaled by ``lam`` and whose later steps
    are the PCA of the fitted rows' scaled residual."""
    factors = np.ones(params.n_features - 1)
    factors[0] = lam
    scaled = _scaled(params, factors)
    a, b = kernels.forward(tr, scaled)[:, 1:], kernels.forward(te, scaled)[:, 1:]
    centre = a.mean(0)
    axes = np.linalg.eigh((a - centre).T @ (a - centre))[1][:, ::-1]
    z = ((b - centre) @ axes) ** 2
    return np.cumsum(z[:, ::-1], axis=1)[:, ::-1].mean(0)


def _shares(rows: np.ndarray, where: np.ndarray) -> str:
    return f"{100 * where.mean():.2f}% of rows carry {100 * rows[where].sum() / rows.sum():.0f}%"


def steps() -> None:
    for scene, seed in (("modis-ndvi (23)", 1), ("modis-ndvi (23)", 0), ("ndvi-eolearn (68)", 0)):
        cube, tr, _, _ = _checkerboard(scene, seed)
        m, te = scenes.fit_checkerboard(cube, seed)
        P = m.params_
        E, Ep = kernels.error_curve(te, P), kernels.error_curve(te, P.pca())
        e, ep = E.mean(0)[:-1], Ep.mean(0)[:-1]
        kept = ep >= 1e-3 * np.mean(np.sum((te - te.mean(0)) ** 2, 1))
        k = int(np.argmax(np.where(kept, e / ep, 0))) + 1
        rows = E[:, k - 1] - Ep[:, k - 1]
        top = np.sort(rows)[::-1]
        print(f"{scene} checkerboard seed {seed}: {m.configuration_}, curved steps (step, degree) "
              f"{[(p, int(P.degrees[p])) for p in P.curved_steps()]}; worst kept k = {k} of {kept.sum()}: {100 * e[k - 1] / ep[k - 1]:.2f}, "
              f"mean kept {100 * (e / ep)[kept].mean():.2f}\n  rows: the 5 / 50 / 500 of {len(te)} with the largest excess carry "
              f"{100 * top[:5].sum() / rows.sum():.0f}% / {100 * top[:50].sum() / rows.sum():.0f}% / {100 * top[:500].sum() / rows.sum():.0f}%")
        for p in P.curved_steps():
            t_fit = (kernels.forward(tr, P)[:, p] - P.center[p]) / P.scale[p]
            t = (kernels.forward(te, P)[:, p] - P.center[p]) / P.scale[p]
            q1, q3 = np.percentile(t_fit, [25, 75])
            print(f"  step {p}: unseen rows beyond the fitted range: {_shares(rows, (t < t_fit.min()) | (t > t_fit.max()))}; beyond "
                  f"the far-out fences: {_shares(rows, (t < q1 - 3 * (q3 - q1)) | (t > q3 + 3 * (q3 - q1)))}; |t| > 0.8: {_shares(rows, np.abs(t) > 0.8)}")
        for lam in (1.0, 0.8, 0.6, 0.4, 0.2, 0.0):
            factors = np.where(np.isin(np.arange(P.n_features - 1), P.curved_steps()), lam, 1.0)
            fixed = 100 * kernels.error_curve(te, _scaled(P, factors)).mean(0)[:-1] / ep
            refit = 100 * _refitted(P, lam, tr, te) / ep
            print(f"  curve x {lam:.1f}: later steps as fitted: worst kept {fixed[kept].max():.2f}, mean kept {fixed[kept].mean():.2f}; "
                  f"later steps refitted: worst kept {refit[kept].max():.2f}, mean kept {refit[kept].mean():.2f}", flush=True)


def _lambda_star(params, X: np.ndarray) -> float:
    """``<r, c> / ||c||^2`` over the rows ``X`` for a map whose one curved step is step 0 (the later steps rotate both alike)."""
    straight = kernels.forward(X, _scaled(params, np.zeros(params.n_features - 1)))[:, 1:]
    c = straight - kernels.forward(X, params)[:, 1:]
    return float(np.sum(straight * c) / np.sum(c * c))


def shrink() -> None:
    for scene, seed in (("modis-ndvi (23)", 1), ("modis-ndvi (23)", 0), ("ndvi-eolearn (68)", 0), ("landsat5 (7)", 0), ("nrcan (30)", 0)):
        _, tr, tiles, te = _checkerboard(scene, seed)
        m = PPA(random_state=0, configuration="fixed", max_curved=1).fit(tr)
        halves = []
        for s in range(6):
            names = np.unique(tiles)
            a = np.isin(tiles, np.random.default_rng(s).permutation(names)[: len(names) // 2])
            half = PPA(random_state=0, configuration="fixed", max_curved=1).fit(tr[a])
            halves.append(f"{_lambda_star(half.params_, tr[~a]):.2f}/{_lambda_star(half.params_, te):.2f}")
        print(f"{scene} checkerboard seed {seed} ({len(np.unique(tiles))} fitted tiles), max_curved=1: lambda* of the whole fit on the "
              f"unseen tiles {_lambda_star(m.params_, te):.2f}; fits on half the tiles, on the other half / on the unseen tiles: "
              + " ".join(halves), flush=True)


def _kept_curves(params, tr: np.ndarray, held: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """100 x the refitted scaled map's error / PCA's on ``held`` at its kept k, one row per ``lambda`` of ``grid``."""
    ep = kernels.error_curve(held, params.pca()).mean(0)[:-1]
    kept = ep >= 1e-3 * np.mean(np.sum((held - held.mean(0)) ** 2, 1))
    return np.array([100 * _refitted(params, lam, tr, held)[:len(ep)] / ep for lam in grid])[:, kept]


def crossfit() -> None:
    grid = np.round(np.linspace(0, 1, 11), 1)
    for scene, seed in (("modis-ndvi (23)", 1), ("modis-ndvi (23)", 0), ("ndvi-eolearn (68)", 0), ("landsat5 (7)", 0), ("nrcan (30)", 0),
                        ("nrcan (30)", 1)):
        _, tr, tiles, te = _checkerboard(scene, seed)
        unseen = _kept_curves(PPA(random_state=0, configuration="fixed", max_curved=1).fit(tr).params_, tr, te, grid)
        worst, mean = [], []
        for s in range(4):
            names = np.unique(tiles)
            a = np.isin(tiles, np.random.default_rng(s).permutation(names)[: len(names) // 2])
            held = _kept_curves(PPA(random_state=0, configuration="fixed", max_curved=1).fit(tr[a]).params_, tr[a], tr[~a], grid)
            worst.append(held.max(1))
            mean.append(held.mean(1))
        w, mm = np.mean(worst, 0), np.mean(mean, 0)
        i = int(np.argmin(np.where(w <= 101, mm, np.inf)))
        print(f"{scene} checkerboard seed {seed}, max_curved=1: held out (4 half fits), worst kept k / mean kept by lambda: "
              + " ".join(f"{lam}: {a:.1f}/{b:.1f}" for lam, a, b in zip(grid, w, mm))
              + f"\n  chosen lambda {grid[i]}: unseen worst kept {unseen[i].max():.2f}, mean kept {unseen[i].mean():.2f} "
              f"(lambda 1: {unseen[-1].max():.2f} / {unseen[-1].mean():.2f})", flush=True)


def _unseen(params, te: np.ndarray, ep: np.ndarray, kept: np.ndarray) -> str:
    r = 100 * kernels.error_curve(te, params).mean(0)[:-1] / ep
    return f"worst kept {r[kept].max():.2f}, worst any {r.max():.2f} at k {int(np.argmax(r)) + 1}, mean kept {r[kept].mean():.2f}"


def urban() -> None:
    """The urban subimage's checkerboard seed 0 (106.1 at a noise-level k): which step and which k carry it, the
    truncations ``max_curved = c``, the second curve scaled by lambda (``shrink.shrunk`` on a ``max_curved=2`` fit:
    later steps refitted), and what halves of the fitted tiles read for those lambda at every k beyond the curve."""
    from ppa_xr.core import shrink as core_shrink
    from ppa_xr.core.ppa import Fit
    cube, tr, tiles, te = _checkerboard("urban-sub (162)", 0)
    ep = kernels.error_curve(te, PPA(n_components=None).fit(tr).pca_.params_).mean(0)[:-1]
    kept = ep >= 1e-3 * np.mean(np.sum((te - te.mean(0)) ** 2, 1))
    m, _ = scenes.fit_checkerboard(cube, 0)
    print(f"urban-sub checkerboard seed 0: {len(tr)} fitted rows x {tr.shape[1]} bands, {len(te)} unseen, {int(kept.sum())} kept k; "
          f"default {m.configuration_}, degrees {m.params_.degrees[:6].tolist()}: {_unseen(m.params_, te, ep, kept)}", flush=True)
    for c in (1, 2, 3):
        m, _ = scenes.fit_checkerboard(cube, 0, max_curved=c)
        print(f"  max_curved={c}: {_unseen(m.params_, te, ep, kept)}", flush=True)
    params = scenes.fit_checkerboard(cube, 0, max_curved=2)[0].params_
    for lam in (1.0, 0.8, 0.6, 0.4, 0.2, 0.0):
        print(f"  second curve x {lam} (later steps refitted): "
              f"{_unseen(core_shrink.shrunk(tr, Fit(params, np.zeros(tr.shape[1] - 1)), lam).params, te, ep, kept)}", flush=True)
    names, grid, worst = np.unique(tiles), (1.0, 0.8, 0.6, 0.4, 0.2, 0.0), []
    for s in range(4):
        a = np.isin(tiles, np.random.default_rng(s).permutation(names)[: len(names) // 2])
        half = PPA(random_state=0, configuration="fixed", max_curved=2).fit(tr[a]).params_
        hp = kernels.error_curve(tr[~a], half.pca()).mean(0)[:-1]
        cells = []
        for lam in grid:
            r = 100 * kernels.error_curve(tr[~a], core_shrink.shrunk(tr[a], Fit(half, np.zeros(tr.shape[1] - 1)), lam).params).mean(0)[:-1] / hp
            held_kept = hp >= 1e-3 * np.mean(np.sum((tr[~a] - tr[~a].mean(0)) ** 2, 1))
            cells.append(f"{lam}: {r.max():.1f} at k {int(np.argmax(r)) + 1} (kept k: worst {r[held_kept].max():.1f}, mean {r[held_kept].mean():.2f})")
            worst.append(r.max())
        print(f"  halving {s} (max_curved=2 on one half of the tiles, read on the other), worst any k by lambda: " + ", ".join(cells), flush=True)
    print("  median over the halvings of the worst any k by lambda: "
          + ", ".join(f"{lam}: {m:.1f}" for lam, m in zip(grid, np.median(np.reshape(worst, (4, len(grid))), 0))), flush=True)


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    for name in sys.argv[1:] or ["edge", "verdicts", "modis", "variance"]:
        {"edge": edge, "verdicts": verdicts, "variance": variance, "modis": lambda: verdicts("modis-ndvi (23)"), "steps": steps,
         "shrink": shrink, "crossfit": crossfit, "urban": urban}[name]()
