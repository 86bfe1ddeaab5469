"""The fitted state of PPA as plain arrays: what the kernels need, and what is saved.

Notation (0-based steps ``p = 0..d-2``): the output of the forward map is
``r = [alpha_0, ..., alpha_{d-2}, x_{d-2}]``. ``rotation`` is the orthogonal
``d x d`` matrix ``A`` whose rows are the leading vectors expressed in input
space (docs/method.md). The polynomial part of step ``p`` (monomials ``t^1..t^g`` of the
scaled projection ``t = (alpha_p - center_p) / scale_p`` with the chosen tails,
the constant being folded into the biases) enters

* the forward map as ``r[p+1:] -= forward_bias[p, p+1:] + T(alpha_p) @ forward[p, :g, p+1:]``,
* the inverse map as ``x += inverse_bias[p] + T(alpha_p) @ inverse[p, :g, :]``,

with ``forward[p] = W_p O_p^T`` (``O_p`` the composed later rotations) and
``inverse[p] = W_p (E_0 ... E_p)^T``. Coefficient rows beyond a step's degree
are zero. The constant terms stay per step, so a reconstruction from ``k``
components runs exactly the first ``k`` inverse steps.

``pca_rotation`` and ``pca_variance`` are the PCA solution of the same
fitting sample (:meth:`~ppa_xr.core.PPAParams.pca`), the like-for-like baseline.

``whitening`` (``W``, the identity unless the model standardizes or
whitens the noise) acts on the centred input before the map: every array
above describes the map of ``z = W (x - mean)``, so ``r = PPA(z)`` and
``x = mean + W^-1 PPA^-1(r)``. Standardizing is ``W = D^-1`` (``D`` the
features' standard deviations), noise whitening ``W = Lambda^-1/2 U^T`` from
the noise covariance ``N = U Lambda U^T``. The kernels fold ``W`` into their
first and last GEMM; errors and variances are then in whitened units, and
``log2 |det dr/dx| = log2 |det W|``.

A reduced model (S-mode: fewer samples than features, or weights on the
features) maps ``d`` inputs through an ``r x d`` whitening ``W = V^T S``:
``V`` (``basis``, ``d x r``, orthonormal columns) spans the centred fitting
sample, ``S = diag(s)`` (``feature_root``, ``s_j = sqrt(w_j)``) weighs the
features; every other array lives in the ``r`` dimensions of the map
(:attr:`PPAParams.n_features`), the mean in the ``d`` of the inputs
(:attr:`PPAParams.n_inputs`). Back in input units ``x - mean = S^-1 V z``;
a feature of weight 0 (``s_j = 0``: dropped, e.g. NaN at every sample) is
ignored on the way in and NaN on the way out. A new point's part outside the
span, ``||S (x - mean) - V V^T S (x - mean)||^2``, adds to every
reconstruction error (:meth:`PPAParams.outside_error`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .basis import TAILS


ARRAYS = ("mean", "rotation", "degrees", "center", "scale", "forward_bias", "forward", "inverse_bias", "inverse",
          "explained_variance", "pca_rotation", "pca_variance", "whitening")
#: the arrays of a reduced model only (module docstring)
REDUCTION = ("basis", "feature_root")
#: the outputs' marginal densities, where the fit recorded them (``ppa_xr.core.fill.with_marginals``)
MARGINAL = ("marginal", "marginal_range")


@dataclass(frozen=True, eq=False)
class PPAParams:
    """Fitted parameters of a PPA map on ``d`` features.

    Parameters
    ----------
    mean, rotation, degrees, center, scale, forward_bias, forward, inverse_bias, inverse : np.ndarray
        The map (module docstring, shapes in the field comments).
    explained_variance : np.ndarray
        (d,) variance of each output on the fitting sample.
    pca_rotation, pca_variance : np.ndarray
        The PCA of the same sample, the baseline.
    whitening : np.ndarray, optional
        (d, d) ``W``; None is the identity (``V^T S`` for a reduced model).
    basis, feature_root : np.ndarray, optional
        A reduced model's ``V`` (d, r) and ``s`` (d,) (module docstring).
    tails : {"clamp", "linear", "polynomial"}
        The polynomials' behaviour beyond the fitted range.
    marginal, marginal_range : np.ndarray, optional
        (d, B) each output's log density on the fitting sample less its Gaussian's, ``log f_p(r) + r^2 / (2 Lambda_p)``
        up to a constant, at ``B`` points evenly spaced over ``marginal_range[p]`` (d, 2), constant beyond (Gaussian
        tails); a row of zeros is a Gaussian output. None: every output Gaussian (``ppa_xr.core.fill``).
    """

    mean: np.ndarray  # (d,)
    rotation: np.ndarray  # (d, d), rows are the leading vectors A
    degrees: np.ndarray  # (d-1,) int
    center: np.ndarray  # (d-1,)
    scale: np.ndarray  # (d-1,)
    forward_bias: np.ndarray  # (d-1, d) per step: r = A (x - mean) - sum_p forward_bias[p] - corrections
    forward: np.ndarray  # (d-1, gmax, d)
    inverse_bias: np.ndarray  # (d-1, d) per step: x = mean + A^T r + sum_p inverse_bias[p] + corrections
    inverse: np.ndarray  # (d-1, gmax, d)
    explained_variance: np.ndarray  # (d,) variance of each output on the fitting sample
    pca_rotation: np.ndarray  # (d, d) principal axes of the fitting sample, rows
    pca_variance: np.ndarray  # (d,) their variances
    whitening: np.ndarray = None  # type: ignore[assignment]  # (d, d) W: the map acts on W (x - mean); None becomes the identity
    tails: str = "clamp"
    basis: np.ndarray = None  # type: ignore[assignment]  # (d, r) V: orthonormal span of the weighted, centred fitting sample (reduced models)
    feature_root: np.ndarray = None  # type: ignore[assignment]  # (d,) s = sqrt(w_j) of the features' weights; 0: a dropped feature (reduced models)
    marginal: np.ndarray = None  # type: ignore[assignment]  # (d, B) each output's log density less its Gaussian's (None: Gaussian)
    marginal_range: np.ndarray = None  # type: ignore[assignment]  # (d, 2) the interval of its B points
    _cache: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.tails not in TAILS:
            raise ValueError(f"tails must be one of {TAILS}, got {self.tails!r}")
        if (self.basis is None) != (self.feature_root is None):
            raise ValueError("a reduced model needs both its basis and its feature_root")
        if (self.marginal is None) != (self.marginal_range is None):
            raise ValueError("the outputs' marginal densities need both marginal and marginal_range")
        if self.whitening is None:
            reduced = self.basis is not None
            object.__setattr__(self, "whitening", (self.basis.T * self.feature_root).astype(self.mean.dtype) if reduced
                               else np.eye(self.mean.shape[0], dtype=self.mean.dtype))

    def cached(self, key: Hashable, make: Callable[[], Any]) -> Any:
        """``make()``, computed once per ``key`` and kept with these parameters (derived arrays, kernel
        plans; never pickled)."""
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    @property
    def whitened(self) -> bool:
        """Whether ``W`` is other than the identity (a standardizing or noise-whitening model)."""
        return bool(self.cached("whitened", lambda: self.reduced or not np.array_equal(self.whitening, np.eye(self.n_features))))

    @property
    def reduced(self) -> bool:
        """Whether the map acts in a subspace of the inputs, ``W = V^T S`` (module docstring)."""
        return self.basis is not None

    @property
    def s_mode(self) -> bool:
        """Whether the map's span is narrower than its used inputs: fitted on fewer samples than features (S-mode)."""
        return self.reduced and self.basis.shape[1] < int((self.feature_root > 0).sum())

    @property
    def used(self) -> np.ndarray | None:
        """(d,) the inputs a reduced model reads (weight above 0); None: every input."""
        return None if self.feature_root is None or (self.feature_root > 0).all() else self.feature_root > 0

    def inputs(self, x: np.ndarray) -> np.ndarray:
        """``x`` with the dropped inputs of a reduced model set to the mean (their NaN would reach every output
        through the GEMM, though ``W`` ignores them); ``x`` itself otherwise."""
        used = self.used
        return x if used is None else np.where(used, x, self.mean.astype(np.asarray(x).dtype))

    def outside_error(self, x: np.ndarray) -> np.ndarray | None:
        """``||u - V V^T u||^2``, ``u = S (x - mean)``: the squared error of the part of ``x`` (..., d) outside the span of
        a reduced model's fitting sample, which no number of components rebuilds (fit units); None where the span
        holds every input (a model that is not reduced, or reduced to every used feature)."""
        if not self.s_mode:
            return None
        u = (self.inputs(x) - self.mean) * self.feature_root
        u = u - (u @ self.basis) @ self.basis.T
        return np.einsum("...j,...j->...", u, u)

    @property
    def feature_scale(self) -> np.ndarray | None:
        """``D`` where ``W = D^-1`` is diagonal (a standardizing model's standard deviations; ones without
        whitening), None for a noise whitening that mixes features."""
        if self.reduced:
            return None
        off_diagonal = self.whitening - np.diag(np.diag(self.whitening))
        return None if np.count_nonzero(off_diagonal) else 1 / np.diag(self.whitening)

    def input_rotation(self, rows: int | None = None) -> np.ndarray:
        """The first ``rows`` rows of ``A W``: the linear part of the forward map on raw inputs."""
        return self.cached("input_rotation", lambda: self.rotation @ self.whitening if self.whitened else self.rotation)[:rows]

    def unwhitening(self) -> np.ndarray:
        """``W^-1``: whitened coordinates back to input units (``x - mean = W^-1 z``); ``S^-1 V`` (d x r) for a reduced
        model (0 on its dropped inputs)."""
        return self.cached("unwhitening", self._unwhitening)

    def _unwhitening(self) -> np.ndarray:
        if self.reduced:
            root = self.feature_root
            return self.basis * np.divide(1.0, root, out=np.zeros_like(root), where=root > 0)[:, None]
        return np.linalg.inv(self.whitening) if self.whitened else self.whitening

    def to_fit_space(self, x: np.ndarray) -> np.ndarray:
        """``z = W (x - mean)`` of points ``x`` (..., d): the space the map, its errors and variances live in
        (no product where ``W`` is the identity)."""
        centred = self.inputs(x) - self.mean
        return centred @ self.whitening.T if self.whitened else centred

    def log2_det_jacobian(self) -> float:
        """``log2 |det dr/dx| = log2 |det W|`` (0: volume preserving unless standardized or noise-whitened; NaN for a
        reduced model, whose map is not square)."""
        if self.reduced:
            return float("nan")
        return float(np.linalg.slogdet(self.whitening)[1] / np.log(2)) if self.whitened else 0.0

    @property
    def digest(self) -> str:
        """The first 16 hex digits of SHA-256 over :meth:`arrays`' bytes in order: which parameters an output came from
        (computed once; the arrays are not changed after the fit)."""
        return self.cached("digest", lambda: hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in self.arrays().values())).hexdigest()[:16])

    def __getstate__(self) -> dict:
        """Pickled (e.g. into a dask graph) without the derived, cached arrays."""
        return {**self.__dict__, "_cache": {}}

    @property
    def n_features(self) -> int:
        """The map's width ``r``: its components (the inputs' ``d`` unless reduced)."""
        return self.rotation.shape[0]

    @property
    def n_inputs(self) -> int:
        """The inputs' width ``d``."""
        return self.mean.shape[0]

    def arrays(self) -> dict[str, np.ndarray]:
        """The parameters as a name -> array mapping (for saving; a reduced model's ``basis`` and ``feature_root``, and the
        outputs' marginal densities where recorded, too)."""
        return {name: getattr(self, name) for name in ARRAYS + (REDUCTION if self.reduced else ()) + (MARGINAL if self.marginal is not None else ())}

    def in_subspace(self, mean: np.ndarray, basis: np.ndarray, feature_root: np.ndarray) -> PPAParams:
        """This map, fitted on ``z = V^T S (x - mean)`` (with its own mean ``m_z``), as a reduced map of ``x``: the mean
        becomes ``mean + S^-1 V m_z``, so that ``W (x - mean') = z - m_z`` (module docstring)."""
        root = np.asarray(feature_root, dtype=np.float64)
        inverse_root = np.divide(1.0, root, out=np.zeros_like(root), where=root > 0)
        arrays = self.arrays() | {"mean": mean + inverse_root * (basis @ self.mean), "whitening": None}
        return PPAParams(**arrays, tails=self.tails, basis=np.asarray(basis, np.float64), feature_root=root)

    def in_span(self) -> PPAParams:
        """A reduced map as the square map of its span coordinates ``z = W (x - mean) = V^T S (x - mean)``
        (:meth:`to_fit_space`; in S-mode the fitting sample's EOF scores): the same arrays with mean 0 and no whitening, so
        ``|det dr/dz| = 1``. A map that is not reduced is returned as it is."""
        if not self.reduced:
            return self
        return self.cached("in_span", lambda: PPAParams(
            **{name: getattr(self, name) for name in ARRAYS} | {"mean": np.zeros(self.n_features, self.mean.dtype), "whitening": None},
            tails=self.tails))

    def curved_steps(self) -> list[int]:
        """Steps with a polynomial; the others are exact rotations and cost the kernels nothing."""
        rows = self.written_steps()
        return self.cached("curved_steps", lambda: np.flatnonzero(_nonzero_rows(self.forward, rows) | _nonzero_rows(self.forward_bias, rows)).tolist())

    def written_steps(self, steps: Sequence[int] | np.ndarray | None = None) -> np.ndarray | None:
        """The steps outside which ``forward_bias``, ``forward``, ``inverse_bias`` and ``inverse`` hold only zeros, where
        known: ``steps`` (recorded by whoever wrote them, as a fit's composition does, or a map derived from these) on the
        first call; None where not recorded. The rows of no other step are read then (a fit of straight steps reads
        none: its pages of zeros stay unread)."""
        if steps is not None:
            self.cached("written_steps", lambda: np.asarray(steps, np.int64))
        return self._cache.get("written_steps")

    def pca(self) -> PPAParams:
        """The PCA map of the same fitting sample, as PPA parameters with no polynomial."""
        return self.cached("pca", self._pca)

    def _pca(self) -> PPAParams:
        d = self.n_features
        return PPAParams(
            mean=self.mean, rotation=self.pca_rotation, degrees=np.ones(d - 1, np.int64), center=np.zeros(d - 1),
            scale=np.ones(d - 1), forward_bias=np.zeros((d - 1, d)), forward=np.zeros((d - 1, 1, d)),
            inverse_bias=np.zeros((d - 1, d)), inverse=np.zeros((d - 1, 1, d)), explained_variance=self.pca_variance,
            pca_rotation=self.pca_rotation, pca_variance=self.pca_variance, whitening=self.whitening, tails=self.tails,
            basis=self.basis, feature_root=self.feature_root,
        ).cast(self.mean.dtype)

    def scaled(self, factor: float) -> PPAParams:
        """The map of data multiplied by ``factor``: lengths scale by it, variances by its square.

        The polynomials act on the scale-free ``t = (alpha - c) / s``, so rotations and degrees stay.
        """
        arrays, written = self.arrays(), self.written_steps()
        for name in ("mean", "center"):
            arrays[name] = arrays[name] * factor
        for name in ("forward_bias", "forward", "inverse_bias", "inverse"):  # per step; a straight step's rows are 0
            arrays[name] = _rows_scaled(arrays[name], factor, written)
        curved = np.isin(np.arange(self.n_features - 1), self.curved_steps())
        arrays["scale"] = np.where(curved, self.scale * factor, self.scale)  # straight steps have no polynomial to scale
        for name in ("explained_variance", "pca_variance"):
            arrays[name] = arrays[name] * factor * factor  # not factor**2, which overflows for factor 2^600 when the product does not
        if self.marginal is not None:  # the densities' points are lengths; log f_p + r^2 / (2 Lambda_p) keeps its values
            arrays["marginal_range"] = self.marginal_range * factor
        out = PPAParams(**arrays, tails=self.tails)
        out.written_steps(written)  # scaling writes no other rows
        return out

    def with_whitening(self, whitening: np.ndarray) -> PPAParams:
        """The map of ``W (x - mean)`` fitted on whitened data ``W x`` (whose mean is ``W mean``), as parameters on raw ``x``."""
        whitening = np.asarray(whitening, dtype=float)
        arrays = self.arrays() | {"mean": np.linalg.solve(whitening, self.mean), "whitening": whitening}
        return PPAParams(**arrays, tails=self.tails)

    def cast(self, dtype: np.dtype) -> PPAParams:
        """The same parameters in ``dtype`` (cached), so float32 chunks stay float32."""
        dtype = np.dtype(dtype)
        if dtype == self.mean.dtype:
            return self
        return self.cached(dtype, lambda: PPAParams(
            **{k: (v if k == "degrees" else v.astype(dtype)) for k, v in self.arrays().items()}, tails=self.tails))


def _nonzero_rows(a: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Whether each step's row of ``a`` (an array of per-step rows) is not all 0, (len(a),) bool; with ``rows``, only
    those are read (the others are known to be 0: :meth:`PPAParams.written_steps`)."""
    if rows is None:
        return np.asarray(a.reshape(len(a), -1).any(axis=1))
    out = np.zeros(len(a), bool)
    out[rows] = a[rows].reshape(len(rows), a[0].size).any(axis=1)
    return out


def _rows_scaled(a: np.ndarray, factor: float, rows: np.ndarray | None = None) -> np.ndarray:
    """``a * factor`` for an array of per-step rows, computed on the rows that are not all 0 (the curved steps'):
    the others stay 0, and a fit of straight steps (``degree=1``) writes no ``(d-1) d`` products; with ``rows``
    (:func:`_nonzero_rows`), no other row is read either."""
    used = _nonzero_rows(a, rows)
    out = np.zeros(a.shape, a.dtype)  # pages of zeros, not written
    out[used] = a[used] * factor
    return out
