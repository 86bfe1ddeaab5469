"""Geometry of PPA's curvilinear features (paper sections 3.4 and 5.1-5.2), for a fitted model.

The maths is in :mod:`ppa_xr.core.geometry`, on the fitted parameters; these
functions take a fitted :class:`~ppa_xr.PPA` and its input as scikit-learn
takes it. The q-th curvilinear feature through a point ``x = x(r)`` is the
curve ``c(s) = x(r + s 1_q)``; its derivatives are analytic, so are its
Frenet-Serret frame and its generalised curvatures, and the PPA metric
``M(x) = J^T Lambda^-1 J`` comes from the analytic Jacobian.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .core import geometry
from .core.docstrings import shared
from .view import plot_principal_curves

if TYPE_CHECKING:
    from .model import PPA

__all__ = ["curvatures", "derivatives", "frenet_frame", "metric", "plot_principal_curves", "principal_grid"]


def _points(model: PPA, X: Any) -> np.ndarray:
    return model._check_input(X).astype(np.float64)


@shared
def derivatives(model: PPA, X: Any, component: int = 1, order: int | None = None) -> np.ndarray:
    """``d^k x / d r_q^k`` along the ``component``-th curvilinear feature through each point, k = 1..order.

    The curves are those of the map in input space and units: ``whiten`` (a
    scaling of the outputs) does not change them, and a whitening model's
    curves (standardized or noise-whitened units) are carried back to input units.

    Parameters
    ----------
    {{model_x}}
    {{component}}
    order : int, optional
        Derivatives 1..order, at most d (default: the components, d, what the full Frenet-Serret frame needs; r reduced).

    Returns
    -------
    np.ndarray
        (n, order, d), in input units; NaN for a point with a NaN or inf.
    """
    return geometry.derivatives(model.params_, _points(model, X), component, order)


@shared
def frenet_frame(model: PPA, X: Any, component: int = 1) -> np.ndarray:
    """Frenet-Serret frame of the ``component``-th curvilinear feature at each point.

    Rows are tangent, normal, binormal, ... (orthonormal, determinant +1).
    Where the curve spans fewer than ``d`` dimensions (a polynomial of degree
    ``g`` has ``c^(k) = 0`` for ``k > g``), the remaining rows complete the
    frame to an orthonormal basis.

    Parameters
    ----------
    {{model_x}}
    {{component}}

    Returns
    -------
    np.ndarray
        (n, d, d) orthonormal frames, rows tangent, normal, binormal, ...; NaN for an invalid point.
    """
    return geometry.frenet_frame(model.params_, _points(model, X), component)


@shared
def curvatures(model: PPA, X: Any, component: int = 1) -> np.ndarray:
    """Generalised curvatures ``chi_1`` to ``chi_{d-1}`` of the ``component``-th curvilinear feature.

    ``chi_1`` is the curvature, ``chi_2`` (in 3-d) the torsion; those beyond
    the span of the curve are 0.

    Parameters
    ----------
    {{model_x}}
    {{component}}

    Returns
    -------
    np.ndarray
        (n, d-1) generalised curvatures (the last carries the sign of the torsion); NaN for an invalid point.
    """
    return geometry.curvatures(model.params_, _points(model, X), component)


@shared
def metric(model: PPA, X: Any) -> np.ndarray:
    """The PPA metric ``M(x) = J(x)^T Lambda^-1 J(x)`` at each point (paper section 3.4).

    ``J = dr/dx`` is the analytic Jacobian and ``Lambda`` the variances of the
    components on the fitting sample: the generalised Mahalanobis metric, in
    which a displacement along a curvilinear feature counts in units of that
    feature's spread. ``PPA(whiten=True)`` gives features whose Euclidean
    distances are this metric to first order (for k-NN in a Pipeline).

    Parameters
    ----------
    {{model_x}}

    Returns
    -------
    np.ndarray
        (n, d, d) symmetric positive definite matrices (of rank r for a reduced model); NaN for invalid points.
    """
    return geometry.metric(model.params_, _points(model, X))


def principal_grid(model: PPA, n_components: int = 1, points: int = 25, spread: float = 2.0) -> np.ndarray:
    """The principal curve (1), surface (2) or volume (3) in input space.

    A uniform grid over the first ``k`` components, each from ``-spread`` to
    ``+spread`` standard deviations of the fitting sample, with the other
    components at their mean (0), mapped back by the truncated inverse
    (:doc:`/method`): the curve, surface or volume PPA's first features trace
    through the data.

    Parameters
    ----------
    model : PPA
        A fitted model.
    n_components : {1, 2, 3}
        A curve, a surface or a volume.
    points : int
        Grid points per component (at least 2).
    spread : float
        Half-width of the grid in standard deviations.

    Returns
    -------
    np.ndarray
        ``(points,) * n_components + (d,)`` points in input space.
    """
    from .model._sklearn import check_is_fitted

    check_is_fitted(model)
    return geometry.principal_grid(model.params_, n_components, points, spread)
