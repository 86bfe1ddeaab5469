"""Degree selection: which polynomial a PPA step keeps, by grouped cross-validation (paper section 2.2).

The selection rows are dealt into groups (the spatial blocks a cube's
sampler records, or random groups of iid rows) and the groups into folds.
Per group ``i`` one pass forms ``B_i^T B_i`` and ``B_i^T Z_i`` of every
candidate degree (:func:`group_grams`); a fold's fit is then a small solve
on the sums over the other folds, and its held-out error a few products
(:class:`CrossValidation`). A curve is kept only where it beats the lowest
candidate on held-out groups beyond the noise of that estimate
(:func:`select_degree`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import scipy.stats

from .linalg import solve_grams

#: a curved step must beat the lowest candidate degree on held-out data by
#: this many standard errors of the (group-clustered) error difference: the
#: one-standard-error rule of cross-validation (Breiman et al. 1984; Hastie,
#: Tibshirani & Friedman, sec. 7.10). Measured: 2 of 100 steps curved on
#: Gaussian clouds (no curve to find); 2.0 gave worse held-out errors on the
#: paper's tables (Pageblocks 78.4 vs 76.8 % of PCA) and no better spatial transfer.
SIGNIFICANCE = 1.0
#: robust fits (per-axis selection): chance that a step with no curve anywhere passes on some residual
#: axis, the 1-SE rule's one-sided level shared among the axes by :func:`axis_significance`
FALSE_GAIN = 0.16
#: groups the sample is dealt into when no ``groups`` are given (iid rows)
PSEUDO_GROUPS = 100


@dataclass(frozen=True)
class Folds:
    """Rows grouped contiguously, ``bounds[i]:bounds[i+1]`` being group ``i``, groups dealt to folds."""

    bounds: np.ndarray  # (n_groups + 1,)
    fold: np.ndarray  # (n_groups,)

    @property
    def n_folds(self) -> int:
        return int(self.fold.max()) + 1

    @classmethod
    def make(cls, groups: np.ndarray | None, n: int, n_folds: int, rng: np.random.Generator) -> tuple[Folds, np.ndarray]:
        """The folds and the row order that makes the groups contiguous.

        Without ``groups`` the rows are iid: they are dealt at random into
        :data:`PSEUDO_GROUPS` groups (fewer for small samples), which gives the
        same folds as a plain shuffled k-fold split and a variance estimate.
        """
        if groups is None:
            labels = rng.permutation(n) % min(PSEUDO_GROUPS, n)
        else:
            labels = np.unique(np.asarray(groups), return_inverse=True)[1].ravel()
        order = np.argsort(labels, kind="stable")
        counts = np.bincount(labels)
        n_groups = len(counts)
        if n_groups < 2:
            raise ValueError("degree selection needs at least 2 groups of samples to hold out; pass more groups or a single degree")
        fold = rng.permutation(n_groups) % min(n_folds, n_groups)
        return cls(np.concatenate([[0], np.cumsum(counts)]), fold), order

    @classmethod
    def select(cls, groups: np.ndarray | None, n: int, n_folds: int, rng: np.random.Generator,
               rows: int) -> tuple[Folds, np.ndarray]:
        """Folds over the selection rows, at most ``rows`` of the ``n`` drawn at random (all of a smaller
        sample), and the row order that puts them first, groups contiguous, then the rest."""
        if n <= rows:
            return cls.make(groups, n, n_folds, rng)
        chosen = np.sort(rng.choice(n, rows, replace=False))
        folds, order = cls.make(None if groups is None else np.asarray(groups).ravel()[chosen], rows, n_folds, rng)
        rest = np.ones(n, dtype=bool)
        rest[chosen] = False
        return folds, np.concatenate([chosen[order], np.flatnonzero(rest)])


def axis_significance(m: int) -> float:
    """Standard errors a held-out gain must reach on one of ``m`` axes: the one-standard-error rule's
    one-sided level, 0.16, shared among the axes (Bonferroni), ``z = Phi^-1(1 - 0.16 / m)``. With one axis it
    is the 1-SE rule; at 200 axes it is 3.1, so pure noise passes on some axis of a step 16% of the time
    instead of on 30 of its axes."""
    return float(scipy.stats.norm.isf(FALSE_GAIN / m))


def significant(diff: np.ndarray, z: float) -> np.ndarray:
    """Which rows of held-out error differences ``D`` (..., groups) are significantly negative.

    ``T = sum_i D_i < -z * se``, ``se^2 = G/(G-1) sum_i (D_i - T/G)^2``:
    groups are the independent units, so the spatially correlated pixels of
    one block count once.
    """
    n_groups = diff.shape[-1]
    total = diff.sum(axis=-1)
    spread = np.sqrt(n_groups / (n_groups - 1) * np.sum((diff - total[..., None] / n_groups) ** 2, axis=-1))
    return total < -z * spread


def group_grams(designs: np.ndarray, Z: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group ``i`` and step ``j`` of a block: ``B_ij^T B_ij`` (groups, b, K, K) and ``B_ij^T Z_i``
    (groups, b, K, d), one batched product per group on views of its rows (no copies: measured 2.5-5x
    faster than one product over zero-padded groups, from 5 to 64 groups and 6,435 to 200,000 rows)."""
    b, K, n = designs.shape
    flat = designs.reshape(b * K, n)
    spans = list(zip(bounds[:-1], bounds[1:]))
    gram = np.stack([designs[:, :, lo:hi] @ designs[:, :, lo:hi].transpose(0, 2, 1) for lo, hi in spans])
    cross = np.stack([(flat[:, lo:hi] @ Z[lo:hi]).reshape(b, K, -1) for lo, hi in spans])
    return gram, cross


@dataclass(frozen=True)
class CrossValidation:
    """Per-group Gram matrices of one step, formed once for every candidate degree and fold.

    ``gram[i] = B_i^T B_i`` and ``cross_z[i] = B_i^T Z_i`` (input space);
    ``axes`` (d x m) are the principal axes of the residual after the step
    (orthonormal, input space), so its coordinates are ``Y = Z axes`` and
    ``B_i^T Y_i = cross_z[i] axes``.
    """

    gram: np.ndarray  # (groups, K, K)
    cross_z: np.ndarray  # (groups, K, d)
    axes: np.ndarray  # (d, m)
    folds: Folds

    @cached_property
    def _training(self) -> tuple[np.ndarray, np.ndarray]:
        """Sums over every fold's training groups: (folds, K, K) and, along the axes, (folds, K, m)."""
        member = np.equal.outer(np.arange(self.folds.n_folds), self.folds.fold).astype(float)  # (folds, groups)
        held_gram = np.tensordot(member, self.gram, axes=1)
        held_cross = np.tensordot(member, self.cross_z, axes=1)
        return held_gram.sum(axis=0) - held_gram, (held_cross.sum(axis=0) - held_cross) @ self.axes

    @cached_property
    def _cross(self) -> np.ndarray:
        """``B_i^T Y_i`` per group, (groups, K, m): what the per-axis errors need (O(K d m) per group)."""
        return self.cross_z @ self.axes

    def held_out(self, degree: int, per_axis: bool = False) -> np.ndarray:
        """Held-out squared error of each group (groups,), or along each axis (groups, m), up to ``||Y_i||^2``
        (the same for every candidate): ``w_j^T B_i^T B_i w_j - 2 w_j^T B_i^T y_ij``, ``w_j`` fitted on the
        other folds. Summed over the axes it is ``<B_i^T B_i, W W^T> - 2 <B_i^T Z_i, W axes^T>``: O(K d)
        per group, whatever the residual's width."""
        k = degree + 1
        train_gram, train_cross = self._training
        fold = self.folds.fold
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # a fold's singular fit loses, it does not fail
            w = solve_grams(train_gram[:, :k, :k], train_cross[:, :k])  # (folds, k, m)
            if per_axis:
                errors = np.einsum("gkj,gkj->gj", self.gram[:, :k, :k] @ w[fold] - 2 * self._cross[:, :k], w[fold])
            else:
                errors = np.einsum("gkl,gkl->g", self.gram[:, :k, :k], (w @ w.transpose(0, 2, 1))[fold])
                errors -= 2 * np.einsum("gkd,gkd->g", self.cross_z[:, :k], (w @ self.axes.T)[fold])
        return np.where(np.isfinite(errors), errors, np.inf)


@dataclass(frozen=True)
class Choice:
    """A step's validated polynomial: its degree, and the residual axes (d x r, input space) it predicts;
    the other axes get the lowest candidate degree."""

    degree: int
    axes: np.ndarray
    low: int
    others: np.ndarray  # (d, m - r): the remaining axes

    @classmethod
    def every_axis(cls, degree: int, axes: np.ndarray) -> Choice:
        return cls(degree, axes, degree, axes[:, :0])


def select_degree(cv: CrossValidation, degrees: Sequence[int], per_axis: bool = False) -> Choice:
    """The candidate degree, and the residual axes it predicts, that win the grouped cross-validation.

    ``D_ij(g)`` is the held-out error difference of candidate ``g`` to the
    lowest candidate on group ``i`` along the residual's principal axis ``j``.
    By default a candidate qualifies when ``sum_j D_ij(g)`` is :func:`significant`
    at :data:`SIGNIFICANCE`, and the qualifying one with the largest gain
    predicts every axis. With ``per_axis`` (``PPA(robust=True)``) an axis is
    predicted by ``g`` only where that difference is :func:`significant` at
    :func:`axis_significance` of the number of axes; candidate ``g`` gains
    ``sum_j sum_i D_ij(g)`` over its axes, and the largest gain wins (the
    lowest candidate gains 0). Axes are judged one by one because a curve's
    gain sits in a few of them while the estimation noise of its coefficients
    spreads over all of them: summed over hundreds of axes, the gain on a few
    would buy noise on the rest.
    """
    errors = np.stack([cv.held_out(g, per_axis) for g in degrees])  # (candidates, groups[, m])
    with np.errstate(invalid="ignore"):  # inf - inf: a candidate that failed is not significant
        diff = np.moveaxis(errors - errors[0], 1, -1)  # (candidates, [m,] groups)
    if not per_axis:  # the gain summed over every axis, at the 1-SE rule
        qualifies = significant(diff, SIGNIFICANCE)
        qualifies[0] = True
        best = int(np.argmin(np.where(qualifies, diff.sum(axis=1), np.inf)))
        return Choice.every_axis(int(degrees[best]), cv.axes)
    axes = diff.shape[1]
    qualifies = significant(diff, axis_significance(axes))
    qualifies[0] = False
    gains = np.where(qualifies, diff.sum(axis=-1), 0.0).sum(axis=1)
    best = int(np.argmin(gains))
    if best == 0:
        return Choice.every_axis(int(degrees[0]), cv.axes)
    return Choice(int(degrees[best]), cv.axes[:, qualifies[best]], int(degrees[0]), cv.axes[:, ~qualifies[best]])
