"""Fit PPA on an in-memory sample (paper section 2.2, PCA-based solution).

On the centred sample, for each step ``p`` on the residual ``X_{p-1}`` (n x m):

1. ``e_p`` = leading vector of the residual covariance ``S_{p-1}`` (pluggable
   strategy, see :data:`LEADING_VECTORS`), ``E_p`` any orthonormal complement
   (the error does not depend on it, paper Property 1; we use a Householder
   reflection, so ``X E_p`` costs O(nm) instead of O(nm^2));
2. ``alpha = X_{p-1} e_p``, ``Y = X_{p-1} E_p``;
3. degree ``g_p``: fixed, or the candidate with the smallest squared error on a
   hold-out part of the sample when ``W`` is fitted on the rest;
4. least squares ``Y ~ [1, P(alpha)] W_p`` on the whole sample, and
   ``X_p = Y - [1, P(alpha)] W_p``.

The covariance is carried forward instead of recomputed, using that the
least-squares residual is orthogonal to the basis:
``S_p = E_p^T S_{p-1} E_p - W_p^T (B^T B / n) W_p``; it is recomputed from the
residual only when its trace has fallen by 1e6 (nearly collinear features),
where the update's rounding would be felt.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.linalg

from . import basis
from .params import PPAParams


def pca_leading_vector(cov: np.ndarray) -> np.ndarray:
    """The PCA-based solution: the leading eigenvector of the residual covariance."""
    m = cov.shape[0]
    return scipy.linalg.eigh(cov, subset_by_index=(m - 1, m - 1), check_finite=False)[1][:, 0]


LeadingVector = Callable[[np.ndarray], np.ndarray]
LEADING_VECTORS: dict[str, LeadingVector] = {"pca": pca_leading_vector}


def min_samples(degrees: Sequence[int]) -> int:
    """Smallest sample that determines every candidate polynomial (both halves when selecting)."""
    top = max(degrees) + 1
    return 2 * top if len(degrees) > 1 else top + 1


def _householder_complement(e: np.ndarray) -> np.ndarray:
    """Unit vector ``u`` such that ``H = I - 2 u u^T`` maps ``e`` to ``-sign(e_0) 1_0``.

    The columns ``1..m-1`` of ``H`` are then an orthonormal complement of ``e``.
    """
    u = e.copy()
    u[0] += np.copysign(1.0, e[0])
    return u / np.linalg.norm(u)


def _solve_gram(gram: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Least squares from normal equations ``G W = C`` (minimum-norm if ``G`` is singular)."""
    try:
        return np.linalg.solve(gram, rhs)
    except np.linalg.LinAlgError:
        return np.linalg.lstsq(gram, rhs, rcond=None)[0]


def _select_degree(design: np.ndarray, y: np.ndarray, n_valid: int, degrees: Sequence[int]) -> tuple[int, np.ndarray, np.ndarray]:
    """Candidate degree with the smallest hold-out squared error (lowest degree on ties).

    ``W`` is fitted on the rows after the first ``n_valid``, which are held out;
    the hold-out error
    ``||Y_v - B_v W||^2 = tr(Y_v^T Y_v) - 2 tr(W^T B_v^T Y_v) + tr(W^T B_v^T B_v W)``
    comes from Gram matrices, so each candidate costs O(g^3 + g^2 m). Returns
    the degree and the whole sample's ``B^T B`` and ``B^T Y``.
    """
    valid, train = design[:n_valid], design[n_valid:]
    g_t, c_t = train.T @ train, train.T @ y[n_valid:]
    g_v, c_v = valid.T @ valid, valid.T @ y[:n_valid]
    y_v = np.einsum("ij,ij->", y[:n_valid], y[:n_valid])
    errors = []
    for g in degrees:
        k = g + 1
        w = _solve_gram(g_t[:k, :k], c_t[:k])
        errors.append(y_v - 2 * np.sum(w * c_v[:k]) + np.sum(w * (g_v[:k, :k] @ w)))
    errors = np.asarray(errors)
    tol = 1e-10 * max(y_v, np.finfo(float).tiny)
    return int(degrees[int(np.flatnonzero(errors <= errors.min() + tol)[0])]), g_t + g_v, c_t + c_v


def _least_squares(design: np.ndarray, y: np.ndarray, gram: np.ndarray, cross: np.ndarray) -> np.ndarray:
    """``W = argmin ||Y - B W||`` from the normal equations ``B^T B W = B^T Y`` while
    ``B^T B`` is well conditioned (cond < 1e6), else by a pivoted QR of ``B``
    (high degrees on skewed projections), so no accuracy is lost."""
    eig = np.linalg.eigvalsh(gram)
    if eig[0] > 1e-6 * eig[-1]:
        return scipy.linalg.cho_solve(scipy.linalg.cho_factor(gram, check_finite=False), cross, check_finite=False)
    return scipy.linalg.lstsq(design, y, cond=1e-10, lapack_driver="gelsy", check_finite=False)[0]


def fit_params(
    X: np.ndarray,
    degrees: Sequence[int],
    tails: str = "clamp",
    leading: str | LeadingVector = "pca",
    holdout_fraction: float = 0.5,
    rng: np.random.Generator | None = None,
) -> PPAParams:
    """Fit PPA on a finite float sample ``X`` (n x d); ``degrees`` are the candidates per step."""
    if tails not in basis.TAILS:
        raise ValueError(f"tails must be one of {basis.TAILS}, got {tails!r}")
    leading_vector = LEADING_VECTORS[leading] if isinstance(leading, str) else leading
    degrees = sorted(set(int(g) for g in degrees))
    n, d = X.shape
    rng = np.random.default_rng() if rng is None else rng
    n_valid = int(round(holdout_fraction * n))  # the fit is invariant to the order of rows,
    mean = X.mean(axis=0)  # so the hold-out rows are moved to the front once
    resid = X[rng.permutation(n)] - mean
    cov = resid.T @ resid / n
    reference = np.trace(cov)
    tiny = 1e-12 * np.sqrt(max(reference, np.finfo(float).tiny))
    frame = np.eye(d)  # E_0 ... E_{p-1}: residual coordinates -> input space
    steps = []  # (e_p, u_p, W_p, frame) per step
    variance = np.zeros(d)
    chosen, centers, scales = np.ones(d - 1, dtype=np.int64), np.zeros(d - 1), np.ones(d - 1)
    for p in range(d - 1):
        e = leading_vector(cov)
        lead = frame @ e
        if lead[np.argmax(np.abs(lead))] < 0:  # sign convention, as sklearn's svd_flip
            e = -e
        variance[p] = e @ cov @ e
        u = _householder_complement(e)
        alpha = resid @ e
        y = _reflect_columns(resid, u)
        cov = _reflect_columns(_reflect_columns(cov, u).T, u)
        w = np.zeros((1, d - p - 1))
        lo, hi = alpha.min(), alpha.max()
        if hi - lo > 2 * tiny:  # else no spread along e is left: a plain (PCA) rotation step
            centers[p], scales[p] = (hi + lo) / 2, (hi - lo) / 2
            design = np.empty((n, max(degrees) + 1))
            design[:, 0] = 1
            design[:, 1:] = basis.legendre((alpha - centers[p]) / scales[p], max(degrees))
            if len(degrees) > 1:
                chosen[p], gram, cross = _select_degree(design, y, n_valid, degrees)
            else:
                chosen[p], gram, cross = degrees[0], design.T @ design, design.T @ y
            k = chosen[p] + 1
            design, gram = design[:, :k], gram[:k, :k]
            w = _least_squares(design, y, gram, cross[:k])
            removed = np.sum(w * (gram @ w))  # ||B W||^2, the residual energy the polynomial explains
            if removed > 1e-12 * np.trace(cov) * n:
                y -= design @ w
                cov = cov - w.T @ (gram / n) @ w
            else:  # numerically no curve (e.g. degree 1 on a PCA direction): an exact rotation step
                chosen[p], w = 1, np.zeros((1, d - p - 1))
        cov = (cov + cov.T) / 2
        if np.trace(cov) < 1e-6 * reference:  # updates lost relative precision: recompute
            cov = y.T @ y / n
            reference = np.trace(cov)
        steps.append((e, u, w, frame))
        frame = _reflect_columns(frame, u)
        resid = y
    variance[-1] = cov[0, 0]
    return _compose(mean, steps, chosen, centers, scales, variance, tails)


def _reflect_columns(M: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``M E`` for the complement ``E = (I - 2 u u^T)[:, 1:]``, in O(size of M)."""
    return (M - np.outer(M @ u, 2 * u))[:, 1:]


def _compose(mean, steps, degrees, centers, scales, variance, tails) -> PPAParams:
    """Compose the per-step rotations and polynomials into the kernels' matrices.

    Backwards over the steps, ``O_{p-1} = [e_p^T; O_p E_p^T]`` maps the residual
    before step ``p`` to the outputs ``r[p:]``; ``A = O_{-1}``.
    """
    d = mean.shape[0]
    gmax = int(degrees.max(initial=1))
    forward, inverse = np.zeros((2, d - 1, gmax, d))
    forward_bias, inverse_bias = np.zeros((2, d))
    outputs = np.ones((1, 1))  # O_{d-2}
    for p in range(d - 2, -1, -1):
        e, u, w, frame = steps[p]
        w = basis.legendre_to_power(len(w) - 1).T @ w  # Legendre -> monomial coefficients
        fw = w @ outputs.T  # W_p O_p^T: (g+1, d-p-1)
        forward_bias[p + 1:] += fw[0]
        forward[p, : len(w) - 1, p + 1:] = fw[1:]
        iw = _reflect_columns(frame, u) @ w.T  # (E_0 ... E_p) W_p^T: (d, g+1)
        inverse_bias += iw[:, 0]
        inverse[p, : len(w) - 1] = iw[:, 1:].T
        reflection = np.eye(d - p) - 2 * np.outer(u, u)
        outputs = np.vstack([e, outputs @ reflection[1:]])
    return PPAParams(
        mean=mean, rotation=outputs, degrees=degrees, center=centers, scale=scales,
        forward_bias=forward_bias, forward=forward, inverse_bias=inverse_bias, inverse=inverse,
        explained_variance=variance, tails=tails,
    )
