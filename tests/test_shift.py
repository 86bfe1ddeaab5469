"""Scenes that differ from the fitting sample: the shift check, pooled fits over cubes."""

import warnings

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA, ShiftWarning, load_model
from ppa_xr.cube import inputs, maps, sampling
from ppa_xr.datasets import open_abu_beach
from ppa_xr.core.errors import ALLOWANCE, compare_errors
from ppa_xr.core.keys import held_by


@pytest.fixture(scope="module")
def abu():
    cube = open_abu_beach().reflectance.load()
    return cube.isel(x=slice(0, 50)), cube.isel(x=slice(50, None))


@pytest.fixture(scope="module")
def right_model(abu):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # all 5,000 pixels of the half: fine here
        return abu[1].ppa.fit(n_samples=5000, random_state=0)


def _shift_warnings(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, ShiftWarning)]


def test_shift_warning_fires_on_a_shifted_scene_and_names_k_and_the_fix(abu, right_model):
    left = abu[0]
    report = left.ppa.evaluate(right_model)
    assert report.relative_error.dims == ("component",) and report.component.values.tolist() == list(range(1, 102))
    assert report.attrs["n_pixels"] == 5000 and report.relative_error.max() > 150  # fitted on the right half, it fails on the left
    np.testing.assert_allclose(report.relative_error, 100 * report.mse_ppa / report.mse_pca)
    assert (report.relative_error_low <= report.relative_error).all()
    worse = report.attrs["worse_at"]
    assert worse and all(report.relative_error_low.sel(component=k) > 100 * (1 + ALLOWANCE) for k in worse)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        scores = left.chunk({"x": 25, "y": 25}).ppa.transform(right_model, check=True)
    (message,) = _shift_warnings(record)
    assert "\n" not in message and f"k = {worse[0]}" in message and "fit_pooled" in message and "model.pca_" in message
    assert scores.chunks is not None  # still lazy
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        left.ppa.transform(right_model)  # unchecked by default: lazy, nothing read
        maps.transform(left, right_model, n_components=max(worse[0] - 1, 1), check=True)  # only k below the first bad one
    assert not _shift_warnings(record)


def test_shift_check_stays_quiet_on_random_splits(landsat):
    """Random halves of the Landsat sample: fit on one, transform and report on the other, for several seeds."""
    quiet = 0
    for seed in range(4):
        fitted = np.random.default_rng(seed).random(landsat.shape[1:]) < 0.5
        fit_half = landsat.where(fitted).astype(np.float32)
        other = landsat.where(~fitted).astype(np.float32)
        model = fit_half.ppa.fit(n_samples=20_000, random_state=seed)
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            other.chunk({"x": 80, "y": 80}).ppa.transform(model, check=True)
            other.ppa.information_report(model, n_components=3, n_samples=20_000)
        quiet += not _shift_warnings(record)
    assert quiet == 4


def test_the_check_has_its_level_under_the_null():
    """Two models equal in truth: the simultaneous bound flags at most about LEVEL of random draws."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20_000, 4)) * [3, 2, 1, 0.5]
    model = PPA(degree=1).fit(X)
    fired = sum(len(compare_errors(model.params_, rng.normal(size=(2000, 4)) * [3, 2, 1, 0.5], baseline=model.params_).worse_at()) > 0 for _ in range(50))
    assert fired == 0  # the ratio is exactly 1: the allowance alone keeps the check quiet


@pytest.mark.parametrize("version", [6, 7])
def test_files_that_recorded_transfer_validation_still_load(right_model, version):
    from .conftest import as_older_file

    old = as_older_file(right_model.to_dataset(), version, validation="transfer")
    loaded = PPA.from_dataset(old)
    np.testing.assert_array_equal(loaded.degrees_, right_model.degrees_)
    assert "validation" not in loaded.get_params()
    with pytest.raises(TypeError, match="validation"):  # the parameter itself is gone
        PPA(validation="transfer")


def relative_error(model, X) -> float:
    return float(compare_errors(model.params_, X).relative[0])


def test_pooled_fit_over_cubes_with_different_grids(tmp_path, landsat):
    a = landsat.isel(y=slice(0, 160))  # 160 x 320
    b = landsat.isel(y=slice(160, None), x=slice(0, 200)).sel(band=landsat.band.values[::-1])  # 160 x 200, bands reversed
    model = ppa_xr.fit_pooled([a, b], n_samples=8000, random_state=0)
    shares = model.sample_.cubes
    assert [s.shape for s in shares] == [(160, 320), (160, 200)] and model.sample_.size == 8000
    expected = 8000 * 320 / 520  # in proportion to the valid pixels (every pixel is valid here)
    assert abs(shares[0].size - expected) < 4 * np.sqrt(8000 * 320 / 520 * 200 / 520)
    for cube, share in zip((a, b), shares):
        index = np.arange(cube.sizes["y"] * cube.sizes["x"])
        assert held_by((share,), index).sum() == share.size  # the record names exactly the pixels drawn
        assert sampling.fitted_shares(inputs.model_features(cube, model, None)[0], "band", model.sample_) == (share,)
        # what a held-out draw from it leaves out, and no witnesses looked for among the drawn pixels (T-mode)
        assert sampling.Fitted.of(inputs.model_features(cube, model, None)[0], "band", model) == sampling.Fitted((share,), None)
        assert cube.ppa.evaluate(model).relative_error.max() <= 100 + 100 * ALLOWANCE  # the pooled model holds on each
    shifted = a + 1  # the same grid, other values: not the fitting cube
    assert sampling.fitted_shares(shifted, "band", model.sample_) == ()
    loaded = load_model(model.save(tmp_path / "pooled.nc"))
    assert loaded.sample_ == model.sample_
    np.testing.assert_array_equal(loaded.transform(np.ones((1, 10))), model.transform(np.ones((1, 10))))
    single = a.ppa.fit(n_samples=3000, random_state=0)
    again = ppa_xr.fit_pooled([a], n_samples=3000, random_state=0)
    np.testing.assert_array_equal(single.components_, again.components_)
    with pytest.raises(ValueError, match="lacks 2 of the model.s 10 features"):
        ppa_xr.fit_pooled([a, b.isel(band=slice(0, 8))], n_samples=1000)
    with pytest.raises(TypeError, match="list of cubes"):
        ppa_xr.fit_pooled(a)
    with pytest.raises(ValueError, match="no valid pixel"):
        ppa_xr.fit_pooled([a.where(a < 0), xr.full_like(b, np.nan, dtype=float)])
    with pytest.warns(UserWarning, match="cube 2 of 3 has no valid pixel .* check its nodata value"):  # pooled silently before
        ppa_xr.fit_pooled([a, xr.full_like(b, np.nan, dtype=float), b], n_samples=1000)


def test_cli_transform_and_report_warn_in_one_line(tmp_path, capsys, abu):
    from ppa_xr.cli import main

    left, right = (tmp_path / "left.nc", tmp_path / "right.nc")
    abu[0].to_dataset(name="reflectance").to_netcdf(left)
    abu[1].to_dataset(name="reflectance").to_netcdf(right)
    model = tmp_path / "m.nc"
    assert main(["fit", str(right), str(model), "--variable", "reflectance", "--n-samples", "5000", "--seed", "0"]) == 0
    capsys.readouterr()
    assert main(["transform", str(left), str(model), str(tmp_path / "c.nc"), "--variable", "reflectance", "--n-components", "20"]) == 0
    assert main(["report", str(left), str(model), str(tmp_path / "report"), "--variable", "reflectance", "--n-components", "20"]) == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if "ShiftWarning" in line]
    assert [line.split(":")[0] for line in lines] == ["ppa-xr transform", "ppa-xr report"]
    assert all("worse than its own PCA at k = " in line and "Refit on it" in line for line in lines)
    assert (tmp_path / "c.nc").exists()  # a warning, not an error: the output is written
