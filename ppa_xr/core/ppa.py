"""Fit PPA on an in-memory sample (paper section 2.2, PCA-based solution): ``d - 1`` steps, then their composition.

On the centred sample, for each step ``p`` on the residual ``X_{p-1}``:

1. ``e_p`` = leading vector of the residual (a strategy of
   :mod:`ppa_xr.core.leading`: PCA or PPA-GD);
2. the step's degree: fixed, or chosen by grouped cross-validation on the
   selection rows (:mod:`ppa_xr.core.degrees`);
3. the polynomial fitted on the whole sample and removed (:func:`ppa_xr.core.steps.fit_step`).

Steps are prepared in blocks (:func:`_block_leads`, :func:`_degree_choices`):
one GEMM gives the projections of up to :data:`MAX_BLOCK` next steps and one
pass their per-group Gram matrices; a block ends at its first curved step
(whose correction changes the residual) and the next one doubles while steps
stay straight. The covariance is carried forward by the steps, and recomputed
from the residual only when its trace has fallen by 1e6 (nearly collinear
features), where the update's rounding would be felt.

Because ``S_p`` is below (Loewner order) ``S_{p-1}`` with its top eigenvalue
removed, ``lambda_j(S_k) <= lambda_{j+k}(S_0)``: the training error after ``k``
steps, ``tr(S_k)``, is never above PCA's (paper Property 2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import scipy.linalg

from . import basis
from .degrees import Choice, CrossValidation, Folds, group_grams, select_degree
from .leading import LEADING_VECTORS, PCA, Strategy
from .linalg import oriented, pca_solution, power_of_two, reflect_columns
from .params import PPAParams
from .spec import Spec
from .steps import Designs, Residual, Step, fit_step, interlaced, leading_vector

#: most steps whose projections and Gram matrices one pass over the sample prepares
MAX_BLOCK = 32


def max_spread(d: int) -> float:
    """The largest deviation from the mean a fit of ``d`` features takes, ``sqrt(max float64 / (2 d))`` (1e153 at
    d = 10, 1e152 at d = 1000): the model's variances and errors are in the data's squared units, and their sums
    over the features, at most ``2 d`` times the squared power of two the fit scales by, must fit float64.
    A standardizing fit keeps them in standardized units and takes any scale."""
    return float(np.sqrt(np.finfo(np.float64).max / (2 * d)))


Progress = Callable[[int, int], None]


def fit_params(X: np.ndarray, spec: Spec, *, groups: np.ndarray | None = None, rng: np.random.Generator | None = None,
               progress: Progress | None = None) -> PPAParams:
    """Fit PPA on a finite float sample ``X`` (n x d) with the parameters of ``spec``.

    ``spec.standardize``: fit on ``D^-1 (x - mean)``, ``D`` the features'
    standard deviations (constant features keep 1); ``spec.noise_cov``: fit on
    the noise-whitened ``W (x - mean)`` (``ppa_xr.core.ppa.noise_whitening``), so
    components come ordered by signal-to-noise ratio (MNF with ``degree=1``).
    Both are a whitening ``W`` kept in the parameters (:meth:`PPAParams.with_whitening`).
    ``spec.robust``: each step's degree is validated axis by axis of its
    residual and its polynomial fitted within the projections'
    ``ppa_xr.core.basis.fences``. ``spec.max_curved``: after that many
    curved steps the rest is a plain rotation (no polynomial search).

    With several candidate degrees, ``groups`` (one label per row, e.g. the
    spatial block a pixel came from) are held out together in
    ``spec.n_folds``-fold cross-validation on at most ``spec.selection_samples``
    rows drawn at random; only a curved step's polynomial is then fitted on
    the whole sample, so a straight step costs no pass over it.

    Parameters
    ----------
    X : np.ndarray
        (n, d) finite samples.
    spec : Spec
        The parameters (checked, and checked against the data with :meth:`Spec.for_data`).
    groups : np.ndarray, optional
        (n,) labels held out together.
    rng : np.random.Generator, optional
        Folds and draws.
    progress : callable, optional
        ``progress(done, total)`` after each step.

    Returns
    -------
    PPAParams
        The fitted parameters.
    """
    n, d = X.shape
    rng = np.random.default_rng() if rng is None else rng
    rows = n if spec.selection_samples is None else spec.selection_samples
    folds, order = Folds.select(groups, n, spec.n_folds, rng, rows) if len(spec.candidates) > 1 else (None, None)
    start = _Start.of(X, order, spec)
    pca = pca_solution(start.cov)
    loop = _Loop(spec, _strategy(spec.leading).for_degree(max(spec.candidates)), folds, pca, start.Z, start.cov, progress)
    loop.run()
    return start.finish(_compose(start.mean, loop.steps, loop.frames, loop.res.cov[0, 0], spec.tails, pca))


def _strategy(leading: str | Callable[..., np.ndarray]) -> Strategy:
    return LEADING_VECTORS[leading] if isinstance(leading, str) else Strategy(leading)


@dataclass
class _Start:
    """The sample the steps start from, ``Z = W (X[order] - mean) / unit`` (n x d, float64), its covariance,
    and how to carry the fitted map back to the data's own units and whitening."""

    Z: np.ndarray
    cov: np.ndarray
    mean: np.ndarray  # the mean in the fit's units, W mean / unit
    unit: float | np.ndarray
    whitening: np.ndarray | None

    @classmethod
    def of(cls, X: np.ndarray, order: np.ndarray | None, spec: Spec) -> _Start:
        Z, mean, factor = _centred(X, order, per_feature=spec.standardize)
        n = len(Z)
        if spec.noise_cov is not None:  # W = Lambda^-1/2 U^T (noise in unit variance), then a power of two for O(1) values
            whitening = noise_whitening(spec.noise_cov)
            Z = Z @ (whitening * factor).T
            unit = _checked_spread(float(power_of_two(np.abs(Z).max())), len(mean), "in noise units (the noise far below the signal)")
            Z /= unit
            return cls(Z, Z.T @ Z / n, whitening @ mean / unit, unit, whitening)
        cov = Z.T @ Z / n
        if spec.standardize:  # W = D^-1: each feature's standard deviation D; a constant feature keeps 1
            std = np.sqrt(np.diag(cov))
            feature_scale = np.where(std > 0, std, 1 / factor)
            Z /= feature_scale
            whitening = np.diag(1 / (factor * feature_scale))
            return cls(Z, cov / np.outer(feature_scale, feature_scale), whitening @ mean, 1.0, whitening)
        return cls(Z, cov, mean / factor, _checked_spread(float(factor), len(mean), "(pass standardize=True, or divide the data by a constant)"), None)

    def finish(self, params: PPAParams) -> PPAParams:
        """The map fitted on ``Z`` as a map of the data itself."""
        scaled = params.scaled(self.unit)
        return scaled if self.whitening is None else scaled.with_whitening(self.whitening)


@dataclass
class _Loop:
    """The sequence of steps: blocks of leading vectors, each step's degree and fit, until ``d - 1`` are done."""

    spec: Spec
    strategy: Strategy
    folds: Folds | None
    pca: tuple[np.ndarray, np.ndarray]
    Z: np.ndarray
    cov: np.ndarray
    progress: Progress | None
    steps: list[Step] = field(default_factory=list)
    frames: list[np.ndarray] = field(default_factory=list)

    def __post_init__(self) -> None:
        n, d = self.Z.shape
        self.n, self.d = n, d
        self.res = Residual(self.Z, np.eye(d), self.cov, n if self.folds is None else int(self.folds.bounds[-1]))
        self.total = self.reference = np.trace(self.cov)  # the sample's energy; the reference is renewed at each recompute
        self.designs_of = Designs(self.spec.tails, 1e-12 * np.sqrt(max(self.reference, np.finfo(float).tiny)), self.spec.robust)
        self.n_curved, self.searching = 0, self.strategy.searches

    def run(self) -> None:
        size = 1
        while len(self.steps) < self.d - 1:
            curved = self._block(size)
            size = 1 if curved else min(2 * size, MAX_BLOCK)

    def _block(self, size: int) -> bool:
        """Fit the next block of steps (at most ``size``); whether it ended on a curved step."""
        capped = self.spec.max_curved is not None and self.n_curved >= self.spec.max_curved  # the rest is a plain rotation
        top = 1 if capped else max(self.spec.candidates)
        chooser = self.strategy
        if self.searching and not capped and np.trace(self.res.cov) > 1e-9 * self.total:
            leads = _validated_leads(self.res, self.strategy, top, self.folds, self.designs_of)
        else:  # below 1e-9 of the sample's energy a residual is float64 rounding: no direction worth searching
            chooser = PCA if self.strategy.searches else self.strategy
            leads = _block_leads(self.res, chooser, min(size, self.d - 1 - len(self.steps)), 1e-6 * self.reference)
        degree_of = self._choices(leads, top)
        for j in range(leads.shape[1]):
            frame = self.res.frame
            step, curved = self._step(chooser, leads[:, j], partial(degree_of, j), top)
            self.frames.append(frame)
            self.steps.append(step)
            if self.progress is not None:
                self.progress(len(self.steps), self.d - 1)
            self._renew_if_imprecise()
            if curved:
                self.n_curved += 1
                return True
        return False

    def _choices(self, leads: np.ndarray, top: int) -> Callable[[int, np.ndarray, np.ndarray], Choice | None]:
        return _degree_choices(self.res, leads, self.spec.candidates, top, self.folds, self.designs_of, self.spec.robust)

    def _step(self, chooser: Strategy, lead: np.ndarray, choose, top: int) -> tuple[Step, bool]:
        """One step along ``lead`` (input space). A direction that is not the PCA one must keep Property 2
        (:func:`interlaced`), else the step is PCA-led; a search goes on while it finds curves."""
        res = self.res
        if chooser.is_pca:
            return fit_step(res, res.frame.T @ lead, choose, self.designs_of, False)
        guard = partial(interlaced, pca_variance=self.pca[1], steps=len(self.steps) + 1)
        fitted = fit_step(res, res.frame.T @ lead, choose, self.designs_of, True, guard)
        if fitted is None:
            leads = _block_leads(res, PCA, 1, 0.0)
            fitted = fit_step(res, res.frame.T @ leads[:, 0], partial(self._choices(leads, top), 0), self.designs_of, False)
        self.searching = self.searching and fitted[1]
        return fitted

    def _renew_if_imprecise(self) -> None:
        """Recompute the covariance where the updates lost relative precision, and drop the removed
        directions from ``Z``, which would swamp the small ones."""
        res = self.res
        if np.trace(res.cov) < 1e-6 * self.reference:
            resid = res.sample()
            res.Z, res.cov = resid @ res.frame.T, resid.T @ resid / self.n
            self.reference = np.trace(res.cov)


def _block_leads(res: Residual, strategy: Strategy, size: int, floor: float) -> np.ndarray:
    """Leading vectors in input space (d x b, :func:`~ppa_xr.core.linalg.oriented`) of the next steps,
    assuming those before each are straight.

    For the PCA strategy they are the top eigenvectors of the residual
    covariance (a straight step leaves the others as they are), so up to
    ``size`` steps are prepared at once; the block ends where the remaining
    variance would fall below ``floor``, where the covariance is recomputed
    from the sample so small eigenvectors stay accurate. Any other strategy
    sees its residual step by step.
    """
    if strategy.is_pca:
        m = res.cov.shape[0]
        values, vectors = scipy.linalg.eigh(res.cov, subset_by_index=(m - size, m - 1), check_finite=False)
        remaining = np.trace(res.cov) - np.cumsum(values[::-1])
        vectors = vectors[:, ::-1][:, : 1 + int(np.argmax(remaining < floor)) if (remaining < floor).any() else size]
    else:
        vectors = leading_vector(strategy, res.cov, res.sample())[:, None]
    return oriented(res.frame @ vectors)


def _held_out_cost(resid: np.ndarray, e: np.ndarray, degree: int, folds: Folds, designs_of: Designs) -> float:
    """Cross-validated error of a step along ``e`` with a degree-``degree`` polynomial, ``sum ||X_i - B_i W||^2``
    over held-out groups, up to the same constant for every ``e`` (it regresses the whole residual on ``B``)."""
    designs, _, scales = designs_of((resid @ e)[None], degree)
    if scales[0] == 0:
        return np.inf
    gram, cross = group_grams(designs, resid, folds.bounds)
    return float(CrossValidation(gram[:, 0], cross[:, 0], np.eye(resid.shape[1]), folds).held_out(degree).sum())


def _validated_leads(res: Residual, strategy: Strategy, degree: int, folds: Folds | None, designs_of: Designs) -> np.ndarray:
    """A searched leading vector (PPA-GD), kept only where it beats the PCA one on held-out groups:
    the search maximises the fit on every row, so only held-out rows can vouch for it. Both run on the
    selection rows."""
    resid = res.selection @ res.frame
    searched = oriented(res.frame @ leading_vector(strategy, res.cov, resid)[:, None])
    if folds is None:
        return searched
    pca = _block_leads(res, PCA, 1, 0.0)
    costs = [_held_out_cost(resid, res.frame.T @ lead[:, 0], degree, folds, designs_of) for lead in (searched, pca)]
    return searched if costs[0] < costs[1] else pca


def _degree_choices(
    res: Residual, leads: np.ndarray, degrees: Sequence[int], top: int, folds: Folds | None, designs_of: Designs, per_axis: bool = False,
) -> Callable[[int, np.ndarray, np.ndarray], Choice | None]:
    """``(j, frame, cov) -> Choice`` of step ``j`` of a block along ``leads`` (d x b, input space), from the
    residual basis after the step and its covariance; None: a rotation.

    With candidates to choose from, one GEMM gives the block's projections on
    the selection rows and one pass their per-group Gram matrices (straight
    steps do not change ``Z``, so they hold for the whole block); with
    ``per_axis`` each step is judged along the principal axes of its residual
    (see :func:`~ppa_xr.core.degrees.select_degree`).
    """
    if top == 1:
        return lambda j, frame, cov: None
    if folds is None:
        return lambda j, frame, cov: Choice.every_axis(degrees[0], frame)
    designs, _, scales = designs_of(leads.T @ res.selection.T, top)
    gram, cross = group_grams(designs, res.selection, folds.bounds)

    def choose(j: int, frame: np.ndarray, cov: np.ndarray) -> Choice | None:
        if scales[j] == 0:
            return None
        axes = frame @ scipy.linalg.eigh(cov, check_finite=False)[1] if per_axis else frame
        return select_degree(CrossValidation(gram[:, j], cross[:, j], axes, folds), degrees, per_axis)

    return choose


def noise_whitening(noise_cov: np.ndarray) -> np.ndarray:
    """``W = Lambda^-1/2 U^T`` for the noise covariance ``N = U Lambda U^T``: ``W N W^T = I`` (MNF's first step).

    Refuses a covariance that is not symmetric positive definite (a band
    without noise, or fewer noise samples than bands, make it singular).
    """
    N = np.asarray(noise_cov, dtype=np.float64)
    if not np.allclose(N, N.T, rtol=1e-8, atol=1e-12 * np.abs(N).max()):
        raise ValueError("noise_cov must be symmetric (a covariance matrix)")
    values, vectors = np.linalg.eigh((N + N.T) / 2)
    if values.min() <= 1e-12 * values.max():
        raise ValueError(
            f"noise_cov is singular or not positive definite (eigenvalues {values.min():.3g} .. {values.max():.3g}): every "
            "band needs some noise; estimate it from more pixels, or add a small diagonal, e.g. N + 1e-6 * trace(N) / d * I"
        )
    return vectors.T / np.sqrt(values)[:, None]


def _checked_spread(unit: float, d: int, advice: str) -> float:
    """``unit``, the power of two near the sample's largest deviation, where the model's variances can hold its square
    (:func:`max_spread`)."""
    if unit > max_spread(d):
        raise ValueError(f"the sample deviates from its mean by about {unit:.1e}, beyond the {max_spread(d):.1e} whose square "
                         f"float64 can hold (summed over {d} features): the model's variances and errors would overflow {advice}")
    return unit


def _centred(X: np.ndarray, order: np.ndarray | None, per_feature: bool = False) -> tuple[np.ndarray, np.ndarray, float | np.ndarray]:
    """``Z = (X[order] - mean) / f``, a new float64 array, with ``mean`` and ``f``: a :func:`~ppa_xr.core.linalg.power_of_two`
    near the largest deviation, so the fit runs on O(1) values, exactly scaled (no under/overflow at 1e-200 or 1e200).
    ``per_feature`` (standardizing fits): one power of two per feature, so a feature at 1e-150 beside one
    at 1e150 keeps its values (their variances are computed apart)."""
    Z = np.array(X, dtype=np.float64) if order is None else np.take(X, order, axis=0).astype(np.float64, copy=False)
    mean = Z.mean(axis=0)
    Z -= mean
    factor = power_of_two(np.maximum(Z.max(axis=0), -Z.min(axis=0)) if per_feature else max(Z.max(), -Z.min()))
    Z *= 1 / factor
    return Z, mean, factor if per_feature else factor[()]


def _compose(mean: np.ndarray, steps: list[Step], frames: list[np.ndarray], last_variance: float, tails: str,
             pca: tuple[np.ndarray, np.ndarray]) -> PPAParams:
    """Compose the per-step rotations and polynomials into the kernels' matrices.

    Backwards over the steps, ``O_{p-1} = [e_p^T; O_p E_p^T]`` maps the residual
    before step ``p`` to the outputs ``r[p:]``; ``A = O_{-1}``. Each step keeps
    its own constant term (``forward_bias[p]``, ``inverse_bias[p]``), so a
    truncated inverse can leave out the steps it does not run.
    """
    d = mean.shape[0]
    gmax = max(max(s.degree for s in steps), 1)
    forward, inverse = np.zeros((2, d - 1, gmax, d))
    forward_bias, inverse_bias = np.zeros((2, d - 1, d))
    outputs = np.ones((1, 1))  # O_{d-2}
    for p in range(d - 2, -1, -1):
        step, frame = steps[p], frames[p]
        w = basis.legendre_to_power(len(step.w) - 1).T @ step.w  # Legendre -> monomial coefficients
        fw = w @ outputs.T  # W_p O_p^T: (g+1, d-p-1)
        forward_bias[p, p + 1:] = fw[0]
        forward[p, : len(w) - 1, p + 1:] = fw[1:]
        iw = reflect_columns(frame, step.u) @ w.T  # (E_0 ... E_p) W_p^T: (d, g+1)
        inverse_bias[p] = iw[:, 0]
        inverse[p, : len(w) - 1] = iw[:, 1:].T
        reflection = np.eye(d - p) - 2 * np.outer(step.u, step.u)
        outputs = np.vstack([step.e, outputs @ reflection[1:]])
    return PPAParams(
        mean=mean, rotation=outputs, degrees=np.array([s.degree for s in steps], dtype=np.int64),
        center=np.array([s.center for s in steps]), scale=np.array([s.scale for s in steps]),
        forward_bias=forward_bias, forward=forward, inverse_bias=inverse_bias, inverse=inverse,
        explained_variance=np.array([s.variance for s in steps] + [last_variance]),
        pca_rotation=pca[0], pca_variance=pca[1], tails=tails,
    )
