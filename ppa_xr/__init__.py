"""ppa_xr: Principal Polynomial Analysis for xarray and dask."""

from importlib.metadata import PackageNotFoundError, version

from . import accessor  # noqa: F401  (registers the .ppa accessor)
from .io import load_model, open_band_stack
from .model import PPA

try:
    __version__ = version("ppa_xr")
except PackageNotFoundError:  # running from a source tree that was not installed
    __version__ = "0.0.0"

__all__ = ["PPA", "__version__", "load_model", "open_band_stack"]
