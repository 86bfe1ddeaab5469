"""Raster input: stacking one-file-per-band scenes into a ``(band, y, x)`` cube."""

from __future__ import annotations

import os
import re
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from .cube.inputs import masked_float


def open_band_stack(
    paths: Sequence[str | os.PathLike], bands: Sequence[Hashable] | None = None, chunks=None, masked: bool = False
) -> xr.DataArray:
    """Stack single-band rasters (one GeoTIFF per band, as Landsat ships) into a ``(band, y, x)`` cube.

    ``bands`` labels the bands (default: :func:`band_name` of each file, so
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
        Band labels (default: :func:`band_name` of each file).
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
    import rioxarray

    paths = [Path(p) for p in paths]
    bands = [band_name(p) for p in paths] if bands is None else list(bands)
    if len(bands) != len(paths) or not paths:
        raise ValueError(f"need one label per file, got {len(bands)} labels for {len(paths)} files")
    resolved = [p.resolve() for p in paths]
    repeated = sorted({str(p) for p in paths if resolved.count(p.resolve()) > 1})
    if repeated:
        raise ValueError(f"the same file is given more than once: {repeated}; give each band's file once")
    if len({str(b) for b in bands}) != len(bands):
        raise ValueError(f"band labels repeat: {bands}; give every band a distinct label")
    layers = [rioxarray.open_rasterio(p, chunks=chunks, masked=masked) for p in paths]
    first = layers[0]
    for path, layer in zip(paths, layers):
        if layer.sizes["band"] != 1:
            raise ValueError(f"{path} has {layer.sizes['band']} bands; open multiband files with rioxarray.open_rasterio")
        same_grid = layer.shape == first.shape and layer.rio.crs == first.rio.crs and layer.rio.transform() == first.rio.transform()
        if not same_grid:
            raise ValueError(f"{path} is not on the grid of {paths[0]} (shape, CRS or transform differ); resample it first")
    nodata = {layer.rio.nodata for layer in layers}
    if len(nodata) > 1:  # one nodata per band: mask each with its own
        dtype = np.result_type(np.float32, *(layer.dtype for layer in layers))
        layers = [masked_float(layer, dtype) for layer in layers]
        for layer in layers:
            layer.encoding.pop("_FillValue", None)  # masked layers hold NaN; an integer fill value no longer applies
    cube = xr.concat([layer.squeeze("band", drop=True) for layer in layers], dim="band", combine_attrs="drop_conflicts")
    cube = cube.assign_coords(band=bands)
    return cube.rio.write_nodata(np.nan, encoded=False) if len(nodata) > 1 else cube


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


def to_raster(da: xr.DataArray, path: str | os.PathLike, **kwargs) -> None:
    """Write a result as a GeoTIFF whose bands say what they are, as the CLI writes them.

    Band descriptions are ``PPA component k`` for components and the band
    labels for reconstructions (``da.rio.to_raster`` alone writes one
    ``long_name`` for every band), the bands' common unit is written as each
    band's unit, and the lock works on a cluster (:func:`file_lock`).

    Parameters
    ----------
    da : xr.DataArray
        A lazy or computed result with the band-like dimension first
        (``component``, or the features), then y and x; or a single map (y, x).
    path : str or os.PathLike
        The GeoTIFF to write.
    **kwargs
        Passed to ``rio.to_raster`` (default: tiled, DEFLATE-compressed).

    Returns
    -------
    None

    Examples
    --------
    >>> ppa_xr.to_raster(cube.ppa.transform(model, n_components=3), "components.tif")  # doctest: +SKIP
    """
    import rasterio

    from .cube.inputs import common_units

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
