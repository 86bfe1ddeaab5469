"""Geometry of PPA's curvilinear features (paper sections 3.4 and 5.1-5.2): the metric, Frenet-Serret frames, curvatures.

Every ``alpha_p = r_p`` enters the inverse map through its own term, so the
inverse is a sum of univariate functions,

    x(r) = mean + sum_p b_p + sum_q ( a_q r_q + h_q(r_q) ),

with ``a_q`` the q-th row of the rotation ``A`` and ``h_q`` the polynomial of
step ``q`` carried to input space (``inverse[q]``; the last coordinate is
linear). The q-th curvilinear feature through a point ``x = x(r)`` is the
curve ``c(s) = x(r + s 1_q)``, and its derivatives are analytic and the same
whatever the other coordinates:

    c'(0) = a_q + h_q'(r_q),     c^(k)(0) = h_q^(k)(r_q)  (k >= 2).

The Frenet-Serret frame is the Gram-Schmidt basis of ``[c', c'', ..., c^(d)]``
(``c' = |c'| e_1``, QR ``= E R`` with ``R_ii >= 0``, the last vector oriented so
the frame has determinant +1), and the generalised curvatures are
``chi_i = R_{i+1,i+1} / (|c'| R_ii)`` (``c^(k)`` has component
``|c'|^k chi_1 ... chi_{k-1}`` along ``e_k``); the last one carries the sign of
the torsion.

Every function takes the fitted parameters and finite or non-finite points
``X`` (n x d, float64); a point with a NaN or inf gives NaN in every output.
"""

from __future__ import annotations

import numpy as np

from . import basis, kernels
from .checks import check_components, integer
from .params import PPAParams


def derivatives(params: PPAParams, X: np.ndarray, component: int = 1, order: int | None = None) -> np.ndarray:
    """``d^k x / d r_q^k`` along the ``component``-th curvilinear feature through each point, k = 1..order -> (n, order, d).

    ``order`` (1..d, the inputs) defaults to the number of components: ``d``,
    what the full Frenet-Serret frame needs, or a reduced model's ``r`` (its
    frame asks for ``d``; the derivatives beyond a step's degree are 0). The
    curves are those of the map in input space and units: a whitening model's
    curves (standardized or noise-whitened units) are carried back to input
    units.
    """
    d = params.n_features
    q = check_components(component, d, "component") - 1
    order = d if order is None else integer(order, "order (1: the tangent c')", 1, params.n_inputs)
    out = np.zeros((len(X), order, d))
    out[:, 0] = params.rotation[q]
    if q < d - 1 and q in params.curved_steps():
        g = int(params.degrees[q])
        t = (kernels.forward(X, params, q + 1)[:, q] - params.center[q]) / params.scale[q]
        for k in range(1, min(order, g) + 1):
            out[:, k - 1] += basis.power_derivatives(t, g, k, params.tails).T @ params.inverse[q, :g] / params.scale[q] ** k
    out[~np.isfinite(params.inputs(X)).all(axis=1)] = np.nan  # a reduced model's dropped inputs (land) are not gaps
    return out @ params.unwhitening().T if params.whitened else out  # x = mean + W^-1 z: curves in input units


def _frame_and_diagonal(params: PPAParams, X: np.ndarray, component: int) -> tuple[np.ndarray, np.ndarray]:
    D = np.transpose(derivatives(params, X, component, params.n_inputs), (0, 2, 1))  # columns c', c'', ... (square)
    valid = np.isfinite(D).all(axis=(1, 2))
    E, diag = np.full(D.shape, np.nan), np.full(D.shape[:2], np.nan)
    E[valid], R = np.linalg.qr(D[valid])
    signs = np.where(np.diagonal(R, axis1=1, axis2=2) < 0, -1.0, 1.0)
    E[valid] *= signs[:, None, :]
    diag[valid] = np.abs(np.diagonal(R, axis1=1, axis2=2))
    flip = np.zeros(len(D), bool)
    flip[valid] = np.linalg.det(E[valid]) < 0  # orient the frame: the last vector (and curvature) take the sign
    E[flip, :, -1] *= -1
    diag[flip, -1] *= -1
    return E, diag


def frenet_frame(params: PPAParams, X: np.ndarray, component: int = 1) -> np.ndarray:
    """Frenet-Serret frame of the ``component``-th curvilinear feature at each point -> (n, d, d), rows
    tangent, normal, binormal, ... (orthonormal, determinant +1). Where the curve spans fewer than ``d``
    dimensions (a polynomial of degree ``g`` has ``c^(k) = 0`` for ``k > g``), the remaining rows complete
    the frame to an orthonormal basis."""
    return np.transpose(_frame_and_diagonal(params, X, component)[0], (0, 2, 1))


def curvatures(params: PPAParams, X: np.ndarray, component: int = 1) -> np.ndarray:
    """Generalised curvatures ``chi_1`` to ``chi_{d-1}`` of the ``component``-th curvilinear feature -> (n, d-1);
    ``chi_1`` is the curvature, ``chi_2`` (in 3-d) the torsion; those beyond the span of the curve are 0."""
    _, diag = _frame_and_diagonal(params, X, component)
    speed = diag[:, :1]
    scale = np.finfo(float).eps ** 0.5 * speed
    with np.errstate(divide="ignore", invalid="ignore"):
        chi = diag[:, 1:] / (speed * diag[:, :-1])
        beyond = np.abs(diag[:, :-1]) <= scale  # beyond the span of the curve: no curvature
    return np.where(beyond, 0.0, chi)


def metric(params: PPAParams, X: np.ndarray) -> np.ndarray:
    """The PPA metric ``M(x) = J(x)^T Lambda^-1 J(x)`` at each point -> (n, d, d) (paper section 3.4): ``J = dr/dx``
    the analytic Jacobian and ``Lambda`` the variances of the components on the fitting sample, the generalised
    Mahalanobis metric in which a displacement along a curvilinear feature counts in units of its spread."""
    J = kernels.jacobian(X, params)
    variance = np.maximum(params.explained_variance, np.finfo(float).tiny)
    return np.einsum("nki,k,nkj->nij", J, 1 / variance, J)


def principal_grid(params: PPAParams, n_components: int = 1, points: int = 25, spread: float = 2.0) -> np.ndarray:
    """The principal curve (1), surface (2) or volume (3) in input space -> (points,) * k + (d,): a uniform
    grid over the first ``k`` components, each from ``-spread`` to ``+spread`` standard deviations of the
    fitting sample, the other components at their mean (0), mapped back by the truncated inverse."""
    k = check_components(n_components, min(3, params.n_features), "n_components (1, 2 or 3: a curve, a surface or a volume)")
    points = integer(points, "points (grid points per component)", 2)
    axes = [np.linspace(-spread, spread, points) * np.sqrt(params.explained_variance[q]) for q in range(k)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, k)
    return kernels.inverse(grid, params).reshape((points,) * k + (params.n_inputs,))
