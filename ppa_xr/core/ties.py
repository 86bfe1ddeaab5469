"""Tied straight axes after the last curve, turned toward PCA's subspace.

After its last curved step ``p`` a fit's outputs ``r[p+1:]`` are straight steps
along the principal axes of the curved residual. Where the fitting rows cannot
order two of their variances, which of the two is the ``k``-th axis is the
sample's chance, and a late curve can leave it turned out of PCA's first ``k``
axes: unseen rows unlike every fitted one then pay for the turn (UCI
Segmentation: the 10th axis at a sine of 0.22-0.28 to PCA's first 10 read 124-134
% of PCA's error on unseen rows). Any orthonormal basis of a run's span keeps the
map exact, ``det J = 1`` and the run's energy, so each run is turned toward PCA:

* Tie: adjacent outputs ``[a, b)`` form a run where every pair ``i < j`` has
  ``lambda_i - lambda_j <= TIE_SE * sd(z_i^2 - z_j^2) / sqrt(n - 1)``, the
  standard error of the mean of ``z_i^2 - z_j^2`` over the ``n`` fitting rows
  (``z`` the centred outputs; no assumption on their distribution, so heavy
  tails widen the runs). A weighted fit's rows weigh in as they weighed in its
  variances: ``z`` centred by the weighted mean, and the standard error of the
  weighted mean, ``sqrt(sum w_i^2 (d_i - dbar)^2 / (1 - sum w_i^2))`` with
  ``sum w_i = 1`` (the unweighted one for equal weights): a few heavy rows
  order two variances their many light rows cannot.
  Beyond :data:`TIE_ROWS` rows the spreads are read on that many evenly spaced
  rows, their standard errors scaled to the whole count (:func:`_evidence`).
* Turn: within the run, ``v_i = argmax ||U_k^T v||`` over unit ``v`` in the run's
  span orthogonal to ``v_a .. v_{i-1}`` (``U_k`` PCA's first ``k`` axes, ``k`` the
  output's component number; one small eigenproblem per axis); the turned
  variances are ``v_i^T diag(lambda) v_i``.
* Property 2: a run is turned only where the training error at each of its
  ``k``, ``sum_{j >= k} lambda'_j``, stays at or below PCA's, ``sum_{j >= k} lambda^PCA_j``.

Applied to the final map (:func:`~ppa_xr.core.shrink.fit_selected`, after the
last curve's shrinkage, whose later outputs are again principal axes); the
validation's candidate fits are untouched.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .linalg import PANEL, mean_error, orientation, power_of_two, weight_share
from .params import PPAParams

#: standard errors within which two variances are tied: the usual two of a difference, fixed before measuring
TIE_SE = 2.0
#: whether the final map's tied straight axes are turned (off: the map as fitted and shrunk)
TIES = True
#: rows the tie test reads at most: beyond, the spreads of ``z_i^2 - z_j^2`` are read on this many evenly spaced rows
#: and their standard errors scaled to the whole sample's count (a spread read on 20,000 rows is within about 1%)
TIE_ROWS = 20_000


def tied_runs(squares: np.ndarray, variances: np.ndarray, weights: np.ndarray | None = None,
              scale: float = 1.0) -> list[tuple[int, int]]:
    """The runs ``[a, b)`` of adjacent outputs each pair of which the rows cannot order (module docstring), from the
    squares of the centred outputs (n, m), their variances (m,), descending, in the same units, the rows'
    weights (n,; None: equal), and the factor from these rows' standard errors to the fitting sample's."""
    n, m = squares.shape
    runs, a = [], 0
    for b in range(1, m + 1):
        if b < m:
            spread = scale * np.array([mean_error(squares[:, i] - squares[:, b], weights) for i in range(a, b)])
            if np.all(variances[a:b] - variances[b] <= TIE_SE * spread):
                continue
        if b - a > 1:
            runs.append((a, b))
        a = b
    return runs


def _evidence(X: np.ndarray, weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None, float]:
    """The rows the tie test reads (all, or :data:`TIE_ROWS` evenly spaced), their weights, and the factor from their
    standard errors to the whole sample's, ``sqrt(c(all) / c(read))`` with ``c = s / (1 - s)``, ``s = sum w_i^2 /
    (sum w_i)^2`` (``1 / (n - 1)`` for equal weights)."""
    if len(X) <= TIE_ROWS:
        return X, weights, 1.0
    rows = np.round(np.linspace(0, len(X) - 1, TIE_ROWS)).astype(np.intp)
    read = None if weights is None else weights[rows]
    return X[rows], read, float(np.sqrt(_per_row(weights, len(X)) / _per_row(read, TIE_ROWS)))


def _per_row(weights: np.ndarray | None, n: int) -> float:
    """``s / (1 - s)``, ``s`` the rows' :func:`~ppa_xr.core.linalg.weight_share` (:func:`_evidence`): the variance of
    a weighted mean per unit variance of the values."""
    share = weight_share(weights, n)
    return share / max(1.0 - share, share)


def _squares(params: PPAParams, X: np.ndarray, p: int, unit: float, weights: np.ndarray | None = None) -> np.ndarray:
    """The squares of the rows' centred outputs after step ``p`` (centred by the ``weights``' mean, None: equal),
    divided by ``unit^2`` (n, d-p-1), panel by panel: no other array of ``n`` rows."""
    out = np.empty((len(X), params.n_features - p - 1))
    for start in range(0, len(X), PANEL):
        out[start:start + PANEL] = kernels.forward(X[start:start + PANEL], params)[:, p + 1:] / unit
    out -= out.mean(axis=0) if weights is None else np.average(out, axis=0, weights=weights)
    return np.square(out, out=out)


def toward(axes: np.ndarray, pca: np.ndarray, first: int) -> np.ndarray:
    """``Q`` (c x c, orthogonal): the run's ``axes`` (c rows) turned, ``Q^T axes``, so that the ``i``-th maximises
    ``||U_k^T v||``, ``k = first + i + 1``, ``U`` the rows of ``pca``."""
    c = len(axes)
    Q = np.eye(c)
    for i in range(c - 1):
        along = (axes.T @ Q[:, i:]).T @ pca[: first + i + 1].T
        w = np.linalg.eigh(along @ along.T)[1][:, -1]
        Q[:, i:] = Q[:, i:] @ np.linalg.qr(np.column_stack([w, np.eye(len(w))]))[0]
    return Q


def turned(params: PPAParams, X: np.ndarray, weights: np.ndarray | None = None) -> tuple[tuple[np.ndarray, np.ndarray] | None, list[list[int]]]:
    """The turn of ``params``' tied straight outputs after its last curve (module docstring), from its fitting rows ``X``.

    Parameters
    ----------
    params : PPAParams
        A fitted map (one without a curved step, whitened or reduced, or whose variances float64 does not hold to
        full precision, is left as it is).
    X : np.ndarray
        (n, d) its fitting rows.
    weights : np.ndarray, optional
        (n,) the rows' weights in the fit (None: equal).

    Returns
    -------
    tuple
        ``(variances, V)``: the outputs ``p+1:``'s variances and their rotation (m x m, as
        :func:`~ppa_xr.core.shrink.shrunk`'s), None where no run is turned (such a map, no tie, or Property 2
        refuses); and the turned runs, ``[first k, last k]`` each.
    """
    curved = params.curved_steps()
    held = float(np.sum(params.pca_variance)) * np.finfo(float).eps >= np.finfo(float).tiny  # data near 1e-150 and below: lost
    if not curved or params.whitened or params.reduced or not held:
        return None, []
    p = curved[-1]
    unit = float(power_of_two(float(np.sqrt(np.sum(params.explained_variance)))))  # data at 1e-200 or 1e150: exact
    values = params.explained_variance[p + 1:] / unit / unit
    pca_error = np.append(np.cumsum(params.pca_variance[::-1])[::-1], 0.0) / unit / unit  # PCA's, keeping j components
    slack = 1e-9 * pca_error[0]
    V, runs = np.eye(len(values)), []
    rows, read, scale = _evidence(X, weights)
    for a, b in tied_runs(_squares(params, rows, p, unit, read), values, read, scale):
        axes = params.rotation[p + 1 + a: p + 1 + b]
        Q = toward(axes, params.pca_rotation, p + 1 + a)
        run = np.einsum("ij,i,ij->j", Q, values[a:b], Q)
        if np.all(values[a:].sum() - np.cumsum(run) <= pca_error[p + 2 + a: p + 2 + b] + slack):
            V[a:b, a:b], values[a:b] = Q * orientation(axes.T @ Q), run
            runs.append([p + 2 + a, p + 1 + b])
    return ((values * unit * unit, V) if runs else None), runs
