"""Cubes in and out of files: one-file-per-band scenes stacked into a ``(band, y, x)`` cube, any cube opened
by its suffix (GeoTIFF, netCDF, zarr), and results written by suffix, atomically, as the CLI writes them."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

import dask
import numpy as np
import xarray as xr

from ..model.atomic import as_path, check_output, replace_atomically
from .inputs import common_units, masked_float

#: suffixes opened with xarray (netCDF, zarr stores); any other file is opened as a raster (rioxarray: GeoTIFF, VRT, JPEG 2000, ...)
DATA_SUFFIXES = (".nc", ".zarr")
#: suffixes a result can be written to
OUTPUT_SUFFIXES = (".tif", ".tiff", ".nc", ".zarr")


def open_band_stack(
    paths: Sequence[str | os.PathLike], bands: Sequence[Hashable] | None = None, chunks=None, masked: bool = False
) -> xr.DataArray:
    """Stack single-band rasters (one GeoTIFF per band, as Landsat ships) into a ``(band, y, x)`` cube.

    ``bands`` labels the bands (default: ``ppa_xr.cube.rasters.band_name`` of each file, so
    ``LC08_TEST_B4.TIF`` and ``LC08_OTHER_B4.TIF`` are both ``B4``);
    ``chunks`` and ``masked`` go to :func:`rioxarray.open_rasterio`. Every file
    must have one band and the same grid (shape, CRS and transform). When the
    files declare different nodata values, each band's own nodata becomes NaN
    (a float cube with NaN as its nodata), so no nodata pixel is used as data.

    Parameters
    ----------
    paths : sequence of path
        One single-band raster per band, on one grid.
    bands : sequence, optional
        Band labels (default: ``ppa_xr.cube.rasters.band_name`` of each file).
    chunks, masked
        Passed to :func:`rioxarray.open_rasterio`.

    Returns
    -------
    xr.DataArray
        ``(band, y, x)``, lazy when ``chunks`` is given.

    Raises
    ------
    ValueError
        Files on different grids, with several bands, repeated, or labels that repeat.
    """
    files = [as_path(p, "a band's file") for p in paths]
    labels = _band_labels(files, bands)
    layers = [read_raster(p, chunks=chunks, masked=masked) for p in files]
    _check_grid(files, layers)
    nodata = {layer.rio.nodata for layer in layers}
    if len(nodata) > 1:  # one nodata per band: mask each with its own
        dtype = np.result_type(np.float32, *(layer.dtype for layer in layers))
        layers = [masked_float(layer, dtype) for layer in layers]
        for layer in layers:
            layer.encoding.pop("_FillValue", None)  # masked layers hold NaN; an integer fill value no longer applies
    cube = xr.concat([layer.squeeze("band", drop=True) for layer in layers], dim="band", combine_attrs="drop_conflicts")
    cube = cube.assign_coords(band=labels)
    return cube.rio.write_nodata(np.nan, encoded=False) if len(nodata) > 1 else cube


def read_raster(path: Path, **kwargs: Any) -> xr.DataArray:
    """:func:`rioxarray.open_rasterio` of one raster file, refusing a file of several subdatasets (HDF,
    netCDF through GDAL), which it reads as Datasets."""
    import rioxarray

    opened = rioxarray.open_rasterio(path, **kwargs)
    if not isinstance(opened, xr.DataArray):
        raise ValueError(f"{path} holds several subdatasets; open the one you need with rioxarray.open_rasterio(path, "
                         "variable=...) or xarray.open_dataset, and pass the array")
    return opened


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
    """Every layer one band, on the first one's grid (shape, CRS and transform)."""
    first = layers[0]
    for path, layer in zip(paths, layers):
        if layer.sizes["band"] != 1:
            raise ValueError(f"{path} has {layer.sizes['band']} bands; open multiband files with rioxarray.open_rasterio")
        same_grid = layer.shape == first.shape and layer.rio.crs == first.rio.crs and layer.rio.transform() == first.rio.transform()
        if not same_grid:
            raise ValueError(f"{path} is not on the grid of {paths[0]} (shape, CRS or transform differ); resample it first")


def band_name(path: str | os.PathLike) -> str:
    """A band's name from its file name: the ``_B<n>`` suffix that Landsat and Sentinel-2 files end with
    (``LC08_L2SP_..._SR_B4.TIF`` -> ``B4``, ``T32TQM_..._B8A.jp2`` -> ``B8A``), else the whole stem."""
    stem = Path(path).stem
    match = re.search(r"_(B\d+[A-Z]?)$", stem, flags=re.IGNORECASE)
    return match.group(1).upper() if match else stem


def file_lock():
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
        Passed to ``rio.to_raster`` (default: tiled, DEFLATE-compressed).

    Returns
    -------
    pathlib.Path
        The path written.

    Examples
    --------
    >>> ppa_xr.to_raster(cube.ppa.transform(model, n_components=3), "components.tif")  # doctest: +SKIP
    """
    path = check_output(path, (".tif", ".tiff"), sources(da), overwrite)
    return replace_atomically(path, lambda tmp: _geotiff(da, tmp, **kwargs))


def _as_bands(obj: xr.DataArray | xr.Dataset) -> xr.DataArray:
    """A Dataset's variables as the bands of one DataArray (named by the variables), a DataArray as it is."""
    if isinstance(obj, xr.DataArray):
        return obj
    if not obj.data_vars:
        raise ValueError("the Dataset has no data variables to write")
    units = {str(v.attrs.get("units", "")) for v in obj.data_vars.values()}
    out = obj.to_dataarray(dim="band")
    return out.assign_attrs(units=units.pop()) if len(units) == 1 and "" not in units else out


def _geotiff(obj: xr.DataArray | xr.Dataset, path: Path, **kwargs: Any) -> None:
    """The GeoTIFF of :func:`to_raster`, written at ``path``."""
    import rasterio

    da = _as_bands(obj)
    if da.ndim == 3:  # one description per band; a single map (an error map) keeps its long_name
        labels = da[da.dims[0]].values if da.dims[0] in da.coords else np.arange(1, da.shape[0] + 1)
        names = [f"PPA component {v}" for v in labels] if da.dims[0] == "component" else [str(v) for v in labels]
        da = da.assign_attrs(long_name=tuple(names))
    options = {"tiled": True, "compress": "deflate", "driver": "GTiff", "lock": file_lock()} | kwargs
    da.rio.to_raster(path, **options)
    units = common_units(da)
    if units:  # rioxarray writes band descriptions, not units
        with rasterio.open(path, "r+") as dst:
            dst.units = (units,) * dst.count


def open_cube(paths: Sequence[str | os.PathLike], chunks: int = 1024, variable: str | None = None) -> xr.DataArray | xr.Dataset:
    """A raster (GeoTIFF and the like, via rioxarray), a stack of single-band rasters, or a netCDF / zarr
    dataset (or one ``variable`` of it), opened lazily with ``chunks`` pixels along x and y.

    Parameters
    ----------
    paths : sequence of path
        One file or store, or several single-band rasters (one per band).
    chunks : int
        x/y chunk size in pixels.
    variable : str, optional
        The data variable of a netCDF or zarr input (default: the whole Dataset).

    Returns
    -------
    xr.DataArray or xr.Dataset
        The lazy cube.

    Raises
    ------
    FileNotFoundError, ValueError
        A missing input, an unreadable one, a ``variable`` it lacks.
    """
    files = [as_path(p, "an input") for p in paths]
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
    if variable and variable not in ds.data_vars:
        raise ValueError(f"{files[0]} has no variable {variable!r}; it has {list(ds.data_vars)}")
    return ds[variable] if variable else ds


def _open_dataset(path: Path) -> xr.Dataset:
    if path.is_dir() and not any((path / meta).exists() for meta in ("zarr.json", ".zgroup", ".zmetadata")):
        raise ValueError(f"input {path} is a directory but not a zarr store (no zarr.json or .zgroup); name a raster, netCDF or zarr file")
    if path.suffix == ".zarr" or path.is_dir():
        return xr.open_zarr(path, decode_coords="all")
    return xr.open_dataset(path, chunks={}, decode_coords="all")


def write_cube(da: xr.DataArray | xr.Dataset, path: str | os.PathLike, overwrite: bool = False,
               inputs: Sequence[str | os.PathLike] = ()) -> Path:
    """Write a (lazy) result by its suffix, GeoTIFF (:func:`to_raster`), netCDF or zarr, to a hidden sibling
    moved into place when complete: a kill leaves the old file or the new one, and an interruption
    (Ctrl-C) waits for the chunks being written, then removes the temporary.

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

    Returns
    -------
    pathlib.Path
        The path written.
    """
    path = check_output(path, OUTPUT_SUFFIXES, [*inputs, *sources(da)], overwrite)
    suffix = path.suffix.lower()

    def write(tmp: Path) -> None:
        with _finishing_tasks():
            if suffix in (".tif", ".tiff"):
                _geotiff(da, tmp)
            elif suffix == ".zarr":
                with_grid_mapping(_as_dataset(da)).to_zarr(tmp, mode="w-")
            else:
                with_grid_mapping(_as_dataset(da)).to_netcdf(tmp, engine="h5netcdf")

    one_file = suffix != ".zarr" and dask.config.get("scheduler", None) == "processes"
    with dask.config.set(scheduler="threads") if one_file else contextlib.nullcontext():  # processes share no lock on one file
        return replace_atomically(path, write)


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
    """The path behind a lazily indexed backend array (xarray's wrappers around a file manager), if any."""
    for _ in range(depth):
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
