"""Model files: a fitted PPA as data (netCDF or zarr), written atomically and verified on load; never a pickle.

Layout (format version 12): the arrays of :class:`~ppa_xr.core.params.PPAParams` as
variables over the dims ``feature`` (d), ``output`` (d), ``step`` (d-1) and
``power`` (max degree); the feature labels as the ``feature`` coordinate
(or, for a stacked dimension, one ``feature_level_<name>`` variable per
level) and other per-feature coordinates as ``feature_coord_<name>``; the
column names of a DataFrame fitted on (scikit-learn's ``feature_names_in_``)
as ``feature_names``; the
fitting sample's error curve against its PCA as ``fit_error_ratio``; the
estimator's parameters (JSON), the fitting sample (JSON, one record per
cube), the feature dimension, the format name and version, the ppa_xr
version and the creation date in the attributes. Every variable carries the
SHA-256 of its values in its ``sha256`` attribute, and the attributes that
define the model the SHA-256 of their JSON in ``attrs_sha256``: a flipped
byte anywhere is refused on load. One SHA-256 over the whole record, every
variable's name, shape and checksum (with the calendar or resolution its
dates as labels read back at) and the attributes' checksum, ties the
arrays of one save together (``record_sha256``): a store holding arrays of
two saves is refused, although each array matches its own checksum.

Older formats still load: the parameters a file does not record take the
values its format implied (:func:`ppa_xr.core.spec.implied_by`), and
parameters since retired (:data:`ppa_xr.core.spec.RETIRED`) are dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import io
import json
import numbers
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import xarray as xr

from .._version import VERSION
from ..core import spec
from ..core.checks import warn_user
from ..core.keys import FitSample, PixelSample
from ..core.params import PPAParams
from ..core.spec import Spec
from .._atomic import as_path, check_output, foreign_entries, locked, recover_interrupted, remove_stale, replace_atomically, special, suffix_of
from .labels import FeatureLabels, calendar, kinds, uniform

FORMAT = "ppa_xr.model"
FORMAT_VERSION = 12  # 2: per-step biases (truncated reconstruction), the sample's PCA, checksums, n_folds; 3: standardize;
# 4: selection_samples; 5: robust; 6: validation, the fitting sample as a list, one entry per cube (pooled fits);
# 7: a whitening matrix in place of the scales (noise-adjusted PPA), noise_cov; 8: validation retired, checksums of
# labels and attributes, the fitting sample's error curve, the configuration fitted (configuration_); 9: one checksum
# over the whole record (record_sha256); reduced models (S-mode, feature weights): the map's own dimension "map" (r)
# beside the inputs' "feature" (d), basis, feature_root; 10: the outputs' marginal densities (marginal, marginal_range);
# 11: a DataFrame's column names (feature_names); 12: the configuration's runs of tied outputs turned (``turned``)
READABLE = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)  # a version 2 file is a model without standardization
SUFFIXES = {".nc": "netcdf", ".zarr": "zarr"}
_DIMS = {
    "mean": ("feature",), "rotation": ("output", "map"), "degrees": ("step",), "center": ("step",),
    "scale": ("step",), "forward_bias": ("step", "output"), "forward": ("step", "power", "output"),
    "inverse_bias": ("step", "map"), "inverse": ("step", "power", "map"), "explained_variance": ("output",),
    "pca_rotation": ("output", "map"), "pca_variance": ("output",), "whitening": ("whitened", "feature"),
}
#: a reduced model's arrays (``ppa_xr.core.params``), written where it has them
_REDUCTION = {"basis": ("feature", "whitened"), "feature_root": ("feature",)}
#: the outputs' marginal densities (``ppa_xr.core.fill.with_marginals``), written where the model has them
_MARGINAL = {"marginal": ("output", "marginal_point"), "marginal_range": ("output", "bound")}
#: variables that appeared in a format version after the first
SINCE = {"whitening": 7, "noise_cov": 7, "fit_error_ratio": 8, "basis": 9, "feature_root": 9, "sample_size": 9, "marginal": 10,
         "marginal_range": 10, "feature_names": 11}
#: arrays of older formats: the standardizing scales ``D`` (versions 3-6), read as ``whitening = diag(1 / D)``
LEGACY = {"feature_scale": (3, 6)}
#: the noise covariance of a noise-whitening model (the estimator's ``noise_cov``; absent otherwise)
_NOISE = "noise_cov"
_CURVE = "fit_error_ratio"
#: the fitting sample's effective size and whether it was weighted: North's errors after a load
_SIZE = "sample_size"
#: the column names of a DataFrame the model was fitted on (``feature_names_in_``): transform matches columns by them
_NAMES = "feature_names"
_COORD, _LEVEL = "feature_coord_", "feature_level_"
#: attributes that define the model (checksummed from format 8 on)
_DEFINING = ("tails", "estimator_params", "feature_dim", "feature_levels", "feature_variables", "fit_sample", "configuration")
#: zarr codecs a model may use: none of them can run code when decoded
_SAFE_CODECS = {"bytes", "zstd", "blosc", "gzip", "zlib", "crc32c", "transpose", "vlen-utf8", "vlen-bytes", "lz4", "bz2", "lzma"}


def _digest(values: Any, integer: bool = False, unit: Any = "ns") -> str:
    """SHA-256 of values in a canonical form: numbers as little-endian int64 (``integer``) or float64, anything
    else (labels: strings, datetimes, tuples) as the JSON of their text, dates at nanoseconds whatever their resolution (a
    cube's ``datetime64[s]`` labels are read back from the file as ``datetime64[ns]``; files of the previous version took them
    at their own resolution, ``unit``)."""
    values = np.asarray(values)
    if values.dtype.kind in "iufb":
        return hashlib.sha256(np.ascontiguousarray(values, dtype="<i8" if integer else "<f8").tobytes()).hexdigest()
    if values.dtype.kind == "M":
        values = np.datetime_as_string(values, unit=unit)
    return hashlib.sha256(json.dumps([str(v) for v in values.ravel().tolist()]).encode()).hexdigest()


def _checksum(name: str, values: np.ndarray) -> str:
    """The SHA-256 a parameter array carries (degrees as integers)."""
    return _digest(values, integer=name == "degrees")


def _attrs_digest(attrs: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps({k: str(attrs.get(k, "")) for k in _DEFINING}, sort_keys=True).encode()).hexdigest()


def _record_digest(ds: xr.Dataset) -> str:
    """SHA-256 over one save's record: every variable's name, shape and checksum (and, where it has them, the attributes
    that say how its labels read back, :data:`_READ_AS`), and the attributes' checksum."""
    record = sorted([str(name), list(var.shape), str(var.attrs.get("sha256", ""))] + [f"{k}={var.attrs[k]}" for k in _READ_AS if k in var.attrs]
                    for name, var in ds.variables.items())
    return hashlib.sha256(json.dumps([record, str(ds.attrs.get("attrs_sha256", ""))]).encode()).hexdigest()


def sealed(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the checksums of its attributes and of its whole record (format 9) computed from what it holds."""
    ds = ds.assign_attrs(attrs_sha256=_attrs_digest(ds.attrs))
    return ds.assign_attrs(record_sha256=_record_digest(ds))


def _json_parameters(declared: Spec) -> dict[str, Any]:
    """The parameters as JSON values: a callable strategy cannot be saved, a generator is state (saved as None),
    the noise covariance is a variable (named here by true)."""
    init = declared.values()
    if not isinstance(init["leading"], str):
        raise ValueError("a model with a callable leading-vector strategy cannot be saved as data; register it by name instead")
    init["degree"] = list(init["degree"]) if isinstance(init["degree"], tuple) else init["degree"]
    init["random_state"] = init["random_state"] if isinstance(init["random_state"], int) else None
    init["noise_cov"] = init["noise_cov"] is not None
    return init


def to_dataset(params: PPAParams, declared: Spec, features: FeatureLabels | None, sample: FitSample | None = None,
               error_ratio: np.ndarray | None = None, configuration: dict[str, Any] | None = None,
               sample_size: tuple[float, bool] | None = None, feature_names: np.ndarray | None = None) -> xr.Dataset:
    """The model as an xarray Dataset: parameters, labels and record (the fitting sample, its error curve
    against PCA, the configuration fitted), each with its checksum, and provenance."""
    init = _json_parameters(declared)
    ds = xr.Dataset({name: (dims, getattr(params, name)) for name, dims in _dims_of(params).items()})
    if declared.noise_cov is not None:
        ds[_NOISE] = (("noise", "feature"), declared.noise_cov)
    if error_ratio is not None:
        ds[_CURVE] = ("step", np.asarray(error_ratio, dtype=np.float64), {"long_name": "100 x PPA error / PCA error on the fitting sample"})
    if feature_names is not None:
        ds[_NAMES] = ("feature", *_stored(feature_names, "feature_names"))
    if sample_size is not None:
        ds[_SIZE] = ((), np.float64(sample_size[0]), {"long_name": "effective size of the fitting sample", "weighted": int(sample_size[1])})
    ds = _with_labels(ds, features)
    for name in ds.variables:
        ds[name].attrs["sha256"] = _checksum(str(name), ds[name].values)
    ds.attrs = _attributes(params, init, features, sample) | {"configuration": json.dumps(configuration) if configuration else ""}
    return sealed(ds)


def _with_labels(ds: xr.Dataset, features: FeatureLabels | None) -> xr.Dataset:
    """``ds`` with the feature labels (the ``feature`` coordinate, or one variable per level of a stacked
    dimension) and the other per-feature coordinates."""
    if features is None:
        return ds
    if features.labels is not None and features.levels:
        for i, level in enumerate(features.levels):
            ds[_LEVEL + level] = ("feature", *_stored([label[i] for label in features.labels], str(features.dim)))
    elif features.labels is not None:
        ds = ds.assign_coords(feature=("feature", *_stored(features.labels, str(features.dim))))
    for name, values in features.coords.items():
        ds[_COORD + name] = ("feature", *_stored(values, name))
    return ds


#: the attributes of labels that are cftime dates (stored as ISO text): their calendar and whether it has a year 0
_CALENDAR, _YEAR_ZERO = "ppa_xr_calendar", "ppa_xr_has_year_zero"
#: the resolution of numpy dates as labels other than nanoseconds (a file gives them back at nanoseconds)
_UNIT, _UNITS = "ppa_xr_resolution", ("D", "h", "m", "s", "ms", "us")
#: a label variable's attributes that say how its stored values read back (covered by the record's checksum)
_READ_AS = (_CALENDAR, _YEAR_ZERO, _UNIT)
_ISO = re.compile(r"(-?\d+)-(\d+)-(\d+)T(\d+):(\d+):(\d+)(?:\.(\d{6}))?")


def _stored(values: Any, dim: str) -> tuple[np.ndarray, dict[str, Any]]:
    """Labels or coordinates as a file stores them (:func:`_portable`) and their attributes: cftime dates (of any
    calendar) as their ISO text, with the calendar to read them back by; numpy dates with their resolution."""
    values = uniform(np.array(values, dtype=object) if isinstance(values, list) else np.asarray(values))
    found = calendar(values)
    if found is None or not found[1]:
        unit = np.datetime_data(values.dtype)[0] if found else "ns"
        return _portable(values, dim), ({_UNIT: unit} if unit in _UNITS else {})
    items = np.ravel(values).tolist()
    year_zero = {bool(v.has_year_zero) for v in items}
    if len(year_zero) > 1:
        raise ValueError(f"the cftime dates along {dim!r} mix calendars with and without a year 0: give them one "
                         f"(cftime's has_year_zero) before saving")
    return np.array([v.isoformat() for v in items], dtype=object), {_CALENDAR: found[0], _YEAR_ZERO: int(year_zero.pop())}


def _restored(ds: xr.Dataset, name: str, values: np.ndarray, source: str) -> np.ndarray:
    """Labels or coordinates as stored, cftime dates (:func:`_stored`) as dates again, numpy dates at their resolution."""
    if ds[name].attrs.get(_UNIT) in _UNITS and values.dtype.kind == "M":
        return values.astype(f"datetime64[{ds[name].attrs[_UNIT]}]")
    if _CALENDAR not in ds[name].attrs:
        return values
    try:
        import cftime

        fields = [_ISO.fullmatch(str(v)) for v in values.tolist()]
        if not all(fields):
            raise ValueError("not ISO dates")
        return np.array([cftime.datetime(*(int(g or 0) for g in match.groups()), calendar=str(ds[name].attrs[_CALENDAR]),
                                         has_year_zero=bool(ds[name].attrs.get(_YEAR_ZERO, 0))) for match in fields if match], dtype=object)
    except ImportError as err:
        raise ImportError(f"{source} labels its features with dates of the {ds[name].attrs[_CALENDAR]!r} calendar, which need "
                          "the cftime package to read: pip install cftime") from err
    except (AttributeError, TypeError, ValueError) as err:
        raise ValueError(f"{source} is corrupt: its {name} are not dates of the {ds[name].attrs[_CALENDAR]!r} calendar ({err})") from err


def _attributes(params: PPAParams, init: dict[str, Any], features: FeatureLabels | None, sample: FitSample | None) -> dict[str, Any]:
    """A model file's attributes: format, provenance, the parameters and what defines the model (:data:`_DEFINING`)."""
    return {
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


def _portable(values: np.ndarray, dim: str) -> np.ndarray:
    """Labels or coordinates of one kind (:func:`_stored`'s, :func:`~ppa_xr.model.labels.uniform`) as a file stores them
    exactly: numbers, dates, and strings (fixed-width unicode as variable-length strings, which netCDF and zarr v3 both
    specify); labels of mixed types, or holding None, refused."""
    if values.dtype.kind == "U":
        return values.astype(object)
    if values.dtype == object and not all(isinstance(v, str) for v in values.ravel().tolist()):
        raise ValueError(f"the model's labels along {dim!r} are of types {kinds(values)}, which a model file cannot store "
                         f"and read back as they are: label the cube's features with one type (numbers, strings or dates), "
                         f"e.g. cube.assign_coords({dim}=[str(v) for v in cube[{dim!r}].values]), and fit again")
    return values


def _dims_of(params: PPAParams) -> dict[str, tuple[str, ...]]:
    """The dims of each array ``params`` has: every model's, a reduced model's, the outputs' marginal densities."""
    return _DIMS | (_REDUCTION if params.reduced else {}) | (_MARGINAL if params.marginal is not None else {})


def _allowed(name: str) -> bool:
    """Whether a variable is one a model writes."""
    return name in _DIMS or name in _REDUCTION or name in _MARGINAL or name in LEGACY or name in (_NOISE, _CURVE, _SIZE, _NAMES, "feature") or name.startswith((_COORD, _LEVEL))


def _check_format(ds: xr.Dataset, source: str) -> None:
    """Refuse a Dataset that is not a ppa_xr model: one without its ``ppa_xr_format`` attribute."""
    if ds.attrs.get("ppa_xr_format") != FORMAT:
        raise ValueError(f"{source} is not a ppa_xr model: it has no ppa_xr_format={FORMAT!r} attribute")


def _version(ds: xr.Dataset, source: str) -> int:
    _check_format(ds, source)
    raw = ds.attrs.get("ppa_xr_format_version")
    if isinstance(raw, (bool, np.bool_)) or not isinstance(raw, numbers.Integral | np.integer):
        raise ValueError(f"{source} is corrupt: its format version {raw!r} is not an integer")
    if int(raw) not in READABLE:
        advice = "refit and save the model with this ppa_xr" if raw < FORMAT_VERSION else "upgrade ppa_xr"
        raise ValueError(f"{source} has model format version {raw}; this ppa_xr reads versions {list(READABLE)} ({advice})")
    return int(raw)


def _arrays_of(ds: xr.Dataset, version: int, source: str) -> dict[str, np.ndarray]:
    """The parameter arrays a file of ``version`` must hold, each checked against its checksum."""
    expected = _expected(ds, version)
    _refuse_foreign(ds, source)
    later = sorted(n for n in [*SINCE, *LEGACY] if n in ds.variables and not _belongs(n, version))
    if later:
        raise ValueError(f"{source} is inconsistent: a format-{version} file cannot hold {later} (added in another version); "
                         "it was altered or mislabelled: save the model again with ppa_xr")
    missing = [name for name in expected if name not in ds]
    if missing:
        raise ValueError(f"{source} is corrupt or truncated: variables {missing} are missing")
    arrays = {name: _verified(ds, name, source, "i" if name == "degrees" else "f") for name in expected}
    return {k: v.astype(np.int64 if k == "degrees" else np.float64) for k, v in arrays.items()}


def _expected(ds: xr.Dataset, version: int) -> list[str]:
    """The arrays a file of ``version`` holds: every model's, and a reduced model's and the marginal densities where the
    file has them (both of each pair, or PPAParams refuses)."""
    return [name for name in [*_DIMS, *LEGACY] if _belongs(name, version)] + [name for name in [*_REDUCTION, *_MARGINAL] if name in ds.variables]


def _refuse_foreign(ds: xr.Dataset, source: str) -> None:
    """A ValueError naming the variables of ``ds`` that no model writes."""
    foreign = [str(n) for n in ds.variables if not _allowed(str(n))]
    if foreign:
        raise ValueError(f"{source} holds variables that are not part of a ppa_xr model: {foreign}; refusing to read it")


def _belongs(name: str, version: int) -> bool:
    """Whether a file of format ``version`` holds the variable ``name`` (when the model has it)."""
    low, high = LEGACY.get(name, (SINCE.get(name, 2), FORMAT_VERSION))
    return low <= version <= high


def _verified(ds: xr.Dataset, name: str, source: str, kind: str | None = None, any_unit: bool = False) -> np.ndarray:
    """A variable's values, refused where its kind or checksum is wrong; ``any_unit``: dates whose checksum is of
    their values at another resolution than nanoseconds pass too (as files of format 10 took it)."""
    try:
        values = np.asarray(ds[name].values)
    except (ValueError, TypeError, OSError, RuntimeError) as err:
        raise ValueError(f"{source} is corrupt or truncated: {err}") from err
    if kind is not None and values.dtype.kind != kind:
        raise ValueError(f"{source} is corrupt: {name} has dtype {values.dtype}")
    recorded = ds[name].attrs.get("sha256")
    if recorded != _checksum(name, values) and not (any_unit and values.dtype.kind == "M" and any(recorded == _digest(values, unit=u) for u in _UNITS)):
        raise ValueError(f"{source} is corrupt: the checksum of {name!r} does not match its values")
    return values


def _parameters(ds: xr.Dataset, version: int, source: str) -> dict[str, Any]:
    """The estimator's parameters a file records, with those its format implies and without retired ones."""
    try:
        init = json.loads(ds.attrs["estimator_params"])
    except (KeyError, ValueError, TypeError) as err:
        raise ValueError(f"{source} is corrupt or truncated: {err}") from err
    implied = spec.implied_by(version)
    retired = {name for name, (low, high) in spec.RETIRED.items() if low <= version <= high}
    names = sorted(set(spec.names()) - set(implied) | retired)
    if not isinstance(init, dict) or set(init) != set(names):
        raise ValueError(f"{source} is corrupt: estimator_params must name exactly {names}")
    init = implied | {k: (tuple(v) if isinstance(v, list) else v) for k, v in init.items() if k not in retired}
    if init["tails"] != ds.attrs.get("tails"):
        raise ValueError(f"{source} is corrupt: its tails attribute {ds.attrs.get('tails')!r} disagrees with its parameters ({init['tails']!r})")
    init["noise_cov"] = _noise(ds, init["noise_cov"], source)
    return init


def from_dataset(ds: xr.Dataset, source: str = "dataset") -> tuple[PPAParams, Spec, FeatureLabels | None, FitSample | None]:
    """Parameters, the spec and labels from :func:`to_dataset`'s layout (or an older format's), verified
    array by array, attribute by attribute."""
    version = _version(ds, source)
    if version >= 8 and ds.attrs.get("attrs_sha256") != _attrs_digest(ds.attrs):
        raise ValueError(f"{source} is corrupt: the checksum of its attributes (parameters, labels, fitting sample) does not match")
    arrays = _arrays_of(ds, version, source)
    init = _parameters(ds, version, source)
    if "feature_scale" in arrays:
        scales = arrays.pop("feature_scale")
        if not (np.isfinite(scales).all() and (scales > 0).all()):
            raise ValueError(f"{source} is corrupt: its feature scales are not positive")
        arrays["whitening"] = np.diag(1 / scales)
    try:
        declared = Spec(**init)
        params = PPAParams(**arrays, tails=declared.tails)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{source} is corrupt: {err}") from err
    _check(params, source)
    _check_whitening(params, declared, source)
    features, sample = _features(ds, source, version), _sample(ds, source, version)
    if version >= 9 and ds.attrs.get("record_sha256") != _record_digest(ds):  # each part checked: now the whole
        raise ValueError(f"{source} is corrupt: its arrays are not those of one save (the checksum over the whole record does "
                         "not match: arrays were copied in from another model, added or removed); save the model again")
    return params, declared, features, sample


def configuration(ds: xr.Dataset, source: str = "dataset") -> dict[str, Any] | None:
    """The configuration a model was fitted with (``robust``, ``max_curved``, ``validated``, ``shrink``, ``turned``), None
    where the file does not record it (formats before 8); where it is older, ``shrink`` 1 (the last curve as fitted) and
    ``turned`` none (no tied outputs turned, ``ppa_xr.core.ties``)."""
    raw = ds.attrs.get("configuration") or ""
    if not raw:
        return None
    try:
        found = {"shrink": 1.0, "turned": []} | json.loads(raw)
        ok = set(found) == {"robust", "max_curved", "validated", "shrink", "turned"} and isinstance(found["robust"], bool) and \
            isinstance(found["validated"], bool) and (found["max_curved"] is None or isinstance(found["max_curved"], int)) and \
            isinstance(found["shrink"], (int, float)) and 0 <= found["shrink"] <= 1 and _runs(found["turned"])
    except (ValueError, TypeError):
        ok = False
    if not ok:
        raise ValueError(f"{source} is corrupt: its configuration attribute is not readable ({raw!r})")
    return found


def _runs(turned: Any) -> bool:
    """Whether a configuration's ``turned`` reads as runs of components, ``[first k, last k]`` each."""
    return isinstance(turned, list) and all(isinstance(run, list) and len(run) == 2 and all(isinstance(k, int) for k in run)
                                            for run in turned)


def error_ratio(ds: xr.Dataset, source: str = "dataset") -> np.ndarray | None:
    """The fitting sample's error curve against its PCA a file stores (None before format 8)."""
    return _verified(ds, _CURVE, source, "f").astype(np.float64) if _CURVE in ds else None


def sample_size(ds: xr.Dataset, source: str = "dataset") -> tuple[float, bool] | None:
    """The fitting sample's effective size and whether its rows were weighted (None where a file does not record it)."""
    if _SIZE not in ds:
        return None
    n = float(_verified(ds, _SIZE, source, "f"))
    if not n >= 1 or ds[_SIZE].attrs.get("weighted") not in (0, 1):
        raise ValueError(f"{source} is corrupt: its sample size {n} is not readable")
    return n, bool(ds[_SIZE].attrs["weighted"])


def feature_names(ds: xr.Dataset, source: str = "dataset") -> np.ndarray | None:
    """The column names of the DataFrame a model was fitted on (None where it was not, or the file is older)."""
    if _NAMES not in ds:
        return None
    names = _verified(ds, _NAMES, source)
    if not all(isinstance(v, str) for v in names.tolist()) or names.shape != (ds.sizes["feature"],):
        raise ValueError(f"{source} is corrupt: its {_NAMES} are not one string per feature")
    return names.astype(object)


def _noise(ds: xr.Dataset, flag: Any, source: str) -> np.ndarray | None:
    """The noise covariance a noise-whitening model stores as a variable (its parameter says true)."""
    if flag is None or flag is False:
        if _NOISE in ds:
            raise ValueError(f"{source} is inconsistent: it holds a noise covariance its parameters do not name")
        return None
    if flag is not True or _NOISE not in ds:
        raise ValueError(f"{source} is corrupt: its noise covariance is missing or misdeclared")
    return _verified(ds, _NOISE, source, "f").astype(np.float64)


def _check_whitening(params: PPAParams, declared: Spec, source: str) -> None:
    """``W`` must be what the parameters say: the identity, positive diagonal scales, or a noise whitening."""
    if params.reduced:  # W = V^T S, the features' weights (and standard deviations) in S
        ok = declared.noise_cov is None and bool(np.allclose(params.whitening, params.basis.T * params.feature_root, rtol=1e-12, atol=0))
        ok = ok and bool((params.feature_root >= 0).all()) and np.allclose(params.basis.T @ params.basis, np.eye(params.n_features), atol=1e-8)
    elif declared.noise_cov is not None:
        W, d = params.whitening, params.n_features
        product = W @ declared.noise_cov @ W.T  # W N W^T: a multiple of the identity
        ok = np.allclose(product, np.eye(d) * np.trace(product) / d, rtol=1e-6, atol=1e-9 * abs(np.trace(product)) / d)
    elif declared.standardize:
        ok = params.feature_scale is not None and bool((params.feature_scale > 0).all())
    else:
        ok = not params.whitened
    if not ok:
        what = "noise whitening" if declared.noise_cov is not None else "standardization" if declared.standardize else "no whitening"
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
        return FitSample(tuple(_pixel_sample(cube) for cube in cubes))
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{source} is corrupt: its fit_sample attribute is not readable ({err})") from err


def _pixel_sample(record: dict[str, Any]) -> PixelSample:
    """One cube's record, its numbers in range: a seed and a largest key are unsigned 64-bit, sizes are counts."""
    seed, key_max, size = int(record["seed"]), int(record["key_max"]), int(record["size"])
    shape = tuple(int(v) for v in record["shape"])
    if not (0 <= seed < 2**64 and 0 <= key_max < 2**64 and 0 <= size <= int(np.prod(shape)) and all(v > 0 for v in shape)):
        raise ValueError(f"seed, key_max, size or shape out of range in {record}")
    witness = record.get("witness")
    return PixelSample(seed, key_max, size, shape, (int(witness[0]), str(witness[1])) if witness else None)


def _levels(ds: xr.Dataset, source: str) -> tuple[str, ...] | None:
    """The level names of a stacked feature dimension's labels (None: plain labels), each level stored."""
    try:
        levels = tuple(str(v) for v in json.loads(ds.attrs["feature_levels"])) if ds.attrs.get("feature_levels") else None
    except (ValueError, TypeError) as err:
        raise ValueError(f"{source} is corrupt: its feature_levels attribute is not a JSON list of names ({err})") from err
    if levels and any(_LEVEL + level not in ds for level in levels):
        raise ValueError(f"{source} is corrupt: the levels {list(levels)} of its feature labels are not all stored")
    return levels


def _features(ds: xr.Dataset, source: str, version: int) -> FeatureLabels | None:
    """The feature labels a file stores (checked against their checksums from format 8 on), None without a feature dimension."""
    dim = ds.attrs.get("feature_dim") or None
    if dim is None:
        return None
    levels = _levels(ds, source)
    read = (lambda name: _restored(ds, name, _verified(ds, name, source, any_unit=version <= 10) if version >= 8 else ds[name].values, source))
    labels: np.ndarray | None
    if levels:
        labels = np.empty(ds.sizes["feature"], dtype=object)
        labels[:] = list(zip(*(_level_items(read(_LEVEL + level)) for level in levels)))
    else:
        labels = read("feature") if "feature" in ds.coords else None
    coords = {str(name)[len(_COORD):]: read(str(name)) for name in ds.variables if str(name).startswith(_COORD)}
    try:
        return FeatureLabels(dim, labels, coords, levels, bool(ds.attrs.get("feature_variables", 0)))
    except ValueError as err:
        raise ValueError(f"{source} is corrupt: its feature labels are not usable ({err})") from err


def _level_items(values: np.ndarray) -> list:
    """A stacked dimension's level values as its tuples hold them: numbers and strings as Python's, dates as pandas'
    (``tolist`` gives nanoseconds as integers)."""
    return pd.DatetimeIndex(values).tolist() if values.dtype.kind == "M" else values.tolist()


def _check(params: PPAParams, source: str) -> None:
    d = params.n_features
    points = None if params.marginal is None else params.marginal.shape[-1]
    sizes = {"feature": params.n_inputs, "map": d, "output": d, "whitened": d, "step": d - 1, "power": params.forward.shape[1],
             "marginal_point": points, "bound": 2}
    dims = _dims_of(params)
    wrong = [name for name, dims in dims.items() if getattr(params, name).shape != tuple(sizes[k] for k in dims)]
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
    _check_marginal(params, source)


def _check_marginal(params: PPAParams, source: str) -> None:
    """A ValueError where a recorded marginal density has fewer than 2 points or an interval of no positive width."""
    if params.marginal is not None and (params.marginal.shape[-1] < 2 or not (
            params.marginal_range[params.marginal.any(axis=1)] @ [-1, 1] > 0).all()):
        raise ValueError(f"{source} is corrupt: a marginal density needs at least 2 points over an interval of positive width")


def engine(path: Path, format: str | None) -> str:
    """``"netcdf"`` or ``"zarr"``: from ``format``, else from the suffix (``.nc``, ``.zarr``)."""
    if format is not None:
        if format not in SUFFIXES.values():
            raise ValueError(f"format must be 'netcdf' or 'zarr', got {format!r}")
        return format
    if path.suffix.lower() not in SUFFIXES and path.name.lower() not in SUFFIXES:
        raise ValueError(f"a model path must end in .nc (netCDF) or .zarr, got {path}; or pass format='netcdf' / 'zarr'")
    return SUFFIXES[suffix_of(path, SUFFIXES, "model path")]  # ".nc" alone: a ValueError, the name is missing


def _is_model(path: Path) -> bool:
    """Whether ``path`` holds a ppa_xr model (read from its attributes only, nothing decoded; no FIFO opened)."""
    try:
        if _special_entry(path):
            return False
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
    path = as_path(path, "model path")
    engine(path, format)
    if path.exists() and not _is_model(path):
        raise FileExistsError(f"{path} exists and is not a ppa_xr model; refusing to replace it, choose another path")
    foreign = foreign_entries(path, _allowed) if path.is_dir() else []
    if foreign:
        raise FileExistsError(
            f"{path} holds a ppa_xr model and files a model does not write ({', '.join(foreign)}); replacing the store would "
            "delete them: move them out of it, or save to another path"
        )
    return check_output(path, [path.suffix.lower() or path.name.lower()], inputs, overwrite, what="model")


def write(ds: xr.Dataset, path: str | os.PathLike, format: str | None = None, overwrite: bool = False) -> Path:
    """Write a model Dataset atomically; an existing path is replaced only if it is a model and ``overwrite``."""
    path = check_path(path, format, overwrite)
    kind = engine(path, format)

    files = _in_memory(ds, kind)
    with locked(path):  # concurrent saves take turns: the last one wins whole
        return replace_atomically(path, lambda tmp: _write_files(tmp, files, kind), sum(map(len, files.values())), "model")


class _Kept(io.BytesIO):
    """A memory file whose bytes outlive ``close()``: h5netcdf 1.3 (the lowest version allowed) closes the file
    object it writes to, later versions leave it open."""

    kept = b""

    def close(self) -> None:
        if not self.closed:
            self.kept = self.getvalue()
        super().close()

    def contents(self) -> bytes:
        return self.kept if self.closed else self.getvalue()


def _in_memory(ds: xr.Dataset, kind: str) -> dict[str, bytes]:
    """The model's file (``{"": bytes}``) or store (``{key: bytes}``, keys as zarr names them), built in memory: its
    size is known before anything is written, and Python writes it, meeting a full disk or a Ctrl-C with an exception
    (h5py crashed on a full disk; zarr's writes go on in its own thread after a Ctrl-C)."""
    if kind == "netcdf":
        buffer = _Kept()
        ds.to_netcdf(buffer, engine="h5netcdf")
        return {"": buffer.contents()}
    import zarr

    store: dict[str, Any] = {}
    ds.to_zarr(zarr.storage.MemoryStore(store), mode="w-", consolidated=False)
    return {key: value.to_bytes() for key, value in store.items()}


def _write_files(tmp: Path, files: dict[str, bytes], kind: str) -> None:
    """Write :func:`_in_memory`'s file at ``tmp``, or its store as a folder of files."""
    if kind == "netcdf":
        tmp.write_bytes(files[""])
        return
    for key, data in files.items():
        target = tmp.joinpath(*key.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


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
    path = as_path(path, "model path")
    with locked(path, reading=True):  # a save in progress finishes first
        return _read(path, format)


def _read(path: Path, format: str | None) -> xr.Dataset:
    if recover_interrupted(path):
        warn_user(f"{path}: an earlier save was interrupted; the previous model was put back", UserWarning)
    if path.exists():
        with contextlib.suppress(OSError):  # a read-only folder: what it holds stays, the model is read all the same
            remove_stale(path)  # an interrupted save's leftovers (the lock is held: no save is running)
    if not path.exists():
        raise FileNotFoundError(f"no model at {path}")
    if found := _special_entry(path):
        raise ValueError(f"{found}, not a file of a ppa_xr model (reading it would wait for a writer forever); load the model "
                         "from its file or store")
    kind = "zarr" if format is None and path.is_dir() else engine(path, format)
    if kind == "zarr":
        _check_store(path)
    try:
        opened = xr.open_zarr(path, consolidated=False) if kind == "zarr" else xr.open_dataset(path, engine="h5netcdf")
    except Exception as err:  # the readers raise many types on damaged or foreign files
        raise ValueError(f"{path} is not a readable ppa_xr model ({kind}): {type(err).__name__}: {err}") from err
    with opened as ds:
        _check_format(ds, str(path))
        _refuse_foreign(ds, str(path))
        try:
            return ds.load()
        except Exception as err:
            raise ValueError(f"{path} is corrupt or truncated ({kind}): {type(err).__name__}: {err}") from err


def _special_entry(path: Path) -> str | None:
    """The first FIFO, socket or device at ``path`` or in its store (:func:`~ppa_xr._atomic.special`), described;
    None where there is none."""
    for entry in [path, *(sorted(path.rglob("*")) if path.is_dir() else ())]:
        if kind := special(entry):
            return f"{entry} is {kind}" if entry == path else f"{entry.relative_to(path)} in {path} is {kind}"
    return None


def _check_store(path: Path) -> None:
    """A zarr model store before anything in it is decoded: a non-empty directory whose codecs cannot run code."""
    if not path.is_dir() or not any(path.iterdir()):
        raise ValueError(f"{path} is {'an empty directory' if path.is_dir() else 'not a directory'}, not a ppa_xr model")
    unsafe = _codecs(path) - _SAFE_CODECS
    if unsafe:
        raise ValueError(f"{path} uses codecs {sorted(unsafe)} that a ppa_xr model never uses; refusing to decode it")
