"""The checks a value passes at the public boundary, each written once.

Every check returns the value as the library uses it: numpy scalars
(``np.int64``, ``np.bool_``, ``np.str_``) become the Python ``int``, ``bool``
and ``str`` they stand for, so what was checked can be saved as JSON; a
value that is not what the check expects raises an error naming ``what``.
"""

from __future__ import annotations

import inspect
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

#: packages whose frames a warning skips on its way to the user's line: ppa_xr itself, and the libraries its
#: entry points run inside (scikit-learn's method wrappers, xarray's accessors, dask's schedulers)
_INSIDE = ("ppa_xr", "sklearn", "xarray", "dask", "contextlib", "functools", "concurrent", "threading")

Check = Callable[[Any], Any]


def integer(value: Any, what: str, low: int, high: int | None = None) -> int:
    """``value`` as an ``int`` in ``[low, high]``; a bool, a float (2.7, even 2.0) or a string is refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral) or int(value) < low or (high is not None and int(value) > high):
        raise ValueError(f"{what} must be an integer {_bound(low, high)}, got {value!r}")
    return int(value)


def _bound(low: int, high: int | None) -> str:
    """``"in [low, high]"``, or ``">= low"`` without ``high``: the range an :func:`integer` message states."""
    return f"in [{low}, {high}]" if high is not None else f">= {low}"


def check_components(k: Any, d: int, what: str = "n_components") -> int:
    """A count of components (asked for, or given to an inverse) as an int in ``[1, d]``: the one check of it."""
    return integer(k, what, 1, d)


def is_share(value: Any) -> bool:
    """Whether ``value`` is a share of the variance to keep, a float in (0, 1), rather than a count of components."""
    return isinstance(value, (float, np.floating)) and bool(0 < value < 1)


def _count(value: Any, what: str, high: int | None = None) -> int:
    """A count of components, :func:`integer` in ``[1, high]``, whose refusal says a share of the variance would do too:
    the one message of a value that is neither."""
    try:
        return integer(value, what, 1, high)
    except ValueError:
        raise ValueError(f"{what} must be an integer {_bound(1, high)} or a share of the variance in (0, 1) (e.g. 0.95), got {value!r}") from None


def features_last(x: np.ndarray, width: int, what: str = "x") -> np.ndarray:
    """``x`` refused unless it holds ``width`` values along its last axis, ``(..., width)``: the one check of a
    kernel's input."""
    if x.ndim < 1 or x.shape[-1] != width:
        raise ValueError(f"{what} must have {width} values along its last axis, got shape {x.shape}")
    return x


def table(x: np.ndarray, what: str, columns: str = "features") -> np.ndarray:
    """``x`` refused unless 2-D, ``(samples, columns)``, with how to make one: the one check of a table."""
    if x.ndim != 2:
        raise ValueError(f"{what} must be 2-D (samples, {columns}), got shape {x.shape}; reshape it, e.g. .reshape(1, -1) "
                         "for one sample")
    return x


def real_components(dtype: np.dtype) -> np.dtype:
    """The dtype of components given to an inverse, refused unless integers or floats (no bool, complex, date or string)."""
    if dtype.kind not in "iuf":
        raise TypeError(f"components must be real numbers, got dtype {dtype}")
    return dtype


def real_number_advice(kind: str, name: str) -> str:
    """What to give instead of values of numpy dtype ``kind`` that are no real numbers (complex, durations, dates,
    Python objects, text), written for the array called ``name``."""
    return {"c": f"give their real part, {name}.real, or their magnitude, np.abs({name})",
            "m": f"convert them to the numbers meant, e.g. days, {name} / np.timedelta64(1, 'D')",
            "M": f"convert them to the numbers meant, e.g. days since a date, ({name} - t0) / np.timedelta64(1, 'D')",
            "O": f"where they are numbers held as Python objects, {name}.astype('float64')"}.get(
                kind, f"where they are numbers written as text, {name}.astype('float64')")


def exact_in_float64(values: np.ndarray, name: str) -> None:
    """Refuse 64-bit integers that float64, which every map computes in, does not hold exactly: beyond ``2**53``
    (9.0e15) their last digits would be rounded away (a count of 2**60 + 1000 read as 2**60 + 1024), silently."""
    values = np.asarray(values)
    if values.dtype.kind not in "iu" or values.dtype.itemsize < 8 or not values.size:
        return
    top = max(int(values.max()), -int(values.min()))
    if top <= 2**53 or np.array_equal(values.astype(np.float64).astype(values.dtype), values):
        return
    raise ValueError(f"{name} holds integers up to {top} (beyond 2**53, 9.0e15), which float64 cannot hold exactly: their "
                     f"last digits would be rounded away. Subtract a reference first, the same from every table the model maps (e.g. "
                     f"the fitting table's minimum, {name} - X_fit.min(axis=0)), or "
                     f"where the rounding is meant, give floats: {name}.astype('float64')")


def components_or_share(what: str) -> Check:
    """A count of components (:func:`integer`, >= 1) or a share of the variance to keep, a float in (0, 1) (scikit-learn's
    PCA: ``0.95`` keeps the fewest leading components whose variances sum to 95% of the total)."""
    def check(value: Any) -> int | float:
        return float(value) if is_share(value) else _count(value, f"The {what!r} parameter of PPA")

    return check


def kept_components(k: Any, d: int, variance_ratio: np.ndarray) -> int:
    """``k`` components, or for a share of the variance in (0, 1) the fewest leading ones whose ``variance_ratio``
    sum to it: the one reading of ``n_components``."""
    if is_share(k):
        return min(int(np.searchsorted(np.cumsum(variance_ratio), k * (1 - 1e-12))) + 1, d)
    return _count(k, "n_components", d)


def optional(check: Check) -> Check:
    """``check``, with None allowed."""
    return lambda value: None if value is None else check(value)


def count(what: str, low: int, high: int | None = None) -> Check:
    """An :func:`integer` check of a parameter, ``[low, high]``."""
    return lambda value: integer(value, f"The {what!r} parameter of PPA", low, high)


def flag(what: str) -> Check:
    """A bool (``np.bool_`` included) as a ``bool``."""

    def check(value: Any) -> bool:
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError(f"The {what!r} parameter of PPA must be True or False, got {value!r}")
        return bool(value)

    return check


def one_of(what: str, options: tuple[str, ...], callable_ok: bool = False) -> Check:
    """One of the strings ``options`` (an ``np.str_`` too), as a ``str``; with ``callable_ok`` a callable passes as it is."""

    def check(value: Any) -> Any:
        if callable_ok and callable(value):
            return value
        if not isinstance(value, str) or str(value) not in options:
            also = " or a callable" if callable_ok else ""
            raise ValueError(f"The {what!r} parameter of PPA must be one of {options}{also}, got {value!r}")
        return str(value)

    return check


def random_state(value: Any) -> Any:
    """None, an int (``np.int64`` too) or a numpy ``Generator`` / ``RandomState``."""
    if value is None or isinstance(value, (np.random.Generator, np.random.RandomState)):
        return value
    return integer(value, "The 'random_state' parameter of PPA (an int, a numpy Generator or None)", 0, 2**32 - 1)


def rng_of(random_state: Any) -> np.random.Generator:
    """The generator a fit draws from: a given ``Generator`` itself, else one seeded from the int (or from a
    ``RandomState``'s next draw, or fresh entropy for None)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None:  # numpy's global RandomState, as scikit-learn's None means
        return np.random.default_rng(np.random.randint(2**32))
    state = random_state if isinstance(random_state, np.random.RandomState) else np.random.RandomState(random_state)
    return np.random.default_rng(state.randint(2**32))


def square_matrix(what: str) -> Check:
    """A finite square float64 matrix (a copy), or an error naming ``what``."""

    def check(value: Any) -> np.ndarray:
        try:
            matrix = np.array(value, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{what} must be a finite square (d, d) matrix of numbers ({err})") from err
        if matrix.ndim != 2 or matrix.shape[0] != matrix.shape[1] or not np.isfinite(matrix).all():
            raise ValueError(f"{what} must be a finite square (d, d) matrix, got shape {matrix.shape}")
        return matrix

    return check


#: negative weights within this many units in the last place of the largest weight are rounding, taken as 0:
#: ``np.cos(np.deg2rad(lat))`` of float32 latitudes is -4.4e-8 at the poles
ROUNDING_ULPS = 8


def row_weights(weights: Any, n: int, what: str = "weights") -> np.ndarray:
    """``weights`` as float64, refused unless they hold one real, finite, non-negative weight per row, not all 0.

    The one check of weights, wherever they come in (``sample_weight``, a cube's ``weights`` at the sampled
    pixels): numbers only (bool as 0/1; no dates, durations, complex numbers or strings), a masked array's
    masked entries refused, and a negative weight within :data:`ROUNDING_ULPS` units in the last place of the
    largest, ``|w| <= 8 eps max|w|`` (``eps`` of the weights' own float type), taken as the 0 it rounds.
    """
    masked = int(np.ma.count_masked(weights)) if np.ma.isMaskedArray(weights) else 0
    if masked:
        raise ValueError(f"{what} is a masked array with {masked} masked entries: give them a weight, e.g. "
                         f"{what}.filled(0) to leave those rows out")
    try:
        raw = np.asarray(weights.data if np.ma.isMaskedArray(weights) else weights)
    except ValueError as err:  # a ragged list
        raise ValueError(f"{what} must be one number per row, shape ({n},) ({err})") from err
    if raw.dtype.kind == "O":  # numbers held as objects (e.g. a pandas column of object dtype)
        try:
            raw = raw.astype(np.float64)
        except (TypeError, ValueError):
            pass
    if raw.dtype.kind not in "biuf":
        raise TypeError(f"{what} must be real numbers (int, float or bool: one weight per row), got dtype {raw.dtype}"
                        + (" (dates or durations: convert them to the numbers meant, e.g. days)" if raw.dtype.kind in "mM" else ""))
    w = raw.astype(np.float64)
    if w.shape != (n,):
        raise ValueError(f"{what} must hold one weight per row, shape ({n},), got shape {w.shape}")
    finite = np.isfinite(w)
    eps = np.finfo(raw.dtype if raw.dtype.kind == "f" else np.float64).eps
    rounding = ROUNDING_ULPS * eps * float(np.abs(w[finite]).max(initial=0.0))
    w[finite & (w < 0) & (w >= -rounding)] = 0.0
    bad = ~finite | (w < 0)
    if bad.any():
        example = w[bad][0]
        advice = ("give pixels that should not count weight 0 (e.g. weights.fillna(0))" if not np.isfinite(example) else
                  "a weight is a share of the population (e.g. a cell's area), never below 0: check how they were computed "
                  "(the cosine of latitudes in degrees is np.cos(np.deg2rad(lat)))")
        raise ValueError(f"{what} must be finite and non-negative, and {int(bad.sum())} of {n} are not (e.g. {example:.6g}): {advice}")
    if not w.any():
        raise ValueError(f"{what} are zero on every row: there is nothing to weigh (e.g. np.cos(np.deg2rad(cube.lat)))")
    return w


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn`` pointed at the user's line: the first frame outside ppa_xr and the libraries its public
    entry points run inside, however deep the call that warns."""
    frame, level = inspect.currentframe(), 1
    while frame is not None and str(frame.f_globals.get("__name__", "")).split(".")[0] in _INSIDE:
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
