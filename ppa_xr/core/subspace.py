"""The exact reduction of a sample to its own span: S-mode fits (fewer samples than features) and weighted features.

With ``n`` rows of ``d`` features, the centred, weighted sample
``Y = diag(sqrt(v)) (X - mean) S`` (``v`` the rows' weights, mean 1; ``S =
diag(s)``, ``s_j = sqrt(w_j)`` the features' weights, e.g. a grid cell's area
``cos(lat)``) has rank ``r <= min(n - 1, d)``. Its thin SVD ``Y = U Sigma V^T``
(``O(n^2 d)`` for ``n << d``) gives ``V`` (d x r), an orthonormal basis of
that span: every covariance, mean and least-squares fit of the sample is the
same on ``Z = (X - mean) S V`` (n x r), where PPA then runs
(:meth:`~ppa_xr.core.PPAParams.in_subspace` carries the map back). With
``degree=1`` the outcome is the EOF analysis of the weighted field: the
variances ``Sigma^2 / n``, patterns ``V``, PCs ``U Sigma``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .linalg import oriented, power_of_two

#: singular values below this times the largest (and the sample's size) are rounding: not a direction of the span
RANK_TOLERANCE = 1e-12


@dataclass(frozen=True)
class Subspace:
    """The span of a centred, weighted sample: its ``mean`` (d,), ``basis`` ``V`` (d x r), the features' roots ``s``
    (d,) and the sample's coordinates ``Z = (X - mean) S V`` (n x r)."""

    mean: np.ndarray
    basis: np.ndarray
    root: np.ndarray
    coordinates: np.ndarray


def span(X: np.ndarray, root: np.ndarray, weights: np.ndarray | None = None, full: bool = False) -> Subspace:
    """The span of ``X`` (n x d, finite) centred on its (weighted) mean, its features scaled by ``root``.

    Parameters
    ----------
    X : np.ndarray
        (n, d) finite samples.
    root : np.ndarray
        (d,) positive ``s_j = sqrt(w_j)``, the square roots of the features' weights.
    weights : np.ndarray, optional
        (n,) non-negative weights of the rows (checked), for the mean and the span.
    full : bool
        Keep every feature direction (``V = I``, no SVD): the features are weighed, not reduced (``n > d``).

    Returns
    -------
    Subspace
        The mean, ``V`` with ``r`` columns (the rank of ``Y``, at most ``n - 1``), ``s`` and ``Z``.
    """
    X = np.asarray(X, dtype=np.float64)
    n, d = X.shape
    v = np.ones(n) if weights is None else np.asarray(weights, dtype=np.float64) * (n / np.sum(weights))
    mean = (v @ X) / n
    Y = (X - mean) * root
    if full:
        return Subspace(mean, np.eye(d), root, Y)
    scaled = Y * (np.sqrt(v) / power_of_two(float(np.abs(Y).max(initial=0.0)) or 1.0))[:, None]
    _, singular, vt = np.linalg.svd(scaled, full_matrices=False)
    r = min(int(np.sum(singular > RANK_TOLERANCE * max(n, d) * singular[0])) if singular[0] > 0 else 0, n - 1)
    basis = np.ascontiguousarray(oriented(vt[:r].T))  # the one sign rule: the components' patterns do not depend on LAPACK's
    return Subspace(mean, basis, root, Y @ basis)
