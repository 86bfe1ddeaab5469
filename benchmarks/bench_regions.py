"""Regional change beyond the protocol's seeds: rules tried on the whole-fit validation, per split.

Each variant switches the default ``PPA()`` (monkeypatched here, nothing in the library), measured by
``../shared/bench/scenes.py``'s ``user_k_metrics`` on its random halves and 10 x 10-tile checkerboards (seeds given),
or on a UCI table's random halves. One JSON line per split: scene, variant, split, seed, worst kept k, worst any k, mean
over the kept k, number of kept k, the configuration fitted.

Variants (``+`` combines them; those of ``bench_scenes.variant`` too, e.g. ``coarse5``: the whole-fit validation's
halves dealt over 5 x 5 regions of the accessor's 10 x 10 spatial blocks, ``rounds2``: both halves held out):

* ``base``: the default.
* ``lookpca``: the check where users look (``candidates._where_users_look``) offers PCA too, under its own trade (a
  point of held-out mean for a point of excess at the worst kept k); the default offers curved candidates only.
* ``shrinkcoarseQ``: the shrinkage's four halvings (``shrink.choose``) dealt over Q x Q regions of the 10 x 10
  spatial blocks instead of the blocks.
* ``lookse``: as ``lookpca``, but PCA only where the mean it gives up is within the excess at the worst kept k less one
  standard error of it (``candidates.SWITCH``).
* ``backward``: where the shrinkage drops the last curve (factor 0), the curve before it becomes the last and is
  shrunk by the same rule (the fit refitted capped there), until a factor is above 0 or no curve is left.
* ``degrees``: the whole sample's fit keeps its curves at most as curved as the judged ones: degree candidates up to
  the highest degree among the chosen candidate's curved steps in its half-size fit (the count cap of
  ``candidates._counted`` extended to the degrees).

Run by hand: ``PYTHONPATH=. python benchmarks/bench_regions.py SCENE SEEDS VARIANTS [SPLITS]`` (``SPLITS``:
``checkerboard,halves``; ``PPA_SCENES`` as in bench_scenes.py).
"""
from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import sys
import warnings

import numpy as np
from bench_scenes import scenes, variant

from ppa_xr import PPA
from ppa_xr.core import candidates, fill, ppa, shrink
from ppa_xr.model import estimator
from ppa_xr.datasets import UCI_TABLES, load_table

LOOK, FIT, SELECT, FINAL = candidates._where_users_look, candidates._Validation._fit, candidates.select, candidates.fit
CHOOSE, SELECTED = shrink.choose, estimator.fit_selected


def _backward(X, declared, groups, rng, progress=None, weights=None, shrink_curves=True, drawn=None):
    """``shrink.fit_selected``, then, while the last curve's factor is 0 (the curve dropped), the curve before it is
    the last: the fit refitted capped there (the final fit's draws) and its factor chosen by the same halvings."""
    start = copy.deepcopy(rng)
    fitted, choice = SELECTED(X, declared, groups, rng, progress, weights, shrink_curves, drawn)
    kept = declared.n_components if isinstance(declared.n_components, int) else None
    while (shrink_curves and drawn is None and choice["validated"] and not choice["robust"] and choice["shrink"] == 0.0
           and declared.leading == "pca" and fitted.params.curved_steps()):
        count = len(fitted.params.curved_steps())
        refit = ppa.fit(X, declared.replace(robust=False, max_curved=count), groups=groups, rng=copy.deepcopy(start),
                        weights=weights, shrink_outputs=candidates.SHARES)
        lam = CHOOSE(refit.params, X, groups, rng.spawn(1)[0], weights, kept, declared.selection_samples)
        fitted = shrink.shrunk(X, refit, lam, weights)
        fitted = dataclasses.replace(fitted, params=fill.with_marginals(fitted.params, X, weights))
        choice = choice | {"max_curved": count, "shrink": lam}
    return fitted, choice


@contextlib.contextmanager
def _shrink_regions(q: int):
    """The shrinkage's halvings dealt over q x q regions of the accessor's 10 x 10 spatial blocks (cube fits only)."""
    def choose(params, X, groups, *args, **kwargs):
        if groups is not None:
            g = np.asarray(groups).ravel()
            groups = (g // 10 * q // 10) * q + g % 10 * q // 10
        return CHOOSE(params, X, groups, *args, **kwargs)

    shrink.choose = choose
    try:
        yield
    finally:
        shrink.choose = CHOOSE


def _look_with_pca(admitted: dict, chosen: tuple) -> tuple | None:
    """``candidates._where_users_look`` with PCA among the candidates it may take."""
    limit, verdict = 100 * (1 + candidates.ALLOWANCE), admitted[chosen]
    if verdict.worst <= limit:
        return None
    safe = {key: v for key, v in admitted.items() if v.worst <= limit and v.mean - verdict.mean <= verdict.worst - 100}
    return min(safe, key=candidates._order(safe)) if safe else chosen


def _look_with_pca_on_evidence(admitted: dict, chosen: tuple) -> tuple | None:
    """``_look_with_pca`` where PCA's mean given up is within the excess minus one standard error of it at the worst kept
    k (the ``SWITCH`` burden of proof on the excess); the curved candidates as the default."""
    limit, verdict = 100 * (1 + candidates.ALLOWANCE), admitted[chosen]
    if verdict.worst <= limit:
        return None
    se = float(verdict.se[np.flatnonzero(verdict.relative == verdict.worst)[0]])
    pca = (False, 0)
    if pca in admitted and 100 - verdict.mean <= verdict.worst - candidates.SWITCH * se - 100:
        return _look_with_pca(admitted, chosen)
    return LOOK(admitted, chosen)


@contextlib.contextmanager
def _degrees():
    """The final fit's degree candidates capped at the judged curves' highest degree."""
    judged: dict[bool, list[int]] = {}
    chosen: list[dict] = []

    def fit(self, i, robust):
        params = FIT(self, i, robust)
        judged[robust] = [int(params.degrees[p]) for p in params.curved_steps()]
        return params

    def select(*args, **kwargs):
        judged.clear()
        found = SELECT(*args, **kwargs)
        chosen[:] = [] if found is None or not found.verdicts else [found.choice]
        return found

    def final(X, spec, **kwargs):
        degrees = judged.get(chosen[0]["robust"], [])[:chosen[0]["max_curved"]] if chosen else []
        if degrees:  # the chosen candidate's curved steps in its half-size fit (none: PCA, nothing to cap)
            spec = spec.replace(degree=tuple(c for c in spec.candidates if c <= max(degrees)))
        chosen.clear()
        return FINAL(X, spec, **kwargs)

    candidates._Validation._fit, candidates.select, candidates.fit = fit, select, final
    try:
        yield
    finally:
        candidates._Validation._fit, candidates.select, candidates.fit = FIT, SELECT, FINAL


def _splits(name: str, seeds: list[int], splits: list[str]):
    if name in UCI_TABLES:
        X = load_table(name).normalised()
        for seed in seeds:
            tr, te = scenes.random_halves(X, seed)
            model = PPA(random_state=0).fit(tr)
            yield "halves", seed, model, scenes.user_k_metrics(model, te)
        return
    cube = scenes.SCENES[name]()
    X = scenes.pixels(cube)
    std = name in scenes.STANDARDIZE
    kw = {"standardize": True} if std else {}
    for seed in seeds:
        for split in splits:
            if split == "checkerboard":
                model, te = scenes.fit_checkerboard(cube, seed, **kw)
                yield split, seed, model, scenes.user_k_metrics(model, te, X.std(0) if std else None)
            else:
                tr, te = scenes.random_halves(X, seed)
                model = PPA(random_state=0, **kw).fit(tr)
                yield split, seed, model, scenes.user_k_metrics(model, te, tr.std(0) if std else None)


def main() -> None:
    warnings.simplefilter("ignore")
    name, seeds, variants = sys.argv[1], [int(s) for s in sys.argv[2].split(",")], sys.argv[3].split(",")
    splits = sys.argv[4].split(",") if len(sys.argv) > 4 else ["checkerboard", "halves"]
    for v in variants:
        with contextlib.ExitStack() as stack:
            for part in v.split("+"):
                if part in ("lookpca", "lookse"):
                    candidates._where_users_look = _look_with_pca if part == "lookpca" else _look_with_pca_on_evidence
                    stack.callback(setattr, candidates, "_where_users_look", LOOK)
                elif part == "degrees":
                    stack.enter_context(_degrees())
                elif part == "backward":
                    estimator.fit_selected = _backward
                    stack.callback(setattr, estimator, "fit_selected", SELECTED)
                elif part.startswith("shrinkcoarse"):
                    stack.enter_context(_shrink_regions(int(part[len("shrinkcoarse"):])))
                else:
                    stack.enter_context(variant(part))
            for split, seed, model, (worst_kept, worst_any, mean_kept, kept) in _splits(name, seeds, splits):
                print(json.dumps({"scene": name, "variant": v, "split": split, "seed": seed, "worst_kept": round(worst_kept, 2),
                                  "worst_any": round(worst_any, 2), "mean_kept": round(mean_kept, 2), "kept": kept,
                                  "configuration": {a: str(b) for a, b in model.configuration_.items()}}), flush=True)


if __name__ == "__main__":
    main()
