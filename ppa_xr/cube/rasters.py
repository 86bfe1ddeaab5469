"""Cubes in and out of files: one-file-per-band scenes stacked into a ``(band, y, x)`` cube, any cube opened
by its suffix (GeoTIFF, netCDF, zarr), and results written by suffix, atomically, as the CLI writes them."""

from __future__ import annotations

import contextlib
import numbers
import os
import re
import warnings
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import dask.array
import numpy as np
import xarray as xr

from ..core.checks import warn_user
from ..core.docstrings import Chunks
from .._atomic import as_path, as_paths, check_output, replace_atomically, special, suffix_of
from .inputs import COMPONENT, COMPONENT_NAME, common_units, declared_packing, float_dtype, masked_float

#: suffixes opened with xarray (netCDF, zarr stores); any other file is opened as a raster (rioxarray: GeoTIFF, VRT, JPEG 2000, ...)
DATA_SUFFIXES = (".nc", ".zarr")
#: suffixes a result can be written to
OUTPUT_SUFFIXES = (".tif", ".tiff", ".nc", ".zarr")


def open_band_stack(
    paths: Sequence[str | os.PathLike], bands: Sequence[Hashable] | None = None, chunks: Chunks = None, masked: bool = False,
    resolution: float | None = None, resampling: str = "average",
) -> xr.DataArray:
    """Stack single-band rasters (one GeoTIFF per band, as Landsat ships) into a ``(band, y, x)`` cube.

    ``bands`` labels the bands (default: ``ppa_xr.cube.rasters.band_name`` of each file, so
    ``LC08_TEST_B4.TIF`` and ``LC08_OTHER_B4.TIF`` are both ``B4``);
    ``chunks`` and ``masked`` go to :func:`rioxarray.open_rasterio`. Every file
    must have one band and the same grid (shape, CRS and transform), or, with
    ``resolution``, the bands on other grids are resampled to the grid of the
    first file at that resolution (Sentinel-2's 10, 20 and 60 m bands), lazily:
    each chunk is warped as it is read (a GDAL warped VRT, as
    ``rio.reproject_match`` computes it at once). When the files declare
    different nodata values, each band's own nodata becomes NaN (a float cube
    with NaN as its nodata), so no nodata pixel is used as data.

    Parameters
    ----------
    paths : sequence of path
        One single-band raster per band, on one grid (or several, with ``resolution``).
    bands : sequence, optional
        Band labels (default: ``ppa_xr.cube.rasters.band_name`` of each file).
    chunks, masked
        Passed to :func:`rioxarray.open_rasterio`.
    resolution : float, optional
        The pixel size (in the CRS's units, e.g. 20 for 20 m) of the grid to stack on: that of the first
        file with it; the others are resampled to it.
    resampling : str
        How bands are resampled to it, a :class:`rasterio.enums.Resampling` name: ``"average"`` (default;
        means of finer pixels, coarser pixels repeated), ``"bilinear"``, ``"nearest"``, ...

    Returns
    -------
    xr.DataArray
        ``(band, y, x)``, lazy when ``chunks`` is given.

    Raises
    ------
    ValueError
        Files on different grids (each one's resolution named) without ``resolution``, a ``resolution``
        no file has, with several bands, repeated, or labels that repeat.
    """
    files = [as_path(p, "a band's file") for p in paths]
    labels = _band_labels(files, bands)
    grid = None if resolution is None else _grid_at(files, resolution, resampling)
    layers = [read_raster(p, grid, chunks=chunks, masked=masked) for p in files]
    _check_grid(files, layers)
    each = len({layer.rio.nodata for layer in layers}) > 1 or len({declared_packing(layer) for layer in layers}) > 1
    if each:  # one nodata or packing per band: mask and unpack each with its own (concat would drop the conflicting attributes)
        dtype = np.result_type(np.float32, *(layer.dtype for layer in layers))
        layers = [masked_float(layer, dtype) for layer in layers]
        for layer in layers:
            layer.encoding.pop("_FillValue", None)  # masked layers hold NaN; an integer fill value no longer applies
    cube = xr.concat([layer.squeeze("band", drop=True) for layer in layers], dim="band", combine_attrs="drop_conflicts")
    cube = cube.assign_coords(band=labels)
    return cube.rio.write_nodata(np.nan, encoded=False) if each else cube


@dataclass(frozen=True)
class Grid:
    """A raster grid that bands are resampled to: CRS, transform and size, and the resampling method."""

    crs: Any
    transform: Any
    width: int
    height: int
    resampling: Any

    def holds(self, src: Any) -> bool:
        """Whether the open dataset ``src`` lies on this grid already."""
        return bool(src.crs == self.crs and src.transform == self.transform and (src.width, src.height) == (self.width, self.height))


def _grid_at(files: list[Path], resolution: float, resampling: str) -> Grid:
    """The grid of the first file whose pixels are ``resolution`` wide and high (a ValueError naming each file's)."""
    import rasterio
    from rasterio.enums import Resampling

    if resampling not in Resampling.__members__:
        raise ValueError(f"resampling={resampling!r} is not a rasterio resampling method; use one of {list(Resampling.__members__)}")
    found = {}
    for path in files:
        with rasterio.open(path) as src:
            found[path] = src.res
            if np.allclose(np.abs(src.res), resolution, rtol=1e-9):
                return Grid(src.crs, src.transform, src.width, src.height, Resampling[resampling])
    raise ValueError(f"no file has pixels of {resolution:g}; their resolutions: {_resolutions(found)}: pass one of "
                     f"{sorted({abs(r[0]) for r in found.values()})}")


def _resolutions(found: dict[Path, tuple[float, float]]) -> str:
    """Each file's pixel size, in words."""
    return ", ".join(f"{path.name} {abs(res[0]):g}" + (f" x {abs(res[1]):g}" if abs(res[0]) != abs(res[1]) else "") for path, res in found.items())


def read_raster(path: Path, grid: Grid | None = None, **kwargs: Any) -> xr.DataArray:
    """:func:`rioxarray.open_rasterio` of one raster file, its mask honoured, resampled to ``grid`` when it is
    given and the file is on another (lazily: a warped VRT), refusing a file of several subdatasets (HDF,
    netCDF through GDAL), which it reads as Datasets.

    A file whose pixels are masked by an internal (or ``.msk``) mask or an alpha band is read masked
    (``masked=True``: floats, NaN where the mask is 0, chunk by chunk as the data is read), and its alpha
    bands are dropped: they say which pixels are valid, they are not features. Nodata values are
    masked later, by :func:`~ppa_xr.cube.inputs.masked_float`."""
    import rasterio
    import rioxarray

    with rasterio.open(path) as src, _on_grid(src, grid) as source:
        masked, alpha = _mask_layout(source)
        opened = rioxarray.open_rasterio(path if source is src else source, **kwargs | ({"masked": True} if masked else {}))
    if not isinstance(opened, xr.DataArray):
        raise ValueError(f"{path} holds several subdatasets; open the one you need with rioxarray.open_rasterio(path, "
                         "variable=...) or xarray.open_dataset, and pass the array")
    opened.encoding["source"] = str(path)  # the file (a warped VRT's source), for the checks that no output replaces it
    if masked and opened.rio.nodata is None:
        opened = opened.rio.write_nodata(np.nan, encoded=False)  # NaN marks the masked pixels
    return _without_bands(opened, alpha, path) if alpha else opened


@contextlib.contextmanager
def _on_grid(src: Any, grid: Grid | None) -> Iterator[Any]:
    """``src`` itself, or a warped VRT of it on ``grid``: its nodata outside its extent, else floats with NaN
    there (and where its mask is 0); floats where resampling combines values, else the file's dtype."""
    if grid is None or grid.holds(src):
        yield src
        return
    from rasterio.enums import Resampling
    from rasterio.vrt import WarpedVRT

    nan_fill = src.nodata is None  # NaN outside the file's extent and where its mask (or alpha band) is 0
    combined = grid.resampling not in (Resampling.nearest, Resampling.mode)
    dtype = float_dtype(np.dtype(src.dtypes[0])).name if nan_fill or combined else None
    with WarpedVRT(src, crs=grid.crs, transform=grid.transform, width=grid.width, height=grid.height, resampling=grid.resampling,
                   dtype=dtype, **({"nodata": np.nan} if nan_fill else {})) as vrt:
        yield vrt


def _mask_layout(src: Any) -> tuple[bool, list[int]]:
    """Whether an open raster's bands are masked by a per-dataset mask or an alpha band (GDAL's mask flags),
    and the positions of its alpha bands; read from the header only."""
    from rasterio.enums import ColorInterp, MaskFlags

    flags = {flag for band in src.mask_flag_enums for flag in band}
    alpha = [i for i, interp in enumerate(src.colorinterp) if interp == ColorInterp.alpha]
    return bool(alpha) or MaskFlags.per_dataset in flags or MaskFlags.alpha in flags, alpha


def _without_bands(da: xr.DataArray, drop: list[int], path: Path) -> xr.DataArray:
    """``da`` without the bands at positions ``drop`` (its alpha bands), its per-band attributes (descriptions,
    units, ...) shortened to match."""
    n = da.sizes["band"]
    keep = [i for i in range(n) if i not in drop]
    if not keep:
        raise ValueError(f"{path} has only alpha bands (transparency), no data bands to use as features")
    out = da.isel(band=keep)
    out.attrs = {k: tuple(v[i] for i in keep) if isinstance(v, (tuple, list)) and len(v) == n else v for k, v in da.attrs.items()}
    return out


def _band_labels(paths: list[Path], bands: Sequence[Hashable] | None) -> list[Hashable]:
    """One distinct label per file, each file given once (default labels: :func:`band_name`)."""
    bands = [band_name(p) for p in paths] if bands is None else list(bands)
    if len(bands) != len(paths) or not paths:
        raise ValueError(f"need one label per file, got {len(bands)} labels for {len(paths)} files")
    resolved = [p.resolve() for p in paths]
    repeated = sorted({str(p) for p in paths if resolved.count(p.resolve()) > 1})
    if repeated:
        raise ValueError(f"the same file is given more than once: {repeated}; give each band's file once")
    if len({str(b) for b in bands}) != len(bands):
        raise ValueError(f"band labels repeat: {bands}; give every band a distinct label")
    return bands


def _check_grid(paths: list[Path], layers: list[xr.DataArray]) -> None:
    """Every layer one band, on the first one's grid (shape, CRS and transform); a file on another grid is
    refused with the resolution of each file and the ways to resample them."""
    first = layers[0]
    for path, layer in zip(paths, layers):
        if layer.sizes["band"] != 1:
            raise ValueError(f"{path} has {layer.sizes['band']} bands; open multiband files with rioxarray.open_rasterio")
        same_grid = layer.shape == first.shape and layer.rio.crs == first.rio.crs and layer.rio.transform() == first.rio.transform()
        if not same_grid:
            found = {p: other.rio.resolution() for p, other in zip(paths, layers)}
            raise ValueError(
                f"{path} is not on the grid of {paths[0]}, the first file, which sets the grid ({paths[0].name}: {_grid_text(first)}; "
                f"{path.name}: {_grid_text(layer)}). Resolutions: {_resolutions(found)}. ppa_xr.open_band_stack(paths, resolution=R) "
                f"stacks them on the grid of the first file at R (one of {sorted({abs(r[0]) for r in found.values()})}), each other "
                "band resampled lazily (resampling='average' by default; NaN outside a band's extent); or resample a band yourself: "
                "band.rio.reproject_match(reference)")


def _grid_text(layer: xr.DataArray) -> str:
    """A grid in words: pixel size, size in pixels, CRS."""
    res = layer.rio.resolution()
    return f"pixels of {abs(res[0]):g} x {abs(res[1]):g}, {layer.sizes['x']} x {layer.sizes['y']} px, {layer.rio.crs}"


def band_name(path: str | os.PathLike) -> str:
    """A band's name from its file name: the ``_B<n>`` suffix that Landsat and Sentinel-2 files end with
    (``LC08_L2SP_..._SR_B4.TIF`` -> ``B4``, ``T32TQM_..._B8A.jp2`` -> ``B8A``), else the whole stem."""
    stem = Path(path).stem
    match = re.search(r"_(B\d+[A-Z]?)$", stem, flags=re.IGNORECASE)
    return match.group(1).upper() if match else stem


def file_lock() -> contextlib.AbstractContextManager:
    """A lock for writing a lazy result into one file (``da.rio.to_raster(path, lock=ppa_xr.file_lock())``):
    the cluster's (``distributed.Lock``) when a distributed client runs the graph, a thread lock otherwise
    (a ``threading.Lock`` cannot travel to a cluster's workers).

    Returns
    -------
    distributed.Lock or threading.Lock
        The lock to pass as ``lock=``.
    """
    import threading

    try:
        from distributed import Lock, get_client

        get_client()  # raises ValueError without one
        return Lock("ppa-xr-write")
    except (ImportError, ValueError):  # no distributed, or no client
        return threading.Lock()


def to_raster(da: xr.DataArray | xr.Dataset, path: str | os.PathLike, overwrite: bool = False, **kwargs: Any) -> Path:
    """Write a result as a GeoTIFF whose bands say what they are, as the CLI writes them.

    Band descriptions are ``PPA component k`` for components and the band
    labels for reconstructions (``da.rio.to_raster`` alone writes one
    ``long_name`` for every band), the bands' common unit is written as each
    band's unit, and the lock works on a cluster (:func:`file_lock`). A
    Dataset (the inverse of a model fitted on a Dataset's variables) is
    written as one band per variable, described by its name.

    Parameters
    ----------
    da : xr.DataArray or xr.Dataset
        A lazy or computed result with the band-like dimension first
        (``component``, or the features), then y and x; or a single map (y, x).
    path : str or os.PathLike
        The GeoTIFF to write (.tif or .tiff), through a hidden sibling moved into place when complete.
    overwrite : bool
        Replace a file already there (never one the result is read from).
    **kwargs
        Passed to ``rio.to_raster`` (default: tiled, DEFLATE-compressed). ``nodata=v`` writes missing values as ``v``; an
        integer ``dtype`` needs one, rounds to the nearest integer and refuses values outside its range or equal to it.

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> ppa_xr.to_raster(cube.ppa.transform(model, n_components=3), "components.tif")  # doctest: +SKIP
    """
    suffix_of(as_path(path), (".tif", ".tiff"))
    return write_cube(da, path, overwrite, **kwargs)


def _as_bands(obj: xr.DataArray | xr.Dataset) -> xr.DataArray:
    """A Dataset's variables as the bands of one DataArray (named by the variables), a DataArray as it is; y and x last,
    as a GeoTIFF holds them (a result of a ``(y, x, band)`` cube was refused by rioxarray after it was computed)."""
    if isinstance(obj, xr.DataArray):
        return _grid_last(obj)
    if not obj.data_vars:
        raise ValueError("the Dataset has no data variables to write")
    units = {str(v.attrs.get("units", "")) for v in obj.data_vars.values()}
    out = _grid_last(obj.to_dataarray(dim="band"))
    out = out.assign_attrs(units=units.pop()) if len(units) == 1 and "" not in units else out
    return _with_common_nodata(out, dict(obj.data_vars))


def _grid_last(da: xr.DataArray) -> xr.DataArray:
    """``da`` with its y and x dims (as rioxarray finds them) last, the others first in their order; as it is without them."""
    import rioxarray  # noqa: F401 (the .rio accessor)
    from rioxarray.exceptions import RioXarrayError

    try:
        y, x = da.rio.y_dim, da.rio.x_dim
    except RioXarrayError:
        return da
    return da.transpose(..., y, x)


def _with_common_nodata(out: xr.DataArray, variables: dict[Hashable, xr.DataArray]) -> xr.DataArray:
    """``out`` declaring the nodata its variables declare (``to_dataarray`` drops their encoding, so a Dataset of
    components was written with NaN pixels and no nodata); refused where they declare different ones, or one that
    variables without it could hold as a value: a GeoTIFF has one nodata for every band."""
    import rioxarray  # noqa: F401 (the .rio accessor)

    def nodata(v: xr.DataArray) -> tuple[Any, bool]:
        return (v.rio.encoded_nodata, True) if v.rio.encoded_nodata is not None else (v.rio.nodata, False)

    whole = nodata(out)  # the Dataset's own attributes: the variables' without one of theirs
    declared = {name: own if own[0] is not None else whole for name, v in variables.items() for own in [nodata(v)]}
    given = {name: value for name, value in declared.items() if value[0] is not None}
    if not given:
        return out
    values = list(dict.fromkeys("nan" if np.isnan(v) else float(v) for v, _ in given.values()))
    if len(values) > 1 or (len(given) < len(declared) and values != ["nan"]):
        shown = ", ".join(f"{name}: {value[0]}" for name, value in declared.items())
        raise ValueError(f"the Dataset's variables declare different nodata ({shown}), and a GeoTIFF has one for every band: give "
                         "them one (ds[name] = ds[name].rio.write_nodata(v) for each), or write a .nc or .zarr, which keeps each")
    first, encoded = next(iter(given.values()))
    return out.rio.write_nodata(first, encoded=encoded)


def _geotiff(obj: xr.DataArray | xr.Dataset, path: Path, **kwargs: Any) -> None:
    """The GeoTIFF of :func:`to_raster`, written at ``path``."""
    import rasterio
    import rioxarray  # noqa: F401 (the .rio accessor of a cube that did not come from rioxarray)

    da = _as_bands(obj)
    if da.ndim == 3:  # one description per band; a single map (an error map) keeps its long_name
        labels = da[da.dims[0]].values if da.dims[0] in da.coords else np.arange(1, da.shape[0] + 1)
        names = [f"{COMPONENT_NAME} {v}" for v in labels] if da.dims[0] == COMPONENT else [str(v) for v in labels]
        da = da.assign_attrs(long_name=tuple(names))
    da = _with_nodata_option(da, kwargs)
    options = {"tiled": True, "compress": "deflate", "driver": "GTiff", "lock": file_lock()} | kwargs
    with warnings.catch_warnings():
        if da.rio.get_gcps():  # placed by its ground control points: rasterio's warning about the identity transform is moot
            warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        da.rio.to_raster(path, **options)
    units = common_units(da)
    if units:  # rioxarray writes band descriptions, not units
        with rasterio.open(path, "r+") as dst:
            dst.units = (units,) * dst.count


def _with_nodata_option(da: xr.DataArray, kwargs: dict[str, Any]) -> xr.DataArray:
    """``da`` writing its missing values as ``kwargs``' ``nodata`` (taken out of them: ``rio.to_raster`` ignored it and
    wrote NaN), refused where an integer ``dtype`` would have no value for them."""
    if "nodata" in kwargs:
        da = da.rio.write_nodata(kwargs.pop("nodata"), encoded=True)
    dtype = kwargs.get("dtype")
    nodata = da.rio.encoded_nodata if da.rio.encoded_nodata is not None else da.rio.nodata
    if dtype is None or np.dtype(dtype).kind not in "iu" or da.dtype.kind != "f":
        return da
    if nodata is None or np.isnan(nodata):
        raise ValueError(f"dtype={dtype!r} cannot hold the result's missing values (NaN): pass nodata=<a {np.dtype(dtype)} value "
                         "outside the data> too, e.g. nodata=-9999, or leave dtype out (float32 keeps the values as computed)")
    if isinstance(da.data, dask.array.Array):
        return da.copy(data=dask.array.map_blocks(_rounded_within, da.data, np.dtype(dtype), float(nodata), dtype=da.dtype))
    return da.copy(data=_rounded_within(da.values, np.dtype(dtype), float(nodata)))


def _rounded_within(block: np.ndarray, dtype: np.dtype, nodata: float) -> np.ndarray:
    """``block`` rounded to the nearest integer for an integer GeoTIFF (the cast alone truncates toward 0), refused where a
    value lies outside ``dtype``'s range (the cast wrapped it: a component of -3 written as 253 in uint8) or rounds to
    ``nodata`` (it would read as missing). Checked per chunk as it is written, so a refusal leaves no file."""
    info, rounded = np.iinfo(dtype), np.rint(block)
    finite = rounded[np.isfinite(rounded)]
    if finite.size and (finite.min() < info.min or finite.max() > info.max):
        raise ValueError(f"values from {finite.min():.6g} to {finite.max():.6g} do not fit dtype={dtype.name} ({info.min} to {info.max}): "
                         "pass a dtype that holds them (the default float32 keeps them as computed), or scale the result first")
    if (hits := int(np.count_nonzero(finite == nodata))):
        raise ValueError(f"{hits} values take the integer {nodata:g}, the nodata: they would read as missing; pass a nodata "
                         f"outside the values (from {finite.min():.6g} to {finite.max():.6g} in this chunk)")
    return rounded


def open_cube(paths: str | os.PathLike | Sequence[str | os.PathLike], chunks: int = 1024, variable: str | None = None) -> xr.DataArray | xr.Dataset:
    """A raster (GeoTIFF and the like, via rioxarray), a stack of single-band rasters, or a netCDF / zarr
    dataset (or one ``variable`` of it), opened lazily with ``chunks`` pixels along x and y.

    Parameters
    ----------
    paths : path or sequence of path
        One file or store (alone or in a list), or several single-band rasters (one per band).
    chunks : int
        x/y chunk size in pixels.
    variable : str, optional
        The data variable of a netCDF or zarr input (default: the file's one variable where it has one, as
        :func:`write_cube` writes a DataArray, else the whole Dataset, whose variables are the bands).

    Returns
    -------
    xr.DataArray or xr.Dataset
        The lazy cube.

    Raises
    ------
    FileNotFoundError, ValueError
        A missing input, an unreadable one, a ``variable`` it lacks.
    """
    files = as_paths(paths, "an input")
    for path in files:
        if not path.exists():
            raise FileNotFoundError(f"input {path} does not exist")
    rasters = len(files) > 1 or files[0].suffix.lower() not in DATA_SUFFIXES and not files[0].is_dir()
    if variable and rasters:
        raise ValueError(f"--variable picks a variable of a netCDF or zarr input; {files[0]} is a raster (drop --variable)")
    try:
        if len(files) > 1:
            return open_band_stack(files, chunks={"x": chunks, "y": chunks})
        if rasters:
            return read_raster(files[0], chunks={"x": chunks, "y": chunks})
        ds = _open_dataset(files[0])
    except (ValueError, FileNotFoundError):
        raise
    except Exception as err:  # rasterio / h5py / zarr raise their own types for unreadable files
        raise ValueError(f"cannot read {' '.join(map(str, files))} as a raster or dataset ({type(err).__name__}: {err})") from err
    return _variable(ds, variable, files[0])


def _variable(ds: xr.Dataset, variable: str | None, path: Path) -> xr.DataArray | xr.Dataset:
    """``ds[variable]``; without ``variable``, ``ds`` or its one variable (one feature as a Dataset's, no model's input)."""
    if variable and variable not in ds.data_vars:
        raise ValueError(f"{path} has no variable {variable!r}; it has {list(ds.data_vars)}")
    if not variable and len(ds.data_vars) == 1:
        return next(iter(ds.data_vars.values()))
    return ds[variable] if variable else ds


def _open_dataset(path: Path) -> xr.Dataset:
    if path.is_dir() and not any((path / meta).exists() for meta in ("zarr.json", ".zgroup", ".zmetadata")):
        raise ValueError(f"input {path} is a directory but not a zarr store (no zarr.json or .zgroup); name a raster, netCDF or zarr file")
    if path.suffix == ".zarr" or path.is_dir():
        return xr.open_zarr(path, decode_coords="all")
    _check_netcdf(path)
    return xr.open_dataset(path, chunks={}, decode_coords="all")


#: how a netCDF file begins: classic ``CDF`` 1, 2 or 5, or (netCDF-4) HDF5's signature, at 0 or after a user block of 512, 1024, ... bytes
_NETCDF_MAGIC, _HDF5_MAGIC = (b"CDF\x01", b"CDF\x02", b"CDF\x05"), b"\x89HDF\r\n\x1a\n"


def _check_netcdf(path: Path) -> None:
    """A ValueError naming ``path`` when it is not a netCDF file (text, or another format under a .nc name), or a
    FIFO or device, never opened (opening a FIFO waits for a writer)."""
    if kind := special(path):
        raise ValueError(f"input {path} is {kind}, not a netCDF file; name a netCDF, zarr or raster file")
    with open(path, "rb") as f:
        head = f.read(8)
        offsets = [0, *(512 * 2**i for i in range(12))]
        hdf5 = any(f.seek(at) == at and f.read(8) == _HDF5_MAGIC for at in offsets)
    if head[:4] not in _NETCDF_MAGIC and not hdf5:
        begins = f"it begins with {head!r}" if head else "it is empty"
        raise ValueError(f"input {path} is not a netCDF file: {begins}, not netCDF's 'CDF' or netCDF-4's HDF5 "
                         "signature; name a netCDF, zarr or raster file (a text or CSV table is not a cube)")


def write_cube(da: xr.DataArray | xr.Dataset, path: str | os.PathLike, overwrite: bool = False,
               inputs: Sequence[str | os.PathLike] = (), **raster_options: Any) -> Path:
    """Write a (lazy) result by its suffix, GeoTIFF (:func:`to_raster`), netCDF or zarr, to a hidden sibling
    moved into place when complete: a kill leaves the old file or the new one, and an interruption
    (Ctrl-C) waits for the chunks being written, then removes the temporary. A disk without room for the
    uncompressed result is refused before anything is written.

    Parameters
    ----------
    da : xr.DataArray or xr.Dataset
        The result (a Dataset: the inverse of a model fitted on a Dataset's variables).
    path : str or os.PathLike
        Ending in .tif, .tiff, .nc or .zarr.
    overwrite : bool
        Replace what is there (never one of ``inputs``).
    inputs : sequence of path
        Files the result is computed from: refused as the output.
    **raster_options
        A GeoTIFF's: passed to ``rio.to_raster`` (see :func:`to_raster`).

    Returns
    -------
    pathlib.Path
        The path written.
    """
    path = check_output(path, OUTPUT_SUFFIXES, [*inputs, *sources(da)], overwrite)
    suffix = path.suffix.lower()
    if raster_options and suffix not in (".tif", ".tiff"):
        raise TypeError(f"options {sorted(raster_options)} are a GeoTIFF's; {path} is written as {suffix[1:]}")
    if suffix in (".tif", ".tiff"):
        bands = _as_bands(da)
        _check_raster_dims(bands)
        _check_regular_grid(bands)

    storable = _storable(with_grid_mapping(_as_dataset(da))) if suffix in (".nc", ".zarr") else None  # its warning before any work

    def write(tmp: Path) -> None:
        with _finishing_tasks():
            if storable is None:
                _geotiff(da, tmp, **raster_options)
            elif suffix == ".zarr":
                storable.to_zarr(tmp, mode="w-")
            else:
                storable.to_netcdf(tmp, engine="h5netcdf")

    one_file = suffix != ".zarr" and dask.config.get("scheduler", None) == "processes"
    with dask.config.set(scheduler="threads") if one_file else contextlib.nullcontext():  # processes share no lock on one file
        return replace_atomically(path, write, da.nbytes)  # at most its uncompressed size


def _check_raster_dims(da: xr.DataArray) -> None:
    """A GeoTIFF holds bands of one y/x grid: a result with more dimensions (time, ...) is refused with the ways out."""
    if da.ndim > 3:
        extra = [d for d in da.dims[:-2] if d not in (COMPONENT, "band")] or list(da.dims[:-3])
        pick = ", ".join(f"{d}=0" for d in extra)
        raise ValueError(f"a GeoTIFF holds bands of one y/x grid; this result has dims {tuple(da.dims)}: write one GeoTIFF per "
                         f"{' and '.join(map(str, extra))} (result.isel({pick})), or the whole result as .nc or .zarr")


def _check_regular_grid(da: xr.DataArray) -> None:
    """A GeoTIFF places its pixels by one affine transform: a result whose y or x coordinates are not evenly spaced (a
    gap, a repeated label) is refused, with the ways out; rioxarray would write the transform of the first and last
    coordinates, placing the pixels between them elsewhere. Rounding of the coordinates' own precision is allowed."""
    for d in list(da.dims)[-2:]:
        if d not in da.coords or da.sizes[d] < 3 or da[d].dtype.kind not in "iuf":
            continue
        values = np.asarray(da[d].values, dtype=np.float64)
        if not np.isfinite(values).all():
            continue
        step = (values[-1] - values[0]) / (len(values) - 1)
        off = float(np.abs(values - (values[0] + step * np.arange(len(values)))).max())
        if off > 0.01 * abs(step) + 4 * float(np.spacing(np.abs(values).max().astype(da[d].dtype))):
            raise ValueError(f"a GeoTIFF places its pixels on a regular grid, and the result's {d!r} coordinates are not evenly "
                             f"spaced (up to {off:.3g} from the grid of step {step:.6g} between the first and the last): write "
                             f"it as .nc or .zarr, which keep the coordinates, or put the cube on a regular grid first")


#: attribute values netCDF and zarr hold (xarray's own list)
_ATTR_TYPES = (str, bytes, numbers.Number, np.ndarray, np.generic, list, tuple)


def _storable(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` as netCDF and zarr can hold it, with a warning naming what changed: coordinates of Python objects (stackstac's
    ``proj:shape`` sets, ``None`` wavelengths) left out, attributes of other types (stackstac's ``spec``) written as text.
    xarray refused the whole output ("cannot serialize arbitrary Python objects", "Invalid value for attr")."""
    objects = [name for name, c in ds.coords.items() if name not in ds.indexes and c.dtype == object and c.chunks is None
               and not all(isinstance(v, str) for v in np.ravel(c.values).tolist())]
    out = ds.drop_vars(objects).copy(deep=False)  # new variables: their attributes are replaced below, not the caller's
    holders: list[xr.Dataset | xr.Variable] = [out, *out.variables.values()]
    texts: set[Hashable] = set()
    for holder in holders:
        texts |= {key for key, value in holder.attrs.items() if not isinstance(value, _ATTR_TYPES)}
        holder.attrs = {key: value if isinstance(value, _ATTR_TYPES) else str(value) for key, value in holder.attrs.items()}
    if objects or texts:
        warn_user(f"netCDF and zarr cannot hold Python objects: coordinates {objects} left out, attributes {sorted(map(str, texts))} written "
                  "as text (metadata such as stackstac's; drop them first, e.g. result.drop_vars([...]), to write without this warning)")
    return out


def _as_dataset(obj: xr.DataArray | xr.Dataset) -> xr.Dataset:
    """What a netCDF or zarr output holds: a Dataset as it is, a DataArray as its one variable."""
    return obj if isinstance(obj, xr.Dataset) else obj.to_dataset(name=obj.name or "data")


@contextlib.contextmanager
def _finishing_tasks() -> Iterator[None]:
    """Run the threaded scheduler's tasks in a pool of this write's own, which is drained before an error
    (or Ctrl-C) leaves: no task is still writing into the temporary when it is removed. Other schedulers
    run as configured."""
    if dask.config.get("scheduler", None) not in (None, "threads", "threading"):
        yield
        return
    from concurrent.futures import ThreadPoolExecutor

    from dask import threaded

    pool = getattr(threaded, "ContextAwareThreadPoolExecutor", ThreadPoolExecutor)(threaded.CPU_COUNT)
    try:
        with dask.config.set(pool=pool):
            yield
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def sources(obj: xr.DataArray | xr.Dataset) -> list[str]:
    """The files a (lazy) result is read from, as far as xarray and dask tell: the ``source`` xarray records
    when it opens a file, and the file managers of the arrays at the roots of its dask graph (of every
    variable of a Dataset)."""
    found = [str(obj.encoding["source"])] if obj.encoding.get("source") else []
    if isinstance(obj, xr.Dataset):
        return found + [path for var in obj.data_vars.values() for path in sources(var)]
    graph = obj.data.__dask_graph__() if hasattr(obj.data, "__dask_graph__") else None
    for layer in (graph.layers.values() if graph is not None and hasattr(graph, "layers") else ()):
        if not getattr(layer, "is_materialized", lambda: True)() or len(layer) != 1:
            continue  # the arrays a graph starts from are one-key layers
        found += _file_of(next(iter(layer.values())))
    return found


def _file_of(obj: Any, depth: int = 8) -> list[str]:
    """The path behind a lazily indexed backend array (xarray's wrappers around a file manager, or around a zarr
    array, whose local store's root is the input), if any."""
    for _ in range(depth):
        root = getattr(getattr(obj.get_array(), "store", None), "root", None) if hasattr(obj, "get_array") else None
        if isinstance(root, (str, os.PathLike)):  # xarray's ZarrArrayWrapper: the store, not one array of it
            return [os.fspath(root)]
        manager = getattr(obj, "manager", None) or getattr(getattr(obj, "datastore", None), "_manager", None)
        args = getattr(manager, "_args", None)
        if args and isinstance(args[0], (str, os.PathLike)):
            return [os.fspath(args[0])]
        obj = getattr(obj, "array", None)
        if obj is None:
            break
    return []


def with_grid_mapping(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with each variable's grid mapping (rioxarray's ``spatial_ref``) named among its coordinates, the CF
    way: a reader opening the file with xarray's defaults then sees the CRS, without ``decode_coords="all"``."""
    out = ds.copy()
    for name in out.data_vars:
        mapping = out[name].encoding.get("grid_mapping") or out[name].attrs.get("grid_mapping")
        if mapping and mapping in out.coords:
            listed = str(out[name].encoding.get("coordinates", "")).split()
            out[name].encoding["coordinates"] = " ".join(dict.fromkeys([*listed, mapping]))
    return out
