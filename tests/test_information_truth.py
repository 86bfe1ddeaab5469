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
    assert reduction <= tc + 0.05 * 2 * 10  # the estimator's stated error, 0.05 bits per marginal


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
    from ppa_xr import xarray_ops

    da = xarray_ops.feature_array(cube, "band")
    fit = xarray_ops.sample_features(da, "band", 20_000, 0)
    report = xarray_ops.sample_features(da, "band", 20_000, 0, exclude=model.sample_)
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
