"""Polynomial basis of one PPA step: Legendre polynomials of a scaled projection.

Each step regresses the orthogonal residual on ``v(alpha)``. Instead of the
paper's Vandermonde row ``[1, alpha, ..., alpha^g]`` we use Legendre
polynomials ``P_k(t)`` of the scaled variable

    t = (alpha - center) / scale,   t in [-1, 1] on the fitting sample,

which span the same functions but keep the least-squares problem well
conditioned for degrees of 15 and more. The constant ``P_0 = 1`` is left out
here: kernels fold it into a bias, so ``features`` returns ``P_1..P_g``.

Tails (``|t| > 1``, projections beyond the range seen in fit):

* ``"clamp"``:      ``P_k(clip(t))``, the conditional mean stays at its edge value;
* ``"linear"``:     ``P_k(t_b) + P_k'(t_b) (t - t_b)``, continues along the tangent;
* ``"polynomial"``: ``P_k(t)``, the raw polynomial as in the paper.

Any function of alpha keeps each PPA step a shear, so every choice keeps the
map exactly invertible with unit Jacobian determinant.
"""

from __future__ import annotations

import numpy as np

TAILS = ("clamp", "linear", "polynomial")


def _legendre(t: np.ndarray, degree: int, derivative: bool) -> tuple[np.ndarray, np.ndarray | None]:
    """``P_1..P_g`` (and ``dP_k/dt``) at ``t`` by the three-term recurrences

    ``(k+1) P_{k+1} = (2k+1) t P_k - k P_{k-1}`` and ``P'_{k+1} = P'_{k-1} + (2k+1) P_k``.
    """
    values = np.empty(t.shape + (degree,), dtype=t.dtype)
    slopes = np.empty_like(values) if derivative else None
    prev, cur = np.ones_like(t), t
    dprev, dcur = np.zeros_like(t), np.ones_like(t)
    for k in range(1, degree + 1):
        values[..., k - 1] = cur
        if derivative:
            slopes[..., k - 1] = dcur
        if k < degree:
            nxt = ((2 * k + 1) * t * cur - k * prev) / (k + 1)
            if derivative:
                dprev, dcur = dcur, dprev + (2 * k + 1) * cur
            prev, cur = cur, nxt
    return values, slopes


def features(alpha: np.ndarray, degree: int, center: float, scale: float, tails: str) -> np.ndarray:
    """Basis functions ``P_1..P_g`` of the scaled ``alpha``; shape ``alpha.shape + (g,)``."""
    t = (alpha - alpha.dtype.type(center)) / alpha.dtype.type(scale)
    if tails == "polynomial":
        return _legendre(t, degree, False)[0]
    edge = np.clip(t, -1, 1)
    if tails == "clamp":
        return _legendre(edge, degree, False)[0]
    values, slopes = _legendre(edge, degree, True)
    values += slopes * (t - edge)[..., None]
    return values


def derivatives(alpha: np.ndarray, degree: int, center: float, scale: float, tails: str) -> np.ndarray:
    """``d/dalpha`` of :func:`features` (chain rule gives the factor ``1 / scale``)."""
    t = (alpha - alpha.dtype.type(center)) / alpha.dtype.type(scale)
    if tails == "polynomial":
        slopes = _legendre(t, degree, True)[1]
    else:
        slopes = _legendre(np.clip(t, -1, 1), degree, True)[1]
        if tails == "clamp":
            slopes *= (np.abs(t) <= 1)[..., None]
    return slopes / alpha.dtype.type(scale)
