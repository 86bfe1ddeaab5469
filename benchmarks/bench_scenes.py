"""Held-out ratio where users look, per scene or UCI table, for a variant of the fit.

Wraps ``../shared/bench/scenes.py`` (its loaders and ``user_k_metrics``: the kept k are those where PCA's held-out
error is at least 0.1% of the held-out variance; ratio = 100 x PPA's held-out error / its own PCA's). Scenes: random
halves and 10 x 10-tile checkerboards, seeds 0 and 1; UCI tables (normalised to [0, 1]): random halves, seeds 0..2.
One JSON line per split: scene, variant, split, seed, worst kept k, worst any k, mean kept k, number of kept k; on random
halves also where the excess at the worst k sits (:func:`edge_rows`). ``--seeds 3,4,5``: other seeds than those.

Variants: ``base`` (the default ``PPA()``), ``fenced`` (every step's polynomial fitted on its projections' Tukey
far-out fences, ``ppa_xr.core.basis.fences``, the tails beyond them, plain fits included), ``coarseQ`` (the whole-fit
validation's halves dealt over Q x Q regions of the 10 x 10 spatial blocks, degree selection on the blocks as before;
cube fits only, the random halves are unchanged).
``anyk``: the check where users look (``candidates._where_users_look``) also asks every k to stay within 6% of
PCA on the held-out half (a candidate's worst read as the larger of its worst kept k and its worst k less 5).
``marginM``: the check where users look reads every k at which PCA's held-out error is at least 0.1% / M of the
held-out energy, the same bound as at the kept k (``margin1``: the kept k alone, the default; curves13).
``nolook``: the whole-fit validation's choice by the held-out mean alone, not checked where users look
(``ppa_xr.core.candidates.LOOK = False``: the default before that check).
``noshrink``: the validated fit's last curve as fitted (``ppa_xr.core.shrink.SHRINK = False``: the default before
it was shrunk toward the straight step by fits on halves of the groups, ``ppa_xr.core.shrink``).
``straightbeyond`` (curves17): every fit's steps beyond its sample's kept k (PCA's training error below 0.1% of the
energy there) straight, the validation's half-size fits included; the library form of it (commit 03103a6, reverted)
gave the same lines. ``sharesbeyond`` (curves17): the final fit's curves keep no correction on the residual axes beyond
that k (their shares of signal set to 0 there).
``axisrowsZ`` (curves18): the final map's correction rows on the straight outputs after its last curve kept axis by
axis by held-out evidence: on ``shrink.HALVES`` halvings of the groups each curve is refitted on one half with its axes'
shares of signal and read on the other, step after step; a row ``q`` of step ``p`` is zeroed where the held-out mean
of ``(e_q - w_q v)^2 - e_q^2`` exceeds ``Z`` standard errors (sd over the rows / sqrt(n), the halvings combined as
independent); then those outputs are refitted as the PCA of the new residual (an exact shear still). Rows on axes before
the last curve are kept (zeroing them broke Property 2 in sample: Segmentation 5's training ratio at k = 8, 109).
``meankept`` (curves18): the whole-fit validation's mean (and its paired standard errors' terms) over the kept k alone;
``meankeptanyk`` that and ``anyk`` together (``meankept+anyk`` is ``anyk`` alone: both set ``candidates.judge``).
``noshares``: the final fit's curves by least squares (``ppa_xr.core.candidates.SHARES = False``: the default before
each curve kept its axes' shares of signal, ``ppa_xr.core.steps.signal_shares``).
``nocount``: an uncapped choice fitted on the whole sample with every curved step it supports, not capped at the
half-size fit's count (``ppa_xr.core.candidates.COUNT = False``: the default before that cap).
``noties``: the final map's straight outputs after its last curve as fitted, not turned toward PCA's subspace where
the fitting rows cannot order their variances (``ppa_xr.core.ties.TIES = False``: the default before that turn;
curves14). ``tiesS``: those runs within S standard errors instead of 2 (``ties`` is the default).
``axesZ`` (``axes1``, ``axes0``, ``axesbonf``): the plain fits (the validation's and the final one) choose each step's
degree axis by axis as ``robust=True`` does, but without its fences, an axis predicted where its held-out gain reaches
Z standard errors (``bonf``: the robust fits' Bonferroni level, ``degrees.axis_significance``). ``escaxesZ``: the plain
fits as they are, the family the validation escalates to (``robust=True``) validated axis by axis at Z standard errors,
without fences.

Run by hand (``PPA_SCENES``: the folder of scenes.py where it is not ``../shared/bench``): ``PYTHONPATH=. python benchmarks/bench_scenes.py SCENE [SCENE ...] --variants base,fenced``
(a scene name of ``scenes.SCENES`` or a UCI table name).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import warnings

import numpy as np

sys.path.insert(0, os.environ.get("PPA_SCENES", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "bench")))
import scenes  # noqa: E402

from ppa_xr import PPA  # noqa: E402
from ppa_xr.core import basis, candidates, degrees, ppa, shrink, steps, ties  # noqa: E402
from ppa_xr.core.errors import compare_errors_and_forward  # noqa: E402
from ppa_xr.datasets import UCI_TABLES, load_table  # noqa: E402


fences, FENCE, ROUNDS, LOOK, COUNT, SHRINK = basis.fences, basis.FENCE, candidates.ROUNDS, candidates.LOOK, candidates.COUNT, shrink.SHRINK
CHOICES, AXIS_SIGNIFICANCE = ppa._Loop._choices, degrees.axis_significance
JUDGE = candidates.judge
TURNED, TIED_RUNS = ties.turned, ties.tied_runs


def _judge_any_k(*args, **kwargs):
    """``candidates.judge`` whose worst where users look also holds every k within 6% of PCA (the second bound of the
    protocol): ``worst = max(worst over the kept k, worst over every k - 5)``, so the check's 101 reads 106 there."""
    v = JUDGE(*args, **kwargs)
    return dataclasses.replace(v, worst=max(v.worst, float(v.relative.max()) - 5.0))


def _judge_margin(margin: float):
    """``candidates.judge`` (the whole-fit validation's; ``shrink`` keeps its own binding) whose worst where users look
    reads every k at which PCA's held-out error is at least ``KEPT / margin`` of the held-out energy, not ``KEPT``: the
    same per-k bound, held a margin below the line (``components`` given: unchanged)."""
    def judge(errors, pca, total, components=None):
        v = JUDGE(errors, pca, total, components)
        if components is not None:
            return v
        kept = pca.sum(axis=0) >= candidates.KEPT / margin * total
        return dataclasses.replace(v, worst=float(v.relative[kept].max()) if kept.any() else 100.0)
    return judge


def _judge_mean_kept(errors, pca, total, components=None):
    """``candidates.judge`` whose mean (and its per-group terms, the paired standard errors' units) is over the kept k
    alone (``sum_g b_gk >= KEPT total``; every k where none is), not over every k (curves18: on hyperspectral scenes
    the mean over 161 k, 20 of them kept, is decided by noise-level k)."""
    v = JUDGE(errors, pca, total, components)
    floor = candidates.EQUAL * total
    b = pca.sum(axis=0)
    kept = candidates._at_most(candidates.KEPT * total, b) if components is None else np.arange(errors.shape[1]) < components
    if not kept.any():
        return v
    ratio = v.relative / 100
    terms = (errors - ratio * pca) / np.maximum(b, floor)
    rounding = candidates._at_most(errors.sum(axis=0), floor) & candidates._at_most(b, floor)
    terms[:, rounding] = 0.0
    return dataclasses.replace(v, mean=float(v.relative[kept].mean()), influence=100 * terms[:, kept].mean(axis=1))


def _noise_turned(params, X):
    """``ties.turned`` whose runs also hold every straight output after the last curve at a k the fitting sample calls
    noise-level (PCA's training error below ``candidates.KEPT`` of the total there), so those outputs are turned toward
    PCA's subspace under the same Property-2 guard (curves16)."""
    curved = params.curved_steps()
    if not curved:
        return TURNED(params, X)
    p = curved[-1]
    share = np.append(np.cumsum(params.pca_variance[::-1])[::-1], 0.0) / np.sum(params.pca_variance)  # keeping j
    k0 = int(np.argmax(share < candidates.KEPT))  # the fewest components whose training error is below the line
    a0 = max(k0 - 1 - (p + 1), 0)  # the k0-th output (index k0 - 1) in the outputs after step p

    def runs(squares, variances):
        m, merged = len(variances), []
        for a, b in TIED_RUNS(squares, variances):
            if b > a0:
                a0_ = min(a, a0)
                return merged + [(a0_, m)] if m - a0_ > 1 else merged
            merged.append((a, b))
        return merged + ([(a0, m)] if m - a0 > 1 else [])
    ties.tied_runs = runs
    try:
        return TURNED(params, X)
    finally:
        ties.tied_runs = TIED_RUNS


def _kept_count(pca_variance: np.ndarray) -> int:
    """The fitting sample's kept k: how many k in 1 .. d-1 leave PCA's training error at least ``candidates.KEPT`` of
    the total (curves17)."""
    after = np.cumsum(pca_variance[::-1])[::-1][1:]
    return int(np.sum(after >= candidates.KEPT * np.sum(pca_variance)))


CAPPED, SHARES_OF = ppa._Loop._capped, steps.signal_shares
_BEYOND: dict = {}


def _capped_beyond(self) -> bool:
    """``_Loop._capped`` that also leaves every step at or beyond the fitting sample's kept k straight (curves17's
    ``straightbeyond``: the issue's per-step family, "fit them straight", for every fit, the validation's included)."""
    return CAPPED(self) or len(self.steps) >= _kept_count(self.pca_variance)


def _shares_beyond(w, cov, gram, n, degree):
    """``steps.signal_shares`` that keeps no correction on the residual axes beyond the fitting sample's kept k
    (curves17's ``sharesbeyond``): at a curve with ``m`` axes after it, of ``d`` in all, axis ``a`` is component
    ``d - m + 1 + a``."""
    f = SHARES_OF(w, cov, gram, n, degree)
    d, kept = _BEYOND["d"], _BEYOND["kept"]
    m = len(f)
    return np.where(d - m + 1 + np.arange(m) > kept, 0.0, f)


LOOP_INIT = ppa._Loop.__post_init__


def _loop_init_beyond(self) -> None:
    LOOP_INIT(self)
    _BEYOND["d"], _BEYOND["kept"] = self.d, _kept_count(self.pca_variance)


TIED, CAND_FIT_SELECTED = shrink.tied, candidates.fit_selected
_AXIS: dict = {"z": 0.0, "log": []}


def _fit_selected_groups(X, declared, groups, rng, *args, **kwargs):
    """``candidates.fit_selected`` that remembers the groups for ``_axis_rows`` (curves18)."""
    _AXIS["groups"], _AXIS["rng"] = groups, np.random.default_rng(7)
    return CAND_FIT_SELECTED(X, declared, groups, rng, *args, **kwargs)


def _refitted_shares(params, rows):
    """``shrink._refitted`` whose curves keep their axes' shares of signal (``steps.signal_shares``), as the final fit's
    do (candidates.SHARES), not the least-squares coefficients: its ``lstsq`` scaled per axis while it runs."""
    lstsq = np.linalg.lstsq

    def shared(design, s, rcond=None):
        coef, *rest = lstsq(design, s, rcond=rcond)
        n, g = len(s), design.shape[1] - 1
        return (coef * SHARES_OF(coef, np.atleast_2d(np.cov(s, rowvar=False)), design.T @ design / n, n, g), *rest)
    np.linalg.lstsq = shared
    try:
        return shrink._refitted(params, rows)
    finally:
        np.linalg.lstsq = lstsq


def _axis_masks(params, X, groups, rng, z: float) -> dict:
    """Per curved step ``p``, which later axes keep their correction row (curves18): on ``shrink.HALVES`` random
    halvings of the groups (random ones where None), every curve is refitted on one half (``shrink._refitted``) and
    read on the other, step after step: ``d_i = (e_q - w_q v)^2 - e_q^2`` per held-out row and axis ``q > p``
    (``e`` the state before step ``p``'s correction, the kept rows' corrections of the earlier steps applied); a row
    is zeroed where the mean of ``d`` over the halvings exceeds ``z`` standard errors (the sd of ``d`` over the held-out
    rows / sqrt(n), combined over the halvings as independent). Threshold fixed before measuring."""
    X, labels, _ = shrink._drawn(X, groups, rng, None)
    labels = np.unique(labels, return_inverse=True)[1]
    n_groups = int(labels.max()) + 1
    halves = []
    if _AXIS.get("oracle") is not None:  # the upper bound: the final map read on the unseen rows themselves (diagnostic only)
        halves.append((params, params.to_fit_space(_AXIS["oracle"]) @ params.rotation.T))
    for _ in range(shrink.HALVES if _AXIS.get("oracle") is None else 0):
        side = (rng.permutation(n_groups) % 2 == 0)[labels]
        with np.errstate(all="ignore"):
            fitted = _refitted_shares(params, X[side])
        states = fitted.to_fit_space(X[~side]) @ fitted.rotation.T
        halves.append((fitted, states))
    masks = {}
    for p in params.curved_steps():
        means, ses = [], []
        preds = []
        for fitted, states in halves:
            pred = candidates._basis(fitted, p, states[:, p]) @ candidates._coefficients(fitted, p)
            e = states[:, p + 1:]
            d = (e - pred) ** 2 - e ** 2
            means.append(d.mean(0))
            ses.append(d.std(0, ddof=1) / np.sqrt(len(d)))
            preds.append(pred)
        mean = np.mean(means, axis=0)
        se = np.sqrt(np.sum(np.square(ses), axis=0)) / len(halves)
        # only the straight outputs after the last curve, which are refitted as the PCA of the new residual: a row on an
        # axis before it would leave that output out of order (Property 2 broken in sample, measured) or a later
        # curve's input changed
        keep = ~(mean > z * se) | (np.arange(p + 1, len(mean) + p + 1) <= params.curved_steps()[-1])
        masks[p] = keep
        for (fitted, states), pred in zip(halves, preds):
            states[:, p + 1:] -= pred * keep
    return masks


def _axis_rows(fitted, X, weights=None):
    """``shrink.tied`` after the final map's correction rows that the held-out halvings do not support are zeroed
    (``_axis_masks``; ``forward[p, :, q]``, ``forward_bias[p, q]`` and their part of ``inverse[p] = forward[p] A``), and
    the outputs after the last curve refitted as the PCA of the new residual on the fitting rows (``shrink._sheared``):
    still a shear, exactly invertible, det J = 1 (curves18)."""
    params = fitted.params
    if params.curved_steps():
        masks = _axis_masks(params, X, _AXIS.get("groups"), _AXIS["rng"], _AXIS["z"])
        arrays = params.arrays()
        fw, fb, iv, ib = (arrays[k].copy() for k in ("forward", "forward_bias", "inverse", "inverse_bias"))
        dropped = 0
        for p, keep in masks.items():
            off = p + 1 + np.flatnonzero(~keep)
            dropped += len(off)
            iv[p] -= fw[p][:, off] @ params.rotation[off]
            ib[p] -= fb[p][off] @ params.rotation[off]
            fw[p][:, off] = 0.0
            fb[p][off] = 0.0
        _AXIS["log"].append({"curved": params.curved_steps(), "dropped": dropped,
                             "rows": {int(p): np.flatnonzero(~k).tolist() for p, k in masks.items()}})
        if dropped:
            from ppa_xr.core import kernels, linalg
            new = type(params)(**arrays | {"forward": fw, "forward_bias": fb, "inverse": iv, "inverse_bias": ib}, tails=params.tails)
            last = new.curved_steps()[-1] if new.curved_steps() else -1
            if last >= 0:
                r = kernels.forward(X, new)[:, last + 1:]
                values, vectors = linalg.eigenbasis(np.cov(r, rowvar=False).reshape(r.shape[1], r.shape[1]))
                vectors = vectors * linalg.orientation(vectors)
                fitted = shrink._sheared(ppa.Fit(new, fitted.error_ratio), 1.0, (np.maximum(values, 0.0), vectors))
            else:
                fitted = ppa.Fit(new, fitted.error_ratio)
    return TIED(fitted, X, weights)


@contextlib.contextmanager
def variant(name: str):
    original = steps.Designs.__call__
    if name == "fenced":
        steps.Designs.__call__ = lambda self, alphas, top: original(dataclasses.replace(self, fenced=True), alphas, top)
    if name.startswith("q"):  # fenced at the projections' quantiles p and 1 - p (name: q + p's digits after "0.")
        p = float("0." + name[1:])
        steps.Designs.__call__ = lambda self, alphas, top: original(dataclasses.replace(self, fenced=True), alphas, top)
        basis.fences = lambda alpha: tuple(np.quantile(alpha, (p, 1 - p), axis=-1))
    if name.startswith("tukey"):  # fenced at Tukey fences of the given number of interquartile ranges
        steps.Designs.__call__ = lambda self, alphas, top: original(dataclasses.replace(self, fenced=True), alphas, top)
        basis.FENCE = float(name[len("tukey"):])
    if name == "meankept":  # the whole-fit validation's mean over the kept k alone (curves18)
        candidates.judge = _judge_mean_kept
    if name == "meankeptanyk":  # meankept, its check where users look holding every k within 6% too (as anyk)
        candidates.judge = lambda *a, **kw: (lambda v: dataclasses.replace(v, worst=max(v.worst, float(v.relative.max()) - 5.0)))(_judge_mean_kept(*a, **kw))
    if name == "anyk":  # the check where users look holds every k within 6% too (curves12)
        candidates.judge = _judge_any_k
    if name.startswith("margin"):  # the check where users look also reads the k of PCA's error >= 0.1% / M (curves13)
        candidates.judge = _judge_margin(float(name[len("margin"):]))
    if name == "nolook":  # the choice by the held-out mean alone, not checked where users look
        candidates.LOOK = False
    if name == "noshrink":  # the validated fit's last curve kept as fitted, not shrunk (ppa_xr.core.shrink)
        shrink.SHRINK = False
    if name == "nocount":  # an uncapped choice refitted with every curved step the whole sample supports
        candidates.COUNT = False
    if name == "noties":  # the final map's tied straight axes as fitted, not turned toward PCA's subspace (curves14)
        ties.TIES = False
    if name.startswith("ties"):  # the runs of tied axes within S standard errors (the default: 2)
        ties.TIE_SE = float(name[len("ties"):] or 2.0)
    if name == "noiseturn":  # also turn the straight outputs at the fitting sample's noise-level k (curves16)
        ties.turned = _noise_turned
    if name == "straightbeyond":  # every fit's steps beyond its sample's kept k straight (curves17)
        ppa._Loop._capped = _capped_beyond
    if name == "sharesbeyond":  # the final fit's curves keep no correction on axes beyond the sample's kept k (curves17)
        ppa._Loop.__post_init__ = _loop_init_beyond
        steps.signal_shares = _shares_beyond
    if name.startswith("axisrows"):  # the final map's correction rows kept axis by axis by held-out halvings (curves18)
        _AXIS["z"] = float(name[len("axisrows"):] or 0.0)
        candidates.fit_selected, shrink.tied = _fit_selected_groups, _axis_rows
    if name == "noshares":  # the final fit's curves by least squares, not kept at their axes' shares of signal
        candidates.SHARES = False
    if name.startswith("axes"):  # plain fits validated axis by axis (no fences), at z = 1, 0 or Bonferroni's
        z = name[len("axes"):]
        ppa._Loop._choices = lambda self, size, top: ppa._degree_choices(
            self.res, size, self.spec.candidates, top, self.folds, self.designs_of, True) if not self.spec.robust else CHOICES(self, size, top)
        if z != "bonf":
            degrees.axis_significance = lambda m: float(z)
    if name.startswith("escaxes"):  # the escalation's family validated axis by axis at z (no fences) instead of robust=True's
        degrees.axis_significance = lambda m: float(name[len("escaxes"):])
        steps.Designs.__call__ = lambda self, alphas, top: original(dataclasses.replace(self, fenced=False), alphas, top)
    if name.startswith("rounds"):  # the whole-fit validation holds out this many of its folds in turn
        candidates.ROUNDS = int(name[len("rounds"):])
    if name.startswith("coarse"):  # the whole-fit validation's split over q x q regions of the 10 x 10 blocks
        q = int(name[len("coarse"):])

        class Coarse(degrees.Folds):
            @classmethod
            def make(cls, groups, n, n_folds, rng):
                if groups is not None:
                    g = np.asarray(groups).ravel()
                    groups = (g // 10 * q // 10) * q + g % 10 * q // 10
                return degrees.Folds.make(groups, n, n_folds, rng)
        candidates.Folds = Coarse
    try:
        yield
    finally:
        steps.Designs.__call__ = original
        candidates.Folds = degrees.Folds
        ppa._Loop._choices, degrees.axis_significance = CHOICES, AXIS_SIGNIFICANCE
        basis.fences, basis.FENCE, candidates.ROUNDS, candidates.LOOK, candidates.COUNT = fences, FENCE, ROUNDS, LOOK, COUNT
        shrink.SHRINK, candidates.SHARES, candidates.judge = SHRINK, True, JUDGE
        ties.TIE_SE, ties.TIES, ties.turned, ties.tied_runs = 2.0, True, TURNED, TIED_RUNS
        ppa._Loop._capped, ppa._Loop.__post_init__, steps.signal_shares = CAPPED, LOOP_INIT, SHARES_OF
        candidates.fit_selected, shrink.tied = CAND_FIT_SELECTED, TIED


def edge_rows(model: PPA, held: np.ndarray, scale: np.ndarray | None = None) -> dict:
    """Where the excess over PCA sits at the worst k of ``scenes.user_k_metrics`` (a random-halves fit): the worst k,
    whether it is kept, the share of the excess at that k carried by the 1, 3 and 10 unseen rows of most excess, the top
    row's PCA error over the mean one (an anomalous row: hundreds), and the ratio at that k without those 3 rows."""
    z = held if scale is None else held / scale  # a standardizing model's errors are in standardized units
    e, ep = np.asarray(model.reconstruction_mse(held))[:-1], np.asarray(model.pca_.reconstruction_mse(held))[:-1]
    total = np.mean(np.sum((z - z.mean(0)) ** 2, 1))
    floor = 1e-9 * total
    k = int(np.argmax(np.maximum(e, floor) / np.maximum(ep, floor))) + 1
    _, _, _, ppa_rows, pca_rows = compare_errors_and_forward(model.params_, held, kept=k)
    excess = ppa_rows - pca_rows
    order = np.argsort(-excess)
    rest = np.delete(held, order[:3], 0)
    without = 100 * max(float(np.asarray(model.reconstruction_mse(rest))[k - 1]), floor) / max(float(np.asarray(model.pca_.reconstruction_mse(rest))[k - 1]), floor)
    return {"k": k, "k_kept": bool(ep[k - 1] >= 1e-3 * total),
            "share_of_top": [round(float(excess[order[:m]].sum() / excess.sum()), 2) if excess.sum() > 0 else None for m in (1, 3, 10)],
            "top_pca_error_over_mean": round(float(pca_rows[order[0]] / pca_rows.mean()), 1), "without_top3": round(without, 2)}


def rows(name: str, params: dict, seeds: list[int] | None = None):
    if name in UCI_TABLES:
        X = load_table(name).normalised()
        for seed in range(3) if seeds is None else seeds:
            tr, te = scenes.random_halves(X, seed)
            model = PPA(random_state=0, **params).fit(tr)
            yield "halves", seed, scenes.user_k_metrics(model, te), edge_rows(model, te)
        return
    cube = scenes.SCENES[name]()
    X = scenes.pixels(cube)
    std = name in scenes.STANDARDIZE
    kw = dict(params, **({"standardize": True} if std else {}))
    for seed in (0, 1) if seeds is None else seeds:
        tr, te = scenes.random_halves(X, seed)
        model = PPA(random_state=0, **kw).fit(tr)
        yield "halves", seed, scenes.user_k_metrics(model, te, tr.std(0) if std else None), edge_rows(model, te, tr.std(0) if std else None)
        m, te = scenes.fit_checkerboard(cube, seed, **kw)
        yield "checkerboard", seed, scenes.user_k_metrics(m, te, X.std(0) if std else None), {}


def summary(paths: list[str]) -> None:
    """Per scene and variant, over seeds and splits: worst kept k / worst any k / mean over the kept k (as the table of
    ``scenes.py``), the worst split's mean in brackets; then the mean over kept k averaged over the scenes, per variant."""
    cells: dict[tuple[str, str], list[dict]] = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                cells.setdefault((r["scene"], r["variant"]), []).append(r)
    variants = sorted({v for _, v in cells}, key=lambda v: (v != "base", v))
    print("| scene | " + " | ".join(variants) + " |\n|---|" + "---|" * len(variants))
    for scene in dict.fromkeys(s for s, _ in cells):
        row = []
        for v in variants:
            rs = cells.get((scene, v), [])
            row.append(f"{max(r['worst_kept'] for r in rs):.1f} / {max(r['worst_any'] for r in rs):.1f} / "
                       f"{np.mean([r['mean_kept'] for r in rs]):.1f} ({max(r['mean_kept'] for r in rs):.1f})" if rs else "-")
        print(f"| {scene} | " + " | ".join(row) + " |")
    for v in variants:
        means = [np.mean([r["mean_kept"] for r in rs]) for (s, vv), rs in cells.items() if vv == v]
        print(f"{v}: mean over kept k averaged over {len(means)} scenes {np.mean(means):.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("scenes", nargs="+", help="scene names, or with --summary the JSON-lines files to summarise")
    parser.add_argument("--variants", default="base,fenced")
    parser.add_argument("--summary", action="store_true")
    parser.add_argument("--seeds", default=None, help="comma-separated seeds (default: 0,1,2 for UCI tables, 0,1 for scenes)")
    args = parser.parse_args()
    if args.summary:
        return summary(args.scenes)
    warnings.simplefilter("ignore")
    for name in args.scenes:
        for v in args.variants.split(","):
            with contextlib.ExitStack() as stack:
                for part in v.split("+"):  # variants combine: fenced+rounds2
                    stack.enter_context(variant(part))
                seeds = None if args.seeds is None else [int(s) for s in args.seeds.split(",")]
                for split, seed, (worst_kept, worst_any, mean_kept, kept), edges in rows(name, {}, seeds):
                    print(json.dumps({"scene": name, "variant": v, "split": split, "seed": seed, "worst_kept": round(worst_kept, 2),
                                      "worst_any": round(worst_any, 2), "mean_kept": round(mean_kept, 2), "kept": kept} | edges
                                     | ({"axis_rows": _AXIS["log"][-1]} if _AXIS["log"] and v.startswith("axisrows") else {})), flush=True)
                    _AXIS["log"].clear()


if __name__ == "__main__":
    main()
