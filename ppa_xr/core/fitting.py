"""Fit PPA on an in-memory sample (paper section 2.2, PCA-based solution).

On the centred sample, for each step ``p`` on the residual ``X_{p-1}`` (n x m),
:func:`fit_step` does:

1. ``e_p`` = leading vector of the residual (pluggable strategy, see
   :data:`LEADING_VECTORS`; it gets the residual covariance ``S_{p-1}`` and the
   residual itself), ``E_p`` any orthonormal complement (the error does not
   depend on it, paper Property 1; we use a Householder reflection, so
   ``X E_p`` costs O(nm) instead of O(nm^2));
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

import numpy as np
import scipy.linalg

from . import basis
from .params import PPAParams

#: a curved step must beat the lowest candidate degree on held-out data by
#: this many standard errors of the (group-clustered) error difference: the
#: one-standard-error rule of cross-validation (Breiman et al. 1984; Hastie,
#: Tibshirani & Friedman, sec. 7.10). Measured: 2 of 100 steps curved on
#: Gaussian clouds (no curve to find); 2.0 gave worse held-out errors on the
#: paper's tables (Pageblocks 78.4 vs 76.8 % of PCA) and no better spatial transfer.
SIGNIFICANCE = 1.0
#: groups the sample is dealt into when no ``groups`` are given (iid rows)
PSEUDO_GROUPS = 100


def pca_leading_vector(cov: np.ndarray, resid: np.ndarray | None = None) -> np.ndarray:
    """The PCA-based solution: the leading eigenvector of the residual covariance."""
    m = cov.shape[0]
    return scipy.linalg.eigh(cov, subset_by_index=(m - 1, m - 1), check_finite=False)[1][:, 0]


LeadingVector = Callable[[np.ndarray, np.ndarray], np.ndarray]
LEADING_VECTORS: dict[str, LeadingVector] = {"pca": pca_leading_vector}


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


def _solve_gram(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Least squares from normal equations ``G W = C`` (minimum-norm if ``G`` is singular)."""
    try:
        return np.linalg.solve(gram, rhs)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(gram, rhs, rcond=None)[0]


def _significant(diff: np.ndarray) -> np.ndarray:
    """Which rows of held-out error differences ``D`` (..., groups) are significantly negative.

    ``T = sum_i D_i < -SIGNIFICANCE * se``, ``se^2 = G/(G-1) sum_i (D_i - T/G)^2``:
    groups are the independent units, so the spatially correlated pixels of
    one block count once.
    """
    n_groups = diff.shape[-1]
    total = diff.sum(axis=-1)
    spread = np.sqrt(n_groups / (n_groups - 1) * np.sum((diff - total[..., None] / n_groups) ** 2, axis=-1))
    return total < -SIGNIFICANCE * spread


@dataclass(frozen=True)
class CrossValidation:
    """Per-group Gram matrices ``B_i^T B_i`` and ``B_i^T Y_i`` of one step, formed once for every candidate."""

    gram: np.ndarray  # (groups, K, K)
    cross: np.ndarray  # (groups, K, m)
    folds: Folds

    @classmethod
    def of(cls, design: np.ndarray, y: np.ndarray, folds: Folds) -> CrossValidation:
        spans = list(zip(folds.bounds[:-1], folds.bounds[1:]))
        return cls(np.stack([design[a:b].T @ design[a:b] for a, b in spans]), np.stack([design[a:b].T @ y[a:b] for a, b in spans]), folds)

    def held_out(self, degree: int, directions: np.ndarray | None = None) -> np.ndarray:
        """Held-out squared error of each group (groups,), or of each group along each output
        direction (groups, r), up to ``||Y_i||^2`` (the same for every candidate):
        ``-2 tr(W^T B_i^T Y_i) + tr(W^T B_i^T B_i W)`` with ``W`` fitted on the other folds."""
        k = degree + 1
        gram, cross = self.gram[:, :k, :k], self.cross[:, :k]
        if directions is not None:
            cross = cross @ directions
        gram_all, cross_all = gram.sum(axis=0), self.cross[:, :k].sum(axis=0)
        errors = np.empty(cross.shape[::2])
        for f in range(self.folds.n_folds):
            held = self.folds.fold == f
            w = _solve_gram(gram_all - gram[held].sum(axis=0), cross_all - self.cross[held, :k].sum(axis=0))
            if directions is not None:
                w = w @ directions
            errors[held] = np.einsum("gkm,km->gm", gram[held] @ w - 2 * cross[held], w)
        return errors if directions is not None else errors.sum(axis=1)


def select_degree(cv: CrossValidation, degrees: Sequence[int]) -> int:
    """The candidate degree that wins the grouped cross-validation.

    ``D_i(g)`` is the held-out error difference of candidate ``g`` to the
    lowest candidate on group ``i``; a candidate qualifies when it is
    :func:`_significant`, and the qualifying candidate (or the lowest) with the
    smallest held-out error wins.
    """
    errors = np.stack([cv.held_out(g) for g in degrees])
    diff = errors - errors[0]
    qualifies = _significant(diff)
    qualifies[0] = True
    return int(degrees[int(np.argmin(np.where(qualifies, diff.sum(axis=1), np.inf)))])


def _least_squares(design: np.ndarray, y: np.ndarray, gram: np.ndarray, cross: np.ndarray) -> np.ndarray:
    """``W = argmin ||Y - B W||`` from the normal equations ``B^T B W = B^T Y`` while
    ``B^T B`` is well conditioned (cond < 1e6), else by a pivoted QR of ``B``
    (high degrees on skewed projections), so no accuracy is lost."""
    eig = np.linalg.eigvalsh(gram)
    if eig[0] > 1e-6 * eig[-1]:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram, check_finite=False), cross, check_finite=False)
    return scipy.linalg.lstsq(design, y, cond=1e-10, lapack_driver="gelsy", check_finite=False)[0]


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


def _leading(strategy: LeadingVector, cov: np.ndarray, resid: np.ndarray) -> np.ndarray:
    e = np.asarray(strategy(cov, resid), dtype=np.float64)
    if e.shape != (cov.shape[0],) or not np.isfinite(e).all() or abs(np.linalg.norm(e) - 1) > 1e-8:
        raise ValueError(
            f"the leading-vector strategy must return a finite unit vector of length {cov.shape[0]}, got shape "
            f"{e.shape} with norm {np.linalg.norm(e) if e.size else 0:.6g}; normalise it (e / np.linalg.norm(e))"
        )
    return e


def fit_step(
    resid: np.ndarray, cov: np.ndarray, frame: np.ndarray, strategy: LeadingVector, degrees: Sequence[int], folds: Folds | None, tiny: float
) -> tuple[Step, np.ndarray, np.ndarray]:
    """One PPA step on the centred residual (n x m) with covariance ``cov``.

    ``frame`` maps residual coordinates to input space (for the sign
    convention); returns the step, the next residual (n x m-1) and its covariance.
    """
    n, m = resid.shape
    e = _leading(strategy, cov, resid)
    lead = frame @ e
    if lead[np.argmax(np.abs(lead))] < 0:  # sign convention, as sklearn's svd_flip
        e = -e
    variance = float(e @ cov @ e)
    u = _householder_complement(e)
    alpha = resid @ e
    y = _reflect_columns(resid, u)
    cov = _reflect_columns(_reflect_columns(cov, u).T, u)
    w, degree, center, scale = np.zeros((1, m - 1)), 1, 0.0, 1.0
    lo, hi = alpha.min(), alpha.max()
    if hi - lo > 2 * tiny:  # else no spread along e is left: a plain (PCA) rotation step
        center, scale = (hi + lo) / 2, (hi - lo) / 2
        design = np.empty((n, max(degrees) + 1))
        design[:, 0] = 1
        design[:, 1:] = basis.legendre((alpha - center) / scale, max(degrees))
        cv = CrossValidation.of(design, y, folds) if folds is not None else None
        degree = select_degree(cv, degrees) if cv is not None else degrees[0]
        k = degree + 1
        design = design[:, :k]
        gram = cv.gram[:, :k, :k].sum(axis=0) if cv is not None else design.T @ design
        cross = cv.cross[:, :k].sum(axis=0) if cv is not None else design.T @ y
        w = _least_squares(design, y, gram, cross)
        removed = np.sum(w * (gram @ w))  # ||B W||^2, the residual energy the polynomial explains
        if removed > 1e-12 * np.trace(cov) * n:
            y -= design @ w
            cov = cov - w.T @ (gram / n) @ w
        else:  # numerically no curve (e.g. degree 1 on a PCA direction): an exact rotation step
            w, degree = np.zeros((1, m - 1)), 1
    return Step(e, u, w, degree, center, scale, variance), y, (cov + cov.T) / 2


def pca_solution(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of principal axes (largest variance first, largest entry positive) and their variances."""
    values, vectors = np.linalg.eigh(cov)
    rotation = vectors[:, ::-1].T
    rotation *= np.sign(rotation[np.arange(len(rotation)), np.argmax(np.abs(rotation), axis=1)])[:, None]
    return rotation, np.maximum(values[::-1], 0.0)


def fit_params(
    X: np.ndarray,
    degrees: Sequence[int],
    tails: str = "clamp",
    leading: str | LeadingVector = "pca",
    n_folds: int = 5,
    groups: np.ndarray | None = None,
    rng: np.random.Generator | None = None,
) -> PPAParams:
    """Fit PPA on a finite float sample ``X`` (n x d).

    ``degrees`` are the candidates per step (see :func:`candidate_degrees`);
    with more than one, ``groups`` (one label per row, e.g. the spatial block a
    pixel came from) are held out together in ``n_folds``-fold cross-validation.
    """
    strategy = LEADING_VECTORS[leading] if isinstance(leading, str) else leading
    degrees = candidate_degrees(degrees)
    n, d = X.shape
    rng = np.random.default_rng() if rng is None else rng
    folds, order = Folds.make(groups, n, n_folds, rng) if len(degrees) > 1 else (None, np.arange(n))
    mean = X.mean(axis=0)
    resid = X[order] - mean  # the fit does not depend on the row order; groups are made contiguous
    cov = resid.T @ resid / n
    pca = pca_solution(cov)
    reference = np.trace(cov)
    tiny = 1e-12 * np.sqrt(max(reference, np.finfo(float).tiny))
    frame = np.eye(d)  # E_0 ... E_{p-1}: residual coordinates -> input space
    steps, frames = [], []
    for _ in range(d - 1):
        step, resid, cov = fit_step(resid, cov, frame, strategy, degrees, folds, tiny)
        if np.trace(cov) < 1e-6 * reference:  # updates lost relative precision: recompute
            cov = resid.T @ resid / n
            reference = np.trace(cov)
        steps.append(step)
        frames.append(frame)
        frame = _reflect_columns(frame, step.u)
    return _compose(mean, steps, frames, cov[0, 0], tails, pca)


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
