"""The information report of a cube: PPA against its own PCA, totals, per component and per pixel (lazy maps)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..core import blas, errors, kernels
from ..core.checks import check_components, table, warn_user
from ..core.entropy import (DEGENERATE, LN2, MapDensities, PointwiseReduction, check_estimator, column_sorts, degenerate, dequantized, discrete_columns,
                             marginal_density, reduction)
from ..core.linalg import unit_mean
from ..core.params import PPAParams
from ..core.spec import RANDOM_STATE
from . import sampling
from .inputs import model_features
from .maps import map_kernel, provenance

if TYPE_CHECKING:
    from ..model import PPA


def _pixel_block(x: np.ndarray, ppa: PointwiseReduction, pca: PointwiseReduction, k: int, threads: int | None,
                 densities: MapDensities, reduced: PPAParams | None = None, known: SampleMaps | None = None,
                 chunk: tuple[int, ...] = ()) -> np.ndarray:
    """The four per-pixel maps of a report over a chunk: (..., 4).

    Each map's outputs and squared error ``||r[k:]||^2`` after its first
    ``k`` steps come from one compiled pass (:func:`kernels.forward_error`);
    the densities are looked up on uniform grids, the inputs' once for both
    (:class:`~ppa_xr.core.entropy.MapDensities`). The chunk goes through all
    of it in blocks of :data:`~ppa_xr.core.kernels.BLOCK` pixels held
    feature-major, each block's inputs, outputs and densities staying in cache
    from one stage to the next (pixels are independent: the same numbers
    whatever the chunks). For a ``reduced`` model the measures are those of
    its span coordinates (:meth:`~ppa_xr.core.PPAParams.in_span`): each block
    is taken there first, and its part outside the span
    (:meth:`~ppa_xr.core.PPAParams.outside_error`) adds to both errors.
    The pixels of the report's own sample in this ``chunk`` (``known``) have their maps already, from the
    statistics' passes over the sample (:class:`SampleMaps`): they are copied, and only the others computed.
    """
    d = x.shape[-1]
    flat = kernels.pixel_rows(x)  # (n, d): a view, or a copy in the chunk's own layout (bands' runs, for a band-first chunk)
    dtype = kernels.computed_dtype(x.dtype)
    out = np.empty((4, len(flat)), dtype)  # map-major: each map's plane is contiguous where it is written out
    positions, values = (None, None) if known is None else known.at(chunk)
    rows, computed = flat, out
    if positions is not None:  # the other pixels, one copy (n - m, d), their maps computed into (4, n - m)
        others = np.ones(len(flat), bool)
        others[positions] = False
        rows = flat.T[:, others].T if kernels.band_first(flat) else flat[others]  # gathered in the layout they have
        computed = np.empty((4, len(rows)), dtype)

    def span(lo: int, hi: int) -> None:
        for start in range(lo, hi, kernels.BLOCK):
            stop = min(start + kernels.BLOCK, hi)
            block, outside = _inputs(rows[start:stop], reduced, dtype)
            r_ppa, computed[2, start:stop] = kernels.forward_error(block, ppa.params, k)
            r_pca, computed[3, start:stop] = kernels.forward_error(block, pca.params, k)
            computed[0, start:stop], computed[1, start:stop] = densities.gains(block, r_ppa, r_pca)
            if outside is not None:
                computed[2:, start:stop] += outside

    kernels.run_spans(len(rows), span, threads)
    if positions is not None:
        out[:, others] = computed
        out[:, positions] = values
    return np.moveaxis(out.reshape((4,) + x.shape[:-1]), 0, -1)


@dataclass(frozen=True)
class SampleMaps:
    """The four maps at the pixels of a report's own sample, by chunk, from the passes its statistics made over
    them (:func:`_sample_maps`), so that the maps' pass computes only the other pixels.

    At those pixels the outputs are the error curves' (:func:`~ppa_xr.core.errors.compare_errors_and_forward`:
    float64, on the sample divided by a power of two, the biases subtracted step by step) where the maps' pass
    would compute them in the cube's float type with the biases at once: the same values up to that rounding.
    Which pixels they are does not depend on the chunks (the sample does not), so the maps stay the same bit
    for bit under any chunking and scheduler.

    Parameters
    ----------
    by_chunk : dict
        The place of a chunk along the pixel dimensions -> the sample's flat positions in the chunk (m,) and
        their maps (4, m) in the maps' float type.
    token : str
        Names them in a dask graph (drawn once).
    """

    by_chunk: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]]
    token: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False, repr=False)

    def __dask_tokenize__(self) -> str:
        return self.token

    def at(self, chunk: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | tuple[None, None]:
        """The sample's positions in ``chunk`` and their maps, (None, None) where it has none."""
        return self.by_chunk.get(chunk, (None, None))

    @classmethod
    def of(cls, da: xr.DataArray, dim: Hashable, index: np.ndarray, values: np.ndarray) -> SampleMaps:
        """From the sample's flat pixel ``index`` (over the pixel dimensions of ``da``, C order) and its maps (4, n)."""
        pixel_dims = [d for d in da.dims if d != dim]
        position = np.unravel_index(index, [da.sizes[d] for d in pixel_dims])
        chunks = [da.chunks[da.get_axis_num(d)] if da.chunks is not None else (da.sizes[d],) for d in pixel_dims]
        places, local, sizes = [], [], []
        for p, lengths in zip(position, chunks):
            starts = np.cumsum((0,) + tuple(lengths))
            place = np.searchsorted(starts, p, side="right") - 1
            places.append(place)
            local.append(p - starts[place])
            sizes.append(np.asarray(lengths)[place])
        key = np.ravel_multi_index(places, [len(c) for c in chunks]) if pixel_dims else np.zeros(len(index), np.int64)
        flat = _flat_positions(local, sizes)
        order = np.argsort(key, kind="stable")
        bounds = np.flatnonzero(np.diff(key[order])) + 1
        by_chunk = {}
        for group in np.split(order, bounds) if len(order) else []:
            by_chunk[tuple(int(p[group[0]]) for p in places)] = (flat[group], np.ascontiguousarray(values[:, group]))
        return cls(by_chunk)


def _flat_positions(local: list[np.ndarray], sizes: list[np.ndarray]) -> np.ndarray:
    """C-order flat positions of pixels at ``local`` coordinates in chunks of per-pixel ``sizes`` (each pixel its own chunk's shape)."""
    flat = np.zeros(len(local[0]) if local else 0, np.int64)
    for coordinate, size in zip(local, sizes):
        flat = flat * size + coordinate
    return flat


def _sample_maps(outputs: tuple, densities: MapDensities, dtype: np.dtype, mapper: Callable = map) -> np.ndarray:
    """The four maps (4, n) of the report's sample from its statistics' ``outputs`` (the sample feature-major (d, n),
    PPA's and PCA's outputs (n, d) and squared errors (n,)), in the maps' float type ``dtype``; ``mapper`` runs the
    three sets of look-ups (:meth:`~ppa_xr.core.entropy.MapDensities.gains`)."""
    columns, r_ppa, r_pca, error_ppa, error_pca = outputs
    gain_ppa, gain_pca = densities.gains(columns, r_ppa.T, r_pca.T, mapper)
    return np.stack([gain_ppa, gain_pca, error_ppa, error_pca]).astype(dtype)


def _inputs(x: np.ndarray, reduced: PPAParams | None, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray | None]:
    """The pixels ``x`` (n, d) as the report's measures read them, one feature-major copy (d, n) in ``dtype``
    (:func:`kernels.feature_major`): as they are, or a ``reduced`` model's span coordinates ``z = W (x - mean)``
    (r, n) with each pixel's squared error outside the span (None where the span holds every input)."""
    if reduced is None:
        return kernels.feature_major(x, dtype), None
    outside = reduced.outside_error(x)
    return kernels.feature_major(reduced.to_fit_space(x), dtype), None if outside is None else outside.astype(dtype)


def _statistics(params: PPAParams, sample: np.ndarray, estimator: str, random_state: int | None,
                weights: np.ndarray | None = None, for_maps: int | None = None) -> tuple:
    """What the report measures on its sample: the shift check's error curves, which inputs are quantized, the input
    densities, and per method (PPA, its PCA) the output densities and the curves; ``weights`` (n,) weigh the
    pixels in all of them (whether an input is quantized is a property of its values, not weighed). Last, where
    ``for_maps`` (the components the maps keep) is given, the model is not reduced and no input is quantized: what
    the maps need of the sample from the same passes, the sample feature-major (d, n) (the copy its column sorts
    are made from), PPA's and PCA's outputs (n, d) and squared errors with ``for_maps`` components (n,) (else None),
    from which :func:`_sample_maps` makes the sample's maps.

    The inputs are the features, or a reduced model's span coordinates ``z = W (x - mean)``
    (:meth:`~ppa_xr.core.PPAParams.in_span`, where its map is square); the errors are those of the
    features either way (a point's part outside the span counts in every one, the last too).
    The independent parts run side by side on two threads where two cores are
    free (:func:`~ppa_xr.core.blas.pair_threads`; numpy's sorts and the
    kernels release the GIL), one after the other on a busy machine, the same
    numbers either way: the error curves, the densities of each method's
    outputs, and here the input densities. One sort of each column
    serves the quantization test and the input densities. Without quantized
    inputs the outputs come from the error curves' own passes over the sample
    (:func:`~ppa_xr.core.errors.compare_errors_and_forward`): one pass per method.
    """
    square = params.in_span()
    methods = {"ppa": square, "pca": square.pca()}  # the PCA of the model's own fitting sample
    weights = None if weights is None else unit_mean(weights)  # the one scaling of weights: sums stay in range at 1e306
    coordinates = params.to_fit_space(sample) if params.reduced else sample

    def outputs(method: PPAParams, smooth: np.ndarray, R: np.ndarray | None = None, keep: bool = False) -> tuple:
        R = kernels.forward(smooth, method) if R is None else R  # the map itself: whitening is not part of it
        if weights is None:
            variance = R.var(axis=0)
            # R is this pass's own: its columns are sorted where they lie (rows complete: the order of the rows is
            # then not needed, and no column is dropped), unless the maps keep it (then a sorted copy)
            S = column_sorts(R, overwrite=not keep) if estimator == "spacing" and np.isfinite(R).all() else None
            return marginal_density(R if S is None else S, estimator, S), variance
        deviations = R - np.average(R, axis=0, weights=weights)
        return marginal_density(R, estimator, weights=weights), np.average(deviations * deviations, axis=0, weights=weights)

    sample_outputs = None
    keep = for_maps is not None and not params.reduced
    # where the maps reuse the sample, one feature-major copy serves its look-ups and (copied row by row) its sorts
    columns = kernels.feature_major(coordinates, np.dtype(np.float64)) if keep else None
    with blas.side_by_side(blas.pair_threads()) as pool:
        S = column_sorts(coordinates if columns is None else columns.T)
        discrete = discrete_columns(coordinates, S)
        if discrete.any():  # densities of quantized inputs: of the dequantized values, sorted again
            pending = pool.submit(errors.compare_errors, params, sample, None, weights)
            smooth = dequantized(coordinates, random_state, discrete, S)
            S = S.copy(order="K")
            S[:, discrete] = column_sorts(smooth[:, discrete])
            done = {name: pool.submit(outputs, method, smooth) for name, method in methods.items()}
            comparison = pending.result()
        else:  # the error curves' passes give the outputs too: one pass per method over the sample
            smooth = coordinates
            comparison, *shared = errors.compare_errors_and_forward(params, sample, weights, for_maps if keep else None, columns)
            done = {name: pool.submit(outputs, method, coordinates, R, keep) for (name, method), R in zip(methods.items(), shared)}
            sample_outputs = (columns, *shared) if keep else None
        inputs = marginal_density(smooth, estimator, S, weights)
        outside = params.outside_error(sample)  # what k = r (every component) leaves of a reduced model's inputs
        kept = 0.0 if outside is None else float(np.average(outside, weights=weights))
        measures, curves = {}, {}
        for name, method in methods.items():
            density, variance = done[name].result()
            measures[name] = PointwiseReduction(method, inputs, density)
            mse = np.append(getattr(comparison, name), kept)  # k = d keeps everything (of the span)
            curves[name] = {"entropy": density.entropy(), "variance": variance, "mse": mse}
    return comparison, discrete, inputs, measures, curves, sample_outputs


_ESTIMATOR_NAMES = {
    "spacing": "m-spacing on equal-mass bins of about sqrt(n) spacings, digamma bias correction",
    "histogram": "equal-width histogram, ceil(sqrt(n)) bins, Miller-Madow",
}


def information_report(
    obj: xr.DataArray | xr.Dataset | np.ndarray,
    model: PPA,
    n_components: int | None = None,
    dim: Hashable | None = None,
    n_samples: int | None = None,
    random_state: int | None = RANDOM_STATE,
    estimator: str = "spacing",
    held_out: bool = True,
    weights: xr.DataArray | None = None,
) -> xr.Dataset:
    """PPA vs PCA: redundancy reduction and reconstruction error, totals, per component and per pixel.

    The PCA baseline is the model's own (:attr:`~ppa_xr.PPA.pca_`, fitted on the same
    sample as the PPA model). A random sample of valid pixels (one pass over
    the cube, made now) gives the marginal densities and the per-component
    statistics; the per-pixel maps stay lazy and are computed in one pass
    over the cube when the report is computed.

    ``held_out=True`` (default) draws that sample from pixels outside the
    model's fitting sample (which a model fitted with ``cube.ppa.fit``
    records), so the figures are not biased by the fit (:func:`~ppa_xr.information.multi_information_reduction`). A
    model fitted on a plain array, or another cube than its own, has no
    recorded pixels there: the given pixels are taken as held out. A 2-D
    numpy table (samples x features) is treated as a cube of ``pixel`` x
    ``band``: pass rows the model was not fitted on. ``held_out=False``
    estimates on the model's own fitting sample (the in-sample figure).
    ``report.attrs["estimated_on"]`` says which. When fewer than
    ``ppa_xr.information.MIN_HELD_OUT`` valid pixels lie outside the fitting sample (a small
    scene fitted on all its pixels), the report is estimated on the fitting
    sample and warns with the size of that bias.

    Quantized bands (integer digital numbers; ``ppa_xr.information.discrete_columns``) are
    dequantized for the densities (``ppa_xr.information.dequantized``, seeded by
    ``random_state``), so every figure is that of the dequantized density
    (:func:`~ppa_xr.information.marginal_entropy`); ``report.attrs["dequantized"]`` flags them (1 per band).

    A model fitted in the span of its samples (S-mode: maps as samples, grid
    cells as features; or feature weights) maps ``d`` features to ``r``
    components, so the multi-information of its ``d`` inputs is not what it
    changes. Its report measures the ``r`` span coordinates
    ``z = V^T S (x - mean)`` instead (:meth:`~ppa_xr.core.PPAParams.in_span`),
    where the map is square and keeps volume. In S-mode they are the fitting
    sample's EOF scores: its own PCA removes no redundancy from them, so PPA's
    figure is what the curves remove beyond the EOFs. With more samples than
    features ``V = I``: ``z`` are the weighted features themselves.
    ``entropy_input`` runs over ``span`` (1..r), ``report.attrs["inputs"]``
    says which inputs were measured, and the errors are those of the
    features (each sample's part outside the span counts in every one). In
    S-mode a "pixel" is a sample (a time step): the maps run over the sample
    dimensions, and two held-out samples suffice (as for ``evaluate``).

    Parameters
    ----------
    obj : xr.DataArray, xr.Dataset or np.ndarray
        The cube (or a samples x features table).
    model : PPA
        A fitted model; its own PCA (``model.pca_``) is the baseline.
    n_components : int, optional
        Components kept for the error maps (default: the model's ``n_components_`` where it was fitted with
        ``n_components``, else ``ppa_xr.information.REPORT_COMPONENTS`` = 3; at most ``d - 1``, ``r - 1`` reduced).
    dim : hashable, optional
        The feature dimension, when not the fitted one.
    n_samples : int, optional
        Pixels for the densities and curves (default ``ppa_xr.information.REPORT_SAMPLES``).
    random_state : int, Generator or None
        Seeds the sample and the dequantization; default 0, as every ``random_state`` here (None: fresh randomness).
    estimator : {"spacing", "histogram"}
        The marginal entropy estimator.
    held_out : bool
        Estimate on pixels outside the fitting sample (default) or on it.
    weights : xr.DataArray, optional
        Weights over the pixel dimensions (e.g. ``np.cos(np.deg2rad(cube.lat))``, area on a lat-lon grid):
        the densities, entropies, curves and the shift check are those of the weighted pixels, as
        ``cube.ppa.fit(weights=...)`` and ``evaluate(weights=...)`` weigh them; the per-pixel maps are
        each pixel's own. ``report.attrs["weighted"]`` says whether they were given. Weights over the
        features are the model's own (given to the fit), not given here.

    Returns
    -------
    xr.Dataset
        Totals, per-component curves (computed) and four per-pixel maps (lazy);
        ``summary_table`` and ``plot_report`` present it.

    Examples
    --------
    >>> report = cube.ppa.information_report(model, n_components=3).compute()  # doctest: +SKIP
    >>> print(ppa_xr.information.summary_table(report))  # doctest: +SKIP
    """
    if isinstance(obj, np.ndarray):
        obj = xr.DataArray(table(obj, "a numpy table"), dims=("pixel", dim or "band"))
    da, dim = model_features(obj, model, dim)
    check_estimator(estimator)  # before the sampling pass
    params = model.params_
    width = params.n_features  # the inputs the entropies are measured on: the features, or a reduced model's r span coordinates
    k = min(_kept_by(model), width - 1) if n_components is None else check_components(n_components, width)
    sample, index, on = _report_sample(da, dim, model, n_samples, random_state, held_out)
    row_weights = None if weights is None else sampling.weights_at(da, dim, weights, index)
    comparison, discrete, inputs, measures, curves, outputs = _statistics(params, sample, estimator, random_state, row_weights, _reused(da, width, k))
    if on.startswith("held out") and (message := errors.shift_message(comparison, k, f"{comparison.n} held-out pixels")):
        warn_user(message, errors.ShiftWarning)
    rounding = _rank_warning(curves["pca"]["variance"], params)
    with blas.side_by_side(blas.pair_threads()) as pool:  # the grids, then the sample's look-ups (each the same work as alone)
        densities = MapDensities.of(measures["ppa"], measures["pca"], discrete, pool.map)
        known = None if outputs is None else SampleMaps.of(da, dim, index, _sample_maps(outputs, densities, kernels.computed_dtype(da.dtype), pool.map))
    maps = map_kernel(_pixel_block, da, dim, "map", 4, "information maps", located=True, ppa=measures["ppa"], pca=measures["pca"], k=k,
                      densities=densities, reduced=params if params.reduced else None, known=known)
    variables: dict[str, xr.DataArray] = {}  # in order: added to the Dataset in one merge, not one each
    for i, (stem, method) in enumerate((("mi_reduction", "ppa"), ("mi_reduction", "pca"), ("error", "ppa"), ("error", "pca"))):
        _add(variables, stem, method, maps.isel(map=i, drop=True), model.whitened_units_, k=k)
    entropy_input = inputs.entropy()
    for method, values in curves.items():
        for stem, curve in values.items():
            _add(variables, stem, method, xr.DataArray(curve, dims="component"), model.whitened_units_)
        total = reduction(entropy_input, values["entropy"], measures[method].params.log2_det_jacobian())
        _add(variables, "total_mi_reduction", method, xr.DataArray(total))
        _add(variables, "mi_reduction_per_dim", method, xr.DataArray(total / width))
    variables["entropy_input"], inputs_coordinate = _entropy_input(entropy_input, params, da, dim)
    if hasattr(model, "snr_"):  # noise-adjusted: components come ordered by signal-to-noise ratio
        variables["snr_ppa"] = xr.DataArray(model.snr_, dims="component", attrs={"long_name": "signal-to-noise ratio of each component (fitting sample)"})
    report = xr.Dataset(coords={"component": np.arange(1, width + 1)})
    report.update(variables)
    report[inputs_coordinate.dims[0]] = inputs_coordinate
    report.attrs.update(n_components=k, sample_size=len(sample), entropy_estimator=_ESTIMATOR_NAMES[estimator], estimated_on=on,
                        weighted=int(weights is not None), rank=width - rounding, inputs=_inputs_described(params),
                        dequantized=discrete.astype(np.int8), **provenance(model, "information report", k))
    return report


#: the dimension of a reduced model's report inputs, its span coordinates
SPAN = "span"


def _rank_warning(variance: np.ndarray, params: PPAParams) -> int:
    """How many of the report's PCA components (their ``variance`` on its sample) hold only rounding, with a warning
    that says what that does to the totals where any do (:func:`~ppa_xr.core.entropy.degenerate`)."""
    width = params.n_features
    if rounding := degenerate(variance):
        what = "span coordinates" if params.reduced else "features"
        warn_user(f"the report's sample has rank {width - rounding} of {width} {what}: its last {rounding} PCA components hold only rounding "
                  f"(variance below {DEGENERATE:.0e} of the total), so its multi-information is infinite and the totals are set by that "
                  f"rounding (see entropy_pca of those components). Remove the linear dependence first (e.g. features that sum to a "
                  f"constant, or anomalies from a climatology of the same months), or report on {width - rounding} {what}", UserWarning)
    return rounding


def _entropy_input(entropy: np.ndarray, params: PPAParams, da: xr.DataArray, dim: Hashable) -> tuple[xr.DataArray, xr.DataArray]:
    """The inputs' marginal entropies and the coordinate they run along: the features (``dim``), or a reduced
    model's span coordinates (``span``, 1..r)."""
    if params.reduced:
        name = "span coordinate z = V^T S (x - mean)" + (", the fitting sample's EOF scores" if params.s_mode else "")
        along = xr.DataArray(np.arange(1, params.n_features + 1), dims=SPAN, attrs={"long_name": name})
    else:
        name = "input feature"
        along = da[dim] if dim in da.coords else xr.DataArray(np.arange(params.n_features), dims=(dim,))
    return xr.DataArray(entropy, dims=along.dims, attrs={"long_name": f"marginal entropy of each {name} (sample)", "units": "bit"}), along


def _inputs_described(params: PPAParams) -> str:
    """What the report's multi-information is of: the features, or a reduced model's span coordinates."""
    if not params.reduced:
        return f"the {params.n_inputs} features"
    root = params.feature_root[params.feature_root > 0]
    left_out = params.n_inputs - root.size
    features = f"{root.size} features" + (f" ({left_out} left out)" if left_out else "") + (", scaled by S" if (root != 1).any() else "")
    what = f"the EOF scores of its {features}" if params.s_mode else f"its {features}, centred"
    return (f"the {params.n_features} coordinates of the fitting sample's span, z = V^T S (x - mean): {what}, "
            "where the map is square and keeps volume; the part of a sample outside the span counts in the errors only")


_DESCRIPTIONS = {  # variable stem -> (long name, units)
    "mi_reduction": ("pointwise multi-information reduction Delta_i", "bit"),
    "error": ("squared reconstruction error summed over bands, {k} components kept", "squared input units"),
    "entropy": ("marginal entropy of each component (sample)", "bit"),
    "variance": ("variance of each component (sample)", "squared input units"),
    "mse": ("reconstruction error per pixel (squared error summed over bands, mean over the sample) keeping components 1..k", "squared input units"),
    "total_mi_reduction": ("multi-information reduction (sample)", "bit"),
    "mi_reduction_per_dim": ("multi-information reduction per dimension (sample)", "bit"),
}


def _reused(da: xr.DataArray, width: int, k: int) -> int | None:
    """``k`` where the maps reuse the outputs of the report's sample at its pixels (:class:`SampleMaps`: float64 maps
    of at least :data:`REUSE_FEATURES` inputs, where it pays), else None."""
    return k if kernels.computed_dtype(da.dtype) == np.float64 and width >= REUSE_FEATURES else None


#: features from which a float64 cube's maps reuse the outputs of the report's sample at its pixels (:class:`SampleMaps`):
#: a forward pass per pixel costs about ``d^2``, the copies that reuse takes about ``d``; measured (process CPU time of
#: the computed report), 8-12% less at 64 and 198 float64 features, 2-6% more at 36; float32 maps, whose passes cost
#: half, none at 64 and 198
REUSE_FEATURES = 64
#: pixels a report samples when ``n_samples`` is not given
REPORT_SAMPLES = 100_000


#: components its error maps keep when ``n_components`` is not given (at most ``d - 1``: ``d`` reconstructs exactly)
REPORT_COMPONENTS = 3


def _kept_by(model: PPA) -> int:
    """The components the error maps keep by default: those the model keeps (``n_components_``) where it was fitted with
    ``n_components``, as ``transform`` keeps them, else :data:`REPORT_COMPONENTS`."""
    return int(model.n_components_) if model.get_params()["n_components"] is not None else REPORT_COMPONENTS


def _report_sample(da: xr.DataArray, dim: Hashable, model: PPA, n_samples: int | None, random_state: int | None,
                   held_out: bool) -> tuple[np.ndarray, np.ndarray, str]:
    """The report's pixels (float64), their flat indices, and what they are: held out where enough are
    (:func:`~ppa_xr.cube.sampling.shortfall`), else the fitting sample, with a warning that states the bias."""
    record = sampling.Fitted.of(da, dim, model)
    fitted = record.shares
    if held_out:
        drawn = record.held_out(da, dim, n_samples, random_state, default=REPORT_SAMPLES)
        if message := record.without_complete_pixels(da, dim, drawn, random_state):
            raise ValueError(message)
        message = sampling.shortfall(drawn, None, model.params_.s_mode)
        if message is None:
            what = "samples (maps)" if model.params_.s_mode else "pixels"
            on = f"held out: {what} outside the model's fitting sample" if fitted else f"held out: the given {what} (no fitting sample of this cube recorded)"
            return drawn.values.astype(np.float64, copy=False), drawn.index, on
        if not fitted:
            raise ValueError(message)
        d, n = model.params_.n_features, sum(share.size for share in fitted)  # d: the inputs measured (span coordinates, reduced)
        warn_user(f"{message}. The report uses the fitting sample instead, whose redundancy reduction is biased up by about "
                      f"d (d - 1) / (4 n ln 2) = {d * (d - 1) / (4 * n * LN2):.2g} bits", UserWarning)
    elif not any(share.size for share in fitted):
        raise ValueError("held_out=False needs the model's fitting sample: fit it with cube.ppa.fit on this cube (or pass the fitting rows as a table with held_out=True)")
    shares = [sampling.sample_features(da, dim, share.size, None, seed=share.seed) for share in fitted if share.size]
    values, index = np.concatenate([s.values for s in shares]), np.concatenate([s.index for s in shares])
    return values.astype(np.float64), index, "in sample: the model's own fitting sample (biased up, see ppa_xr.information)"


def _add(variables: dict[str, xr.DataArray], stem: str, method: str, values: xr.DataArray, whitened: str | None = None, **fmt: Any) -> None:
    """``variables[stem_method] = values`` with its long name and units (``whitened``: the whitened units
    a standardizing or noise-whitening model measures errors in, :attr:`PPA.whitened_units_`)."""
    long_name, units = _DESCRIPTIONS[stem]
    if whitened:
        units = units.replace("input units", whitened)
    variables[f"{stem}_{method}"] = values.assign_attrs(long_name=f"{long_name.format(**fmt)}, {method.upper()}", units=units)
