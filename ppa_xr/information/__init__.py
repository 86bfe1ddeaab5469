"""Multi-information reduction from marginal entropies (paper section 5.4), per table and per pixel, and reports.

* :mod:`~ppa_xr.information.estimators`: marginal entropy estimators (spacing, histogram), dequantization of
  integer-valued bands, ``Delta I`` of a map and per pixel;
* :mod:`~ppa_xr.information.lookup`: step functions (the densities of the per-pixel maps) evaluated on a grid;
* :mod:`~ppa_xr.information.report`: ``information_report``, PPA against its own PCA on a cube (held out);
* :mod:`~ppa_xr.information.view`: the report as a markdown summary and a figure.
"""

from .estimators import (
    ESTIMATORS,
    EqualMassBins,
    Histograms,
    MIReduction,
    PointwiseReduction,
    dequantized,
    discrete_columns,
    marginal_density,
    marginal_entropy,
    multi_information_reduction,
)
from .lookup import StepLookup
from .report import MIN_HELD_OUT, REPORT_SAMPLES, information_report
from .view import SUMMARY_ROWS, plot_report, summary_table

__all__ = [
    "ESTIMATORS", "MIN_HELD_OUT", "REPORT_SAMPLES", "SUMMARY_ROWS", "EqualMassBins", "Histograms", "MIReduction",
    "PointwiseReduction", "StepLookup", "dequantized", "discrete_columns", "information_report", "marginal_density", "marginal_entropy",
    "multi_information_reduction", "plot_report", "summary_table",
]
