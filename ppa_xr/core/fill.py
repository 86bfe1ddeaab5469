"""Gap filling on the fitted map: missing entries of a pixel estimated from its observed ones.

PPA is a bijection ``x <-> r`` with a constant Jacobian determinant
(``|det dr/dx| = |det W|``), so with a Gaussian model of the outputs,
``r ~ N(0, Lambda)`` (``Lambda`` the outputs' variances on the fitting sample,
``explained_variance``), the density of ``x`` is ``p(r(x))`` up to a constant.
The fill of a pixel with observed entries ``x_o`` and missing ones ``x_m`` is
its most probable completion (MAP) where the outputs are Gaussian (the
posterior mean where they are not, below):

    x_m* = argmin_{x_m} q(x),   q(x) = r(x)^T Lambda^-1 r(x)

with ``x_o`` held fixed (observed values are returned bit for bit). For PCA
(every degree 1) ``r`` is linear and this is the Gaussian conditional mean
``mu_m - P_mm^-1 P_mo (x_o - mu_o)`` (``P`` the inverse covariance), the best
linear fill. It is solved by Gauss-Newton on the missing entries: with
``J_m = dr/dx_m`` (d x m, forward-mode tangents through the steps,
``dr = A W e_j``, then ``dr[p+1:] -= F_p^T T_p'(r_p) dr_p`` at each curved step)

    (J_m^T Lambda^-1 J_m) delta = -J_m^T Lambda^-1 r

halving the step until ``q`` decreases; the start is the linear fill of the
model's own PCA (one such step of the PCA map), so a PCA model is exact in one
step.

The outputs of real scenes are seldom Gaussian (land and water give the
leading ones two modes), and the squared error is least at the posterior
mean, not the mode. So the fit records each output's marginal density on its
sample where it predicts held-out rows better than the Gaussian
(:func:`with_marginals`), as ``c_p(r) = log f_p(r) + r^2 / (2 Lambda_p)``,
and the density of ``x`` becomes ``p(x) ~ exp(-q(x) / 2 + sum_p c_p(r_p(x)))``.
Where the recorded marginals would move the Laplace posterior's mean
(``N(x_m*, H^-1)``, ``H = J_m^T Lambda^-1 J_m``) by more than ``SHIFT`` of
its standard deviation (to first order, ``||L^-1 sum_p c_p'(r_p) J_p|| >
SHIFT``, ``H = L L^T``, with the last Gauss-Newton step's ``H``), the fill is
the posterior mean from the ``2m + 1`` points ``x_m*`` and ``x_m* +-
SIGMA_POINT L^-T e_a`` (the posterior's axes, ``H`` now at the MAP), each
weighted by ``p`` there (:mod:`ppa_xr.core.compiled`); elsewhere the MAP
stands. A model without curves keeps the linear fill. On Landsat 5 and the
BigEarthNet patches (a random quarter of each held-out pixel's bands hidden)
this takes the fill from 0.91-0.96 and 0.86-0.88 of the best linear fill's
squared error to 0.77-0.87 and 0.82-0.85.

With ``n_components = k < d`` the pixel is filled from the k-component
manifold ``x^(s) = inverse(s)`` instead (probabilistic PCA's model, ``s`` the
first k scores): minimise over ``s``

    sum_{j observed} w_j (x^_j(s) - x_j)^2 / sigma^2 + s^T Lambda_k^-1 s,   sigma^2 = sum(Lambda[k:]) / d

and return ``x^_m(s*)`` (``w_j``: the whitening's precision of feature j, 1
without whitening). For PCA this is PPCA's conditional mean
``s* = (U_o^T U_o / sigma^2 + Lambda_k^-1)^-1 U_o^T (x_o - mu_o) / sigma^2``.
Each ``x^`` is a sum of functions of one score, so ``dx^/ds`` is one column per
score: ``W^-1 (a_p + H_p^T T_p'(s_p) / s_p)``.

A reduced model (S-mode: ``W = V^T S``, r x d) has no density of its ``d``
inputs, only of their span: it is filled from the k-component manifold for
every ``k`` (``k = r`` by default: the span itself), with ``w_j = s_j^2``
(the features' weights), ``sigma^2`` the discarded variance over the used
inputs, and its EOFs' manifold fill (one Gauss-Newton step from the mean,
exact) as the linear fill; inputs it dropped (land) are never gaps and stay
NaN.

Safety: where curves do not transfer the curved fill can be worse than the
linear one. A pixel whose fill takes a curved step's projection far beyond the
range the step was fitted on (``|t| > GUARD`` in scaled units, and beyond the
linear fill's) gets the linear fill of the model's PCA instead. A pixel whose
iterations have not settled after ``MAX_ITERATIONS`` keeps its last iterate:
every accepted step lowered ``q``, so it is more probable than the linear
fill it started from (on Landsat 5 such pixels, given the linear fill, cost
a fifth of the curve's gain).

Rows with no observed value stay NaN (a fill needs at least one observed
value); rows with no missing value cost nothing. NaN and +-inf both mark a
missing value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from . import basis, blas, compiled
from .checks import check_components, features_last
from .kernels import computed_dtype, forward, inverse
from .linalg import FLAT_VARIANCE, floored, mean_error
from .params import PPAParams

#: Gauss-Newton iterations at most, and the relative decrease of the objective (done, or predicted for the next step
#: by the MAP fill: :func:`ppa_xr.core.compiled.map_fill`) that ends them
MAX_ITERATIONS = 10
TOLERANCE = 1e-6
#: step halvings tried before a row is taken as converged
HALVINGS = 12
#: a curved step's scaled projection beyond which a fill is not trusted (the fitted range is [-1, 1])
GUARD = 1.5
#: rows solved at a time (bounds the (rows, d, m) tangents)
ROWS = 32768
#: rows of the MAP fill's sums at a time (a few (rows, d) float64 arrays that stay in cache)
CACHED_ROWS = 1024
#: points of each output's marginal density, the standard deviation of its smoothing (in points), the share of the
#: sample beyond its interval at either end, and the interval's margin (a share of its width)
MARGINAL_POINTS = 128
MARGINAL_SMOOTHING = 2.0
MARGINAL_TAIL = 5e-4
MARGINAL_MARGIN = 0.1
#: the held-out log-likelihood (nats per sample) by which an output's marginal must beat its Gaussian to be kept
MARGINAL_GAIN = 0.01
#: the least density of a marginal, as a share of the uniform density over its interval (no log of 0)
MARGINAL_FLOOR = 1e-4
#: the most fitting rows the marginal densities are read from (every step-th row, a view): 128 bins of 20,000 rows
#: hold about 150 rows each, and the pass stays a small part of any fit (every row of 200,000 x 198 doubled the fit)
MARGINAL_ROWS = 20_000


def fill(x: np.ndarray, params: PPAParams, n_components: int | None = None, threads: int | None = None) -> np.ndarray:
    """``x`` (``...`` x d) with its missing (NaN or +-inf) entries filled on the fitted map; float32 stays float32.

    Parameters
    ----------
    x : np.ndarray
        (``...`` x d) points, NaN where a value is missing.
    params : PPAParams
        The fitted parameters.
    n_components : int, optional
        Fill from the k-component manifold (1..d); default: the MAP of the whole map.
    threads : int, optional
        Accepted as the other kernels take it; the fill runs on the calling thread (the cube layer runs one per dask task).

    Returns
    -------
    np.ndarray
        (``...`` x d): observed values as they were, missing ones estimated; a row with no observed value stays NaN.
    """
    d = params.n_inputs
    x = features_last(np.asarray(x), d)
    k = params.n_features if n_components is None else check_components(n_components, params.n_features)
    if params.reduced:
        return _fill_reduced(x, params, k)
    rows = np.ascontiguousarray(x.reshape(-1, d), dtype=computed_dtype(x.dtype))
    out = np.empty_like(rows)
    params = params.cast(np.dtype(np.float64))
    with blas.single_thread:  # block-sized products: BLAS threads would only wait (the kernels' rule)
        if k == params.n_features and params.curved_steps():
            _map_fill(rows, out, params)
        else:
            for start in range(0, len(rows), ROWS):
                out[start : start + ROWS] = _fill_block(rows[start : start + ROWS], params, k)
    return out.reshape(x.shape)


def _fill_reduced(x: np.ndarray, params: PPAParams, k: int) -> np.ndarray:
    """:func:`fill` of a reduced model: the rows with gaps filled from the k-component manifold for every ``k``, its
    dropped inputs (land) read as its mean, never a gap, and NaN in the output."""
    out = x.astype(computed_dtype(x.dtype), copy=True)
    flat = out.reshape(-1, params.n_inputs)
    dropped = None if params.used is None else ~params.used
    if dropped is not None:
        flat[:, dropped] = params.mean[dropped]
    missing = ~np.isfinite(flat)
    rows = np.flatnonzero(missing.any(axis=1) & ~missing.all(axis=1))
    flat[missing.all(axis=1)] = np.nan
    params = params.cast(np.dtype(np.float64))
    with blas.single_thread:
        for start in range(0, len(rows), ROWS):
            part = rows[start : start + ROWS]
            values, gaps = flat[part].astype(np.float64), missing[part]
            linear = _manifold_fill(values, np.where(gaps, params.mean, values), gaps, params.pca(), k)  # the EOFs' fill: exact
            filled = _fill_manifold(values, linear, gaps, params, k) if params.curved_steps() else linear
            flat[part] = np.where(gaps, filled, flat[part])  # observed entries copied back untouched
    if dropped is not None:
        flat[:, dropped] = np.nan
    return out


def _fill_block(x: np.ndarray, params: PPAParams, k: int) -> np.ndarray:
    """Rows ``x`` (n, d, C-contiguous) filled (float64) by the linear fill, or from the k-component manifold
    (``k < d``) from it, each row keeping the linear fill where the manifold's is not trusted."""
    pca = params.pca()
    linear = np.empty(x.shape)
    compiled.linear_fill(x, linear, pca.mean, _covariance_inverse(pca))
    if k < params.n_features:
        gaps = ~np.isfinite(x)
        part = np.flatnonzero(gaps.any(axis=1) & ~gaps.all(axis=1))
        linear[part] = np.where(gaps[part], _fill_manifold(x[part].astype(np.float64), linear[part], gaps[part], params, k), linear[part])
    return linear


def _map_fill(x: np.ndarray, out: np.ndarray, params: PPAParams) -> None:
    """``out`` (n, d): the rows ``x`` (n, d, C-contiguous) filled with the MAP of the whole map from their linear fill
    (:func:`ppa_xr.core.compiled.map_fill`, from the sums of two GEMMs at the rows with their gaps at the mean), in
    parts of :data:`CACHED_ROWS` rows whose buffers (and the loops' own) are reused (they stay in cache)."""
    pca = params.pca()
    plan, model = _plan(params)
    marginal = _marginal_plan(params)
    covariance_inverse, g_lin, k_mat = model[4:]
    fixed = (covariance_inverse, g_lin, k_mat, pca.mean, _covariance_inverse(pca))
    rows, d = min(len(x), CACHED_ROWS), x.shape[1]
    base, u, wv, part = np.empty((rows, d)), np.empty((rows, d)), np.empty((rows, model[3].shape[1])), np.empty((rows, d))
    scratch = compiled.fill_scratch(d, model[5].shape[0], len(plan[0]), rows)
    for start in range(0, len(x), CACHED_ROWS):
        n = min(CACHED_ROWS, len(x) - start)
        compiled.gaps_at(x[start : start + n], pca.mean, base[:n])
        blas.matmul_into(base[:n], model[0], u[:n], points=0)
        u[:n] -= model[1]
        blas.matmul_into(u[:n], model[3], wv[:n], points=0)
        compiled.map_fill(x[start : start + n], part[:n], (u[:n], wv[:n], model[2]), fixed, plan, marginal, MAX_ITERATIONS, TOLERANCE,
                          HALVINGS, GUARD, scratch)
        out[start : start + n] = part[:n]


def with_marginals(params: PPAParams, x: np.ndarray, weights: np.ndarray | None = None) -> PPAParams:
    """``params`` with each output's marginal density on the fitting sample ``x`` (n, d) recorded where it is not
    Gaussian (:attr:`~ppa_xr.core.params.PPAParams.marginal`; a reduced model's, or one without curves, as it is:
    their fills are the manifold's and the linear one).

    Output ``p``'s density ``f_p`` is a histogram of its values ``r_p`` on at most :data:`MARGINAL_ROWS` rows, every
    ``ceil(n / MARGINAL_ROWS)``-th (weighted by ``weights``), on
    :data:`MARGINAL_POINTS` bins over the interval that leaves :data:`MARGINAL_TAIL` of them out at either end,
    widened by :data:`MARGINAL_MARGIN`, smoothed by a Gaussian of :data:`MARGINAL_SMOOTHING` bins, at least
    :data:`MARGINAL_FLOOR` of the uniform density over the interval; recorded is
    ``log f_p(r) + r^2 / (2 Lambda_p)`` at the bins' centres, less its largest value. It is kept where the density of
    the even rows predicts the odd rows better than the Gaussian ``N(0, Lambda_p)`` by more than
    :data:`MARGINAL_GAIN` nats per row; a row of zeros (Gaussian) elsewhere.

    Parameters
    ----------
    params : PPAParams
        The fitted parameters.
    x : np.ndarray
        (n, d) the fitting sample.
    weights : np.ndarray, optional
        (n,) the rows' weights.

    Returns
    -------
    PPAParams
        ``params`` with ``marginal`` and ``marginal_range`` (as they were where no output departs from its Gaussian).
    """
    from scipy.ndimage import gaussian_filter1d  # imported here: 25 ms of an import of ppa_xr that a dask worker need not pay

    if params.reduced or not params.curved_steps():  # a model without curves fills linearly
        return params
    model = params.cast(np.dtype(np.float64))
    step = -(-len(x) // MARGINAL_ROWS)  # at most MARGINAL_ROWS rows, spread over the sample
    x, weights = x[::step], None if weights is None else np.asarray(weights)[::step]
    r = np.empty(np.shape(x))  # the outputs, in parts of CACHED_ROWS rows (no temporaries of the whole sample)
    for start in range(0, len(r), CACHED_ROWS):
        r[start : start + CACHED_ROWS] = forward(np.asarray(x[start : start + CACHED_ROWS], np.float64), model, threads=1)
    w = np.ones(len(r)) if weights is None else np.asarray(weights, np.float64)
    variance = model.explained_variance
    table, bounds = np.zeros((model.n_features, MARGINAL_POINTS)), np.zeros((model.n_features, 2))
    for p in range(model.n_features):
        low, high = np.quantile(r[:, p], [MARGINAL_TAIL, 1 - MARGINAL_TAIL])
        if not (high > low and variance[p] > FLAT_VARIANCE * variance.max()):  # a flat output (as _precisions floors it) stays Gaussian
            continue
        low, high = low - MARGINAL_MARGIN * (high - low), high + MARGINAL_MARGIN * (high - low)
        edges = np.linspace(low, high, MARGINAL_POINTS + 1)
        centres = (edges[:-1] + edges[1:]) / 2
        bounds[p] = centres[0], centres[-1]
        gauss = -(centres**2) / (2 * variance[p]) - 0.5 * np.log(2 * np.pi * variance[p])

        def density(rows: slice) -> np.ndarray:
            counts = gaussian_filter1d(np.histogram(r[rows, p], edges, weights=w[rows])[0], MARGINAL_SMOOTHING, mode="constant")
            return np.log(counts / (w[rows].sum() * (edges[1] - edges[0])) + MARGINAL_FLOOR / (high - low))

        held, inside = r[1::2, p], (r[1::2, p] >= centres[0]) & (r[1::2, p] <= centres[-1])
        gain = np.where(inside, np.interp(held, centres, density(slice(0, None, 2)) - gauss), 0.0)
        if np.average(gain, weights=w[1::2]) > MARGINAL_GAIN:
            excess = density(slice(None)) - gauss
            table[p] = excess - excess.max()
    if not table.any():
        return params
    return replace(params, marginal=table.astype(params.mean.dtype), marginal_range=bounds.astype(params.mean.dtype))


def with_drawn_outputs(params: PPAParams, drawn: np.ndarray, weights: np.ndarray | None = None) -> PPAParams:
    """``params`` of a map fitted on filled gaps, with its outputs' variances and marginals read from ``drawn``: the
    rows with the fill plus a draw from its posterior (:func:`fit_with_gaps`), not the fill itself.

    The Gaussian model of the outputs needs ``Lambda_p = E[r_p^2]`` over the data; at a filled row
    ``E[r r^T | x_o] = E[r | x_o] E[r | x_o]^T + Cov(r | x_o)``, so the outputs of the posterior means alone leave out
    the posterior's spread (on Landsat 5 with a quarter of the bands missing, the trailing outputs' variances came out
    0.5-0.7 of the data's) and pile the filled rows' outputs near 0, a spike the marginals record. A draw
    adds the spread back: ``Lambda_p`` is the (weighted) mean of ``r_p(drawn)^2``, and the marginals are
    :func:`with_marginals` of ``drawn``. A model without curves, or a reduced one, is returned as it is (its fill is
    the linear one, from its PCA's variances).

    Parameters
    ----------
    params : PPAParams
        The parameters fitted on the filled rows.
    drawn : np.ndarray
        (n, d) the filled rows with a posterior draw added at the gaps (observed values as they are).
    weights : np.ndarray, optional
        (n,) the rows' weights.

    Returns
    -------
    PPAParams
        ``params`` with ``explained_variance`` read from ``drawn``, and the marginals recorded from it.
    """
    if params.reduced or not params.curved_steps():
        return params
    model = params.cast(np.dtype(np.float64))
    squares = np.zeros(params.n_features)
    w = np.ones(len(drawn)) if weights is None else np.asarray(weights, np.float64)
    for start in range(0, len(drawn), CACHED_ROWS):  # in parts (no temporaries of the whole sample)
        r = forward(np.asarray(drawn[start : start + CACHED_ROWS], np.float64), model, threads=1)
        squares += w[start : start + CACHED_ROWS] @ r**2
    variance = (squares / w.sum()).astype(params.explained_variance.dtype)
    return with_marginals(replace(params, explained_variance=variance), drawn, weights)


def _covariance_inverse(params: PPAParams) -> np.ndarray:
    """``P = (A W)^T Lambda^-1 A W``, the inverse covariance of the model's Gaussian of the inputs (cached)."""
    def make() -> np.ndarray:
        axes = np.ascontiguousarray(params.input_rotation())
        return np.ascontiguousarray(axes.T @ (_precisions(params.explained_variance, params.explained_variance.max())[:, None] * axes))

    return params.cached("covariance inverse", make)


def _plan(params: PPAParams) -> tuple:
    """The model's part of :func:`ppa_xr.core.compiled.map_fill` (cached): the curved steps' plan (steps, degrees,
    each one's first row in ``G``, centers, scales, the tails' code, ``(A W)[C]``, ``G[:, C]``; ``G``: the steps'
    ``F_p`` stacked, each row 0 up to its step), and ``(A W)^T``, ``A W mean`` plus the steps' biases, ``1 / Lambda``,
    ``[L A W, L G^T]`` as the sums need them, with ``P``, ``G L A W`` and ``K = G L G^T``."""
    def make() -> tuple:
        steps = np.asarray(params.curved_steps(), np.int64)
        degrees = params.degrees[steps].astype(np.int64)
        first = np.concatenate([[0], np.cumsum(degrees)[:-1]]).astype(np.int64)
        g_full = _stacked(params)
        lin = np.ascontiguousarray(params.input_rotation())
        precision = _precisions(params.explained_variance, params.explained_variance.max())
        plan = (steps, degrees, first, params.center[steps], params.scale[steps], compiled.TAILS[params.tails],
                np.ascontiguousarray(lin[steps]), np.ascontiguousarray(g_full[:, steps]))
        weighted = np.ascontiguousarray(np.hstack([precision[:, None] * lin, (g_full * precision).T]))
        model = (np.ascontiguousarray(lin.T), lin @ params.mean + params.forward_bias.sum(axis=0), precision, weighted,
                 _covariance_inverse(params), np.ascontiguousarray((g_full * precision) @ lin), (g_full * precision) @ g_full.T)
        return plan, model

    return params.cached("fill plan", make)


def _stacked(params: PPAParams) -> np.ndarray:
    """``G``: the curved steps' ``F_p`` stacked (|G| x d), each row 0 up to its step (cached)."""
    def make() -> np.ndarray:
        steps = params.curved_steps()
        degrees = [int(params.degrees[p]) for p in steps]
        g_full = np.zeros((sum(degrees), params.n_features))
        for p, g, at in zip(steps, degrees, np.cumsum([0] + degrees)):
            g_full[at : at + g, p + 1 :] = params.forward[p, :g, p + 1 :]
        return g_full

    return params.cached("stacked steps", make)


def _marginal_plan(params: PPAParams) -> tuple:
    """The recorded marginals as :func:`ppa_xr.core.compiled.map_fill` reads them (cached): the outputs that have one,
    their tables, first points, inverse spacings, ``(A W)`` rows and ``G`` columns (none: empty arrays)."""
    def make() -> tuple:
        table = np.zeros((0, 1)) if params.marginal is None else params.marginal
        outputs = np.flatnonzero(table.any(axis=1)).astype(np.int64)
        bounds = np.zeros((0, 2)) if params.marginal_range is None else params.marginal_range[outputs]
        inverse_spacing = max(table.shape[1] - 1, 1) / (bounds[:, 1] - bounds[:, 0])
        return (outputs, np.ascontiguousarray(table[outputs]), np.ascontiguousarray(bounds[:, 0]), inverse_spacing,
                np.ascontiguousarray(params.input_rotation()[outputs]), np.ascontiguousarray(_stacked(params)[:, outputs]))

    return params.cached("fill marginals", make)


def _product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` by scipy's BLAS (held at one thread while a fill runs)."""
    out = np.empty((a.shape[0], b.shape[1]), np.result_type(a, b))
    blas.matmul_into(a, b, out)
    return out


def fill_mask(x: np.ndarray) -> np.ndarray:
    """Where :func:`fill` estimates a value: missing (NaN or +-inf) in a row with at least one observed value."""
    missing = ~np.isfinite(np.asarray(x))
    return missing & ~missing.all(axis=-1, keepdims=True)


def _fill_manifold(x: np.ndarray, linear: np.ndarray, gaps: np.ndarray, params: PPAParams, k: int) -> np.ndarray:
    """Rows (n, d) float64 with at least one gap and one observed value, filled from the k-component manifold
    (:func:`_manifold_fill`) from their linear fill ``linear``, which a row keeps where the manifold's is not trusted."""
    curved = _manifold_fill(x, linear, gaps, params, k)
    ok = _inside(forward(curved, params, threads=1), forward(linear, params, threads=1), params)
    return np.where(ok[:, None], curved, linear)


def _inside(curved: np.ndarray, linear: np.ndarray, params: PPAParams) -> np.ndarray:
    """Rows whose fill (forward outputs ``curved``) keeps every curved step's scaled projection within :data:`GUARD`,
    or within the linear fill's (outputs ``linear``)."""
    steps = params.curved_steps()
    if not steps:
        return np.ones(len(curved), bool)

    def reach(r: np.ndarray) -> np.ndarray:
        return np.max(np.abs((r[:, steps] - params.center[steps]) / params.scale[steps]), axis=1)

    far = reach(curved)
    return (far <= GUARD) | (far <= reach(linear))


def _precisions(variance: np.ndarray, largest: float) -> np.ndarray:
    """``1 / Lambda`` with a floor on ``Lambda`` (``ppa_xr.core.linalg.floored``), so exactly flat directions stay solvable."""
    return 1.0 / floored(variance, largest)


def _scattered(filled: np.ndarray, gaps: np.ndarray, params: PPAParams, rng: np.random.Generator) -> np.ndarray:
    """``filled`` (n, d) plus, at the gaps, a draw from the fill's Laplace posterior ``N(0, (J_m^T Lambda^-1 J_m)^-1)``
    (for PCA: the exact conditional covariance ``P_mm^-1``), drawn per row in row order by ``rng``."""
    out = filled.copy()
    precision = _precisions(params.explained_variance, params.explained_variance.max())
    draws = rng.standard_normal(gaps.shape)
    counts = gaps.sum(axis=1)
    for m in np.unique(counts[counts > 0]):
        rows = np.flatnonzero(counts == m)
        idx = np.argsort(~gaps[rows], axis=1, kind="stable")[:, :m]
        jac = _tangents(forward(filled[rows], params, threads=1), idx, params)
        hessian = np.einsum("ndm,ndk->nmk", jac * precision[None, :, None], jac)
        hessian += _ridge(hessian)
        lower = np.linalg.cholesky(hessian)  # H = L L^T: L^-T z ~ N(0, H^-1)
        z = draws[rows[:, None], idx][..., None]
        out[rows[:, None], idx] += np.linalg.solve(np.swapaxes(lower, 1, 2), z)[..., 0]
    return out


def _tangents(r: np.ndarray, idx: np.ndarray, params: PPAParams) -> np.ndarray:
    """``dr/dx`` on the missing columns ``idx`` (n, m) -> (n, d, m), forward-mode through the curved steps."""
    lin = params.input_rotation()
    tangent = np.ascontiguousarray(np.moveaxis(lin[:, idx], 0, 1))  # (n, d, m): A W e_j
    for p in params.curved_steps():
        g = int(params.degrees[p])
        slopes = basis.power_derivatives((r[:, p] - params.center[p]) / params.scale[p], g, 1, params.tails) / params.scale[p]
        shear = _product(slopes.T, params.forward[p, :g, p + 1 :])  # (n, d-p-1): d r[p+1:] / d r_p
        tangent[:, p + 1 :, :] -= shear[:, :, None] * tangent[:, p, None, :]
    return tangent


def _solve(hessian: np.ndarray, gradient: np.ndarray) -> np.ndarray:
    """``-H^-1 g`` per row, with a ridge of 1e-13 of each diagonal entry (:func:`_ridge`)."""
    return -np.linalg.solve(hessian + _ridge(hessian), gradient[..., None])[..., 0]


def _ridge(hessian: np.ndarray) -> np.ndarray:
    """``1e-13 diag(H)`` per row (and the smallest normal number): a flat direction stays solvable, and the ridge
    scales with each entry, so features in very different units (a standardizing model) are not biased."""
    diagonal = np.diagonal(hessian, axis1=1, axis2=2)
    return (1e-13 * diagonal + np.finfo(float).tiny)[:, :, None] * np.eye(hessian.shape[1])


def _manifold_fill(x: np.ndarray, linear: np.ndarray, gaps: np.ndarray, params: PPAParams, k: int) -> np.ndarray:
    """The MAP scores ``s`` of the k-component manifold given the observed entries, from the linear fill's scores
    (the last iterate where a row has not settled); the manifold's values at the gaps."""
    variance = params.explained_variance
    inputs = params.n_inputs if params.used is None else int(params.used.sum())
    noise = float(floored(float(variance[k:].sum()) / inputs, float(variance.max())))
    prior = _precisions(variance[:k], variance.max())
    weight = np.where(gaps, 0.0, _feature_precision(params) / noise)  # (n, d) observed entries' precision
    target = np.where(gaps, 0.0, x)
    observed = weight > 0  # a reduced model's dropped inputs weigh nothing (and its inverse is NaN there)
    back = params.unwhitening().T
    base = params.rotation[:k] @ back  # (k, d)
    used = [p for p in params.curved_steps() if p < k]

    def objective(s: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        error = np.where(observed[at], inverse(s, params, threads=1) - target[at], 0.0)
        return error, np.einsum("nd,nd,nd->n", error, error, weight[at]) + np.einsum("nk,nk,k->n", s, s, prior)

    def step(s: np.ndarray, error: np.ndarray, at: np.ndarray) -> np.ndarray:
        jac = np.broadcast_to(base.T, (len(s), params.n_inputs, k)).copy()  # (n, d, k): dx^/ds
        for p in used:
            g = int(params.degrees[p])
            slopes = basis.power_derivatives((s[:, p] - params.center[p]) / params.scale[p], g, 1, params.tails) / params.scale[p]
            jac[:, :, p] += _product(slopes.T, params.inverse[p, :g] @ back)
        scaled = jac * weight[at][:, :, None]
        hessian = np.einsum("ndk,ndl->nkl", scaled, jac) + np.diag(prior)
        return _solve(hessian, np.einsum("ndk,nd->nk", scaled, error) + s * prior)

    s = _gauss_newton(forward(linear, params, k, threads=1), objective, step, MAX_ITERATIONS)[0]
    return np.where(gaps, inverse(s, params, threads=1), x)


def _feature_precision(params: PPAParams) -> np.ndarray:
    """(d,) the weight of each input's squared error in the fit's: ``diag(W^T W)`` (1 without whitening), or a
    reduced model's ``s_j^2`` (its features' weights, over their standard deviations where standardized; 0 dropped)."""
    if params.reduced:
        return params.feature_root**2
    return params.cached("feature precision", lambda: np.diag(params.whitening.T @ params.whitening))


def _gauss_newton(values: np.ndarray, objective, step, iterations: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Minimise ``objective(values, rows) -> (residuals, q)`` row by row with the updates ``step(values, residuals, rows)``,
    each halved until ``q`` does not increase; a row stops when ``q`` falls by less than :data:`TOLERANCE` of itself.
    Returns the values, whether each row stopped so within ``iterations``, and the residuals at the end and at the start."""
    values = values.copy()
    residual, q = objective(values, np.arange(len(values)))
    start = residual.copy()
    active, done = np.arange(len(values)), np.zeros(len(values), bool)
    for _ in range(iterations):
        if not active.size:
            break
        delta = step(values[active], residual[active], active)
        new, new_residual, new_q = _halved(values[active], residual[active], delta, q[active], lambda v, at: objective(v, active[at]))
        settled = q[active] - new_q <= TOLERANCE * q[active]
        values[active], residual[active], q[active] = new, new_residual, new_q
        done[active[settled]] = True
        active = active[~settled]
    return values, done | (iterations == 1), residual, start


def _halved(values: np.ndarray, residual: np.ndarray, delta: np.ndarray, q: np.ndarray, objective):
    """``values + t delta`` with ``t = 1, 1/2, ...`` the first that does not increase ``q`` (none: ``values`` kept)."""
    out, residual_out, q_out = values.copy(), residual.copy(), q.copy()
    pending, t = np.arange(len(values)), 1.0
    for _ in range(HALVINGS):
        trial = values[pending] + t * delta[pending]
        residual, q_new = objective(trial, pending)
        better = q_new <= q[pending]
        out[pending[better]], residual_out[pending[better]], q_out[pending[better]] = trial[better], residual[better], q_new[better]
        pending = pending[~better]
        if not pending.size:
            break
        t /= 2
    return out, residual_out, q_out


#: iterations of the EM-style fit with gaps: linear ones (cheap, they settle the bulk), then curved ones
LINEAR_ITERATIONS = 30
CURVED_ITERATIONS = 4
#: the change of the filled values, relative to the features' spread, that ends them
EM_TOLERANCE = 1e-3
MISSING = ("drop", "fill")
#: the least share of the rows, those with the fewest gaps, that the final map of a fit with gaps is fitted on, and the
#: least count of them up to half the rows
FEWEST_SHARE = 0.15
FEWEST_ROWS = 5000


def fewest_gaps(finite: np.ndarray) -> np.ndarray:
    """The rows the final curved map of a fit with gaps is fitted on: those with the fewest gaps, adding the next
    count of gaps until they hold ``FEWEST_SHARE`` of the rows and ``FEWEST_ROWS`` rows, or half of the rows where
    those are fewer (every row where that leaves no more rows than features).

    A filled value is a posterior mean of the loop's last model, pulled towards a straighter one, so rows with many
    gaps lie on that model and read as evidence against more curvature: the degrees selected on every filled row
    were lower than the complete rows' (Landsat 5, 44,000 rows, one band and a quarter of the others missing in
    each: the fill's squared error 0.97-1.32 of the complete-row model's over seeds 0-8, mean 1.110; fitted on the
    fewer-gap half, mean 1.053 over the fit's random_state 0-3; on the one-gap rows, 18%, mean 1.022, lower at each
    random_state). Few rows cost more than the fewer gaps gain: on 3,000 rows of a curved set (five features, one
    and a quarter of the others missing) the one-gap rows, 950, filled with 1.10 of the complete-row model's error
    over 16 seeds, the half 0.98; on a 40 x 40 NDVI crop (44 dates) its 414 fewest-gap rows fitted a PCA that
    filled with 1.17 of the linear fill's error, the half 1.00; on NRCan's 30 fields 2,900 rows filled with 1.09-1.11,
    the half's 4,200 with 1.07-1.10 (three seeds). A linear map is fitted on every row (EM-PCA's fixed
    point: on the eo-learn NDVI series the fewer-gap half raised the linear fill's error by 3%).
    """
    count = (~finite).sum(axis=1)
    least = max(FEWEST_SHARE * len(count), min(FEWEST_ROWS, len(count) / 2))
    most = np.searchsorted(np.cumsum(np.bincount(count)), least)
    kept = count <= most
    return kept if kept.sum() > finite.shape[1] else np.ones(len(count), bool)


#: refits of a curved map with gaps on the rows it is fitted on, each on those rows' gaps refilled by the previous one
REFILLS = 1


def refilled(x: np.ndarray, filled: np.ndarray, drawn: np.ndarray,
             fit: Callable[[np.ndarray, np.ndarray], PPAParams]) -> tuple[np.ndarray, np.ndarray]:
    """The rows ``x`` (NaN at gaps) refilled ``REFILLS`` times by the curved model fitted on them: ``fit(filled, drawn)``,
    then :func:`fill` of ``x`` by it; ``drawn`` keeps its posterior draw (``drawn - filled``) on the new fill.

    The loop's fill is the posterior mean of its own model, fitted on every row's fill plus a draw: straighter than
    the map the fewest-gap rows give. Refilled by that map, their gaps lie on its curves, and the map fitted on them
    keeps them (Landsat 5, 44,000 rows, one band and a quarter of the others missing in each, 7,800 one-gap rows: the
    fill's squared error against the complete-row model's over 45 fits, mean 1.021 and worst 1.149 without, 0.996 and
    1.115 with one refill; more drift back to the loop's straighter fixed point: two 1.003 and 1.138, three 1.006 and
    1.140).
    """
    for _ in range(REFILLS):
        new = fill(x, fit(filled, drawn)).astype(np.float64)
        filled, drawn = new, new + (drawn - filled)
    return filled, drawn


def check_missing(missing: object) -> str:
    """``missing`` as the fits take it: ``"drop"`` (rows with a gap are left out) or ``"fill"`` (gaps filled as the fit goes)."""
    if not isinstance(missing, str) or missing not in MISSING:
        raise ValueError(f"missing must be 'drop' (rows with a missing value are left out) or 'fill' (gaps are filled "
                         f"by the model as it is fitted), got {missing!r}")
    return missing


def fit_with_gaps(x: np.ndarray, fit: Callable[[np.ndarray, bool], PPAParams],
                  rng: np.random.Generator, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, PPAParams, FillCheck]:
    """An EM-style fit on rows with gaps (NaN or inf; each row with at least one observed value): fill, fit, refill.

    The gaps start at the features' observed means; then ``fit(filled, linear)``
    and :func:`fill` alternate, first with a linear model (``linear=True``: the
    fill is the Gaussian conditional mean of the current fit, EM-PCA's step) for
    up to ``LINEAR_ITERATIONS``, then with the curved one for up to
    ``CURVED_ITERATIONS``; each phase stops once the filled values change
    by less than ``EM_TOLERANCE`` of the features' spread (root mean square
    over the gaps). Each fit sees the fill plus a draw from its Laplace
    posterior ``N(0, (J_m^T Lambda^-1 J_m)^-1)`` (for PCA the exact conditional
    covariance: stochastic EM), so a curve does not feed on its own, noise-free
    fill; the rows returned are the last fill itself, and with it the fill plus
    its draw (a posterior mean is pulled to the bulk: outputs read from it have
    too little variance, and a spike at 0 for a marginal). A share ``CHECK_SHARE`` of
    the observed values is held out of the loop and filled at the end by the
    curved phase's last model and by the linear phase's (:class:`FillCheck`):
    where the curve's squared error on them is larger beyond twice its standard
    error, the linear phase's rows and model are returned, the curved phase's
    otherwise (on the eo-learn NDVI series the curve's fill has 1.06-1.11 times
    the linear one's squared error on held-out values, +-0.02, and 1.09-1.16
    times on values hidden under clouds). The rows returned hold the held-out values again, their gaps refilled
    with them and drawn again (filled without them, their rows' other gaps gave the fit of the linear
    model's smallest output up to 3x the complete data's variance). Observed values are never changed.

    Parameters
    ----------
    x : np.ndarray
        (n, d) rows, NaN where a value is missing, at least one observed value per row and per feature.
    fit : callable
        ``fit(filled, linear) -> PPAParams``: the model of complete rows.
    rng : np.random.Generator
        Draws the held-out values and the posterior draws.
    weights : np.ndarray, optional
        (n,) the rows' weights in ``fit``: the held-out check weighs each value as its row (None: equal).

    Returns
    -------
    tuple
        The rows filled by the model kept (n, d, float64), the same rows with its last posterior draw added at the
        gaps (what the outputs' variances and marginals are read from: ``with_drawn_outputs``), that model's
        parameters, and the held-out check (``check.worse``: the linear phase's model was returned).
    """
    finite = np.isfinite(x)
    held = _held_values(finite, rng)
    work = np.where(held, np.nan, x)
    gaps = ~np.isfinite(work)
    observed = np.where(gaps, 0.0, work)
    counts = (~gaps).sum(axis=0)
    means = observed.sum(axis=0) / np.maximum(counts, 1)
    spread = np.sqrt(np.mean(np.where(gaps, 0.0, (observed - means) ** 2).sum(axis=0) / np.maximum(counts, 1)))
    filled = best = np.where(gaps, means, work).astype(np.float64)
    phases = []
    for linear, iterations in ((True, LINEAR_ITERATIONS), (False, CURVED_ITERATIONS)):
        for _ in range(iterations):
            params = fit(filled, linear)
            new = fill(work, params).astype(np.float64)
            change = np.sqrt(np.mean(np.square(new - best)[gaps])) if gaps.any() else 0.0
            best, filled = new, _scattered(new, gaps, params.cast(np.dtype(np.float64)), rng)
            if change <= EM_TOLERANCE * max(spread, np.finfo(float).tiny):
                break
        phases.append((best, filled, params))
    (linear_rows, linear_drawn, linear_params), (curved_rows, curved_drawn, curved_params) = phases
    check = _check(x, work, held, curved_params, linear_params, weights)
    rows, drawn, params = (linear_rows, linear_drawn, linear_params) if check.worse else (curved_rows, curved_drawn, curved_params)
    if held.any():  # refilled with the held-out values back: each gap conditioned on all of its row's observed values
        rows = fill(x, params).astype(np.float64)
        drawn = _scattered(rows, ~finite, params.cast(np.dtype(np.float64)), rng)
    return rows, drawn, params, check


#: the share of observed values :func:`fit_with_gaps` holds out to compare the curve's fill with the linear one
CHECK_SHARE = 0.05


@dataclass(frozen=True)
class FillCheck:
    """The fill of values held out of a fit with gaps, by the curved phase's model and by the linear phase's.

    Parameters
    ----------
    ratio : float
        The curve's mean squared error as a share of the linear fill's.
    standard_error : float
        Its standard error (from the paired differences).
    count : int
        Values held out (0: none, too few observed).
    """

    ratio: float
    standard_error: float
    count: int

    @property
    def worse(self) -> bool:
        """Whether the curve's fill is worse than the linear one beyond twice the standard error."""
        return self.count > 0 and self.ratio - 1 > 2 * self.standard_error


def _held_values(finite: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """``CHECK_SHARE`` of the observed values, drawn at random, none of a row's last one nor a feature's last one."""
    held = finite & (rng.random(finite.shape) < CHECK_SHARE)
    held[~(finite & ~held).any(axis=1)] = False
    held[:, ~(finite & ~held).any(axis=0)] = False
    return held


def _check(x: np.ndarray, work: np.ndarray, held: np.ndarray, params: PPAParams, linear_params: PPAParams,
           weights: np.ndarray | None = None) -> FillCheck:
    """The held-out values' fill by both models, each value weighed as its row in the fit (``weights``, None: equal)."""
    rows = held.any(axis=1)
    if held.sum() < 2:
        return FillCheck(1.0, 0.0, 0)
    truth = x[rows][held[rows]]
    curved = (fill(work[rows], params)[held[rows]] - truth) ** 2
    linear = (fill(work[rows], linear_params)[held[rows]] - truth) ** 2
    if weights is not None:  # a few heavy rows' fill is not outvoted by many light rows'
        w = np.broadcast_to(weights[:, None], x.shape)[rows][held[rows]]
        base = max(float(np.average(linear, weights=w)), np.finfo(float).tiny)
        return FillCheck(float(np.average(curved, weights=w)) / base, mean_error(curved - linear, w) / base, int(len(truth)))
    base = max(float(linear.mean()), np.finfo(float).tiny)
    return FillCheck(float(curved.mean()) / base, float(np.std(curved - linear) / np.sqrt(len(truth))) / base, int(len(truth)))
