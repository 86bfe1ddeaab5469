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

Run by hand: ``PYTHONPATH=. python benchmarks/diagnose_scenes.py [edge] [verdicts] [modis] [variance]`` (``PPA_SCENES`` as in
bench_scenes.py).
"""
from __future__ import annotations

import sys
import warnings

import numpy as np
from bench_scenes import scenes, variant

from ppa_xr import PPA
from ppa_xr.core import candidates
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


if __name__ == "__main__":
    warnings.simplefilter("ignore")
    for name in sys.argv[1:] or ["edge", "verdicts", "modis", "variance"]:
        {"edge": edge, "verdicts": verdicts, "variance": variance, "modis": lambda: verdicts("modis-ndvi (23)")}[name]()
