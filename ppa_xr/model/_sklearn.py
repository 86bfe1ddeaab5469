"""Everything ppa_xr takes from scikit-learn, in one place: the estimator's base classes and checks, and
the private parts the estimator relies on (tested against the installed version in ``tests/test_layers.py``).

Private parts used:

* ``BaseEstimator._html_repr``: the parameter widget a notebook shows, below the fitted model's summary;
* ``_n_features_out``: the attribute ``ClassNamePrefixFeaturesOutMixin`` reads to name the outputs
  (``ppa0``, ``ppa1``, ...) for ``set_output``.
"""

from __future__ import annotations

from typing import Any

from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = ["BaseEstimator", "ClassNamePrefixFeaturesOutMixin", "NotFittedError", "TransformerMixin", "check_is_fitted",
           "html_widget", "output_names", "set_outputs", "validate_data"]


def html_widget(estimator: BaseEstimator) -> str:
    """scikit-learn's HTML widget of an estimator's parameters (``BaseEstimator._html_repr``)."""
    return BaseEstimator._html_repr(estimator)


def set_outputs(estimator: Any, count: int) -> None:
    """How many outputs ``get_feature_names_out`` names (``_n_features_out``)."""
    estimator._n_features_out = count


def output_names(estimator: Any, count: int) -> list[str]:
    """The names ``get_feature_names_out`` gives the first ``count`` outputs: the class name in lower case and the
    output's position (``ppa0``, ``ppa1``, ...), as ``ClassNamePrefixFeaturesOutMixin`` makes them."""
    return [f"{type(estimator).__name__.lower()}{i}" for i in range(count)]
