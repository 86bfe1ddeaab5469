"""Pins: each test fails on a named mutant of the code it covers (a mutation audit found them unpinned)."""

import warnings
from statistics import NormalDist

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA
from ppa_xr.core.degrees import axis_significance, select_degree, significant
from ppa_xr.core.entropy import discrete_columns
from ppa_xr.core.errors import LEVEL, compare_errors
from ppa_xr.core.keys import held_by
from ppa_xr.core.params import PPAParams
from ppa_xr.cube import sampling
from ppa_xr.cube.noise import shift_difference_covariance
from ppa_xr.cube.sampling import sample_cubes

from .conftest import curved_sample


# --------------------------------------------------------------------------- compare_errors: level, bound, floor
def rotation_map(R: np.ndarray) -> PPAParams:
    """The linear map whose leading vectors are the rows of ``R`` (mean 0): keeping k components projects on ``R[:k]``."""
    d = len(R)
    return PPAParams(mean=np.zeros(d), rotation=R, degrees=np.ones(d - 1, np.int64), center=np.zeros(d - 1), scale=np.ones(d - 1),
                     forward_bias=np.zeros((d - 1, d)), forward=np.zeros((d - 1, 1, d)), inverse_bias=np.zeros((d - 1, d)),
                     inverse=np.zeros((d - 1, 1, d)), explained_variance=np.ones(d), pca_rotation=R, pca_variance=np.ones(d))


#: x ~ N(0, diag(VARIANCES)); the baseline keeps the axes in order (PCA), the other map a fixed rotation of them
VARIANCES = np.array([4.0, 3.0, 2.0, 1.0])
OTHER = np.linalg.qr(np.random.default_rng(3).normal(size=(4, 4)))[0].T


def truth(n: int) -> tuple[np.ndarray, np.ndarray]:
    """The true error ratio at k = 1..3 and the standard error of its estimate on n pixels, in closed form: with
    ``P`` the projector on the discarded rows, ``e(k) = tr(P S)``, and for Gaussian x the per-pixel
    ``a - r b = x^T (P_1 - r P_2) x`` has variance ``2 tr((M S)^2)``."""
    S = np.diag(VARIANCES)
    ratios, ses = [], []
    for k in range(1, 4):
        P1, P2 = OTHER[k:].T @ OTHER[k:], np.eye(4)[k:].T @ np.eye(4)[k:]
        r = np.trace(P1 @ S) / np.trace(P2 @ S)
        M = (P1 - r * P2) @ S
        ratios.append(r)
        ses.append(np.sqrt(2 * np.trace(M @ M)) / (np.sqrt(n) * np.trace(P2 @ S)))
    return 100 * np.array(ratios), 100 * np.array(ses)


def draw(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 4)) * np.sqrt(VARIANCES)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_ratio_and_its_standard_error_match_their_closed_forms(seed):
    """Over 40 seeds the estimate's deviation from the true ratio was at most 2.2 of its closed-form standard errors
    (sd 1.0), and the standard error's own relative deviation at most 3.0% (sd 1.1-1.3%)."""
    ratio, se = truth(20_000)
    assert 105 < ratio[0] < 108 and 140 < ratio[1:].min()  # far from 1, where r and r^2 differ
    comparison = compare_errors(rotation_map(OTHER), draw(20_000, seed), baseline=rotation_map(np.eye(4)))
    assert np.all(np.abs(comparison.relative - ratio) <= 4 * se)  # se is 0.3-1.0 % of the ratio
    np.testing.assert_allclose(comparison.se, se, rtol=0.06)  # se / sqrt(n) or r for r^2 are far off
    z = NormalDist().inv_cdf(1 - LEVEL / 3)  # Bonferroni over the 3 values of k
    np.testing.assert_allclose(comparison.low(), comparison.relative - z * comparison.se, rtol=1e-15)
    np.testing.assert_allclose(comparison.low(1), comparison.relative[:1] - NormalDist().inv_cdf(1 - LEVEL) * comparison.se[:1])


@pytest.mark.parametrize("weighted", [False, True])
def test_the_standard_error_is_the_documented_formula_at_small_n(weighted):
    """``se(r)^2 = n/(n-1) sum_i v_i^2 (e_i - e_v)^2 / (sum_i v_i b_i)^2``, ``e_i = a_i - r b_i``, ``e_v`` their
    ``v``-weighted mean, ``v`` the weights (1 without): on 7 rows, where n/(n-1) is 17% and the centring matters;
    the means are the weighted means of the rows' errors."""
    X = draw(7, 4)
    w = np.random.default_rng(5).uniform(0.2, 5, 7) if weighted else np.ones(7)
    comparison = compare_errors(rotation_map(OTHER), X, baseline=rotation_map(np.eye(4)), weights=w if weighted else None)
    a = np.stack([np.sum((X @ OTHER[k:].T) ** 2, axis=1) for k in range(1, 4)], axis=1)
    b = np.stack([np.sum(X[:, k:] ** 2, axis=1) for k in range(1, 4)], axis=1)
    v = w / w.mean()
    r = (v @ a) / (v @ b)
    e = a - r * b
    e_v = v @ e / v.sum()
    se = np.sqrt(7 / 6 * (v**2 @ (e - e_v) ** 2)) / (v @ b)
    np.testing.assert_allclose(comparison.relative, 100 * r, rtol=1e-12)
    np.testing.assert_allclose(comparison.se, 100 * se, rtol=1e-10)
    np.testing.assert_allclose(comparison.ppa, w @ a / w.sum(), rtol=1e-12)
    np.testing.assert_allclose(comparison.pca, w @ b / w.sum(), rtol=1e-12)


def test_the_lower_bound_covers_the_true_ratio_at_its_level():
    """600 samples of 2,000 pixels: the bound exceeds the true ratio at each k about LEVEL / 3 of the time (10 of 600;
    measured 12, 10, 9) and at some k at most LEVEL (30; measured 29); without Bonferroni each k would miss 30 times."""
    ratio, _ = truth(2000)
    maps = rotation_map(OTHER), rotation_map(np.eye(4))
    missed = np.array([compare_errors(maps[0], draw(2000, 1000 + seed), baseline=maps[1]).low() > ratio for seed in range(600)])
    assert missed.sum(axis=0).max() <= 20 and missed.any(axis=1).sum() <= 40


def test_errors_beyond_the_rank_read_100():
    """Rank-2 data in 4 dimensions: beyond k = 2 both errors are float64 rounding, held at the floor: the ratio is 100."""
    rng = np.random.default_rng(0)
    t = rng.normal(size=(3000, 2))
    X = np.column_stack([t[:, 0], t[:, 1], t[:, 0] + 2 * t[:, 1], t[:, 0] - t[:, 1]])
    model = PPA(degree=2, random_state=0).fit(X)
    relative = compare_errors(model.params_, X).relative
    assert relative[0] < 100 and np.all(relative[1:] == 100)  # once 1e-18 at k = 2, PPA's rounding unfloored


def test_the_error_curve_is_every_squared_error_down_to_zero():
    """Entry ``k - 1`` of :func:`kernels.error_curve` is the squared error of ``k`` components, for every ``k = 1..d``:
    with all d kept, 0."""
    from ppa_xr.core import kernels

    X = curved_sample(400, d=5, seed=3)
    params = PPA(random_state=0, degree=3).fit(X).params_
    curve = kernels.error_curve(X, params)
    for k in range(1, 6):
        np.testing.assert_allclose(curve[:, k - 1], kernels.squared_error(X, params, k), rtol=1e-9, atol=1e-12)
    assert np.all(curve[:, -1] == 0)


# --------------------------------------------------------------------------- held out means held out
@pytest.fixture(scope="module")
def fitted(landsat):
    cube = landsat.isel(x=slice(0, 64), y=slice(0, 64)).chunk({"x": 32, "y": 32})
    return cube, cube.ppa.fit(degree=(1, 2), random_state=0)


def test_evaluate_and_the_shift_check_leave_the_fitting_pixels_out(fitted, monkeypatch):
    cube, model = fitted
    fitting = model.sample_.size
    assert fitting == 2048  # half of the 4,096 pixels, by default
    with pytest.warns(UserWarning, match=r"only 2048 valid pixels lie outside the model's fitting sample, fewer than n_samples=5000"):
        assert cube.ppa.evaluate(model, n_samples=5000).attrs["n_pixels"] == 4096 - fitting
    drawn = []
    real = sampling.held_out
    monkeypatch.setattr(sampling, "held_out", lambda *args, **kwargs: drawn.append(real(*args, **kwargs)) or drawn[-1])
    with warnings.catch_warnings():
        warnings.simplefilter("error", ppa_xr.ShiftWarning)
        cube.ppa.transform(model, check=True)  # the check reads all 4 chunks
    assert drawn[0].n_valid == 4096 - fitting and not np.isin(drawn[0].index, np.flatnonzero(held_by(model.sample_.cubes, np.arange(4096)))).any()


# --------------------------------------------------------------------------- degree selection
class _Held:
    """Held-out errors as a cross-validation gives them: candidate 0 (degree 1) all zero, candidate 1 (degree 2) ``diff``."""

    def __init__(self, diff: np.ndarray) -> None:
        self.diff = diff

    def held_out(self, degrees: list[int], per_axis: bool = False) -> np.ndarray:
        errors = np.stack([self.diff if degree == 2 else np.zeros_like(self.diff) for degree in degrees])  # (candidates, groups, m)
        return errors if per_axis else errors.sum(axis=2)


def differences(gains: dict[int, float], groups: int = 10, axes: int = 200) -> np.ndarray:
    """(groups, axes) held-out error differences whose t statistic on axis ``j`` is ``gains[j]`` (0 elsewhere):
    ``D_i = -mu + e_i`` with ``e_i = +-1`` gives ``T / se = mu sqrt(G - 1)``."""
    signs = np.where(np.arange(groups) % 2, 1.0, -1.0)[:, None]
    mu = np.zeros(axes)
    for axis, t in gains.items():
        mu[axis] = t / np.sqrt(groups - 1)
    return signs - mu


def test_per_axis_selection_shares_its_level_among_the_residual_axes():
    assert axis_significance(200) == pytest.approx(3.156, abs=1e-3) and axis_significance(1) == pytest.approx(0.994, abs=1e-3)
    faint = select_degree(_Held(differences({0: 2.5})), [1, 2], per_axis=True)
    assert faint.degree == 1  # 2.5 standard errors on one of 200 axes: noise (at 2 candidates' 1.4 it would pass)
    strong = select_degree(_Held(differences({0: 4.0, 7: 3.5})), [1, 2], per_axis=True)
    assert strong.degree == 2 and np.array_equal(strong.axes, np.eye(200)[:, [0, 7]]) and strong.others.shape == (200, 198)


def test_significance_counts_groups_as_g_over_g_minus_1():
    diff = differences({0: 0.98}, axes=1).T  # 0.98 standard errors with the G / (G - 1) factor: 1.03 without it
    assert not significant(diff, 1.0)[0] and significant(diff, 0.97)[0]


@pytest.mark.parametrize("per_axis", [False, True])
def test_each_candidate_degree_fits_its_own_terms(per_axis):
    """Candidate degree g is fitted on the first g + 1 terms of the design: on a residual that is exactly the
    quadratic term, degrees 2 and 3 leave no held-out error (``w^T G_i w - 2 w^T C_i = -||Y_i||^2``), degree 1
    leaves all of it."""
    from ppa_xr.core.degrees import CrossValidation, Folds, group_grams

    rng = np.random.default_rng(0)
    t = rng.uniform(-1, 1, 600)
    design = np.stack([np.ones_like(t), t, 1.5 * t**2 - 0.5, 2.5 * t**3 - 1.5 * t])  # Legendre P0..P3
    Y = np.column_stack([design[2], 0.5 * design[2]])
    folds, order = Folds.make(np.repeat(np.arange(20), 30), 600, 5, rng)
    gram, cross = group_grams(np.ascontiguousarray(design[None][:, :, order]), Y[order], folds.bounds)
    errors = CrossValidation(gram[:, 0], cross[:, 0], folds).held_out([1, 2, 3], per_axis)
    energy = np.add.reduceat((Y[order] ** 2), folds.bounds[:-1], axis=0)  # (groups, m)
    energy = energy if per_axis else energy.sum(axis=1)
    np.testing.assert_allclose(errors[1:], np.broadcast_to(-energy, errors[1:].shape), rtol=1e-9, atol=1e-9 * energy.max())
    assert np.all(errors[0] > -0.1 * energy)  # the constant and linear terms explain almost none of it


# --------------------------------------------------------------------------- quantized columns
def test_quantized_columns_count_distinct_finite_values():
    base = np.repeat(np.arange(5.0), 2)  # 10 rows, 5 levels: half the rows, quantized
    six = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, 5.0])  # 6 levels of 10 rows: not
    with_inf = np.array([0, 0, 1, 1, 2, 2, 3, 3, 4, np.inf])  # 5 levels and an inf, which is no level
    with_ninf = np.array([-np.inf, 0, 1, 1, 2, 2, 3, 3, 4, 4])
    with_nan = np.array([0, 0, 1, 1, 2, 2, 3, 4, 4, np.nan])
    all_bad = np.array([np.nan, np.inf, -np.inf, np.nan, np.inf, np.inf, -np.inf, np.nan, np.nan, np.inf])
    X = np.column_stack([base, six, with_inf, with_ninf, with_nan, all_bad])
    np.testing.assert_array_equal(discrete_columns(X), [True, False, True, True, True, True])
    np.testing.assert_array_equal(discrete_columns(np.column_stack([np.arange(6.0).repeat(2)[:11]])), [False])  # 6 of 11


# --------------------------------------------------------------------------- the noise estimate
def noisy(shape: dict[str, int], seed: int = 0) -> xr.DataArray:
    rng = np.random.default_rng(seed)
    return xr.DataArray(rng.normal(size=tuple(shape.values())), dims=tuple(shape))


def manual_noise(values: np.ndarray) -> np.ndarray:
    """``cov`` of the neighbour differences along y and x, pairs with every band finite, / 2, each direction about
    its own mean: ``values`` as (..., y, x, band), any leading dims (dates) pooled."""
    d = values.shape[-1]
    pairs = [(values[..., :, 1:, :] - values[..., :, :-1, :]).reshape(-1, d), (values[..., 1:, :, :] - values[..., :-1, :, :]).reshape(-1, d)]
    kept = [p[np.isfinite(p).all(axis=1)] for p in pairs]
    return sum(np.cov(p.T, ddof=1) * (len(p) - 1) for p in kept) / sum(len(p) - 1 for p in kept) / 2


def test_a_pixel_with_one_nan_band_drops_only_its_pairs():
    cube = noisy({"band": 3, "y": 20, "x": 30})
    cube[1, 4, 6] = np.nan  # one band of one pixel
    estimate = shift_difference_covariance(cube)
    assert np.isfinite(estimate).all()
    np.testing.assert_allclose(estimate, manual_noise(cube.transpose("y", "x", "band").values), rtol=1e-12)


def test_neighbours_are_spatial_whatever_the_dimension_order():
    """x and y named: differences along them only, not along time (the last two pixel dims here), wherever the dims lie."""
    jumps = xr.DataArray(100 * np.random.default_rng(1).normal(size=4), dims="time")  # the dates differ
    cube = noisy({"band": 3, "x": 12, "y": 10, "time": 4}) + jumps
    estimate = shift_difference_covariance(cube)
    np.testing.assert_allclose(estimate, manual_noise(cube.transpose("time", "y", "x", "band").values), rtol=1e-12)
    assert np.diag(estimate).max() < 2  # differences across dates would read ~1e4


def test_too_few_neighbour_pairs_are_refused():
    with pytest.raises(ValueError, match="only 1 neighbour pairs with every feature valid, fewer than the 3 features: the noise "
                                         r"covariance cannot be estimated; give one \(noise_cov=...\)"):
        noisy({"band": 3, "y": 1, "x": 3}).ppa.fit(noise_cov="shift", degree=1)
    with pytest.raises(ValueError, match="only 0 neighbour pairs"):
        shift_difference_covariance(noisy({"band": 3, "y": 1, "x": 2}))


# --------------------------------------------------------------------------- pooled samples
def test_pooled_cubes_keep_distinct_groups_and_seeds():
    low, high = noisy({"band": 2, "y": 30, "x": 30}) - 100, noisy({"band": 2, "y": 30, "x": 30}, seed=1) + 100  # one grid
    pooled = sample_cubes([low, high], "band", 900, 0)
    values, groups, sample = pooled.values, pooled.groups, pooled.sample
    mine = values[:, 0] > 0
    assert not set(groups[mine]) & set(groups[~mine])  # once both cubes' last blocks shared an id
    first, second = sample.cubes
    assert first.seed != second.seed
    index = np.arange(900)
    a, b = held_by((first,), index), held_by((second,), index)
    assert a.sum() + b.sum() == 900 and (a & b).sum() < 0.7 * min(a.sum(), b.sum())  # one seed would draw the same pixels
