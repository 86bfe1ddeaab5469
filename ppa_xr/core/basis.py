"""Polynomial basis of one PPA step, on the scaled projection ``t = (alpha - c) / s``.

``c`` and ``s`` map the projections of the fitting sample onto ``[-1, 1]``.

* Fitting uses Legendre polynomials ``P_k(t)``: the same span as the paper's
  Vandermonde row ``[1, alpha, ..., alpha^g]``, but a well-conditioned least
  squares problem for degrees of 15 and more.
* Kernels use monomials ``t^j`` (coefficients converted once with
  :func:`legendre_to_power`): ``g - 1`` multiplications per pixel instead of the
  three-term recurrence. On ``[-1, 1]`` every ``|t^j| <= 1``.

Tails, for ``|t| > 1`` (projections beyond the range seen in fit), applied to
every basis function (so to any combination of them):

* ``"clamp"``:      ``f(clip(t))``, the conditional mean stays at its edge value;
* ``"linear"``:     ``f(t_b) + f'(t_b) (t - t_b)``, ``t_b = clip(t)``: the tangent;
* ``"polynomial"``: ``f(t)``, the raw polynomial as in the paper.

Any function of alpha keeps each PPA step a shear, so every choice keeps the
map exactly invertible with unit Jacobian determinant.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from numpy.polynomial import legendre as npleg

TAILS = ("clamp", "linear", "polynomial")


def legendre(t: np.ndarray, degree: int, out: np.ndarray, slopes: np.ndarray | None = None) -> np.ndarray:
    """Write ``P_1..P_g`` at ``t`` (n,) into ``out`` (g, n), by ``(k+1) P_{k+1} = (2k+1) t P_k - k P_{k-1}``: the
    one Legendre recurrence (the fit's design matrices and PPA-GD's search).

    Parameters
    ----------
    t : np.ndarray
        (n,) points, in [-1, 1] inside the fitted range.
    degree : int
        Highest degree.
    out : np.ndarray
        (degree, n) buffer written in place.
    slopes : np.ndarray, optional
        (degree, n) buffer for the derivatives ``P'_1..P'_g``, by ``P'_{k+1} = P'_{k-1} + (2k+1) P_k``.

    Returns
    -------
    np.ndarray
        ``out``: ``P_1(t) .. P_degree(t)``.
    """
    out[0] = t
    if degree > 1:
        np.multiply(t, t, out=out[1])
        out[1] *= 1.5
        out[1] -= 0.5
    for k in range(2, degree):
        np.multiply(t, out[k - 1], out=out[k])
        out[k] *= (2 * k + 1) / (k + 1)
        out[k] -= (k / (k + 1)) * out[k - 2]
    if slopes is not None:
        slopes[0] = 1.0
        for k in range(1, degree):  # P'_{k+1} = P'_{k-1} + (2k+1) P_k, with P'_0 = 0
            np.multiply(out[k - 1], 2 * k + 1, out=slopes[k])
            if k > 1:
                slopes[k] += slopes[k - 2]
    return out


def legendre_with_tails(t: np.ndarray, degree: int, tails: str, out: np.ndarray) -> np.ndarray:
    """:func:`legendre` with the given tails beyond ``[-1, 1]``, the map the kernels apply; ``t`` may be clipped
    in place. ``"linear"`` adds the edge tangent, ``P_k'(+-1) = (+-1)^(k+1) k (k+1) / 2``."""
    if tails == "polynomial":
        return legendre(t, degree, out)
    beyond = t - np.clip(t, -1, 1) if tails == "linear" else None
    legendre(np.clip(t, -1, 1, out=t), degree, out)
    if beyond is not None:
        for k in range(1, degree + 1):
            out[k - 1] += (k * (k + 1) / 2) * np.where(beyond > 0, 1.0, (-1.0) ** (k + 1)) * beyond
    return out


def fences(alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The range a robust step's polynomial is fitted on, of each row of ``alpha`` (..., n): ``[min, max]``
    clipped to Tukey's far-out fences ``[Q1 - 3 IQR, Q3 + 3 IQR]``. Most projections lie inside them; the few
    extreme ones of heavy tails and anomalous pixels fall beyond, where the tails apply, so they cannot lever
    the polynomial that describes everything else."""
    q1, q3 = np.quantile(alpha, (0.25, 0.75), axis=-1)
    return np.maximum(alpha.min(axis=-1), q1 - FENCE * (q3 - q1)), np.minimum(alpha.max(axis=-1), q3 + FENCE * (q3 - q1))


#: Tukey's far-out fence, in interquartile ranges
FENCE = 3.0


@lru_cache(maxsize=None)
def legendre_to_power(degree: int) -> np.ndarray:
    """``M`` with ``P_k(t) = sum_j M[k, j] t^j`` for ``k, j = 0..g``."""
    M = np.zeros((degree + 1, degree + 1))
    for k in range(degree + 1):
        M[k, : k + 1] = npleg.leg2poly(np.eye(degree + 1)[k])[: k + 1]
    M.setflags(write=False)
    return M


def powers(t: np.ndarray, degree: int, tails: str, out: np.ndarray) -> np.ndarray:
    """Write ``t^1..t^g`` with the given tails into ``out`` (g, n); ``t`` (n,) is left as it is.

    Parameters
    ----------
    t : np.ndarray
        (n,) scaled projections.
    degree : int
        Highest power.
    tails : {"clamp", "linear", "polynomial"}
        The behaviour beyond [-1, 1].
    out : np.ndarray
        (degree, n) buffer written in place.

    Returns
    -------
    np.ndarray
        ``out``: ``t^1 .. t^degree`` with the tails applied.
    """
    base = out[0]
    if tails == "polynomial":
        base[...] = t
    else:
        np.clip(t, -1, 1, out=base)
    for j in range(1, degree):
        np.multiply(out[j - 1], base, out=out[j])
    if tails == "linear":  # t_b^j + j t_b^(j-1) (t - t_b), highest power first, on the few pixels beyond the range
        beyond = np.flatnonzero(t != base)  # NaN too: it stays NaN
        if beyond.size:
            excess = t[beyond] - base[beyond]
            for j in range(degree - 1, 0, -1):
                out[j, beyond] += (j + 1) * out[j - 1, beyond] * excess
            out[0, beyond] += excess
    return out


def power_derivatives(t: np.ndarray, degree: int, order: int, tails: str) -> np.ndarray:
    """``d^order/dt^order`` of :func:`powers` -> (g, n): ``j!/(j-k)! t^(j-k)`` inside the range; beyond it
    ``"clamp"`` is constant (0), ``"linear"`` keeps the edge slope and has no higher derivatives."""
    base = t if tails == "polynomial" else np.clip(t, -1, 1)
    out = np.zeros((degree,) + t.shape, dtype=t.dtype)
    for j in range(order, degree + 1):
        out[j - 1] = np.prod(np.arange(j - order + 1, j + 1)) * base ** (j - order)
    if tails == "clamp" or (tails == "linear" and order > 1):
        out[:, np.abs(t) > 1] = 0
    return out
