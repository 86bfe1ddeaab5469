"""The PPA estimator: scikit-learn's contract around the numpy core."""

from __future__ import annotations

import numbers
import os
import warnings
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator, ClassNamePrefixFeaturesOutMixin, TransformerMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from . import display, evaluation, model_io
from .core import blas, fitting, kernels
from .core.basis import TAILS
from .core.params import PPAParams
from .labels import FeatureLabels
from .pixels import FitSample

#: rows of the fitting sample the stored error curve against PCA (``fit_error_ratio_``) is measured on
SUMMARY_ROWS = 20_000
#: the highest polynomial degree accepted: the float64 round trip stays below
#: 1e-12 relative up to about 15 and reaches 1e-6 at 30 (Legendre fit, monomial kernels)
MAX_DEGREE = 20


class PPA(ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator):
    """Principal Polynomial Analysis (Laparra et al., 2014).

    ``d-1`` sequential shears: at step ``p`` the residual is projected on a
    leading vector, ``alpha_p = e_p^T x_{p-1}``, and a polynomial prediction of
    the orthogonal part is removed, ``x_p = E_p^T x_{p-1} - W_p v(alpha_p)``.
    The output is ``r = [alpha_1, ..., alpha_{d-1}, x_{d-1}]``. The map is
    invertible in closed form and volume preserving (``|det J| = 1``);
    ``degree=1`` is PCA.

    Parameters
    ----------
    n_components : int, optional
        Components returned by :meth:`transform` (default: all ``d``).
    degree : int or sequence of int
        A fixed polynomial degree for every step (1..20), or
        candidates from which each step picks one by cross-validation: the
        sample is split into ``n_folds`` folds of whole groups (``groups`` in
        :meth:`fit`, e.g. spatial blocks; random otherwise), and a higher
        degree than the lowest candidate is kept only when it lowers the
        held-out squared error by more than one standard error (groups as units).
        The selection uses at most ``selection_samples`` rows, drawn at random
        from a larger sample; the chosen polynomials are fitted on every row.
    tails : {"clamp", "linear", "polynomial"}
        The conditional mean beyond the projections seen in fit: held at its
        boundary value, continued along its tangent, or the raw polynomial
        (the paper; explodes far from the data).
    leading : {"pca", "gd"} or callable
        How each step's leading vector is found: ``"pca"`` (the leading
        eigenvector of the residual), ``"gd"`` (PPA-GD: gradient ascent on the
        sphere of the energy the step's polynomial explains, never worse than
        ``"pca"``), or a callable ``(covariance, residual) -> unit vector``
        (m x m, n x m).
    n_folds : int
        Folds of the degree selection (at most the number of groups).
    max_curved : int, optional
        At most this many steps get a polynomial; after them the fit is the
        PCA of the residual (no polynomial search), which makes fits at
        hundreds of bands fast where the curvature sits in the first steps.
    selection_samples : int or None
        Rows the degree selection cross-validates on, drawn at random (with
        their groups) from a larger sample; ``None``: every row. Straight
        steps then cost no pass over the whole sample; more rows resolve
        fainter curves at a fit cost that grows with them.
    standardize : bool
        Divide each centred feature by its standard deviation on the fitting
        sample before the map (stored in the model as ``scale_``, undone by
        the inverse), for features in units of very different size, e.g.
        geopotential beside wind. Components, variances and reconstruction
        errors are then in standardized units (squared errors divided by each
        feature's variance), reconstructions in input units; the map's
        Jacobian gains ``D^-1``, which the information measures account for.
    noise_cov : array-like of shape (d, d), optional
        The noise covariance of the features (from a dark frame, a uniform
        area, or shift differences: ``cube.ppa.fit(noise="shift")``,
        :func:`ppa_xr.noise.shift_difference_covariance`). The map then acts
        on the noise-whitened ``W (x - mean)`` (``W N W^T = I``), so
        components come ordered by signal-to-noise ratio (``snr_``):
        ``degree=1`` is the minimum noise fraction transform (MNF, Green et
        al. 1988), curved degrees a noise-adjusted PPA. Errors and variances
        are in noise units; the inverse returns input units. Not combined
        with ``standardize`` (noise whitening already scales every direction).
    robust : bool
        For hundreds of bands and scenes with heavy tails or anomalous pixels:
        each step's degree is validated separately along every principal axis
        of its residual (a curve predicts only the axes where it wins on
        held-out groups, at a significance shared among the axes), and its
        polynomial is fitted within Tukey's far-out fences of the projections
        (beyond them the tails apply, so a few extreme pixels cannot lever
        it). On 200-band synthetic scenes and abu-beach-4 it keeps every k
        within 100-101% of PCA on unseen pixels; on skewed low-dimensional
        tables (Pageblocks) it gives up part of the gain. See docs/fidelity.md.
    validation : {"groups", "transfer"}
        What the degree selection holds out together: the ``groups`` given
        to :meth:`fit` (a cube's spatial blocks; random rows otherwise), or
        ``"transfer"``: regimes of the data (k-means clusters of its first
        principal scores), so a curve is kept only where it predicts a regime
        it was not fitted on. The conservative choice for models applied to
        scenes unlike the fitting sample: on spatial splits it stays within
        about 2% of PCA, at the cost of most of the gain where curves do
        transfer (docs/fidelity.md).
    whiten : bool
        :meth:`transform` divides each component by its standard deviation
        on the fitting sample (and :meth:`inverse_transform` multiplies it
        back): Euclidean distances between whitened PPA features are the PPA
        metric (:func:`ppa_xr.geometry.metric`) to first order, so k-NN in a
        Pipeline uses it. Cube transforms (``.ppa``) stay in input units.
    random_state : int, Generator or None
        Seeds the folds.

    Attributes
    ----------
    mean_, degrees_ (d-1 ints), components_ (the ``d x d`` rotation ``A``,
    rows = leading vectors in input space), explained_variance_ (each
    output's variance on the fitting sample, dividing by ``n``: the
    quantity the reconstruction errors and Property 2 are stated in;
    scikit-learn's PCA divides by ``n - 1``, larger by ``n / (n - 1)``),
    explained_variance_ratio_, n_features_in_, params_ (the kernels' arrays),
    pca_ (PCA of the same fitting sample, the like-for-like baseline),
    scale_ (the features' standard deviations with ``standardize=True``, ones
    without whitening, None with ``noise_cov``), whitening_ (``W``, d x d: the
    map acts on ``W (x - mean)``), noise_cov_ and snr_ (with ``noise_cov``:
    each component's signal-to-noise ratio, ``explained_variance_ - 1``, to
    first order for curved steps; descending).
    """

    _parameter_constraints: dict = {
        "n_components": [Interval(numbers.Integral, 1, None, closed="left"), None],
        "degree": [Interval(numbers.Integral, 1, MAX_DEGREE, closed="both"), "array-like"],
        "tails": [StrOptions(set(TAILS))],
        "leading": [StrOptions(set(fitting.LEADING_VECTORS)), callable],
        "n_folds": [Interval(numbers.Integral, 2, None, closed="left")],
        "whiten": ["boolean"],
        "standardize": ["boolean"],
        "robust": ["boolean"],
        "noise_cov": ["array-like", None],
        "validation": [StrOptions(set(fitting.VALIDATIONS))],
        "max_curved": [Interval(numbers.Integral, 0, None, closed="left"), None],
        "selection_samples": [Interval(numbers.Integral, 2, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_components: int | None = None,
        degree: int | Sequence[int] = (1, 2, 3, 4, 5),
        tails: str = "clamp",
        leading: str | Callable = "pca",
        n_folds: int = 5,
        max_curved: int | None = None,
        selection_samples: int | None = fitting.SELECTION_ROWS,
        whiten: bool = False,
        standardize: bool = False,
        robust: bool = False,
        noise_cov: np.ndarray | None = None,
        validation: str = "groups",
        random_state: int | np.random.Generator | None = None,
    ) -> None:
        self.n_components = n_components
        self.degree = degree
        self.tails = tails
        self.leading = leading
        self.n_folds = n_folds
        self.max_curved = max_curved
        self.selection_samples = selection_samples
        self.whiten = whiten
        self.standardize = standardize
        self.robust = robust
        self.noise_cov = noise_cov
        self.validation = validation
        self.random_state = random_state

    def _candidate_degrees(self) -> list[int]:
        degrees = [self.degree] if isinstance(self.degree, numbers.Integral) else list(self.degree)
        if not degrees or any(not isinstance(g, numbers.Integral) or not 1 <= g <= MAX_DEGREE for g in degrees):
            raise ValueError(f"degree must be an int in [1, {MAX_DEGREE}] or a non-empty sequence of them, got {self.degree!r}")
        return fitting.candidate_degrees(degrees)

    def check_params(self, n_features: int | None = None) -> list[int]:
        """Check every parameter without fitting (before a pass over a cube, or on load), with the
        shapes that depend on ``n_features`` when given; returns the candidate degrees.

        Raises ValueError (scikit-learn's ``InvalidParameterError`` included) naming the parameter.
        """
        self._validate_params()
        if self.standardize and self.noise_cov is not None:
            raise ValueError("pass standardize=True or noise_cov, not both: noise whitening already puts every direction in noise units")
        if n_features is not None:
            if self.n_components is not None:
                kernels.check_components(self.n_components, n_features)
            self._noise_cov(n_features)
        return self._candidate_degrees()

    def _noise_cov(self, n_features: int) -> np.ndarray | None:
        if self.noise_cov is None:
            return None
        N = np.asarray(self.noise_cov, dtype=np.float64)
        if N.shape != (n_features, n_features):
            raise ValueError(f"noise_cov must be ({n_features}, {n_features}) for {n_features} features, got shape {N.shape}")
        return N

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None, groups=None, features: FeatureLabels | None = None, sample: FitSample | None = None,
            progress: bool = False) -> PPA:
        """Fit the PPA map on ``X`` (n_samples x n_features); rows with NaN/inf are refused.

        ``groups`` (n_samples,) labels samples that must be held out together
        when degrees are selected, e.g. the spatial block of each pixel (see
        :func:`ppa_xr.cube.fitting.fit`, which passes them): correlated
        neighbours then cannot vouch for a curve that does not transfer.
        ``features`` names the features in a cube (kept as ``features_``);
        ``sample`` records which pixels of it ``X`` is (kept as ``sample_``, a
        :class:`~ppa_xr.pixels.FitSample`, one entry per cube), so reports can hold them out.
        The fit runs on the data divided by a power of two near its spread,
        so tiny or huge units fit as well as unit ones. ``progress=True``
        shows a progress bar of the steps (``tqdm.auto``: a widget in a notebook, stderr elsewhere).
        """
        X = validate_data(self, X, dtype=[np.float64, np.float32], ensure_all_finite=False, ensure_min_samples=2)
        bad = ~np.isfinite(X).all(axis=1)
        if bad.any():
            raise ValueError(
                f"X has {int(bad.sum())} of {len(X)} rows with NaN or inf; PPA needs complete rows. "
                "Drop them first, e.g. X = X[np.isfinite(X).all(axis=1)]."
            )
        n, d = X.shape
        if d < 2:
            raise ValueError(f"PPA needs at least 2 features, got n_features = {d}.")
        degrees = self.check_params(d)
        if n < fitting.min_samples(degrees):
            raise ValueError(
                f"degree up to {max(degrees)} needs at least {fitting.min_samples(degrees)} samples "
                f"({'every training part of the cross-validation determines' if len(degrees) > 1 else 'to determine'} "
                f"each polynomial), got {n}; pass more samples or a lower degree."
            )
        if len(degrees) > 1 and self.selection_samples is not None and self.selection_samples < fitting.min_samples(degrees):
            raise ValueError(
                f"selection_samples={self.selection_samples} cannot select among degrees up to {max(degrees)}: "
                f"pass at least {fitting.min_samples(degrees)} (or None for every sample)"
            )
        if groups is not None and np.shape(groups) != (n,):
            raise ValueError(f"groups must hold one label per sample, shape ({n},), got shape {np.shape(groups)}")
        rng = np.random.default_rng(check_random_state(self.random_state).randint(2**32))
        bar = _progress_bar(d - 1) if progress else None
        try:
            # BLAS on one thread: as fast on a quiet machine (0.83 against 0.75 s at 200,000 x 36) and
            # stable under load, where the default threads doubled the fit time (docs/performance.md)
            with np.errstate(over="raise", invalid="raise", divide="raise"), blas.every_blas_on_one_thread():
                params = fitting.fit_params(
                    X, degrees, tails=self.tails, leading=self.leading, n_folds=self.n_folds, groups=groups, rng=rng,
                    progress=(lambda done, total: bar.update(done - bar.n)) if bar is not None else None, max_curved=self.max_curved,
                    selection_rows=n if self.selection_samples is None else self.selection_samples, standardize=self.standardize,
                    robust=self.robust, transfer=self.validation == "transfer", noise_cov=self._noise_cov(d),
                )
        except FloatingPointError as err:
            raise ValueError(
                f"numerical failure while fitting PPA ({err}); rescale the features (e.g. StandardScaler) or lower the degree"
            ) from err
        finally:
            if bar is not None:
                bar.close()
        if not (self.standardize or self.noise_cov is not None):  # the features' standard deviations, from R^T diag(lambda) R
            _warn_on_scales(np.sqrt(params.pca_variance @ params.pca_rotation**2))
        self.params_ = params
        self.features_, self.sample_ = features, sample
        self._set_fitted(self.params_)
        rows = X if n <= SUMMARY_ROWS else X[rng.choice(n, SUMMARY_ROWS, replace=False)]
        self.fit_error_ratio_ = evaluation.relative_error_curve(self, rows)
        return self

    def _set_fitted(self, params: PPAParams) -> None:
        self.mean_ = params.mean
        self.whitening_ = params.whitening
        self.scale_ = params.feature_scale
        if self.noise_cov is not None:
            self.noise_cov_ = np.asarray(self.noise_cov, dtype=np.float64)
            self.snr_ = params.explained_variance - 1
        self.components_ = params.rotation
        self.degrees_ = params.degrees
        self.explained_variance_ = params.explained_variance
        total = params.explained_variance.sum()
        self.explained_variance_ratio_ = params.explained_variance / total if total > 0 else np.zeros_like(params.explained_variance)
        self.n_features_in_ = params.n_features
        self.n_components_ = self.n_components or params.n_features
        self._n_features_out = self.n_components_  # names "ppa0", "ppa1", ... for set_output

    @classmethod
    def from_params(cls, params: PPAParams, features: FeatureLabels | None = None, sample: FitSample | None = None, **init_params) -> PPA:
        """A fitted estimator around existing parameters (e.g. loaded from disk), its parameters validated."""
        model = cls(**init_params)
        allowed = set(model.check_params(params.n_features)) | {1}
        if not set(params.degrees.tolist()) <= allowed:
            raise ValueError(f"the fitted degrees {sorted(set(params.degrees.tolist()))} are not among the candidates {sorted(allowed)}")
        if params.tails != model.tails:
            raise ValueError(f"the fitted tails {params.tails!r} disagree with the parameter tails={model.tails!r}")
        model.params_ = params
        model.features_, model.sample_ = features, sample
        model._set_fitted(params)
        return model

    def to_xarray(self):
        """The fitted results as labelled xarray objects (an ``xr.Dataset``), as xeofs users expect.

        Returns
        -------
        xr.Dataset
            ``components`` (component x feature: the leading vectors, rows of
            ``components_``) with the feature labels and coordinates of the cube
            the model was fitted on, ``explained_variance`` and
            ``explained_variance_ratio`` (component), ``snr`` (component, with
            ``noise_cov``) and ``degree`` (step: the polynomial degree of each
            step; 1 is straight). ``components`` are in whitened units for a
            standardizing or noise-whitening model (``whitened_units_``).

        Examples
        --------
        >>> model.to_xarray().explained_variance_ratio.sel(component=slice(1, 3))  # doctest: +SKIP
        """
        import xarray as xr

        check_is_fitted(self)
        d = self.n_features_in_
        features = self.features_ or FeatureLabels("feature")
        component = {"component": np.arange(1, d + 1)}
        ds = xr.Dataset(
            {
                "components": (("component", features.dim), self.components_, {"long_name": "leading vectors in input space (rows of A)"}),
                "explained_variance": ("component", self.explained_variance_, {"long_name": "variance of each component on the fitting sample"}),
                "explained_variance_ratio": ("component", self.explained_variance_ratio_, {"long_name": "share of the total variance"}),
                "degree": ("step", self.degrees_, {"long_name": "polynomial degree of each step (1: straight)"}),
            },
            coords=component | {"step": np.arange(1, d)},
        )
        if self.noise_cov is not None:
            ds["snr"] = ("component", self.snr_, {"long_name": "signal-to-noise ratio of each component"})
        return ds.assign(components=features.attach(ds["components"]))

    def to_dataset(self):
        """The fitted model as an ``xr.Dataset``: its arrays (with checksums), labels, parameters and provenance."""
        check_is_fitted(self)
        return model_io.to_dataset(self.params_, self.get_params(), self.features_, self.sample_)

    @classmethod
    def from_dataset(cls, ds, source: str = "dataset") -> PPA:
        """The model of :meth:`to_dataset`, every array and parameter checked; a damaged one raises ValueError."""
        params, init, features, sample = model_io.from_dataset(ds, cls._get_param_names(), source)
        try:
            return cls.from_params(params, features, sample, **init)
        except ValueError as err:  # sklearn's InvalidParameterError included
            raise ValueError(f"{source} is corrupt: {err}") from err

    def save(self, path: str | os.PathLike, format: str | None = None, overwrite: bool = False) -> Path:
        """Save as data: netCDF (``.nc``) or zarr (``.zarr``), written atomically.

        An existing path is replaced only when it holds a ppa_xr model and
        ``overwrite=True``; anything else there is never touched (a model
        store holding other files is refused). Concurrent saves and loads of
        one path take turns on a hidden lock file beside it
        (``.<name>.lock``): the last save wins whole.
        """
        return model_io.write(self.to_dataset(), path, format, overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike, format: str | None = None) -> PPA:
        """Read a model written by :meth:`save`; a corrupt, truncated or foreign file raises ValueError naming it."""
        return cls.from_dataset(model_io.read(path, format), source=str(path))

    @property
    def feature_dim_(self) -> Hashable | None:
        """The cube dimension the model's features lie along (None when fitted on a plain array)."""
        return self.features_.dim if self.features_ else None

    @property
    def feature_labels_(self) -> np.ndarray | None:
        """The labels of the features along :attr:`feature_dim_`, in fitted order."""
        return self.features_.labels if self.features_ else None

    @property
    def feature_coords_(self) -> dict[str, np.ndarray]:
        """Other per-feature coordinates (e.g. wavelengths)."""
        return self.features_.coords if self.features_ else {}

    @property
    def whitened_units_(self) -> str | None:
        """What components, variances and errors are measured in when not the input's units:
        ``"standardized units"`` (``standardize=True``), ``"noise units"`` (``noise_cov``), else None."""
        check_is_fitted(self)
        return "standardized units" if self.standardize else "noise units" if self.noise_cov is not None else None

    @property
    def pca_(self) -> PPA:
        """PCA of the same fitting sample (a fitted ``PPA(degree=1)``): the like-for-like baseline."""
        check_is_fitted(self)
        pca = PPA.from_params(self.params_.pca(), self.features_, self.sample_, n_components=self.n_components, degree=1, tails=self.tails,
                              standardize=self.standardize, noise_cov=self.noise_cov)
        if hasattr(self, "feature_names_in_"):
            pca.feature_names_in_ = self.feature_names_in_
        return pca

    def check_input(self, X) -> np.ndarray:
        """``X`` as the fitted model takes it: 2-D, the fitted number of features, float32 or float64
        (other numbers as float64); rows with NaN or inf are kept (every map gives them NaN)."""
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=[np.float64, np.float32], ensure_all_finite=False)  # NaN / inf rows give NaN

    def transform(self, X) -> np.ndarray:
        """PPA coordinates (n_samples x n_components); rows with NaN or inf give NaN (as on cubes)."""
        X = self.check_input(X)
        R = kernels.forward(X, self.params_, self.n_components_)
        return R / self._spread(R.shape[1], R.dtype) if self.whiten else R

    def _spread(self, k: int, dtype) -> np.ndarray:
        return np.sqrt(np.maximum(self.explained_variance_[:k], np.finfo(float).tiny)).astype(dtype)

    def inverse_transform(self, X) -> np.ndarray:
        """Back to input space from the ``k <= d`` leading components.

        With ``k < d`` this is the ``k``-component reconstruction: the residual
        after step ``k`` is set to its mean (zero) and only the first ``k``
        inverse steps run, so ``inverse_transform(transform(X)[:, :k])`` is
        never further from ``X`` than PCA's reconstruction on the fitting sample.
        """
        check_is_fitted(self)
        R = np.asarray(X)
        if R.ndim != 2:
            raise ValueError(f"expected a 2-D array (n_samples, k), got shape {R.shape}; reshape it first.")
        kernels.check_components(R.shape[1], self.n_features_in_, "the number of components per row")
        if R.dtype.kind not in "iuf":
            raise TypeError(f"components must be real numbers, got dtype {R.dtype}")
        if R.dtype.kind != "f":
            R = R.astype(np.float64)
        return kernels.inverse(R * self._spread(R.shape[1], R.dtype) if self.whiten else R, self.params_)

    def jacobian(self, X) -> np.ndarray:
        """Analytic Jacobian ``dr/dx`` (n_samples x d x d); ``|det| = 1`` (``prod 1 / scale_`` with ``standardize=True``)."""
        return kernels.jacobian(self.check_input(X), self.params_)

    def reconstruct(self, X, n_components: int) -> np.ndarray:
        """Reconstruction of ``X`` from its first ``n_components`` PPA components (see :meth:`inverse_transform`)."""
        return kernels.reconstruct(self.check_input(X), self.params_, n_components)

    def reconstruction_mse(self, X) -> np.ndarray:
        """Reconstruction error keeping ``k = 1..d`` components -> (d,), in squared input units.

        Entry ``k-1`` is the mean over samples of the squared error summed over
        features, ``mean_i sum_j (x_ij - x^_ij)^2`` (divide by ``d`` for the
        mean per feature); with ``standardize=True`` each feature's squared
        error is divided by its variance, ``scale_**2``. All ``d`` values come
        from one forward pass.
        """
        X = self.check_input(X)
        return np.mean(kernels.error_curve(X, self.params_), axis=0)

    def __repr__(self, N_CHAR_MAX: int = 700) -> str:
        """scikit-learn's repr of the parameters, and for a fitted model its summary (:mod:`ppa_xr.display`)."""
        text = super().__repr__(N_CHAR_MAX)
        return f"{text}\n{display.text(self)}" if hasattr(self, "params_") else text

    def _html_repr(self) -> str:
        """In a notebook: the fitted model's summary above scikit-learn's parameter widget."""
        widget = super()._html_repr()
        return display.html_table(self) + widget if hasattr(self, "params_") else widget

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


#: features whose standard deviations differ by more than this make PPA (and PCA) describe only the largest
SCALE_RATIO_WARNING = 1e3


def _warn_on_scales(std: np.ndarray) -> None:
    std = std[std > 0]
    if len(std) > 1 and std.max() > SCALE_RATIO_WARNING * std.min():
        warnings.warn(
            f"the features' standard deviations differ by {std.max() / std.min():.1e}: PPA, like PCA, then describes "
            "almost only the largest. If their units are not comparable (e.g. geopotential and wind), pass standardize=True "
            "(ppa-xr fit --standardize): each feature is divided by its standard deviation, and the inverse undoes it",
            UserWarning, stacklevel=4,  # the caller of fit, past scikit-learn's fit wrapper
        )


def _progress_bar(steps: int):
    """A progress bar of the fit's steps: a widget in a notebook, a line on stderr elsewhere (``tqdm.auto``)."""
    from tqdm.auto import tqdm

    return tqdm(total=steps, desc="PPA fit", unit="step")


def load_model(path: str | os.PathLike, format: str | None = None) -> PPA:
    """Read a model written by :meth:`PPA.save` (same as :meth:`PPA.load`).

    Parameters
    ----------
    path : str or os.PathLike
        A ``.nc`` or ``.zarr`` model written by :meth:`PPA.save`.
    format : {"netcdf", "zarr"}, optional
        When the suffix does not say.

    Returns
    -------
    PPA
        The fitted model, every array checked against its checksum.

    Raises
    ------
    ValueError
        A corrupt, truncated, foreign or newer-format file, named.
    """
    return PPA.load(path, format)
