"""A :class:`~ppa_xr.PPA` fitted on a sample of one cube's valid pixels, or of several cubes pooled."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
import xarray as xr

from ..labels import FeatureLabels
from ..model import PPA
from ..noise import noise_covariance, noise_moments, sample_covariance
from .inputs import feature_array
from .sampling import sample_cubes

def fit(
    obj: xr.DataArray | xr.Dataset, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = None,
    **ppa_params: Any,
) -> PPA:
    """Fit :class:`~ppa_xr.PPA` on a random sample of the valid pixels of a cube.

    ``progress=True`` shows a progress bar of the fit's steps (the sampling pass is a
    dask computation: see its progress with ``dask.diagnostics.ProgressBar``
    or the distributed dashboard). Degree selection holds out whole spatial
    blocks (:func:`sample_valid_pixels`),
    so neighbouring pixels cannot vouch for a curve that does not transfer
    to another part of the scene.

    The model keeps the labels along ``dim`` and its other coordinates (e.g.
    wavelengths) as ``model.features_`` (:class:`~ppa_xr.FeatureLabels`), so
    transforms can check and reorder bands by label; repeated labels are refused.

    ``noise="shift"`` estimates the noise covariance from differences of
    neighbouring pixels (:func:`ppa_xr.noise.shift_difference_covariance`, in
    the sampling's pass over the chunks) and fits a noise-adjusted PPA on it
    (``PPA(noise_cov=...)``: MNF with ``degree=1``); ``noise=<(d, d) array>``
    gives the covariance directly, in the cube's band order, and
    ``noise=<cube of noise>`` (a dark frame, a uniform area; same bands,
    matched by label) the covariance of its valid pixels.

    Parameters
    ----------
    obj : xr.DataArray or xr.Dataset
        The cube: features along ``dim`` (a Dataset's data variables are the
        features), any other dimensions are pixels; nodata and NaN pixels are skipped.
    dim : hashable
        The feature (band) dimension of a DataArray, or the name given to a
        Dataset's variables.
    n_samples : int, optional
        Pixels to sample (default up to 200,000; all of a smaller scene).
    random_state : int, optional
        Seeds the pixel sample and the folds: the same seed gives the same model under any chunking.
    **ppa_params
        :class:`~ppa_xr.PPA` parameters (``degree``, ``robust``, ``standardize``, ...),
        ``noise`` (see above) and ``progress``.

    Returns
    -------
    PPA
        The fitted model, with ``features_`` (the labels) and ``sample_`` (which pixels it saw).

    Raises
    ------
    ValueError
        Bad parameters (before any pass over the cube), no valid pixel, repeated labels.

    Examples
    --------
    >>> from ppa_xr.datasets import open_landsat8_sample
    >>> cube = open_landsat8_sample(chunks={"x": 160, "y": 160})
    >>> model = cube.ppa.fit(n_samples=20_000, random_state=0)  # doctest: +SKIP
    """
    return fit_pooled([obj], dim, n_samples, random_state, **ppa_params)


def fit_pooled(
    cubes: list[xr.DataArray | xr.Dataset], dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = None,
    **ppa_params: Any,
) -> PPA:
    """Fit one :class:`~ppa_xr.PPA` on several cubes (scenes, dates; any grids), as :func:`fit` does on one.

    One uniform sample of all their valid pixels (:func:`sample_cubes`: each
    cube in proportion to its valid pixels), spatial blocks as groups, distinct
    per cube. Every cube must hold the first cube's features (matched by
    label). ``model.sample_.cubes`` records each cube's share, in the given
    order, so reports on any of them hold its fitting pixels out.

    Parameters
    ----------
    cubes : list of xr.DataArray or xr.Dataset
        The scenes or dates, on any grids, with the same features.
    dim, n_samples, random_state, **ppa_params
        As in :func:`fit`; ``noise="shift"`` pools the neighbour differences of every cube.

    Returns
    -------
    PPA
        One model for all the cubes.

    Examples
    --------
    >>> model = ppa_xr.fit_pooled([scene_2021, scene_2022], n_samples=100_000)  # doctest: +SKIP
    """
    if isinstance(cubes, (xr.DataArray, xr.Dataset)) or not len(cubes):
        raise TypeError("fit_pooled takes a list of cubes, e.g. fit_pooled([scene_a, scene_b]); for one cube use cube.ppa.fit")
    progress, noise = ppa_params.pop("progress", False), ppa_params.pop("noise", None)
    if isinstance(noise, str) and noise != "shift":
        raise ValueError(f"noise must be 'shift' (estimated from neighbouring pixels) or a (d, d) noise covariance, got {noise!r}")
    # every parameter fails before any pass; a stand-in covariance when noise is asked for, so its conflicts show too
    PPA(random_state=random_state, **ppa_params, noise_cov=None if noise is None else np.eye(2)).check_params()
    arrays = [feature_array(obj, dim) for obj in cubes]
    features = FeatureLabels.of(arrays[0], dim, variables=isinstance(cubes[0], xr.Dataset))
    arrays = [features.select(da, arrays[0].sizes[dim]) for da in arrays]
    shift = [noise_moments(da, dim) for da in arrays] if isinstance(noise, str) else None  # lazy: in the sampling pass
    values, groups, sample, shift = sample_cubes(arrays, dim, n_samples, random_state, along=shift)
    if isinstance(noise, (xr.DataArray, xr.Dataset)):  # a noise sample: a dark frame, a uniform area
        ppa_params["noise_cov"] = sample_covariance(features.select(feature_array(noise, dim), arrays[0].sizes[dim]), dim)
    elif noise is not None:
        ppa_params["noise_cov"] = noise_covariance(shift, arrays[0].sizes[dim]) if shift is not None else noise
    model = PPA(random_state=random_state, **ppa_params)
    model.check_params(arrays[0].sizes[dim])
    return model.fit(values, groups=groups, features=features, sample=sample, progress=progress)
