"""PPA against its PCA baseline on any sample: the relative reconstruction-error curve.

``100 * e_PPA(k) / e_PCA(k)`` for ``k = 1..d-1`` retained components, with
``e(k)`` the squared error summed over features and averaged over samples
(:meth:`ppa_xr.PPA.reconstruction_mse`); 100 is PCA, below 100 PPA wins.
Errors below ``FLOOR`` times the total energy ``e(0) = mean ||x - mean||^2``
are float64 rounding (e.g. beyond the rank of a table with exactly dependent
columns, where both are about 1e-16) and count as that floor, so such ``k``
read 100 instead of a ratio of rounding noise.
"""

from __future__ import annotations

import numpy as np

from .model import PPA

FLOOR = 1e-12


def relative_error_curve(model: PPA, X: np.ndarray, baseline: PPA | None = None) -> np.ndarray:
    """``100 * e_model(k) / e_baseline(k)``, ``k = 1..d-1`` (default baseline: the model's own PCA, :attr:`PPA.pca_`)."""
    baseline = model.pca_ if baseline is None else baseline
    X = np.asarray(X, dtype=np.float64)
    floor = FLOOR * np.mean(np.sum(((X - model.mean_) / model.scale_) ** 2, axis=1))
    ours, theirs = model.reconstruction_mse(X)[:-1], baseline.reconstruction_mse(X)[:-1]
    return 100 * np.maximum(ours, floor) / np.maximum(theirs, floor)
