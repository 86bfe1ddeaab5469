"""Fit PPA on an in-memory sample (paper section 2.2, PCA-based solution).

On the centred sample, for each step ``p`` on the residual ``X_{p-1}`` (n x m),
:func:`fit_step` does:

1. ``e_p`` = leading vector of the residual (pluggable strategy, see
   :data:`LEADING_VECTORS` and :mod:`ppa_xr.core.leading`: PCA or PPA-GD; it
   gets the residual covariance ``S_{p-1}`` and the residual itself), ``E_p``
   any orthonormal complement (the error does not depend on it, paper
   Property 1; we use a Householder reflection, so ``X E_p`` costs O(nm)
   instead of O(nm^2));
2. ``alpha = X_{p-1} e_p``, ``Y = X_{p-1} E_p``;
3. degree ``g_p``: fixed, or chosen by grouped k-fold cross-validation
   (:func:`select_degree`): a curved step is kept only when it lowers the
   held-out error against the lowest candidate by more than the noise of that
   estimate;
4. least squares ``Y ~ [1, P(alpha)] W_p`` on the whole sample, and
   ``X_p = Y - [1, P(alpha)] W_p``.

The covariance is carried forward instead of recomputed, using that the
least-squares residual is orthogonal to the basis:
``S_p = E_p^T S_{p-1} E_p - W_p^T (B^T B / n) W_p``; it is recomputed from the
residual only when its trace has fallen by 1e6 (nearly collinear features),
where the update's rounding would be felt.

Because ``S_p`` is below (Loewner order) ``S_{p-1}`` with its top eigenvalue
removed, ``lambda_j(S_k) <= lambda_{j+k}(S_0)``: the training error after ``k``
steps, ``tr(S_k)``, is never above PCA's (paper Property 2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property, partial

import numpy as np
import scipy.linalg
import scipy.stats

from . import basis, blas
from .leading import LEADING_VECTORS, PCA, Strategy
from .params import PPAParams

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
#: rows the degree selection cross-validates on, drawn at random from a larger
#: sample; the chosen polynomials are then fitted on all rows (see fit_params)
SELECTION_ROWS = 20_000


LeadingVector = Callable[[np.ndarray, np.ndarray], np.ndarray]


#: ``validation="transfer"``: the sample is cut into this many regimes, k-means clusters of its leading
#: ``REGIME_SCORES`` principal scores, and degrees are validated leaving whole regimes out
N_REGIMES, REGIME_SCORES = 8, 3
#: how the degree selection groups the rows it holds out: the given groups (spatial blocks from a cube,
#: random rows otherwise), or regimes of the data (a curve must transfer between them)
VALIDATIONS = ("groups", "transfer")


def regimes(X: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Regime of every row: k-means (:data:`N_REGIMES` clusters) of its first :data:`REGIME_SCORES` principal scores.

    Holding a regime out asks whether a curve fitted on the other regimes
    predicts it, as a scene that differs from the fitting sample would ask.
    """
    from sklearn.cluster import KMeans

    centred = X - X.mean(axis=0)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    scores = centred @ vectors[:, ::-1][:, :REGIME_SCORES]
    n_clusters = min(N_REGIMES, len(X))
    return KMeans(n_clusters, n_init=3, random_state=int(rng.integers(2**31))).fit_predict(scores)


def candidate_degrees(degree: int | Sequence[int]) -> list[int]:
    """The candidate degrees, sorted and without repeats: the one place they are normalised."""
    values = [degree] if np.ndim(degree) == 0 else list(degree)
    return sorted({int(g) for g in values})


def min_samples(degrees: Sequence[int]) -> int:
    """Smallest sample that determines every candidate polynomial (on each training part when selecting)."""
    top = max(degrees) + 1
    return 2 * top if len(degrees) > 1 else top + 1


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


def _householder_complement(e: np.ndarray) -> np.ndarray:
    """Unit vector ``u`` such that ``H = I - 2 u u^T`` maps ``e`` to ``-sign(e_0) 1_0``.

    The columns ``1..m-1`` of ``H`` are then an orthonormal complement of ``e``.
    """
    u = e.copy()
    u[0] += np.copysign(1.0, e[0])
    return u / np.linalg.norm(u)


def _reflect_columns(M: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``M E`` for the complement ``E = (I - 2 u u^T)[:, 1:]``, in O(size of M)."""
    return (M - np.outer(M @ u, 2 * u))[:, 1:]


def _solve_grams(grams: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Least squares from stacked normal equations ``G_i W_i = C_i`` (minimum-norm where ``G_i`` is singular)."""
    try:
        return np.linalg.solve(grams, rhs)
    except np.linalg.LinAlgError:
        return np.stack([np.linalg.lstsq(g, c, rcond=None)[0] for g, c in zip(grams, rhs)])


def axis_significance(m: int) -> float:
    """Standard errors a held-out gain must reach on one of ``m`` axes: the one-standard-error rule's
    one-sided level, 0.16, shared among the axes (Bonferroni), ``z = Phi^-1(1 - 0.16 / m)``. With one axis it
    is the 1-SE rule; at 200 axes it is 3.1, so pure noise passes on some axis of a step 16% of the time
    instead of on 30 of its axes."""
    return float(scipy.stats.norm.isf(FALSE_GAIN / m))


def _significant(diff: np.ndarray, z: float) -> np.ndarray:
    """Which rows of held-out error differences ``D`` (..., groups) are significantly negative.

    ``T = sum_i D_i < -z * se``, ``se^2 = G/(G-1) sum_i (D_i - T/G)^2``:
    groups are the independent units, so the spatially correlated pixels of
    one block count once.
    """
    n_groups = diff.shape[-1]
    total = diff.sum(axis=-1)
    spread = np.sqrt(n_groups / (n_groups - 1) * np.sum((diff - total[..., None] / n_groups) ** 2, axis=-1))
    return total < -z * spread


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
            w = _solve_grams(train_gram[:, :k, :k], train_cross[:, :k])  # (folds, k, m)
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


def select_degree(cv: CrossValidation, degrees: Sequence[int], per_axis: bool = False, unanimous: bool = False) -> Choice:
    """The candidate degree, and the residual axes it predicts, that win the grouped cross-validation.

    ``D_ij(g)`` is the held-out error difference of candidate ``g`` to the
    lowest candidate on group ``i`` along the residual's principal axis ``j``.
    By default a candidate qualifies when ``sum_j D_ij(g)`` is :func:`_significant`
    at :data:`SIGNIFICANCE`, and the qualifying one with the largest gain
    predicts every axis. With ``per_axis`` (``PPA(robust=True)``) an axis is predicted by ``g`` only where that difference is
    :func:`_significant` at :func:`axis_significance`; candidate ``g`` gains ``sum_j sum_i D_ij(g)`` over
    its axes, and the largest gain wins (the lowest candidate gains 0). Axes
    are judged one by one because a curve's gain sits in a few of them while
    the estimation noise of its coefficients spreads over all of them: summed
    over hundreds of axes, the gain on a few would buy noise on the rest.
    ``unanimous`` (``validation="transfer"``, groups = regimes): a candidate
    qualifies only where it loses on no held-out group, so a curve that one
    regime contradicts is not kept however much the others gain.
    """
    errors = np.stack([cv.held_out(g, per_axis) for g in degrees])  # (candidates, groups[, m])
    with np.errstate(invalid="ignore"):  # inf - inf: a candidate that failed is not significant
        diff = np.moveaxis(errors - errors[0], 1, -1)  # (candidates, [m,] groups)
    if not per_axis:  # the gain summed over every axis, at the 1-SE rule
        qualifies = _significant(diff, SIGNIFICANCE) & ((diff <= 0).all(axis=-1) | (not unanimous))
        qualifies[0] = True
        best = int(np.argmin(np.where(qualifies, diff.sum(axis=1), np.inf)))
        return Choice.every_axis(int(degrees[best]), cv.axes)
    qualifies = _significant(diff, axis_significance(diff.shape[1])) & ((diff <= 0).all(axis=-1) | (not unanimous))
    qualifies[0] = False
    gains = np.where(qualifies, diff.sum(axis=-1), 0.0).sum(axis=1)
    best = int(np.argmin(gains))
    if best == 0:
        return Choice.every_axis(int(degrees[0]), cv.axes)
    return Choice(int(degrees[best]), cv.axes[:, qualifies[best]], int(degrees[0]), cv.axes[:, ~qualifies[best]])


def _least_squares(design: np.ndarray, y, gram: np.ndarray, cross: np.ndarray) -> np.ndarray:
    """``W = argmin ||Y - B W||`` from the normal equations ``B^T B W = B^T Y`` while
    ``B^T B`` is well conditioned (cond < 1e6), else by a pivoted QR of ``B`` on
    ``Y = y()`` (high degrees on skewed projections), so no accuracy is lost."""
    eig = np.linalg.eigvalsh(gram)
    if eig[0] > 1e-6 * eig[-1]:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram, check_finite=False), cross, check_finite=False)
    return scipy.linalg.lstsq(design, y(), cond=1e-10, lapack_driver="gelsy", check_finite=False)[0]


@dataclass(frozen=True)
class Step:
    """One fitted step: leading vector, Householder vector of ``E_p``, Legendre ``W_p`` ((g+1) x (m-1)), its range."""

    e: np.ndarray
    u: np.ndarray
    w: np.ndarray
    degree: int
    center: float
    scale: float
    variance: float


def _leading(strategy: Strategy, cov: np.ndarray, resid: np.ndarray) -> np.ndarray:
    e = np.asarray(strategy.find(cov, resid), dtype=np.float64)
    if e.shape != (cov.shape[0],) or not np.isfinite(e).all() or abs(np.linalg.norm(e) - 1) > 1e-8:
        raise ValueError(
            f"the leading-vector strategy must return a finite unit vector of length {cov.shape[0]}, got shape "
            f"{e.shape} with norm {np.linalg.norm(e) if e.size else 0:.6g}; normalise it (e / np.linalg.norm(e))"
        )
    return e


@dataclass
class Residual:
    """The residual of the fit so far, kept embedded in input space.

    ``Z`` (n x d) is the centred sample minus the curved steps' corrections;
    ``frame`` (d x m) is an orthonormal basis of the residual's subspace and
    ``cov`` its covariance in that basis. The residual itself is ``Z frame``:
    a straight (PCA) step only removes a direction orthogonal to every later
    one, so ``Z`` changes only at curved steps, by a rank ``g+1`` update.
    Its first ``rows`` rows are the selection rows, grouped contiguously.
    """

    Z: np.ndarray
    frame: np.ndarray
    cov: np.ndarray
    rows: int

    @property
    def selection(self) -> np.ndarray:
        """The selection rows of ``Z`` (a view, so it follows the updates)."""
        return self.Z[: self.rows]

    def sample(self) -> np.ndarray:
        return self.Z @ self.frame


@dataclass(frozen=True)
class Designs:
    """How a step's polynomial basis is laid on its projections: the kernels' tails, ``tiny``, the spread
    below which a projection counts as constant, and whether the range is fenced (robust fits)."""

    tails: str
    tiny: float
    fenced: bool = False

    def __call__(self, alphas: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``[1, P_1(t), ..., P_top(t)]`` of each row of ``alphas`` (b x n) -> (b, top+1, n), with centres and scales.

        ``t`` maps the projections' range ``[min, max]`` (with ``fenced``, their
        :func:`~ppa_xr.core.basis.fences`, except for raw polynomial tails) onto ``[-1, 1]``; beyond it the design has the
        kernels' tails, so the fitted map is the one the kernels apply. A
        projection without spread gets scale 0: a plain rotation step.
        """
        if self.tails == "polynomial" or not self.fenced:
            lo, hi = alphas.min(axis=1), alphas.max(axis=1)
        else:
            lo, hi = np.array([basis.fences(a) for a in alphas]).T.reshape(2, -1)
        spread = hi - lo > 2 * self.tiny
        centers, scales = np.where(spread, (hi + lo) / 2, 0.0), np.where(spread, (hi - lo) / 2, 0.0)
        designs = np.empty((alphas.shape[0], top + 1, alphas.shape[1]))
        designs[:, 0] = 1
        designs[~spread, 1:] = 0  # no spread: a rotation step, whose (unused) Gram matrices must still be finite
        for j in np.flatnonzero(spread):
            t = alphas[j] - centers[j]
            t *= 1 / scales[j]
            basis.legendre_with_tails(t, top, self.tails, out=designs[j, 1:])
        return designs, centers, scales


def _group_grams(designs: np.ndarray, Z: np.ndarray, bounds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per group ``i`` and step ``j`` of a block: ``B_ij^T B_ij`` (groups, b, K, K) and ``B_ij^T Z_i``
    (groups, b, K, d), one batched product per group on views of its rows (no copies: measured 2.5-5x
    faster than one product over zero-padded groups, from 5 to 64 groups and 6,435 to 200,000 rows)."""
    b, K, n = designs.shape
    flat = designs.reshape(b * K, n)
    spans = list(zip(bounds[:-1], bounds[1:]))
    gram = np.stack([designs[:, :, lo:hi] @ designs[:, :, lo:hi].transpose(0, 2, 1) for lo, hi in spans])
    cross = np.stack([(flat[:, lo:hi] @ Z[lo:hi]).reshape(b, K, -1) for lo, hi in spans])
    return gram, cross


def fit_step(
    res: Residual, e: np.ndarray, choose: Callable[[np.ndarray, np.ndarray], Choice | None], designs_of: Designs, fit_linear: bool,
    guard: Callable[[np.ndarray], bool] | None = None,
) -> tuple[Step, bool] | None:
    """One PPA step with leading vector ``e`` (residual coordinates); updates ``res`` in place.

    ``choose(frame, cov)`` gives the step's polynomial from the residual
    basis after it and its covariance (by cross-validation on the selection
    rows, or fixed); ``None`` is a plain rotation step, and so is degree 1
    unless ``fit_linear`` (a leading vector that is not an eigenvector leaves
    a linear trend). The polynomial is then fitted on the whole sample, on
    the axes the choice names (the others get its lowest degree). Returns the
    step and whether it is curved; ``None``, with ``res`` untouched, when
    ``guard(cov)`` refuses the residual covariance the step would leave.
    """
    n = res.Z.shape[0]
    variance = float(e @ res.cov @ e)
    lead = res.frame @ e
    u = _householder_complement(e)
    frame = _reflect_columns(res.frame, u)  # E_0 ... E_p
    cov = _reflect_columns(_reflect_columns(res.cov, u).T, u)
    m = frame.shape[1]
    w, degree, center, scale = np.zeros((1, m)), 1, 0.0, 1.0
    choice = choose(frame, cov)
    if choice is not None and (choice.degree > 1 or fit_linear):
        designs, centers, scales = designs_of((res.Z @ lead)[None], choice.degree)
        if scales[0] > 0:
            design = designs[0]
            gram_all, cross_all = design @ design.T, design @ res.Z
            fitted = _least_squares(design.T, lambda: res.Z @ choice.axes, gram_all, cross_all @ choice.axes) @ (choice.axes.T @ frame)
            if choice.others.shape[1] and (choice.low > 1 or fit_linear):
                k = choice.low + 1
                low = _least_squares(design[:k].T, lambda: res.Z @ choice.others, gram_all[:k, :k], cross_all[:k] @ choice.others)
                fitted[:k] += low @ (choice.others.T @ frame)
            removed = np.sum(fitted * (gram_all @ fitted))  # ||B W||^2, the residual energy the polynomial explains
            if removed > 1e-12 * np.trace(cov) * n:  # else numerically no curve (e.g. degree 1 on a PCA direction)
                w, degree, center, scale = fitted, choice.degree, float(centers[0]), float(scales[0])
                cov = cov - w.T @ (gram_all / n) @ w
    if guard is not None and not guard(cov):
        return None
    if w.any():
        blas.matmul_into(design.T, w @ frame.T, res.Z, alpha=-1.0, beta=1.0)  # Z -= B W E^T, in place
    res.frame, res.cov = frame, (cov + cov.T) / 2
    return Step(e, u, w, degree, center, scale, variance), bool(w.any())


def interlaced(cov: np.ndarray, pca_variance: np.ndarray, steps: int) -> bool:
    """Whether the residual covariance after ``steps`` steps satisfies ``lambda_j(S_k) <= lambda_{j+k}(S_0)``
    (up to rounding): the condition under which every later PCA-led step keeps the training error at or
    below PCA's at every ``k`` (paper Property 2); a PCA-led step always meets it."""
    values = np.linalg.eigvalsh(cov)[::-1]
    return bool(np.all(values <= pca_variance[steps:steps + len(values)] + 1e-9 * pca_variance.sum()))


def pca_solution(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of principal axes (largest variance first, largest entry positive) and their variances."""
    values, vectors = np.linalg.eigh(cov)
    rotation = vectors[:, ::-1].T
    rotation *= np.sign(rotation[np.arange(len(rotation)), np.argmax(np.abs(rotation), axis=1)])[:, None]
    return rotation, np.maximum(values[::-1], 0.0)


#: most steps whose projections and Gram matrices one pass over the sample prepares
MAX_BLOCK = 32


def _block_leads(res: Residual, strategy: Strategy, size: int, floor: float) -> np.ndarray:
    """Leading vectors in input space (d x b, largest entry positive, as sklearn's svd_flip) of the next
    steps, assuming those before each are straight.

    For the PCA strategy they are the top eigenvectors of the residual
    covariance (a straight step leaves the others as they are), so up to
    ``size`` steps are prepared at once; the block ends where the remaining
    variance would fall below ``floor``, where the covariance is recomputed
    from the sample so small eigenvectors stay accurate. Any other strategy
    sees its residual step by step.
    """
    if strategy.is_pca:
        m = res.cov.shape[0]
        values, vectors = scipy.linalg.eigh(res.cov, subset_by_index=(m - size, m - 1), check_finite=False)
        remaining = np.trace(res.cov) - np.cumsum(values[::-1])
        vectors = vectors[:, ::-1][:, : 1 + int(np.argmax(remaining < floor)) if (remaining < floor).any() else size]
    else:
        vectors = _leading(strategy, res.cov, res.sample())[:, None]
    return _oriented(res.frame @ vectors)


def _oriented(leads: np.ndarray) -> np.ndarray:
    """Leading vectors (input space, columns) with their largest entry positive, as sklearn's svd_flip."""
    return leads * np.sign(leads[np.argmax(np.abs(leads), axis=0), np.arange(leads.shape[1])])


def _held_out_cost(resid: np.ndarray, e: np.ndarray, degree: int, folds: Folds, designs_of: Designs) -> float:
    """Cross-validated error of a step along ``e`` with a degree-``degree`` polynomial, ``sum ||X_i - B_i W||^2``
    over held-out groups, up to the same constant for every ``e`` (it regresses the whole residual on ``B``)."""
    designs, _, scales = designs_of((resid @ e)[None], degree)
    if scales[0] == 0:
        return np.inf
    gram, cross = _group_grams(designs, resid, folds.bounds)
    return float(CrossValidation(gram[:, 0], cross[:, 0], np.eye(resid.shape[1]), folds).held_out(degree).sum())


def _validated_leads(res: Residual, strategy: Strategy, degree: int, folds: Folds | None, designs_of: Designs) -> np.ndarray:
    """A searched leading vector (PPA-GD), kept only where it beats the PCA one on held-out groups:
    the search maximises the fit on every row, so only held-out rows can vouch for it. Both run on the
    selection rows."""
    resid = res.selection @ res.frame
    searched = _oriented(res.frame @ _leading(strategy, res.cov, resid)[:, None])
    if folds is None:
        return searched
    pca = _block_leads(res, PCA, 1, 0.0)
    costs = [_held_out_cost(resid, res.frame.T @ lead[:, 0], degree, folds, designs_of) for lead in (searched, pca)]
    return searched if costs[0] < costs[1] else pca


def _degree_choices(
    res: Residual, leads: np.ndarray, degrees: Sequence[int], top: int, folds: Folds | None, designs_of: Designs,
    per_axis: bool = False, unanimous: bool = False,
) -> Callable[[int, np.ndarray, np.ndarray], Choice | None]:
    """``(j, frame, cov) -> Choice`` of step ``j`` of a block along ``leads`` (d x b, input space), from the
    residual basis after the step and its covariance; None: a rotation.

    With candidates to choose from, one GEMM gives the block's projections on
    the selection rows and one pass their per-group Gram matrices (straight
    steps do not change ``Z``, so they hold for the whole block); with
    ``per_axis`` each step is judged along the principal axes of its residual
    (and by every group with ``unanimous``, see :func:`select_degree`).
    """
    if top == 1:
        return lambda j, frame, cov: None
    if folds is None:
        return lambda j, frame, cov: Choice.every_axis(degrees[0], frame)
    designs, _, scales = designs_of(leads.T @ res.selection.T, top)
    gram, cross = _group_grams(designs, res.selection, folds.bounds)

    def choose(j: int, frame: np.ndarray, cov: np.ndarray) -> Choice | None:
        if scales[j] == 0:
            return None
        axes = frame @ scipy.linalg.eigh(cov, check_finite=False)[1] if per_axis else frame
        return select_degree(CrossValidation(gram[:, j], cross[:, j], axes, folds), degrees, per_axis, unanimous)

    return choose


def fit_params(
    X: np.ndarray,
    degrees: Sequence[int],
    *,
    tails: str = "clamp",
    leading: str | LeadingVector = "pca",
    n_folds: int = 5,
    groups: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
    progress: Callable[[int, int], None] | None = None,
    max_curved: int | None = None,
    selection_rows: int = SELECTION_ROWS,
    standardize: bool = False,
    robust: bool = False,
    transfer: bool = False,
    noise_cov: np.ndarray | None = None,
) -> PPAParams:
    """Fit PPA on a finite float sample ``X`` (n x d); ``progress(done, total)`` is called after each step.

    ``standardize``: fit on ``D^-1 (x - mean)``, ``D`` the features' standard
    deviations (constant features keep 1); ``noise_cov``: fit on the
    noise-whitened ``W (x - mean)`` (:func:`noise_whitening`), so components
    come ordered by signal-to-noise ratio (MNF with ``degree=1``). Both are a
    whitening ``W`` kept in the parameters (:meth:`PPAParams.prewhitened`).

    ``robust``: each step's degree is validated axis by axis of its residual
    (:func:`select_degree`) and its polynomial fitted within the projections'
    :func:`~ppa_xr.core.basis.fences`: for hundreds of bands and scenes with
    heavy tails or anomalous pixels (docs/fidelity.md).

    ``transfer``: the groups are the sample's :func:`regimes`, and a curve is
    kept only where no held-out regime contradicts it (``unanimous``).

    ``max_curved``: after that many curved steps the rest is a plain rotation
    (PCA of the residual, no polynomial search): the fit's cost at hundreds
    of bands where curvature sits in the first components.

    ``degrees`` are the candidates per step (see :func:`candidate_degrees`);
    with more than one, ``groups`` (one label per row, e.g. the spatial block a
    pixel came from) are held out together in ``n_folds``-fold cross-validation
    on at most ``selection_rows`` rows drawn at random (:data:`SELECTION_ROWS`).
    Only a curved step's polynomial is then fitted on the whole sample, so a
    straight step costs no pass over it.

    Steps are prepared in blocks (:func:`_block_leads`, :func:`_degree_choices`):
    one GEMM gives the projections of up to :data:`MAX_BLOCK` next steps and
    one pass their per-group Gram matrices; a block ends at its first curved
    step (whose correction changes the residual) and the next one doubles
    while steps stay straight.

    Parameters
    ----------
    X : np.ndarray
        (n, d) finite samples.
    degrees : sequence of int
        Candidate degrees.
    tails, leading, n_folds, max_curved, standardize, robust, noise_cov
        As in :class:`ppa_xr.PPA`.
    groups : np.ndarray, optional
        (n,) labels held out together.
    rng : np.random.Generator, optional
        Folds and draws.
    progress : callable, optional
        ``progress(done, total)`` after each step.
    selection_rows : int
        Rows the degree selection cross-validates on.
    transfer : bool
        ``validation="transfer"``.

    Returns
    -------
    PPAParams
        The fitted parameters.
    """
    degrees = candidate_degrees(degrees)
    strategy = (LEADING_VECTORS[leading] if isinstance(leading, str) else Strategy(leading)).for_degree(max(degrees))
    n, d = X.shape
    rng = np.random.default_rng() if rng is None else rng
    if transfer and len(degrees) > 1:
        groups = regimes(X, rng)
    folds, order = Folds.select(groups, n, n_folds, rng, selection_rows) if len(degrees) > 1 else (None, None)
    Z, mean, factor = _centred(X, order, per_feature=standardize)
    cov = Z.T @ Z / n
    whitening, unit = None, 1.0  # the fit's values are W (x - mean) / unit, with W = I / factor unless whitening
    if standardize:  # W = D^-1: each feature's standard deviation D; a constant feature keeps 1
        std = np.sqrt(np.diag(cov))
        feature_scale = np.where(std > 0, std, 1 / factor)
        Z /= feature_scale
        cov = cov / np.outer(feature_scale, feature_scale)
        whitening = np.diag(1 / (factor * feature_scale))
    elif noise_cov is not None:  # W = Lambda^-1/2 U^T (noise in unit variance), then a power of two for O(1) values
        whitening = noise_whitening(noise_cov)
        Z = Z @ (whitening * factor).T
        spread = np.abs(Z).max()
        unit = 2.0 ** np.round(np.log2(spread)) if spread > 0 else 1.0
        Z /= unit
        cov = Z.T @ Z / n
    pca = pca_solution(cov)
    res = Residual(Z, np.eye(d), cov, n if folds is None else int(folds.bounds[-1]))
    total = reference = np.trace(cov)  # the sample's energy; the reference is renewed at each recompute
    designs_of = Designs(tails, 1e-12 * np.sqrt(max(reference, np.finfo(float).tiny)), robust)
    steps, frames, size, n_curved, searching = [], [], 1, 0, strategy.searches
    while len(steps) < d - 1:
        capped = max_curved is not None and n_curved >= max_curved  # the rest is a plain rotation
        top = 1 if capped else max(degrees)
        chooser = strategy
        if searching and not capped and np.trace(res.cov) > 1e-9 * total:
            leads = _validated_leads(res, strategy, top, folds, designs_of)
        else:  # below 1e-9 of the sample's energy a residual is float64 rounding: no direction worth searching
            chooser = PCA if strategy.searches else strategy
            leads = _block_leads(res, chooser, min(size, d - 1 - len(steps)), 1e-6 * reference)
        degree_of = _degree_choices(res, leads, degrees, top, folds, designs_of, robust, transfer)
        for j in range(leads.shape[1]):
            frame = res.frame
            if chooser.is_pca:
                step, curved = fit_step(res, res.frame.T @ leads[:, j], partial(degree_of, j), designs_of, False)
            else:  # any other direction must keep Property 2 (``interlaced``), else the step is PCA-led
                guard = partial(interlaced, pca_variance=pca[1], steps=len(steps) + 1)
                fitted = fit_step(res, res.frame.T @ leads[:, j], partial(degree_of, j), designs_of, True, guard)
                if fitted is None:
                    leads = _block_leads(res, PCA, 1, 0.0)
                    degree_of = _degree_choices(res, leads, degrees, top, folds, designs_of, robust, transfer)
                    fitted = fit_step(res, res.frame.T @ leads[:, 0], partial(degree_of, 0), designs_of, False)
                step, curved = fitted
                searching = searching and curved  # searches go on while they find curves
            frames.append(frame)
            steps.append(step)
            if progress is not None:
                progress(len(steps), d - 1)
            if np.trace(res.cov) < 1e-6 * reference:  # updates lost relative precision: recompute,
                resid = res.sample()  # and drop the removed directions from Z, which would swamp the small ones
                res.Z, res.cov = resid @ res.frame.T, resid.T @ resid / n
                reference = np.trace(res.cov)
            if curved:
                n_curved += 1
                break
        size = 1 if curved else min(2 * size, MAX_BLOCK)
    if whitening is None:
        return _compose(mean / factor, steps, frames, res.cov[0, 0], tails, pca).scaled(factor)
    return _compose(whitening @ mean / unit, steps, frames, res.cov[0, 0], tails, pca).scaled(unit).prewhitened(whitening)


def noise_whitening(noise_cov: np.ndarray) -> np.ndarray:
    """``W = Lambda^-1/2 U^T`` for the noise covariance ``N = U Lambda U^T``: ``W N W^T = I`` (MNF's first step).

    Refuses a covariance that is not symmetric positive definite (a band
    without noise, or fewer noise samples than bands, make it singular).
    """
    N = np.asarray(noise_cov, dtype=np.float64)
    if N.ndim != 2 or N.shape[0] != N.shape[1] or not np.isfinite(N).all():
        raise ValueError(f"noise_cov must be a finite square (d, d) matrix, got shape {N.shape}")
    if not np.allclose(N, N.T, rtol=1e-8, atol=1e-12 * np.abs(N).max()):
        raise ValueError("noise_cov must be symmetric (a covariance matrix)")
    values, vectors = np.linalg.eigh((N + N.T) / 2)
    if values.min() <= 1e-12 * values.max():
        raise ValueError(
            f"noise_cov is singular or not positive definite (eigenvalues {values.min():.3g} .. {values.max():.3g}): every "
            "band needs some noise; estimate it from more pixels, or add a small diagonal, e.g. N + 1e-6 * trace(N) / d * I"
        )
    return vectors.T / np.sqrt(values)[:, None]


def _centred(X: np.ndarray, order: np.ndarray | None, per_feature: bool = False) -> tuple[np.ndarray, np.ndarray, float | np.ndarray]:
    """``Z = (X[order] - mean) / f``, a new float64 array, with ``mean`` and ``f``: a power of two near the
    largest deviation, so the fit runs on O(1) values, exactly scaled (no under/overflow at 1e-200 or 1e200).
    ``per_feature`` (standardizing fits): one power of two per feature, so a feature at 1e-150 beside one
    at 1e150 keeps its values (their variances are computed apart)."""
    Z = np.array(X, dtype=np.float64) if order is None else np.take(X, order, axis=0).astype(np.float64, copy=False)
    mean = Z.mean(axis=0)
    Z -= mean
    spread = np.maximum(Z.max(axis=0), -Z.min(axis=0)) if per_feature else max(Z.max(), -Z.min())
    factor = np.where(spread > 0, 2.0 ** np.round(np.log2(np.where(spread > 0, spread, 1.0))), 1.0)
    Z *= 1 / factor
    return Z, mean, factor if per_feature else factor[()]


def _compose(mean, steps: list[Step], frames: list[np.ndarray], last_variance: float, tails: str, pca) -> PPAParams:
    """Compose the per-step rotations and polynomials into the kernels' matrices.

    Backwards over the steps, ``O_{p-1} = [e_p^T; O_p E_p^T]`` maps the residual
    before step ``p`` to the outputs ``r[p:]``; ``A = O_{-1}``. Each step keeps
    its own constant term (``forward_bias[p]``, ``inverse_bias[p]``), so a
    truncated inverse can leave out the steps it does not run.
    """
    d = mean.shape[0]
    gmax = max(max(s.degree for s in steps), 1)
    forward, inverse = np.zeros((2, d - 1, gmax, d))
    forward_bias, inverse_bias = np.zeros((2, d - 1, d))
    outputs = np.ones((1, 1))  # O_{d-2}
    for p in range(d - 2, -1, -1):
        step, frame = steps[p], frames[p]
        w = basis.legendre_to_power(len(step.w) - 1).T @ step.w  # Legendre -> monomial coefficients
        fw = w @ outputs.T  # W_p O_p^T: (g+1, d-p-1)
        forward_bias[p, p + 1:] = fw[0]
        forward[p, : len(w) - 1, p + 1:] = fw[1:]
        iw = _reflect_columns(frame, step.u) @ w.T  # (E_0 ... E_p) W_p^T: (d, g+1)
        inverse_bias[p] = iw[:, 0]
        inverse[p, : len(w) - 1] = iw[:, 1:].T
        reflection = np.eye(d - p) - 2 * np.outer(step.u, step.u)
        outputs = np.vstack([step.e, outputs @ reflection[1:]])
    return PPAParams(
        mean=mean, rotation=outputs, degrees=np.array([s.degree for s in steps], dtype=np.int64),
        center=np.array([s.center for s in steps]), scale=np.array([s.scale for s in steps]),
        forward_bias=forward_bias, forward=forward, inverse_bias=inverse_bias, inverse=inverse,
        explained_variance=np.array([s.variance for s in steps] + [last_variance]),
        pca_rotation=pca[0], pca_variance=pca[1], tails=tails,
    )
