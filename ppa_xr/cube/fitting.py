"""A :class:`~ppa_xr.PPA` fitted on a sample of one cube's valid pixels, or of several cubes pooled."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..core.checks import warn_user
from ..core.errors import UNITS_APART
from ..core.fill import check_missing
from ..core.spec import RANDOM_STATE, Spec, check_names
from ..model.labels import FeatureLabels, check_matrix_labels, shown
from .inputs import common_units, feature_array, spatial_dims, warn_guessed_space, without_dropped
from .noise import noise_covariance, noise_moments, sample_covariance
from .sampling import ALL_OBSERVED, ANY_OBSERVED, feature_weights_at, over_features, sample_cubes

if TYPE_CHECKING:
    from ..model import PPA


def fit(
    obj: xr.DataArray | xr.Dataset, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = RANDOM_STATE,
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
    random_state : int, Generator or None
        Seeds the pixel sample and the folds: the same seed gives the same model under any chunking
        (default 0, as every ``random_state`` here; None: fresh randomness).
    progress : bool
        Show progress bars of the sampling pass's tasks (on dask's local
        schedulers and on a distributed cluster) and of the fit's steps.
    weights : xr.DataArray, optional
        A weight per pixel, over some of the pixel dimensions (broadcast to the
        others), e.g. ``np.cos(np.deg2rad(cube.lat))`` so that the fit
        represents area on a latitude-longitude grid. Matched to the pixels
        by label, as xarray aligns: pixels the weights lack are refused, their
        other labels ignored; along a dimension without coordinates, by
        position, for the cube's size only. Real numbers, not below 0 (bools
        count as 1 and 0; float round-off below 0, as ``cos`` of float32
        latitudes at the poles, as 0); only the sampled pixels' weights are
        read. The sample is drawn
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
    cubes: Iterable[xr.DataArray | xr.Dataset], dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = RANDOM_STATE,
    progress: bool = False, weights: xr.DataArray | Sequence[xr.DataArray] | None = None, missing: str = "drop", **ppa_params: Any,
) -> PPA:
    """Fit one :class:`~ppa_xr.PPA` on several cubes (scenes, dates; any grids), as :func:`~ppa_xr.cube.fit` does on one.

    One uniform sample of all their valid pixels
    (``ppa_xr.cube.sampling.sample_cubes``: each cube in proportion to
    its valid pixels), spatial blocks as groups, distinct per cube. Every
    cube must hold the first cube's features (matched by label), in the same
    units: declared other ``units`` are refused, and a cube whose pixels lie at
    30 times another's scale (digital numbers beside reflectances) warns.
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
    _check_noise_sample(noise, dim, d)
    if not estimated:
        declared.for_data(None, d)
    features = FeatureLabels.of(arrays[0], dim, variables=isinstance(scenes[0], xr.Dataset))
    check_matrix_labels(noise, features.labels)
    arrays = [features.select(da, d) for da in arrays]
    _check_same_units(arrays)
    _warn_repeated_pixels(arrays, dim)
    feature_weights, weights = _by_kind(arrays[0], dim, weights)
    sampled, used = _s_mode_features(arrays, dim)
    shift = [noise_moments(da, dim) for da in arrays] if isinstance(noise, str) else None  # lazy: in the sampling pass
    _warn_guessed_blocks(sampled, dim, declared)
    pooled = _sampled(sampled, dim, n_samples, random_state, shift, check_missing(missing), progress)
    if isinstance(noise, (xr.DataArray, xr.Dataset)):  # a noise sample: a dark frame, a uniform area
        declared = declared.replace(noise_cov=sample_covariance(_noise_sample(noise, dim, features, d), dim))
    elif pooled.along is not None:
        declared = declared.replace(noise_cov=noise_covariance(pooled.along, d))
    _check_noise_variances(declared.noise_cov, features, dim)
    _check_two_pixels(len(pooled.values), n_samples, len(arrays))
    _warn_scales_apart(pooled, len(arrays))
    row_weights = None if weights is None else pooled.weights(arrays, dim, weights)
    from ..model import PPA

    return PPA._fitted(pooled.values, declared, pooled.groups, features, pooled.sample, progress, row_weights,
                       _weighing_out(feature_weights, used), missing)


def _warn_guessed_blocks(arrays: list[xr.DataArray], dim: Hashable, declared: Spec) -> None:
    """Where degrees are selected (candidates held out on spatial blocks), warn of blocks along guessed spatial dims."""
    if isinstance(declared.degree, tuple) and len(declared.degree) > 1:
        for da in arrays:
            warn_guessed_space(da, dim, f"the degree selection holds out spatial blocks along {spatial_dims(da, dim)}")


def _sampled(arrays: list[xr.DataArray], dim: Hashable, n_samples: int | None, random_state: int | None, shift: Any,
             missing: str, progress: bool = False) -> Any:
    """The pooled sample of complete pixels (``"drop"``) or of pixels with any observed value (``"fill"``, gaps NaN)."""
    filling = missing == "fill"
    try:
        pooled = sample_cubes(arrays, dim, n_samples, random_state, shift, progress, ANY_OBSERVED if filling else ALL_OBSERVED)
    except ValueError as err:
        if "no valid pixel" not in str(err):
            raise
        hint = ("no pixel has any observed feature: every value is NaN or nodata" if filling else
                "to fit on pixels with gaps (clouds, missing dates), pass missing='fill'")
        raise ValueError(f"{err}; {hint}") from err
    if filling:
        pooled.values[~np.isfinite(pooled.values)] = np.nan  # an infinite value is a gap too
    return pooled


def _warn_repeated_pixels(arrays: list[xr.DataArray], dim: Hashable) -> None:
    """Warn of labels that repeat along a pixel dimension (the same month twice where overlapping files were concatenated,
    an x twice in a mosaic): their pixels are drawn and fitted as often as they appear, weighing them more, silently."""
    for i, da in enumerate(arrays):
        for d, index in da.indexes.items():
            if d == dim or d not in da.dims or index.is_unique:
                continue
            repeated = index[index.duplicated()].unique()
            where = f"cube {i + 1} of {len(arrays)}'s" if len(arrays) > 1 else "the cube's"
            warn_user(f"{where} labels along {d!r} repeat ({len(repeated)} of them, {shown(np.asarray(repeated))}): their samples are "
                      f"fitted as often as they appear, weighing them more; keep one of each, cube.drop_duplicates({str(d)!r}), "
                      "or label them apart where they hold other data", UserWarning)


def _check_same_units(arrays: list[xr.DataArray]) -> None:
    """Refuse cubes declaring other ``units`` (as a string, or per band) than the first cube's: pooled, a scene in km beside
    one in m is fitted as one population, silently. Cubes without units pass."""
    declared = [(i, u) for i, da in enumerate(arrays) if (u := _units_of(da)) is not None]
    for i, units in declared[1:]:
        if units != declared[0][1]:
            first, n = declared[0], len(arrays)
            raise ValueError(f"cube {i + 1} of {n} is in units {units!r} and cube {first[0] + 1} in {first[1]!r}: pooled pixels must be in "
                             "one unit (a fit of both would be a map of neither); convert one first (e.g. scene * 1000 with "
                             ".assign_attrs(units='m')), or give them the same units attribute where they name the same unit")


def _warn_scales_apart(pooled: Any, n: int) -> None:
    """Warn where one cube's sampled pixels lie both farther from 0 (their median norm) and wider spread (RMS about their
    mean) than another's by more than ``UNITS_APART`` (30) times: digital numbers (reflectance x 10,000) beside
    reflectances, or km beside m, with no units declared to tell (:func:`_check_same_units`). Pooled, they are fitted as
    one population, silently. Both must differ: a dark scene beside a bright one differs in one."""
    sizes, spreads = np.full(n, np.nan), np.full(n, np.nan)
    for c in range(n):
        rows = pooled.values[pooled.cube == c]
        rows = rows[np.isfinite(rows).all(axis=1)]
        if len(rows) > 1:
            centred = rows - rows.mean(axis=0)
            sizes[c] = np.median(np.sqrt(np.einsum("ij,ij->i", rows, rows)))
            spreads[c] = np.sqrt(np.mean(np.einsum("ij,ij->i", centred, centred)))
    seen = np.flatnonzero((sizes > 0) & (spreads > 0))
    if len(seen) < 2:
        return
    low, high = seen[np.argmin(sizes[seen])], seen[np.argmax(sizes[seen])]
    if sizes[high] > UNITS_APART * sizes[low] and spreads[high] > UNITS_APART * spreads[low]:
        warn_user(f"cube {high + 1} of {n}'s values lie {sizes[high] / sizes[low]:.3g} times as far from 0, and spread "
                  f"{spreads[high] / spreads[low]:.3g} times as wide, as cube {low + 1}'s: are they in other units or another "
                  "scale (digital numbers beside reflectances, km beside m, a file's scale_factor lost)? Pooled, they are fitted "
                  "as one population; bring them to one scale first (e.g. cube * scale_factor + add_offset, or open both with "
                  "mask_and_scale=True), and declare their units (a 'units' attribute) so that fit_pooled can check them", UserWarning)


def _units_of(da: xr.DataArray) -> Any:
    """The cube's ``units``: its bands' tuple where they differ, else the one they share (:func:`common_units`; None
    where none is given, ``""`` too)."""
    units = da.attrs.get("units")
    if isinstance(units, (tuple, list, np.ndarray)) and len(per_band := tuple(str(u) for u in units)) and len(set(per_band)) > 1:
        return per_band
    return common_units(da)


def _check_noise_variances(noise_cov: np.ndarray | None, features: FeatureLabels, dim: Hashable) -> None:
    """Refuse a noise covariance without noise on some bands, naming them: a constant band (or one its neighbours always
    equal) has none, and whitening divides by it (the fit's message spoke of eigenvalues only)."""
    if noise_cov is None or (silent := np.diag(noise_cov) <= 0).sum() == 0:
        return
    names = features.labels[silent] if features.labels is not None else np.flatnonzero(silent)
    raise ValueError(f"the noise covariance is 0 (or below) on {int(silent.sum())} of the {len(silent)} features along {dim!r}: {shown(names)} "
                     "(constant where the noise was measured): whitening divides by each band's noise. Leave them out, e.g. "
                     f"cube.drop_sel({dim}={names[:3].tolist()!r}), or give a noise covariance with their noise (noise_cov=...)")


def _noise_sample(noise: xr.DataArray | xr.Dataset, dim: Hashable, features: FeatureLabels, d: int) -> xr.DataArray:
    """The noise sample's features in the fitted order; refused as the noise sample, not as "the cube" (whose advice,
    ``dim=``, would change the fitted cube's)."""
    if isinstance(noise, xr.DataArray) and dim not in noise.dims:
        others = [o for o in noise.dims if o not in ("y", "x")]
        raise ValueError(f"noise_cov, the noise sample, has no dimension {dim!r} (its dims are {tuple(noise.dims)}): give it the "
                         f"cube's feature dimension" + (f", e.g. noise.rename({others[0]}={str(dim)!r})" if others else ""))
    try:
        return features.select(feature_array(noise, dim), d)
    except ValueError as err:
        raise ValueError(f"noise_cov, the noise sample, against the cube's features (its 'cube' below, the cube's as 'the "
                         f"model's'): {err}") from err


def _check_noise_sample(noise: Any, dim: Hashable, d: int) -> None:
    """Refuse a (d, d) DataArray as ``noise_cov``: a DataArray is read as a noise sample, and this one is a covariance."""
    if isinstance(noise, xr.DataArray) and noise.shape == (d, d):
        rows, columns = noise.dims
        ordered = (f"cov.sel({rows}=labels, {columns}=labels).values with the cube's labels, e.g. labels=cube.{dim}.values"
                   if rows in noise.coords and columns in noise.coords else "cov.values")
        raise ValueError(f"noise_cov as a DataArray is a noise sample (the pixels of a dark frame or a uniform area, bands along "
                         f"{dim!r}), and this one is ({d}, {d}), the shape of a covariance: pass a covariance as a numpy array in "
                         f"the cube's band order (noise_cov={ordered})")


def _by_kind(da: xr.DataArray, dim: Hashable, weights: Any) -> tuple[np.ndarray | None, Any]:
    """The features' weights (weights over ``dim`` or its per-feature coordinates: grid-cell areas) and the pixels'
    (weights over the pixel dimensions), one of them None."""
    if isinstance(weights, xr.DataArray) and over_features(da, dim, weights):
        return feature_weights_at(da, dim, weights), None
    return None, weights


def _weighing_out(feature_weights: np.ndarray | None, used: np.ndarray | None) -> np.ndarray | None:
    """The features' weights with those without values (``used`` False) at 0: left out of the fit, NaN in its outputs."""
    if used is None:
        return feature_weights
    return used * (1.0 if feature_weights is None else feature_weights)


def _s_mode_features(arrays: list[xr.DataArray], dim: Hashable) -> tuple[list[xr.DataArray], np.ndarray | None]:
    """The cubes to sample and the features with values: with fewer pixels (samples) than features (S-mode: maps as
    samples, grid cells as features), a feature NaN at every pixel (a land cell at every time step, found now) would
    leave no pixel valid; it is sampled as 0 and left out of the fit (:func:`~ppa_xr.cube.inputs.model_features` reads
    it so too). Every feature (None) otherwise, where a feature without values is the usual refusal of pixels without data."""
    d = arrays[0].sizes[dim]
    pixels = sum(int(np.prod([da.sizes[other] for other in da.dims if other != dim])) for da in arrays)
    if pixels >= d:
        return arrays, None
    counts: np.ndarray = np.sum([np.asarray(da.notnull().sum([o for o in da.dims if o != dim]).values) for da in arrays], axis=0)
    valid: np.ndarray = counts > 0
    if (gaps := valid & (counts < pixels)).any():  # a sample with a NaN feature is left out, as a pixel with one
        warn_user(f"{int(gaps.sum())} of the {d} features along {dim!r} are NaN in some samples only (of {pixels}): those samples "
                  f"are left out of the fit, and the features NaN in every sample ({int((~valid).sum())}) are left out of the model. "
                  "Fill the gaps first to keep every sample", UserWarning)
    return (without_dropped(arrays, dim, valid), valid) if not valid.all() else (arrays, None)


def _check_two_pixels(n: int, n_samples: int | None, n_cubes: int) -> None:
    """Refuse a sample of one pixel, saying where it came from: ``n_samples`` asked for one, or the cube has one valid pixel."""
    if n >= 2:
        return
    if n_samples is not None and n_samples < 2:
        raise ValueError(f"n_samples={n_samples} (ppa-xr --n-samples) gave a sample of one pixel: PPA needs many more pixels than "
                         "features; ask for more, or leave n_samples out (up to 200,000)")
    cubes = "the cubes have" if n_cubes > 1 else "the cube has"
    raise ValueError(f"{cubes} only one valid pixel (every other has a NaN or nodata feature): PPA needs many more pixels than "
                     "features. Check the nodata value and the masks (a feature that is NaN everywhere leaves no pixel valid), "
                     "or fit on more of the scene")
