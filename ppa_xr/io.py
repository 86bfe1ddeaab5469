"""Input and output: models saved as data (netCDF or zarr, never a pickle), band stacks read as cubes.

Layout (format version 2): the arrays of :class:`~ppa_xr.core.PPAParams` as
variables over the dims ``feature`` (d), ``output`` (d), ``step`` (d-1) and
``power`` (max degree); the feature labels as the ``feature`` coordinate and
other per-feature coordinates as ``feature_coord_<name>``; the estimator's
parameters (JSON), the feature dimension, the format name and version, the
ppa_xr version and the creation date in the attributes.
"""

from __future__ import annotations

import datetime as _dt
import json
import numbers
import os
from collections.abc import Hashable, Sequence
from pathlib import Path

import numpy as np
import xarray as xr

from .core.params import PPAParams
from .model import PPA

FORMAT = "ppa_xr.model"
FORMAT_VERSION = 2  # 2: per-step biases (truncated reconstruction), the sample's PCA solution, n_folds
_DIMS = {
    "mean": ("feature",), "rotation": ("output", "feature"), "degrees": ("step",), "center": ("step",),
    "scale": ("step",), "forward_bias": ("step", "output"), "forward": ("step", "power", "output"),
    "inverse_bias": ("step", "feature"), "inverse": ("step", "power", "feature"), "explained_variance": ("output",),
    "pca_rotation": ("output", "feature"), "pca_variance": ("output",),
}
_INIT = ("n_components", "degree", "tails", "leading", "n_folds", "random_state")
_COORD = "feature_coord_"


def to_dataset(model: PPA) -> xr.Dataset:
    """The fitted model as an xarray Dataset (parameters, labels and provenance)."""
    from . import __version__

    params = model.params_
    init = {name: getattr(model, name) for name in _INIT}
    if not isinstance(init["leading"], str):
        raise ValueError("a model with a callable leading-vector strategy cannot be saved as data")
    degree, seed = init["degree"], init["random_state"]
    init["degree"] = int(degree) if isinstance(degree, numbers.Integral) else [int(g) for g in degree]
    init["random_state"] = int(seed) if isinstance(seed, numbers.Integral) else None  # a RandomState is state
    ds = xr.Dataset({name: (dims, getattr(params, name)) for name, dims in _DIMS.items()})
    labels = getattr(model, "feature_labels_", None)
    if labels is not None:
        ds = ds.assign_coords(feature=_portable(labels))
    for name, values in (getattr(model, "feature_coords_", None) or {}).items():
        ds[_COORD + name] = ("feature", _portable(values))
    ds.attrs = {
        "ppa_xr_format": FORMAT,
        "ppa_xr_format_version": FORMAT_VERSION,
        "ppa_xr_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "tails": params.tails,
        "estimator_params": json.dumps(init),
        "feature_dim": str(getattr(model, "feature_dim_", "") or ""),
        "title": "Principal Polynomial Analysis model (ppa_xr)",
    }
    return ds


def _portable(values) -> np.ndarray:
    """Fixed-width unicode as variable-length strings, which netCDF and zarr v3 both specify."""
    values = np.asarray(values)
    return values.astype(object) if values.dtype.kind == "U" else values


def from_dataset(ds: xr.Dataset, source: str = "dataset") -> PPA:
    """Rebuild a fitted :class:`~ppa_xr.PPA` from :func:`to_dataset`'s layout, checking it thoroughly."""
    if ds.attrs.get("ppa_xr_format") != FORMAT:
        raise ValueError(f"{source} is not a ppa_xr model: it has no ppa_xr_format={FORMAT!r} attribute")
    version = int(ds.attrs.get("ppa_xr_format_version", -1))
    if version != FORMAT_VERSION:
        advice = "refit and save the model with this ppa_xr" if version < FORMAT_VERSION else "upgrade ppa_xr"
        raise ValueError(f"{source} has model format version {version}; this ppa_xr reads version {FORMAT_VERSION} ({advice})")
    missing = [name for name in _DIMS if name not in ds]
    if missing:
        raise ValueError(f"{source} is corrupt or truncated: variables {missing} are missing")
    try:
        arrays = {name: np.asarray(ds[name].values) for name in _DIMS}
        params = PPAParams(**arrays, tails=str(ds.attrs["tails"]))
        init = json.loads(ds.attrs["estimator_params"])
    except (KeyError, ValueError, TypeError, OSError, RuntimeError) as err:
        raise ValueError(f"{source} is corrupt or truncated: {err}") from err
    _check(params, source)
    model = PPA.from_params(params, **{k: (tuple(v) if isinstance(v, list) else v) for k, v in init.items() if k in _INIT})
    model.feature_labels_ = ds["feature"].values if "feature" in ds.coords else None
    model.feature_coords_ = {name[len(_COORD):]: ds[name].values for name in ds.variables if str(name).startswith(_COORD)}
    model.feature_dim_ = ds.attrs.get("feature_dim") or None
    return model


def _check(params: PPAParams, source: str) -> None:
    d = params.n_features
    sizes = {"feature": d, "output": d, "step": d - 1, "power": params.forward.shape[1]}
    wrong = [name for name, dims in _DIMS.items() if getattr(params, name).shape != tuple(sizes[k] for k in dims)]
    if wrong:
        raise ValueError(f"{source} is corrupt: the shapes of {wrong} do not fit d = {d}")
    if not all(np.isfinite(a).all() for a in params.arrays().values()):
        raise ValueError(f"{source} is corrupt: parameters hold NaN or inf")
    for name in ("rotation", "pca_rotation"):
        if not np.allclose(getattr(params, name) @ getattr(params, name).T, np.eye(d), atol=1e-8):
            raise ValueError(f"{source} is corrupt: {name} is not orthogonal")
    if (params.degrees < 1).any() or params.degrees.max(initial=1) > params.forward.shape[1] or (params.scale <= 0).any():
        raise ValueError(f"{source} is corrupt: degrees or scales out of range")


def _engine(path: Path, format: str | None) -> str:
    if format is not None:
        if format not in ("netcdf", "zarr"):
            raise ValueError(f"format must be 'netcdf' or 'zarr', got {format!r}")
        return format
    return "zarr" if path.suffix == ".zarr" or path.is_dir() else "netcdf"


def save_model(model: PPA, path: str | os.PathLike, format: str | None = None) -> Path:
    """Write a fitted model to netCDF (``.nc``, default) or zarr (``.zarr``); returns the path."""
    path = Path(path)
    ds = to_dataset(model)
    if _engine(path, format) == "zarr":
        ds.to_zarr(path, mode="w", consolidated=False)
    else:
        ds.to_netcdf(path, engine="h5netcdf")
    return path


def load_model(path: str | os.PathLike, format: str | None = None) -> PPA:
    """Read a model written by :func:`save_model`; a corrupt, truncated or foreign file raises ValueError."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no model at {path}")
    engine = _engine(path, format)
    try:
        with (xr.open_zarr(path, consolidated=False) if engine == "zarr" else xr.open_dataset(path, engine="h5netcdf")) as ds:
            return from_dataset(ds.load(), source=str(path))
    except ValueError:
        raise
    except Exception as err:  # the readers raise many types on damaged files
        raise ValueError(f"{path} is not a readable ppa_xr model ({engine}): {type(err).__name__}: {err}") from err


def open_band_stack(
    paths: Sequence[str | os.PathLike], bands: Sequence[Hashable] | None = None, chunks=None, masked: bool = False
) -> xr.DataArray:
    """Stack single-band rasters (one GeoTIFF per band, as Landsat ships) into a ``(band, y, x)`` cube.

    ``bands`` labels the bands (default: the file names without suffix);
    ``chunks`` and ``masked`` go to :func:`rioxarray.open_rasterio`. Every file
    must have one band and the same grid (shape, CRS and transform).
    """
    import rioxarray

    paths = [Path(p) for p in paths]
    bands = [p.stem for p in paths] if bands is None else list(bands)
    if len(bands) != len(paths) or not paths:
        raise ValueError(f"need one label per file, got {len(bands)} labels for {len(paths)} files")
    layers = [rioxarray.open_rasterio(p, chunks=chunks, masked=masked) for p in paths]
    first = layers[0]
    for path, layer in zip(paths, layers):
        if layer.sizes["band"] != 1:
            raise ValueError(f"{path} has {layer.sizes['band']} bands; open multiband files with rioxarray.open_rasterio")
        same_grid = layer.shape == first.shape and layer.rio.crs == first.rio.crs and layer.rio.transform() == first.rio.transform()
        if not same_grid:
            raise ValueError(f"{path} is not on the grid of {paths[0]} (shape, CRS or transform differ); resample it first")
    cube = xr.concat([layer.squeeze("band", drop=True) for layer in layers], dim="band", combine_attrs="drop_conflicts")
    return cube.assign_coords(band=bands)
