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
  so the truncations cost no refit. Nor a projection of the rows: each
  held-out group's second moments (d x d, made once for both families) are
  turned into a fit's outputs and downdated with its corrections (the
  held-out rows' own outputs where the groups' moments would outnumber the
  rows' values); the training residual's, whose eigenvectors are each
  truncation's PCA, are the half-size fit's own covariances after each
  curved step (:class:`_Carried`: no pass over the training rows). Where the
  moments' rounding could move an error more than the rows' own arithmetic
  would (:func:`_settled`), every error comes from the rows, so the choices
  are the rows'; and a verdict whose margin is within the rounding of its
  sums (:data:`TIE`) is decided by a stated rule (:func:`_at_most`: ties are
  admitted, do not beat, and go to the fewest curved steps);
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
  held-out energy (``k = 1 .. n_components`` where the user gives that
  count); beyond, the components carry noise. Where the choice's
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
  rows, where the uncapped fit read 87.4 at its worst kept ``k``);
* **count** (:func:`_counted`): the choice is fitted on the whole sample, an
  uncapped one with ``max_curved = C``, as many curved steps as its family's
  half-size fit had. The whole sample supports more curved steps than half of
  it, and those the half did not have were never judged: on Segmentation such
  a step, added at a noise-level ``k``, read 117.4 on unseen rows (100.0
  capped), for 1.0 point of mean over the kept ``k`` at most (Sat; 0.9 on
  the Moffett scene; benchmarks/results/scenes/README.md).

Why one held-out half and not K folds: a fit per fold and family is the
whole cost: one half-size fit (two where the robust family is tried, from
one start: :class:`_Starts`), and
what the truncations add, ``O(n K d)`` for ``K`` columns of the curved steps'
bases and ``O(groups d^3)`` a truncation, below a fit's own ``O(n d^2)``
(benchmarks/bench_defaults.py: 2.8-3.6x the fixed fit at 200,000 x 36 and
x 198, where the robust family joins); 5 folds cost 10 fits.
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
from dataclasses import dataclass, field

import numpy as np

from . import basis, blas, checks
from .degrees import PSEUDO_GROUPS, Folds, upper_quantile
from .errors import ALLOWANCE, LEVEL
from .linalg import PANEL, eigenbasis, power_of_two, spread_about, unit_mean
from .params import PPAParams
from .ppa import Fit as Fitted
from .ppa import Begun, Carried, Progress, begin, fit
from .spec import Spec

#: errors below this fraction of the held-out rows' total energy count as equal (float64 rounding beyond
#: a rank-deficient table's rank), so such k compare 100
EQUAL = 1e-9
#: a truncation replaces the admitted uncapped fit only when its held-out mean is lower by this many paired
#: standard errors: the one-standard-error rule of the degree selection (degrees.SIGNIFICANCE), the burden
#: of proof on departing from the fit whose every curved step already passed it
SWITCH = 1.0
#: the moments' rounding, ``||dM_g||_2 <= ROUNDING eps slack_g`` (:meth:`_Moments.rounding`): the rows' moments and these
#: differed by 0.40 eps slack_g at most (the held-out groups of the UCI tables; 0.01-0.1 on the training residuals of
#: the scenes and curved mixtures), so a fifth of the bound
ROUNDING = 2.0
#: the carried covariances' rounding, ``||dM||_2 <= CARRIED eps N unit^2 reference`` (:class:`_Carried`): they and the
#: moments of the rows corrected step by step differed by 300 eps N unit^2 reference at most (a curved step's residual
#: at 100,000 x 36; 4.3 at most in the 616 other blocks of the 60 fits of benchmarks/results/defaults_times.txt), so
#: about a seventh of the bound
CARRIED = 2048.0
#: the verdicts' comparisons (admitted, beats, the lowest mean, the worst kept k against the allowance, the kept k and
#: the floor of equal errors; :func:`_settled`'s bound against its allowance) take sides that differ by at most this
#: share of their size as ties, decided by a stated rule (:func:`_at_most`), not by the order of their sums: ``2u``,
#: ``u = 2^-24`` the unit roundoff of the held-out rows' float32 projections, the reference arithmetic, which resolves
#: no finer difference (measured over the 618 verdicts of 60 fits: the training moments from the rows or from the
#: fit's covariances moved ``R(k) - z se(k)`` by up to 1.8e-8 of the allowance and the means by 3.4e-9; the closest
#: margin of a decision, a truncation beating the uncapped fit at 200,000 x 198, was 5.5e-7 of the mean)
TIE = 2.0**-23
#: a half-size fit keeps its carried covariances (d x m and m x m after each curved step) where they hold at most
#: this share of its rows' values, or :data:`CARRY_FLOOR` values: beyond (wide tables of few rows: 20,000 x 1,000
#: would keep about its rows' size again), the training side is measured from its rows (:func:`carried_values`)
CARRY, CARRY_FLOOR = 0.1, 2**20
#: the held-out errors are taken from moments where their rounding moves no error by more than the rows' float32
#: projections could, or than this share of the floor of equal errors (``EQUAL`` of the held-out energy); else
#: from the rows (:func:`_settled`)
TOLERANCE = 0.1
#: the held-out measurement's moments are made beside the plain half-size fit where they are at most this share of
#: the training rows' values (what they add to the fit's memory meanwhile)
BESIDE = 0.1
#: features from which the held-out measurement runs its two sides on two threads: its products are d x d x d, and
#: below about 100 features one (about 10 us at 36) costs less than a thread pool's start (measured: a 6,435 x 36
#: default fit 2.9x the fixed one on one thread, 3.4x on two; 200,000 x 198: 3.45x and 2.96x in wall time)
THREADED_FEATURES = 100
#: the sample's groups are dealt into FOLDS folds, of which the first ROUNDS are held out in turn
FOLDS, ROUNDS = 2, 1
#: the kept k, where users look: PCA's held-out error is at least this fraction of the held-out rows' energy (PCA
#: explains at most 99.9%); the components beyond carry noise
KEPT = 1e-3
#: whether the choice is checked where users look (:func:`_where_users_look`); off: the choice by the mean alone
LOOK = True
#: an uncapped choice is fitted on the whole sample with as many curved steps as its half-size fit had (the curves the
#: validation judged), not every curved step the whole sample supports (:func:`_counted`)
COUNT = True
#: the final fit's curves keep each axis's share of signal (:func:`~ppa_xr.core.steps.signal_shares`; off: least squares)
SHARES = True


def _correction(params: PPAParams, p: int, column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Curved step ``p``'s correction of the states ``r`` (n x d), from their column ``r_p`` (n,): the basis
    ``B = [1, T_p(r_p)]`` (n x g+1) and the coefficients ``F`` (g+1 x d-p-1), so that ``r[:, p+1:] -= B F``
    is the step (the kernels' forward map)."""
    return _basis(params, p, column), _coefficients(params, p)


def _basis(params: PPAParams, p: int, column: np.ndarray) -> np.ndarray:
    """:func:`_correction`'s basis ``B`` (n x g+1), a transposed view."""
    g = max(int(params.degrees[p]), 1)
    t = (column - params.center[p]) / params.scale[p]
    design = np.empty((g + 1, len(t)))
    design[0] = 1
    basis.powers(t, g, params.tails, design[1:])
    return design.T


def _coefficients(params: PPAParams, p: int) -> np.ndarray:
    """:func:`_correction`'s coefficients ``F`` (g+1 x d-p-1)."""
    g = max(int(params.degrees[p]), 1)
    return np.vstack([params.forward_bias[p, p + 1:], params.forward[p, :g, p + 1:]])


def _norms(stack: np.ndarray) -> np.ndarray:
    """The Frobenius norm of each matrix of a stack (groups, a, b): (groups,)."""
    return np.sqrt(np.einsum("gij,gij->g", stack, stack))


def _suffix(column_sums: np.ndarray) -> np.ndarray:
    """``out[..., j] = sum_{l >= j} column_sums[..., l]``."""
    return np.cumsum(column_sums[..., ::-1], axis=-1)[..., ::-1]


def _group_squares(values: np.ndarray, weights: np.ndarray | None, starts: np.ndarray) -> np.ndarray:
    """``sum_{i in g} w_i values_ij^2`` for each group ``g`` (rows from ``starts``), in float64, with one temporary."""
    squares = np.square(values, dtype=np.float64)
    if weights is not None:
        squares *= weights[:, None]
    return np.add.reduceat(squares, starts, axis=0)


class Groups:
    """Rows sorted by group (``bounds``), their weights (None: 1), and what every fit measured on them shares:
    each group's weight ``n_g = sum w_i``, and about an ``origin`` near the rows' mean (the moments then hold
    the spread, not the offset), its sum ``s_g = sum w_i y_i`` and, with ``scatter``, ``S_g = sum w_i y_i y_i^T``,
    ``y = x - origin`` (one ``O(n d^2)`` pass, a panel of rows at a time, made once for all the fits)."""

    def __init__(self, rows: np.ndarray, weights: np.ndarray | None, bounds: np.ndarray, scatter: bool = True,
                 origin: np.ndarray | None = None) -> None:
        self.rows, self.weights, self.bounds = rows, weights, bounds
        self.origin = rows.mean(axis=0) if origin is None else origin
        self.spans = list(zip(bounds[:-1].tolist(), bounds[1:].tolist()))
        w = np.ones(len(rows)) if weights is None else weights
        self.counts = np.add.reduceat(w, bounds[:-1])
        sums = [self._sums(lo, hi, scatter) for lo, hi in self.spans]
        self.sums = np.stack([first for first, _ in sums])
        self.scatter = np.stack([second for _, second in sums if second is not None]) if scatter else None

    def _sums(self, lo: int, hi: int, scatter: bool) -> tuple[np.ndarray, np.ndarray | None]:
        """``sum_i w_i y_i`` and, with ``scatter``, ``sum_i w_i y_i y_i^T`` over rows ``lo:hi``, from centred panels
        (their rounding is the spread's: ``sum w x - n origin`` would round as the offset, 3e-6 of the moments
        of rows 4e7 from the origin)."""
        d = self.rows.shape[1]
        first, second = np.zeros(d), (np.zeros((d, d)) if scatter else None)
        for start in range(lo, hi, PANEL):
            y = self.rows[start:min(start + PANEL, hi)] - self.origin
            w = None if self.weights is None else self.weights[start:start + len(y)]
            first += y.sum(axis=0) if w is None else w @ y
            if second is not None:
                if w is not None:
                    y *= np.sqrt(w)[:, None]
                second += y.T @ y
        return first, second


def _panels(spans: list[tuple[int, int]], size: int) -> list[tuple[int, int, list[tuple[int, int, int]]]]:
    """Panels of at most ``size`` consecutive rows, ``(lo, hi, pieces)``, made of whole pieces ``(group, a, b)`` (rows
    ``lo + a .. lo + b`` of group ``group``): each group's rows (``spans``, consecutive) cut every ``size`` rows from
    its start, as a panel of that group alone would hold them, and consecutive pieces joined while they fit."""
    panels: list[tuple[int, int, list[tuple[int, int, int]]]] = []
    for i, (start, stop) in enumerate(spans):
        for a in range(start, stop, size):
            b = min(a + size, stop)
            if panels and b - panels[-1][0] <= size:
                lo, _, pieces = panels[-1]
                pieces.append((i, a - lo, b - lo))
                panels[-1] = (lo, b, pieces)
            else:
                panels.append((a, b, [(i, 0, b - a)]))
    return panels


class _Moments:
    """One fit's states ``r = L (x - mean)`` on a :class:`Groups` (``L = A W``), held as each group's second moments
    ``M_g = sum_{i in g} w_i r_i r_i^T``, downdated with each correction ``r[:, p+1:] -= B F``:
    ``M_g -= Q_g^T F + F^T Q_g - F^T B_g^T W B_g F`` with ``Q_g = B_g^T W r_g``, which is
    ``B_g^T W (x_g - mean) L^T`` less the earlier corrections' share ``B_g^T W B'_g F'``.

    One pass over the rows, a panel at a time, corrects the curved steps' inputs ``r_p`` step after step
    and gives every group's products of all the steps' bases ``B = [B_1 .. B_C]`` with each other and
    with the centred rows (``O(n K d)``, ``K`` the bases' columns, where the rows' states would cost
    ``O(n d^2)``), and each truncation's errors ``O(groups d^3)``.
    """

    def __init__(self, params: PPAParams, groups: Groups, curved: list[int]) -> None:
        self.params, self.groups, self.curved = params, groups, curved
        self.L, delta = params.input_rotation(), params.mean - groups.origin
        assert groups.scatter is not None  # made with scatter=True
        # sum w (y - delta)(y - delta)^T = S - s delta^T - delta s^T + n delta delta^T, turned by L group by group
        # (no temporary of the groups' size): L S L^T - u v^T - v u^T + n v v^T, u = L s, v = L delta
        u, v = groups.sums @ self.L.T, self.L @ delta
        self.moments = np.empty_like(groups.scatter)
        for i, scatter in enumerate(groups.scatter):
            moments = self.moments[i]
            np.matmul(self.L @ scatter, self.L.T, out=moments)
            cross = np.outer(u[i], v)
            moments -= cross
            moments -= cross.T
            moments += groups.counts[i] * np.outer(v, v)
        # what the rounding of each block M_g[j:, j:] scales with (rounding()): its rows of L, u and v (suffix sums
        # of squares over the columns j: of the moments), and each downdate's terms on it (self.downdates)
        self.first = (np.einsum("gii->g", groups.scatter), _suffix(np.sum(self.L**2, axis=1)), _suffix(u**2), _suffix(v**2))
        self.downdates: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        self.coefs = [_coefficients(params, p) for p in curved]
        self.at = np.cumsum([0] + [len(f) for f in self.coefs])  # each step's columns among the bases
        self.products, self.raw = self._products()

    def _products(self) -> tuple[np.ndarray, np.ndarray]:
        """Per group, ``B_g^T W B_g`` (groups, K, K) and ``B_g^T W (x_g - mean)`` (groups, K, d), a panel of rows at a
        time: their states' columns ``r_p`` of the curved steps, each step's basis of its column, then its
        correction of the later steps' columns, ``r_q -= B_p F_p[:, q - p - 1]``. A panel holds the small groups
        whole (:func:`_panels`: one basis per step for all of them), each group's products its own, as a panel of that
        group alone would make them (bit for bit)."""
        g, width, curved = self.groups, int(self.at[-1]), self.curved
        products, raw = np.zeros((len(g.spans), width, width)), np.zeros((len(g.spans), width, g.rows.shape[1]))
        bases = np.empty((min(PANEL, len(g.rows)), width), order="F")
        later = [[q - p - 1 for q in curved[j + 1:]] for j, p in enumerate(curved)]
        turn = self.L[curved].T
        for lo, hi, pieces in _panels(g.spans, PANEL):
            centred, panel = g.rows[lo:hi] - self.params.mean, bases[: hi - lo]
            # a product's row depends on where the row falls in the product's tiling (BLAS kernels): each piece's own
            inputs = np.vstack([centred[a:b] @ turn for _, a, b in pieces])
            for j, p in enumerate(curved):
                cols = slice(self.at[j], self.at[j + 1])
                panel[:, cols] = _basis(self.params, p, inputs[:, j])
                for _, a, b in pieces if later[j] else ():
                    inputs[a:b, j + 1:] -= panel[a:b, cols] @ self.coefs[j][:, later[j]]
            for i, a, b in pieces:
                weighted = panel[a:b] if g.weights is None else panel[a:b] * g.weights[lo + a:lo + b, None]
                products[i] += weighted.T @ panel[a:b]
                raw[i] += weighted.T @ centred[a:b]
        return products, raw

    def correct(self, p: int) -> None:
        j = self.curved.index(p)
        coef, cols = self.coefs[j], slice(self.at[j], self.at[j + 1])
        block = self.products[:, cols]
        cross = self.raw[:, cols] @ self.L[p + 1:].T  # B_g^T W (x_g - mean) L^T on the corrected block
        # the terms' magnitudes per column: B_g^T W (x_g - mean) L^T and the earlier shares
        terms = np.outer(_norms(self.raw[:, cols]) ** 2, np.sum(self.L[p + 1:] ** 2, axis=1)) + np.einsum("gkc,gkc->gc", cross, cross)
        for i, q in enumerate(self.curved[:j]):  # less the earlier corrections' share, B_g^T W B'_g F'
            share = block[:, :, self.at[i]:self.at[i + 1]] @ self.coefs[i][:, p - q:]
            cross -= share
            terms += np.einsum("gkc,gkc->gc", share, share)
        shift = np.matmul(cross.transpose(0, 2, 1), coef)
        self.moments[:, p + 1:, p + 1:] -= shift + shift.transpose(0, 2, 1) - coef.T @ block[:, :, cols] @ coef
        self.downdates.append((p, _suffix(terms), _suffix(np.sum(coef**2, axis=0)), _norms(block[:, :, cols])))

    def rounding(self, lead: int) -> np.ndarray:
        """A bound on each group's rounding of ``M_g[lead:, lead:]``, ``||dM_g||_2 <= ROUNDING eps slack_g`` (groups,):
        ``slack_g`` the magnitudes of the terms summed into that block (Frobenius norms restricted to its columns):
        ``|L| tr(S_g) |L^T| + 2 |u_g| |v| + n_g |v|^2`` and each downdate's ``2 |Q_g| |F| + |F|^2 |B_g^T W B_g|``."""
        trace, rows, u, v = self.first
        slack = trace * rows[lead] + 2 * np.sqrt(u[:, lead] * v[lead]) + self.groups.counts * v[lead]
        for p, terms, coef, products in self.downdates:
            slack += 2 * np.sqrt(terms[:, lead - p - 1] * coef[lead - p - 1]) + coef[lead - p - 1] * products
        return ROUNDING * np.finfo(float).eps * slack

    def squares(self, lead: int) -> np.ndarray:
        """``sum_{i in g} w_i ||r_i[j:]||^2`` for ``j >= lead`` (groups, d - lead)."""
        return _suffix(np.diagonal(self.moments[:, lead:, lead:], axis1=1, axis2=2))

    def energies(self, lead: int, vectors: np.ndarray, threads: int = 1) -> np.ndarray:
        """``sum_{i in g} w_i (r_i[lead:] . v_j)^2 = v_j^T M_g v_j`` (groups, d - lead) for the axes ``V``, the groups
        split between ``threads`` threads, each half's products stacked in one call (each group's the same products)."""
        out = np.empty((len(self.moments), len(vectors)))

        def of(groups: slice) -> None:
            out[groups] = np.einsum("gij,ij->gj", self.moments[groups, lead:, lead:] @ vectors, vectors)

        half = (len(out) + 1) // 2 if threads > 1 else len(out)
        blas.both(lambda: of(slice(0, half)), lambda: of(slice(half, len(out))), threads)
        return out

    def cross(self, lead: int, vectors: np.ndarray) -> np.ndarray:
        """``V^T (sum_g M_g[lead:, lead:]) V`` (d - lead, d - lead): the groups' cross energies along the axes ``V``."""
        return vectors.T @ self.moments[:, lead:, lead:].sum(axis=0) @ vectors


class _Carried:
    """The training residual's second moments from the half-size fit's own covariances (:attr:`Fit.carried
    <ppa_xr.core.ppa.Fit.carried>`), the rows' moments of :class:`_Moments` in exact arithmetic at no pass over the
    rows: after curved step ``p`` the states ``r[p+1:]`` are the fit's residual ``z`` along the later steps'
    axes, ``r[p+1:] = unit A[p+1:] z`` with ``z`` in the step's ``frame``, so
    ``M[p+1:, p+1:] = N unit^2 Q C Q^T``, ``Q = A[p+1:] frame``, ``C`` the carried covariance and ``N = sum w``
    (before the first step, ``M = N unit^2 A C A^T`` with the sample's covariance).

    Their rounding (:meth:`rounding`) is the covariance's, ``||dM||_2 <= CARRIED eps N unit^2 reference``:
    ``reference`` the trace of the covariance last computed from the rows, which the products' and the
    downdates' terms are bounded by. ``rows()``: the training rows (:class:`Groups`), where the rows' arithmetic
    replaces the moments (:func:`_settled`).
    """

    def __init__(self, params: PPAParams, carried: tuple[Carried, ...], weight: float, rows: Callable[[], Groups]) -> None:
        self.params, self.carried, self.weight, self.rows = params, {-1: carried[0]}, weight, rows
        self.carried.update(zip(params.curved_steps(), carried[1:]))
        d = params.n_features
        self.moments = np.empty((1, d, d))
        start = carried[0]
        self.scale = weight * start.unit * start.unit
        self.axes: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # per lead, the block's PCA where the fit made it
        self._block(-1, 0)

    def correct(self, p: int) -> None:
        self._block(p, p + 1)

    def _block(self, p: int, lead: int) -> None:
        """``M[lead:, lead:] = N unit^2 Q C Q^T``, ``Q = A[lead:] frame``; where ``C = diag(l)`` in its eigenbasis, its
        PCA too: the eigenvalues ``N unit^2 l`` along ``Q``'s columns."""
        step, rotation = self.carried[p], self.params.rotation[lead:]
        turn = rotation if step.frame is None else rotation @ step.frame
        if step.values is None:
            self.moments[0, lead:, lead:] = self.scale * turn @ step.cov @ turn.T
            return
        values = self.scale * step.values
        self.moments[0, lead:, lead:] = (turn * values) @ turn.T
        self.axes[lead] = values, turn

    def principal(self, lead: int) -> tuple[np.ndarray, np.ndarray]:
        """The PCA of ``M[lead:, lead:]`` (:func:`_principal`): the fit's own where it carried its eigenbasis."""
        return self.axes[lead] if lead in self.axes else _principal(self, lead)

    def rounding(self, lead: int) -> np.ndarray:
        """The bound on ``||dM[lead:, lead:]||_2`` (1,): :data:`CARRIED` ``eps N unit^2 reference`` of the carried
        covariance the block came from."""
        step = self.carried[lead - 1 if lead else -1]
        return np.array([CARRIED * np.finfo(float).eps * self.scale * step.reference])


def _state(params: PPAParams, x: np.ndarray) -> np.ndarray:
    """``r = A W (x - mean)`` (n x d): the outputs before any step's correction."""
    return params.to_fit_space(x) @ params.rotation.T


class _RowMoments:
    """The training rows' states ``r`` (n x d) and their second moments ``M = r^T W r`` (1, d, d), downdated with
    each correction ``r[:, p+1:] -= B F`` as ``M -= Q^T F + F^T Q - F^T B^T W B F``, ``Q = B^T W r`` taken from
    the rows corrected so far (``O(n g d)`` a step): where :class:`_Moments` could round (:func:`_settled`)."""

    def __init__(self, params: PPAParams, groups: Groups) -> None:
        self.params, self.r = params, _state(params, groups.rows)
        self.weights = np.ones(len(self.r)) if groups.weights is None else groups.weights
        self.moments = (self.r.T @ self.r if groups.weights is None else (self.r * self.weights[:, None]).T @ self.r)[None]

    def correct(self, p: int) -> None:
        design, coef = _correction(self.params, p, self.r[:, p])
        weighted = design * self.weights[:, None]
        shift = (weighted.T @ self.r[:, p + 1:]).T @ coef
        # only the corrected block's moments are read again (each later truncation's PCA lies within it)
        self.moments[0, p + 1:, p + 1:] -= shift + shift.T - coef.T @ (weighted.T @ design) @ coef
        self.r[:, p + 1:] -= design @ coef


class _Rows:
    """The held-out rows' states ``r`` (n x d), corrected step by step, and their per-group errors: each
    truncation projects the rows on its axes (``O(n m^2)``, ``m`` the axes left), the cheaper where a
    group's moments (d x d) would outnumber its rows' values."""

    def __init__(self, params: PPAParams, groups: Groups) -> None:
        self.params, self.weights, self.starts = params, groups.weights, groups.bounds[:-1]
        self.r = _state(params, groups.rows)

    def correct(self, p: int) -> None:
        design, coef = _correction(self.params, p, self.r[:, p])
        self.r[:, p + 1:] -= design @ coef

    def squares(self, lead: int) -> np.ndarray:
        return _suffix(_group_squares(self.r[:, lead:], self.weights, self.starts))

    def energies(self, lead: int, vectors: np.ndarray, threads: int = 1) -> np.ndarray:
        """The projections in float32 (half the cost of the largest product here): an error of 1e-7 of a row's
        norm in each, far below the EQUAL floor of the comparison; the squares are summed in float64. One product on
        one thread (``threads`` unused): a split of the rows would round otherwise in single precision."""
        projected = self.r[:, lead:].astype(np.float32) @ vectors.astype(np.float32)
        return _group_squares(projected, self.weights, self.starts)

    def rounding(self, lead: int) -> None:
        """None: the rows' errors are summed from their own products, no moments' differences."""
        return None

    def cross(self, lead: int, vectors: np.ndarray) -> np.ndarray:
        """``P^T W P``, ``P = r[:, lead:] V``: the rows' cross energies along the axes ``V`` (``O(n m^2)``)."""
        projected = self.r[:, lead:] @ vectors
        return (projected if self.weights is None else projected * self.weights[:, None]).T @ projected


def by_moments(groups: int, d: int, rows: int) -> bool:
    """Whether held-out errors are read from the groups' moments (``groups d^2`` values) rather than the rows'
    states (``rows d``): where the moments are no larger."""
    return groups * d <= rows


def truncation_errors(params: PPAParams, train: np.ndarray, held: np.ndarray, bounds: np.ndarray,
                      weights: tuple[np.ndarray, np.ndarray] | None = None, moments: bool | None = None, threads: int = 1) -> np.ndarray:
    """Held-out squared errors of every truncation of a fit, summed per group: (C+1, groups, d-1).

    ``params`` is a fit on ``train``, its curved steps ``p_1 < ... < p_C``.
    Truncation ``c`` keeps the first ``c`` curved steps and replaces the rest
    by the PCA of the training residual after step ``p_c``: what
    ``max_curved=c`` fits on ``train`` (its steps up to ``p_c`` are the same,
    and a capped fit is the PCA of the residual); ``c = 0`` is the PCA of
    ``train``. ``held`` rows are sorted by group, ``bounds`` the groups' row
    ranges; ``weights``, the rows' (train's, held's), weigh every sum. Entry
    ``[c, g, k-1]`` is the squared error keeping ``k`` components, summed over
    group ``g``'s rows. ``moments``: whether the held-out errors come from the
    groups' second moments (None: :func:`by_moments`), both from the training
    residual's moments where their rounding allows (:func:`_settled`); False:
    every error from the rows' own arithmetic, the reference they match. ``threads``: the training and held-out
    sides are made and corrected side by side on as many Python threads (:func:`~ppa_xr.core.blas.both`), with the same results.
    """
    w_train, w_held = (None, None) if weights is None else weights
    rows, moments = moments is False, by_moments(len(bounds) - 1, held.shape[1], len(held)) if moments is None else moments
    fitted = Groups(train, w_train, np.array([0, len(train)]), scatter=not rows)
    errors, _ = _truncations(params, fitted, Groups(held, w_held, bounds, moments, fitted.origin), rows, threads)
    return errors


def _truncations(params: PPAParams, train: Groups | _Carried, held: Groups, rows: bool = False, threads: int = 1,
                 first: int = 0) -> tuple[np.ndarray, float]:
    """:func:`truncation_errors` on rows whose moments are made (held's from its moments where it has them),
    and the held-out rows' energy ``sum w ||W (x - mean)||^2``; the truncations before ``first`` not measured (their
    errors NaN: the robust family's PCA is the plain family's).

    One pass over the curved steps. The training residual's second moments are
    downdated with each correction (:class:`_Moments`), and so are the held-out
    groups' where they have moments; else the held-out rows are corrected and
    projected on each truncation's PCA (:class:`_Rows`). Where the moments'
    rounding could move an error by more than :data:`TOLERANCE` of the floor of
    equal errors (:func:`_settled`: a residual at the rounding of its energy,
    as a curve fitted exactly leaves), every error is taken from the rows
    instead, the training rows' states and their moments downdated as rows
    (:class:`_RowMoments`), as exact as the rows' own arithmetic; with ``rows``,
    there alone.
    """
    curved = params.curved_steps()
    measured = None
    if not rows:
        fitted, unseen = blas.both(lambda: train if isinstance(train, _Carried) else _Moments(params, train, curved),
                               lambda: _Rows(params, held) if held.scatter is None else _Moments(params, held, curved), threads)
        measured = _measure(params, fitted, unseen, len(held.spans), threads, first)
    if measured is None:  # the two sides' states made one after the other: each with its temporary, they are the peak
        rows_of = train.rows() if isinstance(train, _Carried) else train
        measured = _measure(params, _RowMoments(params, rows_of), _Rows(params, held), len(held.spans), threads, first)
    assert measured is not None  # the rows' arithmetic is the reference: never refused
    return measured


def _measure(params: PPAParams, fitted: _Moments | _Carried | _RowMoments, unseen: _Moments | _Rows, groups: int,
             threads: int = 1, first: int = 0) -> tuple[np.ndarray, float] | None:
    """:func:`_truncations` from ``fitted`` (the training residual's moments) and ``unseen`` (the held-out
    rows' states or moments), each correction of the two side by side on ``threads`` threads, the truncations from
    ``first`` on (the earlier ones' errors NaN); None where ``fitted`` is a :class:`_Moments` whose rounding could
    move an error."""
    d = params.n_features
    curved = params.curved_steps()
    out = np.full((len(curved) + 1, groups, d - 1), np.nan)
    full = np.empty((groups, d - 1))  # the untruncated fit's errors, filled as the states come
    total = 0.0
    for c in range(len(curved) + 1):
        if c:
            blas.both(lambda: fitted.correct(curved[c - 1]), lambda: unseen.correct(curved[c - 1]), threads)
        lead = 0 if c == 0 else curved[c - 1] + 1  # outputs fixed by the kept steps
        # state c holds for k from lead to the next curved step: the untruncated errors ||r[k:]||^2 there
        squares = unseen.squares(lead)
        total = total or float(squares[:, 0].sum())  # ||r||^2 = ||W (x - mean)||^2: A is orthonormal
        last = curved[c] if c < len(curved) else d - 1
        ks = np.arange(max(lead, 1), last + 1)
        full[:, ks - 1] = squares[:, ks - lead]
        if c < first:
            continue
        # the capped rest: PCA of the training residual's second moments (its mean is zero: every step's
        # least squares has a constant term); its errors keeping lead + j components
        values, vectors = fitted.principal(lead) if isinstance(fitted, _Carried) else _principal(fitted, lead)
        energies = unseen.energies(lead, vectors, threads)
        if not isinstance(fitted, _RowMoments) and not _settled(values, vectors, energies.sum(axis=0), fitted, unseen, lead, EQUAL * total):
            return None
        out[c, :, :lead] = full[:, :lead]
        out[c, :, lead:] = _suffix(energies)[:, 1: d - lead]
    return out, total


def _principal(fitted: _Moments | _Carried | _RowMoments, lead: int) -> tuple[np.ndarray, np.ndarray]:
    """The eigenvalues of the training moments' block ``M[lead:, lead:]``, descending, and their eigenvectors as columns
    (:func:`~ppa_xr.core.linalg.eigenbasis`)."""
    return eigenbasis(fitted.moments[0, lead:, lead:])


def _settled(values: np.ndarray, vectors: np.ndarray, energies: np.ndarray, fitted: _Moments | _Carried, unseen: _Moments | _Rows,
             lead: int, floor: float) -> bool:
    """Whether the moments' rounding can move a truncation's held-out errors no more than the rows' own would.

    The errors keeping ``j`` of the truncation's ``m`` axes (``V``, eigenvalues
    ``l``, descending; ``h`` the held-out energies along them), ``j = 1..m-1``:

    * the held-out groups' moments (where used) move each by at most
      ``(m - j) sum_g ||dM_g||``;
    * the training residual's, ``||dM||_F <= e``, turn axes ``i`` and ``l`` into
      each other by ``t_il = dM'_il / (l_i - l_l)`` (``dM' = V^T dM V``, first
      order; at most 1), which moves the error at ``i < j <= l`` by
      ``2 t_il h_il + t_il^2 (h_i + h_l)``: at most
      ``t_il (2 sqrt(h_i h_l) + t_il (h_i + h_l))`` with ``t_il <= e / |l_i - l_l|``,
      and where that is not enough, ``2 e sqrt(sum (h_il / (l_i - l_l))^2)``
      (Cauchy-Schwarz) with the held-out cross energies ``h_il`` (one more
      product), summed over the pairs ``j`` splits;
    * the rows' float32 projections (:class:`_Rows`, the reference) move it by
      up to ``2 (m + 2) u sqrt(H) sum_{l >= j} sqrt(h_l)``, ``u = 2^-24`` and
      ``H`` the held-out energy of the block.

    The moments pass where their bound is below the rows' or below
    :data:`TOLERANCE` of the ``floor`` of equal errors, a bound within
    :data:`TIE` of the allowance counting as below (:func:`_at_most`): a
    bound the order of its sums could move across the allowance is decided by
    that rule, not by its last bits. The training moments' ``e`` is
    their own source's: the rows' (:meth:`_Moments.rounding`) or the fit's
    carried covariances' (:meth:`_Carried.rounding`). They fail where the
    training residual is at the rounding of its energy (a curve fitted exactly)
    and the held-out rows are not: its axes are arbitrary there.
    """
    m, h = len(values), np.maximum(energies, 0.0)
    root, held = np.sqrt(h), unseen.rounding(lead)
    allowed = np.maximum(2 * (m + 2) * 2.0**-24 * np.sqrt(h.sum()) * _suffix(root)[1:], TOLERANCE * floor)
    if held is not None:
        allowed -= np.arange(m - 1, 0, -1) * float(held.sum())
    e, gaps = float(fitted.rounding(lead)[0]), np.abs(values[:, None] - values[None, :])
    with np.errstate(divide="ignore", invalid="ignore"):
        turn = np.minimum(1.0, e / gaps)
    turn[np.isnan(turn)] = 1.0
    coupled = 2 * np.outer(root, root)
    second = turn**2 * (h[:, None] + h[None, :])
    if np.all(_at_most(_split_sums(turn * coupled + second), allowed)):
        return True
    near = turn >= 0.5  # (nearly) equal eigenvalues: no first order, the coarse bound
    with np.errstate(divide="ignore", invalid="ignore"):
        linear = np.where(near, 0.0, (unseen.cross(lead, vectors) / gaps) ** 2)
    moved = _split_sums(np.where(near, turn * coupled, 0.0) + second) + 2 * e * np.sqrt(_split_sums(linear))
    return bool(np.all(_at_most(moved, allowed)))


def _split_sums(pairs: np.ndarray) -> np.ndarray:
    """``sum_{i < j <= l} pairs_il`` for ``j = 1..m-1`` (pairs m x m, its upper triangle read)."""
    split = np.arange(1, len(pairs))
    return np.cumsum(_suffix(np.triu(pairs, 1)), axis=0)[split - 1, split]


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
        return not _at_most(other.mean - SWITCH * se, self.mean, max(abs(self.mean), abs(other.mean)))  # a tie: no


def judge(errors: np.ndarray, pca: np.ndarray, total: float, components: int | None = None) -> Verdict:
    """A candidate's per-group held-out errors (groups, d-1) against its PCA's (groups, d-1).

    ``R_k = sum_g a_gk / sum_g b_gk``, both floored at ``EQUAL * total``
    (``total``: the held-out rows' energy), and the delta-method standard error
    with groups as units, ``se_k = sqrt(G/(G-1) sum_g (a_gk - R_k b_gk)^2) / sum_g b_gk``.
    Admitted when ``R_k - z se_k <= 1 + ALLOWANCE`` at every ``k``, ``z`` the
    one-sided normal quantile at ``LEVEL / (d-1)``. Its worst where users look:
    ``max R_k`` over the kept ``k``, ``sum_g b_gk >= KEPT total``, or ``k = 1 .. components`` where the user
    gives the number of components to keep.
    """
    groups, width = errors.shape
    floor = EQUAL * total
    a, b = errors.sum(axis=0), pca.sum(axis=0)
    ratio = np.maximum(a, floor) / np.maximum(b, floor)
    spread = np.sqrt(groups / max(groups - 1, 1) * np.sum((errors - ratio * pca) ** 2, axis=0)) / np.maximum(b, floor)
    rounding = _at_most(a, floor) & _at_most(b, floor)
    spread[rounding] = 0.0  # both are rounding: equal
    z = upper_quantile(LEVEL / width)
    admitted = bool(np.all(_at_most(ratio - z * spread, 1 + ALLOWANCE)))  # a tie with the limit: admitted
    # the delta method's linearisation of mean_k R_k: group g contributes mean_k (a_gk - R_k b_gk) / sum_g b_gk
    terms = (errors - ratio * pca) / np.maximum(b, floor)
    terms[:, rounding] = 0.0
    kept = _at_most(KEPT * total, b) if components is None else np.arange(width) < components
    worst = float(100 * ratio[kept].max()) if kept.any() else 100.0
    return Verdict(100 * ratio, 100 * spread, float(100 * ratio.mean()), admitted, 100 * terms.mean(axis=1), worst)


#: a fit of the sample's rows divided by ``unit`` (a power of two): ``fit(rows, groups, rng, weights, unit, robust=...,
#: max_curved=...) -> PPAParams``, or the :class:`~ppa_xr.core.ppa.Fit` whose carried covariances give the training side
#: of the held-out measurement (:class:`_Carried`)
Fit = Callable[..., "PPAParams | Fitted"]
#: the configuration a fit was made with, and whether it was chosen by :func:`select`
Choice = dict


@dataclass(frozen=True)
class Selection:
    """The chosen configuration (``choice``: ``{"robust": bool, "max_curved": int or None}``), every
    candidate's verdict, keyed by ``(robust, max_curved)`` (None: uncapped), and each judged family's count of
    curved steps in its half-size fit (``curved``, keyed by ``robust``)."""

    choice: dict
    verdicts: dict
    curved: dict = field(default_factory=dict)


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
           weights: np.ndarray | None = None, components: int | None = None, count: bool = True, threads: int = 1) -> Selection | None:
    """Validate the truncations of a fit on ``X`` (see the module docstring) and choose one; with
    ``escalate``, the robust family's too where the uncapped plain fit is refused or beaten. None where a
    training part is too small to fit. ``fit(rows, groups, rng, weights, robust=..., max_curved=...)`` fits
    rows with every other option of the final fit; ``weights`` (n,) weigh the rows (None: equally); the k users keep
    are ``1 .. components`` (None: those of :data:`KEPT`). With ``count``, an uncapped choice is capped at its half-size
    fit's count of curved steps (:func:`_counted`). ``threads``: the Python threads on which the held-out measurement's
    two sides (the training residual's and the held-out rows') are made side by side, the same results as on one.

    The groups are dealt into ``n_folds`` folds, and the first ``rounds`` of them are held out in turn."""
    n = len(X)
    folds, order = Folds.make(groups, n, FOLDS if n_folds is None else n_folds, rng)
    rounds = min(ROUNDS if rounds is None else rounds, folds.n_folds)
    sizes = np.bincount(folds.fold, weights=np.diff(folds.bounds), minlength=folds.n_folds)
    if n - sizes[:rounds].max() < min_samples or np.bincount(folds.fold)[:rounds].max() > len(folds.fold) - 2:
        return None
    validation = _Validation(X, fit, None if weights is None else unit_mean(checks.row_weights(weights, n)),
                             _parts(folds, order, rounds, groups, rng), np.isin(folds.fold, np.arange(rounds)), components, threads)
    if not validation.family(False):
        return Selection({"robust": False, "max_curved": None}, {})  # no curvature in sight: the plain fit stands
    uncapped = validation.verdicts[(False, None)]
    stands = uncapped.admitted and not any(v.beats(uncapped) for v in validation.candidates().values())
    if stands and _where_users_look({(False, None): uncapped}, (False, None)) is None:
        return Selection(_counted((False, None), validation.curved, count), validation.verdicts, validation.curved)  # the uncapped fit stands
    if escalate:  # refused, beaten or above PCA where users look: the robust family joins
        validation.family(True)
    admitted = validation.candidates()
    chosen = (False, None) if stands else _lowest(admitted)
    return Selection(_counted(_where_users_look(admitted, chosen) or chosen, validation.curved, count), validation.verdicts, validation.curved)


def _counted(key: tuple[bool, int | None], curved: dict[bool, int], count: bool = True) -> dict:
    """The configuration of the whole sample's fit for the chosen candidate ``key``: an uncapped one keeps as many
    curved steps as its family's half-size fit had, ``max_curved = C`` (where ``count`` and :data:`COUNT` are on).
    The whole sample supports more curved steps than half of it, and the ones the half did not have were never
    judged: on Segmentation such a step, added at a noise-level ``k``, read 117.4 on the unseen rows (100.0 capped)."""
    robust, max_curved = key
    if max_curved is None and count and COUNT:
        max_curved = curved[robust]
    return {"robust": bool(robust), "max_curved": None if max_curved is None else int(max_curved)}


def _lowest(verdicts: dict[tuple[bool, int | None], Verdict]) -> tuple[bool, int | None]:
    """The candidate of the lowest held-out mean; means within :data:`TIE` of it are ties, decided by fewer curved
    steps (an uncapped fit last), then plain."""
    low = min(v.mean for v in verdicts.values())
    tied = [key for key, v in verdicts.items() if _at_most(v.mean, low)]
    return min(tied, key=lambda key: (key[1] is None, key[1] or 0, key[0]))


def _at_most(a: np.ndarray | float, b: np.ndarray | float, scale: float | None = None) -> np.ndarray:
    """``a <= b`` for the verdicts' comparisons, a difference within their rounding (:data:`TIE` of ``scale``, by
    default ``max(|a|, |b|)``) counting as a tie, which holds: a comparison that its operands' last bits could
    turn is decided by this rule, whatever order their sums were taken in."""
    size = np.maximum(np.abs(a), np.abs(b)) if scale is None else scale
    return np.asarray(a <= b + TIE * size)


def _where_users_look(admitted: dict[tuple[bool, int | None], Verdict], chosen: tuple[bool, int | None]) -> tuple[bool, int | None] | None:
    """None where ``chosen`` holds where users look: its worst held-out ratio over the kept k is within the
    allowance of PCA's (or :data:`LOOK` is off). Otherwise the admitted curved candidate of the lowest mean whose
    worst stays within it, where one gives up no more mean than the excess it removes, ``mean - mean_chosen <=
    worst_chosen - 100`` (a point of mean for a point at the worst kept k); where none does, the excess is
    beyond what any candidate avoids, and ``chosen`` stays."""
    limit, verdict = 100 * (1 + ALLOWANCE), admitted[chosen]
    if _at_most(verdict.worst, limit) or not LOOK:
        return None
    safe = {key: v for key, v in admitted.items() if key[1] != 0 and _at_most(v.worst, limit)
            and _at_most(v.mean - verdict.mean, verdict.worst - 100, max(abs(v.mean), abs(verdict.mean), abs(verdict.worst)))}
    return _lowest(safe) if safe else chosen


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

    def __init__(self, X: np.ndarray, fit: Fit, weights: np.ndarray | None, parts: list[_Part], judged: np.ndarray,
                 components: int | None = None, threads: int = 1) -> None:
        # the parts on the data divided by a power of two near its spread (exact): the fits are the same up to that
        # factor (they divide by such a power themselves), and squared errors of data at 1e-200 or 1e150 stay finite
        mean = X.mean(axis=0)
        self.X, self.unit = X, power_of_two(spread_about(X, mean))
        self.fit, self.weights, self.parts, self.judged, self.components = fit, weights, parts, judged, components
        self.threads = threads
        self.pca = np.zeros((len(judged), X.shape[1] - 1))
        self.total = 0.0
        self.verdicts: dict[tuple[bool, int | None], Verdict] = {}
        self.curved: dict[bool, int] = {}  # each family's most curved steps in a half-size fit
        self._gathered: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._groups: dict[int, Groups] = {}  # each part's held-out rows' moments, made once for every family
        self._origins: dict[int, np.ndarray] = {}
        self._carried: dict[tuple[int, bool], tuple[Carried, ...]] = {}  # each half fit's covariances (ppa.Fit.carried)

    def family(self, robust: bool) -> bool:
        """Judge the plain (or robust) fit of every part and all its truncations; False, judging nothing, where
        no plain fit has a curved step: each is its own PCA, and PCA is always admitted."""
        fits = [(i, self._fit(i, robust) if robust else self._plain(i)) for i in range(len(self.parts))]
        if not robust and not any(params.curved_steps() for _, params in fits):
            return False
        errors = [(self.parts[i].held, self._errors(i, params, robust)) for i, params in fits]
        top = max(len(e) - 1 for _, e in errors)
        self.curved[robust] = top
        for c in range(1 if robust else 0, top + 1):  # the robust family's PCA (c = 0) is the plain family's
            held_out = np.empty_like(self.pca)
            for held, e in errors:
                held_out[held] = e[min(c, len(e) - 1)]
            # the fits with every curved step kept: the uncapped fit
            self.verdicts[(robust, None if c == top else c)] = judge(held_out[self.judged], self.pca[self.judged], self.total, self.components)
        return True

    def _rows(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """Part ``i``'s training and held-out rows, gathered once for every family, in units of ``unit``."""
        if i not in self._gathered:
            part = self.parts[i]
            training, unseen = self.X[part.train], self.X[part.rows]
            training /= self.unit
            unseen /= self.unit
            self._gathered[i] = training, unseen
        return self._gathered[i]

    def _fit(self, i: int, robust: bool) -> PPAParams:
        """Part ``i``'s fit of the family; the covariances it carried kept where the fit returns them
        (a :class:`~ppa_xr.core.ppa.Fit` with :attr:`~ppa_xr.core.ppa.Fit.carried`)."""
        part = self.parts[i]
        weights = None if self.weights is None else self.weights[part.train]
        fitted = self.fit(self._rows(i)[0], part.groups, np.random.default_rng(part.seed), weights, self.unit, robust=robust, max_curved=None)
        if isinstance(fitted, PPAParams):
            return fitted
        if fitted.carried:
            self._carried[(i, robust)] = fitted.carried
        return fitted.params

    def _plain(self, i: int) -> PPAParams:
        """Part ``i``'s plain fit, and beside it, on a second thread where :attr:`threads` allow it, its held-out rows'
        moments (:meth:`_held`), where they are at most :data:`BESIDE` of the training rows' values (what they add to
        the fit's memory): made before the fit shows a curved step that needs them (nothing is measured otherwise),
        and the same as made after it."""
        training, unseen = self._rows(i)  # gathered before either thread reads them
        if self.threads < 2 or len(self.parts[i].held) * unseen.shape[1] ** 2 > BESIDE * training.size:
            return self._fit(i, False)
        params, self._groups[i] = blas.both(lambda: self._fit(i, False), lambda: self._held(i), 2)
        return params

    def _origin(self, i: int) -> np.ndarray:
        """The moments' origin: the training rows' mean (:class:`Groups`' own), taken once."""
        if i not in self._origins:
            self._origins[i] = self._rows(i)[0].mean(axis=0)
        return self._origins[i]

    def _held(self, i: int) -> Groups:
        """Part ``i``'s held-out rows' moments (:class:`Groups`, about the training rows' mean) where
        :func:`by_moments`, else their sums alone."""
        part, unseen, w = self.parts[i], self._rows(i)[1], self.weights
        moments = by_moments(len(part.held), unseen.shape[1], len(unseen))
        return Groups(unseen, None if w is None else w[part.rows], part.bounds, moments, self._origin(i))

    def _training(self, i: int, scatter: bool) -> Groups:
        """Part ``i``'s training rows as one group, with their scatter where ``scatter``."""
        part, training, w = self.parts[i], self._rows(i)[0], self.weights
        return Groups(training, None if w is None else w[part.train], np.array([0, len(training)]), scatter, self._origin(i))

    def _errors(self, i: int, params: PPAParams, robust: bool) -> np.ndarray:
        """Part ``i``'s truncation errors (:func:`_truncations`): the training side from the fit's carried covariances
        (:class:`_Carried`) where it returned them, else from the training rows' moments; the held-out rows' moments
        made once for every family."""
        part = self.parts[i]
        carried = self._carried.pop((i, robust), None)  # used once: not held through the next family's fit
        if carried is not None:
            weight = float(len(part.train)) if self.weights is None else float(self.weights[part.train].sum())
            train: Groups | _Carried = _Carried(params, carried, weight, lambda: self._training(i, False))
            if i not in self._groups:
                self._groups[i] = self._held(i)
        else:
            train, held = blas.both(lambda: self._training(i, True), lambda: self._groups.get(i) or self._held(i), self.threads)
            self._groups[i] = held
        # the robust family's truncation 0, its PCA, is the plain family's, and never judged: not measured where it has a later one
        errors, total = _truncations(params, train, self._groups[i], threads=self.threads, first=int(robust and bool(params.curved_steps())))
        if not robust:  # the plain family's PCA (truncation 0) is the baseline of every candidate
            self.pca[part.held] = errors[0]
            self.total += total
        return errors

    def candidates(self) -> dict[tuple[bool, int | None], Verdict]:
        """The admitted candidates, PCA always among them."""
        return {key: v for key, v in self.verdicts.items() if v.admitted or key[1] == 0}


class _Starts:
    """The start of the last fit (:func:`~ppa_xr.core.ppa.begin`: folds, centring, covariance, eigenbasis), taken
    again by the next fit of the same rows (the same array), groups, weights and draws: a part's plain and robust
    fits differ only in their steps (their specs only in ``robust``; ``unit`` is the validation's). The plain
    fit takes the start's sample; the robust one centres the rows again, with no covariance (no memory kept)."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.begun: Begun | None = None

    def of(self, rows: np.ndarray, spec: Spec, groups: np.ndarray | None, rng: np.random.Generator,
           weights: np.ndarray | None) -> Begun:
        key = (rows, groups, rng.bit_generator.state, weights)
        if self.begun is None or not self._same(key):
            self.key, self.begun = None, None  # the last start's sample goes before the next is made
            self.key, self.begun = key, begin(rows, spec, groups=groups, rng=rng, weights=weights)
        return self.begun

    def _same(self, key: tuple) -> bool:
        """Whether ``key`` (rows, groups, the draws' state, weights) is the last start's: the same arrays of rows
        and groups, the same state, equal weights."""
        if self.key is None or self.key[0] is not key[0] or self.key[1] is not key[1] or self.key[2] != key[2]:
            return False
        last, weights = self.key[3], key[3]
        return last is weights or (last is not None and weights is not None and np.array_equal(last, weights))


def carried_values(shape: tuple[int, int]) -> int:
    """The most values a half-size fit of ``shape`` (n x d) keeps of its carried covariances (:class:`_Carried`): a
    :data:`CARRY` share of its rows' values, or :data:`CARRY_FLOOR`, the more."""
    return max(int(CARRY * shape[0] * shape[1]), CARRY_FLOOR)


def _half_fit(starts: _Starts, rows: np.ndarray, spec: Spec, groups: np.ndarray | None, rng: np.random.Generator,
              weights: np.ndarray | None, carry: int) -> Fitted:
    """A half-size fit of ``rows`` from the ``starts``' start, carrying its covariances within ``carry`` values. Where it
    carries none (its truncations are measured from its rows, whose states would sit beside the array), the start
    keeps no spare array for a later fit's sample (:class:`~ppa_xr.core.ppa.Begun`)."""
    begun = starts.of(rows, spec, groups, rng, weights)
    fitted = fit(rows, spec, begun=begun, carry=carry)
    if not fitted.carried:
        begun.spare = None
    return fitted


def fit_selected(X: np.ndarray, declared: Spec, groups: np.ndarray | None, rng: np.random.Generator,
                 progress: Progress | None = None, weights: np.ndarray | None = None,
                 shrink_outputs: bool = False) -> tuple[Fitted, Choice]:
    """The fit of ``declared``, its configuration chosen by :func:`select` where ``configuration="validated"`` leaves it
    open: nothing is searched where ``robust=True`` or a ``max_curved`` fix it, a single degree leaves nothing to
    validate, or the sample is too small (:func:`feasible`). The validation draws from a child of ``rng``, so the
    final fit's folds are those of the same fit without it. Its fits are PCA-led whatever the leading vectors:
    a searched one (PPA-GD) is kept by its own held-out test at each step, and the configuration chosen for the
    PCA-led fit caps its steps; GD is never combined with the robust family. ``weights`` weigh the rows in
    the validation and the fit alike. ``shrink_outputs``: where ``configuration="validated"``, the final fit's
    curves keep each axis's share of signal (:func:`~ppa_xr.core.ppa.fit`); the candidates are least squares,
    so the configuration is judged on curves that take noise for signal, at least as harmful as the shrunk ones.

    Returns
    -------
    tuple of Fit and dict
        The fit (parameters and training error curve), and the configuration: ``{"robust", "max_curved", "validated"}``.
    """
    choice: Choice = {"robust": declared.robust, "max_curved": declared.max_curved, "validated": False}
    searched = declared.configuration == "validated" and not declared.robust and declared.max_curved is None
    if searched and feasible(len(X), groups, declared):

        starts = _Starts()

        def candidate(rows: np.ndarray, row_groups: np.ndarray | None, child: np.random.Generator, row_weights: np.ndarray | None,
                      unit: float, **configuration: object) -> Fitted:
            # the rows are in units of ``unit``, and so is the noise (its covariance in their square): the
            # whitened rows, where the truncations are measured, are those of the fit itself
            noise = None if declared.noise_cov is None else declared.noise_cov / unit / unit
            spec = declared.replace(leading="pca", noise_cov=noise, **configuration)
            # the residual covariances it carries (the held-out measurement's training side) within CARRY of its rows' values
            return _half_fit(starts, rows, spec, row_groups, child, row_weights, carried_values(rows.shape))

        # the cores the load leaves (read before the fits hold one BLAS thread): the held-out measurement's two sides
        # run side by side on as many Python threads, each product on one BLAS thread
        threads = blas.pair_threads() if X.shape[1] >= THREADED_FEATURES else 1
        with blas.every_blas_on_one_thread():  # as the fits: the products are small, and extra BLAS threads only wait
            kept = declared.n_components if isinstance(declared.n_components, int) else None  # the k the user keeps
            # a searched fit's curved steps are not the PCA-led half fit's: its count caps only PCA-led fits
            pca_led = declared.leading == "pca"
            found = select(X, candidate, groups, rng.spawn(1)[0], declared.min_samples, escalate=pca_led, weights=weights,
                           components=kept, count=pca_led, threads=threads)
        del starts  # before the final fit: its sample is the larger
        if found is not None:
            choice = found.choice | {"validated": True}
    final = declared.replace(robust=choice["robust"], max_curved=choice["max_curved"])
    return fit(X, final, groups=groups, rng=rng, progress=progress, weights=weights,
               shrink_outputs=SHARES and shrink_outputs and declared.configuration == "validated"), choice
