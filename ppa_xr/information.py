"""Multi-information reduction from marginal entropies (paper section 5.4), per table and per pixel, and reports.

The estimators live in :mod:`ppa_xr.core.entropy` (spacing and histogram
marginal densities, dequantization of integer-valued bands, ``Delta I`` of a
map and per pixel) and :mod:`ppa_xr.core.lookup` (the densities of the
per-pixel maps on a grid); the report of a cube in :mod:`ppa_xr.cube.report`,
its table and figure in :mod:`ppa_xr.view`. This module gathers them, and
takes fitted models where the core takes their parameters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .core import entropy
from .core.docstrings import shared
from .core.entropy import (ESTIMATORS, EqualMassBins, Histograms, MIReduction, PointwiseReduction, dequantized, discrete_columns,
                           marginal_density, marginal_entropy, reduction)
from .core.lookup import StepLookup
from .cube.report import REPORT_COMPONENTS, REPORT_SAMPLES, information_report
from .cube.sampling import MIN_HELD_OUT
from .view import SUMMARY_ROWS, plot_report, summary_table

if TYPE_CHECKING:
    from .model import PPA

__all__ = [
    "ESTIMATORS", "MIN_HELD_OUT", "REPORT_COMPONENTS", "REPORT_SAMPLES", "SUMMARY_ROWS", "EqualMassBins", "Histograms", "MIReduction",
    "PointwiseReduction", "StepLookup", "dequantized", "discrete_columns", "information_report", "marginal_density", "marginal_entropy",
    "multi_information_reduction", "plot_report", "reduction", "summary_table",
]


@shared
def multi_information_reduction(
    X: np.ndarray, R: np.ndarray | PPA | Callable[[np.ndarray], np.ndarray], estimator: str = "spacing",
    log2_det_jacobian: float | None = None,
) -> MIReduction:
    """``Delta I = sum_j h(x_j) - sum_j h(r_j) + log2 |det J|`` in bits for ``R = T(X)``, ``det J`` constant.

    ``R`` is the transformed sample, or the map ``T`` itself: a fitted
    :class:`~ppa_xr.PPA` (its map, whatever ``whiten`` says, and its
    ``log2 |det J|``) or a callable. Quantized columns of ``X``
    (``ppa_xr.information.discrete_columns``) have no differential entropy; with the map
    they are dequantized first (``ppa_xr.information.dequantized``) and ``T`` applied to
    that, with ``R`` given they are refused. PPA and PCA have ``|det J| = 1``;
    a standardizing model has ``log2 |det J| = -sum_j log2 D_j``. A model
    fitted in the span of its samples (S-mode, feature weights) is measured
    on its ``r`` span coordinates ``z = V^T S (x - mean)`` (S-mode: its EOF scores),
    where its map is square (docs/information.md). Pass
    samples the map was not fitted on: on its own fitting sample the figure
    is biased up by about ``d (d - 1) / (4 n ln 2)`` bits.

    Parameters
    ----------
    X : np.ndarray
        (n, d) samples the map was not fitted on.
    R : np.ndarray, PPA or callable
        ``T(X)``, or the map itself.
    estimator : {"spacing", "histogram"}
        The marginal entropy estimator.
    log2_det_jacobian : float, optional
        ``log2 |det J|`` of the map (taken from a PPA; 0 otherwise).

    {{mi_reduction}}
    """
    from .model import PPA

    if isinstance(R, PPA):  # X as the model reads it: its width, a table's columns by name and order
        return entropy.multi_information_reduction(R._check_input(X), R.params_, estimator, log2_det_jacobian)
    return entropy.multi_information_reduction(X, R, estimator, log2_det_jacobian)
