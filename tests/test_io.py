"""Models as data: netCDF and zarr round trips are bit-identical; damaged files fail clearly."""

import numpy as np
import pytest
import xarray as xr

import ppa_xr
from ppa_xr.datasets import open_landsat8_sample
from ppa_xr import PPA
from ppa_xr.model import file as model_io


@pytest.fixture(scope="module")
def fitted():
    cube = open_landsat8_sample()
    return cube, cube.ppa.fit(n_samples=10_000, random_state=0, degree=(1, 3, 5), tails="linear")


@pytest.mark.parametrize("name", ["model.nc", "model.zarr"])
def test_round_trip_is_bit_identical(tmp_path, fitted, name):
    cube, model = fitted
    path = model.save(tmp_path / name)
    loaded = ppa_xr.load_model(path)
    assert loaded.tails == "linear" and loaded.degree == (1, 3, 5)
    np.testing.assert_array_equal(loaded.degrees_, model.degrees_)
    assert list(loaded.feature_labels_) == list(model.feature_labels_)
    np.testing.assert_array_equal(loaded.feature_coords_["wavelength"], model.feature_coords_["wavelength"])
    assert loaded.feature_dim_ == "band"
    for dtype in (np.float32, np.float64):
        x = cube.astype(dtype)
        np.testing.assert_array_equal(x.ppa.transform(loaded).values, x.ppa.transform(model).values)


def test_saved_attributes_say_what_and_who(fitted):
    ds = fitted[1].to_dataset()
    assert ds.attrs["ppa_xr_format"] == "ppa_xr.model" and ds.attrs["ppa_xr_version"] == ppa_xr.__version__
    assert "created" in ds.attrs


def test_foreign_file(tmp_path):
    path = tmp_path / "foreign.nc"
    xr.Dataset({"a": ("x", np.arange(3.0))}).to_netcdf(path, engine="h5netcdf")
    with pytest.raises(ValueError, match="not a ppa_xr model"):
        ppa_xr.load_model(path)


def test_corrupt_and_truncated_files(tmp_path, fitted):
    good = fitted[1].save(tmp_path / "good.nc")
    raw = good.read_bytes()
    (tmp_path / "truncated.nc").write_bytes(raw[: len(raw) // 2])
    (tmp_path / "garbage.nc").write_bytes(np.random.default_rng(0).bytes(4000))
    for name in ("truncated.nc", "garbage.nc"):
        with pytest.raises(ValueError, match="not a readable ppa_xr model|corrupt"):
            ppa_xr.load_model(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        ppa_xr.load_model(tmp_path / "absent.nc")


def test_inconsistent_contents_are_refused(fitted):
    ds = fitted[1].to_dataset()
    with pytest.raises(ValueError, match=r"variables \['inverse'\] are missing"):
        PPA.from_dataset(ds.drop_vars("inverse"))
    tampered = ds.copy(deep=True)
    tampered["mean"][0] = np.nextafter(tampered["mean"].values[0], np.inf)  # one bit
    with pytest.raises(ValueError, match="checksum of 'mean' does not match"):
        PPA.from_dataset(tampered)
    for change, message in ((lambda r: r.__setitem__((0, 0), np.nan), "NaN or inf"), (lambda r: r.__setitem__(0, 2 * r[0]), "not orthogonal")):
        broken = ds.copy(deep=True)
        values = broken["rotation"].values
        change(values)
        broken["rotation"] = broken["rotation"].copy(data=values).assign_attrs(sha256=model_io._checksum("rotation", values))
        with pytest.raises(ValueError, match=message):  # checks beyond the checksum, for a consistent but wrong writer
            PPA.from_dataset(broken)
    newer = ds.assign_attrs(ppa_xr_format_version=99)
    with pytest.raises(ValueError, match="version 99"):
        PPA.from_dataset(newer)


@pytest.mark.parametrize("name", ["other.nc", "other.zarr"])
def test_a_file_or_dataset_that_is_not_a_model_is_refused_by_the_one_format_check(tmp_path, fitted, name):
    """A store of other data, or a model's Dataset stripped of its format attribute, is refused before anything is
    decoded, with one message on the file path and the Dataset path."""
    path = tmp_path / name
    other = xr.Dataset({"sst": ("x", np.arange(3.0))})
    other.to_zarr(path, consolidated=False) if name.endswith(".zarr") else other.to_netcdf(path, engine="h5netcdf")
    with pytest.raises(ValueError, match=rf"{name} is not a ppa_xr model: it has no ppa_xr_format='ppa_xr.model' attribute"):
        ppa_xr.load_model(path)
    stripped = fitted[1].to_dataset().drop_attrs(deep=False)
    with pytest.raises(ValueError, match=r"is not a ppa_xr model: it has no ppa_xr_format='ppa_xr.model' attribute"):
        PPA.from_dataset(stripped)

def test_unfitted_model_cannot_be_saved(tmp_path):
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        ppa_xr.PPA().save(tmp_path / "m.nc")


def write_band_files(cube, directory):
    """One single-band GeoTIFF per band of a real cube, as Landsat scenes are shipped."""
    paths = []
    for band in cube.band.values:
        path = directory / f"L8_{band}.tif"
        cube.sel(band=[band]).drop_vars("wavelength").rio.to_raster(path)
        paths.append(path)
    return paths


def test_band_stack_equals_the_multiband_cube(tmp_path):
    cube = open_landsat8_sample()
    paths = write_band_files(cube, tmp_path)
    stack = ppa_xr.open_band_stack(paths, bands=list(cube.band.values), chunks={"x": 160, "y": 160})
    assert stack.dims == ("band", "y", "x") and stack.chunks is not None
    np.testing.assert_array_equal(stack.values, cube.values)
    assert stack.rio.crs == cube.rio.crs and stack.rio.nodata == 0
    assert list(ppa_xr.open_band_stack(paths[:2]).band.values) == ["B1", "B2"]  # the _B<n> rule


def test_band_stack_refuses_mismatched_files(tmp_path):
    cube = open_landsat8_sample()
    a, b = write_band_files(cube.isel(band=[0, 1]), tmp_path)
    cube.isel(band=[2], x=slice(0, 100)).drop_vars("wavelength").rio.to_raster(tmp_path / "small.tif")
    cube.isel(band=[0, 1]).drop_vars("wavelength").rio.to_raster(tmp_path / "two.tif")
    with pytest.raises(ValueError, match="small.tif is not on the grid"):
        ppa_xr.open_band_stack([a, tmp_path / "small.tif"])
    with pytest.raises(ValueError, match="two.tif has 2 bands"):
        ppa_xr.open_band_stack([a, tmp_path / "two.tif"])
    with pytest.raises(ValueError, match="one label per file"):
        ppa_xr.open_band_stack([a, b], bands=["x"])
