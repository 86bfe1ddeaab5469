"""``PPA.score_samples`` and ``PPA.score``: the log-likelihood of Gaussian outputs through a volume-preserving map
(``ppa_xr.core.likelihood``), scikit-learn's PCA score at ``degree=1``, and what GridSearchCV compares without a scoring."""

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.decomposition import PCA
from sklearn.model_selection import GridSearchCV, cross_val_score

from ppa_xr import PPA
from ppa_xr.core.likelihood import output_variances
from ppa_xr.datasets import load_table
from tests.conftest import curved_sample


@pytest.fixture(scope="module")
def sat():
    return load_table("Sat").data


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_components", [None, 5])
def test_degree_one_is_sklearn_pca_score(sat, seed, n_components):
    """PCA is PPA with every degree 1, and its variances times n / (n - 1) are scikit-learn's: the same Gaussian,
    the dropped components' variances pooled into one noise variance as probabilistic PCA (Sat, 36 features)."""
    order = np.random.default_rng(seed).permutation(len(sat))
    train, test = sat[order[:3000]], sat[order[3000:]]
    ppa, pca = PPA(n_components, degree=1, random_state=seed).fit(train), PCA(n_components).fit(train)
    np.testing.assert_allclose(ppa.score_samples(test), pca.score_samples(test), rtol=1e-9)
    np.testing.assert_allclose(ppa.score(test), pca.score(test), rtol=1e-9)
    np.testing.assert_allclose(ppa.score(train), pca.score(train), rtol=1e-9)


def test_a_curved_models_pca_scores_as_sklearn_pca(curved):
    """``pca_`` of a curved fit keeps the sample's size, so its score is scikit-learn's PCA's of the same sample."""
    model = PPA(degree=3, random_state=0).fit(curved)
    test = curved_sample(1000, seed=7)
    np.testing.assert_allclose(model.pca_.score_samples(test), PCA().fit(curved).score_samples(test), rtol=1e-9)


@pytest.mark.parametrize("n_components", [None, 2])
def test_score_is_the_sum_of_the_outputs_gaussian_log_densities(curved, n_components):
    """The map preserves volume, so ``log p(x) = sum_p log N(r_p; 0, Lambda_p)``: the same numbers from the components
    and scipy's normal density, the dropped outputs' variance their (unbiased) mean."""
    model = PPA(n_components, degree=3, random_state=0).fit(curved)
    test = curved_sample(500, seed=3)
    r = PPA(degree=3, random_state=0).fit(curved).transform(test)  # every output
    n, d = model.n_effective_, curved.shape[1]
    variance = model.explained_variance_ * n / (n - 1)
    k = d if n_components is None else n_components
    if k < d:
        variance[k:] = variance[k:].mean()
    expected = norm.logpdf(r, scale=np.sqrt(variance)).sum(axis=1)
    np.testing.assert_allclose(model.score_samples(test), expected, rtol=1e-10)
    np.testing.assert_allclose(output_variances(model.params_, k, n), variance, rtol=1e-12)


@pytest.mark.parametrize("n_components", [None, 1, 3])
def test_score_on_the_fitting_sample_is_the_gaussian_entropy_of_its_variances(curved, n_components):
    """On the fitting sample ``mean r_p^2 = explained_variance_``, so whatever is kept the score is
    ``-1/2 sum_p log(2 pi Lambda_p) - d (n - 1) / (2 n)``: the volume the outputs fill, and nothing else."""
    model = PPA(n_components, degree=3, random_state=0).fit(curved)
    n, d = len(curved), curved.shape[1]
    variance = output_variances(model.params_, model.n_components_, n)
    np.testing.assert_allclose(model.score(curved), -0.5 * np.sum(np.log(2 * np.pi * variance)) - d * (n - 1) / (2 * n), rtol=1e-10)


def test_a_scaled_sample_scores_lower_by_the_log_of_its_volume(curved):
    """Data times 8 (a power of two: the fit is the same map, scaled exactly) fill ``8^d`` times the volume: each
    density is ``8^-d`` times, so ``log p`` drops by ``d log 8``. A standardizing model converts its whitened
    units' density by ``log |det W| = -sum_j log std_j``: the density of the data divided by their standard deviations."""
    test = curved_sample(500, seed=5)
    d = curved.shape[1]
    model, scaled = PPA(degree=3, random_state=0).fit(curved), PPA(degree=3, random_state=0).fit(8 * curved)
    np.testing.assert_allclose(scaled.score_samples(8 * test), model.score_samples(test) - d * np.log(8), rtol=1e-9)
    std = curved.std(axis=0)
    standardized, plain = PPA(degree=3, standardize=True, random_state=0).fit(curved), PPA(degree=3, random_state=0).fit(curved / std)
    np.testing.assert_allclose(standardized.score_samples(test), plain.score_samples(test / std) - np.log(std).sum(), rtol=1e-8)


def test_curves_score_higher_than_pca_on_held_out_curved_data():
    """On points around a curve PPA's outputs fill less volume than PCA's, and unseen points are likelier under it.
    Measured over seeds 0-7 (2000 rows each, held out on 2000 others): 2.74 +- 0.06 nats per sample, least 2.68."""
    for seed in range(3):
        train, test = curved_sample(2000, seed=seed), curved_sample(2000, seed=100 + seed)
        model = PPA(degree=3, random_state=seed).fit(train)
        assert model.score(test) > model.pca_.score(test) + 2.3
        assert model.score(test) > PCA().fit(train).score(test) + 2.3


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_grid_search_picks_curves_on_curved_data_without_a_scoring(seed):
    """``score`` makes GridSearchCV and cross_val_score work as with PCA: on curved data degree 3 wins by a margin
    (measured over seeds 0-7 with 5 folds: -3.40..-3.50 nats for degree 1, -0.61..-0.82 for degree 3)."""
    X = curved_sample(2000, seed=seed)
    search = GridSearchCV(PPA(random_state=seed), {"degree": [1, 3]}).fit(X)
    assert search.best_params_ == {"degree": 3}
    low, high = search.cv_results_["mean_test_score"]
    assert high > low + 2
    folds = [search.cv_results_[f"split{i}_test_score"][1] for i in range(5)]
    np.testing.assert_allclose(cross_val_score(PPA(degree=3, random_state=seed), X), folds, rtol=1e-12)


def test_whiten_does_not_change_the_score_nor_does_a_saved_model(curved, tmp_path):
    """``whiten`` scales what transform returns, not the density; a saved model keeps its sample size (the n / (n - 1))."""
    model = PPA(2, degree=3, random_state=0).fit(curved)
    test = curved_sample(300, seed=9)
    np.testing.assert_array_equal(model.set_params(whiten=True).score_samples(test), model.set_params(whiten=False).score_samples(test))
    loaded = PPA.from_dataset(model.to_dataset())
    np.testing.assert_allclose(loaded.score_samples(test), model.score_samples(test), rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_table_scores_as_its_columns_were_fitted_without_a_warning(seed):
    """A model fitted on a DataFrame scores a DataFrame of its columns silently (every GridSearchCV fold does): the mean
    of its rows' scores."""
    import warnings

    import pandas as pd

    rows = curved_sample(600, seed=seed)
    X = pd.DataFrame(rows, columns=[f"b{i}" for i in range(rows.shape[1])])
    model = PPA(degree=3, random_state=seed).fit(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        score = model.score(X)
    assert score == pytest.approx(float(np.mean(model.score_samples(X))), rel=1e-14)


def test_missing_rows_score_nan_and_are_left_out_of_the_mean(curved):
    model = PPA(degree=3, random_state=0).fit(curved)
    test = curved_sample(300, seed=11)
    gappy = test.copy()
    gappy[[3, 17], [0, 2]] = np.nan, np.inf
    scores = model.score_samples(gappy)
    assert np.isnan(scores[[3, 17]]).all()
    kept = np.ones(len(test), bool)
    kept[[3, 17]] = False
    np.testing.assert_array_equal(scores[kept], model.score_samples(test[kept]))
    assert model.score(gappy) == pytest.approx(model.score(test[kept]), rel=1e-14)
    weights = np.random.default_rng(0).uniform(0, 2, len(test))
    assert model.score(gappy, sample_weight=weights) == pytest.approx(np.average(scores[kept], weights=weights[kept]), rel=1e-14)
    with pytest.raises(ValueError, match="none of the 2 rows is complete"):
        model.score(gappy[[3, 17]])
    with pytest.raises(ValueError, match="every complete row .* has sample_weight 0"):
        model.score(gappy[[3, 4, 17]], sample_weight=[1.0, 0.0, 1.0])


def test_a_model_fitted_in_the_span_of_its_samples_has_no_density_of_its_inputs():
    X = np.random.default_rng(0).normal(size=(10, 30))
    model = PPA(degree=1).fit(X)
    with pytest.raises(ValueError, match="has no density of the inputs"):
        model.score(X)


def test_the_cube_map_is_the_estimators_score_of_every_pixel(curved):
    """``cube.ppa.score_samples(model)``: lazy, chunk by chunk (bands first, as a raster), the estimator's numbers at every
    pixel, NaN at an invalid one; float32 stays float32."""
    import xarray as xr

    model = PPA(3, degree=3, random_state=0).fit(curved)
    table = curved_sample(40 * 30, seed=13)
    table[7, 1] = np.nan
    cube = xr.DataArray(table.T.reshape(4, 40, 30), dims=("band", "y", "x"), name="scene").chunk({"y": 16, "x": 10})
    out = cube.ppa.score_samples(model)
    assert out.chunks is not None and out.dims == ("y", "x") and out.name == "scene_log_likelihood"
    assert out.attrs["ppa_xr_n_components"] == 3 and "nats" in out.attrs["long_name"]
    values = out.values.reshape(-1)
    np.testing.assert_allclose(values, model.score_samples(table), rtol=1e-12)
    assert np.isnan(values[7]) and np.isfinite(np.delete(values, 7)).all()
    single = cube.astype(np.float32).ppa.score_samples(model)
    assert single.dtype == np.float32 and single.compute().dtype == np.float32
    np.testing.assert_allclose(single.values.reshape(-1), values, rtol=1e-4, atol=1e-4)  # float32 outputs: 1e-6 nats apart
    reduced = PPA(degree=1).fit(np.random.default_rng(0).normal(size=(3, 4)))
    with pytest.raises(ValueError, match="has no density of the inputs"):
        cube.ppa.score_samples(reduced)  # refused as the graph is built, not as it runs


@pytest.mark.parametrize("whitening", [{}, {"standardize": True}, {"noise_cov": np.diag([0.5, 2.0, 1.0, 0.1]) + 0.05}])
def test_every_straight_model_is_the_gaussian_of_the_sample_covariance(curved, whitening):
    """With every degree 1 and every component kept, whatever ``W`` the map acts through (standardizing, noise
    whitening), the outputs diagonalize the sample covariance ``C``, and ``log |det W|`` brings their density back to the
    inputs': the score is that of ``N(mean, C)`` (``C`` divided by ``n - 1``)."""
    from scipy.stats import multivariate_normal

    model = PPA(degree=1, **whitening).fit(curved)
    test = curved_sample(500, seed=17)
    expected = multivariate_normal(curved.mean(axis=0), np.cov(curved, rowvar=False)).logpdf(test)
    np.testing.assert_allclose(model.score_samples(test), expected, rtol=1e-9)
