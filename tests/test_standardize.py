"""standardize=True: features in units of very different size (geopotential beside wind) fitted on
their standardized values, the scaling stored in the model and undone by the inverse; every derived
quantity (errors, Jacobian, geometry, information, files, the CLI) consistent with it."""

import warnings

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA
from ppa_xr.cli import main
from ppa_xr.geometry import derivatives
from ppa_xr.information import multi_information_reduction

from .conftest import as_older_file, curved_sample

UNITS = np.array([5500.0, 0.01, 3.0, 1e-4])  # geopotential-, wind-, temperature-, humidity-sized features


@pytest.fixture(scope="module")
def data():
    Z = curved_sample(4000, d=4)
    X = Z * UNITS + np.array([5500.0, 0.0, 250.0, 0.0])
    return X, Z


@pytest.fixture(scope="module")
def models(data):
    X, _ = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # standardizing: no scale warning
        model = PPA(standardize=True, random_state=0).fit(X)
    reference = PPA(random_state=0).fit(X / X.std(axis=0))  # the same fit, done by hand
    return model, reference


def test_the_map_is_ppa_of_the_standardized_features(data, models):
    X, _ = data
    model, reference = models
    std = X.std(axis=0)
    np.testing.assert_allclose(model.scale_, std, rtol=1e-12)
    np.testing.assert_array_equal(model.degrees_, reference.degrees_)
    np.testing.assert_allclose(model.transform(X), reference.transform(X / std), atol=1e-9)
    np.testing.assert_allclose(model.inverse_transform(model.transform(X)) / std, X / std, rtol=0, atol=1e-9)
    for k in (1, 2):
        np.testing.assert_allclose(model.reconstruct(X, k) / std, reference.reconstruct(X / std, k), atol=1e-9)
    # errors in standardized units: squared errors divided by each feature's variance
    curve = model.reconstruction_mse(X)
    np.testing.assert_allclose(curve, reference.reconstruction_mse(X / std), rtol=1e-9, atol=1e-12)
    explicit = np.mean(np.sum(((model.reconstruct(X, 2) - X) / std) ** 2, axis=1))
    assert curve[1] == pytest.approx(explicit, rel=1e-9)
    # the baseline is the PCA of the standardized sample (the correlation matrix's eigenvectors)
    corr_vectors = np.linalg.eigh(np.corrcoef(X.T))[1][:, ::-1].T
    np.testing.assert_allclose(np.abs(model.pca_.components_ @ corr_vectors.T), np.eye(4), atol=1e-8)
    assert model.pca_.standardize and np.all(model.pca_.reconstruction_mse(X)[:3] >= curve[:3] - 1e-12)


def test_without_standardizing_the_largest_unit_takes_the_first_component(data, models):
    X, _ = data
    with pytest.warns(UserWarning, match="standardize=True"):
        raw = PPA(random_state=0).fit(X)
    assert np.abs(raw.components_[0, 0]) > 0.999  # geopotential alone
    assert np.abs(models[0].components_[0, 0]) < 0.9  # standardized: the features mix


def test_jacobian_geometry_and_information_account_for_the_scaling(data, models):
    X, Z = data
    model, reference = models
    J = model.jacobian(X[:5])
    h = 1e-6 * model.scale_
    for j in range(4):
        step = np.zeros(4)
        step[j] = h[j]
        numeric = (model.transform(X[:5] + step) - model.transform(X[:5] - step)) / (2 * h[j])
        np.testing.assert_allclose(J[:, :, j] * model.scale_[j], numeric * model.scale_[j], atol=1e-6)
    np.testing.assert_allclose(np.abs(np.linalg.det(J)), np.prod(1 / model.scale_), rtol=1e-8)
    # curves through the data in input units: derivatives of the inverse map
    R = model.transform(X[:10])
    D = derivatives(model, X[:10], component=1, order=1)[:, 0]
    e = 1e-4
    numeric = (model.inverse_transform(R + [e, 0, 0, 0]) - model.inverse_transform(R - [e, 0, 0, 0])) / (2 * e)
    np.testing.assert_allclose(D / model.scale_, numeric / model.scale_, atol=1e-6)
    # multi-information is invariant under per-feature scaling: the Jacobian term restores it
    X_test = curved_sample(20000, d=4, seed=5) * UNITS
    ours = multi_information_reduction(X_test, model.transform(X_test), log2_det_jacobian=model.params_.log2_det_jacobian())
    theirs = multi_information_reduction(X_test / model.scale_, reference.transform(X_test / model.scale_))
    assert ours.total == pytest.approx(theirs.total, abs=1e-6)
    assert ours.total > 0.1


def test_report_on_a_climate_like_cube(data, models):
    X, _ = data
    model, reference = models
    cube = xr.DataArray(X[:3600].T.reshape(4, 60, 60), dims=("band", "y", "x"), coords={"band": ["z", "u", "t", "q"]})
    fitted = cube.ppa.fit(n_samples=2000, random_state=0, standardize=True)
    report = cube.ppa.information_report(fitted, n_components=2, n_samples=1000).compute()
    assert report["error_ppa"].attrs["units"] == "squared standardized units"
    assert cube.ppa.reconstruction_error(fitted, 2).attrs["units"] == "squared standardized units"  # none before
    assert cube.ppa.evaluate(fitted).mse_ppa.attrs["units"] == "squared standardized units"
    assert float(report["total_mi_reduction_ppa"]) > float(report["total_mi_reduction_pca"]) - 0.05
    in_sample = cube.ppa.information_report(fitted, n_components=2, held_out=False, estimator="histogram").compute()
    assert in_sample.attrs["estimated_on"].startswith("in sample")
    back = cube.ppa.transform(fitted).ppa.inverse_transform(fitted)
    np.testing.assert_allclose(back.values, cube.values, rtol=1e-9, atol=1e-12)


def test_saved_and_loaded_with_its_scaling_and_old_files_still_read(tmp_path, data, models):
    X, _ = data
    model = models[0]
    for name in ("m.nc", "m.zarr"):
        loaded = ppa_xr.load_model(model.save(tmp_path / name))
        assert loaded.standardize
        np.testing.assert_array_equal(loaded.scale_, model.scale_)
        np.testing.assert_allclose(loaded.transform(X), model.transform(X), rtol=0, atol=0)
    # a version-2 file (written before standardization existed) is a model with scale 1
    plain = PPA(random_state=0).fit(X / X.std(axis=0))
    old = PPA.from_dataset(as_older_file(plain.to_dataset(), 2))
    assert not old.standardize and np.all(old.scale_ == 1)
    np.testing.assert_allclose(old.transform(X[:10] / X.std(axis=0)), plain.transform(X[:10] / X.std(axis=0)), rtol=0, atol=0)
    with pytest.raises(ValueError, match="variables \\['whitening'\\] are missing"):
        PPA.from_dataset(model.to_dataset().drop_vars("whitening"))
    with pytest.raises(ValueError, match="variables \\['feature_scale'\\] are missing"):  # a format 3-6 file needs its scales
        PPA.from_dataset(as_older_file(model.to_dataset(), 5).drop_vars("feature_scale"))
    broken = model.to_dataset()
    values = -broken["whitening"].values
    from ppa_xr.model import file as model_io

    broken["whitening"] = broken["whitening"].copy(data=values).assign_attrs(sha256=model_io._checksum("whitening", values))
    with pytest.raises(ValueError, match=r"does not match its parameters \(standardization\)"):
        PPA.from_dataset(broken)
    old = PPA.from_dataset(as_older_file(model.to_dataset(), 5))  # format 5 stored D itself
    np.testing.assert_allclose(old.scale_, model.scale_, rtol=1e-15)
    np.testing.assert_allclose(old.transform(X[:10]), model.transform(X[:10]), rtol=1e-12)


def test_cli_standardize(tmp_path, data, capsys):
    X, _ = data
    cube = xr.DataArray(X[:3600].T.reshape(4, 60, 60), dims=("band", "y", "x"), coords={"band": ["z", "u", "t", "q"]}, name="fields")
    cube.to_netcdf(tmp_path / "fields.nc")
    assert main(["fit", str(tmp_path / "fields.nc"), str(tmp_path / "m.nc"), "--variable", "fields", "--standardize", "--n-samples", "2000"]) == 0
    model = ppa_xr.load_model(tmp_path / "m.nc")
    assert model.standardize and model.scale_[0] > 1e5 * model.scale_[3]
