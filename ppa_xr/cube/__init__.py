"""PPA on labelled (dask) cubes: the only layer that builds dask graphs, and the one the ``.ppa`` accessor delegates to.

One module per job, the data's way through them:

* :mod:`~ppa_xr.cube.inputs`: a DataArray or Dataset as floating features along one dimension, nodata as
  NaN, the model's features selected by label, the spatial dimensions;
* :mod:`~ppa_xr.cube.sampling`: uniform samples of valid pixels (one pass, chunking-invariant), one cube
  or pooled over several, and the one held-out sampler;
* :mod:`~ppa_xr.cube.fitting`: a :class:`~ppa_xr.PPA` fitted on such a sample (:mod:`~ppa_xr.cube.noise`: the
  noise covariance from neighbouring pixels, in the same pass);
* :mod:`~ppa_xr.cube.maps`: the core kernels mapped lazily over the chunks (transform, inverse,
  reconstruction, error maps, log-likelihood maps, gap filling) with CRS, nodata and units carried;
* :mod:`~ppa_xr.cube.shift`: whether a model beats its own PCA on a cube (``evaluate``, ``ShiftWarning``);
* :mod:`~ppa_xr.cube.report`: the information report of a cube (held out);
* :mod:`~ppa_xr.cube.rasters`: cubes in and out of files (band stacks, by suffix, atomic writes);
* :mod:`~ppa_xr.cube.accessor`: the ``.ppa`` accessor, every method one delegation.
"""

from .fitting import fit, fit_pooled
from .maps import fill, inverse_transform, reconstruct, reconstruction_error, score_samples, transform
from .report import information_report
from .sampling import sample_valid_pixels
from .shift import evaluate

__all__ = ["evaluate", "fill", "fit", "fit_pooled", "information_report", "inverse_transform", "reconstruct", "reconstruction_error",
           "sample_valid_pixels", "score_samples", "transform"]
