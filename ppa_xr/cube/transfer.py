"""Does a model transfer to this cube? PPA against its own PCA on a sample of it, and the ShiftWarning."""

from __future__ import annotations

import warnings
from collections.abc import Hashable

import numpy as np
import xarray as xr

from .. import evaluation
from ..model import PPA
from .inputs import COMPONENT, _component_units, model_features
from .sampling import fitted_shares, sample_features

#: pixels the transfer check of :func:`transform` compares PPA and PCA on, and the chunks it reads them from at most
CHECK_SAMPLES, CHECK_CHUNKS = 5000, 8


#: fewer held-out pixels than this (a scene fitted on nearly all its pixels) leave nothing to check
MIN_CHECK_PIXELS = 100


def evaluate(
    obj: xr.DataArray | xr.Dataset, model: PPA, n_samples: int = CHECK_SAMPLES, dim: Hashable | None = None,
    random_state: int | None = 0, max_chunks: int | None = None,
) -> xr.Dataset:
    """PPA against its own PCA on a sample of this cube: both error curves and their ratio over ``k``, without refitting.

    The sample is ``n_samples`` valid pixels outside the model's fitting
    sample, from every chunk (one pass) or ``max_chunks`` random chunks (a
    quick look). Returns, over ``component`` = k = 1..d-1 components kept:
    ``error_ppa`` and ``error_pca`` (squared error summed over bands, mean over
    pixels), ``relative_error`` (``100 e_PPA / e_PCA``) and its lower bound
    ``relative_error_low``; ``attrs["worse_at"]`` lists the k at which PPA is
    worse beyond sampling noise (:func:`ppa_xr.evaluation.compare_errors`).

    Parameters
    ----------
    obj : xr.DataArray or xr.Dataset
        The cube to judge the model on.
    model : PPA
        A fitted model.
    n_samples : int
        Pixels to compare on.
    dim : hashable, optional
        The feature dimension, when not the fitted one.
    random_state : int, optional
        Seeds the sample (and the chunks read).
    max_chunks : int, optional
        Read only that many random chunks.

    Returns
    -------
    xr.Dataset
        The error curves over ``component`` = k, computed.

    Raises
    ------
    ValueError
        Fewer than 2 valid pixels outside the fitting sample.

    Examples
    --------
    >>> curves = other_scene.ppa.evaluate(model)  # doctest: +SKIP
    >>> curves.relative_error.plot()  # doctest: +SKIP
    """
    da, dim = model_features(obj, model, dim)
    sample = sample_features(da, dim, n_samples, random_state, exclude=fitted_shares(da, dim, model.sample_), max_chunks=max_chunks, empty_ok=True)
    if sample.n_valid < 2:
        raise ValueError(
            f"{sample.n_valid} valid pixels of this cube lie outside the model's fitting sample"
            f"{' in the chunks read' if max_chunks else ''}: nothing to evaluate on"
            f"{'; pass max_chunks=None to read every chunk' if max_chunks else ' (the model saw every pixel: evaluate it on another scene)'}"
        )
    comparison = evaluation.compare_errors(model, sample.values)
    units = _component_units(da, model)
    k = xr.DataArray(np.arange(1, model.n_features_in_), dims=COMPONENT, attrs={"long_name": "components kept"})
    error = {"long_name": "squared reconstruction error summed over bands, mean over pixels"} | ({"units": f"({units})^2"} if units else {})
    return xr.Dataset(
        {
            "error_ppa": (COMPONENT, comparison.ppa, error),
            "error_pca": (COMPONENT, comparison.pca, error | {"long_name": error["long_name"] + ", PCA of the fitting sample"}),
            "relative_error": (COMPONENT, comparison.relative, {"long_name": "100 x PPA error / PCA error", "units": "%"}),
            "relative_error_low": (COMPONENT, comparison.low(), {
                "long_name": f"lower confidence bound of relative_error, simultaneous over k at {evaluation.LEVEL:.0%}", "units": "%"}),
        },
        coords={COMPONENT: k},
        attrs={"n_pixels": comparison.n, "worse_at": comparison.worse_at().tolist(),
               "pixels": "held out: valid pixels outside the model's fitting sample" + (f", from {max_chunks} random chunks" if max_chunks else "")},
    )


def warn_on_shift(da: xr.DataArray, dim: Hashable, model: PPA, k: int) -> None:
    """:class:`~ppa_xr.evaluation.ShiftWarning` when PPA is worse than its PCA at some ``k' <= k`` on a quick sample."""
    sample = sample_features(da, dim, CHECK_SAMPLES, 0, exclude=fitted_shares(da, dim, model.sample_), max_chunks=CHECK_CHUNKS, empty_ok=True)
    if sample.n_valid >= MIN_CHECK_PIXELS:
        comparison = evaluation.compare_errors(model, sample.values)
        message = evaluation.shift_message(comparison, k, f"{comparison.n} pixels checked")
        if message:
            warnings.warn(message, evaluation.ShiftWarning, stacklevel=4)
