"""The fitted object and its file: the :class:`PPA` estimator (a thin scikit-learn adapter around the core),
what its features are called (:class:`FeatureLabels`), the model file as data, the summary.

:class:`PPA` and :func:`load_model` are imported on first use (scikit-learn with them): a dask worker running the
cube layer's tasks, which read the labels alone, never imports scikit-learn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .labels import FeatureLabels

if TYPE_CHECKING:
    from .estimator import PPA, load_model

__all__ = ["FeatureLabels", "PPA", "load_model"]

#: the names this package imports from its estimator on first use
ESTIMATOR = ("PPA", "load_model")


def __getattr__(name: str) -> Any:
    """:class:`PPA` and :func:`load_model`, from :mod:`~ppa_xr.model.estimator` at their first use."""
    if name in ESTIMATOR:
        from . import estimator

        return getattr(estimator, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
