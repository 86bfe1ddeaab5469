"""ppa_xr: Principal Polynomial Analysis for xarray and dask.

The package is layered, each folder one layer, imports pointing down: :mod:`ppa_xr.core` (numpy, scipy and numba
only: the method and its measures), :mod:`ppa_xr.model` (the estimator and its file), :mod:`ppa_xr.cube`
(cubes, dask graphs and the ``.ppa`` accessor), and on top :mod:`ppa_xr.information`,
:mod:`ppa_xr.geometry`, :mod:`ppa_xr.view` and the command line (:mod:`ppa_xr.cli`).

The estimator (:class:`PPA`, :func:`load_model`, and scikit-learn with them) is imported at its first use, so
that a dask worker, which imports the package to run the cube layer's tasks, does not import scikit-learn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import datasets, geometry, information
from ._version import VERSION as __version__
from .core.errors import ShiftWarning
from .cube import accessor  # noqa: F401  (registers .ppa)
from .cube.fitting import fit_pooled
from .cube.rasters import file_lock, open_band_stack, open_cube, to_raster, write_cube
from .model import FeatureLabels

if TYPE_CHECKING:
    from .model.estimator import PPA, load_model

__all__ = ["PPA", "FeatureLabels", "ShiftWarning", "__version__", "datasets", "file_lock", "fit_pooled", "geometry", "information",
           "load_model", "open_band_stack", "open_cube", "to_raster", "write_cube"]


def __getattr__(name: str) -> Any:
    """:class:`PPA` and :func:`load_model` at their first use (:mod:`ppa_xr.model`)."""
    from . import model

    if name in model.ESTIMATOR:
        return getattr(model, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
