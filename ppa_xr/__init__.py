"""ppa_xr: Principal Polynomial Analysis for xarray and dask."""

from ._version import VERSION as __version__
from . import accessor, datasets  # noqa: F401  (accessor registers .ppa)
from .evaluation import ShiftWarning
from .labels import FeatureLabels
from .model import PPA, load_model
from .rasters import file_lock, open_band_stack, to_raster
from .cube import fit_pooled

__all__ = ["PPA", "FeatureLabels", "ShiftWarning", "__version__", "datasets", "file_lock", "fit_pooled", "load_model", "open_band_stack", "to_raster"]
