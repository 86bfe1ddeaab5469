"""Every warning ppa_xr gives points at the user's line, whatever the depth of the call that warns, and the
library's own warnings in its own tests are the ones a test asserts."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr import PPA, ShiftWarning
from ppa_xr.datasets import open_abu_beach, open_landsat8_sample


def _caught(call) -> list[warnings.WarningMessage]:
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        call()
    return list(record)


def _points_here(record, category, match: str) -> None:
    mine = [w for w in record if issubclass(w.category, category) and match in str(w.message)]
    assert mine, [str(w.message) for w in record]
    assert all(w.filename == __file__ for w in mine), [(w.filename, w.lineno) for w in mine]


@pytest.fixture(scope="module")
def landsat():
    return open_landsat8_sample(chunks={"x": 160, "y": 160})


def test_fit_warnings_point_at_the_caller(landsat):
    X = np.random.default_rng(0).normal(size=(500, 3)) * [1e5, 1.0, 1.0]
    _points_here(_caught(lambda: PPA(degree=1).fit(X)), UserWarning, "standard deviations differ")
    X[3, 1] = np.nan
    _points_here(_caught(lambda: PPA(degree=1).fit(X)), UserWarning, "rows with NaN or inf")
    _points_here(_caught(lambda: landsat.ppa.fit(n_samples=500_000, degree=1, random_state=0)), UserWarning, "asked for n_samples")


def test_cube_warnings_point_at_the_caller(landsat):
    model = landsat.isel(band=slice(0, 7)).ppa.fit(n_samples=5000, degree=(1, 2), random_state=0)
    _points_here(_caught(lambda: landsat.ppa.transform(model)), UserWarning, "left out")
    high = PPA(degree=18, random_state=0).fit(np.random.default_rng(0).normal(size=(2000, 3)))
    cube = xr.DataArray(np.zeros((3, 4, 4), np.float32), dims=("band", "y", "x"))
    _points_here(_caught(lambda: cube.ppa.transform(high)), UserWarning, "float32")
    small = xr.DataArray(np.random.default_rng(1).normal(size=(4, 30, 30)), dims=("band", "y", "x"))
    every = small.ppa.fit(degree=1, random_state=0)  # all 900 pixels: nothing held out
    _points_here(_caught(lambda: small.ppa.information_report(every)), UserWarning, "uses the fitting sample instead")


def test_the_shift_warning_points_at_the_caller():
    scene = open_abu_beach()["reflectance"]
    left, right = scene.isel(x=slice(0, 50)), scene.isel(x=slice(50, 100))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = right.ppa.fit(n_samples=5000, random_state=0)
    _points_here(_caught(lambda: left.ppa.transform(model, check=True)), ShiftWarning, "worse than its own PCA")
    _points_here(_caught(lambda: left.ppa.information_report(model, n_components=10)), ShiftWarning, "worse than its own PCA")
    assert ppa_xr.ShiftWarning is ShiftWarning


def test_parameters_that_are_gone_or_renamed_say_what_to_pass(landsat):
    with pytest.raises(TypeError, match=r"validation='transfer' is gone: .* degree=1 \(PCA\) or model.pca_"):
        PPA(validation="transfer")
    with pytest.raises(TypeError, match=r"noise is now noise_cov: noise_cov='shift'"):
        landsat.ppa.fit(noise="shift")
    with pytest.raises(TypeError, match=r"'bogus' is not a parameter of PPA \(the parameters are n_components, degree"):
        PPA(bogus=1)


@pytest.mark.parametrize("model_calendar, cube_calendar, conversion", [
    ("noleap", None, r"cube.convert_calendar\('noleap', dim='time', use_cftime=True\)"),
    ("noleap", "360_day", r"cube.convert_calendar\('noleap', dim='time', use_cftime=True, align_on='date'\)"),
    ("360_day", "noleap", r"cube.convert_calendar\('360_day', dim='time', use_cftime=True, align_on='date'\)"),
    (None, "noleap", r"cube.convert_calendar\('standard', dim='time', use_cftime=False\)"),
    ("standard", None, r"the same days held as another type, .*cube.convert_calendar\('standard', dim='time', use_cftime=True\)"),
    (None, "proleptic_gregorian", r"the same days from 1582-10-15 on, held as another type, .*cube.convert_calendar\('standard', "
                                  r"dim='time', use_cftime=False\)"),  # rioxarray's reading of a netCDF's dates
])
def test_dates_of_another_calendar_name_both_calendars_and_the_conversion(model_calendar, cube_calendar, conversion):
    """A model of months of one calendar against a cube of another: "lacks 24 of 24" under labels printed alike, or a raw
    TypeError from cftime (360_day against noleap), before; now both calendars and the conversion, which works."""
    pytest.importorskip("cftime")

    def months(calendar):
        return (xr.date_range("2000-01-01", periods=24, freq="MS", calendar=calendar, use_cftime=True).values if calendar
                else np.array([f"{2000 + m // 12}-{m % 12 + 1:02d}-01" for m in range(24)], dtype="datetime64[ns]"))

    values = np.random.default_rng(5).normal(size=(24, 8, 8))
    model = xr.DataArray(values, dims=("time", "y", "x"), coords={"time": months(model_calendar)}).ppa.fit(dim="time", degree=1)
    cube = xr.DataArray(values, dims=("time", "y", "x"), coords={"time": months(cube_calendar)})
    with pytest.raises(ValueError, match=rf"dates of the '{model_calendar or 'standard'}' calendar .* the cube's of the "
                                         rf"'{cube_calendar or 'standard'}' calendar .*{conversion}"):  # cftime or numpy
        cube.ppa.transform(model)
    arguments = dict(use_cftime=model_calendar is not None) | ({"align_on": "date"} if "360_day" in (model_calendar, cube_calendar) else {})
    converted = cube.convert_calendar(model_calendar or "standard", dim="time", **arguments)
    assert converted.ppa.transform(model).sizes["component"] == 24
