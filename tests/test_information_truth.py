"""Entropy and multi-information against known truth: closed-form marginals, Gaussian total correlation,
monotone marginal maps (which leave total correlation unchanged), held-out estimation."""

import numpy as np
import pytest
from scipy.special import betaln, digamma

from ppa_xr import PPA
from ppa_xr.datasets import open_landsat8_sample
from ppa_xr.information import information_report, marginal_entropy, multi_information_reduction

LN2 = np.log(2)
GAUSS = 0.5 * np.log2(2 * np.pi * np.e)
T3 = (2 * (digamma(2) - digamma(1.5)) + np.log(np.sqrt(3)) + betaln(1.5, 0.5)) / LN2
CUBE = GAUSS + (np.log(3) - (np.euler_gamma + np.log(2))) / LN2  # h(X^3) = h(X) + E log|3 X^2|


def marginals(n, seed):
    rng = np.random.default_rng(seed)
    z = rng.normal(size=(n, 5))
    X = np.column_stack([z[:, 0], rng.uniform(size=n), np.exp(z[:, 2]), rng.standard_t(3, size=n), z[:, 4] ** 3])
    return X, np.array([GAUSS, 0.0, GAUSS, T3, CUBE])


def test_spacing_estimator_within_005_bits_at_1e5():
    X, truth = marginals(100_000, 0)
    error = marginal_entropy(X) - truth
    assert np.abs(error).max() < 0.05, error
    assert marginal_entropy(X, "histogram")[4] - truth[4] > 0.5  # the cusp defeats equal-width bins


def gaussian(d, n, seed):
    rng = np.random.default_rng(seed)
    A = rng.normal(size=(d, d)) / np.sqrt(d) + np.eye(d)
    cov = A @ A.T
    tc = 0.5 * (np.sum(np.log(np.diag(cov))) - np.linalg.slogdet(cov)[1]) / LN2
    return rng.multivariate_normal(np.zeros(d), cov, size=n), tc


@pytest.mark.parametrize("d", [10, 36])
def test_pca_removes_the_gaussian_total_correlation_held_out(d):
    X, tc = gaussian(d, 200_000, d)
    fit, held = X[:100_000], X[100_000:]
    pca = PPA(degree=1).fit(fit)
    reduction = multi_information_reduction(held, pca.transform(held)).total
    assert reduction == pytest.approx(tc, rel=0.002)


def test_ppa_never_claims_more_than_the_total_correlation():
    X, tc = gaussian(10, 200_000, 3)
    ppa = PPA(random_state=0).fit(X[:100_000])
    reduction = multi_information_reduction(X[100_000:], ppa.transform(X[100_000:])).total
    assert tc - 0.03 <= reduction <= tc + 0.01  # reached tc - 0.003 bits: no curve to find, PPA is PCA here


def test_cubed_marginals_reduction_matches_the_realised_value():
    """x^3 of correlated Gaussians: the reduction the fitted PCA achieves, against a 10x larger sample."""
    X, _ = gaussian(6, 1_100_000, 5)
    X = X**3
    pca = PPA(degree=1).fit(X[:100_000])
    held = X[100_000:200_000]
    estimate = multi_information_reduction(held, pca.transform(held)).total
    reference = multi_information_reduction(X[100_000:], pca.transform(X[100_000:])).total  # 1e6 held-out samples
    assert estimate == pytest.approx(reference, rel=0.01)


def test_report_is_held_out_by_default():
    cube = open_landsat8_sample()
    model = cube.ppa.fit(n_samples=20_000, random_state=0)
    held = information_report(cube, model, n_samples=20_000)
    inside = information_report(cube, model, held_out=False)
    assert held.attrs["estimated_on"].startswith("held out: pixels outside")
    assert inside.attrs["sample_size"] == model.sample_.size == 20_000
    # the fitting sample and the report's sample share no pixel
    from ppa_xr.cube import inputs, sampling

    da = inputs.feature_array(cube, "band")
    fit = sampling.sample_features(da, "band", 20_000, 0)
    report = sampling.sample_features(da, "band", 20_000, 0, exclude=sampling.fitted_shares(da, "band", model.sample_))
    rows = lambda v: {tuple(r) for r in v.tolist()}  # noqa: E731
    assert len(rows(fit.values) & rows(report.values)) < 20  # only repeated pixel values can coincide


def test_in_sample_bias_follows_the_documented_formula():
    """Fitting and estimating on the same n samples adds about d (d - 1) / (4 n ln 2) bits."""
    d, n = 36, 2000
    excess = []
    for seed in range(4):
        X, _ = gaussian(d, 2 * n, seed)
        pca = PPA(degree=1).fit(X[:n])
        in_sample = multi_information_reduction(X[:n], pca.transform(X[:n])).total
        held_out = multi_information_reduction(X[n:], pca.transform(X[n:])).total
        excess.append(in_sample - held_out)
    formula = d * (d - 1) / (4 * n * LN2)
    assert 0.5 * formula < np.mean(excess) < 2 * formula  # measured: 0.29 bits against 0.23


def _rounded(X, levels):
    """Each band quantized as a sensor does: ``levels`` equal cells over its range, numbered 0..levels-1."""
    low, high = X.min(axis=0), X.max(axis=0)
    return np.minimum(np.floor((X - low) / (high - low) * levels), levels - 1)


@pytest.mark.parametrize("levels, tolerance", [(256, 0.003), (64, 0.05)])  # reached 0.0008 and 0.014 relative
def test_quantized_gaussian_bands_keep_their_total_correlation(levels, tolerance):
    """A Gaussian with known total correlation, each band rounded to a uint8-like grid: dequantized, PCA recovers it."""
    X, tc = gaussian(10, 100_000, 2)
    Q = _rounded(X, levels)
    pca = PPA(degree=1).fit(Q[:50_000])
    assert multi_information_reduction(Q[50_000:], pca).total == pytest.approx(tc, rel=tolerance)
    with pytest.raises(ValueError, match=r"columns \[0, 1, .*\] of X are quantized.*pass the map"):
        multi_information_reduction(Q[50_000:], pca.transform(Q[50_000:]))  # an output cannot be dequantized


@pytest.mark.parametrize("levels, tolerance", [(256, 0.005), (64, 0.10)])  # reached 0.0016 and 0.075 relative
def test_quantized_uniform_marginals_match_the_unrounded_estimate(levels, tolerance):
    """The same dependence with uniform marginals (a Gaussian copula): quantized, against the estimate before."""
    from scipy.stats import norm

    X, _ = gaussian(10, 100_000, 2)
    U = norm.cdf(X / X.std(axis=0))
    unrounded = multi_information_reduction(U[50_000:], PPA(degree=1).fit(U[:50_000])).total
    Q = _rounded(U, levels)
    assert multi_information_reduction(Q[50_000:], PPA(degree=1).fit(Q[:50_000])).total == pytest.approx(unrounded, rel=tolerance)


def test_discrete_columns_are_spread_over_their_cells_and_continuous_ones_left_alone():
    from ppa_xr.information import dequantized, discrete_columns

    rng = np.random.default_rng(0)
    counts = rng.integers(1, 6, size=(5000, 2))
    X = np.column_stack([rng.integers(0, 256, 5000), rng.integers(0, 40, 5000) * 0.25 + 3, counts[:, 0] / counts[:, 1],
                         rng.normal(size=5000), rng.integers(0, 5000, 5000) * 1.0])
    np.testing.assert_array_equal(discrete_columns(X), [True, True, True, False, False])  # the last: as many levels as rows
    Y = dequantized(X)
    np.testing.assert_array_equal(Y[:, 3:], X[:, 3:])
    assert np.abs(Y[:, 0] - X[:, 0]).max() <= 0.5 and np.abs(Y[:, 1] - X[:, 1]).max() <= 0.125  # within the grid's cell
    assert len(np.unique(Y[:, 2])) == 5000 and (Y[:, 0] - X[:, 0]).std() == pytest.approx(np.sqrt(1 / 12), rel=0.05)
    values = np.unique(X[:, 2])  # ratios of small counts: an irregular grid, each value keeps its own cell
    cell = np.searchsorted((values[1:] + values[:-1]) / 2, Y[:, 2])
    np.testing.assert_array_equal(values[cell], X[:, 2])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dequantized_from_the_sorted_columns_is_the_same_sample(seed):
    """The report's columns are sorted already: read from that sort (integer values by a table, others as before),
    the dequantized sample is the same bit for bit, with NaN, +-inf, signed zeros and a constant column."""
    from ppa_xr.core.entropy import column_sorts
    from ppa_xr.information import dequantized, discrete_columns

    rng = np.random.default_rng(seed)
    n = 6000
    X = np.column_stack([rng.integers(0, 1024, n) * 1.0 + 7000, rng.integers(-3, 3, n) * 1.0, rng.integers(0, 40, n) * 0.25 + 3,
                         np.full(n, 5.0), rng.integers(0, 50, n) * 1e18, rng.normal(size=n)])
    X[::97, 0], X[5, 1], X[6, 1], X[7, 1], X[8, 2] = np.nan, np.inf, -0.0, 0.0, -np.inf
    S = column_sorts(X)
    discrete = discrete_columns(X, S)
    np.testing.assert_array_equal(discrete, [True, True, True, True, True, False])
    expected = dequantized(X, seed, discrete)  # each column's cells by np.unique
    np.testing.assert_array_equal(dequantized(X, seed, discrete, S), expected)
    np.testing.assert_array_equal(dequantized(X, seed, sorted_columns=S), expected)


def test_report_on_a_uint8_scene_is_dequantized_and_its_maps_agree_with_the_totals():
    from ppa_xr.datasets import open_rgb_byte

    cube = open_rgb_byte(masked=True)
    model = cube.ppa.fit(n_samples=20_000, random_state=0)
    report = cube.ppa.information_report(model, n_components=2, n_samples=20_000).compute()
    np.testing.assert_array_equal(report.attrs["dequantized"], [1, 1, 1])
    for method in ("ppa", "pca"):
        total = float(report[f"mi_reduction_per_dim_{method}"])
        assert total == pytest.approx(0.59, abs=0.03)  # bits per band of an 8-bit scene: reached 0.591 (PPA and PCA)
        mean_map = float(report[f"mi_reduction_{method}"].mean()) / 3
        assert mean_map == pytest.approx(total, abs=0.05)


def test_spacing_estimator_has_its_derived_expectation_on_uniform_samples():
    """For n uniform values the bias-corrected estimate has the exact expectation ``log(n+1) - psi(n+1)`` nats:
    each bin's ``(n+1) w`` is ``n+1`` times a Beta(c, n+1-c) spacing, ``E log w = psi(c) - psi(n+1)``. Leaving out
    the digamma correction (0.15 bits here) or writing ``n`` for ``n + 1`` (0.05 bits) misses it."""
    n, repeats = 30, 4000
    estimates = marginal_entropy(np.random.default_rng(0).uniform(size=(n, repeats)))
    expected = (np.log(n + 1) - digamma(n + 1)) / LN2
    assert estimates.mean() == pytest.approx(expected, abs=0.012)  # 4 standard errors of the mean


@pytest.mark.parametrize("estimator", ["spacing", "histogram"])
def test_weighted_entropies_are_per_column(estimator):
    """Each column's weighted entropy is that column's alone, whatever the others: the weights follow the rows
    into every column. A density p(x) = 2x on [0, 1], drawn as uniform rows weighted by 2x, has
    h = 1/(2 ln 2) - 1 = -0.279 bits (its uniform draw: 0); on 5 columns at n = 40,000 both estimators were
    within 0.006 bits of the truth at seeds 0-2."""
    rng = np.random.default_rng(0)
    u = rng.uniform(size=(40_000, 5))
    weights = 2 * u[:, 2]
    together = marginal_entropy(u, estimator, weights=weights)
    for j in range(5):
        assert together[j] == marginal_entropy(u[:, [j]], estimator, weights=weights)[0]
    assert together[2] == pytest.approx(0.5 / LN2 - 1, abs=0.02)
    assert np.all(np.abs(np.delete(together, 2)) < 0.02)  # weights independent of those columns: still uniform


def test_the_histogram_entropy_carries_the_miller_madow_correction():
    """``(m - 1) / (2 n ln 2)`` bits, ``m`` the non-empty bins (module docstring of core/entropy.py)."""
    from ppa_xr.core.entropy import Histograms

    X = np.random.default_rng(1).standard_t(3, (900, 3))
    hist = Histograms.fit(X)
    m = np.count_nonzero(hist.counts, axis=1)
    np.testing.assert_allclose(hist.entropy() - hist.entropy(miller_madow=False), (m - 1) / (2 * 900 * LN2), rtol=1e-12)


def test_a_weighted_spacing_carries_the_mean_weight_of_its_two_ends():
    """The bins' spacing weights sum to ``sum_i (v_(i) + v_(i+1)) / 2 = n - (v_(1) + v_(n)) / 2`` over each column's
    order statistics (``v`` the weights at mean 1), so the lowest and highest values count half: here they are
    given weights 20 and 0.1 in the first column."""
    from ppa_xr.core.entropy import EqualMassBins

    rng = np.random.default_rng(0)
    X, w = rng.normal(size=(1000, 2)), rng.uniform(0.5, 2, 1000)
    order = np.argsort(X, axis=0)
    w[order[0, 0]], w[order[-1, 0]] = 20.0, 0.1
    v = w / w.mean()
    ends = v[order[0]] + v[order[-1]]
    np.testing.assert_allclose(EqualMassBins.fit(X, weights=w).weights.sum(axis=1) * 999, 1000 - ends / 2, rtol=1e-12)
