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

* ``fields``: leave-fields-out whole-fit validation. The validation's halves are dealt over regions of s x s of the
  accessor's 10 x 10 spatial blocks (each block still a unit of the verdict), s from the data: the first block distance
  at which the correlogram of the blocks' mean (standardized) pixel decorrelates (:func:`field_side`, Moran's I of the
  block means, the within-block noise taken out of its variance, at or below 0), at most 3 (at least 4 x 4 regions).
  Random halves and UCI tables: no spatial groups, unchanged.
* ``fieldse``: as ``fields``, the side where I(h) falls to 1/e (an e-folding distance) instead of 0.
* ``fieldsu``: as ``fields`` with the regions as the verdict's units too.
* ``fieldguard``: the choice as today, then a second validation on ``fields``' halves: where it reads the chosen
  truncation more than one standard error above the allowance at a kept k, its candidate with fewer curved steps (PCA
  among them) of the lowest mean within the allowance replaces it. ``fieldguardb``: the evidence at the guard's own
  Bonferroni z over k (``candidates.judge``) instead of one standard error.
* ``judged``: the whole sample's fit curves only the steps its validated half fit curved and judged (the chosen
  candidate's curved steps, by step index); every other step is straight. Where the validation found no curve in the
  half fit, the final fit is straight throughout.
* ``judgedboth``: the whole sample's fit as today where its curved steps are among the judged ones (by index);
  otherwise refitted (the same draws) curving only the steps both it and the half fit curved.
* ``judgeddir``: as ``judged``, a step matched by direction rather than index: the final fit's next step (the
  residual's leading principal axis) may curve where its |cos| with one of the judged curved steps' leading vectors
  exceeds 1/sqrt(2) (closer to that axis than to all the others together).

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
import scipy.special
from bench_scenes import scenes, variant

from ppa_xr import PPA
from ppa_xr.core import candidates, fill, ppa, shrink
from ppa_xr.core import degrees as degrees_mod
from ppa_xr.core.errors import LEVEL
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
        lam = shrink.choose(refit.params, X, groups, rng.spawn(1)[0], weights, kept, declared.selection_samples)  # as patched (shrinkcoarseQ)
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


FOLDS_MAKE, BLOCK = degrees_mod.Folds.make, ppa._Loop._block
FIELD: dict = {}


def field_correlogram(X: np.ndarray, groups: np.ndarray, tiles: int = 10, hmax: int = 6) -> np.ndarray:
    """Moran's I of the blocks' mean standardized pixel at Chebyshev block distance 1 .. hmax: ``mean_{pairs at h}
    <m_i, m_j> / (mean_b ||m_b||^2 - mean_b tr(W_b) / n_b)`` (``W_b`` the block's within covariance: its noise)."""
    g = np.asarray(groups).ravel()
    labels, inv = np.unique(g, return_inverse=True)
    sd = X.std(0)
    Z = (X - X.mean(0)) / np.where(sd > 0, sd, 1)
    n = np.bincount(inv).astype(float)
    m = np.stack([np.bincount(inv, Z[:, j]) for j in range(Z.shape[1])], 1) / n[:, None]
    within = np.bincount(inv, np.sum((Z - m[inv]) ** 2, 1)) / np.maximum(n - 1, 1)
    G = m @ m.T
    denom = (np.trace(G) - np.sum(within / n)) / len(labels)
    r, c = labels // tiles, labels % tiles
    D = np.maximum(np.abs(r[:, None] - r), np.abs(c[:, None] - c))
    return np.array([G[D == h].mean() / denom if (D == h).any() else np.nan for h in range(1, hmax + 1)])


def field_side(X: np.ndarray, groups: np.ndarray, largest: int = 3, level: float = 0.0) -> int:
    """The decorrelation distance of :func:`field_correlogram` in blocks (the first h with I(h) <= ``level``: 0, or 1/e
    for ``fieldse``), at most ``largest``."""
    rho = field_correlogram(X, groups)
    low = np.flatnonzero(~(rho > level))
    return int(min(low[0] + 1 if len(low) else largest, largest))


@contextlib.contextmanager
def _fields(units: bool, level: float = 0.0):
    def select(X, fit, groups, *args, **kwargs):
        FIELD.clear()
        if groups is not None:
            FIELD["side"] = field_side(X, groups, level=level)
            FIELD["groups"] = np.asarray(groups).ravel()
            print(json.dumps({"field_side": FIELD["side"]}), file=sys.stderr, flush=True)
        return SELECT(X, fit, groups, *args, **kwargs)

    def make(groups, n, n_folds, rng):
        s = FIELD.get("side", 1)
        if groups is None or s <= 1:
            return FOLDS_MAKE(groups, n, n_folds, rng)
        g = np.asarray(groups).ravel()
        q = -(-10 // s)
        region = (g // 10 // s) * q + (g % 10) // s
        if units:
            return FOLDS_MAKE(region, n, n_folds, rng)
        labels, inv = np.unique(g, return_inverse=True)
        reg_of_label = np.unique(region, return_inverse=True)[1].ravel()[np.unique(inv, return_index=True)[1]]
        n_regions = reg_of_label.max() + 1
        fold_of_region = rng.permutation(n_regions) % min(n_folds, n_regions)
        order = np.argsort(inv, kind="stable")
        counts = np.bincount(inv)
        return degrees_mod.Folds(np.concatenate([[0], np.cumsum(counts)]), fold_of_region[reg_of_label]), order

    class FieldFolds(degrees_mod.Folds):
        @classmethod
        def make(cls, groups, n, n_folds, rng):
            return make(groups, n, n_folds, rng)

    before = candidates.select, candidates.Folds
    candidates.select, candidates.Folds = select, FieldFolds
    try:
        yield
    finally:
        candidates.select, candidates.Folds = before


@contextlib.contextmanager
def _field_guard(bonferroni: bool = False):
    """The choice as today (the blocks' halves), then judged again on the fields' halves (``fields``' regions, a second
    validation): where the fields' verdict of the same truncation stands more than one standard error above the allowance
    at a kept k, the field-validated candidate with fewer curved steps (PCA among them) of the lowest mean within the
    allowance at every kept k replaces it."""
    limit = 100 * (1 + candidates.ALLOWANCE)

    def select(X, fit, groups, rng, *args, **kwargs):
        found = SELECT(X, fit, groups, rng, *args, **kwargs)
        if groups is None or found is None or not found.verdicts:
            return found
        robust, c = found.choice["robust"], found.choice["max_curved"]
        count = found.curved.get(robust, 0) if c is None or c == found.curved.get(robust) else c
        if count == 0:
            return found
        with _fields(False):
            fielded = candidates.select(X, fit, groups, rng, *args, **kwargs)
        if fielded is None or not fielded.verdicts or robust not in fielded.curved:
            return found
        top = fielded.curved[robust]
        key = (robust, None if count >= top else count)
        v = fielded.verdicts.get(key)
        if v is None:
            return found
        se = float(v.se[np.flatnonzero(v.relative == v.worst)[0]]) if np.any(v.relative == v.worst) else 0.0
        z = -scipy.special.ndtri(LEVEL / (X.shape[1] - 1)) if bonferroni else 1.0
        refused = v.worst - z * se > limit
        out = {"guard_worst": round(v.worst, 2), "guard_se": round(se, 2), "refused": bool(refused)}
        if refused:
            fewer = {k: w for k, w in fielded.verdicts.items() if (k[1] if k[1] is not None else fielded.curved[k[0]]) < count
                     and w.worst <= limit and (w.admitted or k[1] == 0)}
            if fewer:
                best = min(fewer, key=candidates._order(fewer))
                m = best[1] if best[1] is not None else fielded.curved[best[0]]
                found = candidates.Selection({"robust": bool(best[0]), "max_curved": int(m)}, found.verdicts, found.curved)
                out["to"] = [bool(best[0]), int(m)]
        GUARD.update(out | {"side": FIELD.get("side")})
        return found

    candidates.select = select
    try:
        yield
    finally:
        candidates.select = SELECT


ALLOWED: dict = {}
GUARD: dict = {}


@contextlib.contextmanager
def _judged(by_direction: bool = False, both: bool = False):
    """The final fit curves only the steps the chosen candidate's half fit curved: by index, or (``by_direction``) a
    step along an axis closer to one of those steps' leading vectors than to its orthogonal complement (|cos| > 1/sqrt 2)."""
    half: dict[bool, list[int]] = {}
    leads: dict[bool, np.ndarray] = {}
    chosen: list = []

    def fit(self, i, robust):
        params = FIT(self, i, robust)
        if i == 0:
            half[robust] = [int(p) for p in params.curved_steps()]
            leads[robust] = np.array(params.rotation)[half[robust]]
        return params

    def select(*args, **kwargs):
        half.clear()
        found = SELECT(*args, **kwargs)
        chosen[:] = [] if found is None else [found]
        return found

    def final(X, spec, **kwargs):
        if chosen:
            found = chosen[0]
            steps = half.get(found.choice["robust"], []) if found.verdicts else []
            c = found.choice["max_curved"]
            ALLOWED["steps"] = set(steps if c is None else steps[:c])
            if by_direction:
                ALLOWED["leads"] = leads.get(found.choice["robust"], np.zeros((0, X.shape[1])))[:len(ALLOWED["steps"])]
            print(json.dumps({"judged_steps": sorted(ALLOWED["steps"])}), file=sys.stderr, flush=True)
        chosen.clear()
        try:
            if not both or "steps" not in ALLOWED:
                return FINAL(X, spec, **kwargs)
            allowed = ALLOWED.pop("steps")
            rng = kwargs["rng"]
            saved = copy.deepcopy(rng.bit_generator.state)
            fitted = FINAL(X, spec, **kwargs)  # the whole sample's own choice of steps
            own = set(fitted.params.curved_steps())
            if own <= allowed:
                return fitted
            rng.bit_generator.state = saved
            ALLOWED["steps"] = own & allowed
            print(json.dumps({"own": sorted(own), "kept": sorted(ALLOWED["steps"])}), file=sys.stderr, flush=True)
            return FINAL(X, spec, **kwargs)
        finally:
            ALLOWED.clear()

    def block(self, size):
        allowed = ALLOWED.get("steps")
        if allowed is None:
            return BLOCK(self, size)
        p = len(self.steps)
        if "leads" in ALLOWED:
            U = ALLOWED["leads"]
            if self.n_curved >= len(U):
                return self._rotation()
            if not self.res.principal:
                self.res.to_principal_axes()
            if np.max(np.abs(U @ self.res.frame[:, 0])) > np.sqrt(0.5):
                return BLOCK(self, 1)
            return self._principal_block(1, 1)
        if p in allowed:
            return BLOCK(self, 1)
        if not any(a > p for a in allowed):
            return self._rotation()
        if not self.res.principal:
            self.res.to_principal_axes()
        return self._principal_block(1, 1)

    candidates._Validation._fit, candidates.select, candidates.fit, ppa._Loop._block = fit, select, final, block
    try:
        yield
    finally:
        candidates._Validation._fit, candidates.select, candidates.fit, ppa._Loop._block = FIT, SELECT, FINAL, BLOCK


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
                elif part in ("fields", "fieldsu", "fieldse"):
                    stack.enter_context(_fields(part == "fieldsu", float(np.exp(-1)) if part == "fieldse" else 0.0))
                elif part in ("fieldguard", "fieldguardb"):
                    stack.enter_context(_field_guard(part == "fieldguardb"))
                elif part in ("judged", "judgeddir", "judgedboth"):
                    stack.enter_context(_judged(part == "judgeddir", part == "judgedboth"))
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
                                  "configuration": {a: str(b) for a, b in model.configuration_.items()}} | ({"guard": dict(GUARD)} if GUARD else {})),
                      flush=True)
                GUARD.clear()


if __name__ == "__main__":
    main()
