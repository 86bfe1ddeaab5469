"""The fitted object and its file: the :class:`PPA` estimator (a thin scikit-learn adapter around the core),
what its features are called (:class:`FeatureLabels`), the model file as data, the summary."""

from .estimator import PPA, load_model
from .labels import FeatureLabels

__all__ = ["FeatureLabels", "PPA", "load_model"]
