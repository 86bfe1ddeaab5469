"""The core kernels mapped lazily over a cube's chunks, with CRS, nodata and units carried.

Every map here is a core kernel mapped over the chunks (:func:`map_kernel`),
with the band (feature) dimension as one chunk: every other dimension (y, x,
time, ...) and its chunks are left as they are, each chunk reaches the kernel
as it lies in memory, and nothing is computed until asked for.
"""

from __future__ import annotations

from collections.abc import Hashable
import warnings
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from .._version import VERSION
from ..core import errors, kernels, likelihood
from ..core.fill import fill as fill_kernel
from ..core.checks import check_components, real_components
from ..core.docstrings import shared
from ..model import identity
from ..model.labels import FeatureLabels
from .inputs import (
    COMPONENT, COMPONENT_NAME, _component_units, _one_chunk_along, check_model, common_units, described_components, masked_float, model_features,
    squared_units, unpacked_attrs,
)
from .shift import warn_on_shift

if TYPE_CHECKING:
    from ..model import PPA

# attributes that describe the values of the input bands, wrong for components or errors
_VALUE_ATTRS = ("long_name", "units", "scale_factor", "add_offset", "valid_range", "valid_min", "valid_max", "description", "standard_name")


def _copy_geo(src: xr.DataArray, out: xr.DataArray) -> xr.DataArray:
    """Carry rioxarray's CRS and its transform, or its ground control points (GCPs) where the raster is
    georeferenced by them (never an identity transform in their place); NaN marks invalid pixels of ``out``, declared in
    the encoding (as a file opened with ``mask_and_scale`` has it), so ``to_netcdf(encoding={..: {"_FillValue": ..}})`` may set another."""
    from rioxarray.exceptions import RioXarrayError

    try:
        crs, gcps, spatial = src.rio.crs, src.rio.get_gcps(), {src.rio.x_dim, src.rio.y_dim}
    except RioXarrayError:  # no x/y dimensions: not a raster
        return out
    if crs is None or not spatial <= set(out.dims):
        return out
    placed = out.rio.write_gcps(gcps, crs) if gcps else out.rio.write_crs(crs).rio.write_transform(_transform(src))
    return placed.rio.write_nodata(np.nan, encoded=True)


def _transform(src: xr.DataArray) -> Any:
    """The transform of ``src``'s coordinates, not the one its ``spatial_ref`` cached: ``isel`` with a step, ``coarsen``
    or a flip leave the file's, which a netCDF output would carry (GDAL then places it at the old resolution). A
    rotated transform, or one pixel along x or y, keeps the cached one (the coordinates cannot give it), and so does one
    the coordinates give within a millionth of a pixel (their rounding)."""
    cached = src.rio.transform(recalc=False)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Transform that is non-rectilinear or with rotation found")
        calculated = src.rio.transform(recalc=True)
    same = np.allclose(tuple(cached)[:6], tuple(calculated)[:6], rtol=0, atol=1e-6 * min(abs(calculated.a), abs(calculated.e)))
    return cached if same else calculated


def _threads(da: xr.DataArray) -> int | None:
    """Kernel threads: one per task under dask (the scheduler is parallel), all cores otherwise."""
    return 1 if da.chunks is not None else None


def _apply_block(block: np.ndarray, func, axis: int, keep: bool, kwargs: dict) -> np.ndarray:
    """A kernel on one chunk whose features lie along ``axis``: a view with them last (no copy;
    a band-first raster chunk is then feature-major, the kernels' fast layout), the result put back."""
    out = func(np.moveaxis(block, axis, -1), **kwargs)
    return np.moveaxis(out, -1, axis) if keep else out


def _apply_block_located(block: np.ndarray, func, axis: int, keep: bool, kwargs: dict, block_id: tuple[int, ...] | None = None) -> np.ndarray:
    """:func:`_apply_block` for a kernel that is also told which chunk it has, ``chunk``: its place along the other
    dimensions than ``axis`` (dask's ``block_id`` without the feature axis; all 0 for an array in memory). A function
    of its own, so that dask hands ``block_id`` to these kernels only."""
    chunk = tuple(i for d, i in enumerate(block_id or (0,) * block.ndim) if d != axis)
    return _apply_block(block, func, axis, keep, kwargs | {"chunk": chunk})


def map_kernel(
    func, da: xr.DataArray, in_dim: Hashable, out_dim: Hashable | None, size: int, long_name: str | None,
    units: str | None = None, located: bool = False, **kwargs: Any,
) -> xr.DataArray:
    """A kernel mapped over the chunks, ``in_dim`` replaced by ``out_dim`` (or dropped), other dims and chunks kept.

    ``in_dim`` must be one chunk. Each chunk is handed to the kernel as it is
    in memory (``dask.array.map_blocks``, not ``apply_ufunc``, whose
    ``apply_gufunc`` would first copy every chunk into a pixel-major array);
    the kernel and its parameters enter the graph once. With a ``long_name``
    the output holds other quantities than the input, so the input's value
    attributes (units, scale, band names) are replaced by it and ``units``.
    ``located``: the kernel also takes ``chunk``, the chunk's place along the other dimensions (:func:`_apply_block_located`).
    """
    axis, keep = da.get_axis_num(in_dim), out_dim is not None
    block = partial(_apply_block_located if located else _apply_block, func=func, axis=axis, keep=keep, kwargs={"threads": _threads(da), **kwargs})
    data = block(da.values) if da.chunks is None else _mapped_chunks(block, da, axis, size if keep else None)
    dims = [out_dim if d == in_dim else d for d in da.dims if d != in_dim or keep]
    coords = {name: coord for name, coord in da.coords.items() if in_dim not in coord.dims}
    attrs = dict(da.attrs)
    if long_name is not None:
        attrs = {k: v for k, v in attrs.items() if k not in _VALUE_ATTRS} | {"long_name": long_name} | ({"units": units} if units else {})
    return _copy_geo(da, xr.DataArray(data, dims=dims, coords=coords, attrs=attrs, name=da.name))


def _checked(kernel: Any) -> partial:
    """``kernel`` warning of each chunk whose values lie far beyond the model's fitting sample, in other units
    (``ppa_xr.core.errors.warn_other_units``): read by the maps of the cube's values, not of components."""
    return partial(errors.checked_map, kernel)


def _mapped_chunks(block: partial, da: xr.DataArray, axis: int, size: int | None) -> Any:
    """``block`` over the dask chunks of ``da``: the axis becomes ``size`` long (None: dropped), declared as the
    floating dtype the kernels compute (:func:`~ppa_xr.core.kernels.computed_dtype`: integer components invert to floats)."""
    dtype = kernels.computed_dtype(da.dtype)
    keep = size is not None
    chunks = tuple((size,) if i == axis else c for i, c in enumerate(da.data.chunks)) if keep else None
    return da.data.map_blocks(block, dtype=dtype, chunks=chunks, drop_axis=[] if keep else axis,
                              meta=np.empty((0,) * (da.ndim if keep else da.ndim - 1), dtype))


def transform(
    obj: xr.DataArray | xr.Dataset, model: PPA, n_components: int | float | None = None, dim: Hashable | None = None, check: bool = False,
) -> xr.DataArray:
    """Lazy PPA components: ``component`` (1..k) replaces the band dimension; NaN where a pixel is invalid.

    Nothing is read or computed until the result is: the graph maps the
    kernel over the chunks. ``check=True`` first compares PPA with its own PCA
    on a quick held-out sample of the cube (``ppa_xr.cube.shift.CHECK_SAMPLES``
    pixels from at most ``ppa_xr.cube.shift.CHECK_CHUNKS`` chunks, read now)
    and raises :class:`~ppa_xr.ShiftWarning` when PPA is worse at some
    ``k <= n_components``; :func:`~ppa_xr.cube.evaluate`, the report and the
    command line always check. Without it, each chunk is checked for values in other units as it is mapped (a few of
    its pixels: ``ppa_xr.core.errors.warn_other_units``), as ``fill`` and ``reconstruct`` check theirs. The
    output's attributes record its provenance
    (the model's digest and degrees, k, the ppa_xr version): written as
    netCDF attributes or GeoTIFF tags.

    Parameters
    ----------
    obj : xr.DataArray or xr.Dataset
        A cube with the model's features (matched by label, reordered if needed).
    model : PPA
        A fitted model.
    n_components : int, optional
        Components to return, 1..d (default: the model's ``n_components_``).
    dim : hashable, optional
        The feature dimension, when it is not the one the model was fitted along.
    check : bool
        Run the shift check first (a few chunks read now).

    Returns
    -------
    xr.DataArray
        Lazy components: ``component`` (1..k) in place of the feature dimension, other
        dimensions, chunks, CRS and transform (or ground control points) kept; ``long_name``
        is ``"PPA component"`` (:func:`~ppa_xr.to_raster` describes each band by its ``component`` label, after any selection).

    Examples
    --------
    >>> scores = cube.ppa.transform(model, n_components=3)  # doctest: +SKIP
    >>> ppa_xr.to_raster(scores, "components.tif")  # doctest: +SKIP
    """
    da, dim = model_features(obj, model, dim)
    k = model.n_components_ if n_components is None else model.kept(n_components)
    compared = check and warn_on_shift(da, dim, model, k)
    units = None if model.whiten else _component_units(da, model)  # whitened components have no unit
    kernel = kernels.forward if compared else _checked(kernels.forward)  # a comparison has checked the units
    out = map_kernel(kernel, da, dim, COMPONENT, k, COMPONENT_NAME, units, params=model.params_, n_components=k, whiten=model.whiten)
    # one long_name for every band: a per-band tuple would not follow a selection (scores.sel(component=[3, 2, 1]) would keep
    # 1, 2, 3); ppa_xr.to_raster numbers the bands from the component coordinate, which does
    out = out.assign_coords({COMPONENT: np.arange(1, k + 1)}).rename(_name(obj, "ppa")).assign_attrs(provenance(model, "components", k))
    return out.assign_attrs({identity.WHITENED_ATTR: int(model.whiten)})  # whitened or not: models of the same parameters invert either


def inverse_transform(scores: xr.DataArray | xr.Dataset, model: PPA, dim: Hashable = COMPONENT) -> xr.DataArray | xr.Dataset:
    """Lazy map of ``k <= d`` components back to the fitted band dimension and labels
    (a Dataset with one variable per feature when the model was fitted on a Dataset).

    Parameters
    ----------
    scores : xr.DataArray
        Components 1..k along ``dim`` (any order: they are matched by label; a Dataset is refused), as
        :func:`~ppa_xr.cube.transform` returns them, computed, stored or edited.
    model : PPA
        The model that produced them.
    dim : hashable
        Their dimension.

    Returns
    -------
    xr.DataArray or xr.Dataset
        The k-component reconstruction in input units, lazy.

    Raises
    ------
    ValueError
        Components that are not 1..k (each step is undone from the ones before it).
    """
    check_model(model)
    if not isinstance(scores, xr.DataArray) or dim not in scores.dims:
        raise ValueError(_not_components(scores, dim))
    real_components(scores.dtype)
    _check_made_by(scores, model)
    scores = masked_float(described_components(scores, dim))  # labels from a file's descriptions; integers as floats, nodata as NaN
    k, d = check_components(scores.sizes[dim], model.params_.n_features, f"the number of components along {dim!r}"), model.n_features_in_
    if dim in scores.coords:  # matched by label, as bands are: components 1..k in any order
        labels = scores[dim].values
        if sorted(labels.tolist()) != list(range(1, k + 1)):
            raise ValueError(
                f"the inverse needs the first k components, labelled 1..{k} along {dim!r}, got {labels.tolist()}: each PPA "
                f"step is undone from the ones before it, so components cannot be skipped (keep 1..k, e.g. scores.sel({dim}=slice(1, {k})))"
            )
        scores = scores.sortby(dim)
    scores = _one_chunk_along(scores, dim)
    features = model.features_ or FeatureLabels("band")
    out = features.attach(map_kernel(errors.checked_inverse, scores, dim, features.dim, d, "PPA inverse transform", common_units(scores), params=model.params_,
                                         whiten=model.whiten).drop_vars([dim], errors="ignore"))
    out = out.assign_attrs(provenance(model, "inverse transform", k))
    return out.to_dataset(dim=features.dim) if features.variables else out


@shared
def reconstruct(obj: xr.DataArray | xr.Dataset, model: PPA, n_components: int | float, dim: Hashable | None = None) -> xr.DataArray | xr.Dataset:
    """Lazy reconstruction from the first ``n_components`` components (fused: one task per chunk).

    The same values as ``inverse_transform(transform(obj, model, k), model)``
    in one pass: denoising, or checking what k components keep.

    Parameters
    ----------
    {{cube_model}}
    {{kept_or_share}}
    {{fitted_dim}}

    Returns
    -------
    xr.DataArray or xr.Dataset
        The reconstruction, the cube's layout and labels, lazy (a Dataset's variables for a Dataset).
    """
    da, dim = model_features(obj, model, dim)
    k = model.kept(n_components)
    out = map_kernel(_checked(kernels.reconstruct), da, dim, dim, model.n_features_in_, None, params=model.params_, n_components=k)
    out = (model.features_ or FeatureLabels(dim)).attach(out).rename(_name(obj, "reconstruction")).assign_attrs(provenance(model, "reconstruction", k))
    return as_given(obj, out, dim)


@shared
def reconstruction_error(obj: xr.DataArray | xr.Dataset, model: PPA, n_components: int | float, dim: Hashable | None = None) -> xr.DataArray:
    """Lazy per-pixel squared reconstruction error ``sum_b (x_b - x^_b)^2`` with ``n_components`` kept.

    Its area-weighted mean is xarray's: ``error.weighted(np.cos(np.deg2rad(error.lat))).mean()``, the
    weighting of ``fit(weights=...)``, ``evaluate(weights=...)`` and the report's.

    Parameters
    ----------
    {{cube_model}}
    {{kept_or_share}}
    {{fitted_dim}}

    Returns
    -------
    xr.DataArray
        One value per pixel (the feature dimension dropped), in squared input
        units (whitened units for a standardizing or noise-whitening model), lazy.
    """
    da, dim = model_features(obj, model, dim)
    k = model.kept(n_components)
    name = f"squared reconstruction error summed over bands, {k} PPA components"
    out = map_kernel(_checked(kernels.squared_error), da, dim, None, 0, name, squared_units(da, model), params=model.params_, n_components=k)
    return out.rename(_name(obj, "reconstruction_error")).assign_attrs(provenance(model, "squared reconstruction error", k))


@shared
def score_samples(obj: xr.DataArray | xr.Dataset, model: PPA, dim: Hashable | None = None) -> xr.DataArray:
    """Lazy per-pixel log-likelihood under the model, :meth:`PPA.score_samples <ppa_xr.PPA.score_samples>` of every pixel.

    The components are Gaussian through the volume-preserving map (``ppa_xr.core.likelihood``):
    ``log p(x) = -1/2 sum_p (r_p^2 / Lambda_p + log(2 pi Lambda_p)) + log |det W|``, the ``d - k`` components beyond the
    model's ``n_components_`` sharing one variance. Low values mark pixels the model finds unusual; the mean over
    pixels is what ``model.score`` gives on their table.

    Parameters
    ----------
    {{cube_model}}
    {{fitted_dim}}

    Returns
    -------
    xr.DataArray
        One value per pixel (the feature dimension dropped), in nats, lazy; NaN where a pixel is invalid.

    Raises
    ------
    ValueError
        A model fitted in the span of its samples (fewer samples than features, or feature weights): no density.
    """
    da, dim = model_features(obj, model, dim)
    likelihood.check_density(model.params_)
    k = model.n_components_
    out = map_kernel(_checked(likelihood.log_likelihood), da, dim, None, 0, f"log-likelihood under the PPA model ({k} components), nats", None,
                     params=model.params_, n_components=k, n_effective=getattr(model, "n_effective_", None))
    return out.rename(_name(obj, "log_likelihood")).assign_attrs(provenance(model, "log-likelihood", k))


@shared
def fill(
    obj: xr.DataArray | xr.Dataset, model: PPA, n_components: int | float | None = None, dim: Hashable | None = None, return_mask: bool = False,
) -> xr.DataArray | xr.Dataset | tuple[xr.DataArray | xr.Dataset, xr.DataArray | xr.Dataset]:
    """Lazy gap filling: each pixel's missing values (NaN, inf or nodata) estimated from its observed ones on the fitted map.

    The core kernel (:func:`ppa_xr.core.fill.fill`, :meth:`~ppa_xr.PPA.fill`) mapped over the
    chunks: observed values are returned unchanged, missing ones get the most probable completion
    under the model (for PCA the best linear fill, the Gaussian conditional mean); a pixel with no
    observed value stays NaN. Nothing is computed until the result is.

    Parameters
    ----------
    {{cube_model}}
    n_components : int or float, optional
        Fill from the first k components' manifold (1..d, 1..r for a reduced model, or a share of the variance in (0, 1)
        as :meth:`~ppa_xr.PPA.transform` reads it); default: every component.
    {{fitted_dim}}
    return_mask : bool
        Also return where values were filled.

    Returns
    -------
    xr.DataArray or tuple of xr.DataArray
        The filled cube (the cube's dims, coords, chunks and labels; float32 stays float32, integers become
        floats; a Dataset's variables for a Dataset), and with ``return_mask=True`` a boolean cube of the same shape
        (a Dataset for a Dataset), True where a value was filled.

    Examples
    --------
    >>> filled, mask = cube.ppa.fill(model, return_mask=True)  # doctest: +SKIP
    """
    da, dim = model_features(obj, model, dim)
    k = None if n_components is None else model.kept(n_components)
    out = map_kernel(_checked(fill_kernel), da, dim, dim, model.n_features_in_, None, params=model.params_, n_components=k)
    kept = model.params_.n_features if k is None else k
    labels = {name: coord for name, coord in da.coords.items() if dim in coord.dims}  # the cube's own, in the model's order
    filled = as_given(obj, out.assign_coords(labels).rename(_name(obj, "filled")).assign_attrs(provenance(model, "fill", kept)), dim)
    if not return_mask:
        return filled
    missing = ~xr.apply_ufunc(np.isfinite, da, dask="allowed")
    mask = (missing & ~missing.all(dim)).transpose(*da.dims).rename(_name(obj, "filled_mask"))
    mask.attrs = {"long_name": "value filled by PPA"}
    return filled, as_given(obj, mask, dim, {"long_name": mask.attrs["long_name"]})


def as_given(obj: xr.DataArray | xr.Dataset, out: xr.DataArray, dim: Hashable, attrs: dict | None = None) -> xr.DataArray | xr.Dataset:
    """``out`` (features along ``dim``) in the form ``obj`` came in: a Dataset's features as its variables again, each
    with its own attributes unpacked (or ``attrs``), ``out``'s as the Dataset's; a DataArray as it is."""
    if not isinstance(obj, xr.Dataset):
        return out
    ds = out.to_dataset(dim=dim)
    for name in ds.data_vars:
        ds[name].attrs = unpacked_attrs(obj[name].attrs) if attrs is None else dict(attrs)
    return ds


def _not_components(scores: object, dim: Hashable) -> str:
    """Why ``scores`` are not components along ``dim``, and how to make them so."""
    if isinstance(scores, xr.Dataset):
        fix = f"stack the variables into one: scores.to_dataarray({dim!r})"
    elif isinstance(scores, xr.DataArray) and scores.ndim:
        first = scores.dims[0]  # a GeoTIFF of components opened with rioxarray has them along 'band'
        fix = f"name their dimension: scores.rename({first}={dim!r}), or pass dim={first!r}"
    else:
        fix = "pass the output of transform"
    return f"expected a DataArray of components along a {dim!r} dimension (the output of transform), got {type(scores).__name__}" + (
        f" with dims {tuple(scores.dims)}" if isinstance(scores, (xr.DataArray, xr.Dataset)) else "") + f": {fix}"


def _check_made_by(scores: xr.DataArray, model: PPA) -> None:
    """Refuse components whose :func:`provenance` names other parameters than ``model``'s: inverted by a model that did
    not make them, they give values far from the cube's (on a Landsat crop, a mean absolute error 5,700 times that of
    the model that made them), without any error."""
    made_by = identity.made_by(scores.attrs)
    if scores.attrs.get("ppa_xr_output") != "components" or made_by is None:
        return
    if not identity.names(made_by, model):
        raise ValueError(f"these components were made by another model ({made_by}, as their attribute {identity.MODEL_ATTR} says), not "
                         f"by this one ({identity.parameters(model)}): invert them with the model that made them")
    whitened = scores.attrs.get(identity.WHITENED_ATTR)
    if whitened is not None and bool(int(whitened)) != bool(model.whiten):
        raise ValueError(f"these components are {'' if int(whitened) else 'not '}whitened (their attribute {identity.WHITENED_ATTR}), and "
                         f"this model has whiten={model.whiten}: invert them with the model that made them (whiten={not model.whiten})")


def provenance(model: PPA, output: str, k: int) -> dict[str, str | int]:
    """What an output of ``model`` records about itself, as netCDF attributes and GeoTIFF tags: the model (its
    file where it was read from one, and the digest of its parameters), its degrees, the components kept, the
    ppa_xr version."""
    return {
        "ppa_xr_output": output,
        identity.MODEL_ATTR: identity.named(model),
        "ppa_xr_degrees": " ".join(map(str, model.degrees_.tolist())),
        "ppa_xr_n_components": int(k),
        "ppa_xr_version": VERSION,
    }


def _name(obj: xr.DataArray | xr.Dataset, what: str) -> str:
    name = getattr(obj, "name", None)
    return f"{name}_{what}" if isinstance(name, str) else what
