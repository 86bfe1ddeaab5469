"""Out-of-sample fidelity: truncated reconstruction, the one-pass error curve, honest degree
selection, chunking-invariant sampling and a like-for-like PCA baseline."""


import dask
import numpy as np
import pytest
import xarray as xr
from hypothesis import given, settings
from hypothesis import strategies as st

from ppa_xr import PPA, load_model
from ppa_xr.core import degrees, kernels
from ppa_xr.core.ppa import fit_params
from ppa_xr.core.spec import Spec
from ppa_xr.core.leading import pca_leading_vector
from ppa_xr.information import information_report

from .conftest import as_older_file, curved_sample


def squared_errors(model, X, k):
    return np.sum((model.inverse_transform(model.transform(X)[:, :k]) - X) ** 2, axis=1)


def test_issue_example_is_no_longer_worse_than_pca():
    rng = np.random.default_rng(0)
    t = rng.uniform(-1, 1, 5000)
    X = np.column_stack([rng.normal(size=5000), t, t**2])
    model = PPA(degree=2).fit(X)
    ppa, pca = model.reconstruction_mse(X), model.pca_.reconstruction_mse(X)
    assert np.all(ppa <= pca * (1 + 1e-12))
    assert ppa[1] < 0.01 * pca[1]  # k = 2: the parabola is explained


@st.composite
def curved_data(draw):
    """Random curved clouds: latent t through random polynomial/trigonometric maps, random rotation, noise."""
    seed = draw(st.integers(0, 2**32 - 1))
    d = draw(st.integers(2, 6))
    n = draw(st.integers(60, 600))
    rng = np.random.default_rng(seed)
    t = rng.uniform(-1, 1, n)
    shapes = [t, t**2, t**3, np.sin(3 * t), np.cos(2 * t), np.abs(t)]
    cols = [rng.normal() * shapes[rng.integers(len(shapes))] for _ in range(d)]
    X = np.column_stack(cols) + draw(st.sampled_from([0.0, 0.01, 0.1, 1.0])) * rng.normal(size=(n, d))
    rotation = np.linalg.qr(rng.normal(size=(d, d)))[0]
    return X @ rotation * draw(st.sampled_from([1e-3, 1.0, 1e3])), draw(st.sampled_from([1, 3, (1, 2, 3, 4, 5)]))


@settings(max_examples=60, deadline=None)
@given(curved_data())
def test_training_error_never_above_pca_at_any_k(case):
    X, degree = case
    model = PPA(degree=degree, random_state=0).fit(X)
    ppa, pca = model.reconstruction_mse(X), model.pca_.reconstruction_mse(X)
    total = np.mean(np.sum((X - X.mean(0)) ** 2, axis=1))
    assert np.all(ppa <= pca + 1e-9 * total)


@pytest.mark.parametrize("degree", [2, (1, 2, 3, 4, 5)])
def test_one_pass_curve_equals_the_explicit_inverse(degree):
    X = curved_sample(2000, d=6)
    model = PPA(degree=degree, random_state=0).fit(X)
    curve = kernels.error_curve(X, model.params_)
    assert curve.shape == X.shape
    for k in range(1, X.shape[1] + 1):
        explicit = squared_errors(model, X, k)
        np.testing.assert_allclose(curve[:, k - 1], explicit, rtol=0, atol=1e-10 * explicit.max() + 1e-20)
        np.testing.assert_allclose(kernels.squared_error(X, model.params_, k), explicit, rtol=0, atol=1e-10 * explicit.max() + 1e-20)


def test_one_pass_curve_on_feature_major_float32_chunks():
    X = curved_sample(3000, d=5).astype(np.float32)
    model = PPA(random_state=0).fit(X)
    band_first = np.ascontiguousarray(X.T).reshape(5, 60, 50)
    curve = kernels.error_curve(np.moveaxis(band_first, 0, -1), model.params_)
    assert curve.dtype == np.float32 and curve.shape == (60, 50, 5)
    np.testing.assert_allclose(curve.reshape(-1, 5), kernels.error_curve(X.astype(np.float64), model.params_), rtol=2e-3, atol=1e-5)


def test_pca_baseline_is_the_pca_of_the_fitting_sample():
    X = curved_sample(3000, d=5)
    model = PPA(random_state=0).fit(X)
    pca = model.pca_
    assert pca.degrees_.tolist() == [1] * 4
    vt = np.linalg.svd(X - X.mean(0), full_matrices=False)[2]
    np.testing.assert_allclose(np.abs(pca.components_), np.abs(vt), atol=1e-8)
    np.testing.assert_allclose(pca.explained_variance_, np.var(X @ vt.T, axis=0), rtol=1e-10)
    np.testing.assert_allclose(pca.components_[0], model.components_[0], atol=1e-10)  # the same first axis


def test_no_curvature_keeps_steps_straight():
    """Gaussian clouds have no curve: the significance margin keeps nearly every step a PCA step."""
    curved_steps = 0
    for seed in range(10):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(3000, 6)) @ rng.normal(size=(6, 6))
        curved_steps += int(np.sum(PPA(random_state=seed).fit(X).degrees_ > 1))
    assert curved_steps <= 5  # of 50 steps (measured: 2 of 100 over 20 seeds)


def test_clear_curvature_is_kept():
    model = PPA(random_state=0).fit(curved_sample(3000, d=4))
    assert model.degrees_[0] > 1


def test_groups_are_held_out_together():
    X = curved_sample(3000, d=4)
    groups = np.repeat(np.arange(30), 100)
    a = PPA(random_state=0).fit(X, groups=groups)
    b = PPA(random_state=0).fit(X, groups=groups)
    np.testing.assert_array_equal(a.params_.forward, b.params_.forward)
    folds, order = degrees.Folds.make(groups, 3000, 5, np.random.default_rng(0))
    assert folds.n_folds == 5 and len(folds.fold) == 30
    for lo, hi in zip(folds.bounds[:-1], folds.bounds[1:]):
        assert len(np.unique(groups[order][lo:hi])) == 1  # a group never straddles two folds
    with pytest.raises(ValueError, match="one label per sample"):
        PPA().fit(X, groups=groups[:10])
    with pytest.raises(ValueError, match="at least 2 groups"):
        PPA().fit(X, groups=np.zeros(3000))
    PPA(degree=3).fit(X, groups=np.zeros(3000))  # a fixed degree needs no validation


def test_leading_vector_strategy_gets_the_residual_and_is_checked():
    X = curved_sample(1000, d=4)
    seen = []

    def leading(cov, resid):
        seen.append((cov.shape, resid.shape))
        return pca_leading_vector(cov)

    PPA(leading=leading, degree=2).fit(X)
    assert seen == [((4, 4), (1000, 4)), ((3, 3), (1000, 3)), ((2, 2), (1000, 2))]
    with pytest.raises(ValueError, match="finite unit vector"):
        PPA(leading=lambda cov, resid: 2 * pca_leading_vector(cov)).fit(X)


def test_same_sample_and_model_under_any_chunking_and_scheduler(landsat):
    reference = landsat.ppa.fit(n_samples=3000, random_state=5)
    values, groups = landsat.ppa.sample(n_samples=3000, random_state=5, return_groups=True)
    for chunks, scheduler in (({"x": 64, "y": 64}, "threads"), ({"x": 300, "y": 50}, "threads"), ({"x": 100, "y": 320}, "processes")):
        cube = landsat.chunk(chunks)
        with dask.config.set(scheduler=scheduler):
            v, g = cube.ppa.sample(n_samples=3000, random_state=5, return_groups=True)
            model = cube.ppa.fit(n_samples=3000, random_state=5)
        np.testing.assert_array_equal(v, values)
        np.testing.assert_array_equal(g, groups)
        for name, array in reference.params_.arrays().items():
            np.testing.assert_array_equal(getattr(model.params_, name), array, err_msg=name)


def test_sampler_blocks_are_spatial(landsat):
    _, groups = landsat.ppa.sample(n_samples=20_000, random_state=0, return_groups=True)
    assert len(np.unique(groups)) == 100  # 10 x 10 blocks of 32 x 32 pixels
    cube = xr.concat([landsat, landsat + 1], dim="time")  # the same place at two times: one block
    _, groups = cube.ppa.sample(n_samples=20_000, random_state=0, return_groups=True)
    assert len(np.unique(groups)) == 100


def test_unseen_half_of_a_scene_is_close_to_pca_or_better(landsat):
    """Fit on the left half, apply to the right half (the issue's spatial split)."""
    left, right = landsat.isel(x=slice(0, 160)), landsat.isel(x=slice(160, None))
    model = left.ppa.fit(n_samples=20_000, random_state=0)
    X = right.transpose("y", "x", "band").values.reshape(-1, 10).astype(np.float64)
    curve = model.evaluate(X).relative
    assert curve.mean() < 97 and curve.max() < 103  # before block validation: up to 189 % at k = 5


def test_report_compares_with_the_models_own_pca(landsat):
    model = landsat.ppa.fit(n_samples=5000, random_state=0)
    report = information_report(landsat, model, n_samples=5000, held_out=False)  # on the fitting sample itself
    sample = landsat.ppa.sample(n_samples=5000, random_state=0).astype(np.float64)
    assert report.attrs["estimated_on"].startswith("in sample")
    np.testing.assert_allclose(report["mse_pca"].values, model.pca_.reconstruction_mse(sample), rtol=1e-10)
    np.testing.assert_allclose(report["mse_ppa"].values, model.reconstruction_mse(sample), rtol=1e-10)
    assert report["mse_ppa"].attrs["units"] == "squared input units" and "summed over bands" in report["mse_ppa"].attrs["long_name"]


def test_degrees_are_selected_on_a_subset_and_fitted_on_every_row():
    X = curved_sample(6000, d=5)
    full = fit_params(X, Spec(), rng=np.random.default_rng(0))
    part = fit_params(X, Spec(selection_samples=1500), groups=np.arange(6000) // 60, rng=np.random.default_rng(0))
    assert part.degrees[0] == full.degrees[0] > 1
    # the same degree along the same leading vector: the same least-squares polynomial, on every row
    for name in ("rotation", "center", "scale", "inverse_bias", "inverse"):
        np.testing.assert_allclose(getattr(part, name)[0], getattr(full, name)[0], rtol=1e-9, atol=1e-12, err_msg=name)
    model = PPA._from_params(part, Spec())
    assert np.all(model.reconstruction_mse(X) <= model.pca_.reconstruction_mse(X) * (1 + 1e-12))
    with pytest.raises(AssertionError):  # a polynomial fitted on the selection rows alone differs
        subset = degrees.Folds.select(None, 6000, 5, np.random.default_rng(0), 1500)[1][:1500]
        alone = fit_params(X[subset], Spec(degree=int(full.degrees[0])), rng=np.random.default_rng(0))
        np.testing.assert_allclose(alone.inverse[0], full.inverse[0], rtol=1e-9, atol=1e-12)


def test_selection_samples_is_a_parameter_saved_with_the_model(tmp_path):
    X = curved_sample(6000, d=5)
    part = PPA(random_state=0, selection_samples=1500, configuration="fixed").fit(X)
    every = PPA(random_state=0, selection_samples=None, configuration="fixed").fit(X)
    assert (part.degrees_ > 1).sum() < (every.degrees_ > 1).sum()  # fewer rows resolve fewer curves here
    assert load_model(part.save(tmp_path / "m.nc")).selection_samples == 1500
    old = PPA.from_dataset(as_older_file(every.to_dataset(), 3))  # written before the parameter: selected on every row
    assert old.selection_samples is None
    np.testing.assert_array_equal(old.transform(X[:50]), every.transform(X[:50]))
    with pytest.raises(ValueError, match="selection_samples=5 cannot select among degrees up to 5"):
        PPA(selection_samples=5).fit(X)


def test_max_curved_caps_the_polynomial_steps():
    from ppa_xr.datasets import load_table

    X = load_table("Sat").normalised()[:3000]
    free = PPA(random_state=0).fit(X)
    capped = PPA(random_state=0, max_curved=2).fit(X)
    assert (free.degrees_ > 1).sum() > 2 and (capped.degrees_ > 1).sum() == 2
    first = np.flatnonzero(free.degrees_ > 1)[1] + 1  # the steps up to the second curved one are the same
    np.testing.assert_allclose(capped.transform(X)[:, :first], free.transform(X)[:, :first], atol=1e-10)
    assert np.all(capped.reconstruction_mse(X) <= capped.pca_.reconstruction_mse(X) * (1 + 1e-12))  # still never worse
    assert (PPA(random_state=0, max_curved=0).fit(X).degrees_ == 1).all()
