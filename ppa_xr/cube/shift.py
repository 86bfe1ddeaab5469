"""Does a model transfer to this cube? PPA against its own PCA on a sample of it, and the ShiftWarning."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np
import xarray as xr

from ..core import errors
from ..core.checks import warn_user
from ..core.spec import RANDOM_STATE
from .inputs import COMPONENT, model_features, squared_units
from .sampling import Fitted, shortfall, weights_at

if TYPE_CHECKING:
    from ..model import PPA

#: pixels the shift check compares PPA and PCA on, and the chunks it reads them from at most
CHECK_SAMPLES, CHECK_CHUNKS = 5000, 8


def evaluate(
    obj: xr.DataArray | xr.Dataset, model: PPA, n_samples: int | None = CHECK_SAMPLES, dim: Hashable | None = None,
    random_state: int | None = RANDOM_STATE, max_chunks: int | None = None, weights: xr.DataArray | None = None,
) -> xr.Dataset:
    """PPA against its own PCA on a sample of this cube: both error curves and their ratio over ``k``, without refitting.

    The sample is ``n_samples`` valid pixels outside the model's fitting
    sample, from every chunk (one pass) or ``max_chunks`` random chunks (a
    quick look). Returns, over ``component`` = k = 1..d-1 components kept:
    ``mse_ppa`` and ``mse_pca`` (squared error summed over bands, mean over
    pixels: the report's ``mse_*`` curves; ``error_ppa`` and ``error_pca``, their
    former names, are deprecated copies), ``relative_error`` (``100 e_PPA / e_PCA``) and its lower bound
    ``relative_error_low``; ``attrs["worse_at"]`` lists the k at which PPA is
    worse beyond sampling noise (:func:`ppa_xr.core.errors.compare_errors`).

    Parameters
    ----------
    obj : xr.DataArray or xr.Dataset
        The cube to judge the model on.
    model : PPA
        A fitted model.
    n_samples : int, optional
        Pixels to compare on (at least ``ppa_xr.information.MIN_HELD_OUT``): by default 5,000 (``CHECK_SAMPLES``, a quick
        check); None: every held-out pixel, up to 200,000 (with a fit on half the scene, the other half).
    dim : hashable, optional
        The feature dimension, when not the fitted one.
    random_state : int, Generator or None
        Seeds the sample (and the chunks read); default 0, as every ``random_state`` here (None: fresh randomness).
    max_chunks : int, optional
        Read only that many random chunks.
    weights : xr.DataArray, optional
        A weight per pixel over some of the pixel dimensions (e.g. ``np.cos(np.deg2rad(cube.lat))``), matched
        by label as ``fit(weights=...)`` matches them: the
        error curves are weighted means over the sampled pixels, as a weighted fit weighs them.

    Returns
    -------
    xr.Dataset
        The error curves over ``component`` = k, computed.

    Raises
    ------
    ValueError
        Fewer than ``ppa_xr.information.MIN_HELD_OUT`` valid pixels outside the fitting sample.

    Examples
    --------
    >>> curves = other_scene.ppa.evaluate(model)  # doctest: +SKIP
    >>> curves.relative_error.plot()  # doctest: +SKIP
    """
    da, dim = model_features(obj, model, dim)
    fitted = Fitted.of(da, dim, model)
    sample = fitted.held_out(da, dim, n_samples, random_state, max_chunks)
    if message := fitted.without_complete_pixels(da, dim, sample, random_state, max_chunks) or shortfall(sample, max_chunks, model.params_.s_mode):
        raise ValueError(message)
    row_weights = None if weights is None else weights_at(da, dim, weights, sample.index)
    comparison = errors.compare_errors(model.params_, sample.values, weights=row_weights)
    chunks = int(np.prod([len(sizes) for d, sizes in zip(da.dims, da.chunks) if d != dim])) if da.chunks else 1  # every one read where fewer
    k = xr.DataArray(np.arange(1, model.params_.n_features), dims=COMPONENT, attrs={"long_name": "components kept"})
    squared = squared_units(da, model) or "squared feature units"  # no unit given
    error = {"long_name": "squared reconstruction error summed over bands, mean over pixels", "units": squared}
    curves = {"mse_ppa": (COMPONENT, comparison.ppa, error),
              "mse_pca": (COMPONENT, comparison.pca, error | {"long_name": error["long_name"] + ", PCA of the fitting sample"})}
    deprecated = {f"error_{m}": (COMPONENT, values, attrs | {"deprecated": f"the former name of mse_{m}, the same values"})
                  for m, (_, values, attrs) in zip(("ppa", "pca"), curves.values())}
    return xr.Dataset(
        {
            **curves,
            "relative_error": (COMPONENT, comparison.relative, {"long_name": "100 x PPA error / PCA error", "units": "%"}),
            "relative_error_low": (COMPONENT, comparison.low(), {
                "long_name": f"lower confidence bound of relative_error, simultaneous over k at {errors.LEVEL:.0%}", "units": "%"}),
            **deprecated,
        },
        coords={COMPONENT: k},
        attrs={"n_pixels": comparison.n, "worse_at": comparison.worse_at().tolist(),
               "pixels": "held out: valid pixels outside the model's fitting sample" + (f", from {max_chunks} random chunks" if max_chunks and max_chunks < chunks else "")},
    )


def warn_on_shift(da: xr.DataArray, dim: Hashable, model: PPA, k: int) -> bool:
    """:class:`~ppa_xr.ShiftWarning` when PPA is worse than its PCA at some ``k' <= k`` on a quick held-out sample
    (silent where too few pixels are held out to tell); whether it compared them (and so checked their units)."""
    fitted = Fitted.of(da, dim, model)
    sample = fitted.held_out(da, dim, CHECK_SAMPLES, 0, CHECK_CHUNKS)
    if message := fitted.without_complete_pixels(da, dim, sample, 0, CHECK_CHUNKS):
        warn_user(f"the shift check: {message}", UserWarning)
    elif not shortfall(sample):
        comparison = errors.compare_errors(model.params_, sample.values)
        message = errors.shift_message(comparison, k, f"{comparison.n} pixels checked")
        if message:
            warn_user(message, errors.ShiftWarning)
        return True
    return False
