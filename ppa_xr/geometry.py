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
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from ._docs import shared
from .core import basis, kernels
from .model import PPA


@shared
def _check_component(model: PPA, component: int) -> int:
    d = model.n_features_in_
    if isinstance(component, bool) or not isinstance(component, (int, np.integer)) or not 1 <= component <= d:
        raise ValueError(f"component must be an integer in [1, {d}] (1 is the first curvilinear feature), got {component!r}")
    return int(component) - 1


@shared
def derivatives(model: PPA, X, component: int = 1, order: int | None = None) -> np.ndarray:
    """``d^k x / d r_q^k`` along the ``component``-th curvilinear feature through each point, k = 1..order -> (n, order, d).

    ``order`` (1..d) defaults to ``d``, what the full Frenet-Serret frame needs.
    The curves are those of the map in input space and units: ``whiten`` (a
    scaling of the outputs) does not change them, and a whitening model's
    curves (standardized or noise-whitened units) are carried back to input units.

    Parameters
    ----------
    {{model_x}}
    {{component}}
    order : int, optional
        Derivatives 1..order (default d).

    Returns
    -------
    np.ndarray
        (n, order, d), in input units.
    """
    check_is_fitted(model)
    q = _check_component(model, component)
    X = model.check_input(X).astype(np.float64)
    params = model.params_
    d = params.n_features
    if order is not None and (isinstance(order, bool) or not isinstance(order, (int, np.integer)) or not 1 <= order <= d):
        raise ValueError(f"order must be an integer in [1, {d}] (1: the tangent c'), got {order!r}")
    order = d if order is None else int(order)
    out = np.zeros((len(X), order, d))
    out[:, 0] = params.rotation[q]
    if q < d - 1 and q in params.curved_steps():
        g = int(params.degrees[q])
        t = (kernels.forward(X, params, q + 1)[:, q] - params.center[q]) / params.scale[q]  # r_q, whatever whiten says
        for k in range(1, min(order, g) + 1):
            out[:, k - 1] += basis.power_derivatives(t, g, k, params.tails).T @ params.inverse[q, :g] / params.scale[q] ** k
    return out @ params.unwhitening().T if params.whitened else out  # x = mean + W^-1 z: curves in input units


@shared
def _frame_and_diagonal(model: PPA, X, component: int) -> tuple[np.ndarray, np.ndarray]:
    D = np.transpose(derivatives(model, X, component), (0, 2, 1))  # columns c', c'', ...
    E, R = np.linalg.qr(D)
    signs = np.where(np.diagonal(R, axis1=1, axis2=2) < 0, -1.0, 1.0)
    E, diag = E * signs[:, None, :], np.abs(np.diagonal(R, axis1=1, axis2=2))
    flip = np.linalg.det(E) < 0  # orient the frame: the last vector (and curvature) take the sign
    E[flip, :, -1] *= -1
    diag = diag.copy()
    diag[flip, -1] *= -1
    return E, diag


@shared
def frenet_frame(model: PPA, X, component: int = 1) -> np.ndarray:
    """Frenet-Serret frame of the ``component``-th curvilinear feature at each point -> (n, d, d).

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
        (n, d, d) orthonormal frames, rows tangent, normal, binormal, ...
    """
    return np.transpose(_frame_and_diagonal(model, X, component)[0], (0, 2, 1))


@shared
def curvatures(model: PPA, X, component: int = 1) -> np.ndarray:
    """Generalised curvatures ``chi_1`` to ``chi_{d-1}`` of the ``component``-th curvilinear feature -> (n, d-1).

    ``chi_1`` is the curvature, ``chi_2`` (in 3-d) the torsion; those beyond
    the span of the curve are 0.

    Parameters
    ----------
    {{model_x}}
    {{component}}

    Returns
    -------
    np.ndarray
        (n, d-1) generalised curvatures (the last carries the sign of the torsion).
    """
    _, diag = _frame_and_diagonal(model, X, component)
    speed = diag[:, :1]
    scale = np.finfo(float).eps ** 0.5 * speed
    with np.errstate(divide="ignore", invalid="ignore"):
        chi = diag[:, 1:] / (speed * diag[:, :-1])
    return np.where(np.abs(diag[:, :-1]) > scale, chi, 0.0)


@shared
def metric(model: PPA, X) -> np.ndarray:
    """The PPA metric ``M(x) = J(x)^T Lambda^-1 J(x)`` at each point -> (n, d, d) (paper section 3.4).

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
        (n, d, d) symmetric positive definite matrices; NaN for invalid points.
    """
    J = model.jacobian(X)
    variance = np.maximum(model.explained_variance_, np.finfo(float).tiny)
    return np.einsum("nki,k,nkj->nij", J, 1 / variance, J)


def principal_grid(model: PPA, n_components: int = 1, points: int = 25, spread: float = 2.0) -> np.ndarray:
    """The principal curve (1), surface (2) or volume (3) in input space -> (points,) * k + (d,).

    A uniform grid over the first ``k`` components, each from ``-spread`` to
    ``+spread`` standard deviations of the fitting sample, with the other
    components at their mean (0), mapped back by the truncated inverse
    (docs/method.md): the curve, surface or volume PPA's first features trace
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
    check_is_fitted(model)
    k = int(n_components)
    if not 1 <= k <= min(3, model.n_features_in_):
        raise ValueError(f"n_components must be 1, 2 or 3 (at most d), got {n_components!r}")
    if isinstance(points, bool) or not isinstance(points, (int, np.integer)) or points < 2:
        raise ValueError(f"points must be an integer of at least 2 (grid points per component), got {points!r}")
    axes = [np.linspace(-spread, spread, points) * np.sqrt(model.explained_variance_[q]) for q in range(k)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, k)
    values = kernels.inverse(grid, model.params_)  # in the map's own output units, whatever whiten says
    return values.reshape((points,) * k + (model.n_features_in_,))


def plot_principal_curves(model: PPA, X, pairs=((0, 1),), labels=None, max_points: int = 5000, **figure_kwargs):
    """Scatter of the data over chosen pairs of input dimensions, with PPA's first curve and its 2-D grid.

    ``X``: the data (a table, or sampled pixels, e.g. ``cube.ppa.sample()``);
    ``pairs``: (i, j) input dimensions per panel; ``labels``: names of the
    input dimensions. Needs matplotlib (``ppa_xr[plot]``); returns the figure.

    Parameters
    ----------
    model : PPA
        A fitted model.
    X : array-like of shape (n, d)
        The data to draw behind the curves.
    pairs : sequence of (int, int)
        Feature pairs, one panel each.
    labels : sequence of str, optional
        Feature names for the axes.
    max_points : int
        At most this many points drawn.
    **figure_kwargs
        Passed to the figure.

    Returns
    -------
    matplotlib.figure.Figure
        The panels.
    """
    import matplotlib.pyplot as plt

    X = np.asarray(X, dtype=np.float64)
    labels = list(labels) if labels is not None else [f"feature {i}" for i in range(X.shape[1])]
    shown = X[np.random.default_rng(0).permutation(len(X))[:max_points]]
    curve = principal_grid(model, 1, points=200)
    surface = principal_grid(model, 2, points=11) if model.n_features_in_ > 2 else None
    fig, axes = plt.subplots(1, len(pairs), figsize=figure_kwargs.pop("figsize", (5 * len(pairs), 4.5)), squeeze=False, **figure_kwargs)
    for ax, (i, j) in zip(axes[0], pairs):
        ax.scatter(shown[:, i], shown[:, j], s=2, alpha=0.3, color="0.5", label="data")
        if surface is not None:
            for line in (*surface, *np.swapaxes(surface, 0, 1)):
                ax.plot(line[:, i], line[:, j], color="tab:blue", lw=0.6, alpha=0.7)
        ax.plot(curve[:, i], curve[:, j], color="tab:red", lw=2, label="first curvilinear feature")
        ax.set_xlabel(labels[i])
        ax.set_ylabel(labels[j])
    axes[0, 0].legend(loc="best", fontsize=8)
    fig.tight_layout()
    return fig
