"""Model files: a fitted PPA as data (netCDF or zarr), written atomically and verified on load; never a pickle.

Layout (format version 6): the arrays of :class:`~ppa_xr.core.PPAParams` as
variables over the dims ``feature`` (d), ``output`` (d), ``step`` (d-1) and
``power`` (max degree), each with the SHA-256 of its little-endian bytes in
its ``sha256`` attribute; the feature labels as the ``feature`` coordinate
(or, for a stacked dimension, one ``feature_level_<name>`` variable per
level) and other per-feature coordinates as ``feature_coord_<name>``; the
estimator's parameters (JSON), the fitting sample (JSON, one record per cube), the feature dimension, the format name and
version, the ppa_xr version and the creation date in the attributes.

This module knows the file layout only; :class:`ppa_xr.PPA` builds on it
(``model.save``, ``PPA.load``), so the two never import each other in a cycle.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import hashlib
import json
import numbers
import os
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np
import xarray as xr

from ._version import VERSION
from .core.params import PPAParams
from .files import check_output, locked, recover_interrupted, replace_atomically
from .labels import FeatureLabels
from .pixels import FitSample, PixelSample

FORMAT = "ppa_xr.model"
FORMAT_VERSION = 7  # 2: per-step biases (truncated reconstruction), the sample's PCA, checksums, n_folds; 3: standardize;
# 4: selection_samples; 5: robust; 6: validation, the fitting sample as a list, one entry per cube (pooled fits);
# 7: a whitening matrix in place of the scales (noise-adjusted PPA), noise_cov
READABLE = (2, 3, 4, 5, 6, 7)  # a version 2 file is a model without standardization
SUFFIXES = {".nc": "netcdf", ".zarr": "zarr"}
_DIMS = {
    "mean": ("feature",), "rotation": ("output", "feature"), "degrees": ("step",), "center": ("step",),
    "scale": ("step",), "forward_bias": ("step", "output"), "forward": ("step", "power", "output"),
    "inverse_bias": ("step", "feature"), "inverse": ("step", "power", "feature"), "explained_variance": ("output",),
    "pca_rotation": ("output", "feature"), "pca_variance": ("output",), "whitening": ("whitened", "feature"),
}
#: the noise covariance of a noise-whitening model (the estimator's ``noise_cov``; absent otherwise)
_NOISE = "noise_cov"
#: arrays of older formats: the standardizing scales ``D`` (versions 3-6), read as ``whitening = diag(1 / D)``
_LEGACY = {"feature_scale": (3, 6)}
#: names added in a format version, absent from older files
_ADDED = {3: {"feature_scale", "standardize"}, 4: {"selection_samples"}, 5: {"robust"}, 6: {"validation"},
          7: {"whitening", "noise_cov"}}
#: the values an older file implies: no scale, no standardization, degrees selected on every row, no robust fit, groups
_DEFAULTS = {"standardize": False, "selection_samples": None, "robust": False, "validation": "groups", "noise_cov": None}
_COORD, _LEVEL = "feature_coord_", "feature_level_"
#: zarr codecs a model may use: none of them can run code when decoded
_SAFE_CODECS = {"bytes", "zstd", "blosc", "gzip", "zlib", "crc32c", "transpose", "vlen-utf8", "vlen-bytes", "lz4", "bz2", "lzma"}


def _canonical(name: str, values: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(values, dtype="<i8" if name == "degrees" else "<f8")


def _checksum(name: str, values: np.ndarray) -> str:
    return hashlib.sha256(_canonical(name, values).tobytes()).hexdigest()


def to_dataset(params: PPAParams, init: dict[str, Any], features: FeatureLabels | None, sample: FitSample | None = None) -> xr.Dataset:
    """The model as an xarray Dataset: parameters with checksums, labels, estimator parameters and provenance."""
    init = dict(init)  # the estimator's get_params(): every parameter, whatever the estimator names
    if not isinstance(init["leading"], str):
        raise ValueError("a model with a callable leading-vector strategy cannot be saved as data; register it by name instead")
    degree, seed = init["degree"], init["random_state"]
    init["degree"] = int(degree) if isinstance(degree, numbers.Integral) else [int(g) for g in degree]
    init["random_state"] = int(seed) if isinstance(seed, numbers.Integral) else None  # a RandomState is state
    ds = xr.Dataset({name: (dims, getattr(params, name), {"sha256": _checksum(name, getattr(params, name))}) for name, dims in _DIMS.items()})
    if init["noise_cov"] is not None:  # an array: a variable, named in the parameters by true
        noise = np.asarray(init["noise_cov"], dtype=np.float64)
        ds[_NOISE] = (("noise", "feature"), noise, {"sha256": _checksum(_NOISE, noise)})
        init["noise_cov"] = True
    if features is not None and features.labels is not None:
        if features.levels:
            for i, level in enumerate(features.levels):
                ds[_LEVEL + level] = ("feature", _portable([label[i] for label in features.labels]))
        else:
            ds = ds.assign_coords(feature=_portable(features.labels))
    for name, values in (features.coords if features else {}).items():
        ds[_COORD + name] = ("feature", _portable(values))
    ds.attrs = {
        "ppa_xr_format": FORMAT,
        "ppa_xr_format_version": FORMAT_VERSION,
        "ppa_xr_version": VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "tails": params.tails,
        "estimator_params": json.dumps(init),
        "feature_dim": str(features.dim) if features else "",
        "feature_levels": json.dumps(list(features.levels)) if features and features.levels else "",
        "feature_variables": int(bool(features and features.variables)),
        "fit_sample": json.dumps([dataclasses.asdict(cube) for cube in sample.cubes]) if sample is not None else "",
        "title": "Principal Polynomial Analysis model (ppa_xr)",
    }
    return ds


def _portable(values) -> np.ndarray:
    """Fixed-width unicode as variable-length strings, which netCDF and zarr v3 both specify."""
    values = np.asarray(values)
    return values.astype(object) if values.dtype.kind == "U" else values


def _in_store(name: str) -> bool:
    """Whether an entry of a zarr store is one a model writes (its metadata, or an array of :func:`_allowed`)."""
    return name in ("zarr.json", ".zattrs", ".zgroup", ".zmetadata") or _allowed(name)


def _allowed(name: str) -> bool:
    return name in _DIMS or name in _LEGACY or name in (_NOISE, "feature") or name.startswith((_COORD, _LEVEL))


def from_dataset(
    ds: xr.Dataset, parameters: Sequence[str], source: str = "dataset",
) -> tuple[PPAParams, dict[str, Any], FeatureLabels | None, FitSample | None]:
    """Parameters, estimator parameters and labels from :func:`to_dataset`'s layout, verified array by array;
    ``parameters``: the estimator's parameter names (those of its ``__init__``), of which a file of an older
    format lacks those added since (:data:`_ADDED`)."""
    if ds.attrs.get("ppa_xr_format") != FORMAT:
        raise ValueError(f"{source} is not a ppa_xr model: it has no ppa_xr_format={FORMAT!r} attribute")
    raw = ds.attrs.get("ppa_xr_format_version")
    if not isinstance(raw, numbers.Integral | np.integer):
        raise ValueError(f"{source} is corrupt: its format version {raw!r} is not an integer")
    if int(raw) not in READABLE:
        advice = "refit and save the model with this ppa_xr" if raw < FORMAT_VERSION else "upgrade ppa_xr"
        raise ValueError(f"{source} has model format version {raw}; this ppa_xr reads versions {list(READABLE)} ({advice})")
    absent = set().union(*(names for version, names in _ADDED.items() if version > int(raw)))
    expected = [name for name in _DIMS if name not in absent] + [n for n, (low, high) in _LEGACY.items() if low <= raw <= high]
    foreign = [str(n) for n in ds.variables if not _allowed(str(n))]
    if foreign:
        raise ValueError(f"{source} holds variables that are not part of a ppa_xr model: {foreign}; refusing to read it")
    later = sorted(name for name in absent | {n for n, (_, high) in _LEGACY.items() if raw > high} if name in ds.variables)
    if later:
        raise ValueError(f"{source} is inconsistent: a format-{int(raw)} file cannot hold {later} (added in a later version); "
                         "it was altered or mislabelled: save the model again with ppa_xr")
    missing = [name for name in expected if name not in ds]
    if missing:
        raise ValueError(f"{source} is corrupt or truncated: variables {missing} are missing")
    try:
        arrays = {name: np.asarray(ds[name].values) for name in expected}
        init = json.loads(ds.attrs["estimator_params"])
        tails = str(ds.attrs["tails"])
    except (KeyError, ValueError, TypeError, OSError, RuntimeError) as err:
        raise ValueError(f"{source} is corrupt or truncated: {err}") from err
    for name, values in arrays.items():
        if values.dtype.kind != ("i" if name == "degrees" else "f"):
            raise ValueError(f"{source} is corrupt: {name} has dtype {values.dtype}")
        if ds[name].attrs.get("sha256") != _checksum(name, values):
            raise ValueError(f"{source} is corrupt: the checksum of {name!r} does not match its values")
    names = [name for name in parameters if name not in absent]
    if not isinstance(init, dict) or set(init) != set(names):
        raise ValueError(f"{source} is corrupt: estimator_params must name exactly {names}")
    init = {name: _DEFAULTS[name] for name in absent if name in _DEFAULTS} | init
    if init["tails"] != tails:
        raise ValueError(f"{source} is corrupt: its tails attribute {tails!r} disagrees with its parameters ({init['tails']!r})")
    init["noise_cov"] = _noise(ds, init["noise_cov"], source)
    arrays = {k: v.astype(np.int64 if k == "degrees" else np.float64) for k, v in arrays.items()}
    if "feature_scale" in arrays:
        scales = arrays.pop("feature_scale")
        if not (np.isfinite(scales).all() and (scales > 0).all()):
            raise ValueError(f"{source} is corrupt: its feature scales are not positive")
        arrays["whitening"] = np.diag(1 / scales)
    params = PPAParams(**arrays, tails=tails)
    _check(params, source)
    _check_whitening(params, init, source)
    init = {k: (tuple(v) if isinstance(v, list) else v) for k, v in init.items()}
    return params, init, _features(ds, source), _sample(ds, source, int(raw))


def _noise(ds: xr.Dataset, flag, source: str) -> np.ndarray | None:
    """The noise covariance a noise-whitening model stores as a variable (its parameter says true)."""
    if flag is None or flag is False:
        if _NOISE in ds:
            raise ValueError(f"{source} is inconsistent: it holds a noise covariance its parameters do not name")
        return None
    if flag is not True or _NOISE not in ds:
        raise ValueError(f"{source} is corrupt: its noise covariance is missing or misdeclared")
    values = np.asarray(ds[_NOISE].values)
    if values.dtype.kind != "f" or ds[_NOISE].attrs.get("sha256") != _checksum(_NOISE, values):
        raise ValueError(f"{source} is corrupt: the checksum of {_NOISE!r} does not match its values")
    return values.astype(np.float64)


def _check_whitening(params: PPAParams, init: dict[str, Any], source: str) -> None:
    """``W`` must be what the parameters say: the identity, positive diagonal scales, or a noise whitening."""
    if init["noise_cov"] is not None:
        W, d = params.whitening, params.n_features
        product = W @ init["noise_cov"] @ W.T  # W N W^T: a multiple of the identity
        ok = np.allclose(product, np.eye(d) * np.trace(product) / d, rtol=1e-6, atol=1e-9 * abs(np.trace(product)) / d)
    elif init["standardize"]:
        ok = params.feature_scale is not None and bool((params.feature_scale > 0).all())
    else:
        ok = not params.whitened
    if not ok:
        what = "noise whitening" if init["noise_cov"] is not None else "standardization" if init["standardize"] else "no whitening"
        raise ValueError(f"{source} is inconsistent: its whitening matrix does not match its parameters ({what})")


def _sample(ds: xr.Dataset, source: str, version: int) -> FitSample | None:
    """Which pixels the model was fitted on (None when fitted on a plain array); one cube's record before version 6."""
    raw = ds.attrs.get("fit_sample") or ""
    if not raw:
        return None
    try:
        fields = json.loads(raw)
        cubes = fields if version >= 6 else [fields]
        if not isinstance(cubes, list) or not cubes:
            raise TypeError(f"expected a list of samples, got {type(cubes).__name__}")
        return FitSample(tuple(
            PixelSample(int(c["seed"]), int(c["key_max"]), int(c["size"]), tuple(int(v) for v in c["shape"]),
                        (int(c["witness"][0]), str(c["witness"][1])) if c.get("witness") else None) for c in cubes
        ))
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{source} is corrupt: its fit_sample attribute is not readable ({err})") from err


def _features(ds: xr.Dataset, source: str) -> FeatureLabels | None:
    dim = ds.attrs.get("feature_dim") or None
    if dim is None:
        return None
    try:
        levels = tuple(str(v) for v in json.loads(ds.attrs["feature_levels"])) if ds.attrs.get("feature_levels") else None
    except (ValueError, TypeError) as err:
        raise ValueError(f"{source} is corrupt: its feature_levels attribute is not a JSON list of names ({err})") from err
    if levels and any(_LEVEL + level not in ds for level in levels):
        raise ValueError(f"{source} is corrupt: the levels {list(levels)} of its feature labels are not all stored")
    if levels:
        labels = np.empty(ds.sizes["feature"], dtype=object)
        labels[:] = list(zip(*(ds[_LEVEL + level].values.tolist() for level in levels)))
    else:
        labels = ds["feature"].values if "feature" in ds.coords else None
    coords = {str(name)[len(_COORD):]: ds[name].values for name in ds.variables if str(name).startswith(_COORD)}
    return FeatureLabels(dim, labels, coords, levels, bool(ds.attrs.get("feature_variables", 0)))


def _check(params: PPAParams, source: str) -> None:
    d = params.n_features
    sizes = {"feature": d, "output": d, "whitened": d, "step": d - 1, "power": params.forward.shape[1]}
    wrong = [name for name, dims in _DIMS.items() if getattr(params, name).shape != tuple(sizes[k] for k in dims)]
    if wrong:
        raise ValueError(f"{source} is corrupt: the shapes of {wrong} do not fit d = {d}")
    if not all(np.isfinite(a).all() for a in params.arrays().values()):
        raise ValueError(f"{source} is corrupt: parameters hold NaN or inf")
    for name in ("rotation", "pca_rotation"):
        if not np.allclose(getattr(params, name) @ getattr(params, name).T, np.eye(d), atol=1e-8):
            raise ValueError(f"{source} is corrupt: {name} is not orthogonal")
    if (params.degrees < 1).any() or params.degrees.max(initial=1) > params.forward.shape[1] or (params.scale <= 0).any() \
            or not np.linalg.matrix_rank(params.whitening) == d:
        raise ValueError(f"{source} is corrupt: degrees or scales out of range")


def engine(path: Path, format: str | None) -> str:
    """``"netcdf"`` or ``"zarr"``: from ``format``, else from the suffix (``.nc``, ``.zarr``)."""
    if format is not None:
        if format not in SUFFIXES.values():
            raise ValueError(f"format must be 'netcdf' or 'zarr', got {format!r}")
        return format
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"a model path must end in .nc (netCDF) or .zarr, got {path}; or pass format='netcdf' / 'zarr'")
    return SUFFIXES[path.suffix.lower()]


def _is_model(path: Path) -> bool:
    """Whether ``path`` holds a ppa_xr model (read from its attributes only, nothing decoded)."""
    try:
        if path.is_dir():
            meta = path / "zarr.json"
            attrs = json.loads(meta.read_text()).get("attributes", {}) if meta.exists() else json.loads((path / ".zattrs").read_text())
            return attrs.get("ppa_xr_format") == FORMAT
        import h5py

        with h5py.File(path, "r") as f:
            value = f.attrs.get("ppa_xr_format")
        return (value.decode() if isinstance(value, bytes) else value) == FORMAT
    except (OSError, ValueError, KeyError, AttributeError):
        return False


def check_path(path: str | os.PathLike, format: str | None, overwrite: bool, inputs=()) -> Path:
    """Where a model may be written: an existing path only if it holds a model and ``overwrite``; never an input."""
    path = Path(path)
    engine(path, format)
    if path.exists() and not _is_model(path):
        raise FileExistsError(f"{path} exists and is not a ppa_xr model; refusing to replace it, choose another path")
    foreign = sorted(p.name for p in path.iterdir() if not _in_store(p.name)) if path.is_dir() else []
    if foreign:
        raise FileExistsError(
            f"{path} holds a ppa_xr model and files a model does not write ({', '.join(foreign)}); replacing the store would "
            "delete them: move them out of it, or save to another path"
        )
    return check_output(path, [path.suffix.lower()], inputs, overwrite, what="model")


def write(ds: xr.Dataset, path: str | os.PathLike, format: str | None = None, overwrite: bool = False) -> Path:
    """Write a model Dataset atomically; an existing path is replaced only if it is a model and ``overwrite``."""
    path = check_path(path, format, overwrite)
    kind = engine(path, format)

    def save(tmp: Path) -> None:
        if kind == "zarr":
            ds.to_zarr(tmp, mode="w-", consolidated=False)
        else:
            ds.to_netcdf(tmp, engine="h5netcdf")

    with locked(path):  # concurrent saves take turns: the last one wins whole
        return replace_atomically(path, save)


def _codecs(path: Path) -> set[str]:
    """Names of every codec/filter/compressor in a zarr store's metadata (v2 or v3), read as JSON."""
    names = set()
    for meta in list(path.rglob("zarr.json")) + list(path.rglob(".zarray")):
        try:
            spec = json.loads(meta.read_text())
        except ValueError as err:
            raise ValueError(f"{path} is corrupt: {meta.relative_to(path)} is not valid JSON ({err})") from err
        if meta.name == "zarr.json":
            stack = list(spec.get("codecs") or [])
            while stack:  # sharding nests codecs
                codec = stack.pop()
                names.add(str(codec.get("name")))
                stack += (codec.get("configuration") or {}).get("codecs") or []
        else:
            names |= {str(f.get("id")) for f in (spec.get("filters") or [])}
            if spec.get("compressor"):
                names.add(str(spec["compressor"].get("id")))
            if spec.get("dtype") in ("|O", "object"):
                names.add("object")
    return names


def read(path: str | os.PathLike, format: str | None = None) -> xr.Dataset:
    """Open a model file and load its variables, after checking that nothing in it can run code."""
    path = Path(path)
    with locked(path, reading=True):  # a save in progress finishes first
        return _read(path, format)


def _read(path: Path, format: str | None) -> xr.Dataset:
    if recover_interrupted(path):
        import warnings

        warnings.warn(f"{path}: an earlier save was interrupted; the previous model was put back", UserWarning, stacklevel=4)
    if not path.exists():
        raise FileNotFoundError(f"no model at {path}")
    kind = "zarr" if format is None and path.is_dir() else engine(path, format)
    if kind == "zarr":
        if not path.is_dir() or not any(path.iterdir()):
            raise ValueError(f"{path} is {'an empty directory' if path.is_dir() else 'not a directory'}, not a ppa_xr model")
        unsafe = _codecs(path) - _SAFE_CODECS
        if unsafe:
            raise ValueError(f"{path} uses codecs {sorted(unsafe)} that a ppa_xr model never uses; refusing to decode it")
    try:
        opened = xr.open_zarr(path, consolidated=False) if kind == "zarr" else xr.open_dataset(path, engine="h5netcdf")
    except Exception as err:  # the readers raise many types on damaged or foreign files
        raise ValueError(f"{path} is not a readable ppa_xr model ({kind}): {type(err).__name__}: {err}") from err
    with opened as ds:
        if ds.attrs.get("ppa_xr_format") != FORMAT:
            raise ValueError(f"{path} is not a ppa_xr model: it has no ppa_xr_format={FORMAT!r} attribute")
        foreign = [str(n) for n in ds.variables if not _allowed(str(n))]
        if foreign:
            raise ValueError(f"{path} holds variables that are not part of a ppa_xr model: {foreign}; refusing to read it")
        try:
            return ds.load()
        except Exception as err:
            raise ValueError(f"{path} is corrupt or truncated ({kind}): {type(err).__name__}: {err}") from err
