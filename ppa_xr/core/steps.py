"""One PPA step on the residual of the fit so far (paper section 2.2, PCA-based solution).

The residual ``X_{p-1}`` is held in an orthonormal basis of its subspace, ``frame`` (d x m, input
space), and every step goes along the frame's first axis: the fit first turns the frame so that this
axis is the step's leading vector ``e_p`` (the covariance's eigenbasis for the PCA direction, one
Householder reflection for any other). Then ``alpha = X_{p-1} e_p`` is the first coordinate, the
complement ``E_p`` is the other axes (the error does not depend on which complement, paper Property
1), the chosen polynomial ``Y ~ [1, P(alpha)] W_p`` is fitted by least squares on the whole sample,
and ``X_p = Y - [1, P(alpha)] W_p``.

The covariance is carried forward instead of recomputed, using that the
least-squares residual is orthogonal to the basis:
``S_p = E_p^T S_{p-1} E_p - W_p^T (B^T B / n) W_p``. In the eigenbasis a straight
step only drops the first row and column, so a run of straight PCA steps costs
one eigendecomposition, and nothing per step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import overload

import numpy as np

from . import basis, blas
from .degrees import Choice
from .leading import Strategy
from .linalg import (
    PANEL,
    eigenbasis,
    householder_complement,
    least_squares,
    orientation,
    reflect,
    rotate_rows,
)


@dataclass(frozen=True)
class Step:
    """One fitted step: its leading vector (input space) and, when curved, its Legendre coefficients
    ``W_p E_p^T`` ((g+1) x d, input space; None: straight) and their range."""

    lead: np.ndarray
    w: np.ndarray | None
    degree: int
    center: float
    scale: float
    variance: float

    @classmethod
    def straight(cls, lead: np.ndarray, variance: float) -> Step:
        """A plain rotation step."""
        return cls(lead, None, 1, 0.0, 1.0, variance)


def leading_vector(strategy: Strategy, cov: np.ndarray, resid: np.ndarray) -> np.ndarray:
    """The strategy's unit vector for the residual, checked: a callable given by the user may return anything."""
    e = np.asarray(strategy.find(cov, resid), dtype=np.float64)
    if e.shape != (cov.shape[0],) or not np.isfinite(e).all() or abs(np.linalg.norm(e) - 1) > 1e-8:
        raise ValueError(
            f"the leading-vector strategy must return a finite unit vector of length {cov.shape[0]}, got shape "
            f"{e.shape} with norm {np.linalg.norm(e) if e.size else 0:.6g}; normalise it (e / np.linalg.norm(e))"
        )
    return e


@dataclass
class Residual:
    """The residual of the fit so far, held in the sample's own array.

    ``Z`` (n x d) holds the selection rows (the first ``rows``, grouped
    contiguously) in the frame's coordinates, in its last ``m`` columns
    (:attr:`scores`), and the other rows in input space (:attr:`rest`, whose
    residual is ``rest @ frame``): the selection rows, which every step reads,
    stay O(m) wide, and a change of frame costs the others nothing. ``frame``
    (d x m) is an orthonormal basis of the residual's subspace and ``cov``
    (m x m) the covariance in it; ``principal``: the frame is the covariance's
    eigenbasis, variances descending (``cov`` diagonal). Memory: the sample, once.
    """

    Z: np.ndarray
    rows: int
    frame: np.ndarray
    cov: np.ndarray
    principal: bool = False

    @classmethod
    def start(cls, Z: np.ndarray, rows: int, values: np.ndarray, axes: np.ndarray) -> Residual:
        """The centred sample ``Z`` before the first step, in the eigenbasis ``axes`` of its covariance
        (columns, ``values`` descending); its selection rows are rotated in place."""
        rotate_rows(Z[:rows], axes)
        return cls(Z, rows, axes, np.diag(values), True)

    @property
    def n(self) -> int:
        return len(self.Z)

    @property
    def scores(self) -> np.ndarray:
        """The selection rows in the frame's coordinates (rows x m, a view)."""
        return self.Z[: self.rows, self.Z.shape[1] - self.frame.shape[1]:]

    @property
    def rest(self) -> np.ndarray:
        """The other rows, in input space (a view)."""
        return self.Z[self.rows:]

    def sample(self, first: int = 0) -> np.ndarray:
        """Every row's residual along the frame's axes from ``first`` on (n x (m - first)): a new
        Fortran-ordered array, which least squares can overwrite without a copy."""
        frame = self.frame[:, first:]
        out = np.empty((self.n, frame.shape[1]), order="F")
        out[: self.rows] = self.scores[:, first:]
        blas.matmul_into(self.rest, frame, out[self.rows:])
        return out

    def projections(self) -> np.ndarray:
        """Every row's coordinate along the frame's first axis, ``alpha`` (n,)."""
        return np.concatenate([self.scores[:, 0], self.rest @ self.frame[:, 0]])

    def cross(self, design: np.ndarray) -> np.ndarray:
        """``B^T Y`` (K x (m-1)) of a design ``B^T`` (K x n) on every row, ``Y`` the residual along the axes after the first."""
        rows = self.rows
        return design[:, :rows] @ self.scores[:, 1:] + (design[:, rows:] @ self.rest) @ self.frame[:, 1:]

    def to_principal_axes(self) -> None:
        """Turn the frame to the covariance's eigenbasis: ``S = V diag(lambda) V^T``, ``frame <- frame V``
        (each axis :func:`~ppa_xr.core.linalg.oriented` in input space), ``cov <- diag(lambda)``."""
        values, vectors = eigenbasis(self.cov)
        axes = self.frame @ vectors
        signs = orientation(axes)
        rotate_rows(self.scores, vectors * signs)
        self.frame, self.cov, self.principal = axes * signs, np.diag(values), True

    def turn(self, e: np.ndarray) -> None:
        """Turn the frame so that its first axis is the unit ``e`` (frame coordinates): ``Q = H D`` with the
        Householder reflection ``H e = -s 1_0`` (``s = sign(e_0)``) and ``D = diag(-s, 1, ..., 1)``, so ``Q 1_0 = e``."""
        u = householder_complement(e)
        flip = np.ones(len(e))
        flip[0] = -np.copysign(1.0, e[0])
        scores = self.scores
        blas.matmul_into((scores @ u)[:, None], 2 * u[None], scores, alpha=-1.0, beta=1.0)  # scores <- scores H, in place
        scores[:, 0] *= flip[0]
        cov = reflect(reflect(self.cov, u).T, u) * np.outer(flip, flip)
        self.frame, self.cov, self.principal = reflect(self.frame, u) * flip, (cov + cov.T) / 2, False

    def drop(self, k: int) -> None:
        """Drop the first ``k`` axes, along which straight steps went (in the eigenbasis the covariance left is
        the rest of the diagonal)."""
        self.frame, self.cov = self.frame[:, k:], self.cov[k:, k:]

    def advance(self, cov: np.ndarray, design: np.ndarray | None = None, w: np.ndarray | None = None) -> np.ndarray | None:
        """Drop the first axis (the step's), ``cov`` being the covariance left. A curved step's polynomial
        ``B W`` (``B^T`` the design, K x n; ``W`` K x (m-1) on the remaining axes) is removed from every
        row; returns ``W E^T`` (input space), None for a straight step."""
        self.frame, self.cov = self.frame[:, 1:], cov
        if w is None or design is None:
            return None
        rows, w_input = self.rows, w @ self.frame.T
        blas.matmul_into(design[:, :rows].T, w, self.scores, alpha=-1.0, beta=1.0)
        blas.matmul_into(design[:, rows:].T, w_input, self.rest, alpha=-1.0, beta=1.0)
        self.principal = False
        return w_input

    def renew(self, project: bool = True, threads: int = 1) -> None:
        """Recompute the covariance from the sample; with ``project``, also project the rest's rows on the
        residual subspace, ``rest <- rest F F^T``: the removed directions would swamp the small ones in
        the curves fitted later (a plain rotation needs only the covariance). The rest's panels of
        :data:`PANEL` rows on ``threads`` threads (:func:`~ppa_xr.core.blas.in_order`), their products added
        in panel order: the same covariance at any count."""
        rest, frame = self.rest, self.frame

        def panel(lo: int) -> np.ndarray:
            resid = rest[lo:lo + PANEL] @ frame
            if project:
                rest[lo:lo + PANEL] = resid @ frame.T
            return resid.T @ resid

        cov = self.scores.T @ self.scores
        for part in blas.in_order(panel, range(0, len(rest), PANEL), threads):
            cov += part
        self.cov, self.principal = cov / self.n, False


@dataclass(frozen=True, eq=False)
class Designs:
    """How a step's polynomial basis is laid on its projections: the kernels' tails, ``tiny``, the spread
    below which a projection counts as constant, whether the range is fenced (robust fits), and the square
    roots of the rows' weights (the residual's rows carry them: a weighted fit)."""

    tails: str
    tiny: float
    fenced: bool = False
    root: np.ndarray | None = None

    def __call__(self, alphas: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``[1, P_1(t), ..., P_top(t)]`` of each row of ``alphas`` (b x n) -> (b, top+1, n), with centres and scales.

        ``t`` maps the projections' range ``[min, max]`` (with ``fenced``, their
        ``ppa_xr.core.basis.fences``, except for raw polynomial tails) onto ``[-1, 1]``; beyond it the design has the
        kernels' tails, so the fitted map is the one the kernels apply. A
        projection without spread gets scale 0: a plain rotation step. In a
        weighted fit the projections of the rows as they are held (times
        ``root``) are divided by it first, and the design's columns (rows of
        the sample, the first ``n`` of them) multiplied by it after.
        """
        if self.root is not None:
            root = self.root[: alphas.shape[1]]
            designs, centers, scales = Designs(self.tails, self.tiny, self.fenced)(alphas / root, top)
            designs *= root
            return designs, centers, scales
        if self.tails == "polynomial" or not self.fenced:
            lo, hi = alphas.min(axis=1), alphas.max(axis=1)
        else:
            lo, hi = basis.fences(alphas)
        spread = hi - lo > 2 * self.tiny
        centers, scales = np.where(spread, (hi + lo) / 2, 0.0), np.where(spread, (hi - lo) / 2, 0.0)
        designs = np.empty((alphas.shape[0], top + 1, alphas.shape[1]))
        designs[:, 0] = 1
        designs[~spread, 1:] = 0  # no spread: a rotation step, whose (unused) Gram matrices must still be finite
        for j in np.flatnonzero(spread):
            t = alphas[j] - centers[j]
            t *= 1 / scales[j]
            basis.legendre_with_tails(t, top, self.tails, out=designs[j, 1:])
        return designs, centers, scales


Chooser = Callable[[np.ndarray], Choice | None]


@overload
def fit_step(res: Residual, choose: Chooser, designs_of: Designs, fit_linear: bool, guard: None = None,
             shrink: Callable[[np.ndarray], bool] | None = None) -> tuple[Step, bool]: ...
@overload
def fit_step(res: Residual, choose: Chooser, designs_of: Designs, fit_linear: bool, guard: Callable[[np.ndarray], bool],
             shrink: Callable[[np.ndarray], bool] | None = None) -> tuple[Step, bool] | None: ...
def fit_step(
    res: Residual, choose: Chooser, designs_of: Designs, fit_linear: bool, guard: Callable[[np.ndarray], bool] | None = None,
    shrink: Callable[[np.ndarray], bool] | None = None,
) -> tuple[Step, bool] | None:
    """One PPA step along the frame's first axis; updates ``res`` in place.

    ``choose(cov)`` gives the step's polynomial from the covariance of the
    residual after it (by cross-validation on the selection rows, or fixed);
    ``None`` is a plain rotation step, and so is degree 1 unless ``fit_linear``
    (a leading vector that is not an eigenvector leaves a linear trend). The
    polynomial is then fitted on the whole sample, on the axes the choice
    names (the others get its lowest degree). Where ``shrink`` is given, a
    curve fitted on every axis has each axis's coefficients scaled by their
    share of signal (:func:`signal_shares`), kept where ``shrink(cov)`` accepts
    the covariance that leaves (Property 2's check), else as least squares.
    Returns the step and whether it is curved; ``None``, with ``res``
    untouched, when ``guard(cov)`` refuses the residual covariance the step
    would leave.
    """
    variance = float(res.cov[0, 0])
    cov = res.cov[1:, 1:]
    choice = choose(cov)
    w, degree, center, scale, design = None, 1, 0.0, 1.0, None  # a straight step's (Step.straight)
    if choice is not None and (choice.degree > 1 or fit_linear):
        designs, centers, scales = designs_of(res.projections()[None], choice.degree)
        if scales[0] > 0:
            design = designs[0]
            gram = design @ design.T
            fitted, cross = _polynomial(res, design, gram, choice, fit_linear)
            removed = np.sum(fitted * (gram @ fitted))  # ||B W||^2, the residual energy the polynomial explains
            if removed > 1e-12 * np.trace(cov) * res.n:  # else numerically no curve (e.g. degree 1 on a PCA direction)
                degree, center, scale = choice.degree, float(centers[0]), float(scales[0])
                w, cov = _corrected(fitted, cov, cross / res.n, gram / res.n, choice, res.n, shrink)
    if guard is not None and not guard(cov):
        return None
    lead = res.frame[:, 0].copy()
    w_input = res.advance(cov, design, w)
    return Step(lead, w_input, degree, center, scale, variance), w is not None


def signal_shares(w: np.ndarray, cov: np.ndarray, gram: np.ndarray, n: int, degree: int) -> np.ndarray:
    """Each axis's share of signal in a least-squares curve ``B W`` of ``g = degree`` terms beyond the constant, from
    ``n`` rows: ``f_j = max(0, 1 - 1 / F_j)``, ``F_j = (Q_j / g) / ((n S_jj - Q_j) / (n - g - 1))`` the axis's
    F statistic, ``Q_j = n (W^T G W)_jj`` its explained sum of squares, ``S`` the covariance before the curve,
    ``G = B^T B / n``.

    Least squares on ``g`` terms takes ``g sigma_j^2`` of an axis's noise for signal
    (``E Q_j = ||B beta_j||^2 + g sigma_j^2``), and unseen rows pay it back: the
    scaled correction ``f_j B W_j`` estimates the one of least expected squared
    error (``||B beta_j||^2 / E Q_j``, plug-in; James and Stein). Axes the curve
    explains no better than noise (``F_j <= 1``: most of a hyperspectral scene's
    last components, fitted by a sparse tail of the projections) keep none of
    it; axes of real curvature keep nearly all (``F_j`` in the hundreds).

    Parameters
    ----------
    w : np.ndarray
        ((g+1) x m) the least-squares coefficients.
    cov : np.ndarray
        (m x m) the covariance of the axes before the curve.
    gram : np.ndarray
        ((g+1) x (g+1)) ``G``.
    n : int
        The rows.
    degree : int
        ``g``.

    Returns
    -------
    np.ndarray
        (m,) the shares ``f_j`` in ``[0, 1]`` (1 where the curve explains nothing of an axis).
    """
    explained = n * np.einsum("ij,ij->j", w, gram @ w)
    left = np.maximum(n * np.diagonal(cov) - explained, 0.0) / max(n - degree - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = 1 - degree * left / explained
    return np.where(explained > 0, np.clip(share, 0.0, 1.0), 1.0)


def _corrected(w: np.ndarray, cov: np.ndarray, cross: np.ndarray, gram: np.ndarray, choice: Choice, n: int,
               shrink: Callable[[np.ndarray], bool] | None) -> tuple[np.ndarray, np.ndarray]:
    """The curve's coefficients ``W`` and the covariance left after it (``C = B^T Y / n``, ``G = B^T B / n``): the
    least-squares ones, or, where ``shrink`` is given and the curve is fitted on every axis at one degree, each
    axis scaled by :func:`signal_shares` if ``shrink`` accepts the covariance that leaves."""
    def left(coef: np.ndarray, exact: bool) -> np.ndarray:
        out = cov - _explained(coef, cross, gram, exact=exact)
        return (out + out.T) / 2

    if shrink is not None and choice.axes is None and choice.degree > 1:
        scaled = w * signal_shares(w, cov, gram, n, choice.degree)
        shrunk = left(scaled, False)
        if shrink(shrunk):
            return scaled, shrunk
    return w, left(w, choice.axes is None)


def _polynomial(res: Residual, design: np.ndarray, gram: np.ndarray, choice: Choice, fit_linear: bool) -> tuple[np.ndarray, np.ndarray]:
    """``W`` (K x (m-1)) by least squares of the residual after the step on ``B``: on the choice's axes at its
    degree, on the others at its lowest degree where that is a curve (or ``fit_linear``); and ``C = B^T Y``."""
    cross = res.cross(design)
    fitted = np.zeros_like(cross)
    for degree, axes in choice.parts():
        if degree > 1 or fit_linear:
            k = degree + 1
            fitted[:k] += _on_axes(res, design[:k], gram[:k, :k], cross[:k], axes)
    return fitted, cross


def _explained(w: np.ndarray, cross: np.ndarray, gram: np.ndarray, exact: bool) -> np.ndarray:
    """The covariance the correction ``B W`` removes from the residual ``Y``, given ``C = B^T Y / n`` and
    ``G = B^T B / n``: ``(Y^T Y - (Y - B W)^T (Y - B W)) / n = C^T W + W^T C - W^T G W``. Where ``W`` is
    the least-squares fit of every axis on the whole design (``exact``), ``C^T W = W^T G W`` and it is
    ``W^T G W``; axes fitted on part of the design (a robust step's split) need the cross terms."""
    if exact:
        return w.T @ gram @ w
    shift = cross.T @ w
    return shift + shift.T - w.T @ gram @ w


def _on_axes(res: Residual, design: np.ndarray, gram: np.ndarray, cross: np.ndarray, axes: np.ndarray | None) -> np.ndarray:
    """Least squares of the residual after the step along ``axes`` (every axis where None), in its coordinates."""
    if axes is None:
        return least_squares(design.T, lambda: res.sample(1), gram, cross)
    return least_squares(design.T, lambda: np.asfortranarray(res.sample(1) @ axes), gram, cross @ axes) @ axes.T


def interlaced(cov: np.ndarray, pca_variance: np.ndarray, steps: int) -> bool:
    """Whether the residual covariance after ``steps`` steps satisfies ``lambda_j(S_k) <= lambda_{j+k}(S_0)``
    (up to rounding): the condition under which every later PCA-led step keeps the training error at or
    below PCA's at every ``k`` (paper Property 2); a PCA-led step always meets it."""
    values = np.linalg.eigvalsh(cov)[::-1]
    return bool(np.all(values <= pca_variance[steps:steps + len(values)] + 1e-9 * pca_variance.sum()))
