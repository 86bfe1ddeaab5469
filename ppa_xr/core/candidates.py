"""Whole-fit validation: which configuration of the fit to keep, judged on rows it was not fitted on.

Each step of a fit validates its own polynomial (grouped cross-validation of
its degree, :func:`~ppa_xr.core.degrees.select_degree`), but on the residual
that the earlier steps left *in sample*. What that cannot see is the fit as a
whole on unseen rows: the earlier corrections do not hold exactly there, and
a correction that pays on the leading axes can add more error than it removes
on later, low-variance components. That is why a default fit can be worse
than its own PCA at some ``k`` on unseen pixels while in sample it never is
(paper Property 2), and why no per-step threshold fixes it for every table:
the robust per-axis rule keeps hyperspectral scenes at PCA's level but gives
up the gain of skewed tables.

:func:`select` measures whole fits on held-out rows instead, and chooses how
many curved steps to keep (``max_curved``) from them:

* **split**: the sample's groups (spatial blocks, or random rows dealt into
  ``ppa_xr.core.degrees.PSEUDO_GROUPS`` groups) are dealt into
  :data:`FOLDS` folds, and the first :data:`ROUNDS` are held out in turn
  (default: one half of the groups is held out once);
* **candidates**: one fit on the other groups, and every *truncation* of it,
  ``max_curved = c`` for ``c = 0 .. C`` (``c = 0`` is PCA, ``c = C`` the
  uncapped fit), measured at once (:func:`truncation_errors`): a fit with
  ``max_curved=c`` is the uncapped fit up to its ``c``-th curved step,
  exactly (same folds, same choices), followed by the PCA of the residual,
  so the truncations cost no refit;
* **guard** (:func:`judge`): on the held-out rows, with groups as the units,
  ``R(k) = sum e_cand(k) / sum e_PCA(k)`` (the PCA of the same training
  rows; errors below :data:`EQUAL` of the held-out energy count as equal)
  and its delta-method standard error ``se(k)``; a candidate is admitted
  unless ``R(k) - z se(k) > 1 + ALLOWANCE`` at some ``k``, ``z`` the one-sided
  normal quantile at ``LEVEL / (d-1)`` (Bonferroni over ``k``): it is
  refused only on evidence, at family-wise level 5%, that it is more than 1%
  worse than PCA somewhere. That is the test of the package's shift check
  (``ppa_xr.core.errors.LEVEL`` and ``ALLOWANCE``) on rows the candidate was
  not fitted on. PCA is always admitted;
* **choice**: the uncapped fit, every curved step of which passed the degree
  selection's one-standard-error rule, stands while the guard admits it and
  no truncation's held-out mean of ``R(k)`` over ``k`` is lower by more than
  :data:`SWITCH` paired standard errors (the same rule, the burden of proof
  on departing from it: the lowest mean among a dozen truncations of a
  half-size fit otherwise follows noise; measured on Sat and Segmentation,
  it cut steps that pay on unseen rows). Where the half-size fit has no
  curved step it is its own PCA: nothing is judged, and the plain fit stands;
* **escalation**: where the uncapped fit is refused or beaten (held-out
  evidence that its curvature harms somewhere: heavy tails, anomalous
  pixels, hundreds of bands), or reads more than ``ALLOWANCE`` above PCA
  where users look (below), the robust family's fit and truncations
  (``robust=True``: per-axis validation, fences) join, and the admitted
  candidate with the lowest held-out mean is chosen (on a tie, fewer curved
  steps), or the uncapped fit where only its worst kept ``k`` failed;
* **where users look** (:func:`_where_users_look`): users keep the ``k``
  at which PCA's held-out error is at least :data:`KEPT` (0.1%) of the
  held-out energy; beyond, the components carry noise. Where the choice's
  worst held-out ratio over those ``k`` is more than ``ALLOWANCE`` above
  PCA, the admitted curved candidate of the lowest mean within it at every
  kept ``k`` replaces it, if it gives up no more mean than the excess it
  removes (one point of the mean over ``k`` for one point at the worst kept
  ``k``). A mean over ``k`` hides a single bad ``k``: on Pageblocks the
  uncapped fit read 113.7 at a kept ``k`` on the held-out half (112.4 on
  unseen rows) and a one-step truncation 100.8 for 2.1 points of mean
  (92.4 unseen); on the Sentinel-2 NDVI series a two-step truncation read
  101.8 for a mean gain of 1.0, the robust fit 100.0 (111.8 against 100.0
  on the unseen tiles). Where no curved candidate within the allowance is
  that cheap, the choice stands, and PCA is not offered: on another
  Pageblocks split every curved candidate read 101.8-123.6 at some kept
  ``k`` (standard errors up to 33 points there, a few held-out rows), and
  PCA would have given up 10.7 points of held-out mean (35 on the unseen
  rows, where the uncapped fit read 87.4 at its worst kept ``k``). The choice is
  fitted on the whole sample; ``c = C`` is read as uncapped, as the whole
  sample may support more curved steps than the half did.

Why one held-out half and not K folds: a fit per fold and family is the
whole cost. One half-size fit (two where the robust family is tried) keeps
the default fit within 3x of the fit without validation (measured 2.7-3.0x
at 36 and 198 bands, benchmarks/bench_defaults.py); 5 folds cost 10 fits.
Holding out half the groups, rather than 30%, keeps the guard from refusing
good candidates on noise (the first prototype fell back to PCA on
Segmentation). Holding out both halves in turn (``ROUNDS = 2``) measured no
better on the benchmark tables (Segmentation 79.6 against 80.2, Student-t's
worst k 102.6 against 101.6, abu-beach-4 equal) at 3.1-4.7x the time.
Half-size fits are pessimistic proxies where the sample is small for its
width (abu-beach-4: 2,500 rows of 102 bands, the plain half-fit is above PCA
on average while the whole sample's is not), which is what the escalation
to the robust family answers.
Why not plain against robust on every sample: the robust family gives up the
gain of skewed tables, and a held-out half cannot tell the two apart where
their means differ by less than its noise (measured: the choice flipped
between seeds on Segmentation and Pageblocks); it is a remedy, tried where
the plain fit is shown to harm.

What this cannot see: an unseen curve's worst ``k`` that the held-out half
does not show. A few rows can make it (Segmentation: 2-5 of 2,700 unseen
rows at the edge of a step's fitted range carry the whole excess at a
noise-level ``k``, standard error 5-16 points), and so can regions of a
scene the fitting sample lacks (cube fits of the MODIS NDVI series read
101.6 +- 1.2 at their worst kept ``k`` on the held-out half and 105.9 on
the unseen tiles; refits on random halves of the same pixels read 97.7-108.5
there): a property of the one final fit, not of its configuration, and
held-out halves of the fitting sample do not reproduce it
(benchmarks/results/scenes/README.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import scipy.linalg
import scipy.special

from . import basis, blas, checks
from .degrees import PSEUDO_GROUPS, Folds
from .errors import ALLOWANCE, LEVEL
from .linalg import power_of_two, unit_mean
from .params import PPAParams
from .ppa import Fit as Fitted
from .ppa import Progress, fit, fit_params
from .spec import Spec

#: errors below this fraction of the held-out rows' total energy count as equal (float64 rounding beyond
#: a rank-deficient table's rank), so such k compare 100
EQUAL = 1e-9
#: a truncation replaces the admitted uncapped fit only when its held-out mean is lower by this many paired
#: standard errors: the one-standard-error rule of the degree selection (degrees.SIGNIFICANCE), the burden
#: of proof on departing from the fit whose every curved step already passed it
SWITCH = 1.0
#: the sample's groups are dealt into FOLDS folds, of which the first ROUNDS are held out in turn
FOLDS, ROUNDS = 2, 1
#: the kept k, where users look: PCA's held-out error is at least this fraction of the held-out rows' energy (PCA
#: explains at most 99.9%); the components beyond carry noise
KEPT = 1e-3
#: whether the choice is checked where users look (:func:`_where_users_look`); off: the choice by the mean alone
LOOK = True


def _state(params: PPAParams, x: np.ndarray) -> np.ndarray:
    """``r = A W (x - mean)`` (n x d): the outputs before any step's correction."""
    return params.to_fit_space(x) @ params.rotation.T


def _correction(params: PPAParams, p: int, r: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Curved step ``p``'s correction of ``r`` (n x d): the basis ``B = [1, T_p(r_p)]`` (n x g+1) and the
    coefficients ``F`` (g+1 x d-p-1), so that ``r[:, p+1:] -= B F`` is the step (the kernels' forward map)."""
    g = max(int(params.degrees[p]), 1)
    t = (r[:, p] - params.center[p]) / params.scale[p]
    design = np.empty((g + 1, len(t)))
    design[0] = 1
    basis.powers(t, g, params.tails, design[1:])
    return design.T, np.vstack([params.forward_bias[p, p + 1:], params.forward[p, :g, p + 1:]])


def _suffix(column_sums: np.ndarray) -> np.ndarray:
    """``out[..., j] = sum_{l >= j} column_sums[..., l]``."""
    return np.cumsum(column_sums[..., ::-1], axis=-1)[..., ::-1]


def _group_squares(values: np.ndarray, weights: np.ndarray | None, starts: np.ndarray) -> np.ndarray:
    """``sum_{i in g} w_i values_ij^2`` for each group ``g`` (rows from ``starts``), in float64, with one temporary."""
    squares = np.square(values, dtype=np.float64)
    if weights is not None:
        squares *= weights[:, None]
    return np.add.reduceat(squares, starts, axis=0)


def truncation_errors(params: PPAParams, train: np.ndarray, held: np.ndarray, bounds: np.ndarray,
                      weights: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """Held-out squared errors of every truncation of a fit, summed per group: (C+1, groups, d-1).

    ``params`` is a fit on ``train``, its curved steps ``p_1 < ... < p_C``.
    Truncation ``c`` keeps the first ``c`` curved steps and replaces the rest
    by the PCA of the training residual after step ``p_c``: what
    ``max_curved=c`` fits on ``train`` (its steps up to ``p_c`` are the same,
    and a capped fit is the PCA of the residual); ``c = 0`` is the PCA of
    ``train``. ``held`` rows are sorted by group, ``bounds`` the groups' row
    ranges; ``weights``, the rows' (train's, held's), weigh every sum. Entry
    ``[c, g, k-1]`` is the squared error keeping ``k`` components, summed over
    group ``g``'s rows.

    One pass over the curved steps. The training residual's second moments are
    updated with each correction ``r -= B F`` (``M -= Q^T F + F^T Q - F^T B^T B F``
    on the corrected block, ``Q = B^T r``: O(n g d) a step instead of O(n d^2)),
    the held-out rows are projected on each truncation's PCA (O(n_held d^2)).
    """
    d = params.n_features
    curved = params.curved_steps()
    r_train, r_held = _state(params, train), _state(params, held)
    w_train, w_held = (np.ones(len(train)), None) if weights is None else weights
    moments = r_train.T @ r_train if weights is None else (r_train * w_train[:, None]).T @ r_train
    starts = bounds[:-1]
    out = np.empty((len(curved) + 1, len(starts), d - 1))
    full = np.empty((len(starts), d - 1))  # the untruncated fit's errors, filled as the states come
    for c in range(len(curved) + 1):
        if c:
            p = curved[c - 1]
            design, coef = _correction(params, p, r_train)
            weighted = design * w_train[:, None]
            cross = weighted.T @ r_train[:, p + 1:]  # Q = B^T r on the corrected block
            shift = cross.T @ coef
            # only the corrected block's moments are read again (each later truncation's PCA lies within it)
            moments[p + 1:, p + 1:] -= shift + shift.T - coef.T @ (weighted.T @ design) @ coef
            r_train[:, p + 1:] -= design @ coef
            design, coef = _correction(params, p, r_held)
            r_held[:, p + 1:] -= design @ coef
        lead = 0 if c == 0 else curved[c - 1] + 1  # outputs fixed by the kept steps
        tail = r_held[:, lead:]
        # state c holds for k from lead to the next curved step: the untruncated errors ||r[k:]||^2 there
        squares = _suffix(_group_squares(tail, w_held, starts))
        last = curved[c] if c < len(curved) else d - 1
        ks = np.arange(max(lead, 1), last + 1)
        full[:, ks - 1] = squares[:, ks - lead]
        # the capped rest: PCA of the training residual's second moments (its mean is zero: every step's
        # least squares has a constant term); its errors keeping lead + j components
        _, vectors = scipy.linalg.eigh(moments[lead:, lead:], check_finite=False)
        # the projections in float32 (half the cost of the largest product here): an error of 1e-7 of a row's
        # norm in each, far below the EQUAL floor of the comparison; the squares are summed in float64
        projected = tail.astype(np.float32) @ vectors[:, ::-1].astype(np.float32)
        errors = _suffix(_group_squares(projected, w_held, starts))
        out[c, :, :lead] = full[:, :lead]
        out[c, :, lead:] = errors[:, 1: d - lead]
    return out


@dataclass(frozen=True)
class Verdict:
    """One candidate's held-out curve against PCA: ``relative`` (percent, per k), its standard error
    (percent), its mean over k, whether the guard admits it, each group's influence on the mean
    (percent; their differences between two candidates give the paired standard error of theirs), and
    ``worst``, the highest ``relative`` over the kept k (:data:`KEPT`; 100 where none is kept)."""

    relative: np.ndarray
    se: np.ndarray
    mean: float
    admitted: bool
    influence: np.ndarray
    worst: float = 100.0

    def beats(self, other: Verdict) -> bool:
        """Whether this mean is below ``other``'s by more than :data:`SWITCH` paired standard errors."""
        diff = self.influence - other.influence
        groups = len(diff)
        se = np.sqrt(groups / max(groups - 1, 1) * np.sum((diff - diff.mean()) ** 2))
        return self.mean < other.mean - SWITCH * se


def judge(errors: np.ndarray, pca: np.ndarray, total: float) -> Verdict:
    """A candidate's per-group held-out errors (groups, d-1) against its PCA's (groups, d-1).

    ``R_k = sum_g a_gk / sum_g b_gk``, both floored at ``EQUAL * total``
    (``total``: the held-out rows' energy), and the delta-method standard error
    with groups as units, ``se_k = sqrt(G/(G-1) sum_g (a_gk - R_k b_gk)^2) / sum_g b_gk``.
    Admitted when ``R_k - z se_k <= 1 + ALLOWANCE`` at every ``k``, ``z`` the
    one-sided normal quantile at ``LEVEL / (d-1)``. Its worst where users look:
    ``max R_k`` over the kept ``k``, ``sum_g b_gk >= KEPT total``.
    """
    groups, width = errors.shape
    floor = EQUAL * total
    a, b = errors.sum(axis=0), pca.sum(axis=0)
    ratio = np.maximum(a, floor) / np.maximum(b, floor)
    spread = np.sqrt(groups / max(groups - 1, 1) * np.sum((errors - ratio * pca) ** 2, axis=0)) / np.maximum(b, floor)
    spread[(a <= floor) & (b <= floor)] = 0.0  # both are rounding: equal
    z = -scipy.special.ndtri(LEVEL / width)  # the normal quantile (scipy.stats.norm.isf without its overhead)
    admitted = bool(np.all(ratio - z * spread <= 1 + ALLOWANCE))
    # the delta method's linearisation of mean_k R_k: group g contributes mean_k (a_gk - R_k b_gk) / sum_g b_gk
    terms = (errors - ratio * pca) / np.maximum(b, floor)
    terms[:, (a <= floor) & (b <= floor)] = 0.0
    kept = b >= KEPT * total
    worst = float(100 * ratio[kept].max()) if kept.any() else 100.0
    return Verdict(100 * ratio, 100 * spread, float(100 * ratio.mean()), admitted, 100 * terms.mean(axis=1), worst)


#: a fit of the sample's rows divided by ``unit`` (a power of two): ``fit(rows, groups, rng, weights, unit, robust=...,
#: max_curved=...) -> PPAParams``
Fit = Callable[..., PPAParams]
#: the configuration a fit was made with, and whether it was chosen by :func:`select`
Choice = dict


@dataclass(frozen=True)
class Selection:
    """The chosen configuration (``choice``: ``{"robust": bool, "max_curved": int or None}``) and every
    candidate's verdict, keyed by ``(robust, max_curved)`` (None: uncapped)."""

    choice: dict
    verdicts: dict


def _fold_rows(folds, order: np.ndarray, f: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fold ``f``'s held-out groups, their rows (sorted by group) with the groups' bounds."""
    held = np.flatnonzero(folds.fold == f)
    rows = np.concatenate([order[folds.bounds[g]:folds.bounds[g + 1]] for g in held])
    return held, rows, np.concatenate([[0], np.cumsum(np.diff(folds.bounds)[held])])


def feasible(n: int, groups: np.ndarray | None, declared: Spec) -> bool:
    """Whether whole-fit validation can run: candidate degrees to choose from, at least 4 groups (half of
    them held out, the other half, at least 2, to select degrees on) and ``2 FOLDS min_samples`` rows."""
    n_groups = min(PSEUDO_GROUPS, n) if groups is None else len(np.unique(np.asarray(groups)))
    return len(declared.candidates) > 1 and n_groups >= 4 and n >= 2 * min(FOLDS, n_groups) * declared.min_samples


def select(X: np.ndarray, fit: Fit, groups: np.ndarray | None, rng: np.random.Generator, min_samples: int,
           escalate: bool = True, n_folds: int | None = None, rounds: int | None = None,
           weights: np.ndarray | None = None) -> Selection | None:
    """Validate the truncations of a fit on ``X`` (see the module docstring) and choose one; with
    ``escalate``, the robust family's too where the uncapped plain fit is refused or beaten. None where a
    training part is too small to fit. ``fit(rows, groups, rng, weights, robust=..., max_curved=...)`` fits
    rows with every other option of the final fit; ``weights`` (n,) weigh the rows (None: equally).

    The groups are dealt into ``n_folds`` folds, and the first ``rounds`` of them are held out in turn."""
    n = len(X)
    folds, order = Folds.make(groups, n, FOLDS if n_folds is None else n_folds, rng)
    rounds = min(ROUNDS if rounds is None else rounds, folds.n_folds)
    sizes = np.bincount(folds.fold, weights=np.diff(folds.bounds), minlength=folds.n_folds)
    if n - sizes[:rounds].max() < min_samples or np.bincount(folds.fold)[:rounds].max() > len(folds.fold) - 2:
        return None
    validation = _Validation(X, fit, None if weights is None else unit_mean(checks.row_weights(weights, n)),
                             _parts(folds, order, rounds, groups, rng), np.isin(folds.fold, np.arange(rounds)))
    if not validation.family(False):
        return Selection({"robust": False, "max_curved": None}, {})  # no curvature in sight: the plain fit stands
    uncapped = validation.verdicts[(False, None)]
    stands = uncapped.admitted and not any(v.beats(uncapped) for v in validation.candidates().values())
    if stands and _where_users_look({(False, None): uncapped}, (False, None)) is None:
        return Selection({"robust": False, "max_curved": None}, validation.verdicts)  # the uncapped fit stands
    if escalate:  # refused, beaten or above PCA where users look: the robust family joins
        validation.family(True)
    admitted = validation.candidates()
    chosen = (False, None) if stands else min(admitted, key=_order(admitted))
    robust, max_curved = _where_users_look(admitted, chosen) or chosen
    return Selection({"robust": bool(robust), "max_curved": None if max_curved is None else int(max_curved)}, validation.verdicts)


def _order(verdicts: dict[tuple[bool, int | None], Verdict]) -> Callable[[tuple[bool, int | None]], tuple]:
    """Lowest held-out mean first; on a tie, fewer curved steps, then plain."""
    return lambda key: (verdicts[key].mean, key[1] is None, key[1] or 0, key[0])


def _where_users_look(admitted: dict[tuple[bool, int | None], Verdict], chosen: tuple[bool, int | None]) -> tuple[bool, int | None] | None:
    """None where ``chosen`` holds where users look: its worst held-out ratio over the kept k is within the
    allowance of PCA's (or :data:`LOOK` is off). Otherwise the admitted curved candidate of the lowest mean whose
    worst stays within it, where one gives up no more mean than the excess it removes, ``mean - mean_chosen <=
    worst_chosen - 100`` (a point of mean for a point at the worst kept k); where none does, the excess is
    beyond what any candidate avoids, and ``chosen`` stays."""
    limit, verdict = 100 * (1 + ALLOWANCE), admitted[chosen]
    if verdict.worst <= limit or not LOOK:
        return None
    safe = {key: v for key, v in admitted.items() if key[1] != 0 and v.worst <= limit and v.mean - verdict.mean <= verdict.worst - 100}
    return min(safe, key=_order(safe)) if safe else chosen


@dataclass(frozen=True)
class _Part:
    """One round of the validation: the held-out groups, their rows (sorted by group) and the groups' bounds
    among them, the training rows, their groups, and the seed of the fit on them."""

    held: np.ndarray
    rows: np.ndarray
    bounds: np.ndarray
    train: np.ndarray
    groups: np.ndarray | None
    seed: int


def _parts(folds: Folds, order: np.ndarray, rounds: int, groups: np.ndarray | None, rng: np.random.Generator) -> list[_Part]:
    parts = []
    for f in range(rounds):
        held, rows, bounds = _fold_rows(folds, order, f)
        keep = np.ones(len(order), dtype=bool)
        keep[rows] = False
        train = np.flatnonzero(keep)
        parts.append(_Part(held, rows, bounds, train, None if groups is None else np.asarray(groups).ravel()[train], int(rng.integers(2**63))))
    return parts


class _Validation:
    """The verdicts of every candidate, family by family, on the held-out parts: the PCA of each part's
    fit is the baseline, and the held-out rows' energy the floor of equal errors."""

    def __init__(self, X: np.ndarray, fit: Fit, weights: np.ndarray | None, parts: list[_Part], judged: np.ndarray) -> None:
        # the parts on the data divided by a power of two near its spread (exact): the fits are the same up to that
        # factor (they divide by such a power themselves), and squared errors of data at 1e-200 or 1e150 stay finite
        mean = X.mean(axis=0)
        self.X, self.unit = X, power_of_two(max(float(np.max(X.max(axis=0) - mean)), float(np.max(mean - X.min(axis=0)))))
        self.fit, self.weights, self.parts, self.judged = fit, weights, parts, judged
        self.pca = np.zeros((len(judged), X.shape[1] - 1))
        self.total = 0.0
        self.verdicts: dict[tuple[bool, int | None], Verdict] = {}

    def family(self, robust: bool) -> bool:
        """Judge the plain (or robust) fit of every part and all its truncations; False, judging nothing, where
        no plain fit has a curved step: each is its own PCA, and PCA is always admitted."""
        fits = [(part, self._fit(part, robust)) for part in self.parts]
        if not robust and not any(fitted[0].curved_steps() for _, fitted in fits):
            return False
        errors = [(part.held, self._errors(part, *fitted, robust=robust)) for part, fitted in fits]
        top = max(len(e) - 1 for _, e in errors)
        for c in range(1 if robust else 0, top + 1):  # the robust family's PCA (c = 0) is the plain family's
            held_out = np.empty_like(self.pca)
            for held, e in errors:
                held_out[held] = e[min(c, len(e) - 1)]
            # the fits with every curved step kept: the uncapped fit
            self.verdicts[(robust, None if c == top else c)] = judge(held_out[self.judged], self.pca[self.judged], self.total)
        return True

    def _fit(self, part: _Part, robust: bool) -> tuple[PPAParams, np.ndarray, np.ndarray]:
        """The part's fit, and its training and held-out rows (one gather of each, scaled in place)."""
        training, unseen = self.X[part.train], self.X[part.rows]
        training /= self.unit
        unseen /= self.unit
        weights = None if self.weights is None else self.weights[part.train]
        params = self.fit(training, part.groups, np.random.default_rng(part.seed), weights, self.unit, robust=robust, max_curved=None)
        return params, training, unseen

    def _errors(self, part: _Part, params: PPAParams, training: np.ndarray, unseen: np.ndarray, robust: bool) -> np.ndarray:
        w = None if self.weights is None else (self.weights[part.train], self.weights[part.rows])
        errors = truncation_errors(params, training, unseen, part.bounds, w)
        if not robust:  # the plain family's PCA (truncation 0) is the baseline of every candidate
            self.pca[part.held] = errors[0]
            z = params.to_fit_space(unseen)
            self.total += float(np.einsum("ij,ij->", z, z) if w is None else np.einsum("i,ij,ij->", w[1], z, z))
        return errors

    def candidates(self) -> dict[tuple[bool, int | None], Verdict]:
        """The admitted candidates, PCA always among them."""
        return {key: v for key, v in self.verdicts.items() if v.admitted or key[1] == 0}


def fit_selected(X: np.ndarray, declared: Spec, groups: np.ndarray | None, rng: np.random.Generator,
                 progress: Progress | None = None, weights: np.ndarray | None = None) -> tuple[Fitted, Choice]:
    """The fit of ``declared``, its configuration chosen by :func:`select` where ``configuration="validated"`` leaves it
    open: nothing is searched where ``robust=True`` or a ``max_curved`` fix it, a single degree leaves nothing to
    validate, or the sample is too small (:func:`feasible`). The validation draws from a child of ``rng``, so the
    final fit's folds are those of the same fit without it. Its fits are PCA-led whatever the leading vectors:
    a searched one (PPA-GD) is kept by its own held-out test at each step, and the configuration chosen for the
    PCA-led fit caps its steps; GD is never combined with the robust family. ``weights`` weigh the rows in
    the validation and the fit alike.

    Returns
    -------
    tuple of Fit and dict
        The fit (parameters and training error curve), and the configuration: ``{"robust", "max_curved", "validated"}``.
    """
    choice: Choice = {"robust": declared.robust, "max_curved": declared.max_curved, "validated": False}
    searched = declared.configuration == "validated" and not declared.robust and declared.max_curved is None
    if searched and feasible(len(X), groups, declared):

        def candidate(rows: np.ndarray, row_groups: np.ndarray | None, child: np.random.Generator, row_weights: np.ndarray | None,
                      unit: float, **configuration: object) -> PPAParams:
            # the rows are in units of ``unit``, and so is the noise (its covariance in their square): the
            # whitened rows, where the truncations are measured, are those of the fit itself
            noise = None if declared.noise_cov is None else declared.noise_cov / unit / unit
            spec = declared.replace(leading="pca", noise_cov=noise, **configuration)
            return fit_params(rows, spec, groups=row_groups, rng=child, weights=row_weights)

        with blas.every_blas_on_one_thread():  # as the fits: the products are small, and extra BLAS threads only wait
            found = select(X, candidate, groups, rng.spawn(1)[0], declared.min_samples, escalate=declared.leading == "pca", weights=weights)
        if found is not None:
            choice = found.choice | {"validated": True}
    final = declared.replace(robust=choice["robust"], max_curved=choice["max_curved"])
    return fit(X, final, groups=groups, rng=rng, progress=progress, weights=weights), choice
