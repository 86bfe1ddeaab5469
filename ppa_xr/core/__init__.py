"""Pure-numpy PPA: fitting on an in-memory sample and chunk kernels (no xarray here)."""

from .fitting import LEADING_VECTORS, fit_params
from .kernels import forward, inverse, jacobian, reconstruct, squared_error
from .params import PPAParams

__all__ = ["LEADING_VECTORS", "PPAParams", "fit_params", "forward", "inverse", "jacobian", "reconstruct", "squared_error"]
