"""The method on plain arrays (numpy, scipy and numba only): the parameter spec, the fit, the kernels and every
measure computed on the fitted parameters. Nothing here knows xarray, dask or the estimator.

* the method: :mod:`~ppa_xr.core.spec` (the parameters, declared once), :mod:`~ppa_xr.core.ppa` (the fit),
  :mod:`~ppa_xr.core.steps`, :mod:`~ppa_xr.core.degrees`, :mod:`~ppa_xr.core.leading`, :mod:`~ppa_xr.core.basis`,
  :mod:`~ppa_xr.core.params` (the fitted arrays), :mod:`~ppa_xr.core.kernels` (chunk kernels), :mod:`~ppa_xr.core.blas`;
* the measures: :mod:`~ppa_xr.core.errors` (PPA against its PCA), :mod:`~ppa_xr.core.geometry`,
  :mod:`~ppa_xr.core.entropy` (multi-information), :mod:`~ppa_xr.core.likelihood` (the score), :mod:`~ppa_xr.core.lookup` (densities on a grid),
  :mod:`~ppa_xr.core.keys` (which pixels a sample holds).
"""

from .kernels import error_curve, forward, inverse, jacobian, reconstruct, squared_error
from .params import PPAParams
from .ppa import fit_params
from .spec import Spec

__all__ = ["PPAParams", "Spec", "error_curve", "fit_params", "forward", "inverse", "jacobian", "reconstruct", "squared_error"]
