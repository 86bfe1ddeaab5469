"""The linear algebra the fit and the measures share, each rule written once: the sign of a vector, the
power-of-two rescaling, Householder reflections, products that overwrite their input, least squares,
the eigenbasis of a covariance."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import scipy.linalg


#: rows a product that overwrites its input takes at a time (:func:`rotate_rows`): its only temporary
PANEL = 2048
#: values (1 MiB of float64) that :func:`spread_about` subtracts at a time, while they are in cache
SPREAD_PANEL = 2**17
#: the least variance a direction keeps, as a share of the largest (:func:`floored`)
FLAT_VARIANCE = 1e-14


def orientation(vectors: np.ndarray) -> np.ndarray:
    """The sign of each column's largest entry (in magnitude), (k,)."""
    return np.sign(vectors[np.argmax(np.abs(vectors), axis=0), np.arange(vectors.shape[1])])


def oriented(vectors: np.ndarray) -> np.ndarray:
    """Columns of ``vectors`` with their largest entry (in magnitude) positive: the one sign rule of every
    leading vector and principal axis, as scikit-learn's ``svd_flip``."""
    return vectors * orientation(vectors)


def weight_share(weights: np.ndarray | None, n: int) -> float:
    """Kish's ``s = sum w_i^2 / (sum w_i)^2`` of ``n`` rows' ``weights`` (``1 / n`` without): the variance of their
    weighted mean per unit variance of the values, ``1 / s`` their effective size."""
    return 1.0 / n if weights is None else float(np.sum(np.square(weights)) / np.sum(weights) ** 2)


def mean_error(values: np.ndarray, weights: np.ndarray | None = None) -> float:
    """The standard error of the (weighted) mean of ``values``: ``std / sqrt(n - 1)`` without ``weights``, else
    ``sqrt(sum w_i^2 (v_i - vbar)^2 / (1 - s))`` with ``w`` the ``weights`` scaled to ``sum w_i = 1`` and ``s`` their
    :func:`weight_share` (the same for equal weights)."""
    if weights is None:
        return float(np.std(values) / np.sqrt(max(len(values) - 1, 1)))
    w = weights / np.sum(weights)
    share = weight_share(weights, len(values))
    return float(np.sqrt(np.sum(np.square(w * (values - w @ values))) / max(1.0 - share, share)))


def floored(variance: np.ndarray | float, largest: float) -> np.ndarray:
    """``max(Lambda, FLAT_VARIANCE * largest)``: an exactly flat direction (a constant feature's, whose variance comes
    back as rounding) keeps a variance that can be divided by, so precisions and log densities stay finite."""
    return np.maximum(variance, FLAT_VARIANCE * largest)


def power_of_two(spread: np.ndarray | float) -> np.ndarray:
    """``2^round(log2 spread)`` (1 where the spread is 0 or not finite): dividing by it is exact and puts
    values of any size (1e-200, 1e200) near 1, so squares and sums neither underflow nor overflow."""
    spread = np.asarray(spread, dtype=np.float64)
    usable = (spread > 0) & np.isfinite(spread)
    return np.where(usable, 2.0 ** np.round(np.log2(np.where(usable, spread, 1.0))), 1.0)


def spread_about(X: np.ndarray, mean: np.ndarray, out: np.ndarray | None = None) -> float:
    """``max |X - mean|`` over the rows ``X`` (n x d) less ``mean`` (d,), in the type of ``X - mean``; with ``out``
    (n x d float64), the differences are kept there. A panel of :data:`SPREAD_PANEL` values at a time, whose extremes
    are read while it is in cache: numpy's maximum along the rows of a row-major array (``X.max(axis=0)``) costs
    about 5x a pass. Rounding is monotone, so the largest difference is that of each feature's extreme."""
    rows = max(1, SPREAD_PANEL // max(X.shape[1], 1))
    scratch = np.empty((min(rows, len(X)), X.shape[1]), np.result_type(X, mean)) if out is None else out
    high = low = 0.0
    for lo in range(0, len(X), rows):
        part = scratch[: len(X[lo:lo + rows])] if out is None else scratch[lo:lo + rows]
        np.subtract(X[lo:lo + rows], mean, out=part)
        high, low = max(high, float(part.max())), min(low, float(part.min()))
    return max(high, -low)


def unit_mean(weights: np.ndarray) -> np.ndarray:
    """Non-negative weights (not all 0) scaled to mean 1, by their largest first so the sum cannot overflow:
    sums weighted by them stay in range and do not depend on the weights' scale."""
    scaled = weights / weights.max()
    scaled /= scaled.mean()
    return scaled


def householder_complement(e: np.ndarray) -> np.ndarray:
    """Unit vector ``u`` such that ``H = I - 2 u u^T`` maps ``e`` to ``-sign(e_0) 1_0``.

    The columns ``1..m-1`` of ``H`` are then an orthonormal complement of ``e``.
    """
    u = e.copy()
    u[0] += np.copysign(1.0, e[0])
    return u / np.linalg.norm(u)


def reflect(M: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``M H`` for the reflection ``H = I - 2 u u^T`` (a new array), in O(size of M)."""
    return M - np.outer(M @ u, 2 * u)


def rotate_rows(Y: np.ndarray, Q: np.ndarray) -> None:
    """``Y <- Y Q`` in place for a square ``Q``, :data:`PANEL` rows at a time: no second copy of ``Y``."""
    for lo in range(0, len(Y), PANEL):
        Y[lo:lo + PANEL] = Y[lo:lo + PANEL] @ Q


def inverse_grams(grams: np.ndarray) -> np.ndarray:
    """``G_i^-1`` of stacked Gram matrices, the minimum-norm pseudo-inverse (least squares on ``I``) where
    ``G_i`` is singular, so ``G_i^-1 C_i`` is the least-squares ``W_i`` of ``G_i W_i = C_i``."""
    try:
        return np.linalg.inv(grams)
    except np.linalg.LinAlgError:
        eye = np.eye(grams.shape[-1])
        return np.stack([np.linalg.lstsq(g, eye, rcond=None)[0] for g in grams])


def least_squares(design: np.ndarray, y: Callable[[], np.ndarray], gram: np.ndarray, cross: np.ndarray) -> np.ndarray:
    """``W = argmin ||Y - B W||`` from the normal equations ``B^T B W = B^T Y`` while
    ``B^T B`` is well conditioned (cond < 1e6), else by a pivoted QR of ``B`` on
    ``Y = y()`` (high degrees on skewed projections), so no accuracy is lost: LAPACK's
    ``gelsy`` (minimum norm at rank ``1e-10``), called on ``y()`` in place (a new
    Fortran-ordered array: scipy's ``lstsq`` would copy it)."""
    eig = np.linalg.eigvalsh(gram)
    if eig[0] > 1e-6 * eig[-1]:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram, check_finite=False), cross, check_finite=False)
    Y = y()
    (n, k), rhs = design.shape, Y.shape[1]
    gelsy, gelsy_lwork = scipy.linalg.get_lapack_funcs(("gelsy", "gelsy_lwork"), (design, Y))
    lwork = int(gelsy_lwork(n, k, rhs, 1e-10)[0])
    solution, info = gelsy(design, Y, np.zeros((k, 1), dtype=np.int32), 1e-10, lwork, overwrite_b=True)[1::3]
    if info:
        raise np.linalg.LinAlgError(f"gelsy failed (info {info})")
    return solution[:k]


def eigenbasis(cov: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues of a symmetric ``cov``, largest first, and its eigenvectors as columns in that order
    (unoriented): ``cov = V diag(lambda) V^T`` (numpy's ``eigh``: LAPACK's divide and conquer, ``syevd``)."""
    values, vectors = np.linalg.eigh(cov)
    return values[::-1], vectors[:, ::-1]
