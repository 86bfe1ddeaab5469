"""ppa_xr: Principal Polynomial Analysis for xarray and dask."""

from importlib.metadata import PackageNotFoundError, version

from . import accessor, datasets  # noqa: F401  (accessor registers .ppa)
from .evaluation import ShiftWarning
from .labels import FeatureLabels
from .model import PPA, load_model
from .rasters import open_band_stack
from .xarray_ops import fit_pooled

try:
    __version__ = version("ppa_xr")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

__all__ = ["PPA", "FeatureLabels", "ShiftWarning", "__version__", "datasets", "fit_pooled", "load_model", "open_band_stack"]
