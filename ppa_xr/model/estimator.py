"""The PPA estimator: scikit-learn's contract around the core (a thin adapter).

Its parameters are the fields of :class:`~ppa_xr.core.spec.Spec`: ``__init__``
and the class's Parameters section are made from that declaration. ``fit``
checks them once (a ``Spec``) and hands them to
:func:`~ppa_xr.core.shrink.fit_selected` (the configuration validated, then
:func:`~ppa_xr.core.ppa.fit`, then its last curve shrunk); every other method hands the fitted
parameters (``params_``) to a core kernel or measure.
"""

from __future__ import annotations

import copy
import inspect
import os
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import numpy as np

from ..core import checks, errors, kernels, likelihood, linalg, spec, subspace
from ..core.fill import check_missing, fewest_gaps, fit_with_gaps, refilled
from ..core.fill import fill as fill_gaps
from ..core.checks import warn_user
from ..core.docstrings import shared
from ..core.keys import FitSample
from ..core.params import PPAParams
from ..core.shrink import fit_selected
from ..core.ppa import fit_memory
from ..core.linalg import unit_mean
from ..core.spec import Spec
from . import display, file
from ._sklearn import (BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, check_is_fitted, html_widget, output_names,
                       set_outputs, validate_data)
from .labels import FeatureLabels, check_matrix_labels, kinds, shown

#: features whose standard deviations differ by more than this make PPA (and PCA) describe only the largest
SCALE_RATIO_WARNING = 1e3


def _init_of(declared: Spec) -> Any:
    """``__init__`` with every parameter of the spec (``n_components`` positional, the rest keyword-only, as
    scikit-learn's estimators) and its type hint, storing each as given: scikit-learn's ``get_params`` / ``clone`` contract."""
    kinds = {"n_components": inspect.Parameter.POSITIONAL_OR_KEYWORD}
    types = {spec_field.name: spec_field.type for spec_field in spec.fields_of()}  # the spec's hints, as text
    signature = inspect.Signature([inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
        inspect.Parameter(name, kinds.get(name, inspect.Parameter.KEYWORD_ONLY), default=default, annotation=types[name])
        for name, default in declared.values().items()
    ], return_annotation=None)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        spec.check_names(kwargs)
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        for name in spec.names():
            setattr(self, name, bound.arguments[name])

    __init__.__signature__ = signature  # type: ignore[attr-defined]
    __init__.__doc__ = "Store the parameters as given; ``fit`` checks them."
    return __init__


class PPA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    __init__ = _init_of(Spec())

    def _get_spec(self) -> Spec:
        """The parameters, checked, as the core takes them.

        Returns
        -------
        Spec
            Every parameter, checked; a bad value raises ValueError naming it.
        """
        return Spec(**self.get_params(deep=False))

    def fit(self, X: Any, y: Any = None, groups: Any = None, sample_weight: Any = None, progress: bool = False,
            feature_weight: Any = None, missing: str = "drop") -> PPA:
        """Fit the PPA map on ``X``; rows with NaN or inf are left out, with a warning (every row of them: an error).

        The fit runs on the data divided by a power of two near its spread,
        so tiny or huge units fit as well as unit ones, up to a deviation from the
        mean of about 1e152 (``ppa_xr.core.ppa.max_spread``: the model's
        variances, its squares summed over the features, must fit float64);
        beyond it the fit is refused unless ``standardize=True`` (variances in
        standardized units).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Training samples (rows with NaN or inf are left out; a numpy masked
            array's masked entries count as NaN).
        y : None
            Ignored (scikit-learn's signature).
        groups : array-like of shape (n_samples,), optional
            Labels of samples that must be held out together when degrees are
            selected, e.g. the spatial block of each pixel (``cube.ppa.fit``
            passes them): correlated neighbours then cannot vouch for a curve
            that does not transfer.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights, as repeated rows would weigh (e.g. the area
            of each pixel of a latitude-longitude grid, ``cos(lat)``): the mean,
            the covariances, every least-squares fit and held-out error are
            weighted. Rows of weight 0 are left out. Real numbers only (bools
            count as 1 and 0; float round-off below 0, ``|w| <= 8 eps max|w|``,
            as 0); any scale, 1e-200 or 1e306, weighs alike.
        progress : bool
            Show a progress bar of the steps (``tqdm.auto``: a widget in a notebook, stderr elsewhere).
        feature_weight : array-like of shape (n_features,), optional
            Non-negative weights of the features (e.g. each grid cell's area,
            ``cos(lat)``, in S-mode): the covariance is that of the data times
            ``sqrt(w_j)``, as eofs' and xeofs' area weights; inverse and
            reconstructions undo it. Features of weight 0 are left out (NaN in
            ``components_``, inverse and reconstructions).
        missing : {"drop", "fill"}
            ``"drop"``: rows with a NaN or inf are left out. ``"fill"``: they are kept and their gaps filled as
            the fit goes (:func:`~ppa_xr.core.fill.fit_with_gaps`: fill, fit, refill, linear then curved);
            rows with nothing observed are left out. For data where few or no rows are complete (cloudy time series).

        Returns
        -------
        PPA
            The fitted estimator.

        Notes
        -----
        With fewer samples than features (S-mode: maps as samples, grid cells
        as features), feature weights, or features that are NaN in every
        sample (left out, NaN in the outputs, as land cells), PPA is fitted in
        the ``r <= n - 1`` dimensional span of the centred, weighted samples
        (an exact SVD reduction, ``ppa_xr.core.subspace``); ``degree=1`` is then
        the EOF analysis of eofs and xeofs. A feature NaN in some samples only
        leaves those samples out, as anywhere.
        """
        declared = self._get_spec()
        features = _table_features(X)
        check_matrix_labels(self.noise_cov, getattr(X, "columns", None) if features is None else features.labels)
        _warn_on_unnamed_columns(getattr(X, "columns", None))
        X = validate_data(self, _real_numbers(X), dtype=[np.float64, np.float32], ensure_all_finite=False, ensure_min_samples=2)
        return self._fit(X, declared, groups, features, None, progress, sample_weight, feature_weight, missing)

    @classmethod
    def _fitted(cls, X: np.ndarray, declared: Spec, groups: np.ndarray | None = None, features: FeatureLabels | None = None,
               sample: FitSample | None = None, progress: bool = False, weights: np.ndarray | None = None,
               feature_weights: np.ndarray | None = None, missing: str = "drop") -> PPA:
        """A model fitted on a prepared sample with checked parameters: the cube layer's way in.

        Parameters
        ----------
        X : np.ndarray
            (n, d) finite samples.
        declared : Spec
            The parameters, already checked.
        groups : np.ndarray, optional
            (n,) labels held out together in the degree selection.
        features : FeatureLabels, optional
            What the features are called in the cube (kept as ``features_``).
        sample : FitSample, optional
            Which pixels of which cubes ``X`` is (kept as ``sample_``), so reports can hold them out.
        progress : bool
            Show a progress bar of the steps.
        weights : np.ndarray, optional
            (n,) the rows' weights (a cube's ``weights`` at the sampled pixels).
        feature_weights : np.ndarray, optional
            (d,) the features' weights (a cube's ``weights`` over its feature dimension).
        missing : {"drop", "fill"}
            As in :meth:`fit`.

        Returns
        -------
        PPA
            The fitted estimator.
        """
        model = cls(**declared.values())
        X = validate_data(model, X, dtype=[np.float64, np.float32], ensure_all_finite=False, ensure_min_samples=2)
        return model._fit(X, declared, groups, features, sample, progress, weights, feature_weights, missing)

    def _fit(self, X: np.ndarray, declared: Spec, groups: Any, features: FeatureLabels | None, sample: FitSample | None,
             progress: bool, weights: Any = None, feature_weights: Any = None, missing: str = "drop") -> PPA:
        _check_groups(groups, len(X))
        if feature_weights is not None or len(X) <= X.shape[1]:
            if check_missing(missing) == "fill":
                raise ValueError("missing='fill' fits need more samples than features and no feature weights; with fewer "
                                 "samples (S-mode) a feature missing in some samples leaves those samples out: use missing='drop'")
            return self._fit_reduced(X, declared, groups, features, sample, progress, weights, feature_weights)
        if weights is not None:
            X, groups, weights = _weighed(X, groups, weights, declared)
        fitting, curves_worse, drawn = declared, None, None
        if check_missing(missing) == "fill":
            X, groups, weights, curves_worse, drawn = _gaps_filled(X, groups, weights, declared, features)
            fitting = declared.pca() if curves_worse else declared
        X, groups, weights = _complete(X, groups, weights)
        fitted, configuration = _fitted_map(X, fitting, groups, progress, weights, shrink=curves_worse is None, drawn=drawn)
        params = fitted.params
        if not (declared.standardize or declared.noise_cov is not None):  # the features' standard deviations, from R^T diag(lambda) R
            # of the features that vary: a constant one's comes back from the eigendecomposition as rounding
            _warn_on_scales(np.sqrt(params.pca_variance @ params.pca_rotation**2), X)
        self._set_fitted(params, declared, features, sample)
        self.configuration_ = configuration
        self.fit_error_ratio_ = fitted.error_ratio
        self._set_sample_size(_effective_size(len(X), weights), weights is not None)
        return self

    def _fit_reduced(self, X: np.ndarray, declared: Spec, groups: Any, features: FeatureLabels | None, sample: FitSample | None,
                     progress: bool, weights: Any, feature_weights: Any) -> PPA:
        """The fit in the span of the samples (``ppa_xr.core.subspace``): features NaN in every sample, or of weight 0,
        left out; the others weighed, the samples centred and reduced to their ``r`` directions; PPA on those."""
        if declared.noise_cov is not None:
            raise ValueError("noise_cov needs at least as many samples as features and no feature weights: a noise covariance "
                             f"of {X.shape[1]} features cannot be estimated from {len(X)} samples; fit without noise_cov")
        if not np.isfinite(X).any():
            _complete(X, groups, weights)  # no value at all: the refusal of rows without data
        root, used = _feature_roots(X, feature_weights)
        X = X[:, used]
        if weights is not None:
            X, groups, weights = _weighed(X, groups, weights, declared)
        X, groups, weights = _complete(X, groups, weights)
        n = len(X)
        if declared.standardize:  # the features' (weighted) standard deviations, folded into S
            v = None if weights is None else weights / weights.mean()
            std = np.sqrt(np.average((X - np.average(X, axis=0, weights=v)) ** 2, axis=0, weights=v))
            root[used] = root[used] / np.where(std > 0, std, 1.0)
        reduced = subspace.span(X, root[used], weights, full=n > X.shape[1])
        r = reduced.basis.shape[1]
        if r < 2:
            raise ValueError(f"the {n} samples span {r} direction(s) once centred: PPA needs at least 2 (3 samples that differ)")
        inner, configuration = _fitted_map(reduced.coordinates, declared.replace(standardize=False), groups, progress, weights)
        basis = np.zeros((X.shape[1] if used is None else len(used), r))
        mean = np.zeros(len(basis))
        basis[used], mean[used] = reduced.basis, reduced.mean
        params = inner.params.in_subspace(mean, basis, np.where(used, root, 0.0))
        self._set_fitted(params, declared, features, sample)
        self.configuration_ = configuration
        self.fit_error_ratio_ = inner.error_ratio
        self._set_sample_size(_effective_size(n, weights), weights is not None)
        return self

    def _set_sample_size(self, n: float, weighted: bool) -> None:
        """The fitting sample's effective size ``n`` (Kish's ``(sum w)^2 / sum w^2`` with weights: :func:`_effective_size`)
        and North's rule-of-thumb errors of the variances, ``delta lambda = lambda sqrt(2 / n_eff)`` (North et al., 1982;
        eofs' ``northTest``): neighbouring components whose variances lie within it are mixed (degenerate)."""
        self.weighted_samples_ = weighted
        self.n_effective_ = float(n)
        self.explained_variance_error_ = self.explained_variance_ * np.sqrt(2 / self.n_effective_)

    def _fitted_spec(self) -> Spec:
        """The parameters, as they were when the model was fitted: a parameter set since (``set_params``) but
        ``whiten`` (which ``transform`` and its inverse read when called) is refused, saying which, as the fitted
        map is not that parameter's (a file would record it beside the old map: a changed ``n_components`` loaded
        with that many components, a ``standardize`` labelled the units wrong)."""
        now, fitted = self._get_spec(), getattr(self, "_fit_spec", None)
        if fitted is None:
            return now
        changed = [name for name in spec.names() if name != "whiten" and not _same(getattr(now, name), getattr(fitted, name))]
        if changed:
            raise ValueError(f"the parameters {', '.join(changed)} were changed after the fit (set_params), and the fitted map is that "
                             f"of {', '.join(f'{name}={getattr(fitted, name)!r}' for name in changed)}: fit again with the new "
                             "values, or set them back")
        return now

    def _set_fitted(self, params: PPAParams, declared: Spec, features: FeatureLabels | None, sample: FitSample | None) -> None:
        self._fit_spec = declared
        self.params_ = params
        self.features_, self.sample_ = features, sample
        self.mean_ = params.mean
        self.whitening_ = params.whitening
        self.scale_ = params.feature_scale
        if declared.noise_cov is not None:
            self.noise_cov_ = declared.noise_cov
            self.snr_ = params.explained_variance - 1
        self.components_ = _patterns(params)
        self.degrees_ = params.degrees
        self.explained_variance_ = params.explained_variance
        total = params.explained_variance.sum()
        self.explained_variance_ratio_ = params.explained_variance / total if total > 0 else np.zeros_like(params.explained_variance)
        self.n_features_in_ = params.n_inputs
        self.n_components_ = params.n_features if declared.n_components is None else self.kept(declared.n_components)
        self.whitened_units_ = "standardized units" if declared.standardize else "noise units" if declared.noise_cov is not None else None
        set_outputs(self, self.n_components_)  # names "ppa0", "ppa1", ... for set_output

    @classmethod
    def _from_params(cls, params: PPAParams, declared: Spec, features: FeatureLabels | None = None,
                    sample: FitSample | None = None) -> PPA:
        """A fitted estimator around existing parameters (e.g. read from a file).

        Parameters
        ----------
        params : PPAParams
            The fitted arrays.
        declared : Spec
            The parameters they were fitted with.
        features : FeatureLabels, optional
            The feature labels.
        sample : FitSample, optional
            The fitting sample's record.

        Returns
        -------
        PPA
            The fitted estimator.

        Raises
        ------
        ValueError
            Parameters that disagree with the arrays (degrees not among the candidates, other tails, a wrong shape).
        """
        declared.for_data(None, params.n_features)
        allowed = set(declared.candidates) | {1}
        if not set(params.degrees.tolist()) <= allowed:
            raise ValueError(f"the fitted degrees {sorted(set(params.degrees.tolist()))} are not among the candidates {sorted(allowed)}")
        if params.tails != declared.tails:
            raise ValueError(f"the fitted tails {params.tails!r} disagree with the parameter tails={declared.tails!r}")
        model = cls(**declared.values())
        model._set_fitted(params, declared, features, sample)
        return model

    def kept(self, n_components: int | float) -> int:
        """The number of components ``n_components`` asks for.

        Parameters
        ----------
        n_components : int or float
            A count, 1..n_components, or a share of the variance in (0, 1) (``0.95``: the fewest leading components
            whose ``explained_variance_ratio_`` sum to 95%).

        Returns
        -------
        int
            The count.
        """
        return checks.kept_components(n_components, self.params_.n_features, self.explained_variance_ratio_)

    def to_xarray(self) -> Any:
        """The fitted results as labelled xarray objects, as xeofs users expect.

        Returns
        -------
        xr.Dataset
            ``components`` (component x feature: the leading vectors, rows of
            ``components_``) with the feature labels and coordinates of the cube
            the model was fitted on, ``explained_variance`` and
            ``explained_variance_ratio`` (component), ``snr`` (component, with
            ``noise_cov``) and ``degree`` (step: the polynomial degree of each
            step; 1 is straight). ``components`` are in whitened units for a
            standardizing or noise-whitening model (``whitened_units_``). The attributes
            record the configuration fitted (``configuration_``).

        Examples
        --------
        >>> model.to_xarray().explained_variance_ratio.sel(component=slice(1, 3))  # doctest: +SKIP
        """
        import xarray as xr

        check_is_fitted(self)
        d = self.params_.n_features  # the components (r of the n_features_in_ inputs for a reduced model)
        features = self.features_ or FeatureLabels("feature")
        ds = xr.Dataset(
            {
                "components": (("component", features.dim), self.components_, {"long_name": "leading vectors in input space (rows of A)"}),
                "explained_variance": ("component", self.explained_variance_, {"long_name": "variance of each component on the fitting sample"}),
                "explained_variance_ratio": ("component", self.explained_variance_ratio_, {"long_name": "share of the total variance"}),
                "degree": ("step", self.degrees_, {"long_name": "polynomial degree of each step (1: straight)"}),
            },
            coords={"component": np.arange(1, d + 1), "step": np.arange(1, d)},
        )
        if hasattr(self, "snr_"):
            ds["snr"] = ("component", self.snr_, {"long_name": "signal-to-noise ratio of each component"})
        if hasattr(self, "configuration_"):  # how the fit was configured: as given, or validated on held-out groups
            ds.attrs.update({f"configuration_{key}": str(value) for key, value in self.configuration_.items()})
        return ds.assign(components=features.attach(ds["components"]))

    def to_dataset(self) -> Any:
        """The fitted model as data: its arrays (with checksums), labels, parameters and provenance.

        Returns
        -------
        xr.Dataset
            What :meth:`save` writes (``ppa_xr.model.file``).
        """
        check_is_fitted(self)
        size = (self.n_effective_, self.weighted_samples_) if hasattr(self, "n_effective_") else None
        return file.to_dataset(self.params_, self._fitted_spec(), self.features_, self.sample_, getattr(self, "fit_error_ratio_", None),
                               getattr(self, "configuration_", None), size, getattr(self, "feature_names_in_", None))

    @classmethod
    def from_dataset(cls, ds: Any, source: str = "dataset") -> PPA:
        """The model of :meth:`to_dataset`, every array and parameter checked.

        Parameters
        ----------
        ds : xr.Dataset
            A model as :meth:`to_dataset` gives it.
        source : str
            What to call it in errors (a file name).

        Returns
        -------
        PPA
            The fitted estimator.

        Raises
        ------
        ValueError
            A damaged, inconsistent or foreign dataset, named.
        """
        params, declared, features, sample = file.from_dataset(ds, source)
        try:
            model = cls._from_params(params, declared, features, sample)
        except ValueError as err:
            raise ValueError(f"{source} is corrupt: {err}") from err
        ratio, configuration = file.error_ratio(ds, source), file.configuration(ds, source)
        if ratio is not None:
            model.fit_error_ratio_ = ratio
        if configuration is not None:
            model.configuration_ = configuration
        if (size := file.sample_size(ds, source)) is not None:
            model._set_sample_size(*size)
        if (names := file.feature_names(ds, source)) is not None:
            model.feature_names_in_ = names
        return model

    def save(self, path: str | os.PathLike, format: str | None = None, overwrite: bool = False) -> Path:
        """Save as data: netCDF (``.nc``) or zarr (``.zarr``), written atomically.

        An existing path is replaced only when it holds a ppa_xr model and
        ``overwrite=True``; anything else there is never touched (a model
        store holding other files is refused). Concurrent saves and loads of
        one path take turns on a lock file beside it (``.<name>.lock``): the
        last save wins whole. The lock file stays after the save: removing
        it while another process waits on it would let that process and a
        third one hold "the" lock at once.

        Parameters
        ----------
        path : str or os.PathLike
            Where to write, ending in ``.nc`` or ``.zarr``.
        format : {"netcdf", "zarr"}, optional
            When the suffix does not say.
        overwrite : bool
            Replace a model already there.

        Returns
        -------
        pathlib.Path
            The path written.
        """
        return file.write(self.to_dataset(), path, format, overwrite)

    @classmethod
    @shared
    def load(cls, path: str | os.PathLike, format: str | None = None) -> PPA:
        """Read a model written by :meth:`save`.

        {{model_file}}
        """
        model = cls.from_dataset(file.read(path, format), source=str(path))
        model.source_ = str(path)
        return model

    @property
    def feature_dim_(self) -> Hashable | None:
        """The cube dimension the model's features lie along (None when fitted on a plain array)."""
        return self.features_.dim if self.features_ else None

    @property
    def feature_labels_(self) -> np.ndarray | None:
        """The labels of the features along :attr:`feature_dim_`, in fitted order: a DataFrame's column names
        (``feature_names_in_``) where fitted on one, which label a cube's features as well (None: by position)."""
        if self.features_:
            return self.features_.labels
        names = getattr(self, "feature_names_in_", None)
        return None if names is None else np.asarray(names)

    @property
    def feature_coords_(self) -> dict[str, np.ndarray]:
        """Other per-feature coordinates of the fitting cube (e.g. wavelengths)."""
        return self.features_.coords if self.features_ else {}

    @property
    def pca_(self) -> PPA:
        """PCA of the same fitting sample (a fitted ``PPA(degree=1)``): the like-for-like baseline."""
        check_is_fitted(self)
        pca = PPA._from_params(self.params_.pca(), self._get_spec().pca(), self.features_, self.sample_)
        if hasattr(self, "n_effective_"):  # the same sample: its size (North's errors, the score's n / (n - 1))
            pca._set_sample_size(self.n_effective_, self.weighted_samples_)
        if hasattr(self, "feature_names_in_"):
            pca.feature_names_in_ = self.feature_names_in_
        return pca

    def _check_input(self, X: Any, units: bool = True) -> np.ndarray:
        """``X`` as the fitted model takes it, warning where its values lie far beyond the fitting sample's, in other units
        (``ppa_xr.core.errors.warn_other_units``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples; rows with NaN or inf are kept (every map gives them NaN).
        units : bool
            Check their units (``evaluate`` checks them on every row, ``ppa_xr.core.errors.compare_errors``).

        Returns
        -------
        np.ndarray
            2-D, the fitted number of features, float32 or float64 (other numbers as float64).
        """
        check_is_fitted(self)
        if hasattr(X, "data_vars") or (hasattr(X, "dims") and len(X.dims) > 2):  # xarray: pixels and features found by its accessor
            what = "a Dataset (its variables the features)" if hasattr(X, "data_vars") else f"a cube of dims {tuple(X.dims)}"
            raise ValueError(f"the estimator's maps take tables (samples, features); {what} goes through its accessor, e.g. "
                             f"cube.ppa.transform(model) (likewise inverse_transform, reconstruct, fill, score_samples)")
        if hasattr(X, "dims") and self.features_ and self.features_.dim in X.dims:  # a table of labelled features: by label
            X = self.features_.select(X.transpose(..., self.features_.dim), self.n_features_in_)
        X = validate_data(self, _real_numbers(X), reset=False, dtype=[np.float64, np.float32], ensure_all_finite=False)
        if units:
            errors.warn_other_units(self.params_, X)
        return X

    def transform(self, X: Any) -> np.ndarray:
        """PPA coordinates of ``X``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples; a row with NaN or inf gives NaN (as on cubes).

        Returns
        -------
        np.ndarray
            (n_samples, n_components) components (divided by their standard deviations with ``whiten=True``).
        """
        X = self._check_input(X)
        return kernels.forward(X, self.params_, self.n_components_, whiten=self.whiten)

    def inverse_transform(self, X: Any) -> np.ndarray:
        """Back to input space from the ``k <= d`` leading components.

        With ``k < d`` this is the ``k``-component reconstruction: the residual
        after step ``k`` is set to its mean (zero) and only the first ``k``
        inverse steps run, so ``inverse_transform(transform(X)[:, :k])`` is
        never further from ``X`` than PCA's reconstruction on the fitting sample.

        Parameters
        ----------
        X : array-like of shape (n_samples, k)
            The first k components of each sample (a masked array's masked entries as missing: NaN rows).

        Returns
        -------
        np.ndarray
            (n_samples, n_features) points in input space, floating point.
        """
        check_is_fitted(self)
        X = _leading_components(X)
        R = checks.table(np.asarray(_unmasked(X)), "the components", "k")  # a masked array's masked components are missing (NaN rows)
        checks.check_components(R.shape[1], self.params_.n_features, "the number of components per row")
        _check_component_columns(X, output_names(self, self.params_.n_features), R.shape[1])
        if checks.real_components(R.dtype).kind != "f":
            R = R.astype(np.float64)
        errors.warn_other_component_units(self.params_, R, self.whiten)
        return kernels.inverse(R, self.params_, whiten=self.whiten)

    def jacobian(self, X: Any) -> np.ndarray:
        """Analytic Jacobian ``dr/dx`` at every sample, of the components as the map gives them (``whiten=True``
        divides :meth:`transform`'s by ``sqrt(explained_variance_)``, rows of this Jacobian alike).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Points in input space.

        Returns
        -------
        np.ndarray
            (n_samples, d, d); ``|det| = 1`` (``prod 1 / scale_`` with ``standardize=True``); NaN for invalid rows.
        """
        return kernels.jacobian(self._check_input(X), self.params_)

    def reconstruct(self, X: Any, n_components: int | float) -> np.ndarray:
        """Reconstruction of ``X`` from its first ``n_components`` PPA components (see :meth:`inverse_transform`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples.
        n_components : int or float
            Components kept, 1..d, or a share of the variance in (0, 1), as :meth:`kept` reads it.

        Returns
        -------
        np.ndarray
            (n_samples, n_features) reconstructions.
        """
        return kernels.reconstruct(self._check_input(X), self.params_, self.kept(n_components))

    def reconstruction_mse(self, X: Any) -> np.ndarray:
        """Reconstruction error keeping ``k = 1..d`` components, from one forward pass.

        Entry ``k-1`` is the mean over samples of the squared error summed over
        features, ``mean_i sum_j (x_ij - x^_ij)^2`` (divide by ``d`` for the
        mean per feature); with ``standardize=True`` each feature's squared
        error is divided by its variance, ``scale_**2``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples; rows with NaN or inf are left out, as :meth:`evaluate` leaves them.

        Returns
        -------
        np.ndarray
            (d,) mean squared errors, in squared input units (whitened units for a whitening model).
        """
        X, complete = self._complete_rows(X)
        return np.mean(kernels.error_curve(X[complete], self.params_), axis=0)

    def fill(self, X: Any, n_components: int | float | None = None) -> np.ndarray:
        """``X`` with its missing values (NaN or inf) estimated from each row's observed ones on the fitted map.

        The fill is the most probable completion under the model
        (:func:`ppa_xr.core.fill.fill`): with every component, the missing entries
        minimising ``r(x)^T Lambda^-1 r(x)`` (for PCA, the Gaussian conditional
        mean: the best linear fill); with ``n_components=k``, the point of the
        k-component manifold nearest the observed values (probabilistic PCA's
        model). A row whose curved fill leaves the fitted range far behind, or
        does not converge, gets the linear fill of the model's PCA. A model
        fitted in the span of its samples (S-mode: a missing grid cell of a
        time step) is filled from its k-component manifold for every k, by
        default the whole span: the scores that fit the observed cells best
        (least squares, weighted as the fit weighs the cells, with the
        components' variances as prior); its dropped features (land) stay NaN.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples, NaN (or inf) where a value is missing.
        n_components : int or float, optional
            Fill from the first k components' manifold (1..d, 1..r for a reduced model, or a share of the variance in
            (0, 1) as :meth:`kept` reads it); default: every component.

        Returns
        -------
        np.ndarray
            (n_samples, n_features): observed values unchanged (bit for bit), missing ones filled; a row with
            no observed value stays NaN. float32 stays float32.
        """
        return fill_gaps(self._check_input(X), self.params_, None if n_components is None else self.kept(n_components))

    def evaluate(self, X: Any, sample_weight: Any = None) -> errors.ErrorComparison:
        """PPA against its own PCA (:attr:`pca_`) on the samples ``X``, ideally not used to fit.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples; rows with NaN or inf are left out.
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights of the rows (e.g. each pixel's area): weighted means of the errors.

        Returns
        -------
        ErrorComparison
            Both mean error curves over ``k = 1..d-1``, ``relative`` (``100 e_PPA / e_PCA``: below 100 PPA
            wins), its standard error, ``low()`` its lower confidence bound and ``worse_at()`` the k where PPA is
            worse beyond sampling noise.
        """
        X, complete = self._complete_rows(X, units=False)  # compare_errors checks the units of every complete row
        weights = None if sample_weight is None else checks.row_weights(sample_weight, len(X), "sample_weight")[complete]
        return errors.compare_errors(self.params_, X[complete], weights=weights)

    def score_samples(self, X: Any) -> np.ndarray:
        """Log-likelihood of each sample under the model, as scikit-learn's ``PCA.score_samples``.

        The map is volume preserving, so the density of ``x`` is that of its
        outputs ``r`` (times ``|det W|`` for a standardizing or noise-whitening
        model), each Gaussian (``ppa_xr.core.likelihood``)::

            log p(x) = -1/2 sum_p (r_p^2 / Lambda_p + log(2 pi Lambda_p)) + log |det W|

        ``Lambda_p``: ``explained_variance_ * n / (n - 1)`` (``n``:
        ``n_effective_``; a model loaded from a file saved before it was
        recorded, format 8 and older, has none, and takes
        ``explained_variance_`` as it is), the ``d - k`` components beyond
        ``n_components_`` sharing their mean, as probabilistic PCA's noise.
        With ``degree=1`` this is scikit-learn's PCA score.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples; a row with NaN or inf gives NaN.

        Returns
        -------
        np.ndarray
            (n_samples,) log densities in nats (whitened units' densities for a whitening model, converted by
            ``log |det W|`` to the input's).
        """
        return self._log_likelihood(self._check_input(X))

    def score(self, X: Any, y: Any = None, sample_weight: Any = None) -> float:
        """Mean log-likelihood of the samples (:meth:`score_samples`): higher is better, so ``GridSearchCV`` and
        ``cross_val_score`` compare degrees without a ``scoring``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Samples; rows with NaN or inf are left out, as :meth:`evaluate` leaves them.
        y : None
            Ignored (scikit-learn's signature).
        sample_weight : array-like of shape (n_samples,), optional
            Non-negative weights of the rows: the weighted mean.

        Returns
        -------
        float
            The (weighted) mean log density in nats.
        """
        X, complete = self._complete_rows(X)
        weights = None if sample_weight is None else checks.row_weights(sample_weight, len(X), "sample_weight")[complete]
        if weights is not None and not weights.any():
            raise ValueError("every complete row (no NaN or inf) has sample_weight 0: nothing to average; give some of them a weight")
        return float(np.average(self._log_likelihood(X[complete]), weights=weights))

    def _log_likelihood(self, X: np.ndarray) -> np.ndarray:
        """:meth:`score_samples` of rows already checked (``_check_input``): checked again, the rows of a model fitted on
        a DataFrame would be told they lack its feature names."""
        return likelihood.log_likelihood(X, self.params_, self.n_components_, getattr(self, "n_effective_", None))

    def _complete_rows(self, X: Any, units: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """``X`` checked (its units too, unless ``units`` is False), and which of its rows are complete: every input the
        model reads finite (a reduced model's dropped inputs, such as land cells, are not gaps)."""
        X = self._check_input(X, units)
        complete = np.isfinite(self.params_.inputs(X)).all(axis=1)
        if not complete.any():
            raise ValueError(f"none of the {len(X)} rows is complete (every one has NaN or inf where the model reads it): "
                             "fill the gaps first (model.fill(X)) or pass rows without them")
        return X, complete

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        """scikit-learn's repr of the parameters, and for a fitted model its summary (:mod:`ppa_xr.model.display`)."""
        text = BaseEstimator.__repr__(self._shown(), N_CHAR_MAX)
        return f"{text}\n{display.text(self)}" if hasattr(self, "params_") else text

    def _html_repr(self) -> str:
        """In a notebook: the fitted model's summary above scikit-learn's parameter widget."""
        widget = html_widget(self)
        return display.html_table(self) + widget if hasattr(self, "params_") else widget

    def _shown(self) -> PPA:
        """The estimator as its parameter repr shows it: a noise covariance matrix by its description, not its values."""
        if not isinstance(self.noise_cov, np.ndarray) or self.noise_cov.ndim != 2:
            return self
        shown = copy.copy(self)
        shown.noise_cov = display.Described(f"noise covariance {display.noise_description(self.noise_cov)}")
        return shown

    def __sklearn_tags__(self) -> Any:
        """Rows with NaN are allowed: transforms give NaN for them (as for a cube's invalid pixels), ``fit`` leaves them
        out with a warning."""
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        return tags


PPA.__doc__ = f"""Principal Polynomial Analysis (Laparra et al., 2014).

``d-1`` sequential shears: at step ``p`` the residual is projected on a
leading vector, ``alpha_p = e_p^T x_{{p-1}}``, and a polynomial prediction of
the orthogonal part is removed, ``x_p = E_p^T x_{{p-1}} - W_p v(alpha_p)``.
The output is ``r = [alpha_1, ..., alpha_{{d-1}}, x_{{d-1}}]``. The map is
invertible in closed form and volume preserving (``|det J| = 1``);
``degree=1`` is PCA.

{spec.documented()}

Attributes
----------
params_ : PPAParams
    The fitted arrays the kernels and measures use.
mean_ : np.ndarray of shape (d,)
    The mean of the fitting sample.
components_ : np.ndarray of shape (d, d)
    The rotation ``A``: rows are the leading vectors in input space.
degrees_ : np.ndarray of shape (d-1,)
    The polynomial degree of each step (1: straight, as PCA's).
explained_variance_ : np.ndarray of shape (d,)
    Each output's variance on the fitting sample, dividing by ``n``: the
    quantity the reconstruction errors and Property 2 are stated in
    (scikit-learn's PCA divides by ``n - 1``).
explained_variance_ratio_ : np.ndarray of shape (d,)
    Shares of the total variance.
n_features_in_ : int
    Features seen in fit.
n_components_ : int
    Components :meth:`transform` returns.
whitened_units_ : str or None
    What components, variances and errors are measured in when not the
    input's units: ``"standardized units"`` (``standardize=True``),
    ``"noise units"`` (``noise_cov``), else None.
pca_ : PPA
    PCA of the same fitting sample, the like-for-like baseline.
scale_ : np.ndarray of shape (d,) or None
    The features' standard deviations with ``standardize=True``, ones
    without whitening, None with ``noise_cov``.
whitening_ : np.ndarray of shape (d, d)
    ``W``: the map acts on ``W (x - mean)``.
noise_cov_, snr_ : np.ndarray
    With ``noise_cov``: the noise covariance, and each component's
    signal-to-noise ratio, ``explained_variance_ - 1`` (to first order for
    curved steps; descending).
n_effective_ : float
    The fitting sample's size, or its effective size with weights, ``(sum w)^2 / sum w^2``
    (Kish): independent samples assumed (autocorrelated time steps are fewer in effect).
explained_variance_error_ : np.ndarray of shape (d,)
    North's rule-of-thumb errors, ``explained_variance_ * sqrt(2 / n_effective_)``
    (eofs' ``northTest``): components whose variances differ by less are mixed.
configuration_ : dict
    The configuration fitted, ``{{"robust": bool, "max_curved": int or None, "validated": bool, "shrink": float,
    "turned": list}}``: chosen by whole-fit validation (``configuration="validated"``) or as given; ``shrink``, the
    factor of the last curve (``ppa_xr.core.shrink``; 1: as fitted); ``turned``, the runs of straight components after
    the last curve whose tied variances were turned toward PCA's subspace, ``[first k, last k]`` each
    (``ppa_xr.core.ties``).
fit_error_ratio_ : np.ndarray of shape (d-1,)
    ``100 e_PPA(k) / e_PCA(k)`` on every row of the fitting sample, from the
    fit's own residual energies, shown in the model's summary.
features_ : FeatureLabels or None
    The feature dimension, labels and coordinates of the cube fitted on.
source_ : str
    The file a loaded model was read from (outputs record it).
sample_ : FitSample or None
    Which pixels of which cubes the model was fitted on.

See Also
--------
ppa_xr.cube.fit : the fit on a cube's sampled pixels (``cube.ppa.fit``).

Examples
--------
>>> from ppa_xr import PPA
>>> from ppa_xr.datasets import load_table
>>> X = load_table("Sat").data
>>> model = PPA(random_state=0).fit(X)
>>> model.transform(X).shape
(6435, 36)
"""


def available_memory() -> int | None:
    """Bytes the machine can give now: psutil's ``available`` where psutil is installed, else the free pages
    (``sysconf``, Linux); None where neither tells."""
    try:
        import psutil
    except ImportError:
        try:
            return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            return None
    return int(psutil.virtual_memory().available)


def _fitted_map(X: np.ndarray, declared: Spec, groups: Any, progress: bool, weights: np.ndarray | None,
                shrink: bool = True, drawn: np.ndarray | None = None) -> tuple[Any, dict]:
    """The fit of complete rows ``X`` (:func:`~ppa_xr.core.shrink.fit_selected`; ``shrink=False`` and ``drawn`` for gaps
    filled as it fitted), after the checks of its size and its parameters, with a progress bar where asked;
    floating-point failures as a ValueError saying what to do."""
    n, d = X.shape
    if d < 2:
        raise ValueError(f"PPA needs at least 2 features, got n_features = {d}.")
    _refuse_oversized(n, d, declared, groups, X.dtype.itemsize)
    declared.for_data(n, d)
    rng = checks.rng_of(declared.random_state)
    bar = _progress_bar(d - 1) if progress else None
    try:
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            return fit_selected(X, declared, groups, rng, (lambda done, total: bar.update(done - bar.n)) if bar is not None else None,
                                weights, shrink, drawn)
    except FloatingPointError as err:
        raise ValueError(f"numerical failure while fitting PPA ({err}); rescale the features (e.g. StandardScaler) or lower the degree") from err
    finally:
        if bar is not None:
            bar.close()


def _refuse_oversized(n: int, d: int, declared: Spec, groups: Any, itemsize: int) -> None:
    """Refuse, before it starts, a fit whose memory (:func:`~ppa_xr.core.ppa.fit_memory`) is more than the machine has,
    saying what to do instead (a fit with fewer samples than features runs in their span: ``PPA._fit_reduced``)."""
    n_groups = None if groups is None else len(np.unique(np.asarray(groups)))
    need, free = fit_memory(n, d, declared, n_groups, itemsize), available_memory()
    if free is None or need <= free:
        return
    rows = n if declared.selection_samples is None else min(n, declared.selection_samples)
    fewer = declared.replace(selection_samples=max(rows // 4, declared.min_samples))
    raise MemoryError(
        f"fitting PPA on {n} samples of {d} features would need about {need / 2**30:.3g} GiB beyond the data, and "
        f"{free / 2**30:.3g} GiB are available. Fewer selection rows need less (selection_samples={fewer.selection_samples}: "
        f"{fit_memory(n, d, fewer, n_groups, itemsize) / 2**30:.3g} GiB), a single degree less still (degree=1, PCA's cost: "
        f"{fit_memory(n, d, declared.replace(degree=1), n_groups, itemsize) / 2**30:.3g} GiB); else fit on fewer samples, or "
        "reduce the features first (e.g. PCA or EOFs). max_curved bounds the time of a fit at many features, not its memory"
    )


def _effective_size(n: int, weights: np.ndarray | None) -> float:
    """``n`` rows' effective size: ``n``, or Kish's ``(sum w)^2 / sum w^2`` with weights (``1 / weight_share``)."""
    return float(n) if weights is None else 1.0 / linalg.weight_share(weights, n)


def _complete(X: np.ndarray, groups: Any, weights: np.ndarray | None) -> tuple[np.ndarray, Any, np.ndarray | None]:
    """The rows without NaN or inf, their groups and weights: pixels without data, as a cube's invalid pixels,
    are left out of the fit, and a warning says how many (transform gives NaN for them)."""
    # a value not finite leaves its row's and its column's sum not finite: the sums along the memory's order, the faster
    # (row-major: the columns', 0.002 against 0.005 s at 20,000 x 425), and the rows one by one only where one is not
    along = 0 if X.flags.c_contiguous else 1
    bad = ~np.isfinite(X).all(axis=1) if not np.isfinite(X.sum(axis=along, dtype=np.float64)).all() else np.zeros(len(X), bool)
    if not bad.any():
        return X, groups, weights
    if bad.all():
        raise ValueError(f"every one of the {len(X)} rows of X has a NaN or inf; PPA needs complete rows, or fit(..., "
                         "missing='fill') to fill the gaps as it fits")
    warn_user(f"X has {int(bad.sum())} of {len(X)} rows with NaN or inf: PPA is fitted on the {int((~bad).sum())} complete "
              "rows (transform gives NaN for such rows)", UserWarning)
    return X[~bad], None if groups is None else np.asarray(groups)[~bad], None if weights is None else weights[~bad]


def _gaps_filled(X: np.ndarray, groups: Any, weights: np.ndarray | None, declared: Spec,
                 features: FeatureLabels | None = None) -> tuple[np.ndarray, Any, np.ndarray | None, bool | None, np.ndarray | None]:
    """``missing="fill"``: the rows with at least one observed value, their gaps filled by the EM-style loop of
    :func:`~ppa_xr.core.fill.fit_with_gaps` (each fit as the final one, without its progress bar), in ``X``'s dtype:
    for a linear map (degree 1, or the curves' fill worse) with the fill's posterior draw added, EM's
    ``E[x x^T | x_o] = x_hat x_hat^T + Sigma_mm|o`` (on the fill alone its outputs' variances were 2-10 standard errors
    low); for a curved map the fill itself on only those with the fewest gaps
    (:func:`~ppa_xr.core.fill.fewest_gaps`, what it is fitted on; a linear map is fitted on every row, EM-PCA's fixed
    point), their gaps refilled by the map they give
    (:func:`~ppa_xr.core.fill.refilled`); whether the curves' fill was worse beyond noise on
    observed values held out of the loop (then the rows are the linear phase's, the model is fitted linear, and a
    warning says so), None where no kept row had a gap (nothing was filled: the rows are fitted as ``missing="drop"``
    fits them); and the same rows with the fill's last posterior draw added (float64; None where nothing was filled),
    which the outputs' variances and marginals are read from (:func:`~ppa_xr.core.fill.with_drawn_outputs`)."""
    finite = np.isfinite(X)
    kept = finite.any(axis=1)
    if not kept.all():
        X, groups, weights = X[kept], None if groups is None else np.asarray(groups)[kept], None if weights is None else weights[kept]
        finite = finite[kept]
    if len(X) < 2 or not finite.any(axis=0).all():
        empty = [j for j in range(X.shape[1]) if not finite[:, j].any()] if len(X) else list(range(X.shape[1]))
        named = f" ({features.dim!r} {shown(features.labels[empty])})" if features is not None and features.labels is not None else ""
        raise ValueError(f"missing='fill' needs at least 2 rows with an observed value and every feature observed somewhere; "
                         f"{len(X)} rows have one, and features {empty}{named} are never observed: drop those features")
    if finite.all():
        return X, groups, weights, None, None
    rng_seed = declared.random_state

    def fit(filled: np.ndarray, linear: bool, groups: Any = groups, weights: np.ndarray | None = weights,
            drawn: np.ndarray | None = None) -> PPAParams:
        spec = declared.pca() if linear else declared
        with np.errstate(over="raise", invalid="raise", divide="raise"):
            return fit_selected(filled, spec, groups, checks.rng_of(rng_seed), None, weights, shrink=False, drawn=drawn)[0].params

    filled, drawn, _, check = fit_with_gaps(X, fit, checks.rng_of(rng_seed), weights)
    if check.worse:
        warn_user(f"missing='fill': on {check.count} observed values held out of the fit, the curves' fill has {check.ratio:.0%} of "
                  f"the squared error of the linear fill (+-{check.standard_error:.0%}): its curves do not carry over to the gaps "
                  "of these data, so the model is the linear one (degree=1), fitted on the linear fill", UserWarning)
    if max(declared.candidates) > 1 and not check.worse:
        X, filled, drawn, groups, weights = _fewest_gaps(finite, X, filled, drawn, groups, weights)
        filled, drawn = refilled(X, filled, drawn, lambda rows, draw: fit(rows, False, groups, weights, draw))
    else:  # a linear map: fitted on the drawn rows (EM's covariance)
        filled = drawn
    return filled.astype(X.dtype, copy=False), groups, weights, check.worse, drawn


def _fewest_gaps(finite: np.ndarray, X: np.ndarray, filled: np.ndarray, drawn: np.ndarray, groups: Any,
                 weights: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray, Any, np.ndarray | None]:
    """The rows (with their gaps), filled rows, drawn rows, groups and weights (at unit mean again) of the rows a curved
    map of a fit with gaps is fitted on (:func:`~ppa_xr.core.fill.fewest_gaps`)."""
    few = fewest_gaps(finite)
    if few.all():
        return X, filled, drawn, groups, weights
    return (X[few], filled[few], drawn[few], None if groups is None else np.asarray(groups)[few],
            None if weights is None else unit_mean(weights[few]))


def _check_groups(groups: Any, n: int) -> None:
    """Refuse ``groups`` that are not one label per sample, hold a missing label (NaN, None: all of them were one group,
    silently) or mix labels that do not sort (numpy's TypeError)."""
    if groups is None:
        return
    if np.shape(groups) != (n,):
        raise ValueError(f"groups must hold one label per sample, shape ({n},), got shape {np.shape(groups)}")
    labels = np.asarray(groups)
    kind = labels.dtype.kind
    missing = (np.isnan(labels) if kind in "fc" else np.isnat(labels) if kind in "mM" else  # only objects hold None or a NaN besides
               np.array([v is None or (isinstance(v, float) and v != v) for v in labels.tolist()], dtype=bool) if kind == "O" else None)
    if missing is not None and missing.any():
        raise ValueError(f"groups hold {int(missing.sum())} missing labels (NaN or None) of {n}: give those samples a group of "
                         "their own (e.g. np.where(np.isnan(groups), -1, groups)) or leave them out; they were held out as one group")
    try:
        if kind == "O":  # numbers or strings alone sort
            np.unique(labels)
    except TypeError as err:
        raise TypeError(f"groups must be labels of one kind that sort (ints or strings; got {kinds(labels)}): e.g. "
                        f"np.asarray(groups, dtype=str) ({err})") from err


def _weighed(X: np.ndarray, groups: Any, sample_weight: Any, declared: Spec) -> tuple[np.ndarray, Any, np.ndarray]:
    """The rows that weigh, their groups and weights (:func:`~ppa_xr.core.checks.row_weights`, the one check of
    weights, then :func:`~ppa_xr.core.linalg.unit_mean`, its one scaling): a row whose weight is 0, or below
    float64's smallest normal number (2.2e-308) beside a mean of 1, would add nothing to any sum, and is left out.
    PPA-GD is refused (its search weighs every row alike)."""
    if declared.leading != "pca":
        raise ValueError("sample_weight works with the PCA-led fit (leading='pca'): PPA-GD's search weighs every row alike")
    weights = unit_mean(checks.row_weights(sample_weight, len(X), "sample_weight"))
    kept = weights >= np.finfo(np.float64).tiny
    if (weighing := int(kept.sum())) < declared.min_samples:  # the spec's own refusal would count rows, not weights
        raise ValueError(f"only {weighing} of the {len(X)} samples have a weight above 0, and degree up to {max(declared.candidates)} "
                         f"needs at least {declared.min_samples}: give more samples a weight (a cube's fit: more pixels of "
                         "weight above 0, or a larger n_samples), or a lower degree")
    return X[kept], None if groups is None else np.asarray(groups)[kept], weights[kept]


def _feature_roots(X: np.ndarray, feature_weights: Any) -> tuple[np.ndarray, np.ndarray]:
    """``s_j = sqrt(w_j)`` of every feature (ones without weights: :func:`~ppa_xr.core.checks.row_weights`, the one check
    of weights) and the features used: weight above 0, and a finite value in some sample (a feature NaN in every
    sample, as a land cell of a sea-surface field, is left out)."""
    d = X.shape[1]
    w = np.ones(d) if feature_weights is None else checks.row_weights(feature_weights, d, "feature weights")
    used = (w >= np.finfo(np.float64).tiny) & np.isfinite(X).any(axis=0)
    if used.sum() < 2:
        raise ValueError(f"only {int(used.sum())} of the {d} features have a weight above 0 and a value in some sample: "
                         "PPA needs at least 2")
    return np.sqrt(np.where(used, w, 0.0)), used


def _patterns(params: PPAParams) -> np.ndarray:
    """The leading vectors as rows over the inputs: ``A`` itself, or ``A V^T`` for a reduced model (the EOFs'
    spatial patterns, in the weighted space; NaN on the features left out)."""
    if not params.reduced:
        return params.rotation
    patterns = params.rotation @ params.basis.T
    if params.used is not None:
        patterns[:, ~params.used] = np.nan
    return patterns


def _same(a: Any, b: Any) -> bool:
    """Whether two parameter values are the same: arrays (a noise covariance) by their values, anything else by ``==``
    (a Generator or a callable: the same object)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    return bool(a == b)


def _check_component_columns(X: Any, names: list[str], k: int) -> None:
    """Refuse a table of components (a pandas DataFrame of ``set_output(transform="pandas")``) whose columns named as
    the model names its outputs (``ppa0``, ``ppa1``, ...) are not the first ``k`` in order: the inverse reads its
    columns by position, so ``Z[["ppa1", "ppa0"]]`` would be inverted as components 1 and 2. Columns named otherwise
    are read by position."""
    columns = getattr(X, "columns", None)
    if columns is None or not any(isinstance(c, str) and c in names for c in columns):
        return
    given = list(columns)
    if given != names[:k]:
        raise ValueError(f"the components' columns are {shown(given)}, and inverse_transform reads the first {k} components "
                         f"in their order, {shown(names[:k])}: select them so, X[model.get_feature_names_out()[:{k}]] (a subset "
                         "other than the leading components, or another order, cannot be inverted)")


def _leading_components(X: Any) -> Any:
    """A DataArray of components (the accessor's ``component`` labels 1..k) as a table (samples, k), refused unless its
    labels are the leading components in order: the inverse reads them by position."""
    if not hasattr(X, "dims") or "component" not in X.dims:
        return X
    X = X.transpose(..., "component")
    if "component" in X.coords and (labels := X["component"].values.tolist()) != list(range(1, len(labels) + 1)):
        raise ValueError(f"the components are labelled {shown(labels)} along 'component', and inverse_transform reads the "
                         f"first {len(labels)} in their order, 1..{len(labels)}: select them so, "
                         f"scores.sel(component=slice(1, {len(labels)})) (a subset other than the leading components cannot be inverted)")
    return X


def _unmasked(X: Any) -> Any:
    """A numpy masked array with its masked entries as NaN (rows that are left out of a fit, NaN in a transform),
    as the mask means; anything else as it is."""
    if not np.ma.isMaskedArray(X):
        return X
    data = np.ma.getdata(X)
    return np.ma.filled(X.astype(data.dtype if data.dtype.kind == "f" else np.float64), np.nan)


def _table_features(X: Any) -> FeatureLabels | None:
    """The labels of a 2-D DataArray's features (its second dim: a stacked cube, ``(pixel, band)``), recorded as a
    cube's are, so later tables and cubes are matched by label; None for other tables (a DataFrame's columns are
    scikit-learn's ``feature_names_in_``) and for a DataArray without labels along that dim."""
    dims: tuple[Hashable, ...] = tuple(getattr(X, "dims", ()))
    if hasattr(X, "data_vars") or len(dims) != 2 or dims[1] not in getattr(X, "coords", {}):
        return None
    return FeatureLabels.of(X, dims[1])


def _warn_on_unnamed_columns(columns: Any) -> None:
    """Warn where a table's columns are labels none of which is a string (numbers such as wavelengths or years, a
    MultiIndex's tuples) other than a default ``0..d-1``: scikit-learn keeps no ``feature_names_in_`` for them, so a later
    table in another column order would go through by position, silently."""
    if columns is None or any(isinstance(c, str) for c in columns) or list(columns) == list(range(len(columns))):
        return
    warn_user(f"X's columns {shown([str(c) for c in columns])} are not strings, so no names are kept for them and later tables are "
              "read by position (another column order goes through unchecked): name them as strings, "
              "X.columns = X.columns.map(str), to have them checked by name", UserWarning)


def _real_numbers(X: Any) -> Any:
    """``X`` (a table of samples) unmasked (:func:`_unmasked`); complex numbers, dates and durations are refused, saying
    which numbers to give: scikit-learn's check took dates as their nanoseconds, silently."""
    dtype_kinds = {getattr(t, "kind", "f") for t in getattr(X, "dtypes", [getattr(X, "dtype", None)])}
    if "c" in dtype_kinds:  # scikit-learn's words, which its checks look for
        raise ValueError(f"Complex data not supported: X must hold real numbers; {checks.real_number_advice('c', 'X')}")
    if timed := sorted(dtype_kinds & set("mM")):  # "M" (dates) before "m" (durations)
        raise TypeError(f"X must hold real numbers, and it holds dates or durations: {checks.real_number_advice(timed[0], 'X')}")
    for column in _integer_columns(X) if dtype_kinds & set("iu") else ():  # beyond 2**53, float64 rounds their last digits
        checks.exact_in_float64(column, "X")
    return _unmasked(X)


def _integer_columns(X: Any) -> list[np.ndarray]:
    """The integers of a table: a DataFrame's integer columns (pandas' nullable ones too, their NA as 0), or the
    array itself."""
    if not hasattr(X, "select_dtypes"):
        return [np.asarray(X)]
    return [X[c].to_numpy(dtype=np.dtype(getattr(X[c].dtype, "numpy_dtype", X[c].dtype)), na_value=0)
            for c in X.select_dtypes("integer").columns]


def _scales_differ(std: np.ndarray) -> bool:
    std = std[std > 0]
    return len(std) > 1 and std.max() > SCALE_RATIO_WARNING * std.min()


def _warn_on_scales(std: np.ndarray, X: np.ndarray) -> None:
    """Warn where the standard deviations ``std`` of the features of ``X`` that vary differ by more than
    :data:`SCALE_RATIO_WARNING` (a constant feature's comes back from the eigendecomposition as rounding).
    Which features vary (a pass over ``X``) is read only where all of them together would warn."""
    if not _scales_differ(std):
        return
    std = std[np.ptp(X, axis=0) > 0]
    std = std[std > 0]
    if _scales_differ(std):
        warn_user(
            f"the features' standard deviations differ by {std.max() / std.min():.1e}: PPA, like PCA, then describes "
            "almost only the largest. If their units are not comparable (e.g. geopotential and wind), pass standardize=True "
            "(ppa-xr fit --standardize): each feature is divided by its standard deviation, and the inverse undoes it",
            UserWarning)


def _progress_bar(steps: int) -> Any:
    """A progress bar of the fit's steps: a widget in a notebook, a line on stderr elsewhere (``tqdm.auto``)."""
    from tqdm.auto import tqdm

    return tqdm(total=steps, desc="PPA fit", unit="step")


@shared
def load_model(path: str | os.PathLike, format: str | None = None) -> PPA:
    """Read a model written by :meth:`PPA.save` (same as :meth:`PPA.load`).

    {{model_file}}
    """
    return PPA.load(path, format)
