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
import scipy.special

from .linalg import inverse_grams

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

    @cached_property
    def membership(self) -> np.ndarray:
        """(folds, groups): 1 where the group is held out in the fold."""
        return np.equal.outer(np.arange(self.n_folds), self.fold).astype(float)

    @cached_property
    def members(self) -> list[np.ndarray]:
        """The groups of each fold."""
        return [np.flatnonzero(self.fold == f) for f in range(self.n_folds)]

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
    return upper_quantile(FALSE_GAIN / m)


def upper_quantile(share: float) -> float:
    """``z`` with ``P(Z > z) = share`` for a standard normal ``Z``, ``-Phi^-1(share)``: scipy.stats' ``norm.isf``
    without its overhead (0.3 ms a call)."""
    return float(-scipy.special.ndtri(share))


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


def group_grams(designs: np.ndarray, Y: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group ``i`` and step ``j`` of a block: ``B_ij^T B_ij`` (groups, b, K, K) and ``B_ij^T Y_i``
    (groups, b, K, m), one batched product per group on views of its rows, written in place (no copies:
    measured 2.5-5x faster than one product over zero-padded groups, from 5 to 64 groups and 6,435 to
    200,000 rows)."""
    b, K, n = designs.shape
    flat = designs.reshape(b * K, n)
    gram, cross = np.empty((len(bounds) - 1, b, K, K)), np.empty((len(bounds) - 1, b * K, Y.shape[1]))
    for i, (lo, hi) in enumerate(zip(bounds[:-1], bounds[1:])):
        np.matmul(designs[:, :, lo:hi], designs[:, :, lo:hi].transpose(0, 2, 1), out=gram[i])
        np.matmul(flat[:, lo:hi], Y[lo:hi], out=cross[i])
    return gram, cross.reshape(len(bounds) - 1, b, K, -1)


@dataclass(frozen=True)
class CrossValidation:
    """Per-group Gram matrices of one step, formed once for every candidate degree and fold.

    ``gram[i] = B_i^T B_i`` and ``cross[i] = C_i = B_i^T Y_i``, with ``Y`` (n x m) the residual after the
    step in an orthonormal basis of its subspace (its principal axes, for errors axis by axis): the
    summed errors do not depend on which basis. Fold ``f`` is fitted on the other folds' sums,
    ``G_f`` and ``C_f``: ``W_f = G_f^-1 C_f``.
    """

    gram: np.ndarray  # (groups, K, K)
    cross: np.ndarray  # (groups, K, m)
    folds: Folds

    @cached_property
    def _training(self) -> tuple[np.ndarray, np.ndarray]:
        """``G_f`` (folds, K, K) and ``C_f`` (folds, K, m): each fold's training sums, the total less its own groups."""
        member = self.folds.membership
        held_gram = np.tensordot(member, self.gram, axes=1)
        held_cross = np.matmul(member, self.cross.transpose(1, 0, 2)).transpose(1, 0, 2)  # one product per row of C: no copy
        return held_gram.sum(axis=0) - held_gram, held_cross.sum(axis=0) - held_cross

    @cached_property
    def _products(self) -> tuple[np.ndarray, np.ndarray]:
        """``C_f C_f^T`` (folds, K, K) and ``C_i C_f(i)^T`` (groups, K, K), ``f(i)`` the fold of group ``i``: all the
        summed errors need of the m axes, for every candidate (its leading k x k blocks)."""
        train_cross = self._training[1]
        K = train_cross.shape[1]
        per_group = np.empty((len(self.cross), K, K))
        for f, groups in enumerate(self.folds.members):
            per_group[groups] = self.cross[groups] @ train_cross[f].T
        return train_cross @ train_cross.transpose(0, 2, 1), per_group

    def held_out(self, degrees: Sequence[int], per_axis: bool = False) -> np.ndarray:
        """Held-out squared error of each candidate degree and group (candidates, groups), or along each axis
        (candidates, groups, m), up to ``||Y_i||^2`` (the same for every candidate): ``w_j^T G_i w_j - 2 w_j^T
        B_i^T y_ij`` with ``w_j`` fitted on the other folds.

        Summed over the axes, with ``W_f = G_f^-1 C_f`` (the candidate's first k
        terms), it is ``<G_i, G_f^-1 C_f C_f^T G_f^-1> - 2 <G_f^-1, C_i C_f^T>``:
        O(k^2) per group, nothing of width m. Every candidate at once: its
        ``G_f`` padded to K terms with the identity, whose inverse is ``G_f^-1``
        beside the identity, the identity then masked out.
        """
        train_gram, train_cross = self._training
        fold = self.folds.fold
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # a fold's singular fit loses, it does not fail
            inverse = _candidate_inverses(train_gram, degrees)  # (candidates, folds, K, K)
            if per_axis:
                errors = self._per_axis(inverse @ train_cross)
            else:
                fold_products, group_products = self._products
                outer = inverse @ fold_products @ inverse  # W_f W_f^T
                errors = np.einsum("gkl,cgkl->cg", self.gram, outer[:, fold])
                errors -= 2 * np.einsum("cgkl,gkl->cg", inverse[:, fold], group_products)
        return np.where(np.isfinite(errors), errors, np.inf)


    def _per_axis(self, fitted: np.ndarray) -> np.ndarray:
        """``w_cj^T G_i w_cj - 2 w_cj^T c_ij`` (candidates, groups, m) from each fold's fits ``W`` (candidates, folds,
        K, m): per fold, its groups' Gram matrices (flattened, K^2) times the fits' outer products ``w_k w_l``
        (K^2 x candidates m), one product."""
        n_candidates, _, K, m = fitted.shape
        errors = np.empty((n_candidates, len(self.gram), m))
        for f, groups in enumerate(self.folds.members):
            w = fitted[:, f]  # (candidates, K, m)
            outer = (w[:, :, None] * w[:, None]).transpose(1, 2, 0, 3).reshape(K * K, n_candidates * m)
            quadratic = (self.gram[groups].reshape(len(groups), K * K) @ outer).reshape(len(groups), n_candidates, m)
            linear = np.einsum("ckj,gkj->cgj", w, self.cross[groups])
            errors[:, groups] = quadratic.transpose(1, 0, 2) - 2 * linear
        return errors


def _candidate_inverses(grams: np.ndarray, degrees: Sequence[int]) -> np.ndarray:
    """``G^-1`` of the leading ``(g+1) x (g+1)`` block of each Gram matrix (folds, K, K) for each candidate
    degree ``g``, zero-padded to K x K: (candidates, folds, K, K)."""
    K = grams.shape[-1]
    kept = np.arange(K)[None, :] <= np.asarray(degrees)[:, None]  # (candidates, K): the terms each candidate fits
    mask = (kept[:, :, None] & kept[:, None, :])[:, None]
    padded = np.where(mask, grams[None], np.eye(K))
    return np.where(mask, inverse_grams(padded.reshape(-1, K, K)).reshape(padded.shape), 0.0)


@dataclass(frozen=True)
class Choice:
    """A step's validated polynomial: its degree on the residual axes ``axes`` (m x r, orthonormal columns
    in the coordinates of the residual after the step; None: every axis), and the lowest candidate ``low`` on
    the remaining axes ``others`` (None: none)."""

    degree: int
    axes: np.ndarray | None = None
    low: int = 1
    others: np.ndarray | None = None

    @classmethod
    def every_axis(cls, degree: int) -> Choice:
        return cls(degree, None, degree, None)

    def parts(self) -> list[tuple[int, np.ndarray | None]]:
        """``(degree, axes)`` of each group of axes with its own polynomial."""
        return [(self.degree, self.axes)] + ([(self.low, self.others)] if self.others is not None and self.others.shape[1] else [])


def select_degree(cv: CrossValidation, degrees: Sequence[int], per_axis: bool = False, axes: np.ndarray | None = None) -> Choice:
    """The candidate degree, and the residual axes it predicts, that win the grouped cross-validation.

    ``D_ij(g)`` is the held-out error difference of candidate ``g`` to the
    lowest candidate on group ``i`` along the residual's principal axis ``j``
    (the columns of ``axes`` in the residual's coordinates, None: its own
    axes, already principal). By default a candidate qualifies when
    ``sum_j D_ij(g)`` is :func:`significant` at :data:`SIGNIFICANCE`, and the
    qualifying one with the largest gain predicts every axis. With
    ``per_axis`` (``PPA(robust=True)``) an axis is predicted by ``g`` only
    where that difference is :func:`significant` at :func:`axis_significance`
    of the number of axes; candidate ``g`` gains ``sum_j sum_i D_ij(g)`` over
    its axes, and the largest gain wins (the lowest candidate gains 0). Axes
    are judged one by one because a curve's gain sits in a few of them while
    the estimation noise of its coefficients spreads over all of them: summed
    over hundreds of axes, the gain on a few would buy noise on the rest.
    """
    errors = cv.held_out(degrees, per_axis)  # (candidates, groups[, m])
    with np.errstate(invalid="ignore"):  # inf - inf: a candidate that failed is not significant
        diff = np.moveaxis(errors - errors[0], 1, -1)  # (candidates, [m,] groups)
    if not per_axis:  # the gain summed over every axis, at the 1-SE rule
        qualifies = significant(diff, SIGNIFICANCE)
        qualifies[0] = True
        best = int(np.argmin(np.where(qualifies, diff.sum(axis=1), np.inf)))
        return Choice.every_axis(int(degrees[best]))
    m = diff.shape[1]
    qualifies = significant(diff, axis_significance(m))
    qualifies[0] = False
    gains = np.where(qualifies, diff.sum(axis=-1), 0.0).sum(axis=1)
    best = int(np.argmin(gains))
    if best == 0:
        return Choice.every_axis(int(degrees[0]))
    basis = np.eye(m) if axes is None else axes
    return Choice(int(degrees[best]), basis[:, qualifies[best]], int(degrees[0]), basis[:, ~qualifies[best]])
