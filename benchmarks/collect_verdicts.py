"""Held-out evidence of every candidate, in the validation and on the unseen pixels, for offline study of choice rules.

Per split of ``bench_scenes.py`` (scene or UCI table), one ``.npz`` in the output folder with:

* the whole-fit validation's per-group held-out errors of every truncation of the plain, robust and fenced (plain
  per-step validation, polynomials fitted within Tukey fences) half fits, for BOTH halves held out in turn
  (``{family}_r{round}``: (C+1, groups, d-1); ``held_r{round}``: the groups; ``pca_r{round}``, ``total_r{round}``);
  round 0 is exactly the default validation's half;
* the unseen pixels' errors of every truncation of the whole-sample fit of each family (``test_{family}``: (C+1, d-1);
  ``test_total``): the truncation ``c`` is what ``max_curved=c`` fits on the whole sample.

Run by hand: ``PYTHONPATH=. python benchmarks/collect_verdicts.py OUTDIR SCENE [SCENE ...]``.
"""
from __future__ import annotations

import contextlib
import os
import sys
import warnings

import numpy as np
from bench_scenes import scenes, variant

from ppa_xr import PPA
from ppa_xr.core import candidates
from ppa_xr.core.degrees import Folds
from ppa_xr.datasets import UCI_TABLES, load_table

FAMILIES = ("plain", "robust", "fenced")
STORE: dict = {}
SKIP = [False]
original_select = candidates.select


def capture(X, fit, groups, rng, min_samples, escalate=True, n_folds=None, rounds=None, weights=None):
    if SKIP[0]:
        return candidates.Selection({"robust": False, "max_curved": None}, {})
    n = len(X)
    folds, order = Folds.make(groups, n, candidates.FOLDS, rng)
    parts = candidates._parts(folds, order, 2, groups, rng)
    w = None if weights is None else candidates.unit_mean(candidates.checks.row_weights(weights, n))
    v = candidates._Validation(X, fit, w, parts, np.isin(folds.fold, [0, 1]))
    for family in FAMILIES:
        with variant("fenced") if family == "fenced" else contextlib.nullcontext():
            for r, part in enumerate(parts):
                params, (training, unseen) = v._fit(r, family == "robust"), v._rows(r)
                ww = None if w is None else (w[part.train], w[part.rows])
                e = candidates.truncation_errors(params, training, unseen, part.bounds, ww)
                STORE[f"{family}_r{r}"] = e
                STORE[f"held_r{r}"] = part.held
                if family == "plain":
                    STORE[f"pca_r{r}"] = e[0]
                    z = params.to_fit_space(unseen)
                    STORE[f"total_r{r}"] = float(np.einsum("ij,ij->", z, z))
    STORE["n_groups"] = len(folds.fold)
    return candidates.Selection({"robust": False, "max_curved": None}, {})


def test_errors(model, train, test):
    e = candidates.truncation_errors(model.params_, train, test, np.array([0, len(test)]))
    return e[:, 0, :]


def splits(name):
    if name in UCI_TABLES:
        X = load_table(name).normalised()
        for seed in range(3):
            tr, te = scenes.random_halves(X, seed)
            yield "halves", seed, (lambda tr=tr, **kw: (PPA(random_state=0, **kw).fit(tr), tr)), te
        return
    cube = scenes.SCENES[name]()
    X = scenes.pixels(cube)
    std = {"standardize": True} if name in scenes.STANDARDIZE else {}
    for seed in (0, 1):
        tr, te = scenes.random_halves(X, seed)
        yield "halves", seed, (lambda tr=tr, **kw: (PPA(random_state=0, **std, **kw).fit(tr), tr)), te
        h, w, _ = cube.shape
        yy, xx = np.meshgrid(np.arange(h) // 10, np.arange(w) // 10, indexing="ij")
        keep = np.random.default_rng(seed).integers(0, 2, (yy.max() + 1, xx.max() + 1)).astype(bool)[yy, xx]
        train = scenes.pixels(np.where(keep[..., None], cube, np.nan))
        held = cube[~keep]
        yield "checkerboard", seed, (lambda seed=seed, train=train, **kw: (scenes.fit_checkerboard(cube, seed, **std, **kw)[0], train)), held[np.isfinite(held).all(1)]


def main() -> None:
    warnings.simplefilter("ignore")
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    candidates.select = capture
    for name in sys.argv[2:]:
        for split, seed, fitter, te in splits(name):
            path = os.path.join(out, f"{name.split(' ')[0]}_{split}_{seed}.npz")
            if os.path.exists(path):
                continue
            STORE.clear()
            SKIP[0] = False
            m, tr = fitter()
            assert m.configuration_["validated"], m.configuration_
            STORE["test_plain"] = test_errors(m, tr, te)
            SKIP[0] = True
            STORE["test_robust"] = test_errors(fitter(robust=True)[0], tr, te)
            with variant("fenced"):
                STORE["test_fenced"] = test_errors(fitter()[0], tr, te)
            z = m.params_.to_fit_space(te)
            STORE["test_total"] = float(np.einsum("ij,ij->", z, z))
            np.savez(path, **STORE)
            print(path, flush=True)


if __name__ == "__main__":
    main()
