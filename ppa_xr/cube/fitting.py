"""A :class:`~ppa_xr.PPA` fitted on a sample of one cube's valid pixels, or of several cubes pooled."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import xarray as xr

from ..core.fill import check_missing
from ..core.spec import Spec, check_names
from ..model import PPA
from ..model.labels import FeatureLabels
from .inputs import feature_array
from .noise import noise_covariance, noise_moments, sample_covariance
from .sampling import sample_cubes


def fit(
    obj: xr.DataArray | xr.Dataset, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = None,
    progress: bool = False, weights: xr.DataArray | None = None, missing: str = "drop", **ppa_params: Any,
) -> PPA:
    """Fit :class:`~ppa_xr.PPA` on a random sample of the valid pixels of a cube.

    Degree selection holds out whole spatial blocks
    (:func:`~ppa_xr.cube.sample_valid_pixels`), so neighbouring
    pixels cannot vouch for a curve that does not transfer to another part of
    the scene. The model keeps the labels along ``dim`` and its other
    coordinates (e.g. wavelengths) as ``model.features_``
    (:class:`~ppa_xr.FeatureLabels`), so transforms can check and reorder
    bands by label; repeated labels are refused.

    ``noise_cov="shift"`` estimates the noise covariance from differences of
    neighbouring pixels (:func:`~ppa_xr.cube.noise.shift_difference_covariance`,
    in the sampling's pass over the chunks) and fits a noise-adjusted PPA on
    it (MNF with ``degree=1``); ``noise_cov=<(d, d) array>`` gives the
    covariance directly, in the cube's band order, and ``noise_cov=<cube of
    noise>`` (a dark frame, a uniform area; same bands, matched by label)
    the covariance of its valid pixels.

    Parameters
    ----------
    obj : xr.DataArray or xr.Dataset
        The cube: features along ``dim`` (a Dataset's data variables are the
        features), any other dimensions are pixels; nodata and NaN pixels are skipped.
    dim : hashable
        The feature (band) dimension of a DataArray, or the name given to a
        Dataset's variables.
    n_samples : int, optional
        Pixels to sample. By default up to 200,000, and no more than half of
        the valid pixels of a cube with at least 2,000 of them: the other half
        stays unseen, so ``evaluate``, the shift check and the report are held
        out on every scene.
    random_state : int, optional
        Seeds the pixel sample and the folds: the same seed gives the same model under any chunking.
    progress : bool
        Show a progress bar of the fit's steps (the sampling pass is a dask
        computation: see its progress with ``dask.diagnostics.ProgressBar``
        or the distributed dashboard).
    weights : xr.DataArray, optional
        A weight per pixel, over some of the pixel dimensions (broadcast to the
        others), e.g. ``np.cos(np.deg2rad(cube.lat))`` so that the fit
        represents area on a latitude-longitude grid. The sample is drawn
        uniformly (its record, and so ``evaluate`` and the report, do not
        depend on the weights) and each sampled pixel weighs in the fit as
        its weight says: the mean, the covariances, every least-squares fit
        and held-out error (``PPA.fit(X, sample_weight=...)``). Where every
        valid pixel is sampled the fit is exactly the weighted one (weighted
        EOFs with ``degree=1``).
    missing : {"drop", "fill"}
        ``"drop"``: a pixel is valid when every feature is (the sample holds complete pixels only).
        ``"fill"``: a pixel is valid when any feature is; the sample's gaps are filled as the fit goes
        (``PPA.fit(X, missing="fill")``: fill, fit, refill), for stacks where few or no pixels are
        complete (a cloudy time series).
    **ppa_params
        :class:`~ppa_xr.PPA` parameters (``degree``, ``robust``, ``standardize``, ``noise_cov``, ...).

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
    return fit_pooled([obj], dim, n_samples, random_state, progress, weights, missing, **ppa_params)


def fit_pooled(
    cubes: Iterable[xr.DataArray | xr.Dataset], dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = None,
    progress: bool = False, weights: xr.DataArray | Sequence[xr.DataArray] | None = None, missing: str = "drop", **ppa_params: Any,
) -> PPA:
    """Fit one :class:`~ppa_xr.PPA` on several cubes (scenes, dates; any grids), as :func:`~ppa_xr.cube.fit` does on one.

    One uniform sample of all their valid pixels
    (``ppa_xr.cube.sampling.sample_cubes``: each cube in proportion to
    its valid pixels), spatial blocks as groups, distinct per cube. Every
    cube must hold the first cube's features (matched by label).
    ``model.sample_.cubes`` records each cube's share, in the given order, so
    reports on any of them hold its fitting pixels out.

    Parameters
    ----------
    cubes : iterable of xr.DataArray or xr.Dataset
        The scenes or dates, on any grids, with the same features (a list, or any iterable such as a generator).
    dim, n_samples, random_state, progress, missing, **ppa_params
        As in :func:`~ppa_xr.cube.fit`; ``noise_cov="shift"`` pools the neighbour differences of every cube.
    weights : xr.DataArray or sequence of xr.DataArray, optional
        As in :func:`~ppa_xr.cube.fit`: one for every cube (broadcast to each), or one per cube.

    Returns
    -------
    PPA
        One model for all the cubes.

    Examples
    --------
    >>> model = ppa_xr.fit_pooled([scene_2021, scene_2022], n_samples=100_000)  # doctest: +SKIP
    """
    scenes = list(cubes) if isinstance(cubes, Iterable) and not isinstance(cubes, (xr.DataArray, xr.Dataset, str, bytes)) else None
    if not scenes:
        raise TypeError("fit_pooled takes a list of cubes, e.g. fit_pooled([scene_a, scene_b]); for one cube use cube.ppa.fit")
    check_names(ppa_params)
    noise = ppa_params.pop("noise_cov", None)
    if isinstance(noise, str) and noise != "shift":
        raise ValueError(f"noise_cov must be 'shift' (estimated from neighbouring pixels), a (d, d) noise covariance or a cube "
                         f"of noise samples, got {noise!r}")
    estimated = isinstance(noise, (str, xr.DataArray, xr.Dataset))
    # every parameter is checked once, before any pass; a stand-in covariance where it is estimated, so its conflicts show too
    declared = Spec(random_state=random_state, **ppa_params, noise_cov=np.eye(2) if estimated else noise)
    arrays = [feature_array(obj, dim) for obj in scenes]
    d = arrays[0].sizes[dim]
    _check_enough_pixels(arrays, dim)
    if not estimated:
        declared.for_data(None, d)
    features = FeatureLabels.of(arrays[0], dim, variables=isinstance(scenes[0], xr.Dataset))
    arrays = [features.select(da, d) for da in arrays]
    shift = [noise_moments(da, dim) for da in arrays] if isinstance(noise, str) else None  # lazy: in the sampling pass
    pooled = _sampled(arrays, dim, n_samples, random_state, shift, check_missing(missing))
    if isinstance(noise, (xr.DataArray, xr.Dataset)):  # a noise sample: a dark frame, a uniform area
        declared = declared.replace(noise_cov=sample_covariance(features.select(feature_array(noise, dim), d), dim))
    elif pooled.along is not None:
        declared = declared.replace(noise_cov=noise_covariance(pooled.along, d))
    row_weights = None if weights is None else pooled.weights(arrays, dim, weights)
    return PPA.fitted(pooled.values, declared, pooled.groups, features, pooled.sample, progress, row_weights, missing)


def _sampled(arrays: list[xr.DataArray], dim: Hashable, n_samples: int | None, random_state: int | None, shift: Any,
             missing: str) -> Any:
    """The pooled sample of complete pixels (``"drop"``) or of pixels with any observed value (``"fill"``, gaps NaN)."""
    filling = missing == "fill"
    try:
        pooled = sample_cubes([_gaps_marked(da, dim) for da in arrays] if filling else arrays, dim, n_samples, random_state, along=shift)
    except ValueError as err:
        if "no valid pixel" not in str(err):
            raise
        hint = ("no pixel has any observed feature: every value is NaN or nodata" if filling else
                "to fit on pixels with gaps (clouds, missing dates), pass missing='fill'")
        raise ValueError(f"{err}; {hint}") from err
    if filling:
        pooled.values[pooled.values == _GAP[pooled.values.dtype.type]] = np.nan
    return pooled


#: the value a gap of a partly observed pixel takes while the sampler reads it as valid (the largest float: no
#: reflectance, temperature or index reaches it), put back to NaN in the sample
_GAP = {np.float32: np.finfo(np.float32).max, np.float64: np.finfo(np.float64).max}


def _gaps_marked(da: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """``missing="fill"``: the cube with the gaps of each pixel that has an observed value marked by :data:`_GAP`
    (lazily), so the sampler, which takes complete pixels, takes every such pixel; all-missing pixels stay NaN."""
    finite = xr.apply_ufunc(np.isfinite, da, dask="allowed")
    return da.where(finite | ~finite.any(dim), _GAP[da.dtype.type])


def _check_enough_pixels(arrays: list[xr.DataArray], dim: Hashable) -> None:
    """Refuse, before any pass, a fit with fewer pixels than features: PPA (as PCA of a covariance) needs many
    more samples than features, and the step fits grow with the features."""
    d = arrays[0].sizes[dim]
    pixels = sum(int(np.prod([da.sizes[other] for other in da.dims if other != dim])) for da in arrays)
    if pixels < d:
        raise ValueError(
            f"{d} features along {dim!r} but only {pixels} pixels to sample: PPA needs many more samples than features. Use "
            f"the dimension with fewer entries as the features (for a time series of maps, time: dim='time', each grid cell a "
            f"sample), or reduce the features first (EOFs / PCA of the grid cells), then fit PPA on the leading components"
        )
