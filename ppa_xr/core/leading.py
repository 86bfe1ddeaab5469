"""Leading-vector strategies: how each PPA step picks ``e_p`` (paper sections 2.2 and 2.3).

A strategy gets the residual's covariance ``S`` (m x m) and the residual
sample ``X`` (n x m, centred) and returns a unit vector.

* ``"pca"``: the leading eigenvector of ``S`` (the PCA-based solution).
* ``"gd"``: the paper's PPA-GD. The step's error after the polynomial fit is
  ``||X - P_B X||_F^2``, with ``P_B`` the projection on the polynomial basis
  ``B = [1, P_1(t), ..., P_g(t)]`` of ``alpha = X e`` (``t`` an affine map of
  ``alpha``; the span does not depend on which). It does not depend on the
  complement ``E`` (paper, Property 1), so PPA-GD maximises

      f(e) = tr(C^T G^-1 C),   G = B^T B,  C = B^T X,

  on the unit sphere. With ``W = G^-1 C``, the residual ``R = X - B W`` and
  ``v_i = sum_k B'_ik (R W^T)_ik`` (``B'`` the derivative of the basis in
  ``t``, ``t = (alpha - c) / s``): ``grad f = (2 / s) X^T v`` (derived from
  ``df = 2 tr(W^T dB^T R)``; checked against finite differences in the tests).
  Projected gradient ascent with a backtracking step, started from the top
  eigenvectors of ``S``; the best end point is kept only if it beats the
  PCA solution, so a step is never worse than the PCA-based one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import numpy as np
import scipy.linalg

from . import basis

#: eigenvectors of the residual covariance PPA-GD starts from
GD_STARTS = 3
#: most ascent iterations per start
GD_ITERATIONS = 60


def pca_leading_vector(cov: np.ndarray, resid: np.ndarray | None = None) -> np.ndarray:
    """The PCA-based solution: the leading eigenvector of the residual covariance.

    Parameters
    ----------
    cov : np.ndarray
        (m, m) covariance of the residual.
    resid : np.ndarray, optional
        Unused: the PCA direction needs only ``cov``.

    Returns
    -------
    np.ndarray
        (m,) unit vector.
    """
    m = cov.shape[0]
    return scipy.linalg.eigh(cov, subset_by_index=(m - 1, m - 1), check_finite=False)[1][:, 0]


def _legendre_and_slopes(t: np.ndarray, degree: int) -> tuple[np.ndarray, np.ndarray]:
    """``[P_0..P_g](t)`` and their derivatives, (n, g+1) each (:func:`~ppa_xr.core.basis.legendre`)."""
    values, slopes = np.zeros((2, degree + 1, len(t)))
    values[0] = 1
    if degree >= 1:
        basis.legendre(t, degree, values[1:], slopes[1:])
    return values.T, slopes.T


def explained(e: np.ndarray, X: np.ndarray, degree: int) -> tuple[float, np.ndarray]:
    """``f(e) = ||P_B X||_F^2 / n`` (the energy the step's polynomial explains, with ``alpha`` itself) and its gradient."""
    alpha = X @ e
    lo, hi = alpha.min(), alpha.max()
    center, scale = (hi + lo) / 2, max((hi - lo) / 2, np.finfo(float).tiny)
    B, dB = _legendre_and_slopes((alpha - center) / scale, degree)
    C = B.T @ X
    W = np.linalg.lstsq(B.T @ B, C, rcond=None)[0]
    residual = X - B @ W
    v = np.einsum("ik,ik->i", dB, residual @ W.T)
    n = len(X)
    return float(np.sum(C * W)) / n, (2 / (scale * n)) * (X.T @ v)


def _ascend(e: np.ndarray, X: np.ndarray, degree: int) -> tuple[np.ndarray, float]:
    value, grad = explained(e, X, degree)
    step = 1.0 / max(np.linalg.norm(grad), np.finfo(float).tiny)
    for _ in range(GD_ITERATIONS):
        tangent = grad - (grad @ e) * e
        if np.linalg.norm(tangent) < 1e-10 * max(abs(value), 1e-300):
            break
        while step > 1e-12:
            trial = e + step * tangent
            trial /= np.linalg.norm(trial)
            trial_value, trial_grad = explained(trial, X, degree)
            if trial_value > value:
                e, value, grad = trial, trial_value, trial_grad
                step *= 2
                break
            step /= 4
        else:
            break
    return e, value


def gd_leading_vector(cov: np.ndarray, resid: np.ndarray, degree: int = 3) -> np.ndarray:
    """PPA-GD: the unit ``e`` maximising the energy the step's degree-``degree`` polynomial explains.

    Starts from the top ``ppa_xr.core.leading.GD_STARTS`` eigenvectors of ``cov``; returns the
    best end point, or the PCA solution if nothing beats it.

    Parameters
    ----------
    cov : np.ndarray
        (m, m) covariance of the residual.
    resid : np.ndarray
        (n, m) centred residual sample.
    degree : int
        The polynomial degree the search optimises for.

    Returns
    -------
    np.ndarray
        (m,) unit vector, never worse than the PCA one on ``resid``.
    """
    m = cov.shape[0]
    if m == 1:
        return np.ones(1)
    starts = scipy.linalg.eigh(cov, subset_by_index=(max(m - GD_STARTS, 0), m - 1), check_finite=False)[1][:, ::-1]
    best, best_value = starts[:, 0], explained(starts[:, 0], resid, degree)[0]
    for start in starts.T:
        e, value = _ascend(start, resid, degree)
        if value > best_value:
            best, best_value = e, value
    return best


@dataclass(frozen=True)
class Strategy:
    """A leading-vector strategy and what the fit may assume of it.

    ``find(cov, resid) -> unit vector``. ``is_pca``: it is the residual's top
    eigenvector, so a block of straight steps comes from one eigendecomposition
    and Property 2 holds by construction; any other direction is checked by
    the interlacing guard (:func:`ppa_xr.core.steps.interlaced`).
    ``searches``: a search validated against the PCA direction on held-out
    groups (PPA-GD), told the highest candidate degree (``find(cov, resid,
    degree=g)``) and stopped at its first straight step.
    """

    find: Callable[..., np.ndarray]
    is_pca: bool = False
    searches: bool = False

    def for_degree(self, degree: int) -> Strategy:
        """The strategy as the fit calls it: a search is told the polynomial degree it optimises for."""
        return Strategy(partial(self.find, degree=degree), self.is_pca, self.searches) if self.searches else self


PCA = Strategy(pca_leading_vector, is_pca=True)
#: strategies by name (``PPA(leading=...)``); a callable ``(cov, resid) -> unit vector`` is ``Strategy(callable)``
LEADING_VECTORS = {"pca": PCA, "gd": Strategy(gd_leading_vector, searches=True)}
