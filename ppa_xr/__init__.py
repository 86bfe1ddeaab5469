"""ppa_xr: Principal Polynomial Analysis for xarray and dask.

The package is layered, each folder one layer, imports pointing down: :mod:`ppa_xr.core` (numpy, scipy and numba
only: the method and its measures), :mod:`ppa_xr.model` (the estimator and its file), :mod:`ppa_xr.cube`
(cubes, dask graphs and the ``.ppa`` accessor), and on top :mod:`ppa_xr.information`,
:mod:`ppa_xr.geometry`, :mod:`ppa_xr.view` and the command line (:mod:`ppa_xr.cli`).
"""

from . import datasets, geometry, information
from ._version import VERSION as __version__
from .core.errors import ShiftWarning
from .cube import accessor  # noqa: F401  (registers .ppa)
from .cube.fitting import fit_pooled
from .cube.rasters import file_lock, open_band_stack, open_cube, to_raster, write_cube
from .model import FeatureLabels, PPA, load_model

__all__ = ["PPA", "FeatureLabels", "ShiftWarning", "__version__", "datasets", "file_lock", "fit_pooled", "geometry", "information",
           "load_model", "open_band_stack", "open_cube", "to_raster", "write_cube"]
