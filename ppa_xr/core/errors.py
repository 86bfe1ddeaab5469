"""PPA against its PCA baseline on any sample: the relative reconstruction-error curve, and whether it transfers.

``100 * e_PPA(k) / e_PCA(k)`` for ``k = 1..d-1`` retained components, with
``e(k)`` the squared error summed over features and averaged over samples
(:func:`ppa_xr.core.kernels.error_curve`); 100 is PCA, below 100 PPA wins.
Errors below ``FLOOR`` times the total energy ``e(0) = mean ||x - mean||^2``
are float64 rounding (e.g. beyond the rank of a table with exactly dependent
columns, where both are about 1e-16) and count as that floor, so such ``k``
read 100 instead of a ratio of rounding noise.

On pixels of another scene PPA can be worse than its PCA (the curves fitted
on one regime need not hold in another). :func:`compare_errors` tells it
from sampling noise: with per-pixel errors ``a_i`` (PPA) and ``b_i`` (PCA) and
``r = mean(a) / mean(b)``, the delta method gives
``se(r) = sd(a_i - r b_i) / (sqrt(n) mean(b))``; PPA is called worse at ``k``
when the lower bound ``r - z se`` exceeds ``1 + ALLOWANCE``, with ``z`` the
one-sided normal quantile at ``LEVEL / m`` over the ``m`` values of ``k``
checked (Bonferroni), so a model that transfers raises :class:`ShiftWarning`
at most ``LEVEL`` of the time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np

from . import blas, checks, kernels
from .linalg import power_of_two, unit_mean
from .params import PPAParams

FLOOR = 1e-12
#: family-wise false-alarm rate of the shift check over the k it checks
LEVEL = 0.05
#: PPA may be this much worse than PCA (a fraction of PCA's error) before it counts as worse: the noise allowance
ALLOWANCE = 0.01
#: rows this many times as far from the model's mean as its fitting sample's spread (RMS) are taken as in other units
UNITS_APART = 30.0
#: rows the maps' units check reads per call (per chunk of a cube), evenly spaced: enough for their median
UNITS_ROWS = 256


class ShiftWarning(UserWarning):
    """PPA reconstructs a cube worse than the PCA of its own fitting sample, or the cube's values lie far beyond that
    sample's spread (other units): the cube differs from that sample."""


@dataclass(frozen=True)
class ErrorComparison:
    """Mean squared errors of PPA and of its baseline at ``k = 1..d-1`` on ``n`` pixels, their ratio
    (``relative``, percent) and its standard error (``se``, percent).

    Parameters
    ----------
    ppa, pca : np.ndarray
        (d-1,) mean squared errors keeping k = 1..d-1 components.
    relative : np.ndarray
        ``100 ppa / pca``.
    se : np.ndarray
        Standard error of ``relative`` (delta method).
    n : int
        Pixels compared.
    spread : float
        The rows' RMS distance from the model's mean over the fitting sample's RMS spread,
        ``sqrt(mean_i ||W (x_i - mean)||^2 / sum_j lambda_j)`` (about 1 on the fitting scene; above ``UNITS_APART``, 30,
        the rows are taken as in other units, with a :class:`~ppa_xr.ShiftWarning`).
    """

    ppa: np.ndarray
    pca: np.ndarray
    relative: np.ndarray
    se: np.ndarray
    n: int
    spread: float = 1.0

    def __repr__(self) -> str:
        worst = int(np.argmax(self.relative))
        return (f"ErrorComparison(n={self.n}, k=1..{len(self.relative)}: 100 x PPA / baseline error, mean {self.relative.mean():.1f}, "
                f"worst {self.relative[worst]:.1f} at k={worst + 1}; arrays .ppa .pca .relative .se)")

    def low(self, k_max: int | None = None) -> np.ndarray:
        """Lower confidence bound of ``relative`` at ``k = 1..k_max``, simultaneous over them at ``ppa_xr.core.errors.LEVEL``."""
        k_max = len(self.relative) if k_max is None else min(k_max, len(self.relative))
        z = NormalDist().inv_cdf(1 - LEVEL / max(k_max, 1))
        return self.relative[:k_max] - z * self.se[:k_max]

    def worse_at(self, k_max: int | None = None) -> np.ndarray:
        """The ``k <= k_max`` (1-based) at which PPA is significantly worse than the baseline, beyond the allowance."""
        return np.flatnonzero(self.low(k_max) > 100 * (1 + ALLOWANCE)) + 1


def floor_of(total: float) -> float:
    """The error below which a mean squared error is float64 rounding: :data:`FLOOR` of the total energy
    ``e(0)``, and above 0, so constant data read 100."""
    return max(FLOOR * total, np.finfo(float).tiny)


def training_ratio(residual_energy: np.ndarray, pca_variance: np.ndarray, total: float) -> np.ndarray:
    """``100 e_PPA(k) / e_PCA(k)`` on the whole fitting sample, ``k = 1..d-1``, from the fit itself (no pass over the data).

    The reconstruction error with ``k`` components is the energy of the
    residual after ``k`` steps, ``e_PPA(k) = tr(S_k)`` (``residual_energy``, d-1
    values), and PCA's the variance beyond its first ``k`` axes,
    ``e_PCA(k) = sum_{j >= k} lambda_j``: the curve :func:`compare_errors` measures
    on the fitting rows, exactly, on every row. Errors below :func:`floor_of`
    ``total`` count as it.
    """
    floor = floor_of(total)
    beyond = np.cumsum(pca_variance[::-1])[::-1][1:]
    return 100 * np.maximum(residual_energy, floor) / np.maximum(beyond, floor)


def compare_errors(params: PPAParams, X: np.ndarray, baseline: PPAParams | None = None,
                   weights: np.ndarray | None = None) -> ErrorComparison:
    """PPA against ``baseline`` (default: its own PCA, :meth:`~ppa_xr.core.PPAParams.pca`) on the rows of ``X``, ``k = 1..d-1``.

    Parameters
    ----------
    params : PPAParams
        The fitted map.
    X : array-like of shape (n, d)
        Samples to compare on (finite rows).
    baseline : PPAParams, optional
        Default: the PCA of the same fitting sample.
    weights : np.ndarray, optional
        (n,) non-negative weights of the rows (e.g. each pixel's area): weighted
        means, and the delta method's standard error with the weights,
        ``se(r)^2 = n/(n-1) sum_i v_i^2 (e_i - e_v)^2 / (sum_i v_i b_i)^2``,
        ``e_i = a_i - r b_i``.

    Returns
    -------
    ErrorComparison
        Both mean error curves, their ratio and its standard error.
    """
    return _compare(params, X, baseline, weights, None)[0]


def compare_errors_and_forward(params: PPAParams, X: np.ndarray, weights: np.ndarray | None = None, kept: int | None = None,
                               columns: np.ndarray | None = None
                               ) -> tuple[ErrorComparison, np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """:func:`compare_errors` against the PCA of the fitting sample, and the forward maps of both (PPA, PCA) on ``X``
    from the same passes (:func:`~ppa_xr.core.kernels.error_curve` ``with_forward``: ``forward`` up to rounding),
    and where ``kept`` is given each row's squared error with that many components kept, of both (the curves' column
    ``kept - 1``: :func:`~ppa_xr.core.kernels.squared_error` up to rounding).

    Parameters
    ----------
    params : PPAParams
        The fitted map; the PCA of its fitting sample is the baseline.
    X : np.ndarray
        (n, d) finite rows, as :func:`compare_errors` takes them.
    weights : np.ndarray, optional
        (n,) row weights, as :func:`compare_errors` weighs them.
    kept : int, optional
        Components kept (1..d) for the rows' squared errors.
    columns : np.ndarray, optional
        ``X`` feature-major, a (d, n) float64 copy, where the caller holds one: the passes' scaled copy of ``X``
        is then made from it (a contiguous product, the same values) instead of by a strided transpose.

    Returns
    -------
    tuple
        The :class:`ErrorComparison`, then PPA's and PCA's outputs on ``X`` (n, d) each, float64, then PPA's and
        PCA's squared errors (n,) with ``kept`` components kept (None without ``kept``).
    """
    comparison, outputs = _compare(params, X, params.pca(), weights, kept or 0, columns)
    return comparison, *outputs


def _compare(params: PPAParams, X: np.ndarray, baseline: PPAParams | None, weights: np.ndarray | None,
             kept: int | None, columns: np.ndarray | None = None) -> tuple[ErrorComparison, tuple]:
    """:func:`compare_errors`, and where ``kept`` is not None the outputs of both maps from the same passes, and
    where it is a number of components (not 0) the rows' squared errors with that many kept (else None);
    ``columns``: ``X`` feature-major (d, n) float64, where known (:func:`compare_errors_and_forward`)."""
    with_forward = kept is not None
    baseline = params.pca() if baseline is None else baseline
    X = np.asarray(X, dtype=np.float64)
    weights = None if weights is None else checks.row_weights(weights, len(X))
    # on data divided by a power of two near its spread (exact): squared errors and their moments stay finite
    # and nonzero for features at 1e150 or 1e-200; the means are scaled back, the ratios do not depend on it
    centred = params.to_fit_space(X)
    # max |v| as max(max v, -min v): the same number, without an (n, d) temporary of |v|
    c = 1 / float(power_of_two(np.maximum(centred.max(initial=0.0), -centred.min(initial=0.0))))
    if columns is not None and with_forward:  # the same products, from contiguous rows: (n, d) feature-major
        X = np.multiply(columns, c).T
    else:  # feature-major: the outputs come out so, each row written whole
        X = np.multiply(X, c, order="F" if with_forward else "K")
    centred *= c  # = scaled(c).to_fit_space(X * c): W stays, the mean scales (exact, a power of two)
    energy = float(np.mean(np.einsum("ij,ij->i", centred, centred)))
    floor, apart = floor_of(energy), _spread(params, energy / c / c)
    del centred  # its pages serve the curves' outputs
    outputs: tuple[np.ndarray | None, ...] = ()
    if with_forward:  # the report's pass: the two maps' curves side by side where two cores are free (blas.pair_threads),
        # each the same pass as alone (the kernels release the GIL); on a busy machine one after the other
        (a, r_a), (b, r_b) = blas.both(lambda: kernels.error_curve(X, params.scaled(c), with_forward=True),
                                       lambda: kernels.error_curve(X, baseline.scaled(c), with_forward=True), blas.pair_threads())
        outputs = (np.divide(r_a, c, out=r_a), np.divide(r_b, c, out=r_b))  # exact: c is a power of two (in place: no new pages)
        outputs += tuple(e[:, kept - 1] / c / c if kept else None for e in (a, b))
    else:
        a, b = (kernels.error_curve(X, method.scaled(c)) for method in (params, baseline))
    a, b = a[:, :-1], b[:, :-1]
    if weights is not None:
        return _weighted(a, b, weights, floor, c, apart), outputs
    n = len(X)
    mean_a, mean_b = a.mean(axis=0), b.mean(axis=0)
    ours, theirs = np.maximum(mean_a, floor), np.maximum(mean_b, floor)
    ratio = ours / theirs
    means = (mean_a / c / c, mean_b / c / c)  # in the data's own units again
    if n < 2:
        return ErrorComparison(*means, 100 * ratio, np.full_like(ratio, np.inf), n, apart), outputs
    # var(a - r b) from column moments, one pass each instead of an (n, d) temporary per term
    moment = lambda u, v: np.einsum("ij,ij->j", u, v) / n  # noqa: E731
    spread = moment(a, a) - 2 * ratio * moment(a, b) + ratio**2 * moment(b, b) - (mean_a - ratio * mean_b) ** 2
    se = np.sqrt(np.maximum(spread, 0) * n / (n - 1)) / (np.sqrt(n) * theirs)
    return ErrorComparison(*means, 100 * ratio, 100 * se, n, apart), outputs


def _spread(params: PPAParams, energy: float) -> float:
    """:attr:`ErrorComparison.spread` of rows of mean energy ``energy`` about the model's mean (in its fit space), with a
    :class:`ShiftWarning` where it exceeds :data:`UNITS_APART`: the stored numbers of a packed file (reflectance x 10,000)
    on a model of its values, or kilometres on a model of metres, compared as if in the model's units."""
    spread = float(np.sqrt(energy / _fitted_energy(params)))
    if spread > UNITS_APART:
        checks.warn_user(_units_message(f"{spread:.3g} times"), ShiftWarning)
    return spread


def _fitted_energy(params: PPAParams) -> float:
    """``sum_j lambda_j``: the fitting sample's mean squared distance from the model's mean, in its fit space."""
    return max(float(np.sum(params.pca_variance)), np.finfo(float).tiny)


def _units_message(apart: str, what: str = "values") -> str:
    """The :class:`ShiftWarning` text of values (or components) ``apart`` times as far as the fitting sample's spread."""
    advice = ("are they in other units or another scale than the values it was fitted on? A file's stored numbers beside "
              "its unpacked values (reflectance x 10,000) read alike where both are opened the same way (mask_and_scale=True, "
              "or the scale_factor and add_offset attributes left on), or unpack them: cube * scale_factor + add_offset"
              ) if what == "values" else (
              "are they the components this model's transform gave, as it gave them? Undo any scaling they were stored with "
              "(scores / 1000 for components written as integers x 1,000; scores * scale_factor + add_offset for packed ones)")
    return f"these {what} lie {apart} as far from the model's mean as its fitting sample's spread (RMS): {advice}"


def warn_other_units(params: PPAParams, x: np.ndarray) -> None:
    """:class:`ShiftWarning` where the median of up to :data:`UNITS_ROWS` evenly spaced points of ``x`` (``...`` x d)
    lies more than :data:`UNITS_APART` times the fitting sample's spread from the model's mean,
    ``median_i ||W (x_i - mean)|| / sqrt(sum_j lambda_j) > 30``: the check of units that the maps (``transform``,
    ``fill``, ``reconstruct``, their errors; on a cube, each chunk) run before mapping, where :func:`compare_errors`
    runs it on its sample. A point's missing values count as the mean, points without any are left out; the median
    leaves a few far pixels (a fire, a cloud) to the maps. The message names the bound, not the chunk's distance, so
    that a cube's chunks repeat one warning (shown once)."""
    rows = params.inputs(_spaced_rows(x))
    finite = np.isfinite(rows)
    seen = (finite if params.used is None else finite[:, params.used]).any(axis=1)
    z = params.to_fit_space(np.where(finite, rows, params.mean)[seen])
    _warn_if_far(np.einsum("ij,ij->i", z, z) / _fitted_energy(params), "values")


def warn_other_component_units(params: PPAParams, r: np.ndarray, whiten: bool = False) -> None:
    """:func:`warn_other_units` of components ``r`` (``...`` x k) on their way back (``inverse_transform``): the median of
    ``sum_j r_j^2 / sum_j lambda_j`` over ``j < k`` (``r_j sqrt(lambda_j)`` where whitened), against the fitting
    sample's, about 1: components written scaled (x 1,000 into integers) and read back as they were stored."""
    rows = _spaced_rows(r)
    k = rows.shape[1]
    variance = np.maximum(params.explained_variance[:k], np.finfo(np.float64).tiny)
    rows = rows * np.sqrt(variance) if whiten else rows
    finite = np.isfinite(rows)
    seen = finite.any(axis=1)
    rows = np.where(finite, rows, 0.0)[seen]
    _warn_if_far(np.einsum("ij,ij->i", rows, rows) / float(np.sum(variance)), "components")


def _spaced_rows(x: np.ndarray) -> np.ndarray:
    """Up to :data:`UNITS_ROWS` evenly spaced points of ``x`` (``...`` x d) as float64 rows: only these gathered, never
    the whole chunk."""
    x = np.asarray(x).reshape(-1, np.shape(x)[-1]) if np.ndim(x) < 2 else np.asarray(x)  # one point: one row
    shape = x.shape[:-1]
    n = int(np.prod(shape))
    m = min(n, UNITS_ROWS)
    return x[np.unravel_index(np.arange(m, dtype=np.intp) * n // max(m, 1), shape)].astype(np.float64)


def _warn_if_far(energy: np.ndarray, what: str) -> None:
    """The :class:`ShiftWarning` of :func:`warn_other_units` where the median of ``energy`` (squared distances over the
    fitting sample's mean one) exceeds ``UNITS_APART ** 2``."""
    if 2 * np.count_nonzero(energy > UNITS_APART**2) > len(energy) > 0:  # the median beyond, without sorting
        checks.warn_user(_units_message(f"more than {UNITS_APART:.0f} times", what), ShiftWarning)


def checked_map(kernel: Callable[..., np.ndarray], x: np.ndarray, *, params: PPAParams, **kwargs: Any) -> np.ndarray:
    """``kernel(x, params, **kwargs)`` after :func:`warn_other_units`: a map of a cube's chunks with its units checked."""
    warn_other_units(params, x)
    return kernel(x, params=params, **kwargs)


def checked_inverse(r: np.ndarray, *, params: PPAParams, whiten: bool = False, **kwargs: Any) -> np.ndarray:
    """:func:`~ppa_xr.core.kernels.inverse` after :func:`warn_other_component_units`: a cube's components, chunk by chunk."""
    warn_other_component_units(params, r, whiten)
    return kernels.inverse(r, params, whiten=whiten, **kwargs)


def _weighted(a: np.ndarray, b: np.ndarray, weights: np.ndarray, floor: float, c: float, spread: float) -> ErrorComparison:
    """:func:`compare_errors` of per-row errors ``a`` (PPA) and ``b`` (baseline), ``(n, k)`` at scale ``c``, weighted."""
    n = len(a)
    v = unit_mean(weights)
    mean_a, mean_b = (v @ a) / n, (v @ b) / n
    ratio = np.maximum(mean_a, floor) / np.maximum(mean_b, floor)
    means = (mean_a / c / c, mean_b / c / c)
    if n < 2:
        return ErrorComparison(*means, 100 * ratio, np.full_like(ratio, np.inf), n, spread)
    residual = a - ratio * b
    residual -= (v @ residual) / n
    se = np.sqrt(n / (n - 1) * ((v**2) @ residual**2)) / (n * np.maximum(mean_b, floor))
    return ErrorComparison(*means, 100 * ratio, 100 * se, n, spread)


def shift_message(comparison: ErrorComparison, k_max: int, where: str) -> str | None:
    """The one-line :class:`ShiftWarning` text when PPA is worse at some ``k <= k_max`` (None when it is not)."""
    worse = comparison.worse_at(k_max)
    if not len(worse):
        return None
    ks = ", ".join(map(str, worse[:6])) + (", ..." if len(worse) > 6 else "")
    return (
        f"PPA reconstructs this cube worse than its own PCA at k = {ks} (up to {comparison.relative[worse - 1].max():.0f}% of "
        f"PCA's error, {where}): the cube differs from the fitting sample. Refit on it, or pool it with the fitting scenes "
        f"(ppa_xr.fit_pooled), or use the model's PCA (model.pca_); cube.ppa.evaluate(model) shows both error curves"
    )
