"""PPA on labelled (dask) cubes: the thin xarray layer the ``.ppa`` accessor delegates to.

One module per job, the data's way through them:

* :mod:`~ppa_xr.cube.inputs`: a DataArray or Dataset as floating features along one dimension, nodata as
  NaN, the model's features selected by label;
* :mod:`~ppa_xr.cube.sampling`: uniform samples of valid pixels (one pass, chunking-invariant), one cube
  or pooled over several, and the record of which pixels a model was fitted on;
* :mod:`~ppa_xr.cube.fitting`: a :class:`~ppa_xr.PPA` fitted on such a sample;
* :mod:`~ppa_xr.cube.maps`: the core kernels mapped lazily over the chunks (transform, inverse,
  reconstruction, error maps) with CRS, nodata and units carried;
* :mod:`~ppa_xr.cube.transfer`: whether a model beats its own PCA on a cube (``evaluate``, ``ShiftWarning``).
"""

from .fitting import fit, fit_pooled
from .inputs import COMPONENT, feature_array, model_features
from .maps import inverse_transform, map_kernel, reconstruct, reconstruction_error, transform
from .sampling import sample_valid_pixels
from .transfer import evaluate

__all__ = ["COMPONENT", "evaluate", "feature_array", "fit", "fit_pooled", "inverse_transform", "map_kernel", "model_features",
           "reconstruct", "reconstruction_error", "sample_valid_pixels", "transform"]
