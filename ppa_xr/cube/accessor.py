"""The ``.ppa`` accessor on DataArray and Dataset: stateless, every method one delegation."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Hashable
from typing import TYPE_CHECKING, Any

import numpy as np
import xarray as xr

from ..core.docstrings import shared
from ..core.spec import RANDOM_STATE
from . import fitting, inputs, maps, report, sampling, shift

if TYPE_CHECKING:
    from ..model import PPA


def _delegates_to(func: Callable) -> Callable:
    """Give an accessor method the documentation of the function it delegates to, after its own line,
    so ``help(cube.ppa.fit)`` and the API pages show the parameters. The function's first parameter is the
    cube, which the accessor passes: its entry is left out of the copied Parameters section."""

    def document(method: Callable) -> Callable:
        method.__doc__ = f"{method.__doc__}\n\n{_without_first_parameter(inspect.cleandoc(func.__doc__ or ''))}"
        return method

    return document


def _without_first_parameter(doc: str) -> str:
    """A numpydoc docstring without the first entry of its Parameters section: the name line and the
    indented description under it (blank lines inside the description included)."""
    lines = doc.splitlines()
    indented = [line.startswith((" ", "\t")) for line in lines] + [False]
    for i in range(len(lines) - 1):
        if lines[i].strip() == "Parameters" and set(lines[i + 1].strip()) == {"-"}:
            end = i + 3  # past the underline and the first parameter's name line
            while end < len(lines) and (indented[end] or not lines[end].strip() and indented[end + 1]):
                end += 1
            return "\n".join(lines[: i + 2] + lines[end:])
    return doc


class _PPAAccessor:
    __slots__ = ("_obj",)

    def __init__(self, obj: xr.DataArray | xr.Dataset) -> None:
        self._obj = obj

    @_delegates_to(fitting.fit)
    def fit(
        self, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = RANDOM_STATE, progress: bool = False,
        weights: xr.DataArray | None = None, missing: str = "drop", **ppa_params: Any,
    ) -> PPA:
        """Fit PPA on a random sample of valid pixels; see :func:`ppa_xr.cube.fit`."""
        return fitting.fit(self._obj, dim, n_samples, random_state, progress, weights, missing, **ppa_params)

    @_delegates_to(sampling.sample_valid_pixels)
    def sample(
        self, dim: Hashable = "band", n_samples: int | None = None, random_state: int | None = RANDOM_STATE, return_groups: bool = False,
    ) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """Uniform random sample of valid pixels as ``(n, d)``; see :func:`ppa_xr.cube.sample_valid_pixels`."""
        return sampling.sample_valid_pixels(self._obj, dim, n_samples, random_state, return_groups)

    @_delegates_to(maps.transform)
    def transform(self, model: PPA, n_components: int | float | None = None, dim: Hashable | None = None, check: bool = False) -> xr.DataArray:
        """Lazy PPA components (``check=True``: after a quick check that PPA beats its PCA here); see :func:`ppa_xr.cube.transform`."""
        return maps.transform(self._obj, model, n_components, dim, check)

    @_delegates_to(shift.evaluate)
    def evaluate(
        self, model: PPA, n_samples: int | None = shift.CHECK_SAMPLES, dim: Hashable | None = None, random_state: int | None = RANDOM_STATE,
        max_chunks: int | None = None, weights: xr.DataArray | None = None,
    ) -> xr.Dataset:
        """PPA's and its PCA's error curves on a sample of this cube; see :func:`ppa_xr.cube.evaluate`."""
        return shift.evaluate(self._obj, model, n_samples, dim, random_state, max_chunks, weights)

    @_delegates_to(maps.inverse_transform)
    def inverse_transform(self, model: PPA, dim: Hashable = inputs.COMPONENT) -> xr.DataArray | xr.Dataset:
        """Lazy inverse of components; see :func:`ppa_xr.cube.inverse_transform`."""
        return maps.inverse_transform(self._obj, model, dim)

    @_delegates_to(maps.reconstruct)
    def reconstruct(self, model: PPA, n_components: int | float, dim: Hashable | None = None) -> xr.DataArray | xr.Dataset:
        """Lazy ``n_components`` reconstruction; see :func:`ppa_xr.cube.reconstruct`."""
        return maps.reconstruct(self._obj, model, n_components, dim)

    @_delegates_to(maps.reconstruction_error)
    def reconstruction_error(self, model: PPA, n_components: int | float, dim: Hashable | None = None) -> xr.DataArray:
        """Lazy per-pixel squared error map; see :func:`ppa_xr.cube.reconstruction_error`."""
        return maps.reconstruction_error(self._obj, model, n_components, dim)

    @_delegates_to(maps.score_samples)
    def score_samples(self, model: PPA, dim: Hashable | None = None) -> xr.DataArray:
        """Lazy per-pixel log-likelihood map; see :func:`ppa_xr.cube.score_samples`."""
        return maps.score_samples(self._obj, model, dim)

    @_delegates_to(maps.fill)
    def fill(
        self, model: PPA, n_components: int | float | None = None, dim: Hashable | None = None, return_mask: bool = False,
    ) -> xr.DataArray | xr.Dataset | tuple[xr.DataArray | xr.Dataset, xr.DataArray | xr.Dataset]:
        """Lazy gap filling on the fitted map; see :func:`ppa_xr.cube.fill`."""
        return maps.fill(self._obj, model, n_components, dim, return_mask)

    @_delegates_to(report.information_report)
    def information_report(
        self, model: PPA, n_components: int | None = None, dim: Hashable | None = None, n_samples: int | None = None, random_state: int | None = RANDOM_STATE,
        estimator: str = "spacing", held_out: bool = True, weights: xr.DataArray | None = None,
    ) -> xr.Dataset:
        """PPA vs PCA redundancy reduction and errors; see :func:`ppa_xr.information.information_report`."""
        return report.information_report(self._obj, model, n_components, dim, n_samples, random_state, estimator, held_out, weights)


def _method_list() -> str:
    """The accessor's methods as a list, each linked to its page with the first line of its documentation
    (the API pages document them as ``xarray.DataArray.ppa.<name>``, the same on a Dataset)."""
    names = [name for name in vars(_PPAAccessor) if not name.startswith("_")]
    lines = [f"* :meth:`~xarray.DataArray.ppa.{name}`: {(inspect.getdoc(getattr(_PPAAccessor, name)) or '').splitlines()[0]}" for name in names]
    return "Its methods, the same on a DataArray and a Dataset:\n\n" + "\n".join(lines)


@xr.register_dataarray_accessor("ppa")
@shared
class PPADataArrayAccessor(_PPAAccessor):
    """``da.ppa``: PPA on a DataArray whose features lie along one dimension (default ``band``).

    {{accessor}}
    """

    __slots__ = ()


@xr.register_dataset_accessor("ppa")
@shared
class PPADatasetAccessor(_PPAAccessor):
    """``ds.ppa``: PPA on a Dataset whose data variables are the features.

    {{accessor}}
    """

    __slots__ = ()


for _accessor in (PPADataArrayAccessor, PPADatasetAccessor):  # the list after the summary line, before the Parameters
    _summary, _sections = inspect.cleandoc(_accessor.__doc__ or "").split("\n\n", 1)
    _accessor.__doc__ = f"{_summary}\n\n{_method_list()}\n\n{_sections}"
