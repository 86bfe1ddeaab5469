"""A cube as features: floating values along one dimension, nodata as NaN, the model's features by label."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..core.checks import real_number_advice, warn_user
from ..model.labels import FeatureLabels, calendar

if TYPE_CHECKING:
    from ..model import PPA

COMPONENT = "component"
#: what a component band is called in files (``PPA component k``: ppa_xr.to_raster's band descriptions)
COMPONENT_NAME = "PPA component"
#: dimension names taken as a raster's spatial axes (spatial blocks of the sample, neighbours of the noise estimate)
SPATIAL_DIMS = ("x", "y", "lon", "lat", "longitude", "latitude")


def spatial_dims(da: xr.DataArray, dim: Hashable) -> list[Hashable]:
    """The spatial dimensions of a cube: its two dimensions named as x/y or lon/lat (:data:`SPATIAL_DIMS`)
    when it has them, else its last two pixel dimensions that are not time (rasters put y and x last; a
    ``(band, rows, cols, time)`` cube's are rows and cols), else, in a cube of times only (S-mode's maps), its
    last two. The one rule of the sampler's spatial blocks and the noise estimate's neighbours."""
    pixel_dims = [d for d in da.dims if d != dim]
    named = [d for d in pixel_dims if str(d) in SPATIAL_DIMS]
    places = [d for d in pixel_dims if not is_time(da, d)]
    return named if len(named) == 2 else (places or pixel_dims)[-2:]


def warn_guessed_space(da: xr.DataArray, dim: Hashable, what: str) -> None:
    """Warn where :func:`spatial_dims` took the cube's last pixel dims (not named y/x or lat/lon) among more pixel dims
    than two that are not time: which are the spatial ones is a guess, and another (an ensemble member, a depth) would
    be taken for one. ``what`` says what follows the guess (the noise's neighbours, the sample's spatial blocks)."""
    chosen = spatial_dims(da, dim)
    others = [d for d in da.dims if d != dim and d not in chosen and not is_time(da, d) and da.sizes[d] > 1]
    if others and not all(str(d) in SPATIAL_DIMS for d in chosen):
        warn_user(f"{what}, the cube's last pixel dims, and the cube has other pixel dims {others} too: if those are not "
                  f"its spatial ones, name the spatial ones y and x, e.g. cube.rename({{{str(chosen[0])!r}: 'y', "
                  f"{str(chosen[-1])!r}: 'x'}})", UserWarning)


def is_time(da: xr.DataArray, dim: Hashable) -> bool:
    """Whether ``dim`` is a time axis: named ``time``, or labelled by dates (numpy's or cftime's)."""
    return str(dim).lower() == "time" or (dim in da.coords and calendar(da[dim].values[:1]) is not None)


#: above this degree a float32 round trip loses more than 1e-4 of the data's range (measured; docs/method.md)
FLOAT32_MAX_DEGREE = 15


def feature_array(obj: xr.DataArray | xr.Dataset, dim: Hashable) -> xr.DataArray:
    """The cube as a floating DataArray with features along ``dim``; nodata -> NaN.

    A Dataset's data variables become the features, in ``obj.data_vars`` order,
    with their names as the labels of ``dim``. Values equal to a declared
    nodata (rioxarray's ``nodata`` / ``_FillValue`` of a file opened unmasked)
    become NaN. Floats stay as they are; 8/16-bit integers become float32 and
    wider integers float64, so no value is rounded.
    """
    if isinstance(obj, xr.Dataset):
        return _stacked_variables(obj, dim)
    if not isinstance(obj, xr.DataArray):
        raise TypeError(f"expected an xarray DataArray or Dataset, got {type(obj).__name__}")
    if dim not in obj.dims:
        raise ValueError(f"the cube has no dimension {dim!r} (its dims are {tuple(obj.dims)}); {_dim_advice(obj, dim)}")
    if obj.sizes[dim] == 0:
        raise ValueError(f"the cube has no features: its dimension {dim!r} has size 0")
    if obj.chunks is not None and any(np.isnan(size) for sizes in obj.chunks for size in sizes):
        raise ValueError("the cube's dask array has unknown chunk sizes (NaN), as boolean indexing leaves them; compute them "
                         "first: cube.copy(data=cube.data.compute_chunk_sizes())")
    return masked_float(described_bands(obj, dim))


def _stacked_variables(ds: xr.Dataset, dim: Hashable) -> xr.DataArray:
    """A Dataset's data variables, masked to floats, stacked along a new ``dim`` (their names its labels)."""
    if not ds.data_vars:
        raise ValueError("the Dataset has no data variables to use as features")
    if len(ds.data_vars) == 1:  # one feature: the features are along one of its dims
        (name,) = ds.data_vars
        named = dim if dim in ds[name].dims else "<one of them>"
        raise ValueError(f"the Dataset has one data variable, {str(name)!r} {ds[name].dims}, and a Dataset's variables are its "
                         f"features, one each: to take the values along one of its dims as the features, pass the DataArray "
                         f"ds[{str(name)!r}] with dim={named!r} (CLI: --variable {name}, and ppa-xr fit's --dim {named}; the "
                         f"other commands take the model's)")
    shapes = {name: ds[name].dims for name in ds.data_vars}
    if len({frozenset(dims) for dims in shapes.values()}) > 1:  # the same dims in another order are stacked as xarray broadcasts
        widest = max(shapes, key=lambda name: len(shapes[name]))
        raise ValueError(
            f"a Dataset's data variables are its features, and these do not share their dimensions: "
            f"{', '.join(f'{name} {dims}' for name, dims in shapes.items())}. Pick the features: a DataArray such as "
            f"ds[{str(widest)!r}] (its features along one of {shapes[widest]}), or the variables that share their dimensions, "
            f"ds[[...]]"
        )
    if dim in ds.dims:
        raise ValueError(_taken_dim(ds, dim))
    stacked = ds.map(masked_float, keep_attrs=True).to_dataarray(dim=dim)
    stacked.attrs = unpacked_attrs(ds.attrs)  # no packing declared on the unpacked floats
    return stacked


def _taken_dim(ds: xr.Dataset, dim: Hashable) -> str:
    """Why a Dataset's variables cannot be stacked along ``dim``, a dimension it has, and the ways out."""
    along = [str(name) for name in ds.coords if dim in ds[name].dims and name != dim]
    leftover = (f" (the coordinates {along} still lie along it, e.g. after to_dataset({dim!r}): drop them with "
                f"ds.drop_vars({along!r}), or") if along else ";"
    holding = [str(name) for name in ds.data_vars if dim in ds[name].dims]
    one = f", or take one variable's values along {dim!r} as the features: ds[{holding[0]!r}] (CLI: --variable {holding[0]})" if holding else ""
    return f"the Dataset already has a dimension {dim!r}{leftover} pass another dim for its variables{one}"


def _dim_advice(da: xr.DataArray, dim: Hashable) -> str:
    """What to pass instead of a ``dim`` the cube lacks: one of its dims, or the stacked dims as one."""
    if isinstance(dim, tuple) and set(dim) <= set(da.dims):
        return f"several dimensions as features are one stacked dimension: cube.stack(feature={dim!r}) with dim='feature'"
    if COMPONENT in da.dims:  # a model's own output: its components are not features of any model
        return (f"this cube holds a model's components (dimension {COMPONENT!r}): map them back to features with "
                f"cube.ppa.inverse_transform(model), or transform the cube they came from")
    others = [d for d in da.dims if d not in SPATIAL_DIMS] or list(da.dims)
    return f"pass dim= naming the feature dimension, e.g. dim={others[0]!r}"


def _descriptions(da: xr.DataArray, dim: Hashable, absent: bool) -> list[str] | None:
    """The band descriptions (``long_name``, one per position along ``dim``) where ``dim`` holds rioxarray's default
    labels 1..n (or, with ``absent``, no labels at all), else None."""
    names, n = da.attrs.get("long_name"), da.sizes[dim]
    default = np.array_equal(da[dim].values, np.arange(1, n + 1)) if dim in da.coords else absent
    return [str(v) for v in names] if default and isinstance(names, (tuple, list)) and len(names) == n else None


def described_bands(da: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """Bands labelled by the file's band descriptions where rioxarray left its default labels 1..n.

    ``rioxarray.open_rasterio`` numbers the bands 1..n and keeps the
    descriptions (e.g. ``B1 .. B11``) in ``long_name``; the same scene opened
    another way (``open_landsat8_sample``, a band stack, a Dataset) is
    labelled by name. Using the descriptions makes a model fitted either way
    apply to the other.
    """
    names = _descriptions(da, dim, absent=False)
    if names is not None and len(set(names)) == len(names):
        da = da.assign_coords({dim: names})
        da.attrs = {k: v for k, v in da.attrs.items() if k != "long_name"}
    return da


def described_components(da: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """Components labelled by the band descriptions ``PPA component k`` (:func:`~ppa_xr.to_raster`'s) where rioxarray
    left its default labels 1..n: a GeoTIFF of components 2, 1, 3 is read as those, not as 1, 2, 3."""
    numbers = [v.removeprefix(f"{COMPONENT_NAME} ") for v in _descriptions(da, dim, absent=True) or []]
    if numbers and all(v.isdigit() for v in numbers):
        da = da.assign_coords({dim: [int(v) for v in numbers]})
    return da


def float_dtype(dtype: np.dtype) -> np.dtype:
    """The native floating dtype a cube of ``dtype`` is computed in, by kind and size whatever the byte order:
    float32 for floats of at most 4 bytes and 8/16-bit integers and booleans, float64 otherwise (no value rounded;
    a big-endian ``'>f8'`` cube is float64, ``'>f4'`` float32)."""
    dtype = np.dtype(dtype)
    wide = dtype.itemsize > 4 if dtype.kind == "f" else dtype.kind in "iu" and dtype.itemsize > 2
    return np.dtype(np.float64 if wide else np.float32)


def masked_float(da: xr.DataArray, dtype: np.dtype | None = None) -> xr.DataArray:
    """``da`` as floats with its declared nodata (rioxarray's ``nodata`` / ``_FillValue``, and a CF ``missing_value``)
    as NaN, its integers read with the sign ``_Unsigned`` declares and its declared packing applied, ``scale_factor * stored +
    add_offset`` (:func:`declared_packing`), a new object without those
    attributes; ``dtype`` by default float32 for 8/16-bit integers and float32 data, float64 otherwise (no value
    is rounded). The one nodata masking and unpacking (cubes and band stacks): a file opened with or without
    ``mask_and_scale`` gives the same values."""
    import rioxarray  # noqa: F401  (registers .rio)

    if not isinstance(da.dtype, np.dtype) and getattr(da.dtype, "kind", "O") in "iufb":  # pandas' nullable Float64, Int64, boolean
        da = da.astype(np.float64)  # (a DataFrame's, through to_xarray): their pd.NA as NaN, numpy's numbers
    if da.dtype.kind not in "iufb":
        raise TypeError(f"feature values must be numeric (real numbers: int, float or bool), got dtype {da.dtype}"
                        + (f" for {da.name!r}" if da.name is not None else "") + f": {real_number_advice(da.dtype.kind, 'cube')}")
    if dtype is None:
        dtype = float_dtype(da.dtype)
    nodata, (scale, offset) = declared_nodata(da), declared_packing(da)
    out = da.copy(deep=False) if da.dtype == dtype else da.astype(dtype)  # never the caller's object; +-inf become NaN in the kernels
    for marker in dict.fromkeys([nodata, *np.ravel(da.attrs.get("missing_value", [])).tolist()]):  # CF: both mark missing
        if marker is not None and not np.isnan(float(marker)):
            out = out.where(da != marker)
    out = _signed_as_declared(da, out)
    if (scale, offset) != (1.0, 0.0):
        out = out * np.dtype(dtype).type(scale) + np.dtype(dtype).type(offset)
    out.attrs = unpacked_attrs(da.attrs)
    return out


def _signed_as_declared(stored: xr.DataArray, out: xr.DataArray) -> xr.DataArray:
    """``out``, the floats of the integers ``stored``, read with the sign its ``_Unsigned`` attribute declares (netCDF's
    convention for unsigned bytes of formats without them, which ``xr.open_dataset(mask_and_scale=False)`` leaves):
    ``_Unsigned="true"`` on int8 reads -1 as 255, ``v + 2^bits`` for negative ``v``; ``"false"`` on unsigned the reverse."""
    declared = str(stored.attrs.get("_Unsigned", "")).lower()
    if stored.dtype.kind not in "iu" or {"true": "u", "false": "i"}.get(declared, stored.dtype.kind) == stored.dtype.kind:
        return out
    wrap = out.dtype.type(2 ** (8 * stored.dtype.itemsize))
    if stored.dtype.kind == "i":
        return out.where(stored >= 0, out + wrap)
    return out.where(stored < wrap / 2, out - wrap)


def unpacked_attrs(attrs: dict) -> dict:
    """``attrs`` without those that say how stored values map to data values (:data:`_PACKING`): an unpacked float's."""
    return {k: v for k, v in attrs.items() if k not in _PACKING}


#: attributes that say how stored values map to data values (nodata and CF packing), gone once applied
_PACKING = ("_FillValue", "missing_value", "scale_factor", "add_offset", "scales", "offsets", "_Unsigned")


def declared_packing(da: xr.DataArray) -> tuple[float, float]:
    """The ``(scale_factor, add_offset)`` a cube declares in its attributes and has not applied (CF packing, as
    ``rioxarray.open_rasterio`` without ``mask_and_scale`` and ``xr.open_dataset(mask_and_scale=False)`` leave it),
    ``(1.0, 0.0)`` for none; a scale or offset per band (rioxarray's ``scales`` / ``offsets``) raises. Only integers or floats
    read from integers (the encoding's ``dtype``) are packed: floats computed since (which keep the attributes) get a warning."""
    per_band = {key: tuple(da.attrs[key]) for key in ("scales", "offsets") if np.size(da.attrs.get(key, ())) > 1}
    if any(len(set(values)) > 1 for values in per_band.values()):
        raise ValueError(
            f"the cube{'' if da.name is None else f' {da.name!r}'} declares a scale and offset per band "
            f"(attributes {per_band}), which a band selection or reordering would not follow: open it with "
            "rioxarray.open_rasterio(path, mask_and_scale=True), which applies each band's, or apply them and remove the attributes")
    scale = float(da.attrs.get("scale_factor", per_band["scales"][0] if "scales" in per_band else 1.0))
    offset = float(da.attrs.get("add_offset", per_band["offsets"][0] if "offsets" in per_band else 0.0))
    stored = np.dtype(da.encoding.get("dtype", da.encoding.get("rasterio_dtype", da.dtype)))
    if (scale, offset) != (1.0, 0.0) and not (da.dtype.kind in "iu" or stored.kind in "iu"):
        # floats no longer as read (arithmetic drops the encoding, keeps the attributes): the values may be unpacked already
        warn_user(f"the cube{'' if da.name is None else f' {da.name!r}'} declares scale_factor {scale} and add_offset {offset} but "
                  "holds floats computed since it was read, taken as unpacked already; if they are the stored numbers, unpack "
                  "them (cube * scale_factor + add_offset), and remove the attributes either way", UserWarning)
        return 1.0, 0.0
    return scale, offset


#: where a cube may declare its nodata (rioxarray's order: the encoding's ``_FillValue``, then the attributes)
_NODATA = (("encoding", "_FillValue"), ("attrs", "_FillValue"), ("attrs", "missing_value"), ("attrs", "fill_value"), ("attrs", "nodata"))


def declared_nodata(da: xr.DataArray) -> float | None:
    """The nodata ``da`` declares (rioxarray's ``nodata``), or a ValueError naming the attribute and value its dtype
    cannot hold (a uint8 cube with nodata -9999, a uint16 one with 65535.5 or 'abc'), and what to do. NaN declared
    on integers (a float result's attributes kept by ``astype``) marks no value: None."""
    try:
        nodata = da.copy(deep=False).rio.nodata  # a fresh accessor: rioxarray caches the nodata it read on the object's
        if nodata is not None and da.dtype.kind == "b" and not np.isnan(float(nodata)):
            raise TypeError(f"a boolean cube holds data in both its values, and {nodata!r} would mark every such value missing "
                            "(an attribute kept from the cube it was computed from?)")
        return nodata if nodata is None else _held(nodata, da.dtype)
    except (OverflowError, ValueError, TypeError) as err:
        found = [(f"{place}[{key!r}]", getattr(da, place)[key]) for place, key in _NODATA if getattr(da, place).get(key) is not None]
        where, value = found[0] if found else ("nodata", None)
        if isinstance(value, (float, np.floating)) and np.isnan(value):
            return None
        raise ValueError(
            f"the cube{'' if da.name is None else f' {da.name!r}'} of dtype {da.dtype} declares nodata {value!r} in {where}, a value {da.dtype} cannot hold "
            f"({err}); correct it to the value that marks missing pixels (cube.rio.write_nodata(value)) or remove it "
            f"(del cube.{where}) if the cube has no nodata"
        ) from err


def _held(value: Any, dtype: np.dtype) -> Any:
    """``value`` itself where it is a number ``dtype`` holds (NaN included: it marks no value); a string, or an
    integer dtype's out-of-range or fractional value, raises."""
    number = float(value)
    exact = int(value) if isinstance(value, (int, np.integer)) else number  # a uint64's 2^64 - 1 is 2^64 as a float
    if dtype.kind in "iu" and not np.isnan(number) and not (float(exact).is_integer() and np.iinfo(dtype).min <= exact <= np.iinfo(dtype).max):
        raise OverflowError(f"{value!r} is not a {dtype} value")
    return value


def check_model(model: object) -> PPA:
    """``model`` as the cube layer takes it: a fitted :class:`~ppa_xr.PPA` (a TypeError naming PPA for any other
    object, scikit-learn's NotFittedError for an unfitted one)."""
    from ..model import PPA
    from ..model._sklearn import check_is_fitted

    if not isinstance(model, PPA):
        raise TypeError(f"expected a fitted ppa_xr.PPA model, got {type(model).__module__}.{type(model).__name__}; fit one with "
                        "cube.ppa.fit(...) or load one with ppa_xr.load_model(path)")
    check_is_fitted(model, "params_")
    return model


def model_features(obj: xr.DataArray | xr.Dataset, model: PPA, dim: Hashable | None) -> tuple[xr.DataArray, Hashable]:
    """Features of ``obj`` in the order the model was fitted on, band dim as one chunk (``model`` checked first)."""
    check_model(model)
    features = model.features_ or FeatureLabels(dim or "band", model.feature_labels_)  # a DataFrame's columns too
    if dim is not None and dim != features.dim:
        features = features.renamed(dim)
    _check_stacked(obj, features)
    da = features.select(feature_array(obj, features.dim), model.n_features_in_)
    if model.params_.used is not None:
        da = without_dropped([da], features.dim, model.params_.used)[0]
    if da.dtype == np.float32 and model.degrees_.max() > FLOAT32_MAX_DEGREE:
        warn_user(
            f"the model has degree {model.degrees_.max()} steps: in float32 the round trip loses up to about 1e-3 of the data's "
            f"range at degree 20 (1.4e-5 at 15); use cube.astype('float64') where the inverse must be exact",
            UserWarning)
    return _one_chunk_along(da, features.dim), features.dim


def _check_stacked(obj: xr.DataArray | xr.Dataset, features: FeatureLabels) -> None:
    """A model fitted on stacked dimensions (e.g. grid cells as features, S-mode) reads a cube stacked the same way."""
    if features.levels and features.dim not in obj.dims:
        levels = tuple(features.levels)
        raise ValueError(f"the model's features are stacked from the dimensions {levels} into {features.dim!r}, and the cube has "
                         f"no dimension {features.dim!r} (its dims are {tuple(obj.dims)}): stack it as the model was fitted, "
                         f"cube.stack({features.dim}={levels})")


def without_dropped(arrays: list[xr.DataArray], dim: Hashable, used: np.ndarray) -> list[xr.DataArray]:
    """The cubes with the features a reduced model leaves out (NaN at every fitting sample) read as 0, lazily: they
    do not make a pixel invalid, and the model ignores them (NaN in its inverse and reconstructions)."""
    mask = xr.DataArray(np.asarray(used, dtype=bool), dims=(dim,))
    return [da.where(mask, da.dtype.type(0)) if da.dtype.kind == "f" else da for da in arrays]


def _one_chunk_along(da: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """The core dimension as one chunk (a no-op, not even a graph layer, when it already is).

    The data's own chunks are read (``da.chunks``), not ``chunksizes``, which
    also demands that dask-backed coordinates agree (stackstac's per-item
    metadata coordinates need not)."""
    if da.chunks is not None and len(da.chunks[da.get_axis_num(dim)]) > 1:
        return da.chunk({dim: -1})
    return da


def common_units(da: xr.DataArray) -> str | None:
    """The one unit all features share (``units`` as a string, or rioxarray's per-band tuple of equal
    strings), else None: PPA components are then in that unit, as PCA's are."""
    units = da.attrs.get("units")
    if isinstance(units, str):
        return units or None
    if isinstance(units, (tuple, list, np.ndarray)) and len(units) and all(isinstance(u, str) and u == units[0] for u in units):
        return units[0] or None
    return None


def _component_units(da: xr.DataArray, model: PPA) -> str | None:
    """The unit of the model's components and errors: the features' common unit, none for a whitening
    model (standardizing or noise-whitening: its components and errors are in whitened units)."""
    return None if model.whitened_units_ else common_units(da)


def squared_units(da: xr.DataArray, model: PPA) -> str | None:
    """The unit of the model's squared errors: ``(u)^2`` of the features' common unit ``u``, ``squared standardized
    units`` (or noise units) for a whitening model, None where the features have no common unit."""
    units = _component_units(da, model)
    return f"({units})^2" if units else model.whitened_units_ and f"squared {model.whitened_units_}"
