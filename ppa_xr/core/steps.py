"""One PPA step on the residual of the fit so far (paper section 2.2, PCA-based solution).

At step ``p`` the residual ``X_{p-1}`` (n x m) is projected on the leading vector ``e_p``,
``alpha = X_{p-1} e_p``, and on an orthonormal complement ``E_p`` (a Householder
reflection, so ``X E_p`` costs O(nm) instead of O(nm^2); the error does not depend on
which complement, paper Property 1). The chosen polynomial ``Y ~ [1, P(alpha)] W_p`` is
fitted by least squares on the whole sample, and ``X_p = Y - [1, P(alpha)] W_p``.

The covariance is carried forward instead of recomputed, using that the
least-squares residual is orthogonal to the basis:
``S_p = E_p^T S_{p-1} E_p - W_p^T (B^T B / n) W_p``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from . import basis, blas
from .degrees import Choice
from .leading import Strategy
from .linalg import householder_complement, least_squares, reflect_columns

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


def leading_vector(strategy: Strategy, cov: np.ndarray, resid: np.ndarray) -> np.ndarray:
    """The strategy's unit vector for the residual, checked: a callable given by the user may return anything."""
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
        ``ppa_xr.core.basis.fences``, except for raw polynomial tails) onto ``[-1, 1]``; beyond it the design has the
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
    u = householder_complement(e)
    frame = reflect_columns(res.frame, u)  # E_0 ... E_p
    cov = reflect_columns(reflect_columns(res.cov, u).T, u)
    m = frame.shape[1]
    w, degree, center, scale = np.zeros((1, m)), 1, 0.0, 1.0
    choice = choose(frame, cov)
    if choice is not None and (choice.degree > 1 or fit_linear):
        designs, centers, scales = designs_of((res.Z @ lead)[None], choice.degree)
        if scales[0] > 0:
            design = designs[0]
            gram_all, cross_all = design @ design.T, design @ res.Z
            fitted = least_squares(design.T, lambda: res.Z @ choice.axes, gram_all, cross_all @ choice.axes) @ (choice.axes.T @ frame)
            if choice.others.shape[1] and (choice.low > 1 or fit_linear):
                k = choice.low + 1
                low = least_squares(design[:k].T, lambda: res.Z @ choice.others, gram_all[:k, :k], cross_all[:k] @ choice.others)
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
