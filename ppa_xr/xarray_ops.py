"""PPA on labelled (dask) cubes: sampling valid pixels, lazy chunk-wise maps, geo bookkeeping.

Every map here is a core kernel mapped over the chunks (:func:`map_kernel`),
with the band (feature) dimension as one chunk: every other dimension (y, x,
time, ...) and its chunks are left as they are, each chunk reaches the kernel
as it lies in memory, and nothing is computed until asked for.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from dataclasses import dataclass
from functools import partial
from typing import Any

import dask
import numpy as np
import xarray as xr

from . import evaluation
from .core import kernels
from .labels import FeatureLabels
from .model import PPA
from .noise import noise_covariance, noise_moments
from .pixels import FitSample, PixelSample, held_by, pixel_keys, row_digest

COMPONENT = "component"
#: above this degree a float32 round trip loses more than 1e-4 of the data's range (measured; docs/method.md)
FLOAT32_MAX_DEGREE = 15
# attributes that describe the values of the input bands, wrong for components or errors
_VALUE_ATTRS = ("long_name", "units", "scale_factor", "add_offset", "valid_range", "valid_min", "valid_max", "description", "standard_name")


# --------------------------------------------------------------------------- inputs
def feature_array(obj: xr.DataArray | xr.Dataset, dim: Hashable) -> xr.DataArray:
    """The cube as a floating DataArray with features along ``dim``; nodata -> NaN.

    A Dataset's data variables become the features, in ``obj.data_vars`` order,
    with their names as the labels of ``dim``. Values equal to a declared
    nodata (rioxarray's ``nodata`` / ``_FillValue`` of a file opened unmasked)
    become NaN. Floats stay as they are; 8/16-bit integers become float32 and
    wider integers float64, so no value is rounded.
    """
    if isinstance(obj, xr.Dataset):
        if not obj.data_vars:
            raise ValueError("the Dataset has no data variables to use as features")
        shapes = {name: obj[name].dims for name in obj.data_vars}
        if len(set(shapes.values())) > 1:
            raise ValueError(f"all data variables must share their dimensions to be stacked as features, got {shapes}")
        if dim in obj.dims:
            raise ValueError(f"the Dataset already has a dimension {dim!r}; pass another dim for its variables")
        masked = obj.map(_masked_float, keep_attrs=True)
        stacked = masked.to_dataarray(dim=dim)
        stacked.attrs = dict(obj.attrs)
        return stacked
    if not isinstance(obj, xr.DataArray):
        raise TypeError(f"expected an xarray DataArray or Dataset, got {type(obj).__name__}")
    if dim not in obj.dims:
        raise ValueError(
            f"the cube has no dimension {dim!r} (its dims are {tuple(obj.dims)}); pass dim= naming the band/feature "
            f"dimension, or rename yours, e.g. cube.rename({{'bands': {dim!r}}})"
        )
    return _masked_float(described_bands(obj, dim))


def described_bands(da: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """Bands labelled by the file's band descriptions where rioxarray left its default labels 1..n.

    ``rioxarray.open_rasterio`` numbers the bands 1..n and keeps the
    descriptions (e.g. ``B1 .. B11``) in ``long_name``; the same scene opened
    another way (``open_landsat8_sample``, a band stack, a Dataset) is
    labelled by name. Using the descriptions makes a model fitted either way
    apply to the other.
    """
    names = da.attrs.get("long_name")
    n = da.sizes[dim]
    default = dim in da.coords and np.array_equal(da[dim].values, np.arange(1, n + 1))
    if default and isinstance(names, (tuple, list)) and len(names) == n and len({str(v) for v in names}) == n:
        da = da.assign_coords({dim: [str(v) for v in names]})
        da.attrs = {k: v for k, v in da.attrs.items() if k != "long_name"}
    return da


def _masked_float(da: xr.DataArray) -> xr.DataArray:
    import rioxarray  # noqa: F401  (registers .rio)

    if da.dtype.kind not in "iufb":
        raise TypeError(f"feature values must be numeric, got dtype {da.dtype} for {da.name!r}")
    dtype = np.float64 if (da.dtype == np.float64 or (da.dtype.kind in "iu" and da.dtype.itemsize > 2)) else np.float32
    nodata = da.rio.nodata
    out = da.copy(deep=False) if da.dtype == dtype else da.astype(dtype)  # never the caller's object; +-inf become NaN in the kernels
    if nodata is not None and not np.isnan(nodata):
        out = out.where(da != nodata)
    out.attrs = {k: v for k, v in da.attrs.items() if k not in ("_FillValue", "missing_value")}
    return out


def _copy_geo(src: xr.DataArray, out: xr.DataArray) -> xr.DataArray:
    """Carry rioxarray's CRS and transform explicitly; NaN marks invalid pixels of ``out``."""
    from rioxarray.exceptions import RioXarrayError

    try:
        crs, transform, spatial = src.rio.crs, src.rio.transform(recalc=False), {src.rio.x_dim, src.rio.y_dim}
    except RioXarrayError:  # no x/y dimensions: not a raster
        return out
    if crs is None or not spatial <= set(out.dims):
        return out
    return out.rio.write_crs(crs).rio.write_transform(transform).rio.write_nodata(np.nan, encoded=False)


def model_features(obj: xr.DataArray | xr.Dataset, model: PPA, dim: Hashable | None) -> tuple[xr.DataArray, Hashable]:
    """Features of ``obj`` in the order the model was fitted on, band dim as one chunk."""
    features = model.features_ or FeatureLabels(dim or "band")
    if dim is not None and dim != features.dim:
        features = features.renamed(dim)
    da = features.select(feature_array(obj, features.dim), model.n_features_in_)
    if da.dtype == np.float32 and model.degrees_.max() > FLOAT32_MAX_DEGREE:
        warnings.warn(
            f"the model has degree {model.degrees_.max()} steps: in float32 the round trip loses up to about 1e-3 of the data's "
            f"range at degree 20 (1.4e-5 at 15); use cube.astype('float64') where the inverse must be exact",
            UserWarning, stacklevel=3,
        )
    return _one_chunk_along(da, features.dim), features.dim


def _one_chunk_along(da: xr.DataArray, dim: Hashable) -> xr.DataArray:
    """The core dimension as one chunk (a no-op, not even a graph layer, when it already is).

    The data's own chunks are read (``da.chunks``), not ``chunksizes``, which
    also demands that dask-backed coordinates agree (stackstac's per-item
    metadata coordinates need not)."""
    if da.chunks is not None and len(da.chunks[da.get_axis_num(dim)]) > 1:
        return da.chunk({dim: -1})
    return da


def _threads(da: xr.DataArray) -> int | None:
    """Kernel threads: one per task under dask (the scheduler is parallel), all cores otherwise."""
    return 1 if da.chunks is not None else None


def _apply_block(block: np.ndarray, func, axis: int, keep: bool, kwargs: dict) -> np.ndarray:
    """A kernel on one chunk whose features lie along ``axis``: a view with them last (no copy;
    a band-first raster chunk is then feature-major, the kernels' fast layout), the result put back."""
    out = func(np.moveaxis(block, axis, -1), **kwargs)
    return np.moveaxis(out, -1, axis) if keep else out


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
    """The unit of the model's components and errors: the features' common unit, none for a
    standardizing model (its components and errors are in standardized units)."""
    return None if model.standardize else common_units(da)


def map_kernel(
    func, da: xr.DataArray, in_dim: Hashable, out_dim: Hashable | None, size: int, long_name: str | None,
    units: str | None = None, **kwargs: Any,
) -> xr.DataArray:
    """A kernel mapped over the chunks, ``in_dim`` replaced by ``out_dim`` (or dropped), other dims and chunks kept.

    ``in_dim`` must be one chunk. Each chunk is handed to the kernel as it is
    in memory (``dask.array.map_blocks``, not ``apply_ufunc``, whose
    ``apply_gufunc`` would first copy every chunk into a pixel-major array);
    the kernel and its parameters enter the graph once. With a ``long_name``
    the output holds other quantities than the input, so the input's value
    attributes (units, scale, band names) are replaced by it and ``units``.
    """
    axis, keep = da.get_axis_num(in_dim), out_dim is not None
    block = partial(_apply_block, func=func, axis=axis, keep=keep, kwargs={"threads": _threads(da), **kwargs})
    if da.chunks is None:
        data = block(da.values)
    else:
        chunks = tuple((size,) if i == axis else c for i, c in enumerate(da.data.chunks)) if keep else None
        data = da.data.map_blocks(
            block, dtype=da.dtype, chunks=chunks, drop_axis=[] if keep else axis,
            meta=np.empty((0,) * (da.ndim if keep else da.ndim - 1), da.dtype),
        )
    dims = [out_dim if d == in_dim else d for d in da.dims if d != in_dim or keep]
    coords = {name: coord for name, coord in da.coords.items() if in_dim not in coord.dims}
    attrs = dict(da.attrs)
    if long_name is not None:
        attrs = {k: v for k, v in attrs.items() if k not in _VALUE_ATTRS} | {"long_name": long_name} | ({"units": units} if units else {})
    return _copy_geo(da, xr.DataArray(data, dims=dims, coords=coords, attrs=attrs, name=da.name))


# --------------------------------------------------------------------------- sampling
#: pixels sampled when ``n_samples`` is not given
DEFAULT_SAMPLES = 200_000
#: spatial blocks a cube is cut into for the degree selection's grouped cross-validation
N_BLOCKS = 100
@dataclass(frozen=True)
class Sample:
    """Sampled pixels ``values`` (n, d) in order of their ``keys``, the spatial block of each
    (``groups``), their flat ``index``, valid pixels seen, and which pixels they are (``drawn``)."""

    values: np.ndarray
    keys: np.ndarray
    groups: np.ndarray
    index: np.ndarray
    n_valid: int
    drawn: PixelSample


@dataclass(frozen=True)
class _Layout:
    """Global shape of the pixel dims and how many blocks each is cut into (1: not blocked)."""

    shape: tuple[int, ...]
    tiles: tuple[int, ...]

    @classmethod
    def of(cls, da: xr.DataArray, dim: Hashable) -> _Layout:
        """Blocks over the raster's x/y dims when it has them (pixels of one place at other times
        share a block), else over every pixel dim, about :data:`N_BLOCKS` in all."""
        pixel_dims = [d for d in da.dims if d != dim]
        spatial = [d for d in pixel_dims if str(d) in ("x", "y", "lon", "lat", "longitude", "latitude")]
        blocked = [d for d in (spatial if len(spatial) == 2 else pixel_dims) if da.sizes[d] > 1]
        per_dim = N_BLOCKS ** (1 / max(len(blocked), 1))
        tiles = tuple(max(1, min(da.sizes[d], round(per_dim))) if d in blocked else 1 for d in pixel_dims)
        return cls(tuple(da.sizes[d] for d in pixel_dims), tiles)

    def index_and_block(self, offsets: tuple[int, ...], sizes: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Global flat index and block id of every pixel of a chunk at ``offsets`` (C order)."""
        index, block = np.zeros(1, np.int64), np.zeros(1, np.int64)
        for start, size, total, tiles in zip(offsets, sizes, self.shape, self.tiles):
            position = np.arange(start, start + size, dtype=np.int64)
            index = np.add.outer(index * total, position).ravel()
            block = np.add.outer(block * tiles, position * tiles // total).ravel()
        return index, block


def fitted_shares(da: xr.DataArray, dim: Hashable, sample: FitSample | None) -> tuple[PixelSample, ...]:
    """The shares of a model's fitting sample drawn from this cube: same pixel grid, and the values
    of the share's witness pixel (its smallest key) unchanged here, so another scene or date on the
    same grid is not mistaken for the fitting cube (older records without a witness match by grid)."""
    if sample is None:
        return ()
    pixel_dims = [d for d in da.dims if d != dim]
    shares = sample.of_shape(tuple(da.sizes[d] for d in pixel_dims))
    return tuple(share for share in shares if share.witness is None or _witness_holds(da, dim, pixel_dims, share.witness))


def _witness_holds(da: xr.DataArray, dim: Hashable, pixel_dims: list, witness: tuple[int, str]) -> bool:
    position = np.unravel_index(witness[0], [da.sizes[d] for d in pixel_dims])
    values = np.asarray(da.isel(dict(zip(pixel_dims, map(int, position)))).transpose(dim).values)
    return bool(np.isfinite(values).all()) and row_digest(values) == witness[1]


def _smallest_keys(keys: np.ndarray, *arrays: np.ndarray, n: int) -> tuple[np.ndarray, ...]:
    if len(keys) > n:
        keep = np.argpartition(keys, n)[:n]
        return keys[keep], *(a[keep] for a in arrays)
    return keys, *arrays


def _block_sample(block: np.ndarray, seed: int, offsets: tuple[int, ...], layout: _Layout, n: int, exclude: tuple[PixelSample, ...]) -> tuple:
    """The ``n`` valid pixels of one chunk with the smallest keys (none of ``exclude``): keys, values, blocks, flat indices, valid count."""
    values = block.reshape(-1, block.shape[-1])
    index, blocks = layout.index_and_block(offsets, block.shape[:-1])
    valid = np.isfinite(values).all(axis=1) & ~held_by(exclude, index)
    return *_smallest_keys(pixel_keys(seed, index[valid]), values[valid], blocks[valid], index[valid], n=n), int(valid.sum())


def _merge_samples(a: tuple, b: tuple, n: int) -> tuple:
    return *_smallest_keys(*(np.concatenate([x, y]) for x, y in zip(a[:4], b[:4])), n=n), a[4] + b[4]


def sample_valid_pixels(
    obj: xr.DataArray | xr.Dataset, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = None,
    return_groups: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """A uniform random sample (without replacement) of valid pixels, as ``(n, d)``.

    A pixel is valid when every feature is finite and not nodata. Every pixel
    gets a uniform key, a hash of ``random_state`` and its global index
    (:func:`pixel_keys`), and the ``n_samples`` smallest keys are kept (a
    bottom-k sample), in key order: one pass over the chunks, merged in a tree,
    memory about ``n_samples x d`` per chunk in flight; the cube itself is never
    loaded. The same cube and seed give the same sample under any chunking and
    scheduler. With ``return_groups`` the spatial block of each sampled pixel
    (about :data:`N_BLOCKS` blocks over x/y) is returned too.
    """
    sample = sample_features(feature_array(obj, dim), dim, n_samples, random_state)
    return (sample.values, sample.groups) if return_groups else sample.values


def sample_features(
    da: xr.DataArray, dim: Hashable, n_samples: int | None, random_state: int | None, exclude: FitSample | None = None,
    seed: int | None = None, max_chunks: int | None = None, empty_ok: bool = False, default: int = DEFAULT_SAMPLES,
) -> Sample:
    """:func:`sample_valid_pixels` of a cube already prepared by :func:`feature_array`.

    ``exclude``: leave out the pixels of a model's fitting sample (those it
    recorded for a cube of this shape), for held-out estimates; ``seed``
    replaces the one drawn from ``random_state`` (to draw a recorded sample
    again); ``max_chunks``: read only that many chunks, chosen at random (a
    quick sample that costs a few chunks, not a pass over the cube);
    ``empty_ok``: return an empty sample instead of raising when no pixel is
    valid. ``n_samples=None``: up to ``default`` pixels, all valid pixels of
    a smaller scene without a warning (an explicit larger request warns).
    """
    rng = np.random.default_rng(random_state)
    sample = _draw(da, dim, _checked_count(default if n_samples is None else n_samples), int(rng.integers(2**63)) if seed is None else seed, exclude, max_chunks, rng)
    if sample.n_valid == 0 and not empty_ok:
        raise ValueError("the cube has no valid pixel (every pixel has a NaN or nodata feature)")
    if n_samples is not None and sample.n_valid < n_samples and max_chunks is None:
        warnings.warn(f"only {sample.n_valid} valid pixels (asked for n_samples={n_samples}); using all of them", UserWarning, stacklevel=4)
    return sample


def _checked_count(n_samples: int | None) -> int:
    n_samples = DEFAULT_SAMPLES if n_samples is None else n_samples
    if not (isinstance(n_samples, (int, np.integer)) and n_samples >= 1):
        raise ValueError(f"n_samples must be a positive int, got {n_samples!r}")
    return int(n_samples)


def _draw(da: xr.DataArray, dim: Hashable, n: int, seed: int, exclude: FitSample | None, max_chunks: int | None, rng) -> Sample:
    """The bottom-``n`` sample of the cube's valid pixels under ``seed``, in one pass over its chunks (or ``max_chunks``)."""
    return _drawn(dask.compute(_lazy_draw(da, dim, n, seed, exclude, max_chunks, rng))[0], seed, _Layout.of(da, dim))


def _lazy_draw(da: xr.DataArray, dim: Hashable, n: int, seed: int, exclude: FitSample | None, max_chunks: int | None, rng):
    """:func:`_draw`'s reduction, not yet computed (a delayed tuple, or the tuple itself for an in-memory cube)."""
    layout = _Layout.of(da, dim)
    excluded = fitted_shares(da, dim, exclude)
    da = da.transpose(..., dim)
    if da.chunks is None:
        return _block_sample(np.asarray(da.values), seed, (0,) * (da.ndim - 1), layout, n, excluded)
    data = da.data.rechunk({da.ndim - 1: -1})
    starts = [np.cumsum((0,) + c[:-1]) for c in data.chunks[:-1]]
    blocks = data.to_delayed()
    chosen = list(np.ndindex(blocks.shape))
    if max_chunks is not None and max_chunks < len(chosen):
        chosen = [chosen[i] for i in np.sort(rng.choice(len(chosen), max_chunks, replace=False))]
    parts = [dask.delayed(_block_sample)(blocks[i], seed, tuple(int(s[j]) for s, j in zip(starts, i)), layout, n, excluded) for i in chosen]
    while len(parts) > 1:  # tree reduction: at most n x d per merge
        pairs = [parts[i : i + 2] for i in range(0, len(parts), 2)]
        parts = [dask.delayed(_merge_samples)(*pair, n) if len(pair) == 2 else pair[0] for pair in pairs]
    return parts[0]


def _drawn(result: tuple, seed: int, layout: _Layout) -> Sample:
    keys, values, groups, index, count = result
    order = np.argsort(keys, kind="stable")
    values, keys, index = values[order], keys[order], index[order]
    witness = (int(index[0]), row_digest(values[0])) if len(keys) else None
    return Sample(values, keys, groups[order], index, count, PixelSample(seed, int(keys.max(initial=0)), len(keys), layout.shape, witness))


def sample_cubes(
    cubes: list[xr.DataArray], dim: Hashable, n_samples: int | None, random_state: int | None, along: Any = None,
) -> tuple[np.ndarray, np.ndarray, FitSample, Any]:
    """One uniform sample of the valid pixels of several cubes (any grids): rows, groups, and the sample per cube.

    Each cube's pixels get keys under their own seed (the first cube's is the
    seed a single-cube fit draws, so one cube gives :func:`sample_features`'s
    sample); the ``n_samples`` smallest keys of the union are kept, so each
    cube contributes in proportion to its valid pixels. A cube's share is
    recorded as its pixels with keys up to the largest key kept from it.
    Groups are the spatial blocks, distinct per cube. ``along``: other lazy
    reductions over the same cubes (e.g. the noise estimate's), computed in
    the same pass over their chunks and returned last.
    """
    n = _checked_count(n_samples)
    seed = int(np.random.default_rng(random_state).integers(2**63))
    seeds = [seed] + [int(np.random.default_rng([seed, i]).integers(2**63)) for i in range(1, len(cubes))]
    results, along = dask.compute([_lazy_draw(da, dim, n, s, None, None, None) for da, s in zip(cubes, seeds)], along)
    samples = [_drawn(result, s, _Layout.of(da, dim)) for result, s, da in zip(results, seeds, cubes)]
    count = sum(sample.n_valid for sample in samples)
    if count == 0:
        raise ValueError(f"the {'cubes have' if len(cubes) > 1 else 'cube has'} no valid pixel (every pixel has a NaN or nodata feature)")
    if n_samples is not None and count < n_samples:
        warnings.warn(f"only {count} valid pixels (asked for n_samples={n_samples}); using all of them", UserWarning, stacklevel=4)
    keys = np.concatenate([sample.keys for sample in samples])
    cube = np.repeat(np.arange(len(cubes)), [len(sample.keys) for sample in samples])
    kept = np.argsort(keys, kind="stable")[:n]
    block_span = 1 + max(int(sample.groups.max(initial=0)) for sample in samples)
    groups = cube * block_span + np.concatenate([sample.groups for sample in samples])
    shares = []
    for i, sample in enumerate(samples):
        mine = keys[kept][cube[kept] == i]
        witness = sample.drawn.witness if len(mine) else None  # its first row, the smallest key, is kept when any is
        shares.append(PixelSample(sample.drawn.seed, int(mine.max(initial=0)), len(mine), sample.drawn.shape, witness))
    return np.concatenate([sample.values for sample in samples])[kept], groups[kept], FitSample(tuple(shares)), along


# --------------------------------------------------------------------------- maps
def fit(
    obj: xr.DataArray | xr.Dataset, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = None,
    **ppa_params: Any,
) -> PPA:
    """Fit :class:`~ppa_xr.PPA` on a random sample of the valid pixels of a cube.

    ``progress=True`` reports the fit's steps on stderr (the sampling pass is a
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
    gives the covariance directly, in the cube's band order.
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
    """
    if isinstance(cubes, (xr.DataArray, xr.Dataset)) or not len(cubes):
        raise TypeError("fit_pooled takes a list of cubes, e.g. fit_pooled([scene_a, scene_b]); for one cube use cube.ppa.fit")
    progress, noise = ppa_params.pop("progress", False), ppa_params.pop("noise", None)
    if isinstance(noise, str) and noise != "shift":
        raise ValueError(f"noise must be 'shift' (estimated from neighbouring pixels) or a (d, d) noise covariance, got {noise!r}")
    PPA(random_state=random_state, **ppa_params, noise_cov=None if noise is None else np.eye(2)).check_params()  # fail before any pass
    arrays = [feature_array(obj, dim) for obj in cubes]
    features = FeatureLabels.of(arrays[0], dim, variables=isinstance(cubes[0], xr.Dataset))
    arrays = [features.select(da, arrays[0].sizes[dim]) for da in arrays]
    shift = [noise_moments(da, dim) for da in arrays] if isinstance(noise, str) else None  # lazy: in the sampling pass
    values, groups, sample, shift = sample_cubes(arrays, dim, n_samples, random_state, along=shift)
    if noise is not None:
        ppa_params["noise_cov"] = noise_covariance(shift, arrays[0].sizes[dim]) if shift is not None else noise
    model = PPA(random_state=random_state, **ppa_params)
    model.check_params(arrays[0].sizes[dim])
    return model.fit(values, groups=groups, features=features, sample=sample, progress=progress)


def transform(
    obj: xr.DataArray | xr.Dataset, model: PPA, n_components: int | None = None, dim: Hashable | None = None, check: bool = True,
) -> xr.DataArray:
    """Lazy PPA components: ``component`` (1..k) replaces the band dimension; NaN where a pixel is invalid.

    ``check=True``: first compare PPA with its own PCA on a quick sample of the
    cube (:data:`CHECK_SAMPLES` pixels from at most :data:`CHECK_CHUNKS` chunks,
    outside the fitting sample; computed now, the transform stays lazy) and
    raise :class:`~ppa_xr.evaluation.ShiftWarning` when PPA is worse at some
    ``k <= n_components`` (:func:`evaluate` shows the curves).
    """
    da, dim = model_features(obj, model, dim)
    k = model.n_components_ if n_components is None else kernels.check_components(n_components, model.n_features_in_)
    if check:
        warn_on_shift(da, dim, model, k)
    out = map_kernel(kernels.forward, da, dim, COMPONENT, k, "PPA component", _component_units(da, model), params=model.params_, n_components=k)
    return out.assign_coords({COMPONENT: np.arange(1, k + 1)}).rename(_name(obj, "ppa"))


#: pixels the transfer check of :func:`transform` compares PPA and PCA on, and the chunks it reads them from at most
CHECK_SAMPLES, CHECK_CHUNKS = 5000, 8
#: fewer held-out pixels than this (a scene fitted on nearly all its pixels) leave nothing to check
MIN_CHECK_PIXELS = 100


def evaluate(
    obj: xr.DataArray | xr.Dataset, model: PPA, n_samples: int = CHECK_SAMPLES, dim: Hashable | None = None,
    random_state: int | None = 0, max_chunks: int | None = None,
) -> xr.Dataset:
    """PPA against its own PCA on a sample of this cube: both error curves and their ratio over ``k``, without refitting.

    The sample is ``n_samples`` valid pixels outside the model's fitting
    sample, from every chunk (one pass) or ``max_chunks`` random chunks (a
    quick look). Returns, over ``component`` = k = 1..d-1 components kept:
    ``error_ppa`` and ``error_pca`` (squared error summed over bands, mean over
    pixels), ``relative_error`` (``100 e_PPA / e_PCA``) and its lower bound
    ``relative_error_low``; ``attrs["worse_at"]`` lists the k at which PPA is
    worse beyond sampling noise (:func:`ppa_xr.evaluation.compare_errors`).
    """
    da, dim = model_features(obj, model, dim)
    sample = sample_features(da, dim, n_samples, random_state, exclude=model.sample_, max_chunks=max_chunks, empty_ok=True)
    if sample.n_valid < 2:
        raise ValueError(
            f"{sample.n_valid} valid pixels of this cube lie outside the model's fitting sample"
            f"{' in the chunks read' if max_chunks else ''}: nothing to evaluate on"
            f"{'; pass max_chunks=None to read every chunk' if max_chunks else ' (the model saw every pixel: evaluate it on another scene)'}"
        )
    comparison = evaluation.compare_errors(model, sample.values)
    units = _component_units(da, model)
    k = xr.DataArray(np.arange(1, model.n_features_in_), dims=COMPONENT, attrs={"long_name": "components kept"})
    error = {"long_name": "squared reconstruction error summed over bands, mean over pixels"} | ({"units": f"({units})^2"} if units else {})
    return xr.Dataset(
        {
            "error_ppa": (COMPONENT, comparison.ppa, error),
            "error_pca": (COMPONENT, comparison.pca, error | {"long_name": error["long_name"] + ", PCA of the fitting sample"}),
            "relative_error": (COMPONENT, comparison.relative, {"long_name": "100 x PPA error / PCA error", "units": "%"}),
            "relative_error_low": (COMPONENT, comparison.low(), {
                "long_name": f"lower confidence bound of relative_error, simultaneous over k at {evaluation.LEVEL:.0%}", "units": "%"}),
        },
        coords={COMPONENT: k},
        attrs={"n_pixels": comparison.n, "worse_at": comparison.worse_at().tolist(),
               "pixels": "held out: valid pixels outside the model's fitting sample" + (f", from {max_chunks} random chunks" if max_chunks else "")},
    )


def warn_on_shift(da: xr.DataArray, dim: Hashable, model: PPA, k: int) -> None:
    """:class:`~ppa_xr.evaluation.ShiftWarning` when PPA is worse than its PCA at some ``k' <= k`` on a quick sample."""
    sample = sample_features(da, dim, CHECK_SAMPLES, 0, exclude=model.sample_, max_chunks=CHECK_CHUNKS, empty_ok=True)
    if sample.n_valid >= MIN_CHECK_PIXELS:
        comparison = evaluation.compare_errors(model, sample.values)
        message = evaluation.shift_message(comparison, k, f"{comparison.n} pixels checked")
        if message:
            warnings.warn(message, evaluation.ShiftWarning, stacklevel=4)


def inverse_transform(scores: xr.DataArray, model: PPA, dim: Hashable = COMPONENT) -> xr.DataArray | xr.Dataset:
    """Lazy map of ``k <= d`` components back to the fitted band dimension and labels
    (a Dataset with one variable per feature when the model was fitted on a Dataset)."""
    if not isinstance(scores, xr.DataArray) or dim not in scores.dims:
        raise ValueError(f"expected a DataArray with a {dim!r} dimension (the output of transform)")
    if scores.dtype.kind not in "iuf":
        raise TypeError(f"components must be real numbers, got dtype {scores.dtype}")
    k, d = kernels.check_components(scores.sizes[dim], model.n_features_in_, f"the number of components along {dim!r}"), model.n_features_in_
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
    out = features.attach(map_kernel(kernels.inverse, scores, dim, features.dim, d, "PPA inverse transform", common_units(scores), params=model.params_).drop_vars(dim, errors="ignore"))
    return out.to_dataset(dim=features.dim) if features.variables else out


def reconstruct(obj: xr.DataArray | xr.Dataset, model: PPA, n_components: int, dim: Hashable | None = None) -> xr.DataArray:
    """Lazy reconstruction from the first ``n_components`` components (fused: one task per chunk)."""
    k = kernels.check_components(n_components, model.n_features_in_)
    da, dim = model_features(obj, model, dim)
    out = map_kernel(kernels.reconstruct, da, dim, dim, model.n_features_in_, None, params=model.params_, n_components=k)
    return (model.features_ or FeatureLabels(dim)).attach(out).rename(_name(obj, "reconstruction"))


def reconstruction_error(obj: xr.DataArray | xr.Dataset, model: PPA, n_components: int, dim: Hashable | None = None) -> xr.DataArray:
    """Lazy per-pixel squared reconstruction error ``sum_b (x_b - x^_b)^2`` with ``n_components`` kept."""
    k = kernels.check_components(n_components, model.n_features_in_)
    da, dim = model_features(obj, model, dim)
    name = f"squared reconstruction error summed over bands, {k} PPA components"
    units = _component_units(da, model)
    out = map_kernel(kernels.squared_error, da, dim, None, 0, name, units and f"({units})^2", params=model.params_, n_components=k)
    return out.rename(_name(obj, "reconstruction_error"))


def _name(obj: xr.DataArray | xr.Dataset, what: str) -> str:
    name = getattr(obj, "name", None)
    return f"{name}_{what}" if isinstance(name, str) else what
