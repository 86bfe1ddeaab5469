"""Fit PPA on an in-memory sample (paper section 2.2, PCA-based solution): ``d - 1`` steps, then their composition.

On the centred sample, for each step ``p`` on the residual ``X_{p-1}``:

1. ``e_p`` = leading vector of the residual (a strategy of
   :mod:`ppa_xr.core.leading`: PCA or PPA-GD);
2. the step's degree: fixed, or chosen by grouped cross-validation on the
   selection rows (:mod:`ppa_xr.core.degrees`);
3. the polynomial fitted on the whole sample and removed (:func:`ppa_xr.core.steps.fit_step`).

The residual is held in an orthonormal basis of its subspace, turned to the
covariance's eigenbasis (one eigendecomposition, ``O(m^3)``) at the start and
after each curved step: a straight step does not change the remaining
eigenvectors, so a run of straight PCA steps needs no other, and each of its
steps only drops an axis. Steps are prepared in blocks (:func:`_degree_choices`):
the block's projections are the selection rows' first coordinates, and one
pass gives their per-group Gram matrices; a block ends at its first curved
step (whose correction changes the residual) and the next one doubles while
steps stay straight. The covariance is carried forward by the steps, and
recomputed from the residual only when its trace has fallen by 1e6 (nearly
collinear features), where the update's rounding would be felt.

Cost, ``n`` rows, ``d`` features, ``r`` selection rows, ``K - 1`` the highest
candidate degree, ``c`` curved steps: the covariance ``O(n d^2)``, the
eigendecompositions ``O((c + 1) d^3)``, the rotations of the selection rows
``O((c + 1) r d^2)``, the degree selection ``O(K r d^2 / 2)``; memory: the sample
once (``n d``) and ``O(d^2)``. ``degree=1`` is one eigendecomposition and no
pass over the sample beyond the covariance: PCA's cost.

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

from . import basis, blas, checks, compiled, errors
from .degrees import (
    PSEUDO_GROUPS,
    Choice,
    CrossValidation,
    Folds,
    group_grams,
    select_degree,
)
from .leading import LEADING_VECTORS, Strategy, pca_leading_vector
from .linalg import eigenbasis, orientation, oriented, power_of_two, spread_about, unit_mean
from .params import PPAParams
from .spec import Spec
from .steps import Designs, Residual, Step, fit_step, interlaced, leading_vector

#: most steps whose Gram matrices one pass over the selection rows prepares
MAX_BLOCK = 32
#: the covariance's multiply-adds (``n d^2``) from which it takes the caller's threads (:func:`~ppa_xr.core.blas.product_threads`):
#: about 3 ms on one thread; below, setting the threads would cost more than they save
THREADED_WORK = 2**26


def max_spread(d: int) -> float:
    """The largest deviation from the mean a fit of ``d`` features takes, ``sqrt(max float64 / (2 d))`` (1e153 at
    d = 10, 1e152 at d = 1000): the model's variances and errors are in the data's squared units, and their sums
    over the features, at most ``2 d`` times the squared power of two the fit scales by, must fit float64.
    A standardizing fit keeps them in standardized units and takes any scale."""
    return float(np.sqrt(np.finfo(np.float64).max / (2 * d)))


Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class Fit:
    """A fitted map and its training error curve against its PCA, ``100 e_PPA(k) / e_PCA(k)`` for
    ``k = 1..d-1`` on every row of the fitting sample (:func:`ppa_xr.core.errors.training_ratio`)."""

    params: PPAParams
    error_ratio: np.ndarray
    #: with ``carry``: the sample's covariance, then after each curved step the residual's (:class:`Carried`); empty
    #: where they would hold more than ``carry`` values
    carried: tuple[Carried, ...] = ()


@dataclass(frozen=True)
class Carried:
    """The residual covariance a fit carries after a curved step: ``cov`` (m x m) along the ``frame`` (d x m, an
    orthonormal basis of the fit space's residual subspace; None: the fit space's own axes, before the first
    step), ``cov = frame^T (sum w z z^T / n) frame`` for the sample's residuals ``z`` (zero mean: every step's
    least squares has a constant; ``w`` the weights at mean 1); ``reference``, the trace of the covariance last
    computed from the rows, which its downdates' rounding scales with; ``unit``, the fit space's length in the
    parameters' units (:meth:`_Start.finish`: outputs ``r = unit A z``). ``values``: where given, the ``frame`` is
    the covariance's eigenbasis, ``cov = diag(values)`` (descending): the eigendecomposition the fit made to turn to
    its next axes, which the validation's truncations read as their PCA instead of making it again."""

    frame: np.ndarray | None
    cov: np.ndarray
    reference: float
    unit: float
    values: np.ndarray | None = None


def fit(X: np.ndarray, spec: Spec, *, groups: np.ndarray | None = None, rng: np.random.Generator | None = None,
        progress: Progress | None = None, weights: np.ndarray | None = None, begun: Begun | None = None,
        shrink_outputs: bool = False, carry: int = 0) -> Fit:
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

    ``weights`` (n,, positive) weigh the rows as repeated rows would
    (scikit-learn's ``sample_weight``; a cube's area weights): the mean, the
    covariances and every least-squares fit and held-out error are weighted,
    the fit running on the rows times ``sqrt(w)`` (its designs laid on the
    unscaled projections, then scaled alike). Robust fences are the
    projections' unweighted quartiles.

    Every BLAS is held at one thread meanwhile (the steps' many small products
    would only wait for threads), except the sample's covariance, one large
    product, which runs at the caller's threads where the fit runs in the
    process's main thread and the machine's load leaves cores idle
    (:func:`~ppa_xr.core.blas.product_threads`); there the centring's copy and
    the covariance's recomputes from the rows run on as many Python threads
    too, a block of rows each. The fit's rounding does not depend on the
    thread count: the threaded product splits its output among the threads,
    not its sums, the blocks' sums are added in order, and the
    eigendecompositions stay on one thread (LAPACK's ``syevd`` on two BLAS
    threads rounds differently: 1e-16 .. 1e-8 in the eigenvectors at d = 100 .. 1,000).

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
        ``progress(done, total)`` as steps are done (a plain rotation's at once).
    weights : np.ndarray, optional
        (n,) positive weights of the rows.
    begun : Begun, optional
        The start (:func:`begin`) of these rows, groups, weights and draws, with a ``spec`` that differs from
        this one at most in ``robust`` and ``max_curved``: the fit starts from it, ``rng`` unused.
    shrink_outputs : bool
        Each curve fitted on every axis keeps of each axis's least-squares correction its share of signal
        (:func:`~ppa_xr.core.steps.signal_shares`), where the residual left still interlaces the sample's
        PCA variances (Property 2); the validated default's final fit.
    carry : int
        Keep the residual covariance after each curved step (:attr:`Fit.carried`; the whole-fit validation's
        training moments), where their copies hold at most this many values (none kept beyond, nor where 0).

    Returns
    -------
    Fit
        The fitted parameters and the training error curve.
    """
    threads = blas.product_threads() if begun is None else 1  # read before the fit holds one thread
    # one thread: as fast on a quiet machine (0.83 against 0.75 s at 200,000 x 36) and stable under load, where
    # the default threads doubled the fit time and took PCA() from 0.1 to 0.4-11 s (docs/performance.md)
    with blas.every_blas_on_one_thread():
        if begun is None:
            begun = begin(X, spec, groups=groups, rng=np.random.default_rng() if rng is None else rng, weights=weights, threads=threads)
        return _fit(begun, spec, progress, threads, shrink_outputs, carry)


@dataclass
class Begun:
    """What a fit makes before its first step, and the steps do not change: the selection rows' folds, the
    rows' ``order`` and square-root weights, the start (:class:`_Start`), the eigendecomposition of its
    covariance, and the sample ``Z`` it made, until a fit takes it. Fits of the same rows ``X`` that differ
    only in their steps' options (``robust``, ``max_curved``) share it (the plain and robust half-size fits
    of the whole-fit validation): the first takes ``Z``, a later one, once the first is done, makes it again without
    its covariance, into the same array (``spare``: its memory already mapped, no page faults of a fresh array)."""

    X: np.ndarray
    spec: Spec
    folds: Folds | None
    order: np.ndarray | None
    root: np.ndarray | None
    start: _Start
    values: np.ndarray
    vectors: np.ndarray
    Z: np.ndarray | None
    spare: np.ndarray | None = None

    def sample(self) -> np.ndarray:
        """The sample for a fit, which overwrites it: the one the start made, then the same made again in its array
        (a fit takes it after the last fit of this start is done)."""
        Z, self.Z = self.Z, None
        if Z is None:
            return self.start.sample(self.X, self.order, self.spec, self.root, self.spare)
        self.spare = Z
        return Z


def begin(X: np.ndarray, spec: Spec, *, groups: np.ndarray | None, rng: np.random.Generator, weights: np.ndarray | None,
          threads: int = 1) -> Begun:
    """The start of :func:`fit` (``O(n d^2)``: the centring, the covariance and its eigendecomposition), which
    ``fit(..., begun=...)`` takes for any ``spec`` differing at most in ``robust`` and ``max_curved``.

    Parameters
    ----------
    X, spec, groups, rng, weights
        As ``fit``.
    threads : int
        BLAS threads of the covariance's product (:func:`~ppa_xr.core.blas.product_threads`).

    Returns
    -------
    Begun
        The start.
    """
    n = len(X)
    rows = n if spec.selection_samples is None else spec.selection_samples
    folds, order = Folds.select(groups, n, spec.n_folds, rng, rows) if len(spec.candidates) > 1 else (None, None)
    root = _root_weights(weights, order)
    start, Z = _Start.of(X, order, spec, root, threads)
    values, vectors = eigenbasis(start.cov)
    return Begun(X, spec, folds, order, root, start, values, vectors, Z)


def _fit(begun: Begun, spec: Spec, progress: Progress | None, threads: int = 1, shrink_outputs: bool = False,
         carry: int = 0) -> Fit:
    """``fit`` from its start, on one BLAS thread: the steps, their composition; the covariance's recomputes
    on ``threads`` threads (:meth:`Residual.renew`)."""
    folds, start, values, root = begun.folds, begun.start, begun.values, begun.root
    axes, variances = oriented(begun.vectors), np.maximum(values, 0.0)
    # the residual owns the sample now, and overwrites it
    res = Residual.start(begun.sample(), 0 if folds is None else int(folds.bounds[-1]), values, axes)
    loop = _Loop(spec, _strategy(spec.leading).for_degree(max(spec.candidates)), folds, variances, res, progress, root,
                 _threads_for(res.Z, threads), shrink_outputs=shrink_outputs,
                 carried=[Carried(axes, np.diag(values), float(np.trace(start.cov)), start.unit, values)] if carry else None, carry=carry)
    loop.run()
    params = _compose(start.mean, loop.steps, res.frame[:, 0], float(res.cov[0, 0]), spec.tails, (axes.T, variances))
    return Fit(start.finish(params), errors.training_ratio(np.array(loop.energies), variances, loop.total), tuple(loop.carried or ()))


def fit_params(X: np.ndarray, spec: Spec, *, groups: np.ndarray | None = None, rng: np.random.Generator | None = None,
               progress: Progress | None = None, weights: np.ndarray | None = None, begun: Begun | None = None) -> PPAParams:
    """The fitted parameters of ``fit`` alone.

    Parameters
    ----------
    X, spec, groups, rng, progress, weights, begun
        As ``fit``.

    Returns
    -------
    PPAParams
        The fitted parameters.
    """
    return fit(X, spec, groups=groups, rng=rng, progress=progress, weights=weights, begun=begun).params


def block_size(rows: int, groups: int, terms: int, m: int, d: int) -> int:
    """Most steps one block prepares: :data:`MAX_BLOCK`, fewer where the block's designs (b x K x rows) and
    per-group products ``B_ij^T Y_i`` (groups x b x K x m, ``K = terms``) would outgrow the selection rows
    themselves (rows x d); 1 where even one step's do."""
    per_step = terms * (rows + groups * m)
    return max(1, min(MAX_BLOCK, rows * d // per_step)) if groups else MAX_BLOCK


def fit_memory(n: int, d: int, spec: Spec, n_groups: int | None = None, itemsize: int = 8) -> int:
    """Bytes a fit of ``n`` rows of ``d`` features (``itemsize`` bytes each) needs beyond its input, at its
    peak (an upper estimate; measured in benchmarks/bench_features.py).

    The peak is the larger of the start, where the sample is copied into
    float64 (``8 n d``, with the input's own type alongside while it is
    converted, twice while it is noise-whitened), and the steps: the sample
    once, the d x d matrices (covariance, eigendecomposition, frames, leading
    vectors, and the parameters twice while they are scaled back:
    ``(12 + 4 K) d^2``, ``K - 1`` the highest degree), and the larger of the
    degree selection's block (its designs ``b K r`` and per-group products
    ``groups b K d`` over ``r`` selection rows, ``b`` from :func:`block_size`;
    axis by axis also the candidates' per-group coefficients, their products
    with the Gram matrices and the residuals, ``3 C groups K d``) and a
    curved step's fit, which regresses the whole residual (``n d``) where its
    normal equations are ill-conditioned. A default fit first validates its
    configuration (``configuration="validated"``, :mod:`ppa_xr.core.candidates`):
    the sample's two halves gathered (``8 n d``), a fit of one, then the
    truncations' second moments (each held-out group's, ``groups d^2``, no
    more than the held-out half; a panel of the curved steps' bases), or
    where the groups outnumber ``n / (2 d)``, or where the moments' rounding
    could move an error, the outputs of the held-out half (and of the
    training half in the latter case) with their temporary, projections in
    float32 and squares in float64 (``8 n d`` together at most). After a fit that may curve its outputs' marginals
    are taken (``ppa_xr.core.fill.with_marginals``): the outputs (``8 n d``), a few columns and parts of rows.
    """
    terms, candidates = max(spec.candidates) + 1, len(spec.candidates)
    rows = 0 if candidates == 1 else min(n, n if spec.selection_samples is None else spec.selection_samples)
    groups = min(PSEUDO_GROUPS if n_groups is None else n_groups, rows)
    sample = 8 * n * d
    start = sample * (2 if spec.noise_cov is not None else 1) + (n * d * itemsize if itemsize != 8 else 0) + 32 * d * d
    block = terms * (rows + groups * d) * block_size(rows, groups, terms, d, d) if rows else 0
    per_axis = 3 * candidates * groups * terms * d if spec.robust else 0
    curved = n * (d + terms) if terms > 2 else 0
    marginals = sample + 8 * (4 * n + 3 * 1024 * d) if terms > 2 else 0  # fill.with_marginals: the outputs, a few columns
    fitted = max(start, sample + 8 * d * d * (12 + 4 * terms) + 8 * max(block + per_axis, curved), marginals)
    if not (spec.configuration == "validated" and not spec.robust and spec.max_curved is None and candidates > 1):
        return fitted
    # whole-fit validation (core/candidates.py) first: the two halves gathered, a fit of one (robust too, where
    # escalated), then the truncations' moments, or the held-out half's outputs, projections and their squares
    half_fit = fit_memory((n + 1) // 2, d, spec.replace(robust=True, configuration="fixed"), n_groups, 8)
    return max(fitted, sample + max(half_fit, 2 * sample + 32 * d * d))


def _strategy(leading: str | Callable[..., np.ndarray]) -> Strategy:
    return LEADING_VECTORS[leading] if isinstance(leading, str) else Strategy(leading)


@dataclass
class _Start:
    """How the sample the steps start from, ``Z = W (X[order] - mean) / unit`` (n x d, float64), was made
    (its covariance, mean, unit and whitening), and how to carry the fitted map back to the data's own units."""

    cov: np.ndarray
    mean: np.ndarray  # the mean in the fit's units, W mean / unit
    unit: float
    whitening: np.ndarray | None
    scale: np.ndarray | None = None  # a standardizing fit's feature scales, in units of the centring's factor

    @classmethod
    def of(cls, X: np.ndarray, order: np.ndarray | None, spec: Spec, root: np.ndarray | None = None,
           threads: int = 1) -> tuple[_Start, np.ndarray]:
        """The start and ``Z`` (its rows times ``root``, the square roots of their weights, where given); the
        covariance's product on ``threads`` BLAS threads."""
        Z, mean, factor = _centred(X, order, spec.standardize, root, threads)
        if spec.noise_cov is not None:  # W = Lambda^-1/2 U^T (noise in unit variance), then a power of two for O(1) values
            whitening = noise_whitening(spec.noise_cov)
            Z = Z @ (whitening * factor).T
            unit = _checked_spread(float(power_of_two(np.abs(Z).max())), len(mean), "in noise units (the noise far below the signal)")
            Z /= unit
            return cls(_covariance(Z, threads), whitening @ mean / unit, unit, whitening), Z
        cov = _covariance(Z, threads)
        if spec.standardize:  # W = D^-1: each feature's standard deviation D; a constant feature keeps 1
            std = np.sqrt(np.diag(cov))
            feature_scale = np.where(std > 0, std, 1 / factor)
            Z /= feature_scale
            whitening = np.diag(1 / (factor * feature_scale))
            return cls(cov / np.outer(feature_scale, feature_scale), whitening @ mean, 1.0, whitening, feature_scale), Z
        return cls(cov, mean / factor, _checked_spread(float(factor), len(mean), "(pass standardize=True, or divide the data by a constant)"), None), Z

    def sample(self, X: np.ndarray, order: np.ndarray | None, spec: Spec, root: np.ndarray | None = None,
               out: np.ndarray | None = None) -> np.ndarray:
        """``Z`` of :meth:`of` again, by the same operations (bit for bit), without its covariance; in ``out`` where
        given where it can hold them (:func:`_centred_into`)."""
        if out is not None and order is not None and X.dtype == np.float64 and out.shape == (len(order), X.shape[1]):
            Z, _, factor = _centred_into(out, X, order, spec.standardize, root)
        else:
            Z, _, factor = _centred(X, order, spec.standardize, root)
        if self.whitening is not None and spec.noise_cov is not None:
            Z = Z @ (self.whitening * factor).T
            Z /= self.unit
        elif self.scale is not None:
            Z /= self.scale
        return Z

    def finish(self, params: PPAParams) -> PPAParams:
        """The map fitted on ``Z`` as a map of the data itself."""
        scaled = params.scaled(self.unit)
        return scaled if self.whitening is None else scaled.with_whitening(self.whitening)


@dataclass
class _Loop:
    """The sequence of steps until ``d - 1`` are done: blocks along the residual's principal axes, or one
    step at a time along another strategy's direction."""

    spec: Spec
    strategy: Strategy
    folds: Folds | None
    pca_variance: np.ndarray
    res: Residual
    progress: Progress | None
    root: np.ndarray | None = None  # square roots of the rows' weights (None: unweighted)
    threads: int = 1  # of the covariance's recomputes
    shrink_outputs: bool = False  # each curve's axes scaled by their share of signal (fit's shrink_outputs)
    carried: list[Carried] | None = None  # the residual covariance after each curved step, where kept (fit's carry)
    carry: int = 0  # the most values the carried copies may hold: beyond, none are kept
    steps: list[Step] = field(default_factory=list)
    energies: list[float] = field(default_factory=list)  # tr(S_k) after each step: the training error keeping k components

    def __post_init__(self) -> None:
        self.d = self.res.frame.shape[0]
        self.total = self.reference = float(np.trace(self.res.cov))  # the sample's energy; the reference is renewed at each recompute
        self.designs_of = Designs(self.spec.tails, 1e-12 * np.sqrt(max(self.reference, np.finfo(float).tiny)), self.spec.robust, self.root)
        self.n_curved, self.searching = 0, self.strategy.searches

    def run(self) -> None:
        size = 1
        while len(self.steps) < self.d - 1:
            curved = self._block(size)
            size = 1 if curved else min(2 * size, MAX_BLOCK)

    def _capped(self) -> bool:
        """Whether ``max_curved`` steps are curved: the rest is a plain rotation."""
        return self.spec.max_curved is not None and self.n_curved >= self.spec.max_curved

    def _block(self, size: int) -> bool:
        """Fit the next block of steps (at most ``size``); whether it ended on a curved step."""
        capped = self._capped()
        top = 1 if capped else max(self.spec.candidates)
        res = self.res
        if self.searching and not capped and np.trace(res.cov) > 1e-9 * self.total:
            return self._directed(_validated_lead(res, self.strategy, top, self.folds, self.designs_of), top)
        if self.strategy.is_pca or self.strategy.searches:  # below 1e-9 of the sample's energy a residual is rounding: no search
            if top == 1:
                return self._rotation()
            groups = 0 if self.folds is None else len(self.folds.fold)
            fits = block_size(res.rows, groups, top + 1, res.frame.shape[1], self.d)
            return self._principal_block(min(size, fits, self.d - 1 - len(self.steps)), top)
        return self._directed(leading_vector(self.strategy, res.cov, res.sample()), top)

    def _principal_block(self, size: int, top: int) -> bool:
        """Up to ``size`` steps along the principal axes in order, until a curved one (or a renewed covariance)."""
        res = self.res
        if not res.principal:
            res.to_principal_axes()
        choose = self._choices(size, top)
        for j in range(size):
            step, curved = fit_step(res, partial(choose, j), self.designs_of, False, shrink=self._interlaced())
            self._record([step], curved)
            if curved or not res.principal:
                return curved
        return False

    def _rotation(self) -> bool:
        """The steps left, where no polynomial may follow, as one rotation along the principal axes up to the
        next recompute of the covariance: the frame's first ``k`` axes, their variances its diagonal, the
        residual energies after them its suffix sums; no work per step."""
        res = self.res
        if not res.principal:
            res.to_principal_axes()
        variances = np.diagonal(res.cov)
        after = np.cumsum(variances[::-1])[::-1][1:]  # tr(S) after each step
        low = np.flatnonzero(after < 1e-6 * self.reference)
        k = int(low[0]) + 1 if len(low) else len(after)
        steps = [Step.straight(lead, float(v)) for lead, v in zip(res.frame[:, :k].T.copy(), variances[:k])]
        res.drop(k)
        return self._record(steps, energies=after[:k].tolist())

    def _directed(self, e: np.ndarray, top: int) -> bool:
        """One step along ``e`` (frame coordinates). A direction that is not the PCA one must keep Property 2
        (:func:`interlaced`), else the step is PCA-led; a search goes on while it finds curves."""
        res = self.res
        res.turn(e * orientation((res.frame @ e)[:, None]))
        fitted = fit_step(res, partial(self._choices(1, top), 0), self.designs_of, True, self._property_two(), shrink=self._interlaced())
        if fitted is None:
            res.to_principal_axes()
            fitted = fit_step(res, partial(self._choices(1, top), 0), self.designs_of, False, shrink=self._interlaced())
        step, curved = fitted
        self.searching = self.searching and curved
        return self._record([step], curved)

    def _property_two(self) -> Callable[[np.ndarray], bool]:
        """The check that the next step's residual covariance keeps Property 2 (:func:`~ppa_xr.core.steps.interlaced`)."""
        return partial(interlaced, pca_variance=self.pca_variance, steps=len(self.steps) + 1)

    def _interlaced(self) -> Callable[[np.ndarray], bool] | None:
        """Where curves keep their axes' shares of signal, :meth:`_property_two`, which the shrunk curve's residual must
        pass; None: least squares."""
        return self._property_two() if self.shrink_outputs else None

    def _choices(self, size: int, top: int) -> Callable[[int, np.ndarray], Choice | None]:
        return _degree_choices(self.res, size, self.spec.candidates, top, self.folds, self.designs_of, self.spec.robust)

    def _record(self, steps: list[Step], curved: bool = False, energies: Sequence[float] | None = None) -> bool:
        """Keep fitted steps, with the residual energy after each, ``tr(S_k)`` (the training error keeping ``k``
        components; default: the one step's, the covariance's trace now). Where it has fallen by 1e6 since
        the last recompute, the covariance is recomputed from the sample (the updates' rounding would be felt
        in the small eigenvectors), and the rest's rows projected too while a polynomial may still follow
        (the degree selection and the curves read them; a plain rotation needs only the covariance)."""
        self.steps += steps
        self.energies += [float(np.trace(self.res.cov))] if energies is None else list(energies)
        self.n_curved += curved
        if self.progress is not None:
            self.progress(len(self.steps), self.d - 1)
        if self.energies[-1] < 1e-6 * self.reference:
            self.res.renew(project=max(self.spec.candidates) > 1 and not self._capped(), threads=self.threads)
            self.reference = np.trace(self.res.cov)
        if curved and self.carried is not None:
            self.carry -= self.res.frame.size + self.res.cov.size
            if self.carry < 0:  # more than the caller would hold: none kept
                self.carried = None
            else:
                self.carried.append(self._carried(self.carried[0].unit))
        return curved

    def _carried(self, unit: float) -> Carried:
        """The residual's covariance after a curved step, in its eigenbasis where the next block along the principal
        axes turns to it anyway (more steps follow, PCA-led, no search): the same turn, made now and kept."""
        res, values = self.res, None
        if len(self.steps) < self.d - 1 and self.strategy.is_pca and not self.searching:
            res.to_principal_axes()
            values = np.diagonal(res.cov).copy()
        return Carried(res.frame.copy(), res.cov.copy(), float(self.reference), unit, values)


def _held_out_cost(resid: np.ndarray, e: np.ndarray, degree: int, folds: Folds, designs_of: Designs) -> float:
    """Cross-validated error of a step along ``e`` with a degree-``degree`` polynomial, ``sum ||X_i - B_i W||^2``
    over held-out groups, up to the same constant for every ``e`` (it regresses the whole residual on ``B``)."""
    designs, _, scales = designs_of((resid @ e)[None], degree)
    if scales[0] == 0:
        return np.inf
    gram, cross = group_grams(designs, resid, folds.bounds)
    return float(CrossValidation(gram[:, 0], cross[:, 0], folds).held_out([degree]).sum())


def _validated_lead(res: Residual, strategy: Strategy, degree: int, folds: Folds | None, designs_of: Designs) -> np.ndarray:
    """A searched leading vector (PPA-GD, frame coordinates), kept only where it beats the PCA one on held-out
    groups: the search maximises the fit on every row, so only held-out rows can vouch for it. Both run on
    the selection rows."""
    resid = res.sample() if folds is None else res.scores
    searched = leading_vector(strategy, res.cov, resid)
    if folds is None:
        return searched
    pca = pca_leading_vector(res.cov)
    costs = [_held_out_cost(resid, e, degree, folds, designs_of) for e in (searched, pca)]
    return searched if costs[0] < costs[1] else pca


def _degree_choices(
    res: Residual, size: int, degrees: Sequence[int], top: int, folds: Folds | None, designs_of: Designs, per_axis: bool = False,
) -> Callable[[int, np.ndarray], Choice | None]:
    """``(j, cov) -> Choice`` of step ``j`` of a block of ``size`` steps along the frame's first axes, from the
    covariance of the residual after it; None: a rotation.

    With candidates to choose from, the block's projections are the selection
    rows' first ``size`` coordinates, and one pass gives their per-group Gram
    matrices against the coordinates after the first (straight steps do not
    change them, so they hold for the whole block: step ``j`` reads those
    after its own); with ``per_axis`` each step is judged along the principal
    axes of its residual (the frame's own where it is principal, see
    :func:`~ppa_xr.core.degrees.select_degree`).
    """
    if top == 1:
        return lambda j, cov: None
    if folds is None:
        return lambda j, cov: Choice.every_axis(degrees[0])
    scores, principal = res.scores, res.principal
    alphas = np.empty((size, res.rows))
    blas.copy_into(scores[:, :size], alphas.T)  # a transposing copy, blocked
    designs, _, scales = designs_of(alphas, top)
    gram, cross = group_grams(designs, scores[:, 1:], folds.bounds)

    def choose(j: int, cov: np.ndarray) -> Choice | None:
        if scales[j] == 0:
            return None
        axes = None if principal or not per_axis else scipy.linalg.eigh(cov, check_finite=False)[1]
        after = cross[:, j, :, j:]
        return select_degree(CrossValidation(gram[:, j], after if axes is None else after @ axes, folds), degrees, per_axis, axes)

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


def _centred(X: np.ndarray, order: np.ndarray | None, per_feature: bool = False, root: np.ndarray | None = None,
             threads: int = 1) -> tuple[np.ndarray, np.ndarray, float | np.ndarray]:
    """``Z = (X[order] - mean) / f``, a new float64 array, with ``mean`` and ``f``: a :func:`~ppa_xr.core.linalg.power_of_two`
    near the largest deviation, so the fit runs on O(1) values, exactly scaled (no under/overflow at 1e-200 or 1e200).
    ``per_feature`` (standardizing fits): one power of two per feature, so a feature at 1e-150 beside one
    at 1e150 keeps its values (their variances are computed apart). With ``root`` (the square roots of the
    rows' weights, mean weight 1, in the order of ``order``), the mean is weighted and each row is scaled by
    its root: ``Z^T Z`` is then the weighted scatter."""
    if order is None and root is None and not per_feature and X.flags.c_contiguous:
        return _centred_rows(X, threads)
    if order is None and root is None and not per_feature:  # the copy is the centring, which finds the spread as it goes
        mean = X.mean(axis=0, dtype=np.float64)
        Z = np.empty(X.shape)
        factor = power_of_two(spread_about(X, mean, out=Z))
        Z *= 1 / factor
        return Z, mean, factor[()]
    if order is None and root is None:
        mean = X.mean(axis=0, dtype=np.float64)
        Z = np.subtract(X, mean, dtype=np.float64)
    else:
        return _scaled((X if order is None else np.take(X, order, axis=0)).astype(np.float64, copy=order is None), per_feature, root)
    factor = power_of_two(np.maximum(Z.max(axis=0), -Z.min(axis=0)) if per_feature else max(Z.max(), -Z.min()))
    Z *= 1 / factor
    return Z, mean, factor if per_feature else factor[()]


def _centred_into(out: np.ndarray, X: np.ndarray, order: np.ndarray, per_feature: bool = False,
                  root: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, float | np.ndarray]:
    """:func:`_centred` of the float64 rows ``X`` in their ``order``, taken into ``out`` (their shape): the same values,
    in memory already mapped."""
    return _scaled(np.take(X, order, axis=0, out=out, mode="clip"), per_feature, root)  # "raise" takes into a temporary first


def _scaled(Z: np.ndarray, per_feature: bool, root: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, float | np.ndarray]:
    """:func:`_centred`'s rows ``Z`` (float64, overwritten) less their mean (weighted by ``root`` squared), divided by
    the power of two near their largest deviation (per feature where ``per_feature``), each times its ``root``."""
    mean = Z.mean(axis=0) if root is None else (root**2 @ Z) / len(Z)
    Z -= mean
    factor = power_of_two(np.maximum(Z.max(axis=0), -Z.min(axis=0)) if per_feature else max(Z.max(), -Z.min()))
    Z *= 1 / factor
    if root is not None:
        Z *= root[:, None]
    return Z, mean, factor if per_feature else factor[()]


def _centred_rows(X: np.ndarray, threads: int) -> tuple[np.ndarray, np.ndarray, float]:
    """:func:`_centred` of the rows ``X`` as they are (row-major), in two passes on ``threads`` threads: the
    columns' sums (``X.mean(axis=0)``'s, bit for bit) and extremes, whose differences from the mean are the
    largest deviations (rounding is monotone), in one thread's pass over the rows (threads that share the
    columns stream every row all the same, and a slice of the columns loops 2.5x slower: the pass took 16.5 ms
    of CPU on two threads against 4.2 ms on one at 20,000 x 425); then ``Z = (X - mean) * (1 / f)`` written once, a
    block of rows per thread."""
    threads = _threads_for(X, threads)
    sums, low, high = compiled.column_moments(X)
    mean = sums / len(X)
    factor = power_of_two(max(float((high - mean).max()), float((mean - low).max()), 0.0))
    Z: np.ndarray = np.empty(X.shape)
    rows, inv = -(-len(X) // threads), 1 / factor
    for _ in blas.in_order(lambda lo: compiled.centred_into(X[lo:lo + rows], mean, inv, Z[lo:lo + rows]), range(0, len(X), rows), threads):
        pass
    return Z, mean, float(factor)


def _threads_for(Z: np.ndarray, threads: int) -> int:
    """``threads`` where the covariance of ``Z`` (n x d) has :data:`THREADED_WORK` multiply-adds, else 1."""
    return threads if len(Z) * Z.shape[1] ** 2 >= THREADED_WORK else 1


def _covariance(Z: np.ndarray, threads: int) -> np.ndarray:
    """``Z^T Z / n`` (SYRK), on ``threads`` BLAS threads where it has :data:`THREADED_WORK` multiply-adds."""
    if _threads_for(Z, threads) == 1:
        return Z.T @ Z / len(Z)
    with blas.on_threads(threads):
        return Z.T @ Z / len(Z)


def _root_weights(weights: np.ndarray | None, order: np.ndarray | None) -> np.ndarray | None:
    """The square roots of the rows' weights (checked, :func:`~ppa_xr.core.checks.row_weights`), put in the fit's
    row ``order`` and scaled to a mean weight of 1 (:func:`~ppa_xr.core.linalg.unit_mean`: no overflow at 1e306)."""
    if weights is None:
        return None
    w = checks.row_weights(weights, len(weights))
    return np.sqrt(unit_mean(w if order is None else np.take(w, order)))


def _compose(mean: np.ndarray, steps: list[Step], last_axis: np.ndarray, last_variance: float, tails: str,
             pca: tuple[np.ndarray, np.ndarray]) -> PPAParams:
    """The kernels' matrices from the steps.

    ``A`` has the leading vectors as rows, then the last residual axis
    (:func:`~ppa_xr.core.linalg.oriented`). The residual after step ``p`` maps
    to the outputs ``r[p+1:]`` by ``O_p = A[p+1:] E_p`` (``E_p`` its frame), so a
    curved step's polynomial ``W_p`` enters the forward map as
    ``W_p O_p^T = (W_p E_p^T) A[p+1:]^T`` and the inverse as ``W_p E_p^T``: O(K d^2)
    per curved step, nothing per straight one. Each step keeps its own
    constant term (``forward_bias[p]``, ``inverse_bias[p]``), so a truncated
    inverse can leave out the steps it does not run.
    """
    d = mean.shape[0]  # pca_rotation row-major below, as a file or a pickle gives it back: one layout, one rounding everywhere
    rotation = np.vstack([s.lead for s in steps] + [oriented(last_axis[:, None])[:, 0]])
    gmax = max(max(s.degree for s in steps), 1)
    forward, inverse = np.zeros((2, d - 1, gmax, d))
    forward_bias, inverse_bias = np.zeros((2, d - 1, d))
    for p, step in enumerate(steps):
        if step.w is not None:
            w = basis.legendre_to_power(step.degree).T @ step.w  # Legendre -> monomial coefficients, input space
            inverse_bias[p], inverse[p, : step.degree] = w[0], w[1:]
            fw = w @ rotation[p + 1:].T
            forward_bias[p, p + 1:], forward[p, : step.degree, p + 1:] = fw[0], fw[1:]
    params = PPAParams(
        mean=mean, rotation=rotation, degrees=np.array([s.degree for s in steps], dtype=np.int64),
        center=np.array([s.center for s in steps]), scale=np.array([s.scale for s in steps]),
        forward_bias=forward_bias, forward=forward, inverse_bias=inverse_bias, inverse=inverse,
        explained_variance=np.array([s.variance for s in steps] + [last_variance]),
        pca_rotation=np.ascontiguousarray(pca[0]), pca_variance=pca[1], tails=tails,
    )
    params.written_steps([p for p, step in enumerate(steps) if step.w is not None])  # the others' rows stay 0, unread
    return params
